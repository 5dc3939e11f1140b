"""The ``candidates`` part: every applicable transformation of every problem compiled, judged
and timed (``candidates.jsonl``)."""

from __future__ import annotations

import hashlib
import queue
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed, wait
from pathlib import Path

from tqdm import tqdm

from autoprofiler_env.dataset.record.machine import _past, machine_info
from autoprofiler_env.harness import Evaluator, HarnessConfig
from autoprofiler_env.harness.records import JUDGE_VERSION
from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl
from autoprofiler_env.problems import Problem

CANDIDATE_TIMEOUT_S = 600.0
"""The judge's default limit for one candidate of a recording: its compile, correctness runs
and timing (the suite's recordings were made with it). KernelBench's recording uses
KernelBench's own (:data:`~autoprofiler_env.dataset.record.kernelbench.CANDIDATE_TIMEOUT_S`)."""


class CandidateWarmer:
    """Compiles candidates in ``workers`` worker processes at once, filling Inductor's on-disk
    cache, so that judging and timing them one at a time afterwards spends its time on the
    GPU. Errors are left for that pass to judge and record. A context manager: the workers
    live until it closes, across calls of :meth:`warm`."""

    def __init__(self, config: HarnessConfig, workers: int,
                 timeout_s: float = CANDIDATE_TIMEOUT_S) -> None:
        from dataclasses import replace

        self.workers = workers
        warm_config = replace(config, n_correctness=1, timing_budget_ms=1, min_trials=1,
                              max_trials=1, warmup_ms=0, flush_l2=False)
        self._all = [Evaluator(warm_config, timeout_s=timeout_s, spare=False)
                     for _ in range(workers if workers > 1 else 0)]
        self._stopping = False
        self._free: queue.Queue = queue.Queue()
        for evaluator in self._all:
            self._free.put(evaluator)

    def warm(self, items: list[tuple[Problem, str, str]], deadline: float | None = None,
             limit_s: float | None = None) -> set[int]:
        """Compiles ``(problem, name, source)`` items, each in whichever worker is free, for
        at most ``limit_s`` seconds in all; returns the indices of the items it did not
        compile to the end (none without workers). At the deadline or the limit (or on an
        exception, SIGTERM's SystemExit included) the compiles in flight are killed and the
        rest dropped: warming saves nothing that a later call needs, and a candidate it did
        not compile is compiled alone by the timed pass, within the judge's limit. Each
        compile's seconds, and the compiles stopped, are written to the log (stderr)."""
        if self.workers <= 1 or not items:
            return set()
        if _past(deadline):
            return set(range(len(items)))
        if limit_s is not None:
            until = time.monotonic() + limit_s
            deadline = until if deadline is None else min(deadline, until)
        self._stopping = False  # set when this call is stopped, until its threads are done
        in_flight: dict[int, tuple[str, float]] = {}  # item's index: its label, its start
        compiled: set[int] = set()

        def one(index, item):
            problem, name, source = item
            if _past(deadline) or self._stopping:
                return
            evaluator = self._free.get()  # one item at a time per worker process
            label = f"{problem.uri} {name}"
            try:
                if not self._stopping:
                    in_flight[index] = (label, time.monotonic())
                    result = evaluator.evaluate(problem, source)
                    if not self._stopping:
                        compiled.add(index)
                        failed = "" if result.correct else f" ({result.error_name})"
                        tqdm.write(f"compiled {label}: "
                                   f"{time.monotonic() - in_flight[index][1]:.0f} s{failed}",
                                   file=sys.stderr)
            except Exception:  # a broken candidate is judged, and recorded, in the timed pass
                if not self._stopping:
                    compiled.add(index)
            finally:
                in_flight.pop(index, None)
                self._free.put(evaluator)

        with ThreadPoolExecutor(self.workers) as pool:
            futures = [pool.submit(one, i, item) for i, item in enumerate(items)]
            timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                for _ in tqdm(as_completed(futures, timeout=timeout), total=len(items),
                              desc="compile", leave=False):
                    pass
            except BaseException as e:  # the deadline, or the process is being stopped
                self._stopping = True
                now = time.monotonic()
                for label, since in list(in_flight.values()):
                    tqdm.write(f"compile stopped after {now - since:.0f} s: {label}",
                               file=sys.stderr)
                for future in futures:
                    future.cancel()
                running = [f for f in futures if not f.done()]
                while running:  # again until done: one that began after a round is stopped
                    for evaluator in self._all:  # by the next (its process had not started)
                        evaluator.interrupt()
                    running = list(wait(running, timeout=0.5).not_done)
                if not isinstance(e, TimeoutError):
                    raise
        return set(range(len(items))) - compiled

    def close(self) -> None:
        for evaluator in self._all:
            evaluator.close()

    def __enter__(self) -> CandidateWarmer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def record_candidates(problems: list[Problem], out: Path, config: HarnessConfig,
                      warm_workers: int = 6, timeout_s: float = CANDIDATE_TIMEOUT_S,
                      deadline: float | None = None,
                      plan: dict[str, list[str]] | None = None,
                      reuse: list[dict] = ()) -> list[dict]:
    """Judges and times the candidates of every problem not yet in ``out``: with ``plan``
    (URI -> candidate names, composed or not; :mod:`.plan`) those, in that order; without,
    every applicable transformation. A row of ``reuse`` (another recording's, or a re-judge's)
    is copied instead of measuring again where its judge is this one, its source's sha256 is
    the candidate's and it was measured on this kind of machine (the same GPU, torch and
    device: ``_SAME_MACHINE``); it is marked ``reused: true``.

    In batches that hold ``warm_workers`` candidates which generate code (``compile``,
    ``max_autotune``, a Triton kernel): those are first compiled in ``warm_workers``
    processes at once (filling Inductor's on-disk cache), then the batch is judged and timed
    one candidate at a time, so that no two timings share the GPU. A candidate that generates
    no code is not warmed (loading it takes a fraction of a second). One compile per worker
    per batch: the first timing starts a compile's length after the start, and a time budget
    that runs out wastes at most one batch's compiles (H200, 12 workers: batches of 48 took
    3-5 min to compile, and a 9-minute chunk judged 16-21 candidates of them).

    ``timeout_s`` is the judge's limit for one candidate (its compile, correctness runs and
    timing): one that outlasts it is recorded as failed, ``error_kind: "timeout"``, the limit
    in its row. A batch's warming stops after the same limit, leaving what it did not
    compile to the timed pass, which compiles it alone, after every other candidate of the
    call: a time budget then runs out on the slow compiles, not on the quick candidates
    queued behind them (KernelBench's DenseNet201: four compiles stopped at 180 s, then 2 of
    a chunk's 28 candidates judged in the 5 minutes left). So a compile that never ends
    costs twice the limit, and a batch with k of them up to k + 1 limits, where before it
    held the recording up for good (KernelBench's first warm batch outlasted five
    5-9-minute commands).
    A reused row that timed out under a shorter limit than ``timeout_s`` is judged again.
    """
    from autoprofiler_env.features import static_features
    from autoprofiler_env.optimizers import applicable
    from autoprofiler_env.optimizers.compose import compose

    done = {(r["uri"], r["transformation"]) for r in read_jsonl(out)}
    info = machine_info(config.device)
    machine = {k: info.get(k) for k in _SAME_MACHINE}
    reusable = {(r["uri"], r["transformation"], r.get("source_sha256")): r for r in reuse
                if r.get("judge") == JUDGE_VERSION
                and all(r.get(k) == v for k, v in machine.items())
                and not (r.get("error_kind") == "timeout"
                         and r.get("timeout_s", CANDIDATE_TIMEOUT_S) < timeout_s)}
    todo, copied = [], []
    if plan is not None:  # in the plan's order
        rank = {uri: i for i, uri in enumerate(plan)}
        problems = sorted((p for p in problems if p.uri in rank), key=lambda p: rank[p.uri])
    for problem in problems:
        if plan is not None and problem.uri not in plan:
            continue
        features = static_features(problem)
        names = (plan[problem.uri] if plan is not None else
                 [t.name for t in applicable(problem, features, config.device)])
        for name in names:
            if (problem.uri, name) in done:
                continue
            source = compose(problem, features, name)
            row = reusable.get((problem.uri, name, _sha256(source)))
            if row is not None:
                copied.append({**row, "reused": True})
            else:
                todo.append((problem, name, source))
    if copied:
        with JsonlAppender(out) as log:
            for row in copied:
                log.write(row)
    if not todo:
        return read_jsonl(out)
    with CandidateWarmer(config, warm_workers, timeout_s) as warmer, \
            Evaluator(config, timeout_s=timeout_s) as evaluator, JsonlAppender(out) as log, \
            tqdm(total=len(todo), desc="judge and time") as bar:
        def in_order():  # batch by batch, warmed first; what warming did not finish, last
            slow = []
            for members in warm_batches(todo, warm_workers):
                compiling = [item for item in members if generates_code(item[1])]
                stopped = {id(compiling[i]) for i in warmer.warm(compiling, deadline,
                                                                  limit_s=timeout_s)}
                slow += [item for item in members if id(item) in stopped]
                yield from (item for item in members if id(item) not in stopped)
            yield from slow

        for problem, name, source in in_order():
            if _past(deadline):
                break
            log.write(outcome_row(problem, name, evaluator.evaluate(problem, source), info,
                                  source, timeout_s))
            bar.update()
    return read_jsonl(out)


