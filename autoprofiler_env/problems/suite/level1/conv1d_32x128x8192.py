"""1D convolution, kernel 5 and padding 2: 32 x 128 x 8192 input to 128 output channels."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 128
out_channels = 128
length = 8192

SMOKE_SIZES = {"batch_size": 2, "in_channels": 4, "out_channels": 6, "length": 64}


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size=5, padding=2)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels]
