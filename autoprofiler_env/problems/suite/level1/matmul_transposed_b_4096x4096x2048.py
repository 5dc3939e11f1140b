"""Product with a transposed right operand, C = A @ B.T: A is 4096 x 4096, B is stored 2048 x 4096."""
import torch
import torch.nn as nn

m = 4096
k = 4096
n = 2048

SMOKE_SIZES = {"m": 24, "k": 16, "n": 32}


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b.T)


def get_inputs():
    return [torch.randn(m, k), torch.randn(n, k)]


def get_init_inputs():
    return []
