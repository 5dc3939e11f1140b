"""3x3 2D convolution, padding 1: 16 x 64 x 128 x 128 input to 128 output channels."""
import torch
import torch.nn as nn

batch_size = 16
in_channels = 64
out_channels = 128
height = 128
width = 128

SMOKE_SIZES = {"batch_size": 2, "in_channels": 4, "out_channels": 8, "height": 8, "width": 8}


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
