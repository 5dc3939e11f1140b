"""Elementwise SiLU (swish), x * sigmoid(x), on a 32 x 256 x 128 x 128 activation map."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
channels = 256
height = 128
width = 128

SMOKE_SIZES = {"batch_size": 2, "channels": 4, "height": 8, "width": 8}


class Model(nn.Module):
    def forward(self, x):
        return F.silu(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
