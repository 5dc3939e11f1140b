"""Small VGG-style feature extractor: three stages of two 3x3 conv-BatchNorm-ReLU layers and a max pool."""
import torch
import torch.nn as nn

batch_size = 16
in_channels = 3
base_channels = 64
height = 128
width = 128

SMOKE_SIZES = {"batch_size": 2, "base_channels": 4, "height": 16, "width": 16}


def conv_bn_relu(cin, cout):
    return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]


class Model(nn.Module):
    def __init__(self, in_channels, base_channels):
        super().__init__()
        layers, cin = [], in_channels
        for stage in range(3):
            cout = base_channels * 2 ** stage
            layers += conv_bn_relu(cin, cout) + conv_bn_relu(cout, cout) + [nn.MaxPool2d(2)]
            cin = cout
        self.features = nn.Sequential(*layers)

    def forward(self, x):
        return self.features(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, base_channels]
