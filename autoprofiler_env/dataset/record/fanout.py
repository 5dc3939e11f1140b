"""Recording on several GPUs: one unit of work per (problem, part), each in a process of its
own pinned to one GPU, its results handed to the driver, which writes the same resumable
recording as the single-GPU path (:func:`autoprofiler_env.dataset.record.record`).

    autoprofiler record --out DIR --workers 4                  # local processes, 4 GPUs
    autoprofiler record --out DIR --workers ray [--address A]  # a Ray cluster, 1 GPU a task

- **A unit** is a problem's reference timing, its ncu run of the full set, or its missing
  candidates. Its process runs the single-GPU path's own part function on that one problem
  in a scratch folder (seeded with what the recording already holds of it), so its rows are
  the ones that path would write. ``CUDA_VISIBLE_DEVICES`` names its GPU; ncu and the
  judge's processes inherit it.
- **The driver** writes each finished unit at once: rows appended to the part's JSON-lines
  file, an ncu run's folder written under a temporary name and renamed. Every file and the
  rows carry a sha256 made where they were recorded and checked where they are written.
  Killed, the driver loses at most the units in flight; run again, it skips what is done.
  Stopped by SIGTERM (``timeout``, a scheduler), it stops the units in flight itself and
  logs the device time they had taken, marked ``interrupted`` (local workers: Ray's tasks
  are cancelled, their time unknown to the driver).
- **A unit whose process dies** (killed, out of memory) is run again, ``retries`` times; then
  it is logged in ``failures.jsonl`` and left undone, so the next run tries it again. A
  problem that fails (a broken file, a crashing candidate) is not such a failure: the part
  records it as the single-GPU path does.
- **Device time** is logged per unit in ``timings.jsonl`` (with its GPU): summed, it is the
  recording's GPU-seconds, whatever the number of GPUs.
- **The llm part** waits on an endpoint, not a GPU: the driver keeps ``llm_concurrency``
  requests in flight (threads: a request holds no GPU, and the key stays on the driver's
  machine), writes each reply to ``llm_replies.jsonl`` as it comes (a reply is never asked
  for twice), and hands a problem to a GPU unit, which judges its replies, once all of them
  are in, while the requests of the next problems go on.

The machinery (:class:`Unit`, :func:`run_unit`, the workers, :func:`drive`, :func:`commit`)
serves any unit whose process module (:attr:`Setup.module`) reads its spec with
:func:`read_spec` and leaves its rows with :func:`write_result`: a live experiment's units
(``experiments.live``, one problem's episodes each) go through it too.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable, Iterator

from tqdm import tqdm

from autoprofiler_env.dataset.record.candidates import (
    CANDIDATE_TIMEOUT_S,
    candidate_features,
    judged,
)
from autoprofiler_env.dataset.record.reference import check_sources
from autoprofiler_env.errors import AutoProfilerError, install_hint
from autoprofiler_env.harness import HarnessConfig
from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl
from autoprofiler_env.problems import Problem
from autoprofiler_env.profiler.runner import terminate_becomes_exit

FANOUT_PARTS = ("reference", "full", "candidates", "llm")
"""The parts a fan-out records (``sets`` and ``profiles`` run on one GPU)."""
REPLIES = "llm_replies.jsonl"
"""The llm part's replies, one line each as it comes (:func:`.llm.ask`): judged later."""
FAILURES = "failures.jsonl"
"""One line per unit given up on in a run (its process died ``retries + 1`` times)."""
_SPEC, _RESULT = "spec.json", "result.json"


class UnitFailed(AutoProfilerError):
    """A unit's process died or left no intact result (the unit is retried, then logged)."""


@dataclass(frozen=True)
class Unit:
    """One unit of work: ``part`` of one problem (``candidates``: the names still to record,
    in the plan's order; ``start_s``: the least time left to the deadline with which it is
    started, :func:`_with_starts`)."""

    part: str
    problem: dict  # Problem.to_dict(): it travels to the unit's process
    candidates: tuple[str, ...] = ()
    start_s: float = 0.0

    @property
    def uri(self) -> str:
        return self.problem["uri"]


@dataclass
class Setup:
    """What every unit of a run shares."""

    config: HarnessConfig
    deadline_epoch: float | None = None  # wall-clock time.time(): processes share no clock
    warm_workers: int = 1
    max_ops: int | None = None
    reuse: list[dict] = field(default_factory=list)
    timeout_s: float = 3600.0  # a unit's process is killed after this
    candidate_timeout_s: float = CANDIDATE_TIMEOUT_S  # the judge's limit for one candidate
    alone: frozenset[str] = frozenset()  # ncu: capped from the start (.ncu.record_ncu)
    module: str = "autoprofiler_env.dataset.record.fanout"
    """The module run as a unit's process (``python -m MODULE SCRATCH --parent PID``): its
    ``main`` reads the spec from the scratch folder and leaves a result there
    (:func:`unit_main`); a live experiment's units run ``experiments.live``."""


# -- what is left to do ---------------------------------------------------------------------

