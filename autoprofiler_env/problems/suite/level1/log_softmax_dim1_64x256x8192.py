"""Log-softmax over the middle (non-contiguous) dimension of a 64 x 256 x 8192 tensor."""
import torch
import torch.nn as nn

batch_size = 64
classes = 256
positions = 8192

SMOKE_SIZES = {"batch_size": 2, "classes": 16, "positions": 32}


class Model(nn.Module):
    def forward(self, x):
        return torch.log_softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, classes, positions)]


def get_init_inputs():
    return []
