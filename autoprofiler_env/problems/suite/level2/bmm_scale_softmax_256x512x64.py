"""Batched query-key matmul, scaling, then softmax over the keys (attention weights)."""
import torch
import torch.nn as nn

batch_heads = 256
seq_len = 512
head_dim = 64
scale = 0.25

SMOKE_SIZES = {"batch_heads": 2, "seq_len": 8, "head_dim": 4}


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, q, k):
        scores = torch.bmm(q, k.transpose(1, 2)) * self.scale
        return torch.softmax(scores, dim=-1)


def get_inputs():
    return [torch.randn(batch_heads, seq_len, head_dim), torch.randn(batch_heads, seq_len, head_dim)]


def get_init_inputs():
    return [scale]
