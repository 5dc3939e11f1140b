"""Depthwise 3x3 convolution (groups = channels), BatchNorm2d (training mode), ReLU6."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
channels = 256
height = 56
width = 56

SMOKE_SIZES = {"batch_size": 2, "channels": 4, "height": 8, "width": 8}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False)
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        return F.relu6(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
