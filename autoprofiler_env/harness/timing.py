"""Timing a callable: CUDA events with an L2 flush between trials on a GPU, a monotonic clock
on a CPU. Both warm up first and then run trials until a time budget or a trial cap is met."""

from __future__ import annotations

import time
from typing import Callable

import torch

from autoprofiler_env.harness.records import HarnessConfig, Timing


def _n_trials(config: HarnessConfig, estimate_ms: float) -> int:
    wanted = int(config.timing_budget_ms / max(estimate_ms, 1e-3))
    return max(config.min_trials, min(config.max_trials, wanted))


def time_cpu(fn: Callable[[], object], config: HarnessConfig) -> Timing:
    """Medians of ``time.perf_counter`` around each call."""
    start = time.perf_counter()
    calls = 0
    while calls < 1 or (time.perf_counter() - start) * 1e3 < config.warmup_ms:
        fn()
        calls += 1
    estimate_ms = (time.perf_counter() - start) * 1e3 / calls
    trials = []
    for _ in range(_n_trials(config, estimate_ms)):
        t0 = time.perf_counter()
        fn()
        trials.append((time.perf_counter() - t0) * 1e3)
    return Timing.from_trials(trials, "perf_counter")


def time_cuda(fn: Callable[[], object], config: HarnessConfig) -> Timing:
    """CUDA events around each call, after a write of twice the L2 size (when
    ``config.flush_l2``) so that no trial finds its data in the cache."""
    device = torch.device(config.device)
    flush = None
    if config.flush_l2:
        l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20)
        flush = torch.empty(max(2 * l2_bytes, 1 << 20) // 4, dtype=torch.int32, device=device)
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    calls = 0
    while calls < 1 or (time.perf_counter() - start) * 1e3 < config.warmup_ms:
        fn()
        torch.cuda.synchronize(device)
        calls += 1
    estimate_ms = (time.perf_counter() - start) * 1e3 / calls
    n = _n_trials(config, estimate_ms)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for s, e in zip(starts, ends):
        if flush is not None:
            flush.zero_()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize(device)
    return Timing.from_trials([s.elapsed_time(e) for s, e in zip(starts, ends)], "cuda_events")


def time_fn(fn: Callable[[], object], config: HarnessConfig) -> Timing:
    """Times ``fn`` on the configured device."""
    if torch.device(config.device).type == "cuda":
        return time_cuda(fn, config)
    return time_cpu(fn, config)
