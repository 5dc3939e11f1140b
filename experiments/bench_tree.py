"""How long the tree learner takes with the search proposer, on one CPU core, and whether the
same seed gives the same tree.

    python -m experiments.bench_tree [--rounds 200] [--budget 0.25] [--seed 0] [--dataset FILE]

The process is pinned to one core (where the OS allows) and numerical libraries to one
thread; the learner runs twice from scratch with the same seed (fresh environments: nothing
memoized carries over), and prints each run's wall time, rounds per second, the episodes it
ran, and whether the two trees are equal. The goal (issue 16): 200 rounds in at most 5
minutes on one core, the same tree for the same seed.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402


def run(rounds: int, budget: float, seed: int, dataset: str | None):
    import gymnasium as gym

    import autoprofiler_env  # noqa: F401
    from agents.tree.learner import LearnConfig, learn
    from agents.tree.proposers.search import SearchProposer

    kwargs = {"dataset": dataset} if dataset else {}
    started = time.perf_counter()
    train = gym.make("AutoProfiler-v0", split="train", **kwargs)
    val = gym.make("AutoProfiler-v0", split="val", **kwargs)
    result = learn(train, val, SearchProposer(seed), LearnConfig(budget=budget, rounds=rounds),
                   progress=False)
    return result, time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--budget", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dataset")
    args = parser.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        cores = len(os.sched_getaffinity(0))
    else:
        cores = os.cpu_count()
    import torch

    torch.set_num_threads(1)
    trees, times = [], []
    for attempt in (1, 2):
        result, seconds = run(args.rounds, args.budget, args.seed, args.dataset)
        trees.append(result.tree)
        times.append(seconds)
        print(f"run {attempt}: {args.rounds} rounds in {seconds:.1f} s "
              f"({args.rounds / seconds:.1f} rounds/s; environments included) on {cores} "
              f"core(s): train {result.train:.4f}, validation {result.validation:.4f}, "
              f"{result.accepted} edits kept, {result.tree.size()} nodes")
    same = trees[0] == trees[1]
    print(f"same seed, same tree: {same}")
    ok = max(times) <= 300 and same
    print(f"goal (200 rounds <= 5 min on one core, the same tree): "
          f"{'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
