"""Running maximum (cummax values) along the rows of a 4096 x 16384 tensor."""
import torch
import torch.nn as nn

rows = 4096
cols = 16384

SMOKE_SIZES = {"rows": 16, "cols": 128}


class Model(nn.Module):
    def forward(self, x):
        return torch.cummax(x, dim=1).values


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
