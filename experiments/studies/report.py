"""What the data says: does the environment pose a real selection problem?

    python -m experiments.studies.report --dataset FILE --out docs/report [--budgets 0.1,0.25,0.5,1.0]

Writes figures (PNG) and prints the tables behind them:

1. per budget, the geometric-mean speedup of the best candidate per problem (whatever profile
   it takes), of the hindsight oracle (the best section set per problem within the budget:
   what a profiling policy can reach with this optimizer) and of the best single fixed
   configuration (if the last two are equal, one configuration is as good as choosing per
   kernel);
2. how often a larger profile led to a worse choice: for every problem, every set S of up to
   two sections and every section x added to it, whether the candidate from S + x is slower
   (or incorrect) where the one from S was not;
3. which sections carry the decisive evidence, by kind of problem: for each problem, the
   smallest section sets whose candidate is the best reachable one, counted per section and
   per dominant op tag (a heatmap).
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

from autoprofiler_env.scoring import log_score


def _value(outcome) -> float:
    """The project's one score of an outcome (:func:`autoprofiler_env.scoring.log_score`)."""
    return log_score(outcome.correct, outcome.speedup)


def best_candidate(backend, uris: list[str]) -> float:
    """Geometric-mean speedup of each problem's best recorded candidate (eager if none is
    correct and faster): the optimizer's ceiling, whatever the profile."""
    values = [max([0.0] + [_value(o) for o in backend.dataset.record(u).outcomes.values()])
              for u in uris]
    return math.exp(sum(values) / max(len(values), 1))


def oracle_vs_fixed(summary: list[dict], ceiling: float | None = None) -> list[dict]:
    rows = []
    for budget in sorted({r["budget"] for r in summary}):
        at = [r for r in summary if r["budget"] == budget]
        oracle = next(r for r in at if r["agent"] == "oracle")
        fixed = [r for r in at if r["agent"].startswith(("set:", "section:", "curated:",
                                                         "no-profile"))]
        # on a tie, the configuration that fits the budget on more problems: a cut one is
        # not quite the configuration it is named after
        best = max(fixed, key=lambda r: (round(r["geomean_speedup"], 9), r["fits_budget"]))
        named = {r["agent"]: r["geomean_speedup"] for r in at}
        rows.append({"budget": budget, "best_candidate": ceiling,
                     "oracle": oracle["geomean_speedup"],
                     "best_fixed": best["geomean_speedup"], "best_fixed_agent": best["agent"],
                     "best_fixed_fits": best["fits_budget"],
                     "full_set": named.get("set:full"), "no_profile": named.get("no-profile")})
    return rows


def per_problem(backend, uris: list[str], episodes: list[dict], budget: float,
                fixed: tuple[str, ...] = ("section:SpeedOfLight",)) -> list[dict]:
    """Per problem at ``budget``: its best candidate, and what the oracle, the ``fixed``
    configurations (agent names) and no profile led the optimizer to."""
    at = {(e["agent"], e["problem"]): e for e in episodes if e["budget"] == budget}
    rows = []
    for uri in uris:
        outcomes = backend.dataset.record(uri).outcomes.values()
        best = max(outcomes, key=_value, default=None)

        def shown(agent):
            e = at.get((agent, uri))
            return f"{e['candidate']} {e['speedup']:.2f}x" if e else "-"

        oracle = at.get(("oracle", uri))
        rows.append({"problem": uri.rsplit("/", 1)[1],
                     "best candidate": f"{best.transformation} {math.exp(_value(best)):.2f}x"
                     if best is not None and _value(best) > 0 else "eager 1.00x",
                     "oracle's sections": (oracle["sections"] or "none") if oracle else "-",
                     "oracle": shown("oracle"),
                     **{agent.split(":", 1)[-1]: shown(agent) for agent in fixed},
                     "no profile": shown("no-profile")})
    return rows


