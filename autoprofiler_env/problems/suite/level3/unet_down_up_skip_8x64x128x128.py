"""U-Net-style stage: conv block, max-pool down, conv block, transposed-conv up, skip concat, conv block."""
import torch
import torch.nn as nn

batch_size = 8
channels = 64
height = 128
width = 128

SMOKE_SIZES = {"batch_size": 2, "channels": 4, "height": 8, "width": 8}


def double_conv(cin, cout):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
        nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
    )


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.enc = double_conv(channels, channels)
        self.pool = nn.MaxPool2d(2)
        self.mid = double_conv(channels, 2 * channels)
        self.up = nn.ConvTranspose2d(2 * channels, channels, 2, stride=2)
        self.dec = double_conv(2 * channels, channels)

    def forward(self, x):
        skip = self.enc(x)
        y = self.up(self.mid(self.pool(skip)))
        return self.dec(torch.cat([y, skip], dim=1))


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
