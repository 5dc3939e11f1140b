"""The recording plan: every candidate the reference optimizer can write for a problem, from
the recorded evidence of any set of sections, and in which order to record them.

The optimizer is a pure function of the evidence, so the candidates an episode can reach are
found on a CPU by running it (under each tolerance regime that changes its rules) on the
merged profile of every subset of the sections that bear on its rules (a section that bears on
none adds only the kernel list and durations, which every section's run reports alike; one such
section stands for all of them). Each candidate keeps the cheapest set that reaches it and that
set's share of ncu's full set's cost (the environment's budget), so a recording that stops
early has measured what the tighter budgets reach.

Problems come in an order where every prefix is balanced across the splits and the levels
(their positions spread evenly: a prefix of 24 holds about 6 test, 3 validation and 15
training problems, and each split's levels in proportion), so each stop of a resumable
recording leaves a usable, balanced subset.

    python -m autoprofiler_env.dataset.record.plan --out docs/data/recording_h200_v2/plan.json
"""

from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from autoprofiler_env.atomic import write_atomic
from autoprofiler_env.errors import DatasetError


@dataclass(frozen=True)
class PlannedCandidate:
    name: str                    # a (composed) candidate name, never "identity"
    sections: tuple[str, ...]    # the cheapest section set that reaches it
    cost_share: float            # that set's cost over the full set's (the episode budget)


@dataclass(frozen=True)
class PlannedProblem:
    uri: str
    split: str | None
    candidates: tuple[PlannedCandidate, ...]


def reachable(dataset, uri: str, optimizers, applicable) -> dict[str, PlannedCandidate]:
    """Every candidate that one of ``optimizers`` (the same rules under each tolerance regime
    that changes them) writes for ``uri`` from some set of sections, with the cheapest set
    reaching it (identity, which needs no recording, left out). ``cost_share`` is that set's
    cost over ncu's full set's, as the environment's budget counts it.

    Raises:
        DatasetError: the sections' runs show different kernels or durations: then the first
            section of a set matters, and one non-bearing section cannot stand for the rest.
    """
    record = dataset.record(uri)
    shapes = {tuple((k.name, k.duration_ns) for k in record.profiles[s].kernels)
              for s in dataset.sections}
    if len(shapes) > 1:
        raise DatasetError(f"{uri}: the sections' runs differ in their kernels or durations; "
                           "the plan assumes one run cut into sections (docs/dataset.md)")
    bearing = tuple(dict.fromkeys(s for opt in optimizers
                                  for s in dataset.bearing(uri, opt)))
    others = [s for s in dataset.sections if s not in bearing]
    seconds = {s: record.profiles[s].cost.replay_s for s in dataset.sections}
    full_set = record.set_costs.get("full")
    full = (full_set.replay_s if full_set is not None else sum(seconds.values())) or 1.0
    eager_ms = record.eager.get("median_ms")
    keep = frozenset(m for opt in optimizers for m in opt.evidence_metrics)
    found: dict[str, PlannedCandidate] = {}
    cheapest_other = min(others, key=seconds.__getitem__) if others else None
    subsets = [()] + [c for k in range(1, len(bearing) + 1)
                      for c in itertools.combinations(bearing, k)]
    if cheapest_other is not None:
        subsets.append((cheapest_other,))
    for subset in subsets:
        profile = dataset.profile(uri, subset, keep) if subset else None
        share = sum(seconds[s] for s in subset) / full
        for optimizer in optimizers:
            name, _, _ = optimizer.choose(None, profile, record.features,
                                          applicable=applicable, eager_ms=eager_ms)
            if name != "identity" and (name not in found or share < found[name].cost_share):
                found[name] = PlannedCandidate(name, tuple(subset), round(share, 4))
    return found


def planning_optimizers():
    """The reference optimizer under each tolerance regime that changes its rules: one that
    admits TF32 / FP16 (KernelBench v0.1's 1e-2, the recording's) and one that does not
    (KernelBench's current fp32 1e-4)."""
    from autoprofiler_env.optimizers.reference import ReferenceOptimizer

    return [ReferenceOptimizer(), ReferenceOptimizer(tolerance="kernelbench")]


