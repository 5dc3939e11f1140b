"""3D max pooling, 3x3x3 window, stride 2, padding 1, of a 16 x 32 x 64 x 64 x 64 input (to 32^3)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
channels = 32
depth = 64
height = 64
width = 64

SMOKE_SIZES = {"batch_size": 1, "channels": 2, "depth": 6, "height": 8, "width": 8}


class Model(nn.Module):
    def forward(self, x):
        return F.max_pool3d(x, kernel_size=3, stride=2, padding=1)


def get_inputs():
    return [torch.randn(batch_size, channels, depth, height, width)]


def get_init_inputs():
    return []
