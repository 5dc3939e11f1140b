"""Typed records of the harness: its settings, a timing, and an evaluation result."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from enum import Enum

from autoprofiler_env.harness.tolerance import DEFAULT_ATOL, DEFAULT_RTOL
from autoprofiler_env.problems.problem import Size


JUDGE_VERSION = 4
"""The judge's version, stored with every recorded outcome: 1 judged in the candidate's own
process; 2 is the separated, sandboxed judge of docs/harness.md; 3 makes a timed batch's
fresh inputs before its calls (2 made them between calls, which a short program's time
paid for); 4 compares a timed call's output at ``SAMPLE_VALUES`` positions drawn after the
batch where it has more values (3 moved and compared all of them: its timing phase was
24-57% of a KernelBench candidate's judging on the H200), and compares on the CUDA device. An
outcome is reused only where the candidate's source and the judge's version are the same.
Checks that refuse cheats and nothing a recording holds keep the version (2026-12-05: every
output a plain tensor of the reference's nesting, which no transformation of the reference
optimizers changes and KernelBench's comparison requires too; the input guard, which leaves
alone what torch and Python change themselves; one torch thread per worker on a CPU, where
nothing was recorded). On a GPU those checks await their test (tests/test_harness_gpu.py)."""


class ErrorKind(str, Enum):
    """Why a candidate was judged incorrect (or could not be judged)."""

    IMPORT = "import"                # the source does not parse or import
    NO_MODEL_NEW = "no_model_new"    # it defines no ModelNew class
    INIT = "init"                    # ModelNew(*get_init_inputs()) raised
    RUNTIME = "runtime"              # forward raised a Python exception
    CUDA = "cuda"                    # a CUDA error (illegal address, device assert): context lost
    STRUCTURE = "structure"          # a different number or nesting of outputs
    SHAPE = "shape"                  # an output of a different shape
    DTYPE = "dtype"                  # an output of a different dtype
    NONFINITE = "nonfinite"          # NaN or Inf where the reference is finite
    DEGENERATE = "degenerate"        # a constant output where the reference is not constant
    MISMATCH = "mismatch"            # values outside atol / rtol
    TIMEOUT = "timeout"              # did not finish within the time limit: worker killed
    CRASH = "crash"                  # the worker process died (segfault, abort, killed)
    STATIC = "static"                # the static check found a forbidden construct
    PROTOCOL = "protocol"            # the candidate's process sent a malformed or forged reply
    ASYNC_WORK = "async_work"        # outputs changed after forward returned (side stream, thread)
    TIMING_MISMATCH = "timing_mismatch"  # its reported time disagrees with the judge's clock
    SANDBOX = "sandbox"              # it tried what the sandbox forbids (a write outside, a socket)
    OUT_OF_MEMORY = "out_of_memory"  # the judge could not hold the outputs beside the candidate,
    # or the reference ran out of GPU memory (beside other processes, maybe)


@dataclass(frozen=True)
class HarnessConfig:
    """How candidates are checked and timed.

    Attributes:
        device: ``"cpu"`` or ``"cuda"`` (or ``"cuda:N"``).
        size: ``"full"`` (the real sizes; all recorded data) or ``"smoke"`` (CPU tests).
        atol, rtol: the tolerance of ``torch.allclose`` against the reference, used when
            ``tolerance`` is None (fp32 default: KernelBench v0.1's 1e-2).
        tolerance: a named regime (:data:`~autoprofiler_env.harness.tolerance.PRESETS`, e.g.
            ``"kernelbench-v0.1"``, ``"kernelbench"``) whose per-dtype atol/rtol replace
            ``atol`` and ``rtol``.
        n_correctness: how many fresh random input sets a candidate must match.
        seed: seeds the weights (the same for Model and ModelNew) and the input sets.
        warmup_ms: time spent running the model before any timing.
        timing_budget_ms: timed trials run until about this much time is spent ...
        min_trials, max_trials: ... but at least and at most this many.
        flush_l2: on CUDA, overwrite a buffer twice the L2's size before every trial, so no
            trial reads its inputs from the previous trial's cache.
        rounds: timing runs in this many rounds, each a batch of the reference and a batch of
            the candidate, alternating which goes first, so that drift cancels.
        static_check: ``"enforce"`` (rejecting findings fail the candidate), ``"warn"`` (they
            are listed only: tests of the runtime defences use it) or ``"off"``.
        sandbox: isolate the candidate's process (namespaces, limits, a scrubbed
            environment: docs/harness.md); False only for debugging.
        posed_at: the regime at which a problem must be well-posed (no constant output
            matches its reference's): a problem that is not is refused. None: the judged
            tolerance. A recording that is replayed under several regimes checks the strictest
            (:data:`~autoprofiler_env.harness.tolerance.STRICTEST`) and keeps
            :attr:`ReferenceRun.constant_needed`, so that the replay leaves the problem out of
            a looser regime where a constant would pass.
    """

    device: str = "cpu"
    size: Size = "full"
    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL
    n_correctness: int = 3
    seed: int = 42
    warmup_ms: float = 25.0
    timing_budget_ms: float = 300.0
    min_trials: int = 10
    max_trials: int = 500
    flush_l2: bool = True
    tolerance: str | None = None
    rounds: int = 5
    static_check: str = "enforce"
    sandbox: bool = True
    posed_at: str | None = None

    def __post_init__(self) -> None:
        from autoprofiler_env.harness.tolerance import resolve

        for regime in (self.tolerance, self.posed_at):
            if regime is not None:
                resolve(regime)  # an unknown name fails here, with the names it knows
        if self.static_check not in ("enforce", "warn", "off"):
            raise ValueError(f"static_check must be 'enforce', 'warn' or 'off', got "
                             f"{self.static_check!r}")
        if self.rounds < 1 or self.n_correctness < 1:
            raise ValueError("rounds and n_correctness must be at least 1")

    def tolerance_for(self, dtype: str) -> tuple[float, float]:
        """(atol, rtol) for an output of this dtype (``"float32"``)."""
        if self.tolerance is None:
            return self.atol, self.rtol
        from autoprofiler_env.harness.tolerance import resolve

        return resolve(self.tolerance).for_dtype(dtype)

    def posed_for(self, dtype: str) -> tuple[float, float]:
        """(atol, rtol) at which no constant may match a reference output of this dtype."""
        if self.posed_at is None:
            return self.tolerance_for(dtype)
        from autoprofiler_env.harness.tolerance import resolve

        return resolve(self.posed_at).for_dtype(dtype)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Timing:
    """Trials of one program, in milliseconds."""

    median_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    p20_ms: float
    p80_ms: float
    n_trials: int
    method: str  # "cuda_events" or "perf_counter"

    @classmethod
    def from_trials(cls, trials_ms: list[float], method: str) -> Timing:
        if not trials_ms:
            raise ValueError("no trials")
        ordered = sorted(trials_ms)
        n = len(ordered)

        def q(f: float) -> float:
            return ordered[min(n - 1, max(0, round(f * (n - 1))))]

        return cls(
            median_ms=statistics.median(ordered),
            mean_ms=statistics.fmean(ordered),
            std_ms=statistics.pstdev(ordered) if n > 1 else 0.0,
            min_ms=ordered[0],
            p20_ms=q(0.2),
            p80_ms=q(0.8),
            n_trials=n,
            method=method,
        )


@dataclass(frozen=True)
class ReferenceRun:
    """The reference (eager PyTorch) of one problem on one device.

    ``constant_needed``: per floating output dtype, the smallest ``t`` at which a constant
    matches one of the reference's outputs with ``atol = rtol = t``
    (:func:`~autoprofiler_env.harness.correctness.constant_fits`): any regime that loose is
    ill-posed for the problem (:func:`~autoprofiler_env.harness.tolerance.admits_constant`).
    """

    problem_uri: str
    device: str
    timing: Timing
    peak_memory_bytes: int | None  # the CUDA caching allocator's peak; None on a CPU
    constant_needed: dict[str, float] | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class EvalResult:
    """The verdict on one candidate for one problem.

    ``correct`` is True only when every output matched on every input set (the correctness
    sets and the sampled timed calls) and every check of the judge passed; then ``candidate``
    holds its timing and ``speedup`` is reference median / candidate median, both timed in the
    same interleaved run. Otherwise ``error_kind`` says why and ``error_message`` gives the
    detail.

    ``tolerance_needed`` maps each floating output dtype to the smallest ``t`` at which the
    candidate passes with ``atol = rtol = t`` (``max |c - r| / (1 + |r|)`` over every compared
    value), so that a stricter regime can be judged from the record alone
    (:func:`~autoprofiler_env.harness.tolerance.passes`); None when it failed before any value
    could be compared, ``inf`` for a failure no tolerance fixes (shape, NaN, degenerate).
    ``timing_unexplained`` is the share of the judge's own clock over the candidate's timed
    batches that its reported times and the reference's measured overhead do not explain
    (docs/harness.md); ``rechecked`` says a suspicious speedup was measured again on fresh
    inputs. ``findings`` are the static check's warnings; ``isolation`` says what the sandbox
    of the candidate's process achieved; ``phases_s`` where the judgement's wall time went
    (prepare, start, load, correctness, queue, spare, warmup, timing, recheck: a diagnostic);
    ``wall_s`` is their sum but for ``queue``, the wait for its turn to be timed.
    """

    problem_uri: str
    device: str
    correct: bool
    error_kind: ErrorKind | None = None
    error_message: str = ""
    reference: Timing | None = None
    candidate: Timing | None = None
    max_abs_error: float | None = None
    n_correctness_passed: int = 0
    wall_s: float = 0.0
    config: dict = field(default_factory=dict)
    tolerance_needed: dict | None = None
    timing_unexplained: float | None = None
    rechecked: bool = False
    findings: list = field(default_factory=list)
    isolation: dict = field(default_factory=dict)
    phases_s: dict = field(default_factory=dict)

    @property
    def speedup(self) -> float | None:
        if not self.correct or self.reference is None or self.candidate is None:
            return None
        return self.reference.median_ms / self.candidate.median_ms

    @property
    def reference_ms(self) -> float | None:
        """The eager reference's median time, when it was timed."""
        return self.reference.median_ms if self.reference else None

    @property
    def candidate_ms(self) -> float | None:
        """The candidate's median time, when it was timed."""
        return self.candidate.median_ms if self.candidate else None

    @property
    def error_name(self) -> str | None:
        """``error_kind``'s value, as logs and records store it."""
        return self.error_kind.value if self.error_kind else None

    @property
    def summary(self) -> str:
        """One line for a terminal."""
        if self.correct:
            return (f"correct; {self.candidate.median_ms:.4g} ms vs reference "
                    f"{self.reference.median_ms:.4g} ms: speedup {self.speedup:.3f}x")
        return f"incorrect ({self.error_kind.value}): {self.error_message}"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["error_kind"] = self.error_name
        d["speedup"] = self.speedup
        return d

    @classmethod
    def from_dict(cls, d: dict) -> EvalResult:
        d = {k: v for k, v in d.items() if k != "speedup"}
        d["error_kind"] = ErrorKind(d["error_kind"]) if d.get("error_kind") else None
        for key in ("reference", "candidate"):
            if d.get(key) is not None:
                d[key] = Timing(**d[key])
        return cls(**d)
