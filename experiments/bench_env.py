"""Replay steps per second on one core, against Gymnasium's CartPole-v1 in the same run, and
the dataset's load time.

    python -m experiments.bench_env [--dataset FILE] [--steps 50000]

The agent is a uniformly random valid action (masks respected); resets count as steps'
overhead, as they do in training. The goals are at least 20,000 steps per second and a load
under 1 s (the best of three: the file read, decompressed, checksummed and parsed).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import autoprofiler_env  # noqa: F401  (registers the ids)


def steps_per_second(env, steps: int, masked: bool) -> float:
    rng = np.random.default_rng(0)
    obs, info = env.reset(seed=0)
    started = time.perf_counter()
    for _ in range(steps):
        if masked:
            action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        else:
            action = int(rng.integers(env.action_space.n))
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            obs, info = env.reset()
    return steps / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.bench_env")
    parser.add_argument("--dataset", help="a dataset file (default: the shipped one)")
    parser.add_argument("--steps", type=int, default=50_000)
    args = parser.parse_args(argv)
    from autoprofiler_env.dataset import Dataset
    from autoprofiler_env.dataset.replay import DEFAULT_DATASET

    path = Path(args.dataset or DEFAULT_DATASET)
    loads = []
    for _ in range(3):
        started = time.perf_counter()
        dataset = Dataset.load(path)
        loads.append(time.perf_counter() - started)
    print(f"{path.name}: {len(dataset.uris())} problems, {path.stat().st_size / 1e6:.2f} MB, "
          f"loads in {min(loads):.2f} s (goal: < 1 s)")
    kwargs = {"dataset": args.dataset, "split": None} if args.dataset else {}
    ours = gym.make("AutoProfiler-v0", **kwargs)
    steps_per_second(ours, 2_000, masked=True)  # fill the replay caches first
    ours_rate = steps_per_second(ours, args.steps, masked=True)
    cartpole_rate = steps_per_second(gym.make("CartPole-v1"), args.steps, masked=False)
    print(f"AutoProfiler-v0: {ours_rate:,.0f} steps/s; CartPole-v1: {cartpole_rate:,.0f} "
          f"steps/s; ratio {ours_rate / cartpole_rate:.2f} (goal: >= 20,000 steps/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
