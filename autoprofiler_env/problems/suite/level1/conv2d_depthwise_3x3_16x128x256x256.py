"""Depthwise 3x3 2D convolution (groups = channels, padding 1) on a 16 x 128 x 256 x 256 input."""
import torch
import torch.nn as nn

batch_size = 16
channels = 128
height = 256
width = 256

SMOKE_SIZES = {"batch_size": 2, "channels": 4, "height": 10, "width": 10}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, groups=channels)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
