"""Linear layer, BatchNorm1d (training-mode batch statistics), GELU, then scaling."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 2048
in_features = 1024
out_features = 4096
scale = 1.5

SMOKE_SIZES = {"batch_size": 8, "in_features": 16, "out_features": 32}


class Model(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features)
        self.scale = scale

    def forward(self, x):
        return F.gelu(self.bn(self.linear(x))) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
