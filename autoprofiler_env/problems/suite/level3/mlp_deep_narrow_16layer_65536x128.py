"""Deep, narrow residual MLP: 16 layers of width 128 with GELU over 65536 rows, then LayerNorm."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 65536
width = 128
num_layers = 16

SMOKE_SIZES = {"batch_size": 8, "width": 16}


class Model(nn.Module):
    def __init__(self, width, num_layers):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(num_layers))
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        for layer in self.layers:
            x = x + F.gelu(layer(x))
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, width)]


def get_init_inputs():
    return [width, num_layers]
