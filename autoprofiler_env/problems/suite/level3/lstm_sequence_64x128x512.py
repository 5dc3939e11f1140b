"""Single-layer nn.LSTM over a short sequence (batch 64, 128 steps, width 512); returns every step's output."""
import torch
import torch.nn as nn

batch_size = 64
seq_len = 128
input_size = 512
hidden_size = 512

SMOKE_SIZES = {"batch_size": 2, "seq_len": 4, "input_size": 8, "hidden_size": 8}


class Model(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


def get_inputs():
    return [torch.randn(batch_size, seq_len, input_size)]


def get_init_inputs():
    return [input_size, hidden_size]
