"""A softmax with its dimension left implicit: torch warns (a deprecation) from this module's
code, and Python adds __warningregistry__ to the module's names while the judge runs it."""
import torch
import torch.nn as nn
import torch.nn.functional as F

N = 64


class Model(nn.Module):
    def forward(self, x):
        return F.softmax(x)


def get_inputs():
    return [torch.randn(N, N)]


def get_init_inputs():
    torch.manual_seed(0)  # named by the problem's code: torch.compile's import rewraps it
    return []
