"""Decoder stage: stride-2 transposed convolution, BatchNorm2d (training mode), ReLU."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 128
out_channels = 64
height = 32
width = 32

SMOKE_SIZES = {"batch_size": 2, "in_channels": 4, "out_channels": 4, "height": 4, "width": 4}


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, 4, stride=2, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, x):
        return torch.relu(self.bn(self.deconv(x)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
