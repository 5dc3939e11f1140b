"""Nsight Compute as the environment's sensor: sections, runs, parsed profiles, their cost.

>>> from autoprofiler_env.problems import load_problem
>>> from autoprofiler_env.profiler import profile_problems, render_markdown
>>> profiles, failures = profile_problems([load_problem("softmax_16384x4096")],
...                                       ["SpeedOfLight", "WarpStateStats"])
>>> print(render_markdown(profiles[0]))
"""

from __future__ import annotations

import re
from pathlib import Path

from autoprofiler_env.errors import ProfilingError
from autoprofiler_env.problems.problem import Problem
from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS, load_catalogue
from autoprofiler_env.profiler.parse import ProfileFailure, profiles_from_run
from autoprofiler_env.profiler.records import (
    DisplayedMetric,
    Finding,
    KernelProfile,
    Profile,
    ProfileCost,
    RankedFinding,
)
from autoprofiler_env.profiler.render import render_markdown
from autoprofiler_env.profiler.runner import (
    MAX_KERNELS,
    MAX_OPS,
    PROBLEM_TIMEOUT_S,
    NcuRun,
    failed_problem,
    raise_for_run,
    range_timeout_s,
    run_ncu,
    timed_out,
)


def profile_problems(problems: list[Problem], sections: list[str], *, ncu: str | None = None,
                     problem_timeout_s: float = PROBLEM_TIMEOUT_S, workdir: Path | None = None,
                     max_ops: int | None = MAX_OPS, max_kernels: int | None = MAX_KERNELS,
                     device: str = "cuda") -> tuple[list[Profile], list[ProfileFailure]]:
    """Profiles ``problems`` with exactly ``sections``, in as few ncu invocations as it can.

    A problem that crashes or hangs the profiled program is reported in the failures and the
    remaining problems are profiled in a new invocation; the others' results are kept. A run
    of one problem profiles at most its first ``max_kernels`` kernels (None: all), and a
    problem that outlasts the timeout in a batched run (or whose profiled call outlasts
    :func:`~.runner.range_timeout_s` of its operators) is profiled again alone under
    ``MAX_KERNELS``. ``max_ops``: the forward's first operators profiled (a dataset's
    ``Dataset.max_ops``, to profile its problems as they were recorded). ``device``: the GPU
    profiled (``cuda`` or ``cuda:N``: :func:`.runner.visible_devices`).

    Raises:
        ProfilingError: ``device`` is not a CUDA GPU.
        UnknownSectionError: a section this ncu version does not have.
        NcuNotFoundError, NcuPermissionError, NcuUnsupportedError: ncu cannot profile here.
        ProfiledProgramError: the profiled program failed before it reached any problem.
    """
    if not re.fullmatch(r"cuda(:\d+)?", str(device)):
        named = f"{problems[0].uri}: " if len(problems) == 1 else ""
        raise ProfilingError(
            f"{named}collecting {'+'.join(sections)} runs ncu on a CUDA GPU, and the device "
            f"given is {device!r}: profile on a GPU machine, device 'cuda' or 'cuda:N' (a live "
            "environment on a CPU is shown a dataset's recorded profiles when made with "
            "evidence='recorded')")
    sections = load_catalogue().validate(sections)
    profiles: dict[str, Profile] = {}
    failures: dict[str, ProfileFailure] = {}
    todo = list(problems)
    while todo:
        batched = len(todo) > 1  # a timeout is then retried alone, capped: stop it sooner
        run = run_ncu(todo, sections, ncu=ncu, problem_timeout_s=problem_timeout_s,
                      workdir=workdir, max_ops=max_ops,
                      max_kernels=None if batched else max_kernels,
                      range_timeout_s=range_timeout_s if batched else None, device=device)
        raise_for_run(run)
        got, failed = profiles_from_run(run)
        profiles.update((p.problem_uri, p) for p in got)
        culprits = {f.problem_uri for f in failed if not f.error.startswith("not reached")}
        # the problem in flight at a timeout (none where the timeout came after the last
        # problem ended, as ncu wrote its report): alone and capped, it may finish
        culprit = failed_problem(run.status) if batched and timed_out(run.status) else None
        if culprit is not None:
            retry = [todo[culprit]]
            got_alone, failed_alone = profile_problems(
                retry, sections, ncu=ncu, problem_timeout_s=problem_timeout_s, workdir=workdir,
                max_ops=max_ops, device=device)
            profiles.update((p.problem_uri, p) for p in got_alone)
            failures.update((f.problem_uri, f) for f in failed_alone)
            culprits -= {p.uri for p in retry}
        failures.update((f.problem_uri, f) for f in failed if f.problem_uri in culprits)
        unreached = [p for p in todo if p.uri not in profiles and p.uri not in failures]
        if len(unreached) == len(todo):  # no progress at all: stop rather than loop
            failures.update((p.uri, ProfileFailure(p.uri, "the run made no progress"))
                            for p in unreached)
            break
        todo = unreached
    order = [p.uri for p in problems]
    return ([profiles[u] for u in order if u in profiles],
            [failures[u] for u in order if u in failures])


__all__ = [
    "ACTION_SECTIONS", "MAX_KERNELS", "MAX_OPS", "DisplayedMetric", "Finding", "KernelProfile",
    "NcuRun", "Profile", "ProfileCost", "ProfileFailure", "RankedFinding", "load_catalogue",
    "profile_problems", "profiles_from_run", "render_markdown", "run_ncu",
]
