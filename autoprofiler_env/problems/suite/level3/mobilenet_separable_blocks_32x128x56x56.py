"""Two MobileNet depthwise-separable blocks (depthwise 3x3 + pointwise 1x1, BatchNorm, ReLU6), the second strided."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 128
out_channels = 256
height = 56
width = 56

SMOKE_SIZES = {"batch_size": 2, "in_channels": 4, "out_channels": 8, "height": 8, "width": 8}


def separable(cin, cout, stride):
    return nn.Sequential(
        nn.Conv2d(cin, cin, 3, stride=stride, padding=1, groups=cin, bias=False),
        nn.BatchNorm2d(cin), nn.ReLU6(),
        nn.Conv2d(cin, cout, 1, bias=False),
        nn.BatchNorm2d(cout), nn.ReLU6(),
    )


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.block1 = separable(in_channels, out_channels, 1)
        self.block2 = separable(out_channels, out_channels, 2)

    def forward(self, x):
        return self.block2(self.block1(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
