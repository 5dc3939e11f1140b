"""The worker process: imports torch once, then checks and times candidates on request.

It runs in a child process (see :mod:`autoprofiler_env.harness.evaluator`), so that a
candidate that crashes the process, corrupts the CUDA context or never returns takes down only
the worker. Messages are plain dicts over a ``multiprocessing`` pipe.
"""

from __future__ import annotations

import gc
import importlib.util
import itertools
import os
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch
from torch.utils._pytree import tree_flatten

from autoprofiler_env.errors import ProblemError
from autoprofiler_env.harness.correctness import compare, trivial_match
from autoprofiler_env.harness.records import ErrorKind, EvalResult, HarnessConfig, Timing
from autoprofiler_env.harness.timing import time_fn
from autoprofiler_env.problems.problem import import_problem

_CUDA_ERROR_MARKS = ("CUDA error", "illegal memory access", "device-side assert",
                     "CUBLAS_STATUS", "CUDNN_STATUS", "unspecified launch failure")


class CudaContextLost(Exception):
    """A CUDA error after which this process cannot use the GPU again."""


@dataclass
class BackendFlags:
    """Global numerics switches that a candidate may change (TF32, cuDNN benchmark). The
    reference always runs with the flags the worker started with; a candidate with those it
    set while it was imported and built."""

    matmul_tf32: bool
    cudnn_tf32: bool
    cudnn_benchmark: bool
    matmul_precision: str

    @classmethod
    def capture(cls) -> BackendFlags:
        return cls(torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
                   torch.backends.cudnn.benchmark, torch.get_float32_matmul_precision())

    def apply(self) -> None:
        torch.backends.cuda.matmul.allow_tf32 = self.matmul_tf32
        torch.backends.cudnn.allow_tf32 = self.cudnn_tf32
        torch.backends.cudnn.benchmark = self.cudnn_benchmark
        torch.set_float32_matmul_precision(self.matmul_precision)


@dataclass
class Prepared:
    """A problem made ready on the device: its module, reference model and timing."""

    module: ModuleType
    model: torch.nn.Module
    reference: Timing
    peak_memory_bytes: int | None


def _is_cuda_error(e: BaseException) -> bool:
    return any(mark in str(e) for mark in _CUDA_ERROR_MARKS)


