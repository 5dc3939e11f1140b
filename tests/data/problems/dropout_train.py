"""A forward that draws random numbers (dropout in training mode): a correct candidate must
see the same random draws as the reference for the same input seed."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        return F.dropout(torch.relu(x), 0.5, training=True)


rows = 64
cols = 128


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
