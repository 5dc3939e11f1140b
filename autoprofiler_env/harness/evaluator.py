"""The judge: is a candidate correct, and how fast is it? (docs/harness.md)

>>> from autoprofiler_env.harness import Evaluator, HarnessConfig
>>> from autoprofiler_env.problems import load_problem
>>> with Evaluator(HarnessConfig(device="cuda")) as ev:
...     result = ev.evaluate(load_problem("softmax_16384x4096"), open("candidate.py").read())
>>> result.correct, result.speedup

The judge runs in the caller's process and never imports candidate code. The reference runs
in a worker of its own (reused across problems); every candidate runs in a fresh, sandboxed
worker (:mod:`.sandbox`; the next one starts while the current one is judged). The judge
chooses the input seeds, receives raw outputs (never a pickle) and compares them itself, and
times both programs in the same run, interleaved, with its own clock around every timed
batch:

1. the static check (:mod:`.static_check`);
2. correctness on ``n_correctness`` input sets: every output leaf within the tolerance,
   nothing changed after ``forward`` returned, no output the same on every set while the
   reference's changes;
3. timing in ``rounds`` rounds: a batch of the reference and one of the candidate, their order
   alternating; every timed call on a fresh input set from an unpredictable seed; one sampled
   call per batch compared with the reference's output for the same seed (its shape, and
   its values at :data:`SAMPLE_VALUES` positions drawn after the calls: every value of a
   smaller output);
4. the judge's clock: the candidate's batches must take the time its reported trials and the
   reference's measured per-call overhead explain, within :data:`UNEXPLAINED_MAX`, in two
   timing runs in a row (else ``timing_mismatch``: one run may be delayed by a loaded machine);
5. a speedup above :data:`RECHECK_SPEEDUP` is measured again on fresh inputs, and the lower
   of the two counts.

A faulty candidate is never an exception: it is a result with ``error_kind`` set.
"""

from __future__ import annotations

import math
import os
import secrets
import statistics
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from autoprofiler_env.errors import EvaluationError, ProblemError, ReferenceOutOfMemoryError
from autoprofiler_env.harness.correctness import (
    Comparison,
    Opaque,
    compare,
    constant_fits,
    fingerprint,
    trivial_match,
)
from autoprofiler_env.harness.process import (
    STARTUP_TIMEOUT_S,
    WorkerDied,
    WorkerProcess,
    WorkerTimeout,
)
from autoprofiler_env.harness.records import (
    ErrorKind,
    EvalResult,
    HarnessConfig,
    ReferenceRun,
    Timing,
)
from autoprofiler_env.harness.static_check import check_source
from autoprofiler_env.harness.wire import WireError
from autoprofiler_env.harness.worker import out_of_memory, return_cached
from autoprofiler_env.numeric import is_finite_number
from autoprofiler_env.problems.problem import Problem

TIMEOUT_S = 300.0
"""The judge's default limit for one candidate, in seconds (a KernelBench recording uses
KernelBench's 180: ``dataset.record.kernelbench.CANDIDATE_TIMEOUT_S``)."""
RECHECK_SPEEDUP = 2.0
"""A speedup above this is measured again on fresh inputs before it counts (KernelBench's
EVAL.md: speedups over 2x are rare and worth a second look; KernelGYM re-checks them)."""
UNEXPLAINED_MAX = 0.5
"""The largest share of the judge's clock over a candidate's timed batches that its reported
times, plus the reference's per-call overhead measured in the same run, may leave unexplained
(docs/harness.md has the measured spread of honest candidates)."""
UNEXPLAINED_SLACK_MS = 5.0
"""... and the unexplained time must also exceed this, per batch, to count (scheduler noise)."""
KEEP_SHARE = 0.1
"""The share of the GPU's memory that the reference outputs the judge keeps for a problem's
next candidates may take together: beyond it a set's outputs are computed again for each
candidate. Unbounded, three kept outputs of KernelBench's largest (8.6 GB) and a re-check's
two more held 52.6 GiB in the judge's process, and an honest candidate of ``level1/87`` ran
out of the H200's memory beside it, as one of ``level1/36`` (7.5 GB outputs) did in its
own process (2026-12-04)."""
_SAMPLE_BYTES_SLACK = 1 << 20
# A timed call's output is compared at this many positions drawn after the batch, unknown to
# the candidate when it runs: an output wrong at a fraction f of its values passes with
# probability (1 - f) ** SAMPLE_VALUES (f = 1e-5: e**-10). The correctness sets compare every
# value. Whole outputs (a median 378 MB on KernelBench's levels 1-2, 8.6 GB at most) made the
# timing phase, which moves them, 24-57% of a KernelBench candidate's judging on the H200.
SAMPLE_VALUES = 1 << 20


