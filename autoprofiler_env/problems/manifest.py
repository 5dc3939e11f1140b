"""Builds the suite manifest: each problem's op tags and its fixed train / val / test split.

Run ``python -m autoprofiler_env.problems.manifest`` after adding problems to the suite.

The split is stratified by level and by the problem's dominant op category (its first tag):
problems are ordered by (level, first tag, a hash of the name) and dealt in the repeating
pattern train, test, train, val, train, test, train, train -- 5/8 train, 1/8 val, 2/8 test
in every stratum of eight. Problems already in the manifest keep their split forever; a new
problem gets the split its level is furthest below target on, so earlier results stay valid.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections import Counter

from autoprofiler_env.atomic import write_atomic
from autoprofiler_env.errors import AutoProfilerWarning
from autoprofiler_env.features import static_features
from autoprofiler_env.problems.loaders import MANIFEST_PATH, SPLITS, load_suite, read_manifest

PATTERN = ("train", "test", "train", "val", "train", "test", "train", "train")
TARGET = {s: PATTERN.count(s) / len(PATTERN) for s in SPLITS}


def _name_hash(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def build_manifest() -> dict:
    """Recomputes every problem's tags and assigns splits to the problems that have none."""
    old = read_manifest()["problems"]
    entries: dict[str, dict] = {}
    with warnings.catch_warnings():  # the problems it is about to add, said missing
        warnings.simplefilter("ignore", AutoProfilerWarning)
        suite = load_suite()
    for problem in suite:
        key = problem.uri.rsplit("/", 2)[-2] + "/" + problem.name
        tags = list(static_features(problem).tags)
        entries[key] = {"level": problem.level, "tags": tags,
                        "split": old.get(key, {}).get("split")}
    fresh = [k for k, e in entries.items() if e["split"] is None]
    if len(fresh) == len(entries):  # a new suite: deal the stratified pattern
        order = sorted(entries, key=lambda k: (entries[k]["level"], entries[k]["tags"][:1],
                                               _name_hash(k)))
        for i, key in enumerate(order):
            entries[key]["split"] = PATTERN[i % len(PATTERN)]
    else:
        for key in sorted(fresh, key=_name_hash):
            level = entries[key]["level"]
            counts = Counter(e["split"] for e in entries.values()
                             if e["level"] == level and e["split"])
            total = sum(counts.values()) + 1
            entries[key]["split"] = max(SPLITS, key=lambda s: TARGET[s] * total - counts[s])
    return {"version": 1, "problems": {k: entries[k] for k in sorted(entries)}}


def write_manifest(manifest: dict) -> None:
    """Writes atomically (a temporary file, then a rename)."""
    write_atomic(MANIFEST_PATH, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())


def main() -> None:
    manifest = build_manifest()
    write_manifest(manifest)
    counts = Counter((e["level"], e["split"]) for e in manifest["problems"].values())
    print(f"{len(manifest['problems'])} problems written to {MANIFEST_PATH.name}")
    for level in sorted({lvl for lvl, _ in counts}):
        print(f"  level {level}: " + ", ".join(f"{s} {counts[(level, s)]}" for s in SPLITS))


if __name__ == "__main__":
    main()
