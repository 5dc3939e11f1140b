"""Multi-head self-attention written out with Linear projections, matmuls and an explicit softmax."""
import math
import torch
import torch.nn as nn

batch_size = 16
seq_len = 512
embed_dim = 768
num_heads = 12
input_std = 3.0  # large enough that the default-init attention is far from uniform

SMOKE_SIZES = {"batch_size": 2, "seq_len": 8, "embed_dim": 16, "num_heads": 2}


class Model(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x):
        b, t, d = x.shape
        h = self.num_heads

        def heads(y):
            return y.view(b, t, h, d // h).transpose(1, 2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d // h)
        attn = torch.softmax(scores, dim=-1)
        y = torch.matmul(attn, v).transpose(1, 2).reshape(b, t, d)
        return self.out_proj(y)


def get_inputs():
    return [torch.randn(batch_size, seq_len, embed_dim) * input_std]


def get_init_inputs():
    return [embed_dim, num_heads]
