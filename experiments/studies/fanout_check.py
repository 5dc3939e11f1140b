"""Does a fan-out recording (``autoprofiler record --workers``) hold what the single-GPU path
records? Compares two recordings of the same problems, part by part:

- reference and candidates: the same units; per row the same keys, verdicts and judged
  sources; the timings' ratio (each recording measured its own);
- full: the same problems covered, each with the same profiled kernels.

    python -m experiments.studies.fanout_check PLAIN FANNED [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from autoprofiler_env.jsonlines import read_jsonl

VERDICT = ("correct", "error_kind", "source_sha256", "judge", "level", "device", "gpu")
"""What a candidate row must share with its twin (the rest are measurements)."""


def _key(row: dict) -> tuple:
    return row["uri"], row.get("transformation")


def compare_rows(plain: list[dict], fanned: list[dict], timing: str) -> dict:
    """The two parts' rows side by side: units only one side has, rows whose keys or verdicts
    differ, and the fanned / plain ratios of ``timing`` (median and range)."""
    a, b = {_key(r): r for r in plain}, {_key(r): r for r in fanned}
    differ = []
    for k in sorted(set(a) & set(b)):
        if set(a[k]) != set(b[k]):
            differ.append({"unit": k, "keys": sorted(set(a[k]) ^ set(b[k]))})
        bad = [f for f in VERDICT if a[k].get(f) != b[k].get(f)]
        if bad:
            differ.append({"unit": k, "fields": {f: [a[k].get(f), b[k].get(f)] for f in bad}})
    ratios = [b[k][timing] / a[k][timing] for k in set(a) & set(b)
              if a[k].get(timing) and b[k].get(timing)]
    return {"units": len(set(a) & set(b)), "only_plain": sorted(set(a) - set(b)),
            "only_fanned": sorted(set(b) - set(a)), "differ": differ,
            "timing_ratio": ({"median": statistics.median(ratios), "min": min(ratios),
                              "max": max(ratios)} if ratios else None)}


def _kernels(root: Path) -> dict[str, int]:
    """Per problem, the kernels its saved ncu runs profiled."""
    from autoprofiler_env.profiler import NcuRun
    from autoprofiler_env.profiler.parse import profiles_from_run

    counts: dict[str, int] = {}
    for meta in sorted(root.glob("*/run.json")):
        profiles, _ = profiles_from_run(NcuRun.load(meta.parent))
        for p in profiles:
            counts[p.problem_uri] = len(p.kernels)
    return counts


def compare(plain: Path, fanned: Path) -> dict:
    """Every part both recordings hold; ``same``: no unit missing and no verdict differing."""
    out = {}
    for part, timing in (("reference", "median_ms"), ("candidates", "speedup")):
        if (plain / f"{part}.jsonl").exists() or (fanned / f"{part}.jsonl").exists():
            out[part] = compare_rows(read_jsonl(plain / f"{part}.jsonl"),
                                     read_jsonl(fanned / f"{part}.jsonl"), timing)
    if (plain / "sets" / "full").is_dir() or (fanned / "sets" / "full").is_dir():
        a, b = _kernels(plain / "sets" / "full"), _kernels(fanned / "sets" / "full")
        out["full"] = {"problems": len(set(a) & set(b)), "only_plain": sorted(set(a) - set(b)),
                       "only_fanned": sorted(set(b) - set(a)),
                       "kernels_differ": {u: [a[u], b[u]] for u in set(a) & set(b)
                                          if a[u] != b[u]}}
    out["same"] = all(not (r["only_plain"] or r["only_fanned"] or r.get("differ")
                           or r.get("kernels_differ")) for r in out.values())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plain", type=Path)
    parser.add_argument("fanned", type=Path)
    parser.add_argument("--out", type=Path, help="also write the comparison here (JSON)")
    args = parser.parse_args(argv)
    result = compare(args.plain, args.fanned)
    text = json.dumps(result, indent=1, default=list)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if result["same"] else 1


if __name__ == "__main__":
    sys.exit(main())
