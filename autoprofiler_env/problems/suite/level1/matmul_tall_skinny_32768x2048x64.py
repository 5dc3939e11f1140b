"""Tall-skinny product C = A @ B: A is 32768 x 2048, B is 2048 x 64, C is 32768 x 64."""
import torch
import torch.nn as nn

m = 32768
k = 2048
n = 64

SMOKE_SIZES = {"m": 128, "k": 32, "n": 8}


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(m, k), torch.randn(k, n)]


def get_init_inputs():
    return []
