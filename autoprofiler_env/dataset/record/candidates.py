"""The ``candidates`` part: every applicable transformation of every problem compiled, judged
and timed (``candidates.jsonl``)."""

from __future__ import annotations

import hashlib
import queue
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

from tqdm import tqdm

from autoprofiler_env.dataset.record.machine import (
    SAME_MACHINE,
    _past,
    check_machine,
    machine_info,
)
from autoprofiler_env.errors import EvaluationError
from autoprofiler_env.harness import Evaluator, HarnessConfig
from autoprofiler_env.harness.records import JUDGE_VERSION, ErrorKind, EvalResult
from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl
from autoprofiler_env.problems import Problem

CANDIDATE_TIMEOUT_S = 600.0
"""The judge's default limit for one candidate of a recording: its compile, correctness runs
and timing (the suite's recordings were made with it). KernelBench's recording uses
KernelBench's own (:data:`~autoprofiler_env.dataset.record.kernelbench.CANDIDATE_TIMEOUT_S`)."""


HOLD_SHARE = 0.5
"""The share of the GPU's memory that a batch's held candidates may take together, each
counted as its problem's reference peak: a candidate that would take them beyond it is not
held, and is judged alone (KernelBench's largest outputs are 8.6 GB). Until 2026-12-03 every
candidate of a batch was counted at the peak of the one deciding, so one large problem
batched with small ones was judged alone (``level3/31_VisionAttention``: 12.4 GB times 6)."""


def failure(outcome: EvalResult | Exception) -> str:
    """A failed verdict, or an exception the judge raised, in one line of a log: the
    verdict's kind or the exception's type, and the last line of its message, shortened. A
    batch's failure is judged again alone and only that verdict is recorded, so the log is
    where the first one's cause is kept."""
    if isinstance(outcome, EvalResult):
        name, message = str(outcome.error_name), outcome.error_message
    else:
        name, message = f"raised {type(outcome).__name__}", str(outcome)
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return name
    last = lines[-1] if len(lines[-1]) <= 160 else lines[-1][:159] + "…"
    return f"{name}: {last}"


class _Cancelled(Exception):
    """A held evaluation let go without its timing."""


class _Turn:
    """One candidate of a batch: whether it reached its timing (``paused`` there until
    ``go``), its result and the evaluator that judges it."""

    def __init__(self, label: str, hold: bool, admit) -> None:
        self.label, self.hold, self.admit = label, hold, admit  # admit(turn): the GPU holds it
        self.reached = threading.Event()  # paused before its timing, or done
        self.go = threading.Event()
        self.paused = self.cancelled = False
        self.result: EvalResult | None = None
        self.error: Exception | None = None  # what the judge raised instead of a result
        self.evaluator: Evaluator | None = None
        self.since: float | None = None
        self.peak: int | None = None  # its problem's reference peak, where measured

    def __call__(self) -> None:  # Evaluator.evaluate's pause
        self.paused = True
        self.hold = self.hold and self.admit(self)
        tqdm.write(f"compiled {self.label}: {time.monotonic() - self.since:.0f} s"
                   f"{'' if self.hold else ' (not held)'}", file=sys.stderr)
        self.reached.set()
        if self.hold:
            self.go.wait()
        if self.cancelled or not self.hold:
            raise _Cancelled


