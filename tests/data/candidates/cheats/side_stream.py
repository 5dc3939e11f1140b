"""Launches its work on another CUDA stream and returns without waiting for it: its output is
written about 25 ms after ``forward`` returns, well after the judge's snapshot at return.

It tells the allocator that the stream uses its input and its output (``record_stream``), so
neither block is handed to the judge while the stream still reads or writes it, and once the
stream finishes the output is right: not waiting is its only fault. (Its first version wrote at
once, twenty times, without ``record_stream``: its output was mostly final before the snapshot,
and on an H100 the input's freed block went to the snapshot while the stream read it, so its
output came out the constant 0: refused as degenerate, for its own race.)
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
            torch.cuda._sleep(50_000_000)  # GPU clock cycles: about 25 ms
            torch.clamp(x, min=0, out=out)
        x.record_stream(_stream)
        out.record_stream(_stream)
        return out
