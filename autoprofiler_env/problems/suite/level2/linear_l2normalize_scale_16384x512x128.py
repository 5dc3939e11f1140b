"""Projection head: linear layer, L2 normalisation of each row, then scaling."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16384
in_features = 512
out_features = 128
scale = 8.0

SMOKE_SIZES = {"batch_size": 8, "in_features": 16, "out_features": 16}


class Model(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return F.normalize(self.linear(x), dim=1) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
