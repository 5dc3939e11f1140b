"""The benchmark: every agent on the test split of a dataset, at several budgets.

    autoprofiler benchmark [--dataset FILE] [--budgets 0.1,0.25,0.5,1.0] [--seeds 3]
                           [--out runs/benchmark] [--wandb]

Per agent and budget: the geometric-mean speedup (the project's one score,
:mod:`autoprofiler_env.scoring`: an incorrect candidate counts as eager, 1.0x, the program
one would ship), fast_1 (the share of problems with a correct candidate
faster than eager), the mean profiling cost (seconds of ncu replay), the regret to the
hindsight oracle (mean of ln(oracle speedup) - ln(agent speedup)), and for fixed
configurations the share of problems where they fit the budget. Saves ``benchmark.csv``,
``episodes.csv`` and ``benchmark.png`` (speedup against cost, a curve per agent).
"""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

from tqdm import tqdm

from autoprofiler_env.scoring import geomean, shipped_speedup

COLUMNS = ("agent", "budget", "episodes", "geomean_speedup", "fast_1", "mean_cost_s",
           "regret", "fits_budget")


def run_episode(env, agent, uri: str) -> dict:
    obs, info = env.reset(options={"problem": uri})
    agent.reset()
    while True:
        action, _ = agent.predict(obs, action_masks=info["action_mask"], deterministic=True)
        obs, reward, terminated, truncated, info = env.step(int(action))
        if terminated or truncated:
            break
    speedup = shipped_speedup(info["correct"], info["speedup"])
    return {"agent": agent.name, "problem": uri, "sections": "+".join(info["sections"]),
            "cost_s": info["cost"], "candidate": info["candidate"], "correct": info["correct"],
            "speedup": speedup, "reward": reward,
            "fits_budget": agent.fits_budget(info["sections"])}


def benchmark(dataset: str | None, budgets: list[float], seeds: int = 3,
              split: str = "test") -> tuple[list[dict], list[dict]]:
    """(summary rows, episode rows) of every agent at every budget."""
    import gymnasium as gym

    import autoprofiler_env  # noqa: F401  (registers the ids)
    from baselines.agents import all_agents

    summary, episodes = [], []
    for budget in budgets:
        kwargs = {"split": split, "budget": budget}
        if dataset:
            kwargs["dataset"] = dataset
        env = gym.make("AutoProfiler-v0", **kwargs)
        uris = env.unwrapped.problems
        oracle_speedup = {}
        agents = all_agents(env)
        for agent in tqdm(agents, desc=f"budget {budget:g}", unit="agent", leave=False):
            runs = []
            for seed in range(seeds if agent.stochastic else 1):
                if agent.stochastic:
                    agent.seed(seed)
                for uri in uris:
                    row = {**run_episode(env, agent, uri), "budget": budget, "seed": seed}
                    runs.append(row)
            if agent.name == "oracle":
                oracle_speedup = {r["problem"]: r["speedup"] for r in runs}
            episodes += runs
            summary.append({
                "agent": agent.name, "budget": budget, "episodes": len(runs),
                "geomean_speedup": geomean(r["speedup"] for r in runs),
                "fast_1": statistics.fmean(r["correct"] and r["speedup"] > 1.0 for r in runs),
                "mean_cost_s": statistics.fmean(r["cost_s"] for r in runs),
                "regret": None,
                "fits_budget": statistics.fmean(bool(r["fits_budget"]) for r in runs),
            })
        for row in summary:
            if row["budget"] == budget:
                mine = [r for r in episodes if r["agent"] == row["agent"]
                        and r["budget"] == budget]
                row["regret"] = statistics.fmean(
                    math.log(oracle_speedup[r["problem"]]) - math.log(r["speedup"])
                    for r in mine)
    return summary, episodes


def write_csv(rows: list[dict], path: Path, columns=None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns or rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def plot(summary: list[dict], path: Path) -> Path:
    """Speedup against profiling cost, one curve per agent; returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 6))
    names = sorted({r["agent"] for r in summary})
    highlight = {"oracle", "random", "roofline-tree", "no-profile", "set:basic", "set:full",
                 "curated:cudaforge-like"}
    for name in names:
        rows = sorted((r for r in summary if r["agent"] == name), key=lambda r: r["budget"])
        style = {"lw": 2.2, "marker": "o"} if name in highlight else {"lw": 0.8, "alpha": 0.5,
                                                                       "marker": "."}
        ax.plot([r["mean_cost_s"] for r in rows], [r["geomean_speedup"] for r in rows],
                label=name if name in highlight else None, **style)
    ax.set_xlabel("mean profiling cost per problem (s of ncu replay)")
    ax.set_ylabel("geometric-mean speedup over eager")
    ax.set_title("Profiling policies: speedup against profiling cost (each point a budget)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def print_table(summary: list[dict]) -> None:
    """One block per budget, the agents best first."""
    width = max(len(r["agent"]) for r in summary)
    for budget in sorted({r["budget"] for r in summary}):
        rows = sorted((r for r in summary if r["budget"] == budget),
                      key=lambda r: (-r["geomean_speedup"], r["agent"]))
        print(f"\nbudget {budget:.0%} of the full set's cost ({rows[0]['episodes']} episodes "
              "per deterministic agent)")
        print(f"{'agent':{width}s} {'geomean':>8s} {'fast_1':>7s} {'cost s':>7s} "
              f"{'regret':>7s} {'fits':>5s}")
        for r in rows:
            print(f"{r['agent']:{width}s} {r['geomean_speedup']:8.3f} {r['fast_1']:7.2f} "
                  f"{r['mean_cost_s']:7.2f} {r['regret']:7.3f} {r['fits_budget']:5.2f}")


def log_wandb(config: dict, summary: list[dict], episodes: list[dict], plot_path: Path) -> None:
    """Logs to wandb (offline when no key is configured)."""
    import os

    try:
        import wandb
    except ImportError as e:
        raise SystemExit("wandb is not installed; autoprofiler-env requires it: reinstall it "
                         "with `pip install -e .`") from e
    if not os.environ.get("WANDB_API_KEY") and not os.environ.get("WANDB_MODE"):
        os.environ["WANDB_MODE"] = "offline"
    run = wandb.init(project="autoprofiler-env", job_type="benchmark", config=config)
    run.log({"episodes": wandb.Table(columns=list(episodes[0]),
                                     data=[list(r.values()) for r in episodes]),
             "summary": wandb.Table(columns=list(COLUMNS),
                                    data=[[r[c] for c in COLUMNS] for r in summary])})
    if plot_path.exists():
        run.log({"speedup_vs_cost": wandb.Image(str(plot_path))})
    for r in summary:
        run.summary[f"{r['agent']}/budget={r['budget']:g}/geomean_speedup"] = \
            r["geomean_speedup"]
    run.finish()
