"""Elementwise squared-error loss (mse_loss with reduction="none") between two 8192 x 8192 tensors."""
import torch
import torch.nn as nn
import torch.nn.functional as F

rows = 8192
cols = 8192

SMOKE_SIZES = {"rows": 32, "cols": 64}


class Model(nn.Module):
    def forward(self, predictions, targets):
        return F.mse_loss(predictions, targets, reduction="none")


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(rows, cols)]


def get_init_inputs():
    return []
