"""3D convolution, clamp, then softmax over the channel dimension."""
import torch
import torch.nn as nn

batch_size = 8
in_channels = 16
out_channels = 32
depth = 16
height = 64
width = 64
clamp_min = -1.0
clamp_max = 1.0

SMOKE_SIZES = {"batch_size": 2, "in_channels": 2, "out_channels": 4, "depth": 4, "height": 6, "width": 6}


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, clamp_min, clamp_max):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, 3)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        y = torch.clamp(self.conv(x), self.clamp_min, self.clamp_max)
        return torch.softmax(y, dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, clamp_min, clamp_max]
