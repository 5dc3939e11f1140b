"""Mixture of 4 MLP experts with top-1 softmax routing, computed densely with a one-hot mask."""
import torch
import torch.nn as nn
import torch.nn.functional as F

num_tokens = 4096
hidden = 1024
expert_hidden = 2048
num_experts = 4

SMOKE_SIZES = {"num_tokens": 8, "hidden": 16, "expert_hidden": 32}


class Model(nn.Module):
    def __init__(self, hidden, expert_hidden, num_experts):
        super().__init__()
        self.router = nn.Linear(hidden, num_experts)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(hidden, expert_hidden), nn.GELU(), nn.Linear(expert_hidden, hidden))
            for _ in range(num_experts)
        )

    def forward(self, x):
        probs = torch.softmax(self.router(x), dim=-1)
        mask = F.one_hot(probs.argmax(dim=-1), probs.shape[-1]).to(x.dtype)
        weights = probs * mask  # only the chosen expert keeps a (non-zero) gate
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            out = out + weights[:, e:e + 1] * expert(x)
        return out


def get_inputs():
    return [torch.randn(num_tokens, hidden)]


def get_init_inputs():
    return [hidden, expert_hidden, num_experts]