class WarmBatch:
    """What :meth:`CandidateWarmer.batch` compiled: ``stopped`` (the items whose compile a
    limit or the deadline stopped, by index, with the seconds each ran, 0 for one that never
    began), and each held item's timing, taken by :meth:`finish` one at a time. A context
    manager: closing lets go of the items not finished."""

    def __init__(self, turns: list[_Turn], futures: list) -> None:
        self.turns, self.futures = turns, futures
        self.stopped: dict[int, float] = {}

    def finish(self, index: int, until: float | None = None) -> EvalResult | None:
        """Item ``index`` warmed up and timed now, the GPU its alone (the batch's other
        candidates wait, compiled, in their processes): its result where it is correct, else
        None, and the item must be judged alone: it was stopped, it was not held (its
        problem's reference peak, with those of the batch's candidates held before it, was
        over :data:`HOLD_SHARE` of the GPU's memory), or it failed, before its timing or in
        it (a failure reached beside other compiles, or beside their held processes, is not
        kept: the memory or time they took may be its cause; judged alone, the verdict is
        the judge's own).
        ``until`` (a ``time.monotonic()`` instant): a timing not done by then is interrupted,
        and None returned."""
        if not self.turns:
            return None
        turn = self.turns[index]
        if index in self.stopped or not turn.paused or turn.go.is_set() or _past(until):
            return None
        turn.go.set()
        left = None if until is None else max(until - time.monotonic(), 0.0)
        if wait([self.futures[index]], timeout=left).not_done:
            evaluator = turn.evaluator
            if evaluator is not None:
                evaluator.interrupt()
            wait([self.futures[index]])
            return None
        result = turn.result
        return result if result is not None and result.correct else None

    def close(self, interrupt: bool = False) -> None:
        """Lets go of the items still held; ``interrupt``: stops the one being timed too."""
        for turn in self.turns:
            if not turn.go.is_set():
                turn.cancelled = True
                turn.go.set()
            elif interrupt and turn.evaluator is not None:
                turn.evaluator.interrupt()
        wait(self.futures)

    def __enter__(self) -> WarmBatch:
        return self

    def __exit__(self, kind, *exc) -> None:
        self.close(interrupt=kind is not None)


