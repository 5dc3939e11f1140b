"""The profile of a set of sections from the profiles of each section collected alone.

Both backends use it: the replay merges the recorded single-section profiles, the live
backend the ncu runs it made one section at a time. Kernel by kernel (the same program
launches the same kernels whatever is collected): the metrics, the header lines and the
findings of each section; the kernel names, launch shapes and durations are the first
section's. docs/profiler.md measures how close that is to one run collecting the whole set.
"""

from __future__ import annotations

from dataclasses import replace

from autoprofiler_env.errors import DatasetError
from autoprofiler_env.profiler.records import KernelProfile, Profile, ProfileCost


def merge_profiles(uri: str, sections: tuple[str, ...], parts: list[Profile],
                   keep: frozenset[str] | None = None) -> Profile:
    """The profile of ``sections`` from the profiles of each section alone (same order); with
    ``keep``, only those metrics (and their units) and no header lines: what a reader of a
    handful of metrics needs (the replay's optimizer), merged in a fraction of the time."""
    if not sections:
        return Profile(uri, (), (), ProfileCost(0.0, 0, 0, 0.0, 0))
    base = parts[0]
    if any(len(p.kernels) != len(base.kernels) for p in parts):
        raise DatasetError(f"{uri}: the sections' runs profiled different numbers of kernels "
                           f"({[len(p.kernels) for p in parts]}); re-record it")
    wanted = None if keep is None else tuple(keep)
    kernels = []
    for k, across in zip(base.kernels, zip(*(p.kernels for p in parts))):
        metrics = {}
        if wanted is None:
            for other in reversed(across):  # the first section's value of a shared metric wins
                metrics.update(other.metrics)
            displayed = tuple(d for other in across for d in other.displayed)
        else:
            for other in across:  # the first section's value of a shared metric wins
                for name in wanted:
                    if name not in metrics and name in other.metrics:
                        metrics[name] = other.metrics[name]
            displayed = ()
        kernels.append(KernelProfile(
            k.id, k.name, k.block, k.grid, k.duration_ns,
            sum(other.passes or 0 for other in across), metrics, displayed,
            tuple(f for other in across for f in other.findings)))
    cost = ProfileCost(
        replay_s=sum(p.cost.replay_s for p in parts),
        passes=sum(p.cost.passes for p in parts),
        kernel_passes=sum(p.cost.kernel_passes for p in parts),
        gpu_replay_s=sum(p.cost.gpu_replay_s for p in parts),
        n_kernels=base.cost.n_kernels)
    units = {}
    for p in reversed(parts):  # a metric's unit is the same in every run
        units.update(p.units)
    if wanted is not None:
        units = {name: units[name] for name in wanted if name in units}
    return replace(base, sections=sections, kernels=tuple(kernels), cost=cost, units=units)
