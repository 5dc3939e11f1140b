"""Matrix product C = A @ B with irregular sizes: A is 4099 x 2047, B is 2047 x 1023."""
import torch
import torch.nn as nn

m = 4099
k = 2047
n = 1023

SMOKE_SIZES = {"m": 37, "k": 19, "n": 23}


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(m, k), torch.randn(k, n)]


def get_init_inputs():
    return []
