"""Minimum over the first dimension of a 16384 x 8192 tensor (values only), giving 8192."""
import torch
import torch.nn as nn

rows = 16384
cols = 8192

SMOKE_SIZES = {"rows": 128, "cols": 32}


class Model(nn.Module):
    def forward(self, x):
        return torch.amin(x, dim=0)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
