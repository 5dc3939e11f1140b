"""Linear layer, row-wise minimum, and subtraction of that minimum from every row."""
import torch
import torch.nn as nn

batch_size = 32768
in_features = 256
out_features = 1024

SMOKE_SIZES = {"batch_size": 8, "in_features": 16, "out_features": 32}


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = self.linear(x)
        return y - torch.min(y, dim=1, keepdim=True).values


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
