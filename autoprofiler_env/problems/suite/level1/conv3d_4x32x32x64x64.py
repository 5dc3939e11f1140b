"""3x3x3 3D convolution, padding 1: 4 x 32 x 32 x 64 x 64 input to 64 output channels."""
import torch
import torch.nn as nn

batch_size = 4
in_channels = 32
out_channels = 64
depth = 32
height = 64
width = 64

SMOKE_SIZES = {"batch_size": 1, "in_channels": 2, "out_channels": 4, "depth": 4, "height": 6, "width": 6}


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
