"""2D average pooling, 3x3 window, stride 1, padding 1 (same-size output), of a 32 x 128 x 112 x 112 input."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
channels = 128
height = 112
width = 112

SMOKE_SIZES = {"batch_size": 2, "channels": 4, "height": 10, "width": 10}


class Model(nn.Module):
    def forward(self, x):
        return F.avg_pool2d(x, kernel_size=3, stride=1, padding=1)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
