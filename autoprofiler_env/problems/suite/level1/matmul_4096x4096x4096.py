"""Square matrix product C = A @ B with A, B and C all 4096 x 4096."""
import torch
import torch.nn as nn

m = 4096
k = 4096
n = 4096

SMOKE_SIZES = {"m": 32, "k": 32, "n": 32}


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(m, k), torch.randn(k, n)]


def get_init_inputs():
    return []