class CandidateWarmer:
    """Compiles candidates in ``workers`` worker processes at once, so that the GPU is not
    idle while one compiles: :meth:`batch` compiles and checks a batch of them at once, each
    held in its process before its timing, then times them one at a time, so that no timing
    shares the machine with a compile (nor a load from Inductor's cache: 6-10 s a candidate
    on the H200); :meth:`warm` only fills Inductor's on-disk cache. ``cache_dir``: the
    compile caches (default: the harness's). A context manager: the workers live until it
    closes, across calls."""

    def __init__(self, config: HarnessConfig, workers: int,
                 timeout_s: float = CANDIDATE_TIMEOUT_S,
                 cache_dir: str | Path | None = None) -> None:
        self._device, self._gpu_bytes = config.device, None
        self._all = [Evaluator(config, timeout_s=timeout_s, spare=False, keep_outputs=False,
                               cache_dir=cache_dir)
                     for _ in range(workers if workers > 1 else 0)]
        self._stopping = False
        self._free: queue.Queue = queue.Queue()
        for evaluator in self._all:
            self._free.put(evaluator)
        self._pool = ThreadPoolExecutor(len(self._all)) if self._all else None

    def warm(self, items: list[tuple[Problem, str, str]], deadline: float | None = None,
             limit_s: float | None = None) -> dict[int, float]:
        """Compiles ``(problem, name, source)`` items, each in whichever worker is free, for
        at most ``limit_s`` seconds in all, filling Inductor's on-disk cache; returns the
        items it did not compile to the end (:attr:`WarmBatch.stopped`)."""
        with self.batch(items, deadline, limit_s, hold=False) as batch:
            return batch.stopped

    def batch(self, items: list[tuple[Problem, str, str]], deadline: float | None = None,
              limit_s: float | None = None, hold: bool = True) -> WarmBatch:
        """Loads (compiles) ``(problem, name, source)`` items and runs their correctness
        checks, each in whichever worker is free, for at most ``limit_s`` seconds in all;
        with ``hold``, at most one item per worker, each then held before its timing
        (:meth:`WarmBatch.finish`). At the deadline or the limit (or on an exception,
        SIGTERM's SystemExit included) the compiles in flight are killed and the rest
        dropped (``stopped``): an item not compiled is judged alone by the caller, within
        the judge's limit. Each compile's seconds, and the compiles stopped, are written to
        the log (stderr). Without workers nothing is compiled, and nothing stopped."""
        if self._pool is None or not items:
            return WarmBatch([], [])
        if hold and len(items) > len(self._all):
            raise ValueError(f"{len(items)} candidates held in {len(self._all)} workers")
        if _past(deadline):
            batch = WarmBatch([], [])
            batch.stopped = dict.fromkeys(range(len(items)), 0.0)
            return batch
        if limit_s is not None:
            until = time.monotonic() + limit_s
            deadline = until if deadline is None else min(deadline, until)
        self._stopping = False  # set when this call is stopped, until its threads are done
        admitting = threading.Lock()

        def admit(turn: _Turn) -> bool:  # one at a time: beside the batch's held ones
            with admitting:
                turn.peak = turn.evaluator.peak_memory_bytes
                held = sum(t.peak or 0 for t in turns if t is not turn and t.paused and t.hold)
                return self._fits(turn.peak, held)

        turns = [_Turn(f"{problem.uri} {name}", hold, admit) for problem, name, _ in items]

        def one(turn: _Turn, problem: Problem, source: str) -> None:
            if _past(deadline) or self._stopping:
                return
            evaluator = self._free.get()  # one item at a time per worker process
            try:
                if not self._stopping:
                    turn.evaluator, turn.since = evaluator, time.monotonic()
                    turn.result = evaluator.evaluate(problem, source, pause=turn)
            except Exception as e:  # let go, or broken: a broken candidate is judged alone
                turn.error = e
            finally:
                turn.evaluator = None
                if not turn.reached.is_set() and not self._stopping and turn.since is not None:
                    outcome = turn.result or turn.error
                    failed = f" ({failure(outcome)})" if outcome is not None else ""
                    tqdm.write(f"compiled {turn.label}: "
                               f"{time.monotonic() - turn.since:.0f} s{failed}", file=sys.stderr)
                turn.reached.set()
                self._free.put(evaluator)

        batch = WarmBatch(turns, [self._pool.submit(one, turn, problem, source)
                                  for turn, (problem, _, source) in zip(turns, items)])
        try:
            with tqdm(total=len(items), desc="compile", leave=False) as bar:
                for turn in turns:
                    left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                    if not turn.reached.wait(left):
                        raise TimeoutError
                    bar.update()
        except BaseException as e:  # the deadline, or the process is being stopped
            self._stopping = True
            now = time.monotonic()
            late = [i for i, turn in enumerate(turns) if not turn.reached.is_set()]
            for i in late:
                since = turns[i].since
                batch.stopped[i] = 0.0 if since is None else now - since
                if since is not None:
                    tqdm.write(f"compile stopped after {now - since:.0f} s: {turns[i].label}",
                               file=sys.stderr)
            for i in late:  # one that reaches its pause now is let go there
                turns[i].cancelled = True
                turns[i].go.set()
            running = [batch.futures[i] for i in late]
            while running:  # again until done: one that began after a round is stopped by
                for i in late:  # the next (its process had not started)
                    evaluator = turns[i].evaluator
                    if evaluator is not None and not turns[i].reached.is_set():
                        evaluator.interrupt()
                running = list(wait(running, timeout=0.5).not_done)
            if not isinstance(e, TimeoutError):
                batch.close()
                raise
        return batch

    @property
    def occupied(self) -> bool:
        """Whether a worker still holds a problem on the device (its reference worker keeps
        its last problem's model and inputs, a held candidate its own)."""
        return any(evaluator.worker_pid is not None for evaluator in self._all)

    def release(self) -> None:
        """Stops every worker's processes (call between batches), so that a candidate judged
        next has the GPU's memory to itself; the next batch starts new ones."""
        for evaluator in self._all:
            evaluator.close()

    @property
    def gpu_bytes(self) -> int | None:
        """The GPU's memory; None on a CPU."""
        if not self._device.startswith("cuda"):
            return None
        if self._gpu_bytes is None:
            import torch

            self._gpu_bytes = torch.cuda.get_device_properties(self._device).total_memory
        return self._gpu_bytes

    def _fits(self, peak_bytes: int | None, held_bytes: int) -> bool:
        """Whether a candidate of a problem whose reference peaks at ``peak_bytes`` can wait
        on the GPU beside held candidates counted at ``held_bytes`` (each is assumed to need
        as much as its reference): within :data:`HOLD_SHARE` of the GPU's memory."""
        if self.gpu_bytes is None or not peak_bytes:
            return True
        return peak_bytes + held_bytes <= HOLD_SHARE * self.gpu_bytes

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
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
    device: :data:`~.machine.SAME_MACHINE`); it is marked ``reused: true``. ``out``'s own
    rows must be this machine's (:func:`~.machine.check_machine`).

    In batches that hold ``warm_workers`` candidates which generate code (``compile``,
    ``max_autotune``, a Triton kernel), on a GPU fewer where their estimated memory while
    checked (:func:`footprint`, from the problem's sizes and its peak in ``reference.jsonl``
    beside ``out``) would pass :data:`BATCH_SHARE` of it: those are first compiled, and
    checked on the correctness sets, in ``warm_workers`` processes at once, each then held
    in its process (:meth:`CandidateWarmer.batch`); then the batch is timed one candidate
    at a time, in order, so that no two timings share the GPU and none shares the machine
    with a compile.
    A held candidate is timed in the process that compiled it: its load from Inductor's
    cache (6-10 s on the H200) and its correctness runs are not done twice. One that failed
    (before its timing or in it) is judged again alone: a failure reached beside other
    compiles is not kept. A candidate that generates no code is judged alone, in its place
    (loading it takes a fraction of a second). A verdict of too little GPU memory
    (:func:`starved`) is not kept either: the candidate is judged again after the batch, and
    if it starves again, once more with the GPU to itself, the warm workers' processes
    stopped (:meth:`CandidateWarmer.release`) and the judge's own reference process too
    (KernelBench's ``level1/31_ELU`` ``compile``, 2026-12-03: 1.8 of the H200's 139.8 GB
    were left to it "alone", beside the batch's held candidates and the warm workers'
    reference processes); that verdict stands (:func:`judged`).
    One compile per worker per batch: the first timing starts a compile's length after the
    start, and a time budget that runs out wastes at most the compiles in flight (H200, 12
    workers: batches of 48 took 3-5 min to compile, and a 9-minute chunk judged 16-21
    candidates of them); the batch's candidates already held are still timed, for up to
    :data:`HELD_GRACE_S` past it.

    ``timeout_s`` is the judge's limit for one candidate (its compile, correctness runs and
    timing): one that outlasts it is recorded as failed, ``error_kind: "timeout"``, the limit
    in its row. A batch's warming stops after the same limit, leaving what it did not
    compile to the timed pass, which compiles it alone, after every other candidate of the
    call: a time budget then runs out on the slow compiles, not on the quick candidates
    queued behind them (KernelBench's DenseNet201: four compiles stopped at 180 s, then 2 of
    a chunk's 28 candidates judged in the 5 minutes left). So a compile that never ends
    costs twice the limit, and a batch with k of them up to k + 1 limits, where before it
    held the recording up for good (KernelBench's first warm batch outlasted five
    5-9-minute commands). A compile the limit stopped is logged (:data:`WARM_STOPPED`) and
    not warmed again by a later call; one expected to outlast a batch (a large network's
    ``max_autotune``: :func:`compiles_long`) is not warmed at all. Such slow candidates
    start only with the judge's whole limit left before the deadline: one that a command's
    end cuts loses its compile, where the next call would judge it within the limit.
    A reused row that timed out under a shorter limit than ``timeout_s`` is judged again.
    """
    from autoprofiler_env.optimizers import applicable
    from autoprofiler_env.optimizers.compose import compose

    done = judged(read_jsonl(out))
    info = machine_info(config.device)
    check_machine([out], info, out.parent)
    machine = {k: info.get(k) for k in SAME_MACHINE}
    reusable = {(r["uri"], r["transformation"], r.get("source_sha256")): r for r in reuse
                if r.get("judge") == JUDGE_VERSION and _stands(r)
                and all(r.get(k) == v for k, v in machine.items())
                and not (r.get("error_kind") == "timeout"
                         and r.get("timeout_s", CANDIDATE_TIMEOUT_S) < timeout_s)}
    todo, copied, costs, features_of = [], [], {}, {}
    peaks = {r["uri"]: r["peak_memory_mb"] * 2**20 for r in read_jsonl(
        out.with_name("reference.jsonl")) if r.get("peak_memory_mb") is not None}
    if plan is not None:  # in the plan's order
        rank = {uri: i for i, uri in enumerate(plan)}
        problems = sorted((p for p in problems if p.uri in rank), key=lambda p: rank[p.uri])
    if plan is not None:
        problems = [p for p in problems if p.uri in plan]
    recordable = candidate_features(problems, out.with_name("reference.jsonl"))
    for problem in problems:
        if problem.uri not in recordable:
            continue
        features = recordable[problem.uri]
        costs[problem.uri] = footprint(features, peaks.get(problem.uri))
        features_of[problem.uri] = features
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
        stopped_log = out.with_name(WARM_STOPPED)
        too_slow = {(r["uri"], r["transformation"], r["source_sha256"])
                    for r in read_jsonl(stopped_log) if r["ran_s"] >= _LIMIT_RAN * timeout_s}

        def key(item):
            return item[0].uri, item[1], _sha256(item[2])

        def judge(item, result=None, last=False) -> bool:  # alone unless the batch timed it
            problem, name, source = item
            if result is None:
                result = evaluator.evaluate(problem, source)
            if result.error_kind in CHEATING:
                raise EvaluationError(
                    f"{problem.uri}: the judge refused the reference optimizer's own {name!r} "
                    f"as {result.error_name} ({result.error_message[:200]}): one of its "
                    "checks is wrong about an honest program (docs/harness.md); nothing was "
                    "recorded for it")
            if starved(result) and not last:  # not the candidate's fault, maybe
                return False
            row = outcome_row(problem, name, result, info, source, timeout_s)
            log.write({**row, **LAST_TRY} if last else row)
            bar.update()
            return True

        def judge_alone(items, need_s: float = 0.0) -> None:  # in order, until the deadline
            def room() -> bool:  # for one more, which may take need_s; the call's first
                if _past(deadline):  # starts anyway (a budget under need_s would never)
                    return False
                return deadline is None or bar.n == 0 or deadline - time.monotonic() >= need_s

            starving = [item for item in items if room() and not judge(item)]
            if starving:  # out of memory beside other processes: the GPU to itself
                warmer.release()
                for item in starving:
                    if room():
                        evaluator.close()  # the judge's reference process, its kept outputs
                        judge(item, last=True)

        def alone(item) -> bool:  # stopped by an earlier call, or expected to be
            return key(item) in too_slow or compiles_long(item[1], features_of[item[0].uri])

        slow = [item for item in todo if alone(item)]
        gpu_bytes = warmer.gpu_bytes
        for members in warm_batches([i for i in todo if not alone(i)], warm_workers,
                                    lambda item: costs[item[0].uri],
                                    None if gpu_bytes is None else BATCH_SHARE * gpu_bytes):
            if _past(deadline):
                break
            compiling = [item for item in members if generates_code(item[1])]
            with warmer.batch(compiling, deadline, limit_s=timeout_s) as batch:
                stops = [(key(compiling[i]), seconds) for i, seconds in batch.stopped.items()
                         if seconds >= _LIMIT_RAN * timeout_s]  # the limit, not the deadline
                if stops:
                    with JsonlAppender(stopped_log) as log_stops:
                        for (uri, name, sha), seconds in stops:
                            log_stops.write({"uri": uri, "transformation": name,
                                             "source_sha256": sha, "ran_s": round(seconds, 1),
                                             "limit_s": timeout_s})
                index = {id(item): i for i, item in enumerate(compiling)}
                later = []  # out of memory beside the batch: judged again after it
                for item in members:  # one at a time, in order; what was not compiled, last
                    i = index.get(id(item))
                    if _past(deadline):  # only the held ones: their compiles are done
                        if i is not None and (
                                result := batch.finish(i, until=deadline + HELD_GRACE_S)):
                            judge(item, result)
                        continue
                    if i in batch.stopped:
                        slow.append(item)
                    elif not judge(item, None if i is None else batch.finish(i)):
                        later.append(item)
            judge_alone(later)
        judge_alone(slow, need_s=timeout_s)  # a slow compile cut by the budget is lost
    return read_jsonl(out)


CHEATING = (ErrorKind.STATIC, ErrorKind.SANDBOX, ErrorKind.STRUCTURE, ErrorKind.PROTOCOL)
"""Verdicts that say a candidate cheated or broke the judge's rules. The recorder judges the
reference optimizers' own transformations, which do neither: such a verdict is the judge's
error (a check new to it and not yet run where the recording runs, say), and recording it as
the candidate's outcome would put it in the dataset, so the recording stops instead."""


def starved(outcome: EvalResult | dict) -> bool:
    """Whether a candidate failed for want of GPU memory, in its process or in the judge's:
    a verdict that the other processes on the GPU may have caused. ``outcome``: a result, or
    its row of ``candidates.jsonl``."""
    if isinstance(outcome, EvalResult):
        correct, kind, message = outcome.correct, outcome.error_name, outcome.error_message
    else:
        correct, kind, message = (outcome["correct"], outcome.get("error_kind"),
                                  outcome.get("error_message") or "")
    return not correct and (kind == ErrorKind.OUT_OF_MEMORY.value
                            or "OutOfMemoryError" in message)


def candidate_features(problems: list[Problem], reference_log: Path) -> dict:
    """The problems whose candidates can be recorded, with their static features, in their
    order: those whose reference was timed, or not tried yet (a problem whose reference
    failed has none to beat; its row in ``reference_log`` says why), and whose features can
    be computed (one that cannot is said in a warning, naming the problem and why, and the
    others are recorded: one broken file does not stop the part)."""
    from autoprofiler_env.errors import ProblemError, warn
    from autoprofiler_env.features import static_features

    failed = {r["uri"] for r in read_jsonl(reference_log) if r.get("error") is not None}
    found = {}
    for problem in problems:
        if problem.uri in failed:
            continue
        try:
            found[problem.uri] = static_features(problem)
        except ProblemError as e:
            warn(f"{e}: its candidates are not recorded")
    return found


def judged(rows: list[dict]) -> set[tuple[str, str]]:
    """The ``(uri, candidate)`` pairs of ``candidates.jsonl`` rows whose verdict stands: all
    but a verdict of too little GPU memory (:func:`starved`) reached while other processes of
    the recorder held the GPU, which the next call judges again; a starved verdict counts
    only where it was reached on the last try (:data:`LAST_TRY`). Of a pair recorded twice,
    the later row is the verdict (as in a build)."""
    last = {(r["uri"], r["transformation"]): r for r in rows}
    return {pair for pair, r in last.items() if _stands(r)}


LAST_TRY = {"gpu_to_itself": True, "caches_returned": True}
"""The marks of a candidate's last try, after verdicts of too little GPU memory: the GPU to
itself (the warm workers' processes stopped, and the judge's own reference process and kept
outputs), and every process of the judge returning the memory its allocator caches beyond
what it uses (:func:`~autoprofiler_env.harness.worker.return_cached`). A starved verdict
stands only with both. Before 2026-12-04 the last try kept the judge's reference process
and outputs (KernelBench's ``level1/87``'s ``tf32`` and ``level1/36``'s ``compile`` ran out
of the H200's memory on it: no mark); until the second session of that day the processes
kept their caches (``level1/87``'s ``tf32`` and ``level1/63``'s ``tf32+channels_last``, in
their re-checks, ``level1/87``'s beside 93 GiB held by the judge's and the reference's:
``gpu_to_itself`` alone). Rows without both marks are judged again."""


def _stands(row: dict) -> bool:
    """Whether a row of ``candidates.jsonl`` is a verdict (:func:`judged`)."""
    return not starved(row) or all(row.get(k) == v for k, v in LAST_TRY.items())


LONG_COMPILE_OPS = {"max_autotune": 40, "compile": 300}
"""The dispatched operators (``StaticFeatures.n_ops``) from which a candidate's compile is
expected to outlast a warm batch (:func:`compiles_long`): KernelBench's level-3 networks on
the H200, whose ``max_autotune`` held their batches to the judge's 180 s limit (``12_VGG19``,
42 operators; ``20_MobileNetV2``, 193; each then a ``timeout`` alone) or took 56-163 s
alone (``24_EfficientNetB2``, 90; ``19_MobileNetV1``, 110), where every one under 40 took
2-143 s in its batch (``27_RegNet``, 29: the longest); ``16_DenseNet201``'s (515) first
four ``compile`` candidates took 128-152 s each alone, after its batch had stopped them all
at 180 s."""


def compiles_long(name: str, features) -> bool:
    """Whether a candidate's compile is expected to outlast a warm batch: it autotunes
    (``max_autotune``) a problem of at least ``LONG_COMPILE_OPS["max_autotune"]`` operators,
    or compiles one of at least ``LONG_COMPILE_OPS["compile"]``. An RNN's operators are
    cuDNN's, which Inductor leaves alone (``level3/37_LSTMCn``, 3,073 operators, compiled in
    17 s). The recorder judges such a candidate alone, after the call's others, as one
    whose warm compile the limit stopped: a batch would wait on it for up to the limit, and
    a compile stopped there is judged alone anyway."""
    from autoprofiler_env.optimizers.compose import parts

    if not generates_code(name) or tuple(features.tags[:1]) == ("rnn",):
        return False
    autotunes = any(part.startswith("max_autotune") for part in parts(name))
    return features.n_ops >= LONG_COMPILE_OPS["max_autotune" if autotunes else "compile"]


def generates_code(name: str) -> bool:
    """Whether a (composed) candidate compiles code when it first runs: a codegen part
    (Inductor, or a Triton kernel's JIT), which the warm workers compile ahead of timing."""
    from autoprofiler_env.optimizers.compose import kind, parts

    return any(kind(part) == "codegen" for part in parts(name))


def warm_batches(todo: list[tuple], warm_workers: int, cost=None,
                 budget: float | None = None) -> list[list[tuple]]:
    """``(problem, name, source)`` items, in order, cut into batches that each hold at most
    ``warm_workers`` candidates that generate code (at least one), and, with ``cost`` (an
    item's bytes of GPU memory while it compiles and is checked: :func:`footprint`) and
    ``budget``, candidates that generate code whose costs sum to at most ``budget`` (one
    that alone costs more is a batch of its own)."""
    per_batch, bounded = max(warm_workers, 1), cost is not None and budget is not None
    batches, current, compiling, used = [], [], 0, 0.0
    for item in todo:
        if generates_code(item[1]):
            need = cost(item) if bounded else 0
            if compiling == per_batch or (bounded and compiling and used + need > budget):
                batches.append(current)
                current, compiling, used = [], 0, 0.0
            compiling += 1
            used += need
        current.append(item)
    if current:
        batches.append(current)
    return batches


BATCH_SHARE = 0.8
"""The share of the GPU's memory that a warm batch's candidates may take together while they
compile and are checked (:func:`footprint`); the rest is the judge's and the timed
candidate's. Until 2026-12-03 only the candidates held after their checks were counted
(:data:`HOLD_SHARE`), so six candidates of one large problem were checked at once:
KernelBench's ``level3/17_SqueezeNetFireModule`` (a 4.3 GB output, an 8.5 GB peak), five of
six in a batch failing in 1-2 s."""


def footprint(features, peak_bytes: int | None) -> int:
    """A warm candidate's GPU memory while it is checked, estimated: its process and its
    worker's reference process, each at the problem's reference peak (at least its inputs,
    parameters and outputs: ``features.bytes_min``; a reference process keeps the blocks of
    its last outputs cached), and the judge's two copies of an output it compares."""
    return 2 * max(peak_bytes or 0, features.bytes_min) + 2 * features.output_bytes


HELD_GRACE_S = 20.0
"""How long past the deadline a batch's held candidates (compiled and checked before it) are
still timed: a timing takes a second or two (0.4-1.9 s on the H200 with its warm-up and
re-check), and one dropped at the deadline throws its compile away (2026-12-03: four held
candidates of three problems, about 70 s of compiles, dropped by a command's budget). The
device script kills the recorder 40 s after its budget. A held candidate that fails, or is
not timed by then, is left for the next call."""

WARM_STOPPED = "warm_stopped.jsonl"
"""Beside ``candidates.jsonl``: the candidates whose warm compile a batch stopped at the
judge's limit. A later call does not warm them again (a resumed KernelBench recording warmed
``level3/19_MobileNetV1``'s ``max_autotune+cuda_graph`` for 180 s in two commands before
judging it): they are judged alone, after the call's other candidates."""

_LIMIT_RAN = 0.95
"""A stopped compile that ran this share of the limit was stopped by the limit (a deadline
stops one sooner)."""

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