def _one_line(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    return text[0] if len(text) == 1 else f"{text[0]} ... {text[-1]}"[:500]


class Worker:
    """State kept between requests: prepared problems and a scratch folder for candidates."""

    def __init__(self) -> None:
        # fp32 means fp32: cuDNN's default would let convolutions use TF32.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.pristine = BackendFlags.capture()
        self.prepared: dict[tuple, Prepared] = {}
        self.scratch = Path(tempfile.mkdtemp(prefix="autoprofiler-candidates-"))
        self._ids = itertools.count()

    # -- helpers ----------------------------------------------------------------------------

    def _inputs(self, module: ModuleType, config: HarnessConfig, trial: int) -> list:
        torch.manual_seed(config.seed + 1 + trial)
        with torch.device(config.device):
            inputs = module.get_inputs()
        return [x.to(config.device) if isinstance(x, torch.Tensor) else x for x in inputs]

    def _build(self, cls, module: ModuleType, config: HarnessConfig) -> torch.nn.Module:
        torch.manual_seed(config.seed)
        with torch.device(config.device):
            model = cls(*module.get_init_inputs())
        return model.to(config.device)

    @staticmethod
    def _sync(config: HarnessConfig) -> None:
        if torch.device(config.device).type == "cuda":
            torch.cuda.synchronize(config.device)

    def _clone(self, inputs: list) -> list:
        return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]

    # -- requests ---------------------------------------------------------------------------

    def prepare(self, path: str, config: HarnessConfig) -> Prepared:
        """Imports the problem, builds the reference, checks it is well posed, times it."""
        key = (path, config.size, config.device, config.seed, config.atol, config.rtol)
        if key in self.prepared:
            return self.prepared[key]
        self.prepared.clear()  # one problem at a time on the device: its memory is freed
        gc.collect()
        module = import_problem(Path(path), config.size)
        self.pristine.apply()
        on_cuda = torch.device(config.device).type == "cuda"
        if on_cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(config.device)
            baseline = torch.cuda.memory_allocated(config.device)
        try:
            model = self._build(module.Model, module, config)
            inputs = self._inputs(module, config, 0)
            with torch.no_grad():
                output = model(*self._clone(inputs))
            self._sync(config)
            # the problem's own footprint: weights, inputs, one forward; not the harness's
            peak = (torch.cuda.max_memory_allocated(config.device) - baseline
                    if on_cuda else None)
        except Exception as e:
            if _is_cuda_error(e):
                raise CudaContextLost(_one_line(e)) from e
            raise ProblemError(path, f"the reference failed: {_one_line(e)}") from e
        for i, leaf in enumerate(t for t in tree_flatten(output)[0]
                                 if isinstance(t, torch.Tensor)):
            if torch.is_floating_point(leaf) and not bool(torch.isfinite(leaf).all()):
                raise ProblemError(path, f"the reference output {i} has NaN or Inf values")
            constant = trivial_match(leaf, config.atol, config.rtol)
            if constant:
                raise ProblemError(
                    path, f"the reference output {i} is matched by {constant} at atol="
                    f"{config.atol}, rtol={config.rtol}, so a constant candidate would pass",
                    "change the problem's inputs or sizes (docs/problems.md)")
        with torch.no_grad():
            reference = time_fn(lambda: model(*inputs), config)
        prepared = Prepared(module, model, reference, peak)
        self.prepared[key] = prepared
        return prepared

    def _load_candidate(self, source: str) -> ModuleType:
        path = self.scratch / f"candidate_{next(self._ids)}.py"
        path.write_text(source)  # a real file: triton's @jit and tracebacks read the source
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
        return module

    def evaluate(self, uri: str, path: str, source: str, config: HarnessConfig) -> EvalResult:
        started = time.perf_counter()
        prepared = self.prepare(path, config)

        def fail(kind: ErrorKind, message: str, passed: int = 0, err=None) -> EvalResult:
            return EvalResult(problem_uri=uri, device=config.device, correct=False,
                              error_kind=kind, error_message=message,
                              reference=prepared.reference, max_abs_error=err,
                              n_correctness_passed=passed,
                              wall_s=time.perf_counter() - started, config=config.to_dict())

        stage, passed, worst = ErrorKind.IMPORT, 0, 0.0
        try:
            self.pristine.apply()
            module = self._load_candidate(source)
            stage = ErrorKind.NO_MODEL_NEW
            model_new_cls = getattr(module, "ModelNew", None)
            if not isinstance(model_new_cls, type):
                return fail(ErrorKind.NO_MODEL_NEW, "the candidate defines no class ModelNew")
            stage = ErrorKind.INIT
            candidate = self._build(model_new_cls, prepared.module, config)
            flags = BackendFlags.capture()
            stage = ErrorKind.RUNTIME
            for trial in range(config.n_correctness):
                inputs = self._inputs(prepared.module, config, trial)
                with torch.no_grad():
                    self.pristine.apply()
                    expected = prepared.model(*self._clone(inputs))
                    flags.apply()
                    got = candidate(*self._clone(inputs))
                self._sync(config)
                mismatch, err = compare(expected, got, config.atol, config.rtol)
                if mismatch:
                    return fail(mismatch.kind, f"input set {trial}: {mismatch.message}",
                                passed, err if err == err else None)
                worst = max(worst, err)
                passed += 1
                del expected, got
            flags.apply()
            with torch.no_grad():
                timing = time_fn(lambda: candidate(*inputs), config)
        except Exception as e:
            if _is_cuda_error(e):
                raise CudaContextLost(_one_line(e)) from e
            return fail(stage, _one_line(e), passed)
        finally:
            self.pristine.apply()
            gc.collect()
            if torch.device(config.device).type == "cuda":
                try:
                    torch.cuda.empty_cache()
                except Exception:  # a lost context fails here too; the error above says why
                    pass
        return EvalResult(problem_uri=uri, device=config.device, correct=True,
                          reference=prepared.reference, candidate=timing,
                          max_abs_error=worst, n_correctness_passed=passed,
                          wall_s=time.perf_counter() - started, config=config.to_dict())


def serve(conn) -> None:
    """The worker's main loop: one reply per request until the pipe closes."""
    os.dup2(2, 1)  # a candidate's prints must not reach the caller's stdout (JSON lives there)
    sys.stdout = sys.stderr
    worker = Worker()
    conn.send({"ok": True, "pid": os.getpid(), "torch": torch.__version__})
    while True:
        try:
            request = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if request is None:
            return
        config = HarnessConfig(**request["config"])
        try:
            if request["op"] == "prepare":
                prepared = worker.prepare(request["path"], config)
                conn.send({"ok": True, "reference": prepared.reference,
                           "peak_memory_bytes": prepared.peak_memory_bytes})
            else:
                result = worker.evaluate(request["uri"], request["path"], request["source"],
                                         config)
                conn.send({"ok": True, "result": result})
        except ProblemError as e:
            conn.send({"ok": False, "problem_error": e.cause, "path": e.path})
        except CudaContextLost as e:
            conn.send({"ok": False, "cuda_error": str(e)})
            os._exit(3)  # the context is gone; the parent starts a fresh worker
        except Exception as e:  # a harness bug: report it whole, keep serving
            conn.send({"ok": False, "internal_error": traceback.format_exc(), "short": _one_line(e)})
