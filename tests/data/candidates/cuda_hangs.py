"""A Triton kernel that spins on a flag nobody sets: the GPU never finishes."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _spin(flag_ptr):
    while tl.load(flag_ptr, volatile=True) == 0:
        pass


class ModelNew(nn.Module):
    def forward(self, x):
        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        _spin[(1,)](flag)
        return torch.relu(x)
