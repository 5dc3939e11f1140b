"""Linear classifier head, division by a temperature, softmax over the classes."""
import torch
import torch.nn as nn

batch_size = 4096
in_features = 1024
num_classes = 4096
temperature = 0.1

SMOKE_SIZES = {"batch_size": 8, "in_features": 32, "num_classes": 16}


class Model(nn.Module):
    def __init__(self, in_features, num_classes, temperature):
        super().__init__()
        self.linear = nn.Linear(in_features, num_classes)
        self.temperature = temperature

    def forward(self, x):
        return torch.softmax(self.linear(x) / self.temperature, dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, num_classes, temperature]
