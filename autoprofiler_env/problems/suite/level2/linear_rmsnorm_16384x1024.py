"""Linear layer followed by RMSNorm (with a learned gain) over the feature dimension."""
import torch
import torch.nn as nn

num_tokens = 16384
hidden = 1024

SMOKE_SIZES = {"num_tokens": 8, "hidden": 32}


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.linear = nn.Linear(hidden, hidden)
        self.norm = nn.RMSNorm(hidden, eps=1e-6)

    def forward(self, x):
        return self.norm(self.linear(x))


def get_inputs():
    return [torch.randn(num_tokens, hidden)]


def get_init_inputs():
    return [hidden]
