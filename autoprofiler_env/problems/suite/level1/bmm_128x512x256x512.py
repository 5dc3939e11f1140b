"""Batched matrix product C[i] = A[i] @ B[i] over 128 pairs of 512 x 256 and 256 x 512 matrices."""
import torch
import torch.nn as nn

batch_size = 128
m = 512
k = 256
n = 512

SMOKE_SIZES = {"batch_size": 4, "m": 16, "k": 8, "n": 12}


class Model(nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(batch_size, m, k), torch.randn(batch_size, k, n)]


def get_init_inputs():
    return []
