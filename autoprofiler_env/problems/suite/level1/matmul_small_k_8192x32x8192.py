"""Small-K product C = A @ B: A is 8192 x 32, B is 32 x 8192; the 8192 x 8192 output dominates."""
import torch
import torch.nn as nn

m = 8192
k = 32
n = 8192

SMOKE_SIZES = {"m": 48, "k": 8, "n": 48}


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(m, k), torch.randn(k, n)]


def get_init_inputs():
    return []
