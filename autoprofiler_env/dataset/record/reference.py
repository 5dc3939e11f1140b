"""The ``reference`` part: each problem's eager reference timed (``reference.jsonl``)."""

from __future__ import annotations

import time
from pathlib import Path

from tqdm import tqdm

from autoprofiler_env.dataset.record.machine import _past, check_machine, machine_info
from autoprofiler_env.errors import ProblemError
from autoprofiler_env.harness import Evaluator, HarnessConfig
from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl
from autoprofiler_env.problems import Problem


def record_reference(problems: list[Problem], config: HarnessConfig, out: Path,
                     deadline: float | None = None) -> list[dict]:
    """Times each problem's eager reference not yet in ``out``; returns all rows (each with
    its wall time, ``wall_s``: preparing, checking and timing the reference).

    Raises:
        OtherMachineError: ``out``'s rows were made on another machine (device, GPU, torch),
            whose timings would pass for this one's (:func:`~.machine.check_machine`).
    """
    done = {row["uri"] for row in read_jsonl(out)}
    todo = [p for p in problems if p.uri not in done]
    if not todo or _past(deadline):
        return read_jsonl(out)
    info = machine_info(config.device)
    check_machine([out], info, Path(out).parent)
    with Evaluator(config) as evaluator, JsonlAppender(out) as log:
        for problem in tqdm(todo, desc="reference timing", unit="problem"):
            if _past(deadline):
                break
            row = {"uri": problem.uri, "level": problem.level, **info}
            started = time.monotonic()
            try:
                run = evaluator.reference(problem)
                row.update(median_ms=run.timing.median_ms, p20_ms=run.timing.p20_ms,
                           p80_ms=run.timing.p80_ms, n_trials=run.timing.n_trials,
                           peak_memory_mb=(run.peak_memory_bytes / 2**20
                                           if run.peak_memory_bytes is not None else None),
                           constant_needed=run.constant_needed, error=None)
            except ProblemError as e:  # named by its URI: no path of the recording machine
                row.update(error=f"{problem.uri}: {e.cause}" + (f" ({e.hint})" if e.hint else ""))
            row["wall_s"] = time.monotonic() - started  # the problem's device time
            log.write(row)
    return read_jsonl(out)