def generates_code(name: str) -> bool:
    """Whether a (composed) candidate compiles code when it first runs: a codegen part
    (Inductor, or a Triton kernel's JIT), which the warm workers compile ahead of timing."""
    from autoprofiler_env.optimizers.compose import kind, parts

    return any(kind(part) == "codegen" for part in parts(name))


def warm_batches(todo: list[tuple], warm_workers: int) -> list[list[tuple]]:
    """``(problem, name, source)`` items, in order, cut into batches that each hold at most
    ``warm_workers`` candidates that generate code (at least one)."""
    per_batch = max(warm_workers, 1)
    batches, current, compiling = [], [], 0
    for item in todo:
        if generates_code(item[1]):
            if compiling == per_batch:
                batches.append(current)
                current, compiling = [], 0
            compiling += 1
        current.append(item)
    if current:
        batches.append(current)
    return batches


_SAME_MACHINE = ("gpu", "torch", "device")
"""What a reused row's machine must share with this one."""


def _sha256(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def outcome_row(problem: Problem, name: str, result, info: dict, source: str,
                timeout_s: float | None = None) -> dict:
    """One line of ``candidates.jsonl``: a candidate's judgement and timing, with the judge's
    version, the source's sha256, the smallest tolerance it passes at (so that a stricter
    regime replays from it) and the judge's time limit (``timeout_s``, where given)."""
    return {"uri": problem.uri, "level": problem.level, "transformation": name,
            "correct": result.correct,
            "error_kind": result.error_name, "error_message": result.error_message[:300],
            "reference_ms": result.reference_ms, "candidate_ms": result.candidate_ms,
            "candidate_p20_ms": result.candidate.p20_ms if result.candidate else None,
            "candidate_p80_ms": result.candidate.p80_ms if result.candidate else None,
            "speedup": result.speedup, "max_abs_error": result.max_abs_error,
            "tolerance_needed": result.tolerance_needed,
            "timing_unexplained": result.timing_unexplained, "rechecked": result.rechecked,
            "judge": JUDGE_VERSION, "source_sha256": _sha256(source),
            "wall_s": result.wall_s, "phases_s": result.phases_s,
            **({} if timeout_s is None else {"timeout_s": timeout_s}), **info}
