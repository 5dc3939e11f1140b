"""ResNet-style stem: 7x7 stride-2 convolution, ReLU, then 3x3 stride-2 max pooling."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 3
out_channels = 64
height = 224
width = 224

SMOKE_SIZES = {"batch_size": 2, "out_channels": 4, "height": 16, "width": 16}


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 7, stride=2, padding=3)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return F.max_pool2d(y, kernel_size=3, stride=2, padding=1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
