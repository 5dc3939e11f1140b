"""Replay steps per second on one core, against Gymnasium's CartPole-v1 with the same loop in
the same run, and the dataset's load time.

    python -m experiments.bench_env [--dataset FILE] [--steps 50000]

The loop takes a uniformly random valid action (the one ``info["action_mask"]`` allows;
CartPole's two actions are always valid) and resets at the end of each episode; resets count
as the steps' overhead, as they do in training. The replay's rate is printed twice:

- cold: the first ``--steps`` steps of a fresh environment, each new (problem, section set)
  paying the optimizer's run on the merged evidence once (counted: "new sets");
- warm: the same steps again (the same seed: the same problems and actions), every outcome
  memoized, as in a training run once its policy keeps to sets it has tried: the best of
  five repeats (as ``timeit`` takes the best of its repeats: other work on the machine only
  slows a repeat down), CartPole's repeats taking turns with them.

The same warm rate is printed for a training-like environment (the train split, a budget
drawn per episode: ``budget_range`` [0.05, 1], as the shipped configs train): every reset
there makes the episode's start anew (its budget's costs and observation), what a fixed
budget keeps (2026-12-07, this 2-core machine: 45,306 steps/s before the problem's part of
a start was kept apart from the budget's, 73,491 after; the fixed budget's 102,301 and
108,350).

Then the memory of a training-like run (``--memory-steps``, default 400,000; 0: none): the
same loop on the train split with a budget drawn per episode (``budget_range`` [0.05, 1], as
the shipped configs train), the process's resident memory before, at half way and at the
end, and its growth per step over the second half (the replay's memos fill, then level off:
2026-12-07, 2.05 million steps took 509 MB before they were bounded, 199 MB after).

The goals (issue 14): warm at least 50,000 steps/s and at least 0.4 of CartPole's rate; a
load under 1 s (the best of three: the file read, decompressed, checksummed and parsed). The
last line says whether they are met, and the exit code is 1 where one is not.
"""

from __future__ import annotations

import argparse
import sys
import time

import gymnasium as gym
import numpy as np

import autoprofiler_env  # noqa: F401  (registers the ids)


def steps_per_second(env, steps: int, seed: int = 0) -> float:
    """Steps per second of a random-valid-action loop on ``env`` (reset included)."""
    draws = np.random.default_rng(seed).random(steps)
    everything = np.ones(env.action_space.n, dtype=bool)
    obs, info = env.reset(seed=seed)
    started = time.perf_counter()
    for u in draws:
        valid = np.flatnonzero(info.get("action_mask", everything))
        obs, reward, terminated, truncated, info = env.step(int(valid[int(u * len(valid))]))
        if terminated or truncated:
            obs, info = env.reset()
    return steps / (time.perf_counter() - started)


def best_rates(envs, steps: int, repeats: int = 5, seed: int = 0) -> list[float]:
    """Per environment, the best rate of ``repeats`` runs of the same ``steps`` steps; the
    environments take turns, so that each sees the machine in the same states."""
    rates = [[] for _ in envs]
    for _ in range(repeats):
        for env, mine in zip(envs, rates):
            mine.append(steps_per_second(env, steps, seed=seed))
    return [max(r) for r in rates]


def resident_mb() -> float:
    """The process's resident memory in MB (Linux's /proc; elsewhere its peak, from
    ``resource``: bytes on macOS, KB elsewhere)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def training_like(dataset: str | None = None):
    """The environment the shipped configs train in: the train split, a budget drawn per
    episode (``budget_range`` [0.05, 1])."""
    kwargs = {"dataset": dataset} if dataset else {}
    return gym.make("AutoProfiler-v0", split="train", budget_range=(0.05, 1.0), **kwargs)


def memory_growth(steps: int, dataset: str | None = None) -> tuple[float, float, float]:
    """(MB before, at half way, at the end) of ``steps`` training-like steps
    (:func:`steps_per_second` in :func:`training_like`)."""
    env = training_like(dataset)
    before = resident_mb()
    steps_per_second(env, steps // 2, seed=1)
    half = resident_mb()
    steps_per_second(env, steps - steps // 2, seed=2)
    return before, half, resident_mb()


def _new_sets(env) -> int:
    """How many (problem, section set) outcomes the replay has computed so far."""
    return env.unwrapped.backend._finish.cache_info().currsize


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.bench_env")
    parser.add_argument("--dataset", help="a dataset name or file (default: the suite's)")
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--memory-steps", type=int, default=400_000)
    args = parser.parse_args(argv)
    from autoprofiler_env.dataset import Dataset, DatasetFile
    from autoprofiler_env.dataset.names import resolve_dataset

    path = resolve_dataset(args.dataset)
    loads = []
    for _ in range(3):  # read and checked each time: Dataset.load would hand back its first
        started = time.perf_counter()
        dataset = Dataset(DatasetFile.load(path))
        loads.append(time.perf_counter() - started)
    print(f"{path.name}: {len(dataset.uris())} problems, {path.stat().st_size / 1e6:.2f} MB, "
          f"loads in {min(loads):.2f} s (goal: < 1 s)")
    kwargs = {"dataset": args.dataset, "split": None} if args.dataset else {}
    ours = gym.make("AutoProfiler-v0", **kwargs)
    cold = steps_per_second(ours, args.steps, seed=0)
    seen = _new_sets(ours)
    warm, cartpole = best_rates([ours, gym.make("CartPole-v1")], args.steps)
    again = _new_sets(ours) - seen
    training = training_like(args.dataset)
    steps_per_second(training, args.steps, seed=0)  # its outcomes memoized, as ours' are
    (warm_training,) = best_rates([training], args.steps)
    print(f"AutoProfiler-v0 cold: {cold:,.0f} steps/s ({seen:,} new sets in {args.steps:,} "
          f"steps); warm: {warm:,.0f} steps/s (the same steps again: {again} new sets); "
          f"training-like, warm (train split, budget_range [0.05, 1]): "
          f"{warm_training:,.0f} steps/s")
    print(f"CartPole-v1: {cartpole:,.0f} steps/s; ratio warm / CartPole {warm / cartpole:.2f} "
          "(goals: warm >= 50,000 steps/s, ratio >= 0.4)")
    if args.memory_steps > 0:
        before, half, end = memory_growth(args.memory_steps, args.dataset)
        per_step = (end - half) * 2**20 / (args.memory_steps - args.memory_steps // 2)
        print(f"memory over {args.memory_steps:,} training-like steps (budget_range [0.05, 1], "
              f"train split): {before:,.0f} MB before, {half:,.0f} at half way, {end:,.0f} at "
              f"the end ({per_step:,.0f} B/step over the second half)")
    missed = [goal for goal, met in (("load < 1 s", min(loads) < 1.0),
                                     ("warm >= 50,000 steps/s", warm >= 50_000),
                                     ("ratio >= 0.4", warm / cartpole >= 0.4)) if not met]
    print("goals: met" if not missed else f"goals: NOT met: {', '.join(missed)}")
    return 0 if not missed else 1


if __name__ == "__main__":
    sys.exit(main())
