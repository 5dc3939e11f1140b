"""The ncu parts (``full``, ``sets``, ``profiles``): saved ncu runs, in chunks of problems,
and which problems the saved runs are done with."""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Collection
from pathlib import Path

from tqdm import tqdm

from autoprofiler_env.errors import ReportReadError
from autoprofiler_env.problems import Problem
from autoprofiler_env.profiler.runner import (
    MAX_KERNELS,
    MAX_OPS,
    failed_problem,
    first_unprimed,
    range_timeout_s,
    run_ncu,
    timed_out,
)


def chunks(problems: list[Problem], size: int) -> list[tuple[str, list[Problem]]]:
    """Problems in chunks of ``size`` (at least 1: else a ValueError), each named by a hash
    of its URIs (so that a chunk's saved run is never confused with another one's)."""
    if size < 1:
        raise ValueError(f"a chunk holds at least 1 problem, not {size}")
    out = []
    for start in range(0, len(problems), size):
        members = problems[start:start + size]
        digest = hashlib.sha256("\n".join(p.uri for p in members).encode()).hexdigest()[:10]
        out.append((f"{start // size:03d}-{digest}", members))
    return out


def read_run(path: Path) -> dict:
    """A saved ncu run's index (its ``run.json``), as :meth:`NcuRun.load
    <autoprofiler_env.profiler.runner.NcuRun.load>` reads it.

    Raises:
        ReportReadError: it cannot be read, or is not JSON (truncated, damaged): the same
            error as a damaged report file of the run.
    """
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ReportReadError(f"cannot read the saved ncu run in {path.parent}: {path.name}: "
                              f"{e} (remove the folder: its problems are profiled again)"
                              ) from None


def _runs(root: Path) -> list[dict]:
    return [read_run(path) for path in sorted(root.rglob("run.json"))]


def ncu_pending(problems: list[Problem], configs, root: Path) -> bool:
    """Whether :func:`record_ncu` has work for ``configs`` (names) under ``root``: a problem
    that no saved run of a config is done with (:func:`covered`)."""
    return any(p.uri not in done for done in (covered(root / name) for name in configs)
               for p in problems)


def _timed_out_batched(meta: dict) -> str | None:
    """The problem that outlasted its timeout in a run without a kernel cap, which the
    recorder profiles again alone with one (``MAX_KERNELS``); else None."""
    failed = failed_problem(meta["status"])
    if failed is None or not timed_out(meta["status"]) or "--launch-count" in meta["command"]:
        return None
    return meta["problems"][failed]["uri"]


def covered(root: Path) -> set[str]:
    """The problems the saved runs under ``root`` are done with: profiled, or failed (a crash,
    or a hang with the kernel cap on, is not retried); not those a deadline stopped before or
    during, nor one that timed out in a batched run (it is profiled again alone, capped), nor
    the first problem of a run without the primer (its cost holds ncu's start-up)."""
    done = set()
    for meta in _runs(root):
        first = first_unprimed(meta["status"])
        done |= {r["uri"] for r in meta["status"]
                 if r.get("event") == "problem" and r["uri"] != first}
        failed = failed_problem(meta["status"])
        if failed is not None and _timed_out_batched(meta) is None:
            done.add(meta["problems"][failed]["uri"])
    return done


def recorded_cap(root: Path) -> int | None:
    """The operator cap the saved runs under ``root`` cut forwards at (``operator_cap`` of
    their status lines), None where none was cut.

    Raises:
        DatasetError: they were cut at different caps.
    """
    from autoprofiler_env.dataset.replay import operator_cap

    return operator_cap([(r.get("ops"), r.get("ops_profiled")) for meta in _runs(root)
                         for r in meta["status"] if r.get("event") == "problem"],
                        f"the runs under {root}")


STEPPED_OPS = frozenset({"rnn"})
"""Op kinds whose one operator launches kernels per time step (cuDNN's LSTM and GRU: two per
step and layer). A problem dominated by one is profiled alone, with the kernel cap, from the
start: in a batched run it outlasts the 300 s problem timeout first (KernelBench's
``36_LSTMHn`` on the H200: 270 s until a deadline, then 306 s to the timeout, then 111 s alone
and capped, docs/data/recording_kernelbench_h200)."""

