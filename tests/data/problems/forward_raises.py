"""A problem whose reference forward raises."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x @ x  # (64, 128) @ (64, 128): shapes do not chain


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return []
