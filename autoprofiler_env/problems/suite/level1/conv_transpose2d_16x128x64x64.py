"""Transposed 2D convolution (kernel 4, stride 2, padding 1) upsampling 16 x 128 x 64 x 64 to 64 x 128 x 128."""
import torch
import torch.nn as nn

batch_size = 16
in_channels = 128
out_channels = 64
height = 64
width = 64

SMOKE_SIZES = {"batch_size": 2, "in_channels": 4, "out_channels": 4, "height": 6, "width": 6}


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size=4, stride=2, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