class _Rejected(Exception):
    """A candidate failed a check: becomes its result."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class _Prepared:
    """A problem made ready in the reference's worker."""

    key: tuple
    problem: Problem
    config: HarnessConfig
    peak_memory_bytes: int | None
    per_call_ms: float
    outputs: dict = field(default_factory=dict)  # seed -> (leaves, fingerprint)
    output_bytes: int = 0
    standalone: Timing | None = None
    constant_needed: dict[str, float] | None = None
    nesting: str | None = None  # the reference output's containers (worker.nesting)


def _leaves(header: dict, tensors: list, key: str = "leaves") -> list:
    """A reply's output leaves, checked: tensors by index, plain values, opaque objects."""
    specs = header.get(key)
    if not isinstance(specs, list):
        raise WireError(f"the reply has no list {key!r}")
    leaves = []
    for spec in specs:
        if not isinstance(spec, dict) or len(spec) != 1:
            raise WireError(f"an output leaf that is not valid: {str(spec)[:100]}")
        (kind, value), = spec.items()
        if kind == "tensor" and isinstance(value, int) and 0 <= value < len(tensors):
            leaves.append(tensors[value])
        elif kind == "value" and (value is None or isinstance(value, (bool, int, float, str))):
            leaves.append(value)
        elif kind == "other" and isinstance(value, str):
            leaves.append(Opaque(value[:100]))
        else:
            raise WireError(f"an output leaf that is not valid: {str(spec)[:100]}")
    return leaves


def _nbytes(leaves: list) -> int:
    return sum(t.numel() * t.element_size() for t in leaves if hasattr(t, "element_size"))


def _times(header: dict, n: int) -> list[float]:
    times = header.get("times_ms")
    if not (isinstance(times, list) and len(times) == n and all(
            is_finite_number(t)
            and t >= 0 for t in times)):
        raise WireError(f"'times_ms' is not a list of {n} finite, non-negative numbers")
    return [float(t) for t in times]


def _n_trials(config: HarnessConfig, per_call_ms: float) -> int:
    wanted = int(config.timing_budget_ms / max(per_call_ms, 1e-3))
    return max(config.min_trials, min(config.max_trials, wanted))


