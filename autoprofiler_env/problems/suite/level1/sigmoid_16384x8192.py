"""Elementwise logistic sigmoid, 1 / (1 + exp(-x)), on a 16384 x 8192 tensor."""
import torch
import torch.nn as nn

rows = 16384
cols = 8192

SMOKE_SIZES = {"rows": 64, "cols": 32}


class Model(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
