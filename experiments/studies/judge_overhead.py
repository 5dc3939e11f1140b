"""Why does judge 2 time some small references (and some candidates) slower than judge 1 did?

    python3 -m experiments.studies.judge_overhead run     [--out DIR] [--deadline S]
        [--phases micro,probe,judge] [--reps N] [--variants as_is,...] [--judge-reps N]
        [--judge-rep-start N] [--problems A,B] [--judge-problems A,B]            # GPU
    python -m experiments.studies.judge_overhead analyze  [--out DIR]          # any machine

The first recording (judge 1, ``git show dccd1d7:autoprofiler_env/harness/timing.py``) timed
the reference and the candidate in one process: the same input set for every call, an L2
flush, then CUDA events around the call, no synchronize between calls. Judge 2
(``autoprofiler_env/harness``) times each in a worker process of its own (the candidate's
sandboxed, with an audit hook), a fresh input set made per call, in rounds that alternate the
two, with the parent's clock around every batch. On the H200 the rejudge
(``docs/data/rejudge_h200``) timed ``mlp_tiny_8layer_64x256``'s reference at 0.33 and 0.61 ms
against judge 1's 0.27, and several fp16/bf16/TF32 convolution candidates 20-120% slower.

``run`` (GPU) appends one row per measurement to ``DIR/rows.jsonl`` (resumable: a row whose
key is already there is not measured again):

- ``micro``: judge 2's workers (``WorkerProcess``, the package's own code) started with
  :func:`worker_main` as their entry point, which adds the timing procedures of
  :data:`MODES` to ``Runner.time`` (chosen by the request's ``flush`` field), resets the
  global TF32/cuDNN switches before each ``load`` (these workers load many programs; judge 2
  starts a fresh one per candidate) and can leave the audit hook out; the package is not
  changed. Five workers (:data:`WORKERS`): judge 2's reference worker, its candidate worker
  (sandbox and audit hook), the same without the hook, without the sandbox, and without
  both. Each times the problem's reference program (in a candidate's worker as a candidate
  source, ``ModelNew = Model``) and one candidate, ``reps`` interleaved repeats, plus the
  host's cost of a small launch and of a Python loop;
- ``probe``: the host time of the pieces of ``Runner.inputs`` (and whether any waits for
  the GPU), and the host's speed on each CPU in turn;
- ``judge``: the real :class:`~autoprofiler_env.harness.Evaluator` (a subclass that only logs
  each timed batch: its times, the parent's clock, the CPUs busy meanwhile) on the
  (problem, candidate) pairs, in the variants of :data:`JUDGE_VARIANTS`, one of which is the
  fix this study proposes (``pregen_inputs``: :func:`_time_pregen`).

``analyze`` writes ``DIR/summary.json`` (per problem, program, worker and mode the median over
repeats of each batch's median, with the repeats' range; the factors; the host's speed) and
prints the tables of ``DIR/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

DEFAULT_OUT = Path("docs/data/judge_overhead_h200")
RECORDING = Path("docs/data/recording_h200")
REJUDGE = Path("docs/data/rejudge_h200/rejudged.jsonl")

PROBLEMS = [  # (problem, candidate): launch-bound ones, the largest candidate gaps, controls
    ("mlp_tiny_8layer_64x256", "cuda_graph"),
    ("linear_tiny_pointwise_chain_64x256", "cuda_graph"),
    ("linear_l2normalize_scale_16384x512x128", "cuda_graph"),
    ("conv2d_groupnorm_silu_mean_16x128x64x64", "autocast_bf16"),
    ("conv_transpose3d_8x32x16x32x32", "autocast_fp16"),
    ("conv_transpose2d_16x128x64x64", "autocast_bf16"),
    ("conv2d_1x1_32x256x56x56", "tf32"),
    ("conv3d_4x32x32x64x64", "autocast_fp16"),            # control: same speedup in both
    ("linear_gelu_layernorm_4096x4096", "triton_layer_norm"),  # control: compute-bound
]

MODES = {
    "j1": "judge 1's loop: one input set, L2 flush, events made ahead, no per-call work",
    "j2": "judge 2's Runner.time as is: fresh inputs made per call, flush, events per call",
    "fixed": "judge 2's loop with one input set for every call",
    "pregen": "judge 2's loop, fresh input sets all made before the loop",
    "sync": "judge 2's loop, synchronize before each call (the call starts on an idle GPU)",
    "noflush": "judge 2's loop without the L2 flush",
    "batch": "one input set, no flush, one pair of events around the whole batch / n",
    "host": "one input set, flush, synchronize, perf_counter around call + synchronize",
    "bench": "judge 2's loop with cudnn.benchmark on (after 3 priming calls)",
    "j2b": "judge 2's loop again, cudnn.benchmark off, after 'bench' in the same process",
}

WORKERS = {  # name: (role, sandbox, entry flags)
    "ref": ("reference", False, ""),
    "cand_sandbox": ("candidate", True, ""),
    "cand_sandbox_noaudit": ("candidate", True, "noaudit"),
    "cand_nosandbox": ("candidate", False, ""),
    "cand_plain": ("candidate", False, "noaudit"),
}

FULL = ["j1", "j2", "fixed", "pregen", "sync", "noflush", "batch", "host"]
SHORT = ["j1", "j2"]
PLAN = {  # worker: {program: modes}
    "ref": {"reference": FULL},
    "cand_sandbox": {"reference": SHORT + ["fixed"], "candidate": FULL},
    "cand_plain": {"reference": SHORT + ["fixed"], "candidate": FULL + ["bench", "j2b"]},
    "cand_sandbox_noaudit": {"reference": SHORT, "candidate": SHORT},
    "cand_nosandbox": {"reference": SHORT, "candidate": SHORT},
}

PROBE_PROBLEMS = ["mlp_tiny_8layer_64x256", "conv_transpose2d_16x128x64x64"]
PROBE_PLAN = {"ref": {"reference": ["probe", "cpuscan"]},
              "cand_sandbox": {"candidate": ["probe", "cpuscan"]}}

JUDGE_VARIANTS = {  # name: (HarnessConfig kwargs, Evaluator kwargs, worker entry flags)
    "as_is": ({}, {}, ""),
    "nosandbox": ({"sandbox": False, "static_check": "off"}, {}, ""),
    "noaudit": ({}, {}, "noaudit"),
    "nospare": ({}, {"spare": False}, ""),
    "fixed_inputs": ({}, {}, "fixedinputs"),
    "pregen_inputs": ({}, {}, "pregeninputs"),  # the proposed fix (_time_pregen)
}

BATCH_MS = 60.0  # a micro batch: about this long, 20 to 100 calls
PREGEN_BYTES = 2 << 30


# -- inside a worker ------------------------------------------------------------------------

def worker_main(flags: str = "") -> None:
    """A judge-2 worker (``autoprofiler_env.harness.worker.main``) with this study's timing
    procedures added; ``noaudit`` leaves the candidate's audit hook out, ``fixedinputs`` makes
    judge 2's own timed batches reuse their first input set."""
    chosen = {f for f in flags.split(",") if f}
    from autoprofiler_env.harness import worker

    if "noaudit" in chosen:
        sys.addaudithook = lambda hook: None
    original, original_load = worker.Runner.time, worker.Runner.load

    def load(self, *args, **kwargs):
        # one worker of this study loads many programs: a TF32 candidate's global switches
        # must not reach the next program (judge 2 starts a fresh worker per candidate)
        torch = self.torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = False
        torch.set_float32_matmul_precision("highest")
        return original_load(self, *args, **kwargs)

    def time_request(self, seeds, flush, sample):
        if isinstance(flush, dict):
            started = time.perf_counter()
            reply = _MODE_FUNCS[flush["mode"]](self, seeds)
            reply["worker_wall_ms"] = (time.perf_counter() - started) * 1e3
            reply.setdefault("changed", False)
            return reply
        if "pregeninputs" in chosen and _cuda(self):
            return _time_pregen(self, seeds, flush, sample)
        if "fixedinputs" in chosen:
            fixed = self.inputs(seeds[0])
            self.inputs = lambda seed, checked=False: fixed
            try:
                return original(self, seeds, flush, sample)
            finally:
                del self.inputs
        return original(self, seeds, flush, sample)

    worker.Runner.time = time_request
    worker.Runner.load = load
    worker.Runner._study_original_time = original
    worker.main()


