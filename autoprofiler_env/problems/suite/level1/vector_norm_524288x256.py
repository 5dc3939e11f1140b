"""Euclidean (L2) norm of each row of a 524288 x 256 tensor, giving 524288 values."""
import torch
import torch.nn as nn

rows = 524288
cols = 256

SMOKE_SIZES = {"rows": 64, "cols": 256}


class Model(nn.Module):
    def forward(self, x):
        return torch.linalg.vector_norm(x, ord=2, dim=-1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
