"""The program that ncu profiles: it runs several problems in one process, so that Python's
and torch's start-up (about 4 s) is paid once per ncu invocation, not once per problem.

    python -m autoprofiler_env.profiler.driver SPEC.json

SPEC is a JSON object ``{"problems": [{"uri", "path"[, "candidate"]}...], "size": "full",
"warmup": 3, "status": "status.jsonl", "seed": 42, "max_ops": 64, "primer": true}``. With
``primer`` it first runs one tiny kernel inside a profiled range of its own (``PRIMER_INDEX``).
For each problem the driver builds the model (the problem's ``Model``, or with ``candidate``
that file's ``ModelNew``: :func:`build`) and the inputs on the GPU, runs ``warmup`` calls (not
profiled: ncu's NVTX filter excludes them), then one call inside the NVTX range
``ap_<index>``: ncu profiles exactly the kernels of that call. With ``max_ops`` the range
closes after that many PyTorch operators, so a long program (a 128-step recurrence) is
profiled on its first operators, whose kernels repeat in the rest; ``ops`` and
``ops_profiled`` in the status line say how many there were. It appends one JSON line per
problem to the status file -- ``profiled_s`` is the wall time of the measured call, which
under ncu is the time spent replaying its kernels -- so that a crash or a hang names the
problem it happened in. The last warm-up call counts the forward's operators, and a
``range`` line before the measured call says how many the range will hold
(``ops_profiled``), so that the runner can bound the call's time by its size."""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

RANGE_PREFIX = "ap_"
PRIMER_INDEX = 999999
"""The range of the primer: one tiny kernel that ncu profiles before the first problem, so that
ncu's one-time start-up of profiling (0.7-5 s measured on the H200) is not counted in the first
problem's ``profiled_s``. No problem has this index, so its kernel belongs to none."""


def _ranged_call(model, inputs, name: str | None, max_ops: int | None):
    """Calls ``model(*inputs)`` inside the NVTX range ``name`` (None: in none, only counting),
    closed after ``max_ops`` operators when given. Returns (operators run, operators inside
    the range)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        ops = 0
        open = name is not None

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if self.open and max_ops is not None and self.ops >= max_ops:
                torch.cuda.nvtx.range_pop()
                self.open = False
            self.ops += 1
            return func(*args, **(kwargs or {}))

    counter = Count()
    if counter.open:
        torch.cuda.nvtx.range_push(name)
    try:
        with counter:
            model(*inputs)
        torch.cuda.synchronize()
    finally:
        if counter.open:
            torch.cuda.nvtx.range_pop()
    return counter.ops, counter.ops if max_ops is None else min(counter.ops, max_ops)


def _status(path: Path, row: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(row) + "\n")
        f.flush()


def build(problem: dict, size: str = "full", seed: int = 42, device: str = "cuda"):
    """The model and the inputs the driver profiles for one entry of the spec, on ``device``:
    the problem file's ``Model``, or, where the entry names a ``candidate`` file, its
    ``ModelNew`` (the user's own kernel, imported here as their program: profiling is not
    judging, and runs no sandbox), built from the problem's ``get_init_inputs`` with the
    seeds the harness builds the reference with, and called on the problem's ``get_inputs``.

    Raises:
        ProblemError: the problem or the candidate file does not import, or the candidate
            defines no ``ModelNew``.
    """
    import importlib.util

    import torch

    from autoprofiler_env.errors import ProblemError
    from autoprofiler_env.problems.problem import import_problem

    module = import_problem(Path(problem["path"]), size)
    model_class = module.Model
    if problem.get("candidate"):
        path = Path(problem["candidate"])
        spec = importlib.util.spec_from_file_location("_autoprofiler_candidate", path)
        if spec is None or spec.loader is None:
            raise ProblemError(path, "is not an importable Python file")
        candidate = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = candidate
        try:
            spec.loader.exec_module(candidate)
        except Exception as e:  # the candidate's own code: anything can happen
            raise ProblemError(path, f"import failed: {type(e).__name__}: {e}") from e
        model_class = getattr(candidate, "ModelNew", None)
        if not callable(model_class):
            raise ProblemError(path, "defines no ModelNew")
    torch.manual_seed(seed)
    with torch.device(device):
        model = model_class(*module.get_init_inputs())
    model = model.to(device)
    torch.manual_seed(seed + 1)
    with torch.device(device):
        inputs = module.get_inputs()
    return model, [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    status = Path(spec["status"])
    if spec.get("parent_pid"):  # a profiler killed outright (SIGKILL) stops its ncu run too
        from autoprofiler_env.processes import exit_with

        exit_with(int(spec["parent_pid"]))
    import torch

    # fp32 as the harness runs it: cuDNN would otherwise use TF32 for convolutions
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    _status(status, {"event": "started", "t": time.time()})
    if spec.get("primer"):
        primer = torch.ones(1, device="cuda")
        torch.cuda.synchronize()
        started = time.perf_counter()
        torch.cuda.nvtx.range_push(f"{RANGE_PREFIX}{PRIMER_INDEX}")
        primer.add_(1)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        _status(status, {"event": "primer", "s": time.perf_counter() - started})
    for index, problem in enumerate(spec["problems"]):
        if index < spec.get("start", 0):
            continue
        _status(status, {"event": "begin", "index": index, "uri": problem["uri"]})
        row = {"event": "problem", "index": index, "uri": problem["uri"]}
        started = time.perf_counter()
        try:
            model, inputs = build(problem, spec.get("size", "full"), spec.get("seed", 42))
            with torch.no_grad():
                warmup = spec.get("warmup", 3)
                for _ in range(warmup - 1):
                    model(*inputs)
                if warmup:  # the last one counts the operators that the range will hold
                    ops, ops_profiled = _ranged_call(model, inputs, None, spec.get("max_ops"))
                    _status(status, {"event": "range", "index": index, "ops": ops,
                                     "ops_profiled": ops_profiled})
                torch.cuda.synchronize()
                measured = time.perf_counter()
                row["ops"], row["ops_profiled"] = _ranged_call(
                    model, inputs, f"{RANGE_PREFIX}{index}", spec.get("max_ops"))
                row["profiled_s"] = time.perf_counter() - measured
            row.update(ok=True, setup_s=measured - started)
            del model, inputs
            torch.cuda.empty_cache()
        except Exception as e:
            row.update(ok=False, error=f"{type(e).__name__}: {e}".splitlines()[0][:500],
                       traceback=traceback.format_exc()[-2000:])
            if "CUDA error" in str(e) or "illegal memory access" in str(e):
                _status(status, row)
                return 3  # the context is lost: the runner restarts after this problem
        _status(status, row)
    _status(status, {"event": "finished", "t": time.time()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