BATCH_TIMEOUT_S = 150.0
"""How long a problem of a batched (uncapped) run may go without finishing before ncu is
stopped; the problem is then profiled again alone with the kernel cap, which keeps
``problem_timeout_s`` (300 s). The longest problems recorded under the full set took 105 s
(the suite's ``mlp_deep_narrow_16layer_65536x128``, 64 operators) and 51 s on KernelBench
(``level3/19_MobileNetV1``, 24 operators); the two that ran into the 300 s timeout did so on
hundreds of kernels from one operator (``level3/36_LSTMHn``'s cuDNN time steps, and
``level1/78_conv_transposed_2D_asymmetric_input_asymmetric_kernel___padded__``'s cuDNN FFT
kernels, about 150 of them in 300 s), and each wasted its 300 s before the capped run. The
profiled call itself is bounded sooner, by its operators (:func:`range_timeout_s`: 35 s for
one; ``level1/71``'s FFT kernels took this limit's 150 s on 2026-12-03, before it)."""

PROBLEM_TIMEOUT_S = 300.0
"""How long a problem profiled alone with the kernel cap may take before ncu is stopped (a
batched one: :data:`BATCH_TIMEOUT_S`); :func:`record_ncu`'s and :func:`ncu_may_start`'s
default, so that the two agree on which runs fit."""

MIN_RUN_S = 30.0
"""An ncu run is not started with less time left: ncu's start-up and the primer take about
4 s on the H200, and a problem under the full set takes 10-40 s."""

CAPPED_RUN_S = 155.0
"""A problem's run alone with the kernel cap is started only with more time left than this:
with less, a deadline stops it and it keeps nothing. On the H200 the ten that finished took
119-153 s (KernelBench's LSTMs and GRUs, its transposed convolutions on cuDNN's FFT path,
the suite's LSTM), and the three a deadline stopped, started with 58-106 s left, kept
nothing (229 s: ``level3/37_LSTMCn`` twice, ``level1/69`` on 2026-12-04,
docs/data/recording_kernelbench_h200). Skipped, the problem waits for the next call, and
the recorder goes on with the work that fits (the chunk's plan and candidates)."""

RETRY_MARGIN = 1.25
"""A problem's run alone that a deadline stopped after ``T`` s is started again only with more
than ``RETRY_MARGIN * T`` s left: with less it would stop again and keep nothing (KernelBench's
``level3/37_LSTMCn`` on 2026-12-04: capped, stopped after 63 s, then again after 58 s). Never
more than its problem timeout and :data:`MIN_RUN_S` are asked for: with that much left the run
finishes or times out, and either ends the problem's profiling, so none waits forever."""


def stopped_after(root: Path, uri: str) -> float:
    """The longest a run of ``uri`` alone under ``root`` ran before a deadline stopped it;
    0 where none was stopped so."""
    return max((meta["wall_s"] for meta in _runs(root)
                if [p["uri"] for p in meta["problems"]] == [uri]
                and any(r.get("event") == "deadline" for r in meta["status"])), default=0.0)


def _work(problems: list[Problem], configs: dict[str, list[str]], root: Path, chunk: int,
          alone: Collection[str]) -> list[tuple[str, list[str], str, list[Problem], int | None]]:
    """:func:`record_ncu`'s runs left to make, in order: per config, its batched chunks of the
    problems no saved run is done with, then those profiled alone with the kernel cap; each
    as (config, sections, chunk id, problems, kernel cap or None)."""
    work = []
    for name, sections in configs.items():
        done = covered(root / name)
        capped = ({uri for meta in _runs(root / name)
                   if (uri := _timed_out_batched(meta)) is not None} | set(alone)) - done
        todo = [p for p in problems if p.uri not in done and p.uri not in capped]
        work += [(name, sections, chunk_id, members, None)
                 for chunk_id, members in chunks(todo, chunk)]
        work += [(name, sections, f"capped-{chunks([p], 1)[0][0]}", [p], MAX_KERNELS)
                 for p in problems if p.uri in capped]
    return work


def _start_s(root: Path, members: list[Problem], max_kernels: int | None,
             problem_timeout_s: float) -> float:
    """The least time left to the deadline with which a run of ``members`` (one alone where
    ``max_kernels`` is set) is started: :data:`MIN_RUN_S`; for one alone, more than what such a
    run takes (:data:`CAPPED_RUN_S`) and than ``RETRY_MARGIN`` times the run a deadline stopped
    before (:data:`RETRY_MARGIN`), but never more than ``problem_timeout_s`` plus
    :data:`MIN_RUN_S`."""
    if max_kernels is None:
        return MIN_RUN_S
    stopped = stopped_after(root, members[0].uri)
    need = min(max(CAPPED_RUN_S, RETRY_MARGIN * stopped), problem_timeout_s + MIN_RUN_S)
    return math.nextafter(need, math.inf)  # more than it


