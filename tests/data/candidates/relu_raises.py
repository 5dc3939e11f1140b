import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        raise ValueError("this kernel is not written yet")
