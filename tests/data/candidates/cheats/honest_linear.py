"""The honest baseline of the timing cheats: the same eight linear layers, computed every call."""
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(384, 384) for _ in range(8)])

    def forward(self, x):
        return self.layers(x)
