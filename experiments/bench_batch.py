"""What the recorder saves by timing a batch's compiled candidates in the processes that
compiled them: one problem's compiled candidates judged both ways, each from an empty compile
cache, and each way's wall time printed (compiling at once, then judging one at a time) with
every candidate's verdict and speedup.

- ``held`` (the recorder's way since 2026-12-03): compiled and checked at once, each held in
  its process, then timed one at a time there (:meth:`CandidateWarmer.batch`);
- ``again`` (its way before): compiled at once to fill the cache
  (:meth:`CandidateWarmer.warm`), then judged again, one at a time, in fresh processes that
  load the compiled code from the cache and run the correctness sets a second time.

    python -m experiments.bench_batch [--device cuda] [--problem NAME] [--candidates A,B,...]

Defaults: the suite's ``linear_gelu_layernorm_4096x4096``; on a CPU at the smoke size with
``compile,max_autotune``, on a GPU at full size with ``compile,max_autotune,compile+tf32``.

Measured on the 2-core development machine (defaults, three runs, 2026-12-06): held
20.0-20.6 s, again 42.5-45.5 s; the judging after the compiles took 0.4 s held and
22.4-24.5 s again, where each fresh process's first call, a hit in the compile cache, still
took 10-14 s (phase ``correctness``). (On 2026-12-03, four runs, before later changes of the
judge: held 41.9-49.3 s, again 77.3-90.6 s, judging 0.4-0.7 s and 36.4-42.7 s.) The speedups
at the smoke size (0.03 ms calls) are noise on this machine (0.32x-1.84x either way);
``tests/test_harness_gpu.py`` compares them on a GPU.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def judge(way: str, problem, items: list, config, workers: int, cache: Path,
          timeout_s: float) -> tuple[float, float, list]:
    """Seconds compiling, seconds judging, and the results, one way."""
    from autoprofiler_env.dataset.record import CandidateWarmer
    from autoprofiler_env.harness import Evaluator

    with CandidateWarmer(config, workers, timeout_s, cache_dir=cache) as warmer, \
            Evaluator(config, timeout_s=timeout_s, cache_dir=cache) as alone:
        started = time.perf_counter()
        if way == "held":
            with warmer.batch(items) as batch:
                compiled = time.perf_counter()
                results = [batch.finish(i) for i in range(len(items))]
        else:
            warmer.warm(items)
            compiled = time.perf_counter()
            results = [None] * len(items)
        results = [r if r is not None else alone.evaluate(problem, source)  # as the recorder
                   for r, (_, _, source) in zip(results, items)]
        return compiled - started, time.perf_counter() - compiled, results


def main(argv: list[str] | None = None) -> int:
    from autoprofiler_env.features import static_features
    from autoprofiler_env.harness import HarnessConfig
    from autoprofiler_env.optimizers.compose import compose
    from autoprofiler_env.problems import load_problem

    parser = argparse.ArgumentParser(prog="python -m experiments.bench_batch",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--problem", default="linear_gelu_layernorm_4096x4096")
    parser.add_argument("--candidates", default=None,
                        help="comma-separated transformations (default: by device)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="the judge's limit for one candidate, in seconds")
    args = parser.parse_args(argv)
    on_gpu = args.device.startswith("cuda")
    names = (args.candidates or ("compile,max_autotune,compile+tf32" if on_gpu
                                 else "compile,max_autotune")).split(",")
    if len(names) < 2:
        parser.error("--candidates: at least two, so that a batch is compiled at once")
    problem = load_problem(args.problem)
    features = static_features(problem)
    items = [(problem, name, compose(problem, features, name)) for name in names]
    config = HarnessConfig(device=args.device, size="full" if on_gpu else "smoke")
    print(f"{problem.uri}, {len(items)} candidates on {args.device}: {', '.join(names)}")
    totals = {}
    for way in ("held", "again"):
        with tempfile.TemporaryDirectory(prefix=f"bench-batch-{way}-") as cache:
            compiling, judging, results = judge(way, problem, items, config, len(items),
                                                Path(cache), args.timeout)
        totals[way] = compiling + judging
        print(f"{way:>5}: {compiling + judging:6.1f} s (compiling {compiling:.1f} s, then "
              f"judging {judging:.1f} s)")
        for name, r in zip(names, results):
            verdict = (f"{r.speedup:.2f}x ({r.reference_ms:.3g}/{r.candidate_ms:.3g} ms)"
                       if r.correct else f"failed ({r.error_name})")
            phases = ", ".join(f"{k} {v:.1f}" for k, v in r.phases_s.items() if v >= 0.05)
            print(f"       {name:<24} {verdict:<30} {r.wall_s:5.1f} s: {phases}")
    print(f"held saves {totals['again'] - totals['held']:.1f} s of {totals['again']:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
