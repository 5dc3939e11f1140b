"""ResNet basic block: two 3x3 conv + BatchNorm (training mode) layers with an identity shortcut."""
import torch
import torch.nn as nn

batch_size = 32
channels = 64
height = 56
width = 56

SMOKE_SIZES = {"batch_size": 2, "channels": 4, "height": 8, "width": 8}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
