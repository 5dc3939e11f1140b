"""Convolutional autoencoder: three stride-2 conv-BN-ReLU encoder stages, three transposed-conv decoder stages."""
import torch
import torch.nn as nn

batch_size = 16
in_channels = 3
base_channels = 64
height = 128
width = 128

SMOKE_SIZES = {"batch_size": 2, "base_channels": 4, "height": 16, "width": 16}


def down(cin, cout):
    return [nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]


def up(cin, cout):
    return [nn.ConvTranspose2d(cin, cout, 4, stride=2, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]


class Model(nn.Module):
    def __init__(self, in_channels, base_channels):
        super().__init__()
        c1, c2, c3 = base_channels, 2 * base_channels, 4 * base_channels
        self.encoder = nn.Sequential(*down(in_channels, c1), *down(c1, c2), *down(c2, c3))
        self.decoder = nn.Sequential(
            *up(c3, c2), *up(c2, c1), nn.ConvTranspose2d(c1, in_channels, 4, stride=2, padding=1)
        )

    def forward(self, x):
        return self.decoder(self.encoder(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, base_channels]
