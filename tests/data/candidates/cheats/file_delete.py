"""Deletes a file in the caller's folder (the path is filled in by the test), hiding the
error."""
import os

import torch
import torch.nn as nn

TARGET = "__TARGET__"
try:
    os.remove(TARGET)
except OSError:
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
