"""Every applicable transformation's correctness and speedup, per problem, on a GPU.

    python -m experiments.studies.transform_study run [--out ROWS] [--n 36]
    python -m experiments.studies.transform_study analyze [--rows ROWS]

ROWS defaults to docs/data/recording_h200/candidates.jsonl, the recording's candidates.

``run`` records the candidates of the study's problems as ``autoprofiler record --parts
candidates`` does (resumable; see autoprofiler_env/dataset/record.py). ``analyze`` prints the
winners: how many distinct transformations win, the largest share any one of them wins, and
each transformation's record (docs/optimizers.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from pathlib import Path

ROWS = Path("docs/data/recording_h200/candidates.jsonl")


def study_problems(n: int):
    """The profiler study's 12 problems (so that those 12 have profiles of every section and
    every candidate's outcome: a small complete recording), then more suite problems spread
    over the levels in proportion and over each level's list, ``n`` in all."""
    from autoprofiler_env.problems import LEVELS, load_problem, load_suite
    from experiments.studies.profile_study import STUDY_PROBLEMS

    chosen = [load_problem(name) for name in STUDY_PROBLEMS][:n]
    suite = [p for p in load_suite() if p not in chosen]
    rest = n - len(chosen)
    for level in LEVELS:
        members = [p for p in suite if p.level == level]
        k = min(len(members), max(1, round(rest * len(members) / len(suite))))
        step = len(members) / k
        chosen += [members[int(i * step)] for i in range(k)]
    return chosen[:n]


def run(out: Path, n: int, device: str, warm_workers: int, timeout_s: float,
        size: str = "full") -> int:
    from autoprofiler_env.dataset.record import record_candidates
    from autoprofiler_env.harness import HarnessConfig

    record_candidates(study_problems(n), out, HarnessConfig(device=device, size=size),
                      warm_workers=warm_workers, timeout_s=timeout_s)
    return 0


def analyze(rows_path: Path) -> int:
    from autoprofiler_env.jsonlines import read_jsonl

    rows = read_jsonl(rows_path)
    by_problem: dict[str, list[dict]] = {}
    for r in rows:
        by_problem.setdefault(r["uri"], []).append(r)
    winners = Counter()
    print("| problem | eager ms | best | speedup | runner-up | failed |")
    print("|---|---|---|---|---|---|")
    for uri, rs in sorted(by_problem.items()):
        ok = sorted((r for r in rs if r["correct"]), key=lambda r: -r["speedup"])
        failed = ", ".join(f"{r['transformation']} ({r['error_kind']})" for r in rs
                           if not r["correct"])
        best = ok[0] if ok and ok[0]["speedup"] > 1.0 else None
        winners[best["transformation"] if best else "none (eager)"] += 1
        second = f"{ok[1]['transformation']} {ok[1]['speedup']:.2f}x" if len(ok) > 1 else ""
        print(f"| {uri.rsplit('/', 1)[1]} | {rs[0]['reference_ms']:.3f} | "
              f"{best['transformation'] if best else 'eager'} | "
              f"{best['speedup'] if best else 1.0:.2f}x | {second} | {failed} |")
    total = sum(winners.values())
    print(f"\n{len(by_problem)} problems; distinct winners: {len(winners)}; "
          f"largest share: {winners.most_common(1)[0][0]} "
          f"{winners.most_common(1)[0][1] / total:.0%}")
    for name, count in winners.most_common():
        print(f"  {name}: {count}")
    print("\n| transformation | applicable | correct | speedup median | min | max | wins |")
    print("|---|---|---|---|---|---|---|")
    by_transformation: dict[str, list[dict]] = {}
    for r in rows:
        by_transformation.setdefault(r["transformation"], []).append(r)
    for name, rs in sorted(by_transformation.items(), key=lambda kv: -winners[kv[0]]):
        ok = sorted(r["speedup"] for r in rs if r["correct"])
        figures = (f"{statistics.median(ok):.2f}x | {ok[0]:.2f}x | {ok[-1]:.2f}x" if ok
                   else "– | – | –")
        print(f"| {name} | {len(rs)} | {len(ok)} | {figures} | {winners[name]} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.studies.transform_study")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run")
    p.add_argument("--out", type=Path, default=ROWS)
    p.add_argument("--n", type=int, default=36, help="how many suite problems")
    p.add_argument("--device", default="cuda")
    p.add_argument("--warm-workers", type=int, default=6)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--size", choices=("full", "smoke"), default="full",
                   help="smoke: the problems' small CPU sizes, to try the study on a CPU")
    p = sub.add_parser("analyze")
    p.add_argument("--rows", type=Path, default=ROWS)
    args = parser.parse_args(argv)
    if args.command == "run":
        return run(args.out, args.n, args.device, args.warm_workers, args.timeout, args.size)
    return analyze(args.rows)


if __name__ == "__main__":
    sys.exit(main())