def pending(out: Path, problems: list[Problem], parts, device: str,
            plan: dict[str, list[str]] | None = None) -> list[Unit]:
    """The units ``out`` does not hold yet, part by part in the recording's order: a problem's
    reference row, its ncu run of the full set (:func:`.ncu.covered`), the candidates of the
    plan (or, without one, every applicable transformation) not judged in ``candidates.jsonl``
    (:func:`.candidates.judged`)."""
    from autoprofiler_env.dataset.record.ncu import covered

    out = Path(out)
    units: list[Unit] = []
    if "reference" in parts:
        done = {r["uri"] for r in read_jsonl(out / "reference.jsonl")}
        units += [Unit("reference", p.to_dict()) for p in problems if p.uri not in done]
    if "full" in parts:
        done = covered(out / "sets" / "full")
        units += [Unit("full", p.to_dict()) for p in problems if p.uri not in done]
    if "candidates" in parts:
        from autoprofiler_env.optimizers import applicable

        done = judged(read_jsonl(out / "candidates.jsonl"))
        if plan is not None:
            rank = {uri: i for i, uri in enumerate(plan)}
            problems = sorted((p for p in problems if p.uri in rank), key=lambda p: rank[p.uri])
        if plan is not None:  # the plan names the candidates: traced only where some are
            # left (a problem that cannot be traced here is left out, as its unit would)
            problems = [p for p in problems if any((p.uri, n) not in done for n in plan[p.uri])]
        recordable = candidate_features(problems, out / "reference.jsonl")
        for p in problems:
            if p.uri not in recordable:
                continue
            names = (plan[p.uri] if plan is not None else
                     [t.name for t in applicable(p, recordable[p.uri], device)])
            left = tuple(n for n in names if (p.uri, n) not in done)
            if left:
                units.append(Unit("candidates", p.to_dict(), left))
    return units


START_UP_S = 10.0
"""How long a unit's process takes to reach its part's work (Python, torch, the harness): on
the H200 one unit a GPU started every 8-10 s (docs/dataset.md, "Several GPUs")."""


def _with_starts(out: Path, units: list[Unit], setup: Setup) -> list[Unit]:
    """``units`` with the least time left with which each is started, where a time budget
    bounds them: a full unit's is its ncu run's (:func:`~.ncu.ncu_starts`: ``MIN_RUN_S``, more
    for a problem profiled alone and capped) and its process's :data:`START_UP_S`. Checked
    when the units are listed and again as each one's turn comes (:func:`_late`): a unit that
    could start no run would only start a process."""
    full = {u.uri: _problem(u.problem) for u in units if u.part == "full"}
    if setup.deadline_epoch is None or not full:
        return units
    from autoprofiler_env.dataset.record.ncu import STEPPED_OPS, ncu_starts

    alone = {uri for uri, p in full.items() if uri in setup.alone or STEPPED_OPS & set(p.tags)}
    need = ncu_starts(list(full.values()), "full", out / "sets", alone=alone)
    return [u if u.part != "full" else replace(u, start_s=need[u.uri] + START_UP_S)
            for u in units if u.part != "full" or u.uri in need]


def _seed(out: Path, unit: Unit) -> dict:
    """What the recording holds of ``unit``'s problem that its part reads: the candidate rows
    recorded (so that none is judged twice), the saved ncu runs that hold it (a run that
    timed out is followed by a capped one)."""
    if unit.part == "candidates":
        return {"rows": [r for r in read_jsonl(out / "candidates.jsonl") if r["uri"] == unit.uri]}
    if unit.part == "llm":  # its replies not judged yet
        from autoprofiler_env.dataset.record.llm import key, unanswered

        done = {key(r) for r in read_jsonl(out / "llm.jsonl") if not unanswered(r)}
        replies = {key(r): r for r in read_jsonl(out / REPLIES)  # a later reply of a key wins
                   if r["uri"] == unit.uri and key(r) not in done and not unanswered(r)}
        return {"replies": list(replies.values())}
    if unit.part == "full":
        from autoprofiler_env.dataset.record.ncu import read_run

        files = {}
        root = out / "sets" / "full"
        for meta in sorted(root.glob("*/run.json")):
            if any(p.get("uri") == unit.uri for p in read_run(meta)["problems"]):
                for f in meta.parent.iterdir():
                    files[str(f.relative_to(out))] = _b64(f.read_bytes())
        return {"files": files}
    return {}


# -- one unit, in its own process -----------------------------------------------------------

