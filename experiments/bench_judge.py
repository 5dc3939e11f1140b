"""The judge's cost per candidate on a problem with a large output: an honest ReLU candidate
judged ``--repeats`` times by one :class:`~autoprofiler_env.harness.Evaluator`, each
verdict's wall time and phases printed (the first pays for the reference's preparation).

    python -m experiments.bench_judge [--device cuda] [--mb 128] [--repeats 2]

KernelBench's outputs are large (a median of 378 MB over levels 1-2, 8.6 GB at most), and
moving them is most of judging them (docs/kernelbench-sessions.md). Measured on the
2-core development machine, ``--device cpu --mb 128`` (``timing_budget_ms=300``,
``max_trials=30``): judge 3 (commit dc7bf57) took 27.0 s then 20.1 s (timing 14.2 s,
13.1 s); judge 4 took 16.8-19.4 s then 10.5-10.7 s (timing 4.3-5.5 s; two runs).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn({rows}, 8192)]


def get_init_inputs():
    return []
'''

CANDIDATE = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''


def main(argv: list[str] | None = None) -> int:
    from autoprofiler_env.harness import Evaluator, HarnessConfig
    from autoprofiler_env.harness.records import JUDGE_VERSION
    from autoprofiler_env.problems import load_file

    parser = argparse.ArgumentParser(prog="python -m experiments.bench_judge",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--mb", type=int, default=128, help="the output's size (float32)")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    if args.mb < 1 or args.repeats < 1:
        parser.error("--mb and --repeats must be at least 1")
    rows = max(1, args.mb * (1 << 20) // (8192 * 4))
    config = HarnessConfig(device=args.device, timing_budget_ms=300, min_trials=3,
                           max_trials=30)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"relu_{rows}x8192.py"
        path.write_text(PROBLEM.format(rows=rows))
        problem = load_file(path)
        print(f"judge {JUDGE_VERSION}, {args.device}, output {rows * 8192 * 4 / 2**20:.0f} MB")
        with Evaluator(config, timeout_s=600) as evaluator:
            for k in range(args.repeats):
                started = time.perf_counter()
                result = evaluator.evaluate(problem, CANDIDATE)
                phases = ", ".join(f"{name} {s:.1f}" for name, s in result.phases_s.items())
                print(f"verdict {k}: {'correct' if result.correct else result.error_name}, "
                      f"{time.perf_counter() - started:.1f} s ({phases})", flush=True)
                if not result.correct:
                    print(f"  {result.error_message}")
                    return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