class Evaluator:
    """Checks and times candidates for problems.

    Args:
        config: the harness settings (device, tolerance, trials, sandbox).
        timeout_s: the limit for one candidate: its worker's import, build, correctness runs
            and timing (``torch.compile`` candidates compile within it; the wait for the
            next candidate's process to start is not counted).
        prepare_timeout_s: the limit for making a problem ready in the reference's worker
            (import, build, one forward, warm-up) and for each reference request.
        cache_dir: the compile caches shared by the candidates' processes
            (default: :func:`~autoprofiler_env.harness.process.default_cache_dir`).
        spare: start the next candidate's process while one is judged (saves the seconds a
            process takes to import torch; off where processes are many, as when warming).
        keep_outputs: keep the reference's outputs of a problem's input sets for its next
            candidates (off where evaluators are many, as in a recorder's batch: six
            evaluators keeping three of KernelBench's largest outputs, 8.6 GB, would not fit
            on one GPU; each set is then computed again). On a GPU at most
            :data:`KEEP_SHARE` of its memory is kept (the attribute ``keep_bytes`` sets
            another bound).
    """

    def __init__(self, config: HarnessConfig | None = None, timeout_s: float = TIMEOUT_S,
                 prepare_timeout_s: float = 600.0, cache_dir: str | Path | None = None,
                 spare: bool = True, keep_outputs: bool = True) -> None:
        self.config = config or HarnessConfig()
        self.timeout_s = timeout_s
        self.prepare_timeout_s = prepare_timeout_s
        self.cache_dir = cache_dir
        self.spare = spare
        self.keep_outputs = keep_outputs
        self.keep_bytes: int | None = None  # None: KEEP_SHARE of a GPU's, the host's unbounded
        self._reference: WorkerProcess | None = None
        self._candidate: WorkerProcess | None = None  # the one judged now
        self._spare: WorkerProcess | None = None
        self._prepared: _Prepared | None = None
        self._lock = threading.Lock()

    # -- workers ----------------------------------------------------------------------------

    def _reference_worker(self) -> WorkerProcess:
        if self._reference is None or not self._reference.alive():
            if self._reference is not None:
                self._reference.kill()
            self._prepared = None
            self._reference = WorkerProcess("reference")
            try:
                self._reference.wait_ready(STARTUP_TIMEOUT_S)
            except (WorkerTimeout, WorkerDied, WireError) as e:
                self._reference.kill()
                self._reference = None
                raise EvaluationError(f"the harness's reference worker did not start ({e}); "
                                      "run `python -c 'import torch'` to see why") from e
        return self._reference

    def _new_candidate_worker(self, config: HarnessConfig) -> WorkerProcess:
        on_cpu = not config.device.startswith("cuda")
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if on_cpu else None
        return WorkerProcess("candidate", sandbox=config.sandbox, cache_dir=self.cache_dir,
                             cpu_seconds=(self.timeout_s + STARTUP_TIMEOUT_S)
                             * max(os.cpu_count() or 1, 1) + 60,
                             address_space=memory)

    def _take_candidate_worker(self, config: HarnessConfig) -> WorkerProcess:
        worker, self._spare = self._spare, None
        if worker is None or not worker.alive() or worker.sandboxed != config.sandbox:
            if worker is not None:
                worker.kill()
            worker = self._new_candidate_worker(config)
        with self._lock:
            self._candidate = worker
        return worker

    def _start_spare(self, config: HarnessConfig) -> None:
        if self.spare and self._spare is None:
            self._spare = self._new_candidate_worker(config)

    def _spare_ready(self) -> None:
        spare = self._spare
        if spare is not None:
            try:
                spare.wait_ready(STARTUP_TIMEOUT_S)
            except (WorkerTimeout, WorkerDied, WireError):
                spare.kill()
                self._spare = None

    def close(self) -> None:
        """Stops the workers. The evaluator can still be used: it starts new ones."""
        for worker in (self._candidate, self._spare, self._reference):
            if worker is not None:
                worker.close()
        self._candidate = self._spare = self._reference = None
        self._prepared = None

    def interrupt(self) -> None:
        """Kills the workers now; safe from another thread. The evaluation in flight returns
        as a crash (or raises, when the reference was running); the next one starts afresh."""
        with self._lock:
            workers = (self._candidate, self._spare, self._reference)
        for worker in workers:
            if worker is not None:
                worker.kill()

    def __getstate__(self) -> dict:
        """A copy (pickled, deep-copied) keeps the settings, not the processes: it starts its
        own workers when it first judges."""
        state = self.__dict__.copy()
        state.update(_reference=None, _candidate=None, _spare=None, _prepared=None)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.interrupt()
        except Exception:
            pass

    @property
    def peak_memory_bytes(self) -> int | None:
        """The reference's peak memory on the device (its load and one forward) for the
        problem prepared last; None before one is, or off a GPU."""
        prepared = self._prepared
        return None if prepared is None else prepared.peak_memory_bytes

    @property
    def judging(self) -> bool:
        """Whether a candidate's process is running now (an evaluation is in flight)."""
        worker = self._candidate
        return worker is not None and worker.alive()

    @property
    def worker_pid(self) -> int | None:
        """The reference worker's pid (it is reused across evaluations)."""
        return self._reference.pid if self._reference is not None else None

    # -- the reference ----------------------------------------------------------------------

    def _config_for(self, size: str | None) -> HarnessConfig:
        return self.config if size is None else replace(self.config, size=size)

    @property
    def _landing(self) -> str | None:
        """Where the workers' outputs land and are compared: the CUDA device, where the
        judge's device is one (the reference's outputs kept for a problem's next candidates
        stay there: ``n_correctness`` of them); else the host."""
        return self.config.device if self.config.device.startswith("cuda") else None

    def _ref_request(self, problem: Problem, message: dict, max_bytes: int = 1 << 20
                     ) -> tuple[dict, list]:
        worker = self._reference_worker()
        try:
            header, tensors = worker.request(message, self.prepare_timeout_s, max_bytes,
                                             self._landing)
        except (WorkerTimeout, WorkerDied) as e:
            self._prepared = None
            raise ProblemError(problem.path, f"the reference could not run: {e}") from e
        except WireError as e:
            raise EvaluationError(f"the reference worker sent a malformed reply: {e}") from e
        if header.get("ok") is True:
            return header, tensors
        if "out_of_memory" in header:
            self._prepared = None
            raise ReferenceOutOfMemoryError(
                problem.path, f"the reference ran out of GPU memory: {header['out_of_memory']}",
                "other processes may hold the GPU's memory: judge it when they are done")
        if "problem_error" in header:
            raise ProblemError(header.get("path") or problem.path, header["problem_error"])
        if "cuda_error" in header:
            self._prepared = None
            raise ProblemError(problem.path, f"the reference hit a CUDA error: "
                               f"{header['cuda_error']}")
        raise EvaluationError(f"harness failure on {problem.path}: {header.get('short')}\n"
                              f"{header.get('internal_error')}")

    def _prepare(self, problem: Problem, config: HarnessConfig) -> _Prepared:
        key = (str(problem.path), config.size, config.device, config.seed)
        if self._prepared is not None and self._prepared.key == key \
                and self._reference is not None and self._reference.alive():
            self._prepared.config = config
            return self._prepared
        self._prepared = None
        if self._landing is not None:  # the last problem's kept outputs: back to the driver,
            import torch  # for the workers of the next (up to 4 x 8.6 GB on KernelBench)

            torch.cuda.empty_cache()
        header, _ = self._ref_request(problem, {
            "op": "load", "path": str(problem.path), "size": config.size,
            "device": config.device, "seed": config.seed})
        peak = header.get("peak_memory_bytes")
        header, _ = self._ref_request(problem, {"op": "warmup", "seed": config.seed + 1,
                                                "ms": config.warmup_ms})
        prepared = _Prepared(key, problem, config, peak, float(header["per_call_ms"]))
        leaves, _ = self._ref_outputs(prepared, config.seed + 1, check=True)
        prepared.output_bytes = _nbytes(leaves)
        self._prepared = prepared
        return prepared

    def _ref_outputs(self, prepared: _Prepared, seed: int, check: bool = False,
                     keep: bool = True) -> tuple[list, tuple]:
        """The reference's output leaves for a seed and their fingerprint; kept for the next
        candidate of the problem unless ``keep`` is False (a re-check's one-off seed)."""
        if seed in prepared.outputs:
            return prepared.outputs[seed]
        header, tensors = self._ref_request(prepared.problem, {"op": "outputs", "seed": seed},
                                            max_bytes=1 << 40)
        leaves = _leaves(header, tensors)
        if check:
            prepared.constant_needed = self._check_well_posed(prepared.problem,
                                                              prepared.config, leaves)
            prepared.nesting = header.get("nesting")
        result = (leaves, fingerprint(leaves))
        if keep and self.keep_outputs and self._may_keep(prepared, leaves):
            prepared.outputs[seed] = result
        return result

    def _may_keep(self, prepared: _Prepared, leaves: list) -> bool:
        """Whether one more set's outputs stay within the bound on what the judge keeps."""
        limit = self.keep_bytes
        if limit is None and self._landing is not None:
            import torch

            limit = self.keep_bytes = int(
                KEEP_SHARE * torch.cuda.get_device_properties(self._landing).total_memory)
        return limit is None or (len(prepared.outputs) + 1) * _nbytes(leaves) <= limit

    @staticmethod
    def _check_well_posed(problem: Problem, config: HarnessConfig, leaves: list
                          ) -> dict[str, float]:
        """Refuses a reference output with NaN or Inf, or one that a constant matches at
        ``config.posed_for``; returns per floating dtype the least ``t`` at which a constant
        matches one of the outputs (:func:`~.correctness.constant_fits`)."""
        import torch

        needed: dict[str, float] = {}
        for i, leaf in enumerate(t for t in leaves if isinstance(t, torch.Tensor)):
            if not torch.is_floating_point(leaf):
                continue
            if not bool(torch.isfinite(leaf).all()):
                raise ProblemError(problem.path, f"the reference output {i} has NaN or Inf "
                                   "values")
            dtype = str(leaf.dtype).removeprefix("torch.")
            fits = constant_fits(leaf)
            needed[dtype] = min([needed.get(dtype, math.inf)] + [t for _, t in fits])
            atol, rtol = config.posed_for(dtype)
            constant = (next((name for name, t in fits if t <= atol), None) if atol == rtol
                        else trivial_match(leaf, atol, rtol))
            if constant:
                raise ProblemError(
                    problem.path, f"the reference output {i} is matched by {constant} at "
                    f"atol={atol}, rtol={rtol}, so a constant candidate would pass",
                    "change the problem's inputs or sizes (docs/problems.md)")
        return needed

    def reference(self, problem: Problem, size: str | None = None) -> ReferenceRun:
        """The reference's timing (eager PyTorch, alone, ``rounds`` batches on fresh inputs)
        and peak memory, measured once per problem.

        Raises:
            ProblemError: the problem is broken (import, forward, degenerate output) or its
                reference crashed or hung.
        """
        config = self._config_for(size)
        prepared = self._prepare(problem, config)
        if prepared.standalone is None:
            n = _n_trials(config, prepared.per_call_ms)
            per_batch = max(1, math.ceil(n / config.rounds))
            base = secrets.randbits(30)
            trials = []
            for r in range(config.rounds):
                seeds = [base + r * per_batch + i for i in range(per_batch)]
                header, _ = self._ref_request(problem, {"op": "time", "seeds": seeds,
                                                        "flush": config.flush_l2, "sample": []})
                trials += _times(header, per_batch)
            prepared.standalone = Timing.from_trials(trials, self._method(config))
        return ReferenceRun(problem.uri, config.device, prepared.standalone,
                            prepared.peak_memory_bytes, prepared.constant_needed)

    @staticmethod
    def _method(config: HarnessConfig) -> str:
        return "cuda_events" if config.device.startswith("cuda") else "perf_counter"

    # -- a candidate ------------------------------------------------------------------------

    def evaluate(self, problem: Problem, source: str, size: str | None = None,
                 pause: Callable[[], None] | None = None) -> EvalResult:
        """Judges one candidate (``ModelNew`` source) against a problem.

        A faulty candidate is not an exception: the result says ``correct=False`` with its
        ``error_kind``. Raises only when the problem or the harness is at fault, or when
        ``pause`` raises. A reference that runs out of GPU memory is a verdict too
        (``out_of_memory``, without the reference's time): on a shared GPU the other
        processes may be its cause.

        ``pause`` is called once the candidate has loaded (compiled) and passed its
        correctness runs, before its warm-up and timing, and may block: the time it takes is
        not the candidate's (phase ``queue``). A recorder holds each candidate of a batch
        compiled at once there, then times them one at a time
        (:class:`~autoprofiler_env.dataset.record.CandidateWarmer`).

        Raises:
            ProblemError: the problem file or its reference is at fault.
            EvaluationError: the harness could not run.
        """
        started = time.perf_counter()
        config = self._config_for(size)
        findings = [] if config.static_check == "off" else check_source(source)
        state = _State(config=config, started=started,
                       findings=[str(f) for f in findings if not f.rejects
                                 or config.static_check == "warn"])
        with state.phase("prepare"):  # the reference's inputs and outputs, once per problem
            try:
                prepared = self._prepare(problem, config)
            except ReferenceOutOfMemoryError as e:  # a verdict a recorder can judge again
                return state.fail(problem, ErrorKind.OUT_OF_MEMORY, e.cause)
        rejecting = [f for f in findings if f.rejects]
        if rejecting and config.static_check == "enforce":
            return self._failed(problem, size, state, ErrorKind.STATIC,
                                "; ".join(str(f) for f in rejecting[:5]))
        worker = self._take_candidate_worker(config)
        self._start_spare(config)  # the next candidate's process starts meanwhile (not timed)
        deadline = time.monotonic() + self.timeout_s
        try:
            try:
                with state.phase("start"):  # the sandboxed process (the spare: started before)
                    hello = worker.wait_ready(STARTUP_TIMEOUT_S)
                state.isolation = hello.get("isolation") or {}
                if not isinstance(state.isolation, dict):
                    raise WireError("the worker's isolation report is not an object")
                deadline = time.monotonic() + self.timeout_s
                self._judge(prepared, worker, source, state, deadline, pause)
            except _Rejected as e:
                failure = (e.kind, str(e))
            except WorkerTimeout as e:
                failure = (ErrorKind.TIMEOUT, str(e))
            except WorkerDied as e:
                failure = (ErrorKind.CRASH, str(e))
            except WireError as e:
                failure = (ErrorKind.PROTOCOL, f"the candidate's process sent a malformed "
                           f"reply: {e}")
            except ReferenceOutOfMemoryError as e:  # its outputs or its time, beside the
                failure = (ErrorKind.OUT_OF_MEMORY, e.cause)  # candidate's process
            except RuntimeError as e:
                if not out_of_memory(e):
                    raise
                # the judge's copies of the outputs, beside the candidate's process: what
                # KernelBench's single-process harness would also run out of
                why = str(e).splitlines()[0][:300]
                failure = (ErrorKind.OUT_OF_MEMORY, f"the judge ran out of GPU memory holding "
                           f"the outputs beside the candidate's process: {why}")
            else:
                return state.result(problem)
        finally:
            worker.kill()
            with self._lock:
                self._candidate = None
        return self._failed(problem, size, state, *failure)

    def _failed(self, problem: Problem, size: str | None, state: _State, kind: ErrorKind,
                message: str) -> EvalResult:
        """A failed candidate's result, with the reference's time (alone, when it was not
        timed beside the candidate) so that every record carries the eager time."""
        if state.reference is None:
            try:
                state.reference = self.reference(problem, size).timing
            except ReferenceOutOfMemoryError:  # not beside what holds the GPU now
                pass
        return state.fail(problem, kind, message)

    def _ask(self, worker: WorkerProcess, message: dict, deadline: float, state: _State,
             max_bytes: int = 1 << 20) -> tuple[dict, list]:
        header, tensors = worker.request(message, deadline - time.monotonic(), max_bytes,
                                         self._landing)
        violations = header.get("violations", [])
        if not isinstance(violations, list):
            raise WireError("'violations' is not a list")
        if violations:
            raise _Rejected(ErrorKind.SANDBOX, "; ".join(str(v)[:200] for v in violations[:3]))
        ok = header.get("ok")
        if ok is True:
            return header, tensors
        if ok is not False:
            raise WireError("'ok' is neither true nor false")
        if "cuda_error" in header:
            raise _Rejected(ErrorKind.CUDA, str(header["cuda_error"])[:500])
        if "problem_error" in header:
            raise EvaluationError(f"the problem does not import in the candidate's sandbox: "
                                  f"{header['problem_error']} (a problem that reads or writes "
                                  "files next to it cannot be sandboxed: docs/harness.md)")
        stage = header.get("stage")
        kinds = {"import": ErrorKind.IMPORT, "no_model_new": ErrorKind.NO_MODEL_NEW,
                 "init": ErrorKind.INIT, "runtime": ErrorKind.RUNTIME,
                 "structure": ErrorKind.STRUCTURE, "sandbox": ErrorKind.SANDBOX}
        if stage in kinds:
            raise _Rejected(kinds[stage], str(header.get("error", ""))[:500])
        raise _Rejected(ErrorKind.CRASH, f"the worker failed: {str(header.get('short'))[:300]}")

    def _compare(self, reference: list, candidate: list, state: _State, what: str) -> None:
        comparison: Comparison = compare(reference, candidate, state.config.tolerance_for)
        state.merge(comparison)
        if comparison.mismatch is not None:
            raise _Rejected(comparison.mismatch.kind, f"{what}: {comparison.mismatch.message}")

    def _judge(self, prepared: _Prepared, worker: WorkerProcess, source: str, state: _State,
               deadline: float, pause: Callable[[], None] | None = None) -> None:
        config = state.config
        problem = prepared.problem
        out_bytes = int(prepared.output_bytes * 1.5) + _SAMPLE_BYTES_SLACK
        with state.phase("load"):
            self._ask(worker, {"op": "load", "path": str(problem.path), "size": config.size,
                               "device": config.device, "seed": config.seed, "source": source},
                      deadline, state)
        with state.phase("correctness"):  # its first call compiles what compiles
            self._correctness(prepared, worker, [config.seed + 1 + k
                                                 for k in range(config.n_correctness)],
                              state, deadline, out_bytes)
        waited = time.monotonic()
        if pause is not None:
            with state.phase("queue"):  # its turn to have the GPU alone
                pause()
        with state.phase("spare"):
            self._spare_ready()  # no process starts while the two are warmed up and timed
        deadline += time.monotonic() - waited  # neither is the candidate's time
        with state.phase("warmup"):
            header, _ = self._ask(worker, {"op": "warmup", "seed": config.seed + 1,
                                           "ms": config.warmup_ms}, deadline, state)
        per_call = header.get("per_call_ms")
        if not is_finite_number(per_call):
            raise WireError("'per_call_ms' is not a number")
        candidate_ms = min(max(float(per_call), 1e-4), self.timeout_s * 1e3)
        with state.phase("timing"):
            try:
                self._timing(prepared, worker, candidate_ms, state, deadline, out_bytes)
            except _Rejected as e:  # a mismatch is confirmed on fresh inputs before it counts:
                if e.kind is not ErrorKind.TIMING_MISMATCH:  # a loaded machine can delay one
                    raise
                self._timing(prepared, worker, candidate_ms, state, deadline, out_bytes)
        if state.speedup > RECHECK_SPEEDUP:
            first = (state.reference, state.candidate, state.unexplained)
            fresh = secrets.randbits(30)
            with state.phase("recheck"):
                self._correctness(prepared, worker, [fresh], state, deadline, out_bytes,
                                  keep=False)
                self._timing(prepared, worker, candidate_ms, state, deadline, out_bytes,
                             samples=2)
            state.rechecked = True
            if first[0].median_ms / first[1].median_ms < state.speedup:
                state.reference, state.candidate, state.unexplained = first

    def _correctness(self, prepared: _Prepared, worker: WorkerProcess, seeds: list[int],
                     state: _State, deadline: float, out_bytes: int, keep: bool = True) -> None:
        for k, seed in enumerate(seeds):
            reference, ref_print = self._ref_outputs(prepared, seed, keep=keep)
            header, tensors = self._ask(worker, {"op": "outputs", "seed": seed}, deadline, state,
                                        out_bytes)
            candidate = _leaves(header, tensors)
            if header.get("changed") is not False:
                raise _Rejected(ErrorKind.ASYNC_WORK, f"input set {k}: an output changed after "
                                "forward returned (work left on another stream or thread)")
            if header.get("nesting") != prepared.nesting:
                raise _Rejected(ErrorKind.STRUCTURE, f"input set {k}: the output is "
                                f"{str(header.get('nesting'))[:100]}, the reference's "
                                f"{str(prepared.nesting)[:100]} (* a leaf)")
            self._compare(reference, candidate, state, f"input set {k}")
            state.prints.append((ref_print, fingerprint(candidate)))
            del reference, candidate, tensors
            return_cached(self._landing)  # for the candidate's process and the reference's
        self._check_varies(state)

    @staticmethod
    def _check_varies(state: _State) -> None:
        """An output the same on every input set while the reference's changes is degenerate
        (a constant scalar loss passes allclose at 1e-2 on some problems)."""
        if len(state.prints) < 2:
            return
        refs = [r for r, _ in state.prints]
        cands = [c for _, c in state.prints]
        for leaf in range(len(refs[0])):
            ref_varies = len({r[leaf] for r in refs}) > 1
            cand_same = all(c[leaf] == cands[0][leaf] for c in cands)
            if ref_varies and cand_same:
                where = f"output {leaf}" if len(refs[0]) > 1 else "the output"
                state.needed = {d: math.inf for d in state.needed}
                raise _Rejected(ErrorKind.DEGENERATE, f"{where} is the same on every input set "
                                "while the reference's changes")

    def _timing(self, prepared: _Prepared, worker: WorkerProcess, candidate_ms: float,
                state: _State, deadline: float, out_bytes: int, samples: int = 1) -> None:
        config = state.config
        rounds = config.rounds
        n_ref = max(1, math.ceil(_n_trials(config, prepared.per_call_ms) / rounds))
        n_cand = max(1, math.ceil(_n_trials(config, candidate_ms) / rounds))
        n_common = min(n_ref, n_cand)
        base = secrets.randbits(30)
        ref_trials, cand_trials, ref_overhead, cand_batches = [], [], [], []
        for r in range(rounds):
            seeds = [base + r * (config.max_trials + 1) + i
                     for i in range(max(n_ref, n_cand))]
            picks = sorted({secrets.randbelow(n_common) for _ in range(samples)})
            order = ("reference", "candidate") if r % 2 == 0 else ("candidate", "reference")
            for side in order:
                n = n_ref if side == "reference" else n_cand
                message = {"op": "time", "seeds": seeds[:n], "flush": config.flush_l2,
                           "sample": picks}
                t0 = time.perf_counter()
                if side == "reference":
                    header, _ = self._ref_request(prepared.problem, message)
                else:
                    header, _ = self._ask(worker, message, deadline, state)
                wall_ms = (time.perf_counter() - t0) * 1e3
                times = _times(header, n)
                if side == "reference":
                    ref_trials += times
                    ref_overhead.append((wall_ms - sum(times)) / n)
                else:
                    if header.get("changed") is not False:
                        raise _Rejected(ErrorKind.ASYNC_WORK, "a timed call's output changed "
                                        "after forward returned (work left on another stream "
                                        "or thread)")
                    cand_trials += times
                    cand_batches.append((wall_ms, sum(times), n))
            self._check_samples(prepared, worker, state, deadline, out_bytes, len(picks))
        overhead = max(statistics.median(ref_overhead), 0.0)
        walls = sum(w for w, _, _ in cand_batches)
        unexplained = [w - reported - n * overhead for w, reported, n in cand_batches]
        state.unexplained = max(sum(unexplained), 0.0) / walls if walls > 0 else 0.0
        if state.unexplained > UNEXPLAINED_MAX and \
                sum(unexplained) > UNEXPLAINED_SLACK_MS * len(cand_batches):
            raise _Rejected(ErrorKind.TIMING_MISMATCH, f"the judge's clock saw {walls:.1f} ms "
                            f"over the timed batches; the reported trials "
                            f"({sum(r for _, r, _ in cand_batches):.1f} ms) and the reference's "
                            f"overhead ({overhead:.3f} ms per call) explain "
                            f"{(1 - state.unexplained) * 100:.0f}% of it")
        if statistics.median(cand_trials) <= 0:  # the speedup would divide by it
            raise _Rejected(ErrorKind.TIMING_MISMATCH, "the candidate's timed calls report a "
                            "median of 0 ms, which its process's clock cannot have measured "
                            "for a call: a speedup cannot be computed from it")
        state.reference = Timing.from_trials(ref_trials, self._method(config))
        state.candidate = Timing.from_trials(cand_trials, self._method(config))

    def _check_samples(self, prepared: _Prepared, worker: WorkerProcess, state: _State,
                       deadline: float, out_bytes: int, n: int) -> None:
        """The sampled timed calls' outputs: the candidate's against the reference's, seed by
        seed."""
        message = {"op": "samples", "seed": secrets.randbits(31), "count": SAMPLE_VALUES}
        header, tensors = self._ask(worker, message, deadline, state,
                                    out_bytes * n + _SAMPLE_BYTES_SLACK)
        ref_header, ref_tensors = self._ref_request(prepared.problem, message,
                                                    max_bytes=1 << 40)
        cand = self._samples(header, tensors)
        ref = self._samples(ref_header, ref_tensors)
        if sorted(cand) != sorted(ref):
            raise WireError("the sampled calls are not the ones asked for")
        for seed, (ref_shapes, ref_leaves) in ref.items():
            cand_shapes, cand_leaves = cand[seed]
            if cand_shapes != ref_shapes:
                raise _Rejected(ErrorKind.SHAPE, f"a timed call's outputs have shapes "
                                f"{cand_shapes}, expected {ref_shapes}")
            self._compare(ref_leaves, cand_leaves, state, "a timed call")

    @staticmethod
    def _samples(header: dict, tensors: list) -> dict[int, tuple[list, list]]:
        samples = header.get("samples")
        if not isinstance(samples, list):
            raise WireError("'samples' is not a list")
        out = {}
        for sample in samples:
            if not isinstance(sample, dict) or not isinstance(sample.get("seed"), int):
                raise WireError("a sample without its seed")
            shapes = sample.get("shapes")
            if not (isinstance(shapes, list) and all(
                    isinstance(shape, list) and all(isinstance(n, int) for n in shape)
                    for shape in shapes)):
                raise WireError("a sample without its outputs' shapes")
            out[sample["seed"]] = (shapes, _leaves(sample, tensors))
        return out


