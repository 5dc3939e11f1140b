"""Three-layer MLP (1024 -> 4096 -> 4096 -> 1024) with ReLU at batch 4096."""
import torch
import torch.nn as nn

batch_size = 4096
in_features = 1024
hidden = 4096

SMOKE_SIZES = {"batch_size": 8, "in_features": 16, "hidden": 32}


class Model(nn.Module):
    def __init__(self, in_features, hidden):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, in_features),
        )

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden]
