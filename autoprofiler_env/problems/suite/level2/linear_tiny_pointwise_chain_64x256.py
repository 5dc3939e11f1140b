"""Tiny linear layer followed by a long chain of cheap pointwise and row-reduction ops (launch-bound)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 64
features = 256

SMOKE_SIZES = {"batch_size": 4, "features": 16}


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.shift = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x):
        y = F.gelu(self.linear(x))
        y = y * 2.0 + self.shift
        y = torch.tanh(y)
        y = y * torch.sigmoid(y)
        y = y - y.mean(dim=1, keepdim=True)
        y = y / (y.abs().amax(dim=1, keepdim=True) + 1e-5)
        y = torch.clamp(y, -0.8, 0.8)
        return y + x


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
