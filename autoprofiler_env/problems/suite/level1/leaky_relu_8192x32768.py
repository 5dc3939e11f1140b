"""Elementwise leaky ReLU with negative slope 0.1 on an 8192 x 32768 tensor."""
import torch
import torch.nn as nn
import torch.nn.functional as F

rows = 8192
cols = 32768

SMOKE_SIZES = {"rows": 32, "cols": 64}


class Model(nn.Module):
    def forward(self, x):
        return F.leaky_relu(x, negative_slope=0.1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
