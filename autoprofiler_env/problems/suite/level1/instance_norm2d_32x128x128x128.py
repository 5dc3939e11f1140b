"""2D instance normalization (per sample and channel, no affine) of a 32 x 128 x 128 x 128 input."""
import torch
import torch.nn as nn

batch_size = 32
channels = 128
height = 128
width = 128

SMOKE_SIZES = {"batch_size": 2, "channels": 4, "height": 8, "width": 8}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.norm = nn.InstanceNorm2d(channels)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