def larger_profile_worse(backend, uris: list[str], max_base: int = 2) -> dict:
    """Counts (S, S + x) pairs where adding section x made the outcome worse or better."""
    sections = backend.sections
    worse = better = same = 0
    by_section = Counter()
    for uri in uris:
        for size in range(0, max_base + 1):
            for base in itertools.combinations(sections, size):
                before = _value(backend.finish(uri, base))
                for x in sections:
                    if x in base:
                        continue
                    after = _value(backend.finish(uri, base + (x,)))
                    if after < before - 1e-9:
                        worse += 1
                        by_section[x] += 1
                    elif after > before + 1e-9:
                        better += 1
                    else:
                        same += 1
    total = worse + better + same
    return {"pairs": total, "worse": worse / max(total, 1), "better": better / max(total, 1),
            "same": same / max(total, 1), "worse_by_added_section": dict(by_section)}


def decisive_sections(backend, uris: list[str], tags: dict[str, str],
                      max_size: int = 3) -> dict[str, Counter]:
    """Per dominant tag: how often each section is in a smallest set reaching the best
    candidate reachable with up to ``max_size`` sections (problems where no profile is
    needed count under "none")."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for uri in uris:
        best, winners = -math.inf, []
        for size in range(0, max_size + 1):
            for combo in itertools.combinations(backend.sections, size):
                v = _value(backend.finish(uri, combo))
                if v > best + 1e-9:
                    best, winners = v, [combo]
                elif abs(v - best) <= 1e-9 and (not winners or len(combo) == len(winners[0])):
                    winners.append(combo)
        tag = tags[uri]
        if winners and not winners[0]:
            counts[tag]["none"] += 1
            continue
        for combo in winners:
            for s in combo:
                counts[tag][s] += 1.0 / len(winners)
    return counts


def figures(out: Path, vs: list[dict], decisive: dict[str, Counter], sections) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    fig, ax = plt.subplots(figsize=(10, 4.5))
    budgets = [r["budget"] for r in vs]
    if vs and vs[0]["best_candidate"] is not None:
        ax.axhline(vs[0]["best_candidate"], color="gray", ls=":", lw=1.5,
                   label="best candidate per problem")
    ax.plot(budgets, [r["oracle"] for r in vs], "o-", lw=2, label="hindsight oracle")
    ax.plot(budgets, [r["best_fixed"] for r in vs], "s--", lw=2,
            label="best fixed configuration")
    ax.plot(budgets, [r["full_set"] for r in vs], "^-.", lw=1.5, color="tab:red",
            label="ncu's full set (cut where it does not fit)")
    ax.plot(budgets, [r["no_profile"] for r in vs], "-", lw=1, color="gray",
            label="no profile")
    ax.set_xscale("log")
    ax.minorticks_off()
    # each budget's tick names the best fixed configuration there
    ax.set_xticks(budgets, [
        f"{r['budget']:.0%}\n{r['best_fixed_agent'].split(':', 1)[-1]}" + (
            "" if r["best_fixed_fits"] == 1 else f"\n(fits {r['best_fixed_fits']:.0%})")
        for r in vs], fontsize=8)
    ax.set_xlabel("budget (of the full set's cost) and the best fixed configuration there")
    ax.set_ylabel("geometric-mean speedup")
    ax.grid(alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    fig.tight_layout()
    paths.append(out / "oracle_vs_fixed.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    tags = sorted(decisive)
    columns = list(sections) + ["none"]
    grid = np.array([[decisive[t].get(c, 0.0) for c in columns] for t in tags])
    fig, ax = plt.subplots(figsize=(12, 0.5 * len(tags) + 2.5))
    ax.imshow(grid, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(columns)), columns, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(tags)), tags)
    for (i, j), v in np.ndenumerate(grid):
        if v:
            ax.text(j, i, f"{v:.1f}", ha="center", va="center", color="w", fontsize=7)
    ax.set_title("Sections in the smallest winning sets, by the problem's dominant op")
    fig.tight_layout()
    paths.append(out / "decisive_sections.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    return paths


def report(dataset: str, out: Path, budgets: list[float], split: str | None = None) -> dict:
    from autoprofiler_env.envs.backends import ReplayBackend
    from experiments.benchmark import benchmark

    backend = ReplayBackend(dataset)
    uris = backend.problems(split)
    tags = {u: (backend.dataset.record(u).tags or ("other",))[0] for u in uris}
    summary, episodes = benchmark(dataset, budgets, seeds=1, split=split)
    vs = oracle_vs_fixed(summary, best_candidate(backend, uris))
    worse = larger_profile_worse(backend, uris)
    decisive = decisive_sections(backend, uris, tags)
    paths = figures(out, vs, decisive, backend.sections)
    return {"problems": len(uris), "oracle_vs_fixed": vs, "agents": summary,
            "larger_profile": worse,
            "per_problem": per_problem(backend, uris, episodes, max(budgets), tuple(
                dict.fromkeys((vs[-1]["best_fixed_agent"], "section:SpeedOfLight")))),
            "decisive": {t: dict(c) for t, c in decisive.items()},
            "figures": [str(p) for p in paths]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.studies.report")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--out", type=Path, default=Path("docs/report"))
    parser.add_argument("--budgets", default="0.1,0.25,0.5,1.0")
    parser.add_argument("--split", default="test", help="train, val, test or all")
    args = parser.parse_args(argv)
    result = report(args.dataset, args.out, [float(b) for b in args.budgets.split(",")],
                    None if args.split == "all" else args.split)
    text = markdown(result, args.dataset, args.split)
    (args.out / "tables.md").write_text(text)
    print(text)
    print("figures:", ", ".join(result["figures"]), "; tables:", args.out / "tables.md")
    return 0


def markdown(result: dict, dataset: str, split: str) -> str:
    """The report's tables as markdown (``tables.md`` beside the figures)."""
    lines = [f"<!-- python -m experiments.studies.report --dataset {dataset} --split {split} -->",
             "", f"{result['problems']} problems (split: {split}); geometric-mean speedups over "
             "eager, an incorrect candidate counting as eager.",
             "", "| budget | best candidate | hindsight oracle | best fixed configuration | "
             "which | full set | no profile |", "|---|---|---|---|---|---|---|"]
    for r in result["oracle_vs_fixed"]:
        fits = "" if r["best_fixed_fits"] == 1 else f" (fits {r['best_fixed_fits']:.0%})"
        lines.append(f"| {r['budget']:g} | {r['best_candidate']:.3f} | {r['oracle']:.3f} | "
                     f"{r['best_fixed']:.3f} | {r['best_fixed_agent']}{fits} | "
                     f"{r['full_set']:.3f} | {r['no_profile']:.3f} |")
    budgets = sorted({r["budget"] for r in result["agents"]})
    by_agent: dict[str, dict[float, dict]] = {}
    for r in result["agents"]:
        by_agent.setdefault(r["agent"], {})[r["budget"]] = r
    lines += ["", "Every agent, geometric-mean speedup per budget (in parentheses: the share of "
              "problems where a fixed configuration fits the budget, when not all):", "",
              "| agent | " + " | ".join(f"{b:.0%}" for b in budgets) + " |",
              "|---|" + "---|" * len(budgets)]
    for agent, rows in sorted(by_agent.items(),
                              key=lambda kv: -kv[1][budgets[-1]]["geomean_speedup"]):
        cells = [f"{rows[b]['geomean_speedup']:.3f}" + (
            f" ({rows[b]['fits_budget']:.0%})" if rows[b]["fits_budget"] < 1 else "")
            for b in budgets]
        lines.append(f"| {agent} | " + " | ".join(cells) + " |")
    w = result["larger_profile"]
    lines += ["", f"Adding one section to a set of at most two: worse {w['worse']:.1%}, better "
              f"{w['better']:.1%}, the same {w['same']:.1%} of {w['pairs']} pairs.", "",
              "| added section | times it made the outcome worse |", "|---|---|"]
    lines += [f"| {s} | {n} |" for s, n in sorted(w["worse_by_added_section"].items(),
                                                   key=lambda kv: -kv[1])]
    lines += ["", "| dominant op | sections in the smallest winning sets (share) |", "|---|---|"]
    for tag, counts in sorted(result["decisive"].items()):
        ranked = sorted(counts.items(), key=lambda kv: -kv[1])
        lines.append(f"| {tag} | " + ", ".join(f"{s} {v:.2f}" for s, v in ranked) + " |")
    rows = result["per_problem"]
    if rows:
        budget = max(r["budget"] for r in result["oracle_vs_fixed"])
        lines += ["", f"Per problem, at a budget of {budget:.0%} (an incorrect candidate shows "
                  "as eager's 1.00x):", "", "| " + " | ".join(rows[0]) + " |",
                  "|" + "---|" * len(rows[0])]
        lines += ["| " + " | ".join(str(v) for v in r.values()) + " |" for r in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
