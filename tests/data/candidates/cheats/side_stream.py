"""Launches its work on another CUDA stream and returns without waiting for it: its output is
written about 25 ms after ``forward`` returns, after the judge's snapshot at return (the
snapshot may still wait for it where the GPU serializes, a fresh allocation's for one; the next
input set's then sees the change).

It tells the allocator that the stream uses its input and its output (``record_stream``), so
neither block is handed to the judge while the stream still reads or writes it, and once the
stream finishes the output is right: not waiting is its only fault. Its kernels are loaded when
it is made, as a first launch may wait for the device. (Its first version wrote at once, twenty
times, without ``record_stream``: its output was mostly final before the snapshot, and on an
H100 the input's freed block went to the snapshot while the stream read it, so its output came
out the constant 0: refused as degenerate, for its own race.)
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.stream = torch.cuda.Stream()
        with torch.cuda.stream(self.stream):
            torch.cuda._sleep(1)
            torch.clamp(torch.randn(8, device="cuda"), min=0)
        torch.cuda.synchronize()

    def forward(self, x):
        out = torch.empty_like(x)
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            torch.cuda._sleep(50_000_000)  # GPU clock cycles: about 25 ms
            torch.clamp(x, min=0, out=out)
        x.record_stream(self.stream)
        out.record_stream(self.stream)
        return out
