"""Plain matmul with a weight matrix, division by a constant, then GELU."""
import torch
import torch.nn as nn
import torch.nn.functional as F

m = 2048
k = 4096
n = 4096
divisor = 0.5

SMOKE_SIZES = {"m": 8, "k": 32, "n": 16}


class Model(nn.Module):
    def __init__(self, k, n, divisor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(k, n) / k ** 0.5)
        self.divisor = divisor

    def forward(self, x):
        return F.gelu(torch.matmul(x, self.weight) / self.divisor)


def get_inputs():
    return [torch.randn(m, k)]


def get_init_inputs():
    return [k, n, divisor]
