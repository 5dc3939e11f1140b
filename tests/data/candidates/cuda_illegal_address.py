"""A Triton kernel that stores far outside its buffer: an illegal memory access on a GPU."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bad_store(ptr, offset, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK) + offset  # offset is 2**40: an int64 argument
    tl.store(ptr + offs, tl.zeros([BLOCK], dtype=tl.float32))


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        _bad_store[(1,)](y, 1 << 40, BLOCK=128)
        return y
