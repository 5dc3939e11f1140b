"""Pre-norm transformer encoder layer: x + MHA(LN(x)), then x + MLP(LN(x)) with a GELU MLP."""
import torch
import torch.nn as nn

batch_size = 16
seq_len = 256
d_model = 512
num_heads = 8
mlp_ratio = 4

SMOKE_SIZES = {"batch_size": 2, "seq_len": 8, "d_model": 16, "num_heads": 2}


class Model(nn.Module):
    def __init__(self, d_model, num_heads, mlp_ratio):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, num_heads, batch_first=True)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, mlp_ratio * d_model), nn.GELU(), nn.Linear(mlp_ratio * d_model, d_model)
        )

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, num_heads, mlp_ratio]
