"""Per-sample cross-entropy loss (reduction="none") of 32768 x 4096 logits against integer class targets."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32768
num_classes = 4096

SMOKE_SIZES = {"batch_size": 32, "num_classes": 16}


class Model(nn.Module):
    def forward(self, logits, targets):
        return F.cross_entropy(logits, targets, reduction="none")


def get_inputs():
    return [torch.randn(batch_size, num_classes), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
