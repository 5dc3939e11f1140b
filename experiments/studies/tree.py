"""The learned tree against the baselines: issue 16's measurements on the replay (CPU).

    python -m experiments.studies.tree [--budgets 0.1,0.25] [--seeds 5] [--rounds 200]
                                       [--optimizer NAME] [--out docs/tree]

For each budget, the tree is learned with the search proposer once per seed (the train split,
the validation split choosing), then scored on the validation and the test split; beside it,
on each split: the hindsight oracle, the best fixed configuration chosen on the train split
(a set of ncu, one section, the curated list, or no profile: the one with the best geometric
mean there, then scored on the split), the roofline tree and no profile (the benchmark's
rows). Also: the median cost of the learned tree's profile as a share of the full set's, on
the test split, and the criteria of the issue: the tree at least the train-chosen fixed
configuration and at least 95% of the oracle, on test and on validation, for the mean over
seeds and for the worst seed. Writes ``results.md`` and ``results.json`` in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

from autoprofiler_env.atomic import write_atomic
from autoprofiler_env.problems.loaders import SPLITS
from experiments.benchmark import best_fixed_row

def study(budgets: list[float], seeds: int, rounds: int, optimizer: str | None) -> dict:
    import gymnasium as gym

    import autoprofiler_env  # noqa: F401
    from agents.tree import TreePolicy
    from agents.tree.learner import LearnConfig, learn
    from agents.tree.proposers.search import SearchProposer
    from autoprofiler_env.evaluation import rollout, score
    from experiments.benchmark import benchmark

    kwargs = {"optimizer": optimizer} if optimizer else {}
    envs = {s: gym.make("AutoProfiler-v0", split=s, **kwargs) for s in SPLITS}
    rows = {s: benchmark(None, budgets, seeds=1, split=s, optimizer=optimizer)[0]
            for s in SPLITS}
    out = {"budgets": {}, "optimizer": optimizer or envs["train"].unwrapped.optimizer,
           "seeds": seeds, "rounds": rounds,
           "problems": {s: len(e.unwrapped.problems) for s, e in envs.items()}}
    for budget in budgets:
        at = {s: {r["agent"]: r for r in rows[s] if r["budget"] == budget} for s in rows}
        chosen = best_fixed_row(list(at["train"].values()))["agent"]
        entry = {"train_chosen_fixed": chosen, "splits": {}, "seeds": []}
        for seed in range(seeds):
            result = learn(envs["train"], envs["val"], SearchProposer(seed),
                           LearnConfig(budget=budget, rounds=rounds), progress=False)
            scores, shares = {}, []
            for split in ("val", "test"):
                env = envs[split]
                records = rollout(env, TreePolicy(result.tree, env), budget=budget)
                scores[split] = score(records)
                if split == "test":
                    base = env.unwrapped
                    for r in records:
                        env.reset(options={"problem": r.problem, "budget": budget})
                        full = base.episode_budget / budget
                        shares.append(r.cost / full)
            entry["seeds"].append({"seed": seed, "nodes": result.tree.size(),
                                   "accepted": result.accepted, "train": result.train,
                                   "val": scores["val"], "test": scores["test"],
                                   "median_cost_share_test": statistics.median(shares),
                                   "tree": result.tree.to_dict()["root"]})
        for split in ("val", "test"):
            trees = [s[split] for s in entry["seeds"]]
            oracle = at[split]["oracle"]["geomean_speedup"]
            fixed = at[split][chosen]["geomean_speedup"]
            mean = math.exp(statistics.fmean(math.log(t) for t in trees))
            entry["splits"][split] = {
                "tree_geomean_over_seeds": mean, "tree_min": min(trees), "tree_max": max(trees),
                "tree_sd": statistics.pstdev(trees), "oracle": oracle,
                "train_chosen_fixed": fixed,
                "roofline_tree": at[split]["roofline-tree"]["geomean_speedup"],
                "no_profile": at[split]["no-profile"]["geomean_speedup"],
                "shipped_tree": at[split].get("autoprofiler-tree", {}).get("geomean_speedup"),
                "tree_over_oracle": mean / oracle,
                "pass_fixed": mean >= fixed - 1e-9, "pass_oracle": mean >= 0.95 * oracle,
                "worst_seed_pass": min(trees) >= fixed - 1e-9 and min(trees) >= 0.95 * oracle}
        entry["median_cost_share_test"] = statistics.median(
            s["median_cost_share_test"] for s in entry["seeds"])
        out["budgets"][f"{budget:g}"] = entry
    return out


def markdown(result: dict, out: str = "docs/tree") -> str:
    lines = [f"# The learned tree against the baselines ({result['optimizer']})", "",
             f"Written by `python -m experiments.studies.tree --optimizer "
             f"{result['optimizer']} --out {out}` (the replay of the shipped "
             "dataset, on a CPU). The tree is learned with the search proposer "
             f"({result['rounds']} rounds, seeds 0-{result['seeds'] - 1}) on the train split "
             f"({result['problems']['train']} problems), the validation split "
             f"({result['problems']['val']}) choosing; the test split has "
             f"{result['problems']['test']}. Geometric-mean speedup of the shipped program; "
             "the tree's is the geometric mean over seeds, with the range of the seeds.", ""]
    for budget, entry in result["budgets"].items():
        lines += [f"## Budget {float(budget):.0%} of the full set's cost", "",
                  f"Fixed configuration chosen on train: `{entry['train_chosen_fixed']}`. "
                  f"Median cost of the learned tree's profile on test: "
                  f"{entry['median_cost_share_test']:.1%} of the full set's.", "",
                  "| split | learned tree (seeds) | range | oracle | tree / oracle | fixed, "
                  "chosen on train | roofline tree | no profile | >= fixed | >= 95% oracle "
                  "| worst seed passes both |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for split, s in entry["splits"].items():
            lines.append(
                f"| {split} | {s['tree_geomean_over_seeds']:.3f} | {s['tree_min']:.3f}-"
                f"{s['tree_max']:.3f} | {s['oracle']:.3f} | {s['tree_over_oracle']:.1%} | "
                f"{s['train_chosen_fixed']:.3f} | {s['roofline_tree']:.3f} | "
                f"{s['no_profile']:.3f} | {'yes' if s['pass_fixed'] else 'NO'} | "
                f"{'yes' if s['pass_oracle'] else 'NO'} | "
                f"{'yes' if s['worst_seed_pass'] else 'NO'} |")
        lines += ["", "| seed | nodes | edits kept | train | validation | test | median "
                  "cost share (test) |", "|---|---|---|---|---|---|---|"]
        for s in entry["seeds"]:
            lines.append(f"| {s['seed']} | {s['nodes']} | {s['accepted']} | {s['train']:.3f} "
                         f"| {s['val']:.3f} | {s['test']:.3f} | "
                         f"{s['median_cost_share_test']:.1%} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default="0.1,0.25")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--optimizer")
    parser.add_argument("--out", default="docs/tree")
    args = parser.parse_args(argv)
    result = study([float(b) for b in args.budgets.split(",")], args.seeds, args.rounds,
                   args.optimizer)
    out = Path(args.out)
    write_atomic(out / "results.json", (json.dumps(result, indent=1) + "\n").encode())
    text = markdown(result, args.out)
    write_atomic(out / "results.md", text.encode())
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
