"""Matrix-vector product y = A @ x with A of 16384 x 16384 and x of length 16384."""
import torch
import torch.nn as nn

m = 16384
k = 16384

SMOKE_SIZES = {"m": 64, "k": 64}


class Model(nn.Module):
    def forward(self, a, x):
        return torch.mv(a, x)


def get_inputs():
    return [torch.randn(m, k), torch.randn(k)]


def get_init_inputs():
    return []
