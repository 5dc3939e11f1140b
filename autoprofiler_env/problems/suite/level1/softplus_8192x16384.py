"""Elementwise softplus, log(1 + exp(x)), on an 8192 x 16384 tensor."""
import torch
import torch.nn as nn
import torch.nn.functional as F

rows = 8192
cols = 16384

SMOKE_SIZES = {"rows": 32, "cols": 64}


class Model(nn.Module):
    def forward(self, x):
        return F.softplus(x)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
