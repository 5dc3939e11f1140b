"""The right values in a one-element tuple, where the reference returns the tensor alone."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return (torch.relu(x),)
