"""Every applicable transformation's correctness and speedup, per problem, on a GPU.

    python -m experiments.transform_study run --out docs/data/transforms_h200.jsonl [--n 36]
    python -m experiments.transform_study analyze --rows docs/data/transforms_h200.jsonl

``run`` is resumable (a (problem, transformation) pair already in the file is skipped). It
first compiles every candidate in several worker processes at once (``--warm-workers``), which
fills Inductor's on-disk cache, then judges and times the candidates one at a time, so that
no two timings share the GPU. ``analyze`` prints the winners: how many distinct
transformations win, and the largest share any one of them wins.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm


def study_problems(n: int):
    """The profiler study's 12 problems (so that those 12 have profiles of every section and
    every candidate's outcome: a small complete recording), then more suite problems spread
    over the levels in proportion and over each level's list, ``n`` in all."""
    from autoprofiler_env.problems import LEVELS, load_problem, load_suite
    from experiments.profile_study import STUDY_PROBLEMS

    chosen = [load_problem(name) for name in STUDY_PROBLEMS][:n]
    suite = [p for p in load_suite() if p not in chosen]
    rest = n - len(chosen)
    for level in LEVELS:
        members = [p for p in suite if p.level == level]
        k = min(len(members), max(1, round(rest * len(members) / len(suite))))
        step = len(members) / k
        chosen += [members[int(i * step)] for i in range(k)]
    return chosen[:n] if len(chosen) > n else chosen


def _pairs(problems, device: str):
    from autoprofiler_env.features import static_features
    from autoprofiler_env.optimizers import applicable

    for problem in problems:
        features = static_features(problem)
        for t in applicable(problem, features, device):
            yield problem, t.name, t.rewrite(problem, features)


def run(out: Path, n: int, device: str, warm_workers: int, timeout_s: float,
        size: str = "full") -> int:
    from autoprofiler_env.harness import Evaluator, HarnessConfig
    from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl
    from experiments.reference_timing import machine_info

    done = {(r["uri"], r["transformation"]) for r in read_jsonl(out)}
    todo = [(p, name, src) for p, name, src in _pairs(study_problems(n), device)
            if (p.uri, name) not in done]
    config = HarnessConfig(device=device, size=size)
    if warm_workers > 1 and todo:
        warm_config = HarnessConfig(device=device, size=size, n_correctness=1, timing_budget_ms=1,
                                    min_trials=1, max_trials=1, warmup_ms=0, flush_l2=False)
        evaluators = [Evaluator(warm_config, timeout_s=timeout_s) for _ in range(warm_workers)]

        def warm(i_item):
            i, (problem, _, source) = i_item
            try:
                evaluators[i % warm_workers].evaluate(problem, source)
            except Exception:  # a broken pair is judged (and recorded) in the timed pass
                pass

        with ThreadPoolExecutor(warm_workers) as pool:
            list(tqdm(pool.map(warm, enumerate(todo)), total=len(todo), desc="compile"))
        for ev in evaluators:
            ev.close()
    info = machine_info(device)
    with Evaluator(config, timeout_s=timeout_s) as evaluator, JsonlAppender(out) as log:
        for problem, name, source in tqdm(todo, desc="judge and time"):
            result = evaluator.evaluate(problem, source)
            row = {"uri": problem.uri, "level": problem.level, "transformation": name,
                   "correct": result.correct,
                   "error_kind": result.error_kind.value if result.error_kind else None,
                   "error_message": result.error_message[:300],
                   "reference_ms": result.reference.median_ms if result.reference else None,
                   "candidate_ms": result.candidate.median_ms if result.candidate else None,
                   "candidate_p20_ms": result.candidate.p20_ms if result.candidate else None,
                   "candidate_p80_ms": result.candidate.p80_ms if result.candidate else None,
                   "speedup": result.speedup, "max_abs_error": result.max_abs_error,
                   "wall_s": result.wall_s, **info}
            log.write(row)
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
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.transform_study")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run")
    p.add_argument("--out", type=Path, default=Path("docs/data/transforms_h200.jsonl"))
    p.add_argument("--n", type=int, default=36, help="how many suite problems")
    p.add_argument("--device", default="cuda")
    p.add_argument("--warm-workers", type=int, default=6)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--size", choices=("full", "smoke"), default="full",
                   help="smoke: the problems' small CPU sizes, to try the study on a CPU")
    p = sub.add_parser("analyze")
    p.add_argument("--rows", type=Path, default=Path("docs/data/transforms_h200.jsonl"))
    args = parser.parse_args(argv)
    if args.command == "run":
        return run(args.out, args.n, args.device, args.warm_workers, args.timeout, args.size)
    return analyze(args.rows)


if __name__ == "__main__":
    sys.exit(main())
