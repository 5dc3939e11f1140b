"""Small linear layer producing a large activation, then a long memory-bound pointwise tail."""
import torch
import torch.nn as nn
import torch.nn.functional as F

num_rows = 262144
in_features = 64
out_features = 256

SMOKE_SIZES = {"num_rows": 16, "in_features": 8, "out_features": 16}


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.gain = nn.Parameter(1.0 + 0.1 * torch.randn(out_features))
        self.shift = nn.Parameter(0.1 * torch.randn(out_features))

    def forward(self, x):
        y = F.gelu(self.linear(x))
        y = y * self.gain + self.shift
        y = y * torch.sigmoid(y)
        y = torch.clamp(y, -0.25, 1.0)
        return y * 4.0 - 1.0


def get_inputs():
    return [torch.randn(num_rows, in_features)]


def get_init_inputs():
    return [in_features, out_features]