@dataclass
class _State:
    """What one evaluation has found so far."""

    config: HarnessConfig
    started: float
    findings: list
    isolation: dict = field(default_factory=dict)
    needed: dict | None = None
    max_abs_error: float | None = None
    passed: int = 0
    prints: list = field(default_factory=list)
    reference: Timing | None = None
    candidate: Timing | None = None
    unexplained: float | None = None
    rechecked: bool = False
    phases: dict = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str):
        """Adds the wall time of the block to ``phases[name]`` (where a judgement's seconds
        go: a diagnostic, not part of the verdict)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - start

    def merge(self, comparison: Comparison) -> None:
        needed = dict(self.needed or {})
        for dtype, value in comparison.needed.items():
            needed[dtype] = max(needed.get(dtype, 0.0), value)
        self.needed = needed
        if not math.isnan(comparison.max_abs_error):
            self.max_abs_error = max(self.max_abs_error or 0.0, comparison.max_abs_error)
        if comparison.mismatch is None:
            self.passed += 1

    @property
    def speedup(self) -> float:
        return self.reference.median_ms / self.candidate.median_ms

    def _common(self, problem: Problem) -> dict:
        return dict(problem_uri=problem.uri, device=self.config.device,
                    max_abs_error=self.max_abs_error,
                    n_correctness_passed=min(self.passed, self.config.n_correctness),
                    wall_s=time.perf_counter() - self.started - self.phases.get("queue", 0.0),
                    config=self.config.to_dict(),
                    tolerance_needed=self.needed, timing_unexplained=self.unexplained,
                    rechecked=self.rechecked, findings=self.findings, isolation=self.isolation,
                    phases_s={k: round(v, 3) for k, v in self.phases.items()})

    def fail(self, problem: Problem, kind: ErrorKind, message: str) -> EvalResult:
        if kind is not ErrorKind.MISMATCH and self.needed is not None:
            self.needed = {d: math.inf for d in self.needed}
        return EvalResult(correct=False, error_kind=kind, error_message=message,
                          reference=self.reference, **self._common(problem))

    def result(self, problem: Problem) -> EvalResult:
        return EvalResult(correct=True, reference=self.reference, candidate=self.candidate,
                          **self._common(problem))


def evaluate(problem: Problem, source: str, config: HarnessConfig | None = None,
             timeout_s: float = TIMEOUT_S) -> EvalResult:
    """One-off evaluation (use :class:`Evaluator` for many)."""
    with Evaluator(config, timeout_s=timeout_s) as evaluator:
        return evaluator.evaluate(problem, source)


def read_candidate(path: str | Path) -> str:
    from autoprofiler_env.problems.problem import read_source

    try:
        return read_source(path)
    except OSError as e:
        raise EvaluationError(f"cannot read the candidate {path}: {e.strerror}") from e
    except ValueError as e:
        raise EvaluationError(f"the candidate {path}: {e}") from None
