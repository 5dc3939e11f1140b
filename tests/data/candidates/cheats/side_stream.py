"""Launches its work on another CUDA stream and returns without waiting for it.

It tells the allocator that the stream reads its input (``record_stream``), so once the stream
finishes its output is right: waiting is all it leaves out. Without that, the judge letting go
of the input at return could hand the input's memory to the output's snapshot while the stream
still read it, and the output came out the constant 0: refused as degenerate, the cheat's own
race, not the defence against leaving work behind.
"""
import torch
import torch.nn as nn

_stream = None


class ModelNew(nn.Module):
    def forward(self, x):
        global _stream
        _stream = _stream or torch.cuda.Stream()
        out = torch.empty_like(x)
        _stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(_stream):
            for _ in range(20):  # long enough to be still running when forward returns
                torch.clamp(x, min=0, out=out)
        x.record_stream(_stream)
        return out