def run_unit(unit: Unit, setup: Setup, seed: dict, gpu: str | None,
             started: Callable[[subprocess.Popen], None] | None = None) -> dict:
    """Runs ``unit`` in a new process pinned to ``gpu`` (``CUDA_VISIBLE_DEVICES``; None: as
    this process sees them) and returns its result: the new ``rows``, the new ``files``
    (path in the recording: base64), their ``sha256``, the ``gpu`` its process saw, its
    ``wall_s``. ``started(popen)`` is told of the process once it runs (so that a driver
    that is stopped can stop it).

    Raises:
        UnitFailed: the process died, outlasted ``setup.timeout_s`` or left no intact result.
    """
    from autoprofiler_env.processes import kill_group

    with tempfile.TemporaryDirectory(prefix="autoprofiler-unit-") as scratch:
        write_spec(Path(scratch), unit, setup, seed)
        env = dict(os.environ)
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(gpu)
        log = Path(scratch, "unit.log")
        with log.open("w") as sink:
            popen = subprocess.Popen(
                [sys.executable, "-m", setup.module, scratch,
                 "--parent", str(os.getpid())], env=env, stdout=sink, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
            if started is not None:
                started(popen)
            try:
                code = popen.wait(setup.timeout_s)
            except subprocess.TimeoutExpired:
                code = None
            finally:
                kill_group(popen)
        tail = log.read_text(errors="replace")[-1500:].strip()
        where = f"{unit.part} of {unit.uri}"
        if code != 0:
            reason = (f"outlasted {setup.timeout_s:.0f} s" if code is None else
                      f"was killed by signal {-code}" if code < 0 else f"exited with {code}")
            raise UnitFailed(f"the process of the {where} {reason}"
                             + (f": {tail.splitlines()[-1]}" if tail else ""))
        try:
            result = json.loads(Path(scratch, _RESULT).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise UnitFailed(f"the process of the {where} left no result ({e})") from None
    verify(result, where)
    return result


def verify(result: dict, where: str) -> None:
    """Checks a unit's result against the sha256 its process made of it.

    Raises:
        UnitFailed: a file or the rows differ from what was recorded (a corrupted transfer).
    """
    digests = result.get("sha256") or {}
    actual = _digests(result.get("rows", []), result.get("files") or {})
    if actual != digests:
        bad = sorted(k for k in set(actual) | set(digests) if actual.get(k) != digests.get(k))
        raise UnitFailed(f"the {where}'s result does not match its checksums: {', '.join(bad)}")


def write_spec(scratch: Path, unit: Unit, setup: Setup, seed: dict) -> None:
    """What a unit's process reads (:func:`read_spec`): its unit, what the run shares, the
    rows of ``setup.reuse`` of its problem, and ``seed``."""
    spec = {"unit": asdict(unit), "config": asdict(setup.config),
            "deadline_epoch": setup.deadline_epoch, "warm_workers": setup.warm_workers,
            "max_ops": setup.max_ops, "candidate_timeout_s": setup.candidate_timeout_s,
            "alone": unit.uri in setup.alone,
            "reuse": [r for r in setup.reuse if r.get("uri") == unit.uri], "seed": seed}
    (scratch / _SPEC).write_text(json.dumps(spec))


def read_spec(scratch: Path) -> tuple[dict, Unit]:
    """In a unit's process: what :func:`run_unit` handed it (the spec: ``config``,
    ``deadline_epoch``, ``seed``...), and its unit."""
    spec = json.loads((scratch / _SPEC).read_text())
    return spec, Unit(**{**spec["unit"], "candidates": tuple(spec["unit"]["candidates"])})


def write_result(scratch: Path, rows: list[dict], files: dict[str, str], started: float,
                 log: dict | None = None, idle: bool = False) -> int:
    """In a unit's process: its result, whole or absent, with the sha256 the driver checks;
    ``log``: what the driver adds to the unit's line in ``timings.jsonl`` (with
    ``omp_threads`` where the process was given ``OMP_NUM_THREADS``); ``idle``: the unit
    started no work on the device (a full unit whose ncu run the time left did not start),
    so the driver logs no line of device time for it."""
    threads = os.environ.get("OMP_NUM_THREADS")  # Ray sets it from the task's CPUs
    log = {**(log or {}), **({"omp_threads": threads} if threads else {})}
    result = {"rows": rows, "files": files, "gpu": os.environ.get("CUDA_VISIBLE_DEVICES"),
              "wall_s": time.monotonic() - started, "pid": os.getpid(),
              "sha256": _digests(rows, files), "log": log, "idle": idle}
    tmp = scratch / (_RESULT + ".tmp")
    tmp.write_text(json.dumps(result))
    tmp.rename(scratch / _RESULT)  # whole or absent
    return 0


def _unit_main(scratch: Path) -> int:
    """In a unit's process: the part's own function on the one problem, in ``scratch``."""
    from autoprofiler_env.dataset.record.candidates import record_candidates
    from autoprofiler_env.dataset.record.ncu import STEPPED_OPS, record_ncu
    from autoprofiler_env.dataset.record.reference import record_reference
    from autoprofiler_env.profiler.catalogue import load_catalogue

    spec, unit = read_spec(scratch)
    config = HarnessConfig(**spec["config"])
    problem = _problem(unit.problem)
    deadline = (None if spec["deadline_epoch"] is None else
                time.monotonic() + spec["deadline_epoch"] - time.time())
    seed = spec["seed"]
    for path, data in (seed.get("files") or {}).items():
        (scratch / path).parent.mkdir(parents=True, exist_ok=True)
        (scratch / path).write_bytes(base64.b64decode(data))
    before = {p for p in scratch.rglob("*") if p.is_file()}
    started = time.monotonic()
    rows: list[dict] = []
    idle = False
    if unit.part == "reference":
        rows = record_reference([problem], config, scratch / "reference.jsonl", deadline)
    elif unit.part == "candidates":
        path = scratch / "candidates.jsonl"
        with JsonlAppender(path) as log:
            for row in seed.get("rows", []):
                log.write(row)
        rows = record_candidates([problem], path, config, warm_workers=spec["warm_workers"],
                                 deadline=deadline, plan={problem.uri: list(unit.candidates)},
                                 reuse=spec["reuse"], timeout_s=spec["candidate_timeout_s"])
        rows = rows[len(seed.get("rows", [])):]
    elif unit.part == "llm":
        from autoprofiler_env.dataset.record.llm import judge_all

        rows = judge_all(problem, seed["replies"], config)
    elif unit.part == "full":
        kwargs = {} if spec["max_ops"] is None else {"max_ops": spec["max_ops"]}
        alone = {problem.uri} if spec.get("alone") or STEPPED_OPS & set(problem.tags) else ()
        idle = not record_ncu(  # the time left since its turn came may start no run
            [problem], {"full": list(load_catalogue().sets["full"])}, scratch / "sets", chunk=1,
            deadline=deadline, alone=alone, **kwargs)
    else:
        raise ValueError(f"a fan-out records {', '.join(FANOUT_PARTS)}, not {unit.part!r}")
    files = {str(p.relative_to(scratch)): _b64(p.read_bytes())
             for p in sorted(scratch.rglob("*")) if p.is_file() and p not in before
             and p.relative_to(scratch).parts[:1] == ("sets",) and "_work" not in p.parts}
    return write_result(scratch, rows, files, started, idle=idle)


def _problem(d: dict) -> Problem:
    """The unit's problem: its file where this machine has it, else the suite's by URI."""
    path = Path(d["path"])
    if not path.is_file() and d["uri"].startswith("problem://autoprofiler/"):
        from autoprofiler_env.problems import load_problem

        return load_problem(d["uri"])
    return Problem(uri=d["uri"], name=d["name"], path=path, level=d.get("level"),
                   split=d.get("split"), tags=tuple(d.get("tags") or ()))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _digests(rows: list[dict], files: dict[str, str]) -> dict[str, str]:
    """The sha256 of the rows (``"rows"``) and of each file (base64), by path."""
    out = {"rows": hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()}
    out.update({path: hashlib.sha256(base64.b64decode(data)).hexdigest()
                for path, data in files.items()})
    return out


# -- where units run ------------------------------------------------------------------------

class LocalWorkers:
    """Units in local processes, at most one per GPU at a time (``gpus``: the ids; None
    where there is no GPU to pin, as on a CPU)."""

    def __init__(self, gpus: list[str | None], retries: int = 1) -> None:
        if not gpus:
            raise ValueError("LocalWorkers needs at least one GPU (or None for one CPU worker)")
        self.gpus, self.retries = list(gpus), retries

    @classmethod
    def visible(cls, n: int | None = None, retries: int = 1) -> LocalWorkers:
        """One worker per GPU this process sees (``CUDA_VISIBLE_DEVICES``, else torch's
        count), or the first ``n``.

        Raises:
            ValueError: ``n`` is more than the GPUs visible.
        """
        listed = os.environ.get("CUDA_VISIBLE_DEVICES")
        if listed is not None:
            ids = [g.strip() for g in listed.split(",") if g.strip()]
        else:
            import torch

            ids = [str(i) for i in range(torch.cuda.device_count())]
        if n is not None:
            if n > len(ids):
                raise ValueError(f"--workers {n}: this machine shows {len(ids)} GPU(s)"
                                 + (f" ({', '.join(ids)})" if ids else ""))
            ids = ids[:n]
        return cls(ids or [None], retries)

    def __len__(self) -> int:
        return len(self.gpus)

    def run(self, work: Iterable[tuple[Unit, dict]], setup: Setup,
            interrupted: Callable[[Unit, str | None, float], None] | None = None
            ) -> Iterator[tuple[Unit, dict | Exception | None]]:
        """Yields each unit of ``work`` with its result, the error it failed with, or None
        where the time budget ran out before it started, as they finish. ``work`` may wait
        (the llm part's units come as the model's replies do): it is read in a thread of its
        own, and each unit starts as soon as it comes and a GPU is free. Closed before the
        end (the driver stopped), it kills the units' processes in flight and tells
        ``interrupted(unit, gpu, seconds it ran)`` of each."""
        from autoprofiler_env.processes import kill_group

        free: queue.Queue = queue.Queue()
        for gpu in self.gpus:
            free.put(gpu)
        stopped = threading.Event()
        running: dict[int, tuple] = {}  # by thread: (unit, gpu, started, process)

        def one(unit: Unit, seed: dict):
            gpu = free.get()
            me = threading.get_ident()
            try:
                for attempt in range(self.retries + 1):
                    if _late(setup, unit) or stopped.is_set():
                        return None  # not started: left for the next run
                    def started(popen: subprocess.Popen) -> None:
                        running[me] = (unit, gpu, time.monotonic(), popen)
                        if stopped.is_set():  # stopped while it was starting
                            kill_group(popen)

                    try:
                        return run_unit(unit, setup, seed, gpu, started)
                    except UnitFailed:
                        if attempt == self.retries or stopped.is_set():
                            raise
                    finally:
                        running.pop(me, None)
            finally:
                free.put(gpu)

        finished: queue.Queue = queue.Queue()  # (unit, its future), then (_END, the count)
        pool = ThreadPoolExecutor(len(self.gpus))

        def submit(unit: Unit, seed: dict) -> None:
            pool.submit(one, unit, seed).add_done_callback(lambda f: finished.put((unit, f)))

        feed = _Feed(work, submit, finished)
        expected, got = None, 0
        try:
            while expected is None or got < expected:
                unit, item = finished.get()
                if unit is _END:
                    expected = feed.count(item)
                    continue
                got += 1
                try:
                    yield unit, item.result()
                except UnitFailed as e:
                    yield unit, e
        finally:
            feed.stop()
            stopped.set()
            pool.shutdown(wait=False, cancel_futures=True)
            for unit, gpu, started, popen in list(running.values()):
                kill_group(popen)
                if interrupted is not None:
                    interrupted(unit, gpu, time.monotonic() - started)


_END = object()


class _Feed:
    """Reads ``work`` in a thread of its own, submitting each ``(unit, seed)`` as it comes,
    then puts ``(_END, how many)`` on ``events`` (``(_END, the error)`` where reading it
    failed: :meth:`count` raises it in the driver)."""

    def __init__(self, work: Iterable[tuple[Unit, dict]], submit, events: queue.Queue) -> None:
        self._stop = threading.Event()
        threading.Thread(target=self._run, args=(work, submit, events), daemon=True,
                         name="fanout-feed").start()

    def _run(self, work, submit, events: queue.Queue) -> None:
        items, count = iter(work), 0
        try:
            for unit, seed in items:
                if self._stop.is_set():
                    break
                submit(unit, seed)
                count += 1
        except BaseException as e:  # noqa: BLE001 -- handed to the driver, which raises it
            events.put((_END, e))
            return
        finally:
            getattr(items, "close", lambda: None)()  # a generator's own clean-up runs here
        events.put((_END, count))

    @staticmethod
    def count(item) -> int:
        if isinstance(item, BaseException):
            raise item
        return item

    def stop(self) -> None:
        """No more units are submitted (the one being read is the last)."""
        self._stop.set()


class RayWorkers:
    """Units as Ray tasks of one GPU each (``ray.init(address)``: a running cluster, or a
    local one); Ray runs a task again where its worker died, then ``retries`` more times
    where the unit's process did.

    A task also asks for its GPU's share of the cluster's CPUs (:meth:`cpus_per_task`): a
    unit makes its inputs and compiles on the CPU as the single-GPU path does, and Ray gives
    a task's processes ``OMP_NUM_THREADS`` of its CPUs (unless the driver's environment sets
    it): 1 where a task asks for none (on the H200 a unit's correctness and timing then took
    about twice the plain path's, the likely cause)."""

    def __init__(self, address: str | None = None, retries: int = 1,
                 init_kwargs: dict | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise AutoProfilerError(f"--workers ray needs Ray: {install_hint('ray')}") from None
        self.ray, self.retries = ray, retries
        if not ray.is_initialized():
            ray.init(address=address, **(init_kwargs or {}))
        if ray.cluster_resources().get("GPU", 0.0) < 1:  # its tasks would never start
            raise AutoProfilerError("--workers ray: the Ray cluster has no GPU (ray.init "
                                    "num_gpus=N, or ray start --num-gpus N on each node)")

    def cpus_per_task(self) -> float:
        """The cluster's CPUs over its GPUs (at least 1 where it has more CPUs than GPUs;
        a share of one where fewer, so that every GPU still runs a task)."""
        total = self.ray.cluster_resources()
        share = total.get("CPU", 1.0) / total["GPU"]
        return float(int(share)) if share >= 1 else share

    def run(self, work: Iterable[tuple[Unit, dict]], setup: Setup,
            interrupted: Callable[[Unit, str | None, float], None] | None = None
            ) -> Iterator[tuple[Unit, dict | Exception | None]]:
        """As :meth:`LocalWorkers.run`: each unit is a task as soon as it comes. Closed
        before the end, it cancels the tasks in flight (their units' processes die with
        their workers); their device time is not known here, so ``interrupted`` is not
        called."""
        ray = self.ray
        task = ray.remote(_ray_unit).options(num_gpus=1, num_cpus=self.cpus_per_task(),
                                             max_retries=self.retries,
                                             retry_exceptions=[UnitFailed])
        events: queue.Queue = queue.Queue()  # (unit, its task), then (_END, the count)
        feed = _Feed(work, lambda unit, seed: events.put((unit, task.remote(unit, setup, seed))),
                     events)
        waiting: dict = {}
        expected, got = None, 0
        try:
            while expected is None or got < expected:
                block = not waiting  # nothing to wait on in Ray: wait for the feed
                while True:
                    try:
                        unit, item = events.get(block=block)
                    except queue.Empty:
                        break
                    block = False
                    if unit is _END:
                        expected = feed.count(item)
                    else:
                        waiting[item] = unit
                if not waiting:
                    continue
                done, _ = ray.wait(list(waiting), num_returns=1, timeout=0.5)
                for ref in done:
                    unit = waiting.pop(ref)
                    got += 1
                    try:
                        yield unit, ray.get(ref)
                    except (ray.exceptions.RayError, UnitFailed) as e:
                        cause = getattr(e, "cause", None)
                        yield unit, (cause if isinstance(cause, UnitFailed) else
                                     UnitFailed(str(e)))
        finally:
            feed.stop()
            for ref in waiting:
                ray.cancel(ref, force=True)


def _ray_unit(unit: Unit, setup: Setup, seed: dict) -> dict:
    """A Ray task: the unit on the GPU Ray gave it."""
    import ray

    if _late(setup, unit):
        return None  # not started: left for the next run
    ids = ray.get_gpu_ids()
    return run_unit(unit, setup, seed, ",".join(str(i) for i in ids) if ids else None)


def _late(setup: Setup, unit: Unit | None = None) -> bool:
    """Whether the deadline has passed, or leaves too little time to start ``unit`` (its
    ``start_s``); a unit too late is not started, and waits for the next run."""
    need = 0.0 if unit is None else unit.start_s
    return setup.deadline_epoch is not None and setup.deadline_epoch - time.time() < need


# -- the driver -----------------------------------------------------------------------------

def record_fanout(out: Path, problems: list[Problem], workers, parts=FANOUT_PARTS,
                  config: HarnessConfig | None = None, time_budget_s: float | None = None,
                  warm_workers: int = 1, plan: dict[str, list[str]] | None = None,
                  reuse: list[dict] = (), max_ops: int | None = None,
                  unit_timeout_s: float = 3600.0, llm=None, llm_concurrency: int = 8,
                  candidate_timeout_s: float = CANDIDATE_TIMEOUT_S,
                  alone: Iterable[str] = (), preflight: bool = True) -> dict:
    """Records ``parts`` of ``problems`` into ``out`` on ``workers`` (:class:`LocalWorkers`,
    :class:`RayWorkers`), resuming what ``out`` holds. Returns the summary
    :func:`~autoprofiler_env.dataset.record.record` gives, with ``failed``: the units given
    up on in this run (logged in ``failures.jsonl``; the next run tries them again).

    ``llm``: the llm part's :class:`~autoprofiler_env.dataset.record.LLMPart`, its requests
    ``llm_concurrency`` at a time (the module's docstring says how). ``alone``: the problems
    whose ncu run is capped from the start, as :func:`~.ncu.record_ncu` does (those tagged
    with a :data:`~.ncu.STEPPED_OPS` kind are added). ``time_budget_s``: None for none (0
    starts nothing).

    With :class:`LocalWorkers` (``preflight``: unless the caller checked), what would refuse
    the recording is checked before any unit starts (:func:`~.machine.preflight`: no CUDA
    device, no ncu while a problem needs its ncu run, ``out``'s rows made on another
    machine); on Ray, whose nodes may be other machines than this one, each unit's rows are
    checked before they are written: a unit of another machine than the recording's stops
    the run (:class:`~.machine.OtherMachineError`), its rows not written."""
    unknown = set(parts) - set(FANOUT_PARTS)
    if unknown:
        raise ValueError(f"a fan-out records {', '.join(FANOUT_PARTS)}; record "
                         f"{', '.join(sorted(unknown))} on one GPU (without --workers)")
    from autoprofiler_env.dataset.record.llm import require

    require(parts, llm)
    if llm_concurrency < 1:
        raise ValueError(f"llm_concurrency must be at least 1, not {llm_concurrency}")
    out = Path(out)
    problems = check_sources(out, problems)  # two files of one URI, a file edited since
    if config is None:
        from autoprofiler_env.dataset.record import recording_config

        config = recording_config("cuda")
    if preflight:
        from autoprofiler_env.dataset.record import machine
        from autoprofiler_env.dataset.record.ncu import ncu_pending

        here = isinstance(workers, LocalWorkers)  # Ray's units run on its nodes
        machine.preflight(out, config.device if here else None, ncu=here and "full" in parts
                          and ncu_pending(problems, ["full"], out / "sets"))
    out.mkdir(parents=True, exist_ok=True)
    setup = Setup(config, None if time_budget_s is None else time.time() + time_budget_s,
                  warm_workers, max_ops, list(reuse), unit_timeout_s,
                  candidate_timeout_s=candidate_timeout_s, alone=frozenset(alone))
    units = [u for u in _with_starts(out, pending(out, problems, parts, config.device, plan),
                                     setup) if not _late(setup, u)]
    given_up: set[tuple[str, str]] = set()
    with terminate_becomes_exit():  # SIGTERM (timeout, a scheduler): the units are stopped
        check = _one_machine(out)
        failed = drive(out, workers, [(u, _seed(out, u)) for u in units], len(units), setup,
                       given_up=given_up, check=check)
        if "llm" in parts:
            count, work = _llm_work(out, problems, llm, setup, llm_concurrency)
            failed += drive(out, workers, work, count, setup, "problems", given_up=given_up,
                            check=check)
    summary = {part: _holds(out, part) for part in FANOUT_PARTS if part in parts}
    if "llm" in parts:
        llm.summarize(summary, problems, out)
    summary["failed"] = failed
    # the budget stopped it where it ran out, and also where a unit was left undone with time
    # still on the clock (a full unit is not started with under its start_s left, nor does
    # its ncu run start with under MIN_RUN_S); a unit given up on is counted in ``failed``
    left = [u for u in pending(out, problems, parts, config.device, plan)
            if (u.part, u.uri) not in given_up]
    summary["stopped_by_time_budget"] = setup.deadline_epoch is not None and (
        _late(setup) or bool(left))
    return summary


def drive(out: Path, workers, work: Iterable[tuple[Unit, dict]], total: int, setup: Setup,
          what: str = "units", progress: bool = True,
          given_up: set[tuple[str, str]] | None = None,
          check: Callable[[Unit, dict], None] | None = None) -> int:
    """Runs ``work`` on ``workers``, writing each result into ``out`` as it comes
    (:func:`commit`); returns how many units were given up on (each logged in
    ``failures.jsonl``, and their (part, URI) added to ``given_up``). ``check(unit,
    result)``: called before a result is written; what it raises stops the run (the units in
    flight too), the result not written. Call it inside ``terminate_becomes_exit()``, so
    that SIGTERM stops the units in flight."""
    failed = 0

    def interrupted(unit: Unit, gpu: str | None, seconds: float) -> None:
        _log_time(out, unit, seconds, setup.config.device, gpu, interrupted=True)

    results = workers.run(work, setup, interrupted)
    try:
        with tqdm(total=total, desc=what, unit="unit", disable=not progress) as bar:
            for unit, result in results:
                if result is None:
                    pass
                elif isinstance(result, Exception):
                    failed += 1
                    if given_up is not None:
                        given_up.add((unit.part, unit.uri))
                    with JsonlAppender(out / FAILURES) as log:
                        log.write({"part": unit.part, "uri": unit.uri, "error": str(result),
                                   "at": time.strftime("%Y-%m-%dT%H:%M:%S")})
                else:
                    if check is not None:
                        check(unit, result)
                    commit(out, unit, result, setup.config.device)
                bar.update()
    finally:
        results.close()  # stopped (SIGTERM, an error): the units in flight are stopped too
    return failed


def _one_machine(out: Path) -> Callable[[Unit, dict], None]:
    """A :func:`drive` check that the rows of each unit are the recording's machine's (those
    of its rows that name one: :func:`~.machine.machine_of`), the first unit's where the
    recording has none yet.

    Raises (the check):
        OtherMachineError: a unit's rows are another machine's.
    """
    from autoprofiler_env.dataset.record.machine import (
        LOGS,
        OtherMachineError,
        describe,
        machine_of,
        machines,
    )

    known = machines([out / name for name in LOGS])

    def check(unit: Unit, result: dict) -> None:
        for row in result.get("rows") or ():
            here = machine_of(row)
            if here is None or here in known:
                continue
            if known:
                said = "; ".join(f"{describe(m)} ({first})" for m, first in known.items())
                raise OtherMachineError(
                    f"{out} was recorded on {said}; the {unit.part} of {unit.uri} was "
                    f"recorded on {describe(here)} (GPU id {result.get('gpu')}), and is not "
                    "written: a recording's rows are one machine's; record that machine's "
                    "into another --out")
            known[here] = f"{unit.part}.jsonl: {unit.uri}"
    return check


def _log_time(out: Path, unit: Unit, wall_s: float, device: str, gpu: str | None,
              interrupted: bool = False, log: dict | None = None) -> None:
    """A unit's line in ``timings.jsonl``: its device time (``interrupted``: stopped
    before it finished, its time spent all the same), and what its ``log`` adds."""
    from autoprofiler_env.dataset.record import TIMINGS

    row = {**(log or {}), "part": unit.part, "wall_s": wall_s, "device": device,
           "at": time.strftime("%Y-%m-%dT%H:%M:%S"), "uri": unit.uri, "gpu": gpu}
    if interrupted:
        row["interrupted"] = True
    with JsonlAppender(out / TIMINGS) as timings:
        timings.write(row)


def _llm_work(out: Path, problems: list[Problem], llm, setup: Setup, concurrency: int
              ) -> tuple[int, Iterator[tuple[Unit, dict]]]:
    """The llm part's units, one per problem with outcomes to record, and how many: each
    comes once its replies are all in, first those whose replies were in before this run.
    The requests run ``concurrency`` at a time meanwhile, each reply written as it comes;
    none starts after the time budget (a problem with replies missing waits for the next
    run, its replies kept), and a request that got no reply from the model is not written
    (its problem waits for the next run too; a warning counts them), and none more is sent
    once the endpoint refused one or those of :data:`~.llm.UNREACHED_STOP` problems in a
    row failed so (:class:`~.llm.Unanswered`)."""
    from autoprofiler_env.dataset.record.llm import Unanswered, ask, asks, key, unanswered
    from autoprofiler_env.errors import LLMError

    done = {key(r) for r in read_jsonl(out / "llm.jsonl") if not unanswered(r)}
    todo = asks(llm.shown(problems), llm.dataset, llm.optimizer, llm.section_sets, llm.repeats,
                done)
    replied = {key(r) for r in read_jsonl(out / REPLIES) if not unanswered(r)}
    to_ask = [(p, sections, repeat) for p, sections, repeat in todo
              if (p.uri, llm.optimizer.producer, "+".join(llm.dataset.canonical(sections)),
                  repeat) not in replied]
    order = list({p.uri: p for p, _, _ in todo}.values())

    def work() -> Iterator[tuple[Unit, dict]]:
        left = Counter(p.uri for p, _, _ in to_ask)

        def unit(p: Problem) -> tuple[Unit, dict]:
            u = Unit("llm", p.to_dict())
            return u, _seed(out, u)

        for p in order:
            if not left[p.uri]:
                yield unit(p)
        lock = threading.Lock()
        unanswered_ = Unanswered()
        with JsonlAppender(out / REPLIES) as log, ThreadPoolExecutor(concurrency) as pool:

            def one(p: Problem, sections: tuple[str, ...], repeat: int) -> dict | None:
                with lock:
                    stop = unanswered_.stop
                if _late(setup) or stop:
                    return None
                try:
                    reply = ask(p, llm.dataset, llm.optimizer, sections, repeat)
                except LLMError as e:
                    if not e.unreached:
                        raise
                    with lock:  # not the model's outcome: asked again by the next run
                        unanswered_.failed(p.uri, e)
                    return None
                with lock:
                    if not unanswered_.stop:  # a success in flight does not resume asking
                        unanswered_.answered()
                    log.write(reply)
                return reply

            futures = {pool.submit(one, *a): a[0] for a in to_ask}
            try:
                for future in as_completed(futures):
                    p = futures[future]
                    if future.result() is None:
                        continue  # the time budget, no reply: it waits for the next run
                    left[p.uri] -= 1
                    if not left[p.uri]:
                        yield unit(p)
            finally:
                for future in futures:
                    future.cancel()
                unanswered_.warn()

    return len(order), work()


def commit(out: Path, unit: Unit, result: dict, device: str) -> None:
    """Writes a unit's result into the recording: files first (each run folder under a
    temporary name, then renamed: whole or absent), then the rows, then its device time
    (none for a unit that started no device work: ``idle``, :func:`write_result`)."""
    verify(result, f"{unit.part} of {unit.uri}")
    folders: dict[Path, dict[str, bytes]] = {}
    for path, data in result.get("files", {}).items():
        rel = Path(path)
        if rel.is_absolute() or ".." in rel.parts or rel.parent == Path("."):
            raise UnitFailed(f"{unit.part} of {unit.uri}: its worker's file {path!r} is "
                             "not in a run folder of the recording (an absolute path, '..', "
                             "or none): the result is refused, not written")
        folders.setdefault(rel.parent, {})[rel.name] = base64.b64decode(data)
    for folder, files in folders.items():
        final = out / folder
        if final.exists():  # seeded: the recording has it
            continue
        tmp = final.with_name(final.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        tmp.rename(final)
    if result.get("rows"):
        with JsonlAppender(out / f"{unit.part}.jsonl") as log:
            for row in result["rows"]:
                log.write(row)
    if not result.get("idle"):  # a unit that started no device work: no device time
        _log_time(out, unit, result["wall_s"], device, result.get("gpu"), log=result.get("log"))


def _holds(out: Path, part: str) -> int:
    if part == "full":
        from autoprofiler_env.dataset.record.ncu import covered

        return len(covered(out / "sets" / "full"))
    return len(read_jsonl(out / f"{part}.jsonl"))


def unit_main(run: Callable[[Path], int], argv: list[str] | None = None) -> int:
    """A unit's process (:attr:`Setup.module`'s ``main``): ``run(scratch)`` once it is tied
    to its driver (it dies with it)."""
    import argparse

    from autoprofiler_env.processes import die_with_parent

    parser = argparse.ArgumentParser(description="one unit of a fan-out (internal)")
    parser.add_argument("scratch", type=Path)
    parser.add_argument("--parent", type=int, required=True)
    args = parser.parse_args(argv)
    die_with_parent(args.parent)
    return run(args.scratch)


def main(argv: list[str] | None = None) -> int:
    return unit_main(_unit_main, argv)


if __name__ == "__main__":
    sys.exit(main())
