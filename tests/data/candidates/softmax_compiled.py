"""An honest candidate of softmax_warns: torch.compile (eager backend: no compiler needed),
whose first import rewraps torch.manual_seed."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.softmax = torch.compile(lambda x: torch.softmax(x, dim=1), backend="eager")

    def forward(self, x):
        return self.softmax(x)
