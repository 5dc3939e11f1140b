"""7x7 2D convolution with stride 2 and padding 3 (an image stem): 32 x 3 x 224 x 224 to 64 channels."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 3
out_channels = 64
height = 224
width = 224

SMOKE_SIZES = {"batch_size": 2, "out_channels": 8, "height": 16, "width": 16}


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=7, stride=2, padding=3)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
