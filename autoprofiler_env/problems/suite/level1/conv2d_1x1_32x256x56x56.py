"""Pointwise (1x1) 2D convolution: 32 x 256 x 56 x 56 input to 512 output channels."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 256
out_channels = 512
height = 56
width = 56

SMOKE_SIZES = {"batch_size": 2, "in_channels": 8, "out_channels": 16, "height": 6, "width": 6}


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
