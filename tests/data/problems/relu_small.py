"""ReLU of a small matrix: the harness tests' problem (runs in milliseconds on a CPU)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


rows = 64
cols = 128


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []


SMOKE_SIZES = {"rows": 8, "cols": 16}
