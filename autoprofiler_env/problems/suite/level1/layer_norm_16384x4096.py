"""Layer normalization (with affine weight and bias) over the last dimension of an 16384 x 4096 tensor."""
import torch
import torch.nn as nn

rows = 16384
hidden = 4096

SMOKE_SIZES = {"rows": 16, "hidden": 64}


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(rows, hidden)]


def get_init_inputs():
    return [hidden]
