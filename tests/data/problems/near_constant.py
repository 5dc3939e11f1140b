"""Values within 1e-3 of 1: the constant 1 passes at KernelBench v0.1's 1e-2, not at its
current fp32 1e-4 (ill-posed under the one regime, well-posed under the other)."""
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return 1 + 1e-3 * torch.tanh(x)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
