"""Attention scores S = Q @ K^T for 4D tensors (batch 8, 16 heads, 1024 tokens, head dim 64)."""
import torch
import torch.nn as nn

batch_size = 8
num_heads = 16
seq_len = 1024
head_dim = 64

SMOKE_SIZES = {"batch_size": 2, "num_heads": 2, "seq_len": 16, "head_dim": 8}


class Model(nn.Module):
    def forward(self, q, k):
        return torch.matmul(q, k.transpose(-2, -1))


def get_inputs():
    shape = (batch_size, num_heads, seq_len, head_dim)
    return [torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
