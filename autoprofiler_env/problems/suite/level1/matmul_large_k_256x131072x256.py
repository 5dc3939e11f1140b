"""Large-K product C = A @ B: A is 256 x 131072, B is 131072 x 256, C is only 256 x 256."""
import torch
import torch.nn as nn

m = 256
k = 131072
n = 256

SMOKE_SIZES = {"m": 8, "k": 512, "n": 8}


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(m, k), torch.randn(k, n)]


def get_init_inputs():
    return []
