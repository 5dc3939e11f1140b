"""SE-ResNet block: two 3x3 conv-BatchNorm layers, squeeze-excitation channel gating, identity shortcut."""
import torch
import torch.nn as nn

batch_size = 32
channels = 256
reduction = 16
height = 28
width = 28

SMOKE_SIZES = {"batch_size": 2, "channels": 8, "reduction": 2, "height": 6, "width": 6}


class Model(nn.Module):
    def __init__(self, channels, reduction):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.fc1 = nn.Linear(channels, channels // reduction)
        self.fc2 = nn.Linear(channels // reduction, channels)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        s = y.mean(dim=(2, 3))
        s = torch.sigmoid(self.fc2(torch.relu(self.fc1(s))))
        y = y * s[:, :, None, None]
        return torch.relu(y + x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, reduction]
