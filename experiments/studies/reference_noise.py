"""How far a problem's eager reference time moves between the judge's judgements, on a GPU.

The KernelBench recording's references moved up to 1.95x between candidates' judgements on
level-3 networks (``Dataset.reference_drift()``, docs/dataset.md), where a judgement's own
p20-p80 spread is 0.3-5%. This study judges the same candidates of a few problems again and
again, in the recorder's order (each problem's turn between the others'), under the judge's
timing settings and under longer ones, and writes one row per judgement: the reference's
median, p20 and p80 and trials, the candidate's, the speedup. Run on a GPU::

    python -m experiments.studies.reference_noise --kernelbench .kernelbench/KernelBench \\
        --out noise.jsonl [--repeats 3] [--problems level3/15_DenseNet121,...]

The last lines printed give, per setting and problem, the largest over the smallest
reference median across its judgements (the drift) beside the median p80/p20 within one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from pathlib import Path

SETTINGS = {"judge": {}, "long": {"warmup_ms": 1000.0, "timing_budget_ms": 3000.0},
            "fresh": {}}
"""The timing settings compared: the judge's (``HarnessConfig``'s defaults: 25 ms of warm-up,
300 ms of trials over 5 rounds), ten times longer ones (40x the warm-up), and the judge's with
a new judge (so a new reference process) for every judgement (``fresh``)."""
PROBLEMS = ("level3/15_DenseNet121", "level3/9_ResNet18", "level3/19_MobileNetV1")
CANDIDATES = ("identity", "tf32")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", required=True, help="a KernelBench checkout")
    parser.add_argument("--out", required=True, help="the rows (JSON lines), appended")
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)

    from autoprofiler_env.dataset.record import recording_config
    from autoprofiler_env.features import static_features
    from autoprofiler_env.harness.evaluator import Evaluator
    from autoprofiler_env.optimizers.compose import compose
    from autoprofiler_env.optimizers.transforms import identity_source
    from autoprofiler_env.problems.kernelbench import KernelBenchCheckout

    found, _ = KernelBenchCheckout(args.kernelbench).problems(levels=(3,))
    wanted = args.problems.split(",")
    problems = [p for want in wanted for p in found if p.uri.endswith("/" + want)]
    if len(problems) != len(wanted):
        raise SystemExit(f"not all of {wanted} are in {args.kernelbench}")
    sources = []  # (problem, candidate, its source), the problems taking turns
    for problem in problems:
        features = static_features(problem)
        for name in args.candidates.split(","):
            sources.append((problem, name, identity_source(problem) if name == "identity"
                            else compose(problem, features, name)))
    out = Path(args.out)
    rows = []
    for setting in args.settings.split(","):
        config = dataclasses.replace(recording_config(args.device), **SETTINGS[setting])
        with Evaluator(config) as shared:
            for repeat in range(args.repeats):
                for problem, name, source in sources:
                    uri = problem.uri
                    start = time.monotonic()
                    if setting == "fresh":
                        with Evaluator(config) as evaluator:
                            result = evaluator.evaluate(problem, source)
                    else:
                        result = shared.evaluate(problem, source)
                    ref, cand = result.reference, result.candidate
                    row = {"setting": setting, "repeat": repeat, "uri": uri, "candidate": name,
                           "correct": result.correct, "error": result.error_message[:200],
                           "reference_ms": ref and ref.median_ms,
                           "reference_p20_ms": ref and ref.p20_ms,
                           "reference_p80_ms": ref and ref.p80_ms,
                           "reference_trials": ref and ref.n_trials,
                           "candidate_ms": cand and cand.median_ms,
                           "candidate_p20_ms": cand and cand.p20_ms,
                           "candidate_p80_ms": cand and cand.p80_ms,
                           "speedup": result.speedup, "phases_s": result.phases_s,
                           "wall_s": round(time.monotonic() - start, 2)}
                    rows.append(row)
                    with out.open("a") as f:
                        f.write(json.dumps(row) + "\n")
                    print(json.dumps({k: row[k] for k in ("setting", "repeat", "candidate",
                                                          "reference_ms", "candidate_ms",
                                                          "wall_s")}
                                     | {"problem": uri.rsplit("/", 1)[-1]}), flush=True)
    for setting in args.settings.split(","):
        for problem in problems:
            mine = [r for r in rows if r["setting"] == setting and r["uri"] == problem.uri
                    and r["reference_ms"]]
            if not mine:
                continue
            medians = [r["reference_ms"] for r in mine]
            within = statistics.median(r["reference_p80_ms"] / r["reference_p20_ms"]
                                       for r in mine)
            print(f"{setting} {problem.name}: reference median {min(medians):.3f}-"
                  f"{max(medians):.3f} ms over {len(mine)} judgements (drift "
                  f"{max(medians) / min(medians):.3f}x), p80/p20 within one {within:.3f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
