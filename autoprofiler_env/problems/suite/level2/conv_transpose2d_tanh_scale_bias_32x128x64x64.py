"""Stride-2 transposed convolution (2x upsampling), tanh, scaling and a per-channel bias add."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 128
out_channels = 64
height = 64
width = 64
scale = 2.0

SMOKE_SIZES = {"batch_size": 2, "in_channels": 4, "out_channels": 4, "height": 8, "width": 8}


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, scale):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, 4, stride=2, padding=1)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)
        self.scale = scale

    def forward(self, x):
        return torch.tanh(self.deconv(x)) * self.scale + self.bias


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, scale]
