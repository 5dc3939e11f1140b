"""Inclusive prefix sum (cumsum) along the rows of an 8192 x 8192 tensor."""
import torch
import torch.nn as nn

rows = 8192
cols = 8192

SMOKE_SIZES = {"rows": 16, "cols": 128}


class Model(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
