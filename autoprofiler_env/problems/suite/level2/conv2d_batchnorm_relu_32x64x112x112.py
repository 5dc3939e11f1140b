"""3x3 convolution, BatchNorm2d (training-mode batch statistics) and ReLU."""
import torch
import torch.nn as nn

batch_size = 32
channels = 64
height = 112
width = 112

SMOKE_SIZES = {"batch_size": 2, "channels": 4, "height": 8, "width": 8}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