def _cuda(runner) -> bool:
    return runner.torch.device(runner.device).type == "cuda"


def _event(runner):
    return runner.torch.cuda.Event(enable_timing=True)


def _loop(runner, seeds, gen: str = "fresh", flush: bool = True, sync: bool = False) -> dict:
    """Judge 2's timed loop (worker.Runner.time) with one thing changed at a time."""
    torch = runner.torch
    cuda = _cuda(runner)
    buffer = runner._flush_buffer() if cuda and flush else None
    fixed = runner.inputs(seeds[0]) if gen == "fixed" else None
    pool = []
    if gen == "pregen":
        first = runner.inputs(seeds[0])
        size = sum(x.numel() * x.element_size() for x in first if isinstance(x, torch.Tensor))
        k = max(2, min(len(seeds), PREGEN_BYTES // max(size, 1)))
        pool = [first] + [runner.inputs(s) for s in seeds[1:k]]
    runner.sync()
    events, times = [], []
    for i, seed in enumerate(seeds):
        inputs = fixed if fixed is not None else pool[i % len(pool)] if pool else \
            runner.inputs(seed)
        if cuda:
            if buffer is not None:
                buffer.zero_()
            if sync:
                runner.sync()
            start, end = _event(runner), _event(runner)
            start.record()
            output = runner.run(inputs)
            end.record()
            events.append((start, end))
        else:
            t0 = time.perf_counter()
            output = runner.run(inputs)
            times.append((time.perf_counter() - t0) * 1e3)
        del output, inputs
    runner.sync()
    if cuda:
        times = [s.elapsed_time(e) for s, e in events]
    return {"times_ms": times, "pool": len(pool)}


def _nbytes(inputs: list) -> int:
    return sum(x.numel() * x.element_size() for x in inputs if hasattr(x, "element_size"))


def _time_pregen(runner, seeds, flush, sample) -> dict:
    """The fix proposed for judge 2's ``Runner.time``: the same batch (a fresh input set per
    call from its own seed, L2 flush, CUDA events, sampled outputs snapshotted at return and
    checked after a synchronize), but the input sets are made before the first timed call
    (in chunks of at most PREGEN_BYTES, each made and synchronized before it is timed), so
    the host does between two timed calls only what judge 1 did."""
    sample = set(sample)
    runner.samples = []
    kept, changed, times = [], False, []
    buffer = runner._flush_buffer() if flush else None
    i = 0
    while i < len(seeds):
        first = runner.inputs(seeds[i])
        k = max(1, min(len(seeds) - i, PREGEN_BYTES // max(_nbytes(first), 1)))
        chunk = [first] + [runner.inputs(s) for s in seeds[i + 1:i + k]]
        runner.sync()
        events = []
        for j, inputs in enumerate(chunk):
            if buffer is not None:
                buffer.zero_()
            start, end = _event(runner), _event(runner)
            start.record()
            output = runner.run(inputs)
            end.record()
            events.append((start, end))
            if i + j in sample:
                specs, snaps, live = runner._snapshot(output)
                runner.sync()
                changed = changed or runner._changed(snaps, live)
                kept.append((seeds[i + j], specs, snaps))
                del live
            del output
        runner.sync()
        times += [s.elapsed_time(e) for s, e in events]
        del chunk, first
        i += k
    runner.samples = kept
    return {"times_ms": times, "changed": changed}


def _mode_probe(runner, seeds) -> dict:
    """Host time of the pieces of ``Runner.inputs`` (median of 20, GPU idle), and the same
    right after a 20 ms GPU sleep was queued: a piece that waits for the GPU takes ~20 ms."""
    torch = runner.torch

    def get(i):
        with torch.device(runner.device):
            return runner.module.get_inputs()

    pieces = {"inputs": lambda i: runner.inputs(seeds[0] + i),
              "manual_seed": lambda i: torch.manual_seed(seeds[0] + i),
              "cuda_manual_seed": lambda i: torch.cuda.manual_seed(seeds[0] + i),
              "get_inputs_in_device_context": get,
              "flush_launch": lambda i: runner._flush_buffer().zero_(),
              "nothing": lambda i: None}
    if not _cuda(runner):  # a CPU smoke test: no GPU to keep busy
        pieces = {k: v for k, v in pieces.items() if k in ("inputs", "nothing")}
    probe = {}
    for name, fn in pieces.items():
        idle, busy = [], []
        for i in range(20):
            runner.sync()
            t0 = time.perf_counter()
            fn(i)
            idle.append((time.perf_counter() - t0) * 1e3)
        for i in range(3 if _cuda(runner) else 0):
            runner.sync()
            torch.cuda._sleep(int(20e-3 * 1.98e9))
            t0 = time.perf_counter()
            fn(i)
            busy.append((time.perf_counter() - t0) * 1e3)
        runner.sync()
        probe[name] = {"idle_ms": statistics.median(idle), "after_gpu_sleep_ms":
                       statistics.median(busy) if busy else None}
    return {"times_ms": [probe["inputs"]["idle_ms"]], "probe": probe}


def _python_loop_ms(n: int = 100_000) -> float:
    t0 = time.perf_counter()
    total = 0
    for i in range(n):
        total += i * i
    return (time.perf_counter() - t0) * 1e3


def _mode_cpuscan(runner, seeds) -> dict:
    """The Python loop and a small launch on each CPU in turn (this thread pinned), twice
    (forward, then backward): is the host's speed a property of the CPU or of the moment?"""
    torch = runner.torch
    cpus = sorted(os.sched_getaffinity(0))
    x = torch.zeros(1, device=runner.device)
    scan: dict[str, list] = {}
    try:
        for order in (cpus, cpus[::-1]):
            for cpu in order:
                os.sched_setaffinity(0, {cpu})
                py = statistics.median(_python_loop_ms() for _ in range(3))
                t0 = time.perf_counter()
                for _ in range(500):
                    x.add_(1)
                launch_us = (time.perf_counter() - t0) * 1e6 / 500
                runner.sync()
                scan.setdefault(str(cpu), []).append([round(py, 3), round(launch_us, 2)])
    finally:
        os.sched_setaffinity(0, set(cpus))
    return {"times_ms": [statistics.median(v[0] for vs in scan.values() for v in vs)],
            "cpuscan": scan}


def _mode_j1(runner, seeds) -> dict:
    """Judge 1's ``time_cuda`` trial loop, verbatim but for its warm-up (done by the
    ``warmup`` request before)."""
    torch = runner.torch
    inputs = runner.inputs(seeds[0])
    if not _cuda(runner):
        return _loop(runner, seeds, gen="fixed")
    flush = runner._flush_buffer()
    torch.cuda.synchronize(runner.device)
    n = len(seeds)
    starts = [_event(runner) for _ in range(n)]
    ends = [_event(runner) for _ in range(n)]
    with torch.no_grad():
        for s, e in zip(starts, ends):
            flush.zero_()
            s.record()
            runner.model(*inputs)
            e.record()
    torch.cuda.synchronize(runner.device)
    return {"times_ms": [s.elapsed_time(e) for s, e in zip(starts, ends)]}


def _mode_j2(runner, seeds) -> dict:
    return runner._study_original_time(seeds, True, [])


def _mode_noflush(runner, seeds) -> dict:
    return runner._study_original_time(seeds, False, [])


def _mode_batch(runner, seeds) -> dict:
    torch = runner.torch
    inputs = runner.inputs(seeds[0])
    runner.sync()
    if not _cuda(runner):
        t0 = time.perf_counter()
        for _ in seeds:
            runner.run(inputs)
        return {"times_ms": [(time.perf_counter() - t0) * 1e3 / len(seeds)]}
    start, end = _event(runner), _event(runner)
    start.record()
    with torch.no_grad():
        for _ in seeds:
            runner.model(*inputs)
    end.record()
    torch.cuda.synchronize(runner.device)
    return {"times_ms": [start.elapsed_time(end) / len(seeds)]}


def _mode_host(runner, seeds) -> dict:
    inputs = runner.inputs(seeds[0])
    buffer = runner._flush_buffer() if _cuda(runner) else None
    times = []
    for _ in seeds:
        if buffer is not None:
            buffer.zero_()
        runner.sync()
        t0 = time.perf_counter()
        runner.run(inputs)
        runner.sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return {"times_ms": times}


def _mode_bench(runner, seeds) -> dict:
    torch = runner.torch
    torch.backends.cudnn.benchmark = True
    inputs = runner.inputs(seeds[0])
    for _ in range(3):
        runner.run(inputs)
    runner.sync()
    return _loop(runner, seeds)


def _mode_j2b(runner, seeds) -> dict:
    runner.torch.backends.cudnn.benchmark = False
    return runner._study_original_time(seeds, True, [])


def _mode_launch(runner, seeds) -> dict:
    """The host's cost of one small kernel launch (``x.add_(1)``, 2000 a trial) and of a
    pure-Python loop, in this process: CPU speed, audit hook, sandbox."""
    torch = runner.torch
    device = runner.device if _cuda(runner) else "cpu"
    x = torch.zeros(1, device=device)
    runner.sync()
    per_launch_us, python_ms = [], []
    for _ in range(len(seeds)):
        t0 = time.perf_counter()
        for _ in range(2000):
            x.add_(1)
        per_launch_us.append((time.perf_counter() - t0) * 1e6 / 2000)
        runner.sync()
        t0 = time.perf_counter()
        total = 0
        for i in range(100_000):
            total += i * i
        python_ms.append((time.perf_counter() - t0) * 1e3)
    return {"times_ms": per_launch_us, "python_ms": python_ms,
            "cpus": len(os.sched_getaffinity(0)), "pid": os.getpid()}


_MODE_FUNCS = {
    "j1": _mode_j1,
    "j2": _mode_j2,
    "fixed": lambda r, s: _loop(r, s, gen="fixed"),
    "pregen": lambda r, s: _loop(r, s, gen="pregen"),
    "sync": lambda r, s: _loop(r, s, sync=True),
    "noflush": _mode_noflush,
    "batch": _mode_batch,
    "host": _mode_host,
    "bench": _mode_bench,
    "j2b": _mode_j2b,
    "launch": _mode_launch,
    "probe": _mode_probe,
    "cpuscan": _mode_cpuscan,
}


# -- the parent -----------------------------------------------------------------------------

def _entry(flags: str) -> str:
    return f"from experiments.studies.judge_overhead import worker_main; worker_main({flags!r})"


def _cpu_jiffies() -> tuple[int, int, int]:
    """(busy, idle, steal) jiffies of the whole machine, from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return (0, 0, 0)
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    steal = fields[7] if len(fields) > 7 else 0
    return (sum(fields[:8]) - idle - steal, idle, steal)


def _busy_cpus(before: tuple, after: tuple, wall_s: float) -> float | None:
    if wall_s <= 0 or before == (0, 0, 0):
        return None
    hz = os.sysconf("SC_CLK_TCK")
    return round((after[0] - before[0]) / hz / wall_s, 2)


def _stats(times: list[float]) -> dict:
    ordered = sorted(times)
    n = len(ordered)
    return {"n": n, "median_ms": statistics.median(ordered), "min_ms": ordered[0],
            "p20_ms": ordered[round(0.2 * (n - 1))], "p80_ms": ordered[round(0.8 * (n - 1))],
            "first5_ms": statistics.fmean(times[:5])}


def _rounded(value):
    """Floats to 5 significant digits (the rows stay small)."""
    if isinstance(value, float):
        return float(f"{value:.5g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _key(row: dict) -> tuple:
    return (row["phase"], row["problem"], row.get("worker") or row.get("variant"),
            row["program"], row["mode"], row["rep"])


def _gpu_state() -> str:
    import subprocess

    try:
        return subprocess.run(
            ["nvidia-smi", ("--query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,"
                            "pstate,clocks_event_reasons.active"), "--format=csv,noheader"],
            check=False, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return ""


def _sources(name: str, transformation: str) -> tuple:
    from autoprofiler_env.features import static_features
    from autoprofiler_env.optimizers import TRANSFORMATIONS
    from autoprofiler_env.problems import load_problem

    problem = load_problem(name)
    candidate = TRANSFORMATIONS[transformation].rewrite(problem, static_features(problem))
    as_candidate = problem.source.rstrip() + "\n\n\nModelNew = Model\n"
    return problem, {"reference": as_candidate, "candidate": candidate}


def _n_calls(per_call_ms: float) -> int:
    return max(20, min(100, int(BATCH_MS / max(per_call_ms, 1e-3))))


def _micro(problems, out_rows, done, log, deadline, reps, device, size, phase: str = "micro",
           plan: dict | None = None) -> None:
    """Each problem's programs in each worker of ``plan`` (default :data:`PLAN`), each mode
    ``reps`` times, interleaved; the ``micro`` phase adds the ``launch`` probe to each
    repeat."""
    from autoprofiler_env.harness import process

    plan = plan or PLAN
    extra_modes = ["launch"] if phase == "micro" else []
    workers = {}
    try:
        for name, (role, sandbox, flags) in WORKERS.items():
            if name not in plan:
                continue
            process._ENTRY = _entry(flags)
            workers[name] = process.WorkerProcess(role, sandbox=sandbox)
        for w in workers.values():
            w.wait_ready(process.STARTUP_TIMEOUT_S)
        for name, transformation in problems:
            if _past(deadline):
                return
            problem, sources = _sources(name, transformation)
            for wname, programs in plan.items():
                worker = workers[wname]
                for program, modes in programs.items():
                    if _past(deadline):
                        return
                    keys = [(phase, name, wname, program, m, r) for r in range(reps)
                            for m in modes + extra_modes]
                    if all(k in done for k in keys):
                        continue
                    source = None if wname == "ref" else sources[program]
                    started = time.perf_counter()
                    try:
                        _ask(worker, {"op": "load", "path": str(problem.path), "size": size,
                                      "device": device, "seed": 42, "source": source})
                        header = _ask(worker, {"op": "warmup", "seed": 43, "ms": 25.0})
                    except RuntimeError as e:  # a candidate that cannot run here: noted
                        log.write({"phase": f"{phase}_error", "problem": name, "worker": wname,
                                   "program": program, "error": str(e)[:300]})
                        print(f"micro {name} {wname} {program}: {str(e)[:200]}", flush=True)
                        continue
                    per_call = float(header["per_call_ms"])
                    load_s = time.perf_counter() - started
                    n = _n_calls(per_call)
                    for rep in range(reps):
                        for mode in modes + extra_modes:
                            key = (phase, name, wname, program, mode, rep)
                            if key in done or _past(deadline):
                                continue
                            seeds = [1000 + 7919 * rep + i for i in range(
                                5 if mode == "launch" else 1 if mode in ("probe", "cpuscan")
                                else n)]
                            before, t0 = _cpu_jiffies(), time.perf_counter()
                            header = _ask(worker, {"op": "time", "seeds": seeds,
                                                   "flush": {"mode": mode}, "sample": []})
                            wall = time.perf_counter() - t0
                            row = {"phase": phase, "problem": name, "worker": wname,
                                   "program": program, "transformation": transformation,
                                   "mode": mode, "rep": rep, "n_calls": len(seeds),
                                   "warmup_per_call_ms": per_call, "load_s": round(load_s, 2),
                                   **_stats(header["times_ms"]),
                                   "parent_wall_per_call_ms": wall * 1e3 / len(seeds),
                                   "worker_wall_per_call_ms": header["worker_wall_ms"]
                                   / len(seeds),
                                   "busy_cpus": _busy_cpus(before, _cpu_jiffies(), wall),
                                   "t": time.time()}
                            for extra in ("python_ms", "cpus", "pool", "probe", "cpuscan"):
                                if extra in header:
                                    row[extra] = (statistics.median(header[extra])
                                                  if isinstance(header[extra], list)
                                                  else header[extra])
                            row = _rounded(row)
                            log.write(row)
                            done.add(key)
                            out_rows.append(row)
                    print(f"{phase} {name} {wname} {program}: n={n} "
                          + " ".join(f"{r['mode']}={r['median_ms']:.4f}" for r in out_rows
                                     if r["problem"] == name and r["worker"] == wname
                                     and r["program"] == program and r["rep"] == 0), flush=True)
    finally:
        for w in workers.values():
            w.close()


def _ask(worker, message: dict) -> dict:
    header, _ = worker.request(message, 300.0)
    if header.get("ok") is not True:
        raise RuntimeError(f"the worker failed on {message.get('op')}: "
                           f"{json.dumps(header)[:800]}")
    return header


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() > deadline


def _logging_evaluator():
    from autoprofiler_env.harness import Evaluator

    class LoggingEvaluator(Evaluator):
        """Judge 2 unchanged; each timed batch's times, the parent's clock around it and the
        machine's busy CPUs meanwhile are kept in ``batches``."""

        batches: list

        def _log(self, side, message, call):
            before, t0 = _cpu_jiffies(), time.perf_counter()
            header, tensors = call()
            wall = time.perf_counter() - t0
            if message.get("op") == "time" and isinstance(header.get("times_ms"), list) \
                    and header["times_ms"]:
                n = len(header["times_ms"])
                s = _stats(header["times_ms"])
                self.batches.append({"side": side, "n": n, "median_ms": s["median_ms"],
                                     "first5_ms": s["first5_ms"],
                                     "parent_wall_per_call_ms": wall * 1e3 / n,
                                     "busy_cpus": _busy_cpus(before, _cpu_jiffies(), wall)})
            return header, tensors

        def _ref_request(self, problem, message, max_bytes=1 << 20):
            return self._log("reference", message, lambda: super(
                LoggingEvaluator, self)._ref_request(problem, message, max_bytes))

        def _ask(self, worker, message, deadline, state, max_bytes=1 << 20):
            return self._log("candidate", message, lambda: super(
                LoggingEvaluator, self)._ask(worker, message, deadline, state, max_bytes))

    return LoggingEvaluator


def _judge(problems, out_rows, done, log, deadline, reps, device, size, variants,
           rep_start: int = 0) -> None:
    """Each variant in turn (a variant named twice runs twice, its repeats numbered on), in
    one Evaluator of its own; within it, ``reps`` passes over the problems."""
    from autoprofiler_env.harness import HarnessConfig, process

    cls = _logging_evaluator()
    seen: dict[str, int] = {}
    for variant in variants:
        config_kw, eval_kw, flags = JUDGE_VARIANTS[variant]
        first = rep_start + reps * seen.get(variant, 0)
        seen[variant] = seen.get(variant, 0) + 1
        todo = [(name, t, rep) for rep in range(first, first + reps) for name, t in problems
                if ("judge", name, variant, "pair", "evaluate", rep) not in done]
        if not todo or _past(deadline):
            continue
        process._ENTRY = _entry(flags)
        config = HarnessConfig(device=device, size=size, tolerance="kernelbench-v0.1",
                               **config_kw)
        with cls(config, timeout_s=300, **eval_kw) as evaluator:
            for name, transformation, rep in todo:
                if _past(deadline):
                    return
                problem, sources = _sources(name, transformation)
                evaluator.batches = []
                before, t0 = _cpu_jiffies(), time.perf_counter()
                result = evaluator.evaluate(problem, sources["candidate"])
                wall = time.perf_counter() - t0
                batches = evaluator.batches
                row = {"phase": "judge", "problem": name, "variant": variant,
                       "program": "pair", "transformation": transformation, "mode": "evaluate",
                       "rep": rep, "correct": result.correct, "error": result.error_kind
                       and str(result.error_kind), "message": result.error_message[:200],
                       "reference_ms": result.reference_ms, "candidate_ms": result.candidate_ms,
                       "speedup": result.speedup, "rechecked": result.rechecked,
                       "timing_unexplained": result.timing_unexplained,
                       "wall_s": round(wall, 2),
                       "busy_cpus": _busy_cpus(before, _cpu_jiffies(), wall),
                       "batches": batches, "t": time.time()}
                row = _rounded(row)
                log.write(row)
                done.add(_key(row))
                out_rows.append(row)
                print(f"judge {variant} {name} rep {rep}: ref {row['reference_ms']} cand "
                      f"{row['candidate_ms']} speedup {row['speedup']} "
                      f"({row['wall_s']} s, {row['error']})", flush=True)


def run(out: Path, deadline_s: float | None, phases: list[str], reps: int,
        variants: list[str], problems: list[str] | None, device: str = "cuda",
        size: str = "full", judge_reps: int = 2, judge_rep_start: int = 0,
        judge_problems: list[str] | None = None) -> int:
    from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl

    deadline = time.monotonic() + deadline_s if deadline_s else None
    chosen = [p for p in PROBLEMS if problems is None or p[0] in problems]
    rows_path = out / "rows.jsonl"
    done = {_key(r) for r in read_jsonl(rows_path)
            if r.get("phase") in ("micro", "judge", "probe")}
    rows: list[dict] = []
    with JsonlAppender(rows_path) as log:
        log.write({"phase": "machine", "t": time.time(), "gpu_state": _gpu_state(),
                   "cpus": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)),
                   "loadavg": _loadavg()})
        if "micro" in phases:
            _micro(chosen, rows, done, log, deadline, reps, device, size)
        if "probe" in phases:
            _micro([p for p in PROBLEMS if p[0] in PROBE_PROBLEMS], rows, done, log, deadline,
                   1, device, size, phase="probe", plan=PROBE_PLAN)
        if "judge" in phases:
            if device.startswith("cuda"):  # as the rejudge: the judge's process holds CUDA
                from autoprofiler_env.dataset.record import machine_info

                machine_info(device)
            _judge([p for p in chosen if judge_problems is None or p[0] in judge_problems],
                   rows, done, log, deadline, judge_reps, device, size, variants,
                   judge_rep_start)
        log.write({"phase": "machine", "t": time.time(), "gpu_state": _gpu_state(),
                   "loadavg": _loadavg()})
    print(f"{len(rows)} rows measured, {len(read_jsonl(rows_path))} in {rows_path}")
    return 0


# -- analysis -------------------------------------------------------------------------------

def _spread(values: list[float]) -> dict:
    return {"median_ms": statistics.median(values), "min_ms": min(values),
            "max_ms": max(values), "reps": len(values)}


def _ratio(a: dict | None, b: dict | None) -> float | None:
    if not a or not b or not b.get("median_ms"):
        return None
    return round(a["median_ms"] / b["median_ms"], 3)


FAST_PYTHON_MS = 7.0
"""The 100k-iteration Python loop took 5.2-6.9 ms ("fast" host) or 7.6-11 ms ("slow") on the
H200 machine: a bimodal host speed (docs/data/judge_overhead_h200/README.md)."""


def analyze(out: Path) -> dict:
    from autoprofiler_env.jsonlines import read_jsonl

    rows = read_jsonl(out / "rows.jsonl")
    recorded_ref = {r["uri"].rsplit("/", 1)[-1]: r["median_ms"]
                    for r in read_jsonl(RECORDING / "reference.jsonl")}
    recorded_pair = {(r["uri"].rsplit("/", 1)[-1], r["transformation"]): r
                     for r in read_jsonl(RECORDING / "candidates.jsonl")}
    rejudged = {}
    for r in read_jsonl(REJUDGE):
        rejudged.setdefault(r["uri"].rsplit("/", 1)[-1], []).append(r)
    micro, judge, probes = {}, {}, {}
    for r in rows:
        if r.get("phase") == "micro":
            micro.setdefault((r["problem"], r["program"], r["worker"], r["mode"]),
                             []).append(r)
        elif r.get("phase") == "judge":
            judge.setdefault((r["problem"], r["variant"]), []).append(r)
        elif r.get("phase") == "probe":
            probes.setdefault(r["mode"], []).append(r)
    problems = []
    for name, transformation in PROBLEMS:
        pair = recorded_pair.get((name, transformation), {})
        again = [r for r in rejudged.get(name, []) if r["transformation"] == transformation]
        entry = {"problem": name, "candidate": transformation,
                 "judge1_recorded": {"reference_ms": recorded_ref.get(name),
                                     "pair_reference_ms": pair.get("reference_ms"),
                                     "candidate_ms": pair.get("candidate_ms"),
                                     "speedup": pair.get("speedup")},
                 "rejudge_recorded": {
                     "reference_ms": [r["reference_ms"] for r in rejudged.get(name, [])],
                     "candidate_ms": again[0]["candidate_ms"] if again else None,
                     "speedup": again[0]["speedup"] if again else None},
                 "micro": {}, "judge": {}}
        for (p, program, worker, mode), rs in sorted(micro.items()):
            if p != name:
                continue
            if mode == "launch":
                s = {"launch_us": statistics.median(r["median_ms"] for r in rs),
                     "python_loop_ms": [r.get("python_ms") for r in rs]}
            else:
                s = _spread([r["median_ms"] for r in rs])
                s["worker_wall_per_call_ms"] = statistics.median(
                    r["worker_wall_per_call_ms"] for r in rs)
            entry["micro"].setdefault(program, {}).setdefault(worker, {})[mode] = s
        for (p, variant), rs in sorted(judge.items()):
            if p != name:
                continue
            ok = [r for r in rs if r["reference_ms"]]
            ref_batches = [b for r in rs for b in r["batches"] if b["side"] == "reference"]
            cand_batches = [b for r in rs for b in r["batches"] if b["side"] == "candidate"]
            entry["judge"][variant] = {
                "reference_ms": _spread([r["reference_ms"] for r in ok]) if ok else None,
                "candidate_ms": _spread([r["candidate_ms"] for r in ok if r["candidate_ms"]])
                if any(r["candidate_ms"] for r in ok) else None,
                "speedup": [r["speedup"] for r in rs],
                "errors": [r["error"] for r in rs if r["error"]],
                "reference_batch_medians_ms": [round(b["median_ms"], 4) for b in ref_batches],
                "candidate_batch_medians_ms": [round(b["median_ms"], 4) for b in cand_batches],
                "reference_parent_wall_per_call_ms": statistics.median(
                    b["parent_wall_per_call_ms"] for b in ref_batches) if ref_batches else None,
            }
        cand = entry["micro"].get("candidate", {})
        plain, boxed = cand.get("cand_plain", {}), cand.get("cand_sandbox", {})
        ref = entry["micro"].get("reference", {}).get("ref", {})
        entry["factors"] = {
            "candidate_j2_over_j1": _ratio(plain.get("j2"), plain.get("j1")),
            "candidate_fixed_over_j1": _ratio(plain.get("fixed"), plain.get("j1")),
            "candidate_pregen_over_j1": _ratio(plain.get("pregen"), plain.get("j1")),
            "candidate_sync_over_j1": _ratio(plain.get("sync"), plain.get("j1")),
            "candidate_sandbox_over_plain_j1": _ratio(boxed.get("j1"), plain.get("j1")),
            "candidate_sandbox_over_plain_j2": _ratio(boxed.get("j2"), plain.get("j2")),
            "candidate_noaudit_over_audit_j2": _ratio(
                cand.get("cand_sandbox_noaudit", {}).get("j2"), boxed.get("j2")),
            "reference_j2_over_j1": _ratio(ref.get("j2"), ref.get("j1")),
            "reference_pregen_over_j1": _ratio(ref.get("pregen"), ref.get("j1")),
            "host_ms_added_per_call_by_inputs_in_loop": round(
                plain["j2"]["worker_wall_per_call_ms"] - plain["fixed"][
                    "worker_wall_per_call_ms"], 3) if "j2" in plain and "fixed" in plain
            else None,
            "candidate_pregen_over_judge1_recorded": round(
                plain["pregen"]["median_ms"] / pair["candidate_ms"], 3)
            if "pregen" in plain and pair.get("candidate_ms") else None,
            "candidate_evaluator_pregen_over_judge1_recorded": round(
                entry["judge"]["pregen_inputs"]["candidate_ms"]["median_ms"]
                / pair["candidate_ms"], 3)
            if (entry["judge"].get("pregen_inputs") or {}).get("candidate_ms")
            and pair.get("candidate_ms") else None,
        }
        problems.append(entry)
    python_ms = [v for r in rows if r.get("phase") == "micro" and r.get("mode") == "launch"
                 for v in [r.get("python_ms")] if v]
    scans = [c for r in probes.get("cpuscan", []) for c in r["cpuscan"].values()]
    host = {
        "python_loop_ms_all_repeats": {
            "n": len(python_ms), "fast_share": round(
                sum(v < FAST_PYTHON_MS for v in python_ms) / max(len(python_ms), 1), 3),
            "fast_median": statistics.median([v for v in python_ms if v < FAST_PYTHON_MS]
                                             or [0]),
            "slow_median": statistics.median([v for v in python_ms if v >= FAST_PYTHON_MS]
                                             or [0])},
        "cpuscan": {
            "cpus": len(scans),
            "cpus_fast_in_both_passes": sum(all(v[0] < FAST_PYTHON_MS for v in c)
                                            for c in scans),
            "cpus_slow_in_both_passes": sum(all(v[0] >= FAST_PYTHON_MS for v in c)
                                            for c in scans),
            "cpus_changing": sum(len({v[0] < FAST_PYTHON_MS for v in c}) > 1 for c in scans)},
        "launch_us_by_worker": {
            w: statistics.median(r["median_ms"] for r in rows if r.get("phase") == "micro"
                                 and r.get("mode") == "launch" and r["worker"] == w)
            for w in WORKERS},
        "inputs_pieces_ms": [{"problem": r["problem"], "worker": r["worker"], **{
            k: v for k, v in r["probe"].items()}} for r in probes.get("probe", [])],
    }
    summary = {"modes": MODES, "workers": {k: {"role": v[0], "sandbox": v[1],
                                               "audit_hook": v[0] == "candidate"
                                               and "noaudit" not in v[2]}
                                           for k, v in WORKERS.items()},
               "judge_variants": list(JUDGE_VARIANTS),
               "machine": [r for r in rows if r.get("phase") == "machine"],
               "host": host, "problems": problems}
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(_rounded(summary), indent=1) + "\n")
    print(tables(summary))
    return summary


def _fmt(value) -> str:
    return "" if value is None else f"{value:.3f}"


def _cell(d: dict | None) -> str:
    if not d:
        return ""
    if d.get("reps", 1) > 1:
        return f"{d['median_ms']:.3f} ({d['min_ms']:.3f}-{d['max_ms']:.3f})"
    return f"{d['median_ms']:.3f}"


def _short(name: str) -> str:
    return name.split("_")[0] + "_" + name.split("_")[1] if name.count("_") > 2 else name


def _table(title: str, head: list[str], body: list[list[str]]) -> list[str]:
    return ["", title, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + \
        ["| " + " | ".join(cells) + " |" for cells in body]


def tables(summary: dict) -> str:
    """The README's tables: medians in ms, (min-max) over the repeats."""
    lines: list[str] = []
    cols = [("ref", m) for m in ("j1", "j2", "fixed", "pregen", "sync", "batch")] + [
        ("cand_plain", "j2"), ("cand_sandbox", "j2")]
    body = []
    for p in summary["problems"]:
        micro = p["micro"].get("reference", {})
        body.append([p["problem"], _fmt(p["judge1_recorded"]["reference_ms"]),
                     ", ".join(f"{v:.3f}" for v in p["rejudge_recorded"]["reference_ms"]),
                     _cell((p["judge"].get("as_is") or {}).get("reference_ms")),
                     _cell((p["judge"].get("pregen_inputs") or {}).get("reference_ms"))]
                    + [_cell(micro.get(w, {}).get(m)) for w, m in cols])
    lines += _table("Reference program (eager Model), median ms",
                    ["problem", "judge 1 recorded", "rejudge recorded", "judge 2 as is",
                     "judge 2 + pregen (fix)"] + [f"{w}:{m}" for w, m in cols], body)
    cols = [("cand_plain", m) for m in ("j1", "j2", "fixed", "pregen", "sync", "noflush")] + [
        ("cand_sandbox", "j1"), ("cand_sandbox", "j2"), ("cand_sandbox_noaudit", "j2"),
        ("cand_nosandbox", "j2")]
    body = []
    for p in summary["problems"]:
        micro = p["micro"].get("candidate", {})
        body.append([p["problem"], p["candidate"],
                     _fmt(p["judge1_recorded"]["candidate_ms"]),
                     _fmt(p["rejudge_recorded"]["candidate_ms"]),
                     _cell((p["judge"].get("as_is") or {}).get("candidate_ms")),
                     _cell((p["judge"].get("pregen_inputs") or {}).get("candidate_ms"))]
                    + [_cell(micro.get(w, {}).get(m)) for w, m in cols])
    lines += _table("Candidate, median ms",
                    ["problem", "candidate", "judge 1 recorded", "rejudge recorded",
                     "judge 2 as is", "judge 2 + pregen (fix)"]
                    + [f"{w}:{m}" for w, m in cols], body)
    variants = [v for v in summary["judge_variants"]
                if any(v in p["judge"] for p in summary["problems"])]
    body = []
    for p in summary["problems"]:
        cells = [p["problem"], _fmt(p["judge1_recorded"]["speedup"]),
                 _fmt(p["rejudge_recorded"]["speedup"])]
        for v in variants:
            j = p["judge"].get(v)
            cells.append(", ".join(f"{s:.2f}" for s in j["speedup"] if s) if j else "")
        body.append(cells)
    lines += _table("Speedups (each judge 2 evaluation separately)",
                    ["problem", "judge 1 recorded", "rejudge recorded"] + variants, body)
    body = []
    for p in summary["problems"]:
        f = p["factors"]
        body.append([p["problem"]] + [_fmt(f[k]) if f[k] is not None else "" for k in (
            "candidate_j2_over_j1", "candidate_fixed_over_j1", "candidate_pregen_over_j1",
            "candidate_sync_over_j1", "candidate_sandbox_over_plain_j1",
            "candidate_sandbox_over_plain_j2", "candidate_noaudit_over_audit_j2",
            "host_ms_added_per_call_by_inputs_in_loop",
            "candidate_evaluator_pregen_over_judge1_recorded")])
    lines += _table("Factors (ratios of medians; host ms per call from the worker's clock)",
                    ["problem", "cand j2/j1", "cand fixed/j1", "cand pregen/j1",
                     "cand sync/j1", "sandbox/plain (j1)", "sandbox/plain (j2)",
                     "no audit/audit (j2)", "host ms added per call by fresh inputs",
                     "judge 2 + pregen / judge 1 recorded"], body)
    host = summary["host"]
    lines += ["", "Host speed: the 100k-iteration Python loop, "
              f"{host['python_loop_ms_all_repeats']}; per-CPU scan: {host['cpuscan']}; "
              "small launch, us, by worker: "
              + ", ".join(f"{k} {v:.1f}" for k, v in host["launch_us_by_worker"].items())]
    for piece in host["inputs_pieces_ms"]:
        lines.append(f"- {piece['problem']} ({piece['worker']}): " + ", ".join(
            f"{k} {v['idle_ms']:.3f} ms (after a 20 ms GPU sleep {v['after_gpu_sleep_ms']:.3f})"
            for k, v in piece.items() if isinstance(v, dict)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="measure (GPU)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--deadline", type=float, help="seconds after which nothing new starts")
    p.add_argument("--phases", default="micro,judge")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--variants", default="as_is",
                   help="judge variants in order (one named twice runs twice)")
    p.add_argument("--judge-reps", type=int, default=2)
    p.add_argument("--judge-rep-start", type=int, default=0,
                   help="the first repeat's number (a later run adds repeats)")
    p.add_argument("--problems", help="comma-separated problem names (default: all)")
    p.add_argument("--judge-problems", help="the judge phase's problems (default: all)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--size", default="full")
    p = sub.add_parser("analyze", help="summarise (any machine)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.command == "run":
        return run(args.out, args.deadline, args.phases.split(","), args.reps,
                   args.variants.split(","),
                   args.problems.split(",") if args.problems else None, args.device,
                   args.size, args.judge_reps, args.judge_rep_start,
                   args.judge_problems.split(",") if args.judge_problems else None)
    analyze(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
