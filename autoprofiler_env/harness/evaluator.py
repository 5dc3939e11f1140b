"""The caller's side of the harness: a reusable worker process with a time limit.

>>> from autoprofiler_env.harness import Evaluator, HarnessConfig
>>> from autoprofiler_env.problems import load_problem
>>> with Evaluator(HarnessConfig(device="cuda")) as ev:
...     result = ev.evaluate(load_problem("softmax_4096x8192"), open("candidate.py").read())
>>> result.correct, result.speedup

The worker imports torch once and is reused across evaluations. A candidate that hangs is
killed after ``timeout_s``; one that crashes the process or loses the CUDA context is reported
as such; in both cases the next evaluation starts a fresh worker.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from dataclasses import replace
from pathlib import Path

from autoprofiler_env.errors import EvaluationError, ProblemError
from autoprofiler_env.harness.records import ErrorKind, EvalResult, HarnessConfig, ReferenceRun
from autoprofiler_env.problems.problem import Problem

STARTUP_TIMEOUT_S = 180.0
"""Starting a worker imports torch and initialises CUDA: seconds, more on a loaded machine."""


def _serve(conn) -> None:
    from autoprofiler_env.harness.worker import serve

    serve(conn)


class Evaluator:
    """Checks and times candidates for problems in a reusable worker process.

    Args:
        config: the harness settings (device, tolerance, trials).
        timeout_s: the limit for one candidate: import, build, correctness runs and timing
            (``torch.compile`` candidates compile within it).
        prepare_timeout_s: the limit for making a problem ready (its reference is built,
            checked and timed once per worker).
    """

    def __init__(self, config: HarnessConfig | None = None, timeout_s: float = 300.0,
                 prepare_timeout_s: float = 600.0) -> None:
        self.config = config or HarnessConfig()
        self.timeout_s = timeout_s
        self.prepare_timeout_s = prepare_timeout_s
        self._ctx = mp.get_context("spawn")  # never fork a process that may hold CUDA
        self._process = None
        self._conn = None

    # -- the worker's life ------------------------------------------------------------------

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(target=_serve, args=(child,), daemon=True,
                                    name="autoprofiler-harness")
        process.start()
        child.close()
        self._process = process  # from here on, interrupt() can stop it
        if not parent.poll(STARTUP_TIMEOUT_S):
            parent.close()
            self._kill()
            raise EvaluationError(f"the harness worker did not start within "
                                  f"{STARTUP_TIMEOUT_S:.0f} s")
        try:
            parent.recv()
        except EOFError as e:
            process.join(5)
            parent.close()
            self._kill()
            raise EvaluationError(f"the harness worker died while starting (exit code "
                                  f"{process.exitcode}); run `python -c 'import torch'` to "
                                  "see why") from e
        self._conn = parent

    def _kill(self) -> None:
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
            self._process.join(10)
        if self._conn is not None:
            self._conn.close()
        self._process, self._conn = None, None

    def close(self) -> None:
        """Stops the worker. The evaluator can still be used: it starts a new one."""
        if self._conn is not None and self._process is not None and self._process.is_alive():
            try:
                self._conn.send(None)
                self._process.join(5)
            except (BrokenPipeError, OSError):
                pass
        self._kill()

    def interrupt(self) -> None:
        """Kills the worker now; safe from another thread. The evaluation in flight returns as
        a crash, the next one starts a fresh worker."""
        process = self._process
        if process is not None and process.is_alive():
            process.kill()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._kill()
        except Exception:
            pass

    @property
    def worker_pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    # -- requests ---------------------------------------------------------------------------

    def _request(self, message: dict, timeout_s: float) -> dict:
        """Sends one request; returns the reply, or a dict with ``timeout`` / ``crash`` set."""
        if self._process is None or not self._process.is_alive():
            self._kill()
            self._start()
        try:
            self._conn.send(message)
        except (BrokenPipeError, OSError):
            self._kill()
            return {"ok": False, "crash": "the worker was gone before the request"}
        if not self._conn.poll(timeout_s):
            self._kill()
            return {"ok": False, "timeout": f"no answer within {timeout_s:g} s: the worker "
                    "was killed"}
        try:
            reply = self._conn.recv()
        except (EOFError, OSError):
            self._process.join(10)
            code = self._process.exitcode
            self._kill()
            signal = f" (signal {-code})" if code is not None and code < 0 else ""
            return {"ok": False, "crash": f"the worker process died, exit code {code}{signal}"}
        if reply.get("cuda_error"):
            self._kill()
        return reply

    def _config_for(self, size: str | None) -> HarnessConfig:
        return self.config if size is None else replace(self.config, size=size)

    def reference(self, problem: Problem, size: str | None = None) -> ReferenceRun:
        """The reference's timing (eager PyTorch) and peak memory, measured once per worker.

        Raises:
            ProblemError: the problem is broken (import, forward, degenerate output) or its
                reference crashed or hung.
        """
        config = self._config_for(size)
        reply = self._request({"op": "prepare", "path": str(problem.path),
                               "config": config.to_dict()}, self.prepare_timeout_s)
        self._raise_for_problem(problem, reply)
        if not reply.get("ok"):
            reason = reply.get("timeout") or reply.get("crash") or reply.get("cuda_error")
            raise ProblemError(problem.path, f"the reference could not run: {reason}")
        return ReferenceRun(problem.uri, config.device, reply["reference"],
                            reply["peak_memory_bytes"])

    def evaluate(self, problem: Problem, source: str, size: str | None = None) -> EvalResult:
        """Judges one candidate (``ModelNew`` source) against a problem.

        A faulty candidate is not an exception: the result says ``correct=False`` with its
        ``error_kind``. Raises only when the problem itself is broken.

        Raises:
            ProblemError: the problem file or its reference is at fault.
        """
        self.reference(problem, size)  # prepared under its own, longer time limit
        config = self._config_for(size)
        started = time.perf_counter()
        reply = self._request({"op": "evaluate", "uri": problem.uri, "path": str(problem.path),
                               "source": source, "config": config.to_dict()}, self.timeout_s)
        if reply.get("ok"):
            return reply["result"]
        self._raise_for_problem(problem, reply)
        kind, message = (
            (ErrorKind.TIMEOUT, reply["timeout"]) if "timeout" in reply else
            (ErrorKind.CRASH, reply["crash"]) if "crash" in reply else
            (ErrorKind.CUDA, reply["cuda_error"]))
        return EvalResult(problem_uri=problem.uri, device=config.device, correct=False,
                          error_kind=kind, error_message=message,
                          wall_s=time.perf_counter() - started, config=config.to_dict())

    @staticmethod
    def _raise_for_problem(problem: Problem, reply: dict) -> None:
        """Raises if the reply blames the problem or the harness, not the candidate."""
        if "problem_error" in reply:
            raise ProblemError(reply["path"], reply["problem_error"])
        if "internal_error" in reply:
            raise EvaluationError(f"harness failure on {problem.path}: {reply['short']}\n"
                                  f"{reply['internal_error']}")


def evaluate(problem: Problem, source: str, config: HarnessConfig | None = None,
             timeout_s: float = 300.0) -> EvalResult:
    """One-off evaluation in a fresh worker (use :class:`Evaluator` for many)."""
    with Evaluator(config, timeout_s=timeout_s) as evaluator:
        return evaluator.evaluate(problem, source)


def read_candidate(path: str | Path) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise EvaluationError(f"cannot read the candidate {path}: {e.strerror}") from e
