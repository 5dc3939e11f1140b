"""Cumulative product along the rows of a 8192 x 8192 tensor with factors in [0.99, 1.01)."""
import torch
import torch.nn as nn

rows = 8192
cols = 8192

SMOKE_SIZES = {"rows": 16, "cols": 128}


class Model(nn.Module):
    def forward(self, x):
        return torch.cumprod(x, dim=1)


def get_inputs():
    # Factors close to 1 keep the products finite and spread (about 0.1 to 10 by the row end).
    return [torch.rand(rows, cols) * 0.02 + 0.99]


def get_init_inputs():
    return []
