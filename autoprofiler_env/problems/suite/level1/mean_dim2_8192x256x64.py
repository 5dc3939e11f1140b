"""Mean over the last dimension (64) of a uniform [0, 1) 8192 x 256 x 64 tensor, giving 8192 x 256."""
import torch
import torch.nn as nn

batch_size = 8192
rows = 256
reduce_size = 64

SMOKE_SIZES = {"batch_size": 4, "rows": 16, "reduce_size": 64}


class Model(nn.Module):
    def forward(self, x):
        return torch.mean(x, dim=2)


def get_inputs():
    # Uniform inputs: the means sit near 0.5 with spread ~0.036, so zeros cannot match them.
    return [torch.rand(batch_size, rows, reduce_size)]


def get_init_inputs():
    return []
