"""Batched product of many small matrices: C[i] = A[i] @ B[i], 4096 pairs of 64 x 128 and 128 x 64."""
import torch
import torch.nn as nn

batch_size = 4096
m = 64
k = 128
n = 64

SMOKE_SIZES = {"batch_size": 16, "m": 8, "k": 16, "n": 8}


class Model(nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(batch_size, m, k), torch.randn(batch_size, k, n)]


def get_init_inputs():
    return []
