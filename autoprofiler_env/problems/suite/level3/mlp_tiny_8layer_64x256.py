"""Eight tiny residual MLP layers (width 256, batch 64): x = x + relu(linear(x)); launch-bound."""
import torch
import torch.nn as nn

batch_size = 64
width = 256
num_layers = 8

SMOKE_SIZES = {"batch_size": 4, "width": 16}


class Model(nn.Module):
    def __init__(self, width, num_layers):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(num_layers))

    def forward(self, x):
        for layer in self.layers:
            x = x + torch.relu(layer(x))
        return x


def get_inputs():
    return [torch.randn(batch_size, width)]


def get_init_inputs():
    return [width, num_layers]