def ncu_starts(problems: list[Problem], config: str, root: Path,
               problem_timeout_s: float = PROBLEM_TIMEOUT_S,
               alone: Collection[str] = ()) -> dict[str, float]:
    """Per problem that a run of ``config`` is left for, the least time left with which
    :func:`record_ncu` starts its run of it alone (a chunk of one: the fan-out's full unit);
    the saved runs read once for all of them."""
    return {members[0].uri: _start_s(root / name, members, cap, problem_timeout_s)
            for name, _, _, members, cap in _work(problems, {config: []}, root, 1, alone)}


def ncu_may_start(problems: list[Problem], configs: dict[str, list[str]], root: Path,
                  chunk: int, deadline: float | None = None,
                  problem_timeout_s: float = PROBLEM_TIMEOUT_S,
                  alone: Collection[str] = ()) -> bool:
    """Whether :func:`record_ncu`, called now with these arguments, would start a run: one is
    left to make, and the time left fits one (the recorder calls no ncu part that would start
    none: it would log a line of no device time)."""
    left = deadline - time.monotonic() if deadline is not None else None
    return any(left is None or left >= _start_s(root / name, members, cap, problem_timeout_s)
               for name, _, _, members, cap in _work(problems, configs, root, chunk, alone))


def record_ncu(problems: list[Problem], configs: dict[str, list[str]], root: Path, chunk: int,
               deadline: float | None = None, problem_timeout_s: float = PROBLEM_TIMEOUT_S,
               max_ops: int | None = MAX_OPS, alone: Collection[str] = (),
               batch_timeout_s: float = BATCH_TIMEOUT_S) -> int:
    """ncu runs, in chunks of ``chunk`` problems, of each config's problems that no run saved
    under ``root/<config>/`` is done with. A run the deadline stops keeps the problems it
    finished; the next call profiles the rest. A problem that timed out in a batched run is
    profiled alone, on its first ``MAX_KERNELS`` kernels; so are the problems whose URIs are
    in ``alone`` from the start (:data:`STEPPED_OPS`). A problem of a batched run times out
    after ``batch_timeout_s`` (at most ``problem_timeout_s``), its profiled call after
    :func:`range_timeout_s` of its operators; a capped one after ``problem_timeout_s``, and
    is skipped (left to a later call) while too little time is left for such a run
    (:data:`CAPPED_RUN_S`) or to outlast the run a deadline stopped before
    (:data:`RETRY_MARGIN`). ``max_ops``: the operators of each
    problem's forward that are profiled (the driver's cap, ``MAX_OPS`` by default). Returns
    how many runs it made."""
    made = 0
    bar = tqdm(_work(problems, configs, root, chunk, alone), desc="ncu", unit="run")
    for name, sections, chunk_id, members, max_kernels in bar:
        bar.set_postfix_str(name, refresh=False)  # the config (a section, a set) it runs
        left = deadline - time.monotonic() if deadline is not None else None
        if left is not None and left < MIN_RUN_S:
            return made
        if left is not None and left < _start_s(root / name, members, max_kernels,
                                                problem_timeout_s):
            continue  # a deadline would stop it (as it did with more time) first
        run = run_ncu(members, sections, workdir=root / "_work", max_kernels=max_kernels,
                      problem_timeout_s=(problem_timeout_s if max_kernels is not None
                                         else min(problem_timeout_s, batch_timeout_s)),
                      deadline_s=left, max_ops=max_ops,
                      range_timeout_s=None if max_kernels is not None else range_timeout_s)
        run.save(new_run_folder(root / name, f"{time.strftime('%Y%m%d-%H%M%S')}-{chunk_id}"))
        made += 1
    return made


def new_run_folder(parent: Path, stem: str) -> Path:
    """A folder made for one saved run under ``parent``: ``stem`` (the time to the second
    and the chunk), or where a run of that chunk was saved in the same second, ``stem.2``,
    ``stem.3``...: a run never overwrites another's record (a deadline's stop among them,
    which :func:`stopped_after` reads)."""
    parent.mkdir(parents=True, exist_ok=True)
    path, n = parent / stem, 1
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1
            path = parent / f"{stem}.{n}"
