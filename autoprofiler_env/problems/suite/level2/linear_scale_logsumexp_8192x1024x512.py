"""Linear layer, scaling by an inverse temperature, then logsumexp over the features."""
import torch
import torch.nn as nn

batch_size = 8192
in_features = 1024
out_features = 512
inv_temperature = 8.0

SMOKE_SIZES = {"batch_size": 8, "in_features": 32, "out_features": 16}


class Model(nn.Module):
    def __init__(self, in_features, out_features, inv_temperature):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.inv_temperature = inv_temperature

    def forward(self, x):
        return torch.logsumexp(self.linear(x) * self.inv_temperature, dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, inv_temperature]
