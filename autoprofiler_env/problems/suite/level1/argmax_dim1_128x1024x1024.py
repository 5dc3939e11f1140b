"""Index of the maximum along the middle dimension of a 128 x 1024 x 1024 tensor (int64, 128 x 1024)."""
import torch
import torch.nn as nn

batch_size = 128
reduce_size = 1024
inner = 1024

SMOKE_SIZES = {"batch_size": 4, "reduce_size": 32, "inner": 16}


class Model(nn.Module):
    def forward(self, x):
        return torch.argmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, reduce_size, inner)]


def get_init_inputs():
    return []
