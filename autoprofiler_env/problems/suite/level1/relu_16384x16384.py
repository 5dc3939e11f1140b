"""Elementwise ReLU, max(x, 0), on a 16384 x 16384 tensor."""
import torch
import torch.nn as nn

rows = 16384
cols = 16384

SMOKE_SIZES = {"rows": 32, "cols": 64}


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