def balanced_order(groups: dict[str, tuple]) -> list[str]:
    """URIs in an order where each prefix holds every group in proportion: ``groups`` maps a
    URI to its (split, level); each problem's position within its group, spread over the
    group's size, orders them (ties: test, then validation, then training)."""
    by_group: dict[tuple, list[str]] = {}
    for uri in sorted(groups):
        by_group.setdefault(groups[uri], []).append(uri)
    rank = {}
    for members in by_group.values():
        for i, uri in enumerate(members):
            rank[uri] = (i + 0.5) / len(members)
    order = {"test": 0, "val": 1, "train": 2}
    return sorted(groups, key=lambda u: (rank[u], order.get(groups[u][0], 3), str(groups[u][1]),
                                         u))


def make_plan(dataset, optimizers, order: list[str] | None = None) -> list[PlannedProblem]:
    """The plan for every problem of ``dataset`` (or of ``order``, in that order), in
    recording order (:func:`balanced_order` over splits and levels); each problem's
    candidates cheapest first."""
    groups = {u: (dataset.record(u).split, dataset.record(u).level) for u in dataset.uris()}
    plan = []
    for uri in (balanced_order(groups) if order is None else order):
        record = dataset.record(uri)
        if not record.transformations:
            raise DatasetError(f"{uri}: the dataset does not list the transformations that apply "
                               "(schema 3's `transformations`); rebuild it")
        found = reachable(dataset, uri, optimizers, frozenset(record.transformations))
        plan.append(PlannedProblem(uri, record.split, tuple(
            sorted(found.values(), key=lambda c: (c.cost_share, c.name)))))
    return plan


def save_plan(plan: list[PlannedProblem], path: Path, meta: dict) -> None:
    doc = {**meta, "problems": [{**asdict(p), "candidates": [asdict(c) for c in p.candidates]}
                                for p in plan]}
    write_atomic(Path(path), (json.dumps(doc, indent=1) + "\n").encode())


def candidate_names(planned: list[PlannedProblem]) -> dict[str, list[str]]:
    """Per problem, its candidates' names in the plan's order (what the candidates part
    records)."""
    return {p.uri: [c.name for c in p.candidates] for p in planned}


def load_plan(path: Path) -> list[PlannedProblem]:
    """Reads a plan file.

    Raises:
        DatasetError: missing, not JSON, or without its fields; the message names the file.
    """
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
        return [PlannedProblem(p["uri"], p.get("split"), tuple(
            PlannedCandidate(c["name"], tuple(c["sections"]), float(c["cost_share"]))
            for c in p["candidates"])) for p in doc["problems"]]
    except FileNotFoundError:
        raise DatasetError(f"no plan file at {path}: make one with `python -m "
                           "autoprofiler_env.dataset.record.plan --out FILE`") from None
    except (ValueError, KeyError, TypeError) as e:
        raise DatasetError(f"{path} is not a recording plan ({type(e).__name__}: {e}); make "
                           "it again with `python -m autoprofiler_env.dataset.record.plan`") \
            from None


def main(argv: list[str] | None = None) -> int:
    from autoprofiler_env.dataset import Dataset
    from autoprofiler_env.dataset.names import DEFAULT_NAME
    from autoprofiler_env.optimizers.reference import ReferenceOptimizer

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default=DEFAULT_NAME,
                        help="the dataset whose evidence the optimizer reads: a shipped one's "
                        "name (suite, kernelbench) or a file (default: suite)")
    parser.add_argument("--out", required=True, help="the plan file (JSON)")
    args = parser.parse_args(argv)
    dataset = Dataset.load(args.dataset)
    plan = make_plan(dataset, planning_optimizers())
    n = sum(len(p.candidates) for p in plan)
    save_plan(plan, Path(args.out), {"optimizer": ReferenceOptimizer.name,
                                     "tolerances": ["kernelbench-v0.1", "kernelbench"],
                                     "dataset_sha256": dataset.metadata.get("sha256"),
                                     "problems_n": len(plan), "candidates_n": n})
    print(f"{len(plan)} problems, {n} candidates -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
