"""Adaptive 2D average pooling of a 128 x 256 x 56 x 56 input down to 7 x 7 (8 x 8 windows)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 128
channels = 256
height = 56
width = 56

SMOKE_SIZES = {"batch_size": 2, "channels": 4, "height": 14, "width": 14}


class Model(nn.Module):
    def forward(self, x):
        return F.adaptive_avg_pool2d(x, (7, 7))


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
