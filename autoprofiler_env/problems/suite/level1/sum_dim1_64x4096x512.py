"""Sum over the middle dimension of a 64 x 4096 x 512 tensor, giving 64 x 512."""
import torch
import torch.nn as nn

batch_size = 64
reduce_size = 4096
inner = 512

SMOKE_SIZES = {"batch_size": 4, "reduce_size": 64, "inner": 16}


class Model(nn.Module):
    def forward(self, x):
        return torch.sum(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, reduce_size, inner)]


def get_init_inputs():
    return []
