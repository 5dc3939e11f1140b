"""Linear layer, swish (x * sigmoid(x)), then a sum over the feature dimension."""
import torch
import torch.nn as nn

batch_size = 4096
in_features = 4096
out_features = 4096

SMOKE_SIZES = {"batch_size": 8, "in_features": 32, "out_features": 32}


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = self.linear(x)
        return (y * torch.sigmoid(y)).sum(dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
