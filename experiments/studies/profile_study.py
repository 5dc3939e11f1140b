"""The profiler study: what each section costs, and whether a subset's profile can be cut out
of one full run. Collecting needs a GPU; analysing runs anywhere on the collected files.

    python -m experiments.studies.profile_study collect --out runs/profile_study [--part 1|2]
                                                [--only GLOB] [--deadline SECONDS]
    python -m experiments.studies.profile_study analyze --runs runs/profile_study

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
    from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS, load_catalogue

    if part == 1:
        configs = [(f"section-{s}", [s], list(STUDY_PROBLEMS)) for s in ACTION_SECTIONS]
        sets = [(f"set-{name}", list(load_catalogue().sets[name]), list(STUDY_PROBLEMS))
                for name in ("basic", "detailed", "full")]
        subsets = [("subset-" + "+".join(s), list(s), list(STUDY_PROBLEMS)) for s in SUBSETS]
        # full and the subsets first: the reconstruction study needs them; detailed last
        return configs + [sets[0], sets[2]] + subsets + [sets[1]]
    from autoprofiler_env.features import static_features

    # fewest operators first: should the longest (the 128-step LSTM) outlast the watchdog,
    # ncu is stopped with SIGINT and still writes the problems before it
    suite = [p.name for p in sorted(load_suite(), key=lambda p: static_features(p).n_ops)]
    configs = [("suite-SpeedOfLight", ["SpeedOfLight"], suite)]
    configs += [(f"alone-SpeedOfLight-{name}", ["SpeedOfLight"], [name])
                for name in suite[:: len(suite) // PER_PROBLEM_SAMPLE][:PER_PROBLEM_SAMPLE]]
    return configs


def collect(out: Path, part: int, only: str | None = None,
            deadline_s: float | None = None) -> int:
    from fnmatch import fnmatch

    from autoprofiler_env.problems import load_problem
    from autoprofiler_env.profiler.runner import run_ncu

    configs = [c for c in configurations(part) if only is None or fnmatch(c[0], only)]
    for i, (name, sections, names) in enumerate(configs):
        target = out / name
        if (target / "run.json").exists():
            continue
        started = time.perf_counter()
        run = run_ncu([load_problem(n) for n in names], sections, workdir=out / "_work",
                      problem_timeout_s=180.0, deadline_s=deadline_s)
        run.save(target)
        ok = sum(1 for r in run.status if r.get("event") == "problem" and r.get("ok"))
        print(f"[{i + 1}/{len(configs)}] {name}: {ok}/{len(names)} problems, "
              f"{time.perf_counter() - started:.1f} s, rc {run.returncode}", flush=True)
    return 0


# -- analysis -----------------------------------------------------------------------------------

def _load(runs: Path) -> dict[str, tuple]:
    """config name -> (NcuRun, {problem name: Profile})."""
    from autoprofiler_env.profiler import NcuRun, profiles_from_run

    out = {}
    for directory in sorted(p for p in runs.iterdir() if (p / "run.json").exists()):
        run = NcuRun.load(directory)
        profiles, _ = profiles_from_run(run)
        out[directory.name] = (run, {p.problem_uri.rsplit("/", 1)[1]: p for p in profiles})
    return out


def cost_rows(loaded: dict) -> list[dict]:
    """Per configuration: passes, replay seconds per problem and per kernel, invocation time."""
    import statistics

    rows = []
    for name, (run, profiles) in loaded.items():
        if name.startswith(("alone-", "suite-")):
            continue
        replay = [p.cost.replay_s for p in profiles.values()]
        per_kernel = [p.cost.replay_s / p.cost.n_kernels for p in profiles.values()]
        setup = sum(r.get("setup_s", 0.0) for r in run.status if r.get("event") == "problem")
        rows.append({
            "config": name, "sections": len(run.sections),
            "passes": max(p.cost.passes for p in profiles.values()),
            "replay_s_per_problem_median": statistics.median(replay),
            "replay_s_per_kernel_median": statistics.median(per_kernel),
            "replay_s_total": sum(replay),
            "invocation_s": run.wall_s,
            "other_s": run.wall_s - sum(replay) - setup,
            "problems": len(profiles),
        })
    return rows


def _close(a, b, tolerance: float) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= tolerance * max(abs(a), abs(b), 1e-12)
    return a == b


def ownership(loaded: dict) -> dict[str, set[str]]:
    """metric -> the sections whose single run collects it (all of them for the metrics that
    every single run has: launch configuration, duration)."""
    owners: dict[str, set[str]] = {}
    for name, (run, profiles) in loaded.items():
        if not name.startswith("section-"):
            continue
        for p in profiles.values():
            for k in p.kernels:
                for metric in k.metrics:
                    owners.setdefault(metric, set()).add(run.sections[0])
    return owners


def agreement_rows(loaded: dict, source: str) -> list[dict]:
    """How well each subset's profile is reconstructed from ``source``: ``"singles"`` (the
    runs of each of its sections alone) or ``"full"`` (the full set's run, cut to the subset's
    sections). Per subset and problem: the share of metrics within 1% and 5%, and whether the
    findings (section, rule, kind) and their speedup estimates agree, kernel by kernel."""
    from autoprofiler_env.profiler.parse import cut

    owners = ownership(loaded)
    rows = []
    for name, (run, profiles) in loaded.items():
        if not name.startswith("subset-"):
            continue
        wanted = set(run.sections)
        for problem, target in profiles.items():
            if source == "full":
                if "set-full" not in loaded:
                    continue
                sources = [cut(loaded["set-full"][1][problem], run.sections, target.cost)]
            else:
                sources = [loaded[f"section-{s}"][1][problem] for s in run.sections]
            if any(len(src.kernels) != len(target.kernels) for src in sources):
                rows.append({"subset": name, "problem": problem, "source": source,
                             "kernels_match": False})
                continue
            n = within1 = within5 = 0
            finding_sets_equal = opt_sets_equal = 0
            speedup_diffs = []
            for i, kernel in enumerate(target.kernels):
                for metric, value in kernel.metrics.items():
                    candidates = [src.kernels[i].metrics[metric] for src in sources
                                  if metric in src.kernels[i].metrics
                                  and (owners.get(metric, wanted) & wanted)]
                    if not candidates:
                        continue
                    n += 1
                    within1 += _close(candidates[0], value, 0.01)
                    within5 += _close(candidates[0], value, 0.05)
                got = {(f.section, f.rule, f.kind): f for f in kernel.findings}
                expected = {(f.section, f.rule, f.kind): f for src in sources
                            for f in src.kernels[i].findings if f.section in wanted}
                finding_sets_equal += set(got) == set(expected)
                opt_sets_equal += ({k for k in got if k[2] == "OPT"}
                                   == {k for k in expected if k[2] == "OPT"})
                for key in set(got) & set(expected):
                    a, b = got[key].speedup_pct, expected[key].speedup_pct
                    if a is not None and b is not None:
                        speedup_diffs.append(abs(a - b))
            rows.append({
                "subset": name, "problem": problem, "source": source, "kernels_match": True,
                "metrics": n, "within_1pct": within1 / max(n, 1),
                "within_5pct": within5 / max(n, 1),
                "kernels_with_same_findings": finding_sets_equal / len(target.kernels),
                "kernels_with_same_opt_findings": opt_sets_equal / len(target.kernels),
                "max_speedup_diff_pct_points": max(speedup_diffs, default=0.0),
            })
    return rows


def decision_rows(loaded: dict) -> list[dict]:
    """Per subset and problem: does the reference optimizer choose the same transformation
    from the real run of the subset as from the subset's sections cut out of the full set's
    run (what the dataset replays) and from the runs of each section alone, merged?"""
    from autoprofiler_env.optimizers import reference_optimizer
    from autoprofiler_env.problems import load_problem
    from autoprofiler_env.profiler.merge import merge_profiles
    from autoprofiler_env.profiler.parse import cut

    # the optimizer the study's decisions were recorded with (docs/data/profile_study_h200)
    optimizer = reference_optimizer("reference-v1", device="cuda")
    rows = []
    for name, (run, profiles) in loaded.items():
        if not name.startswith("subset-") or "set-full" not in loaded:
            continue
        for problem_name, target in profiles.items():
            problem = load_problem(problem_name)
            singles = [loaded[f"section-{s}"][1][problem_name] for s in run.sections]
            full = loaded["set-full"][1][problem_name]
            live = optimizer.choose(problem, target)[0]
            rows.append({
                "subset": name, "problem": problem_name, "live": live,
                "full_cut": optimizer.choose(problem, cut(full, run.sections, target.cost))[0],
                "singles": optimizer.choose(problem, merge_profiles(
                    target.problem_uri, run.sections, singles))[0]})
    return rows


def batching_rows(loaded: dict) -> list[dict]:
    """Seconds per problem when the suite is profiled with one section in one invocation,
    against one invocation per problem (the sample of part 2)."""
    rows = []
    suite = loaded.get("suite-SpeedOfLight")
    if suite is not None:
        run, profiles = suite
        rows.append({"mode": "one invocation for the suite", "problems": len(profiles),
                     "seconds": run.wall_s, "seconds_per_problem": run.wall_s / len(profiles)})
        slowest = max(profiles, key=lambda n: profiles[n].cost.replay_s)
        rest = run.wall_s - profiles[slowest].cost.replay_s
        rows.append({"mode": f"the suite without its slowest problem ({slowest})",
                     "problems": len(profiles) - 1, "seconds": rest,
                     "seconds_per_problem": rest / max(len(profiles) - 1, 1)})
    alone = [(run, profiles) for name, (run, profiles) in loaded.items()
             if name.startswith("alone-")]
    if alone:
        total = sum(run.wall_s for run, _ in alone)
        rows.append({"mode": "one invocation per problem", "problems": len(alone),
                     "seconds": total, "seconds_per_problem": total / len(alone)})
        if suite is not None:  # the same problems inside the batched run, for a fair pair
            names = {next(iter(p)) for _, p in alone}
            replay = sum(p.cost.replay_s for n, p in suite[1].items() if n in names)
            rows.append({"mode": "their replay inside the suite's invocation",
                         "problems": len(names), "seconds": replay,
                         "seconds_per_problem": replay / max(len(names), 1)})
    return rows


def analyze(runs: Path, out: Path) -> int:
    import csv
    import statistics

    loaded = _load(runs)
    out.mkdir(parents=True, exist_ok=True)
    costs = cost_rows(loaded)
    agreement = [r for source in ("singles", "full") for r in agreement_rows(loaded, source)]
    for rows, filename in ((costs, "profiler_costs.csv"), (agreement, "profiler_agreement.csv")):
        if rows:
            with (out / filename).open("w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=list(rows[0]) if filename.endswith(
                    "costs.csv") else sorted({k for r in rows for k in r}))
                writer.writeheader()
                writer.writerows(rows)
    print("| configuration | passes | replay s / problem (median) | replay s / kernel (median) "
          "| ncu invocation s (12 problems) |")
    print("|---|---|---|---|---|")
    for r in costs:
        print(f"| {r['config']} | {r['passes']} | {r['replay_s_per_problem_median']:.2f} | "
              f"{r['replay_s_per_kernel_median']:.3f} | {r['invocation_s']:.1f} |")
    print()
    print("| subset | source | problems | metrics within 1% | within 5% | kernels with the same "
          "findings | ... same OPT findings | largest speedup-estimate difference (points) |")
    print("|---|---|---|---|---|---|---|---|")
    for (subset, source) in dict.fromkeys((r["subset"], r["source"]) for r in agreement):
        rows = [r for r in agreement if r["subset"] == subset and r["source"] == source
                and r["kernels_match"]]
        if not rows:
            continue
        print(f"| {subset.removeprefix('subset-')} | {source} | {len(rows)} | "
              f"{statistics.mean(r['within_1pct'] for r in rows):.1%} | "
              f"{statistics.mean(r['within_5pct'] for r in rows):.1%} | "
              f"{statistics.mean(r['kernels_with_same_findings'] for r in rows):.1%} | "
              f"{statistics.mean(r['kernels_with_same_opt_findings'] for r in rows):.1%} | "
              f"{max(r['max_speedup_diff_pct_points'] for r in rows):.1f} |")
    decisions = decision_rows(loaded)
    if decisions:
        print()
        for source in ("full_cut", "singles"):
            same = sum(r[source] == r["live"] for r in decisions)
            print(f"reference optimizer's choice from {source} = from the real subset run: "
                  f"{same}/{len(decisions)}")
    if "set-full" in loaded:
        from autoprofiler_env.dataset.costs import CostModel

        full = loaded["set-full"][1]
        model = CostModel.fit({name.removeprefix("section-"): [
            (p.cost, full[n].cost) for n, p in profiles.items() if n in full]
            for name, (_, profiles) in loaded.items()
            if name.startswith("section-") or name in ("set-basic", "set-detailed")})
        print("\n| alone | share of the full set's replay seconds | problems | leave-one-out "
              "error, median | max |")
        print("|---|---|---|---|---|")
        for name, f in model.fractions.items():
            print(f"| {name} | {f.replay:.3f} | {f.problems} | {f.loo_median_error:.0%} | "
                  f"{f.loo_max_error:.0%} |")
    batching = batching_rows(loaded)
    if batching:
        print()
        print("| SpeedOfLight | problems | seconds | seconds per problem |")
        print("|---|---|---|---|")
        for r in batching:
            print(f"| {r['mode']} | {r['problems']} | {r['seconds']:.1f} | "
                  f"{r['seconds_per_problem']:.2f} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.studies.profile_study")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("collect", help="profile on a GPU (resumable)")
    p.add_argument("--out", type=Path, default=Path("runs/profile_study"))
    p.add_argument("--part", type=int, choices=(1, 2), default=1)
    p.add_argument("--only", metavar="GLOB", help="only the configurations whose name matches, "
                   "e.g. 'alone-*'")
    p.add_argument("--deadline", type=float, metavar="SECONDS",
                   help="stop each ncu invocation after this long, keeping what it finished")
    p = sub.add_parser("analyze", help="cost and reconstruction tables from collected runs")
    p.add_argument("--runs", type=Path, default=Path("docs/data/profile_study_h200"))
    p.add_argument("--out", type=Path, default=Path("docs/data"))
    args = parser.parse_args(argv)
    if args.command == "collect":
        return collect(args.out, args.part, args.only, args.deadline)
    return analyze(args.runs, args.out)


if __name__ == "__main__":
    sys.exit(main())
