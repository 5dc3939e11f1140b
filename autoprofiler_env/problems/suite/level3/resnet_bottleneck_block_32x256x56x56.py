"""ResNet bottleneck block: 1x1 reduce, 3x3, 1x1 expand (each with BatchNorm) plus identity shortcut."""
import torch
import torch.nn as nn

batch_size = 32
channels = 256
bottleneck = 64
height = 56
width = 56

SMOKE_SIZES = {"batch_size": 2, "channels": 8, "bottleneck": 4, "height": 8, "width": 8}


class Model(nn.Module):
    def __init__(self, channels, bottleneck):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, bottleneck, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(bottleneck)
        self.conv2 = nn.Conv2d(bottleneck, bottleneck, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(bottleneck)
        self.conv3 = nn.Conv2d(bottleneck, channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(channels)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return torch.relu(y + x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, bottleneck]
