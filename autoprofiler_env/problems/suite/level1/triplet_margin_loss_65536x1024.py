"""Per-sample triplet margin loss (margin 1, L2 distance, reduction="none") on 65536 triplets of 1024-dim embeddings."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 65536
dim = 1024

SMOKE_SIZES = {"batch_size": 32, "dim": 32}


class Model(nn.Module):
    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, margin=1.0, reduction="none")


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
