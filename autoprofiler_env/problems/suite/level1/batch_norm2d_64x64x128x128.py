"""2D batch normalization with batch statistics (training mode) of a 64 x 64 x 128 x 128 input."""
import torch
import torch.nn as nn

batch_size = 64
channels = 64
height = 128
width = 128

SMOKE_SIZES = {"batch_size": 4, "channels": 4, "height": 8, "width": 8}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.norm = nn.BatchNorm2d(channels)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
