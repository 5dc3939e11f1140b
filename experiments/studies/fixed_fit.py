"""Does the fixed configurations' stop rule weaken the baseline the learned agents are held to?

    python -m experiments.studies.fixed_fit [--dataset NAME] [--budgets B ...]   # any machine

A fixed configuration (:class:`baselines.FixedSections`) collects its sections in order and
stops at the first the budget does not afford, never skipping to a cheaper one after it: at a
low budget the curated list, SpeedOfLight first, collects nothing. A variant that skips what
does not fit and goes on (:class:`SkipUnaffordable`) is the obvious alternative. The learned
agents are compared with the fixed configuration chosen on the train split at each budget
(``autoprofiler experiment``'s ``fixed (train-chosen)``), so what matters is whether the
variants, added to the candidates, change that choice and its test score. This prints, per
budget, the train-chosen configuration among the fixed configurations as shipped and among
them and their skipping variants, with the geometric-mean speedups on train and test (the
replay, the dataset's default optimizer).
"""

from __future__ import annotations

import argparse

from baselines.agents import FixedSections, all_agents, baseline, is_fixed

BUDGETS = (0.02, 0.05, 0.1, 0.25, 0.5, 1.0)
"""The budgets of the shipped experiments (``compare`` takes the last four)."""


class SkipUnaffordable(FixedSections):
    """A fixed configuration that skips a section the budget does not afford and goes on to
    the next of its list (named ``<name>~skip``)."""

    def __init__(self, env, sections, name: str) -> None:
        super().__init__(env, sections, f"{name}~skip")

    def act(self, observation, mask):
        for index in self.plan:
            if not observation["collected"][index] and mask[index]:
                return index
        return self.stop


def train_chosen(train, test, makers: list, budget: float) -> tuple[str, float, float]:
    """Of ``makers`` (each ``env -> policy``), the one the experiment would choose on
    ``train`` at ``budget`` (:func:`experiments.benchmark.best_fixed_row`: the best geometric
    mean, ties to the one that fits on more problems, then the first): its name, its train
    and its test geometric means."""
    import numpy as np

    from autoprofiler_env.evaluation import rollout, score
    from experiments.benchmark import best_fixed_row

    rows = []
    for make in makers:
        policy = make(train)
        records = rollout(train, policy, budget=budget)
        rows.append({"agent": policy.name, "geomean_speedup": score(records), "make": make,
                     "fits_budget": float(np.mean([policy.fits_budget(r.sections)
                                                   for r in records]))})
    best = best_fixed_row(rows)
    return (best["agent"], best["geomean_speedup"],
            score(rollout(test, best["make"](test), budget=budget)))


def main(argv: list[str] | None = None) -> None:
    import gymnasium as gym

    import autoprofiler_env  # noqa: F401

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default=None, help="a dataset name or file (default: "
                        "the shipped suite)")
    parser.add_argument("--budgets", type=float, nargs="+", default=list(BUDGETS),
                        help="fractions of the full set's cost (default: %(default)s)")
    args = parser.parse_args(argv)
    train, test = (gym.make("AutoProfiler-v0", dataset=args.dataset, split=split)
                   for split in ("train", "test"))
    fixed = [a for a in all_agents(train) if is_fixed(a.name)]  # the experiment's candidates
    lists = [(a.name, [a.sections[i] for i in a.plan]) for a in fixed
             if isinstance(a, FixedSections)]  # no-profile has nothing to skip
    shipped = [lambda env, name=a.name: baseline(env, name) for a in fixed]
    skipping = [lambda env, s=s, n=n: SkipUnaffordable(env, s, n) for n, s in lists]
    print(f"{len(fixed)} fixed configurations; train {len(train.unwrapped.problems)}, "
          f"test {len(test.unwrapped.problems)} problems")
    print("| budget | train-chosen as shipped | train | test | with the skipping variants "
          "| train | test |")
    print("|---|---|---|---|---|---|---|")
    for budget in args.budgets:
        row = [f"{budget:g}"]
        for makers in (shipped, shipped + skipping):
            name, on_train, on_test = train_chosen(train, test, makers, budget)
            row += [name, f"{on_train:.3f}", f"{on_test:.3f}"]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
