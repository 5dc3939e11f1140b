"""Product with a transposed left operand, C = A.T @ B: A is stored 2048 x 4096, B is 2048 x 4096."""
import torch
import torch.nn as nn

m = 4096
k = 2048
n = 4096

SMOKE_SIZES = {"m": 32, "k": 16, "n": 24}


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a.T, b)


def get_inputs():
    return [torch.randn(k, m), torch.randn(k, n)]


def get_init_inputs():
    return []
