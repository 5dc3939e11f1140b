"""Causal multi-head self-attention: fused QKV Linear, F.scaled_dot_product_attention, output Linear."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
seq_len = 1024
embed_dim = 1024
num_heads = 16
input_std = 3.0  # large enough that the default-init attention is far from uniform

SMOKE_SIZES = {"batch_size": 2, "seq_len": 8, "embed_dim": 16, "num_heads": 2}


class Model(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.num_heads, d // self.num_heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out_proj(y.transpose(1, 2).reshape(b, t, d))


def get_inputs():
    return [torch.randn(batch_size, seq_len, embed_dim) * input_std]


def get_init_inputs():
    return [embed_dim, num_heads]
