"""The ncu metrics that the project's rules read, each name defined once (the reference
optimizers', the roofline baseline's and the roofline tree's), and :func:`has_mark`, the
kernel-name test the optimizers' rules share."""

from __future__ import annotations

from functools import lru_cache

SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
"""The SM throughput, % of peak (SpeedOfLight)."""
MEM_PCT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
"""The memory throughput, % of peak (SpeedOfLight)."""
FMA_PIPE = "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active"
"""The FMA pipe's use, % of peak (ComputeWorkloadAnalysis)."""
TENSOR_PIPES = ("sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active",
                "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active")
"""The tensor pipe's use, % of peak, under the names ncu versions give it (the first one
present is read)."""


@lru_cache(maxsize=4096)
def has_mark(name: str, marks: tuple[str, ...]) -> bool:
    """Whether the kernel name ``name`` holds one of ``marks`` (lower case), case-blind;
    memoised (the rules ask it of the same kernels again and again)."""
    lowered = name.lower()
    return any(m in lowered for m in marks)
