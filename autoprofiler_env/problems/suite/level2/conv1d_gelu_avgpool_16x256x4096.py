"""1D convolution over a long sequence, GELU, then average pooling by 4."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
channels = 256
length = 4096

SMOKE_SIZES = {"batch_size": 2, "channels": 4, "length": 32}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, 3, padding=1)

    def forward(self, x):
        return F.avg_pool1d(F.gelu(self.conv(x)), kernel_size=4)


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return [channels]
