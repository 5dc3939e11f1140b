"""Group normalization (8 groups, affine) of a 32 x 128 x 128 x 128 input."""
import torch
import torch.nn as nn

batch_size = 32
channels = 128
num_groups = 8
height = 128
width = 128

SMOKE_SIZES = {"batch_size": 2, "channels": 16, "num_groups": 4, "height": 6, "width": 6}


class Model(nn.Module):
    def __init__(self, num_groups, channels):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups, channels)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [num_groups, channels]
