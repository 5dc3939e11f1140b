"""The mean squared error of two standard-normal vectors: a scalar near 2.0 whose spread
across input sets (about 0.006) is inside atol + rtol * 2 = 0.03 at 1e-2, so a constant 2.0
passes allclose on every set (the constant-scalar cheat)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.mean((a - b) ** 2)


def get_inputs():
    return [torch.randn(262144), torch.randn(262144)]


def get_init_inputs():
    return []
