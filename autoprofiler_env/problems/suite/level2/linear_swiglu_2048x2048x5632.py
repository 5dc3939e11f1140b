"""Fused gate/up projection (one linear layer) followed by the SwiGLU gate silu(a) * b."""
import torch
import torch.nn as nn
import torch.nn.functional as F

num_tokens = 2048
hidden = 2048
intermediate = 5632

SMOKE_SIZES = {"num_tokens": 8, "hidden": 16, "intermediate": 32}


class Model(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.gate_up = nn.Linear(hidden, 2 * intermediate, bias=False)

    def forward(self, x):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return F.silu(gate) * up


def get_inputs():
    return [torch.randn(num_tokens, hidden)]


def get_init_inputs():
    return [hidden, intermediate]
