"""One step of a GRU cell (nn.GRUCell) on a batch of 2048."""
import torch
import torch.nn as nn

batch_size = 2048
input_size = 1024
hidden_size = 1024

SMOKE_SIZES = {"batch_size": 4, "input_size": 16, "hidden_size": 16}


class Model(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.cell = nn.GRUCell(input_size, hidden_size)

    def forward(self, x, h):
        return self.cell(x, h)


def get_inputs():
    return [torch.randn(batch_size, input_size), torch.randn(batch_size, hidden_size)]


def get_init_inputs():
    return [input_size, hidden_size]
