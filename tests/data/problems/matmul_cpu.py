"""Eight linear layers on a 384x384 input: milliseconds of real work per call on a CPU, well
above the cost of making its input, so that a candidate that lies about its time is far from
the judge's clock (the timing-cheat tests)."""
import torch
import torch.nn as nn

N = 384
LAYERS = 8


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(N, N) for _ in range(LAYERS)])

    def forward(self, x):
        return self.layers(x)


def get_inputs():
    return [torch.randn(N, N)]


def get_init_inputs():
    return []
