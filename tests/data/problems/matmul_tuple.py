"""matmul_cpu's eight linear layers, the output in a tuple of one."""
import torch
import torch.nn as nn

N = 384


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(N, N) for _ in range(8)])

    def forward(self, x):
        return (self.layers(x),)


def get_inputs():
    return [torch.randn(N, N)]


def get_init_inputs():
    return []
