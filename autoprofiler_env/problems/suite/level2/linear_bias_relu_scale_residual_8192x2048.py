"""Bias-free linear layer, separate bias add, ReLU, scaling and a residual add of the input."""
import torch
import torch.nn as nn

batch_size = 8192
features = 2048
scale = 0.5

SMOKE_SIZES = {"batch_size": 8, "features": 32}


class Model(nn.Module):
    def __init__(self, features, scale):
        super().__init__()
        self.linear = nn.Linear(features, features, bias=False)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.scale = scale

    def forward(self, x):
        y = torch.relu(self.linear(x) + self.bias)
        return x + y * self.scale


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, scale]
