"""3x3 convolution, InstanceNorm2d, then LeakyReLU."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
in_channels = 32
out_channels = 64
height = 128
width = 128
negative_slope = 0.2

SMOKE_SIZES = {"batch_size": 2, "in_channels": 4, "out_channels": 4, "height": 8, "width": 8}


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, negative_slope):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.norm = nn.InstanceNorm2d(out_channels)
        self.negative_slope = negative_slope

    def forward(self, x):
        return F.leaky_relu(self.norm(self.conv(x)), self.negative_slope)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, negative_slope]
