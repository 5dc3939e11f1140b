"""Writes a file outside its folder (the path is filled in by the test), hiding the error."""
import torch
import torch.nn as nn

TARGET = "__TARGET__"
try:
    with open(TARGET, "w") as f:
        f.write("pwned")
except OSError:
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
