"""Transposed 3D convolution (kernel 3, stride 2, padding 1, output padding 1): 8 x 32 x 16 x 32 x 32 to 16 x 32 x 64 x 64."""
import torch
import torch.nn as nn

batch_size = 8
in_channels = 32
out_channels = 16
depth = 16
height = 32
width = 32

SMOKE_SIZES = {"batch_size": 1, "in_channels": 4, "out_channels": 2, "depth": 3, "height": 4, "width": 4}


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size=3, stride=2, padding=1, output_padding=1
        )

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
