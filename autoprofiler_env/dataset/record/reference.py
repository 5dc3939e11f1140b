"""The ``reference`` part: each problem's eager reference timed (``reference.jsonl``)."""

from __future__ import annotations

import time
from pathlib import Path

from tqdm import tqdm

from autoprofiler_env.checksum import file_sha256
from autoprofiler_env.dataset.record.machine import _past, check_machine, machine_info
from autoprofiler_env.errors import ProblemError, SourceMismatchError
from autoprofiler_env.harness import Evaluator, HarnessConfig
from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl
from autoprofiler_env.problems import Problem


def problem_sha256(problem: Problem) -> str | None:
    """The sha256 of a problem file's bytes: what a reference row records it was timed from
    (``problem_sha256``), so that a recording resumed or built from an edited file is refused
    rather than mixed (:func:`check_sources`); None where the file cannot be read (its
    reference then fails, saying why)."""
    try:
        return file_sha256(problem.path)
    except OSError:
        return None


def check_sources(out: Path, problems: list[Problem]) -> list[Problem]:
    """What a recording call checks of its problems before it records anything: that no two
    files are the same URI (two files of one name in folders of one name), and that none is
    another file than the one ``out``'s reference row was timed from (a row written before
    rows named it is not checked). Returns ``problems``, each once (a file named twice, as a
    file and in its folder, is one problem).

    Raises:
        ProblemError: two files of one URI.
        SourceMismatchError: a problem file was edited since ``out`` recorded it.
    """
    seen: dict[str, Problem] = {}
    for problem in problems:
        first = seen.get(problem.uri)
        if first is not None and Path(first.path).resolve() != Path(problem.path).resolve():
            raise ProblemError(problem.path, f"is {problem.uri}, as {first.path} is: a "
                               "recording names each problem once", "rename one of them, or "
                               "record them into two --out folders")
        seen.setdefault(problem.uri, problem)
    recorded = {row["uri"]: row for row in read_jsonl(Path(out) / "reference.jsonl")
                if row.get("problem_sha256") is not None}
    for problem in problems:
        row = recorded.get(problem.uri)
        if row is None or row["problem_sha256"] == problem_sha256(problem):
            continue
        failed = (f"; its reference failed then ({row['error']})"
                  if row.get("error") is not None else "")
        now = problem_sha256(problem)
        raise SourceMismatchError(
            problem.path, f"is not the file {out} recorded as {problem.uri} (sha256 "
            f"{row['problem_sha256'][:12]}... then, {(now or 'unreadable')[:12]}... now"
            f"{failed})", "a recording is of one version of each file: record the edited "
            "file into another --out" + ("" if problem.split is not None else ", or under "
                                         "another file name") + "; or restore the recorded one")
    return list(seen.values())


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
            row = {"uri": problem.uri, "level": problem.level,
                   "problem_sha256": problem_sha256(problem), **info}
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
