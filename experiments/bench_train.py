"""Training speed: environment steps per second with learning, for each algorithm's shipped
config, in one process (``DummyVecEnv``, one env), with ``SubprocVecEnv``, and as the config
ships (its own ``n_envs`` and ``vec_env``: several envs in one ``DummyVecEnv`` batch the
policy's forward passes).

    python -m experiments.bench_train [--steps 3000] [--warmup 1000] [--subproc-envs 2]
                                      [--algorithms maskable_ppo,ppo,...,trpo]
                                      [--torch-threads 1]

Each measurement builds the config's model (its hyperparameters as shipped; only ``n_envs``
and ``vec_env`` change), learns ``--warmup`` steps untimed (the replay's outcomes of the
section sets a fresh policy tries are computed once and memoized, and the off-policy
algorithms' ``learning_starts`` pass), then times ``--steps`` more steps of
``model.learn`` (collecting, and every gradient update the config asks for; no evaluation).
With ``SubprocVecEnv`` the environments step in their own processes while the learner
runs in this one; the on-policy algorithms then collect ``n_steps`` x ``n_envs`` steps per
update (the same gradient work per step), the off-policy ones train every ``train_freq``
vector steps (half the gradient work per environment step with two envs). The machine's
cores and load are printed with the table: the figures are only as quiet as the machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from agents.rl.config import ALGORITHMS, load_config


def rate(algorithm: str, vec_env: str | None, n_envs: int | None, steps: int, warmup: int,
         seed: int = 0) -> float:
    """Environment steps per second of ``model.learn`` for the algorithm's shipped config in
    ``vec_env`` with ``n_envs`` environments (None: the config's), after ``warmup`` untimed
    steps."""
    from stable_baselines3.common.logger import Logger

    from experiments.train import CONFIGS, build_model, make_train_env

    config = load_config(CONFIGS / f"{algorithm}.yaml")
    config = config.replace(n_envs=n_envs or config.n_envs, vec_env=vec_env or config.vec_env)
    env = make_train_env(config, seed)
    try:
        model = build_model(config, env, seed)
        model.set_logger(Logger(folder=None, output_formats=[]))  # no SB3-<time> folder in /tmp
        model.learn(warmup)
        before = model.num_timesteps
        started = time.perf_counter()
        model.learn(steps, reset_num_timesteps=False)
        return (model.num_timesteps - before) / (time.perf_counter() - started)
    finally:
        env.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.bench_train")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--subproc-envs", type=int, default=2,
                        help="environments of the SubprocVecEnv (default: 2)")
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS))
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch's intra-op threads (default: 1; 0: torch's own choice)")
    args = parser.parse_args(argv)
    import torch
    from tqdm.auto import tqdm

    from experiments.train import CONFIGS

    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    unknown = [a for a in algorithms if a not in ALGORITHMS]
    if unknown:
        print(f"bench_train: unknown algorithm {unknown[0]!r}: one of {', '.join(ALGORITHMS)}",
              file=sys.stderr)
        return 2
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{cores} cores (os.cpu_count() {os.cpu_count()}), load average {load}; torch "
          f"{torch.get_num_threads()} thread(s); {args.steps} timed steps after "
          f"{args.warmup} untimed")
    settings = [("dummy", 1), ("subproc", args.subproc_envs), (None, None)]
    rows = []
    with tqdm(total=len(algorithms) * len(settings), desc="bench_train", unit="run") as bar:
        for algorithm in algorithms:
            row = [algorithm]
            for vec_env, n_envs in settings:
                row.append(rate(algorithm, vec_env, n_envs, args.steps, args.warmup))
                bar.update()
            rows.append(row)
    n = args.subproc_envs
    print(f"\n{'algorithm':14s} {'DummyVecEnv x1':>16s} {f'SubprocVecEnv x{n}':>18s} "
          f"{'ratio':>6s} {'as shipped':>22s}   (env steps/s with learning)")
    for algorithm, one, sub, shipped in rows:
        config = load_config(CONFIGS / f"{algorithm}.yaml")
        label = f"{shipped:.0f} ({config.vec_env} x{config.n_envs})"
        print(f"{algorithm:14s} {one:16.0f} {sub:18.0f} {sub / one:6.2f} {label:>22s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
