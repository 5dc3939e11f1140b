"""Writes bytes that are not a message into every socket of its process."""
import os

import torch.nn as nn

for fd in range(3, 64):
    try:
        os.write(fd, b"\x00\x00\x00\x10not json at all!")
    except OSError:
        pass


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 0.5
