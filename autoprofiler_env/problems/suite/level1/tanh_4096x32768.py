"""Elementwise hyperbolic tangent on a 4096 x 32768 tensor."""
import torch
import torch.nn as nn

rows = 4096
cols = 32768

SMOKE_SIZES = {"rows": 16, "cols": 128}


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
