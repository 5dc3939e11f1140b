"""Does the separated, sandboxed judge (judge 2) give the recorded outcomes the same verdicts?

    python3 -m experiments.studies.rejudge run     [--out DIR] [--deadline S]   # GPU, resumable
    python -m experiments.studies.rejudge analyze  [--out DIR]                  # any machine

``run`` judges again, with today's harness at the recording's tolerance (1e-2), a sample of the
(problem, transformation) pairs of ``docs/data/recording_h200/candidates.jsonl`` (recorded by
judge 1, in the candidate's own process), one problem at a time, appending one row per pair to
``DIR/rejudged.jsonl``:

- every correct pair whose max abs error exceeds 1e-4: their ``tolerance_needed`` decides
  KernelBench's current fp32 regime (1e-4), which judge 1's rows cannot;
- for every other transformation, the three pairs that judged fastest, so that each of the
  catalogue's transformations is in the sample;
- the incorrect pairs of the problems already in the sample.

``analyze`` compares the verdicts (``pairs.csv``, ``summary.json``) and prints those that
differ.
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import statistics
import time
from pathlib import Path

RECORDING = Path("docs/data/recording_h200/candidates.jsonl")
DEFAULT_OUT = Path("docs/data/rejudge_h200")
PER_TRANSFORMATION = 3


def plan(rows: list[dict]) -> list[dict]:
    """The sample, in the order it is judged: the catalogue's spread first, then the
    tolerance-deciding pairs, then the incorrect ones, grouped by problem within each."""
    tolerance = [r for r in rows if r["correct"] and (r["max_abs_error"] or 0) > 1e-4]
    covered = {r["transformation"] for r in tolerance}
    spread = []
    by_name = collections.defaultdict(list)
    for r in rows:
        if r["correct"] and r["transformation"] not in covered:
            by_name[r["transformation"]].append(r)
    for name in sorted(by_name):
        spread += sorted(by_name[name], key=lambda r: (r["wall_s"], r["uri"]))[:PER_TRANSFORMATION]
    chosen = {(r["uri"], r["transformation"]) for r in spread + tolerance}
    problems = {r["uri"] for r in spread + tolerance}
    incorrect = [r for r in rows if not r["correct"] and r["uri"] in problems
                 and (r["uri"], r["transformation"]) not in chosen]
    return [r for group in (spread, tolerance, incorrect)
            for r in sorted(group, key=lambda r: (r["uri"], r["transformation"]))]


def run(out: Path, deadline_s: float | None = None) -> int:
    from tqdm import tqdm

    from autoprofiler_env.dataset.record import machine_info, outcome_row
    from autoprofiler_env.features import static_features
    from autoprofiler_env.harness import Evaluator, HarnessConfig
    from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl
    from autoprofiler_env.optimizers import TRANSFORMATIONS
    from autoprofiler_env.problems import load_problem

    deadline = time.monotonic() + deadline_s if deadline_s else None
    rows_path = out / "rejudged.jsonl"
    done = {(r["uri"], r["transformation"]) for r in read_jsonl(rows_path)}
    todo = [r for r in plan(read_jsonl(RECORDING)) if (r["uri"], r["transformation"]) not in done]
    config = HarnessConfig(device="cuda", tolerance="kernelbench-v0.1")
    info = machine_info("cuda")
    features = {}
    with Evaluator(config, timeout_s=300) as evaluator, JsonlAppender(rows_path) as log:
        for row in tqdm(todo, desc="rejudge", unit="pair"):
            if deadline is not None and time.monotonic() > deadline:
                break
            problem = load_problem(row["uri"])
            if row["uri"] not in features:
                features[row["uri"]] = static_features(problem)
            source = TRANSFORMATIONS[row["transformation"]].rewrite(problem,
                                                                   features[row["uri"]])
            result = evaluator.evaluate(problem, source)
            log.write(outcome_row(problem, row["transformation"], result, info, source,
                                  evaluator.timeout_s)
                      | {"isolation": result.isolation, "findings": result.findings})
    left = len(plan(read_jsonl(RECORDING))) - len(read_jsonl(rows_path))
    print(f"{len(read_jsonl(rows_path))} pairs judged, {left} left")
    return 0


def analyze(out: Path) -> dict:
    from autoprofiler_env.harness import passes
    from autoprofiler_env.jsonlines import read_jsonl

    old = {(r["uri"], r["transformation"]): r for r in read_jsonl(RECORDING)}
    new = read_jsonl(out / "rejudged.jsonl")
    table, differ = [], []
    for r in new:
        o = old[(r["uri"], r["transformation"])]
        strict = (passes(r["tolerance_needed"], "kernelbench")
                  if r["correct"] and r["tolerance_needed"] is not None else False)
        row = {"uri": r["uri"], "transformation": r["transformation"],
               "recorded": o["correct"], "rejudged": r["correct"],
               "recorded_error": o["error_kind"], "rejudged_error": r["error_kind"],
               "recorded_speedup": o["speedup"], "rejudged_speedup": r["speedup"],
               "tolerance_needed": (r["tolerance_needed"] or {}).get("float32"),
               "passes_kernelbench_fp32": strict,
               "timing_unexplained": r["timing_unexplained"], "rechecked": r["rechecked"],
               "message": r["error_message"][:160] if r["correct"] != o["correct"] else ""}
        table.append(row)
        if r["correct"] != o["correct"]:
            differ.append(row)
    both = [t for t in table if t["recorded"] and t["rejudged"]]
    ratios = [t["rejudged_speedup"] / t["recorded_speedup"] for t in both]
    unexplained = sorted(t["timing_unexplained"] for t in both
                         if t["timing_unexplained"] is not None)
    summary = {
        "pairs": len(table),
        "same_verdict": len(table) - len(differ),
        "differ": [{k: d[k] for k in ("uri", "transformation", "recorded", "rejudged",
                                      "rejudged_error", "message")} for d in differ],
        "by_transformation": dict(collections.Counter(t["transformation"] for t in table)),
        "speedup_ratio_median": statistics.median(ratios) if ratios else None,
        "speedup_ratio_p10_p90": ([sorted(ratios)[len(ratios) // 10],
                                   sorted(ratios)[(9 * len(ratios)) // 10]] if ratios else None),
        "timing_unexplained_median_p95_max": ([
            statistics.median(unexplained), unexplained[(95 * len(unexplained)) // 100],
            unexplained[-1]] if unexplained else None),
        "rechecked": sum(bool(t["rechecked"]) for t in table),
        "correct_at_1e-2": sum(t["rejudged"] for t in table),
        "correct_at_kernelbench_fp32_1e-4": sum(t["passes_kernelbench_fp32"] for t in table),
    }
    out.mkdir(parents=True, exist_ok=True)
    with (out / "pairs.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]) if table else ["uri"])
        writer.writeheader()
        writer.writerows(table)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="judge the sample again (GPU)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--deadline", type=float, help="seconds after which nothing new starts")
    p = sub.add_parser("analyze", help="compare the verdicts (any machine)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.command == "run":
        return run(args.out, args.deadline)
    analyze(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
