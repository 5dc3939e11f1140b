"""2D max pooling, 3x3 window, stride 2, padding 1, of a 32 x 64 x 224 x 224 input (to 112 x 112)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
channels = 64
height = 224
width = 224

SMOKE_SIZES = {"batch_size": 2, "channels": 4, "height": 12, "width": 12}


class Model(nn.Module):
    def forward(self, x):
        return F.max_pool2d(x, kernel_size=3, stride=2, padding=1)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
