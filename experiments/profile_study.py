"""The profiler study: what each section costs, and whether a subset's profile can be cut out
of one full run. Collecting needs a GPU; analysing runs anywhere on the collected files.

    python -m experiments.profile_study collect --out runs/profile_study [--part 1|2]
    python -m experiments.profile_study analyze --runs runs/profile_study

``collect`` is resumable: a configuration whose run is saved is not profiled again.
Part 1 profiles the study problems with every action section alone, ncu's three sets and five
subsets; part 2 profiles the whole suite with one section in one invocation, and a sample of
problems with one invocation each (the start-up cost the batching saves).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

STUDY_PROBLEMS = (
    "matmul_4096x4096x4096", "softmax_16384x4096", "relu_16384x16384",
    "conv2d_3x3_16x64x128x128", "layer_norm_16384x4096", "cumsum_8192x8192",
    "triplet_margin_loss_65536x1024", "linear_gelu_layernorm_4096x4096",
    "conv2d_batchnorm_relu_32x64x112x112", "linear_tiny_pointwise_chain_64x256",
    "mlp_tiny_8layer_64x256", "resnet_basic_block_32x64x56x56",
)
SUBSETS = (
    ("SpeedOfLight", "WarpStateStats"),
    ("ComputeWorkloadAnalysis", "WarpStateStats"),
    ("SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy"),
    ("LaunchStats", "Occupancy", "SchedulerStats", "InstructionStats"),
    ("SpeedOfLight", "ComputeWorkloadAnalysis", "MemoryWorkloadAnalysis", "WarpStateStats",
     "SourceCounters"),
)
PER_PROBLEM_SAMPLE = 8


def configurations(part: int) -> list[tuple[str, list[str], list[str]]]:
    """(name, sections, problem names) of every ncu invocation of the study."""
    from autoprofiler_env.problems import load_suite
    from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS, NCU_SETS

    if part == 1:
        configs = [(f"section-{s}", [s], list(STUDY_PROBLEMS)) for s in ACTION_SECTIONS]
        sets = [(f"set-{name}", list(sections), list(STUDY_PROBLEMS))
                for name, sections in NCU_SETS.items()]
        subsets = [("subset-" + "+".join(s), list(s), list(STUDY_PROBLEMS)) for s in SUBSETS]
        # full and the subsets first: the reconstruction study needs them; detailed last
        return configs + [sets[0], sets[2]] + subsets + [sets[1]]
    suite = [p.name for p in load_suite()]
    configs = [("suite-SpeedOfLight", ["SpeedOfLight"], suite)]
    configs += [(f"alone-SpeedOfLight-{name}", ["SpeedOfLight"], [name])
                for name in suite[:: len(suite) // PER_PROBLEM_SAMPLE][:PER_PROBLEM_SAMPLE]]
    return configs


def collect(out: Path, part: int) -> int:
    from autoprofiler_env.problems import load_problem
    from autoprofiler_env.profiler.runner import run_ncu

    configs = configurations(part)
    for i, (name, sections, names) in enumerate(configs):
        target = out / name
        if (target / "run.json").exists():
            continue
        started = time.perf_counter()
        run = run_ncu([load_problem(n) for n in names], sections, workdir=out / "_work")
        run.save(target)
        ok = sum(1 for r in run.status if r.get("event") == "problem" and r.get("ok"))
        print(f"[{i + 1}/{len(configs)}] {name}: {ok}/{len(names)} problems, "
              f"{time.perf_counter() - started:.1f} s, rc {run.returncode}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.profile_study")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("collect", help="profile on a GPU (resumable)")
    p.add_argument("--out", type=Path, default=Path("runs/profile_study"))
    p.add_argument("--part", type=int, choices=(1, 2), default=1)
    args = parser.parse_args(argv)
    if args.command == "collect":
        return collect(args.out, args.part)
    return 2


if __name__ == "__main__":
    sys.exit(main())
