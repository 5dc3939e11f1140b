"""Seeded train / validation / test splits stratified by stratum, and an order in which every
prefix holds each stratum and each split in proportion.

A KernelBench dataset's stratum is a problem's (level, primary op tag): the first of
``static_features(problem).tags``, its dominant op category. :func:`stratified_splits` deals
the problems in :data:`PATTERN` (train, val, train, test, train: 60 / 20 / 20) through the
strata one after another, each stratum's problems in an order drawn from the seed, so that
every stratum's share of each split is within one problem of its proportion and the totals
are exact to one problem. :func:`balanced_order` orders problems so that each prefix is a
balanced sample: at every step it takes the (level, op, split) group whose cells are furthest
behind their share, so a recording that stops after any problem holds every level, op kind
and split in proportion (to about a problem each).

>>> splits = stratified_splits({"a": (1, "matmul"), "b": (1, "matmul"), ...}, seed=0)
>>> order = balanced_order({u: (*strata[u], splits[u]) for u in strata}, seed=0)
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Hashable

import numpy as np

from autoprofiler_env.problems.loaders import SPLITS

PATTERN = ("train", "val", "train", "test", "train")
"""The repeating deal: 3/5 train, 1/5 validation, 1/5 test."""
PROPORTIONS = {s: PATTERN.count(s) / len(PATTERN) for s in SPLITS}


def _drawn(seed: int, key: str) -> str:
    """A seeded, platform-independent sort key (Python's ``hash`` is salted per process)."""
    return hashlib.sha256(f"{seed}/{key}".encode()).hexdigest()


def stratified_splits(strata: dict[str, Hashable], seed: int = 0,
                      pattern: tuple[str, ...] = PATTERN) -> dict[str, str]:
    """Each key's split. ``strata`` maps a key (a problem's URI) to its stratum; the strata
    are taken in sorted order, each one's keys in the seed's order, and dealt ``pattern``
    cyclically from an offset the seed draws. The same seed and keys give the same splits;
    each key gets exactly one split.

    Raises:
        ValueError: ``pattern`` names something other than train, val and test.
    """
    unknown = set(pattern) - set(SPLITS)
    if unknown or not pattern:
        raise ValueError(f"the pattern must deal {', '.join(SPLITS)}, got {pattern!r}")
    by_stratum: dict[Hashable, list[str]] = {}
    for key in strata:
        by_stratum.setdefault(strata[key], []).append(key)
    offset = int(_drawn(seed, "offset"), 16) % len(pattern)
    splits, i = {}, offset
    for stratum in sorted(by_stratum, key=repr):
        for key in sorted(by_stratum[stratum], key=lambda k: _drawn(seed, k)):
            splits[key] = pattern[i % len(pattern)]
            i += 1
    return splits


def _marginals(group: tuple) -> tuple[tuple, ...]:
    """The cells of a (level, op, split) group whose balance the order keeps: its level, its
    (level, op) stratum, its split, and its (level, split)."""
    level, op, split = group
    return (("level", level), ("stratum", level, op), ("split", split),
            ("level-split", level, split))


def balanced_order(groups: dict[str, tuple], seed: int = 0) -> list[str]:
    """The keys in an order whose every prefix holds each level, (level, op) stratum, split
    and (level, split) in proportion to the whole. ``groups`` maps a key to its (level, op,
    split). Greedy: each step takes a key of the group whose cells lag furthest behind their
    share of the prefix (the sum of the lags); ties go to the seed's order of the groups, and
    a group's keys come in the seed's order."""
    members: dict[tuple, list[str]] = {}
    for key in sorted(groups, key=lambda k: _drawn(seed, k)):
        members.setdefault(tuple(groups[key]), []).append(key)
    total = len(groups)
    share = Counter(cell for key in groups for cell in _marginals(tuple(groups[key])))
    placed: Counter = Counter()
    tie = {g: _drawn(seed, repr(g)) for g in members}
    order: list[str] = []
    while len(order) < total:
        k = len(order) + 1

        def lag(group: tuple) -> float:
            return sum(k * share[c] / total - placed[c] for c in _marginals(group))

        group = max((g for g in members if members[g]), key=lambda g: (lag(g), tie[g]))
        order.append(members[group].pop(0))
        placed.update(_marginals(group))
    return order


NEAR_LOG10 = 0.35
"""How close a problem's static features must be to a train problem's for it to count as
*near* that one (:func:`near_train`): each within this in ``log10(1 + x)``, about a factor
of 2.2 in the size itself."""


def near_train(vectors: dict[str, tuple[str, np.ndarray]], names: tuple[str, ...],
               split: str = "test", within: float = NEAR_LOG10) -> dict[str, str]:
    """The problems of ``split`` that are near a train problem, each with the nearest one.

    ``vectors`` maps each problem's URI to its split and its static feature vector
    (:meth:`~autoprofiler_env.features.StaticFeatures.vector`, ordered as ``names``). A
    problem is near a train problem that has the same op histogram (each op class's count:
    the ``log_n_<category>`` features of :data:`~autoprofiler_env.features.OP_CATEGORIES`)
    and whose other features are each within ``within`` (:data:`NEAR_LOG10`) of its own:
    the same kinds of ops at a similar size, which the features the agents observe tell
    little apart (KernelBench's ``47_Sum_reduction`` and ``48_Mean_reduction``, the suite's
    ``relu`` and ``leaky_relu``). The splits are dealt within (level, primary op) strata,
    so such pairs cross them on purpose; scoring a split's near problems and the others
    apart shows how much of a learned agent's lead rests on them (``autoprofiler
    experiment``'s leaderboard does)."""
    from autoprofiler_env.features import OP_CATEGORIES

    histogram = {f"log_n_{c}" for c in OP_CATEGORIES}
    ops = np.array([n in histogram for n in names])
    train = [(u, v) for u, (s, v) in sorted(vectors.items()) if s == "train"]
    near = {}
    for uri, (s, vector) in sorted(vectors.items()):
        if s != split:
            continue
        best = None
        for other, v in train:
            if not np.array_equal(vector[ops], v[ops]):
                continue
            gap = float(np.max(np.abs(vector[~ops] - v[~ops]), initial=0.0))
            if gap <= within and (best is None or gap < best[0]):
                best = (gap, other)
        if best is not None:
            near[uri] = best[1]
    return near
