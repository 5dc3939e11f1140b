"""What a policy sees of an episode: the observation space, and how the profile collected so
far is encoded into it (``ProfilingEnv``'s docstring says what each entry means)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from autoprofiler_env.features import FEATURE_NAMES
from autoprofiler_env.profiler.catalogue import load_catalogue
from autoprofiler_env.profiler.records import Profile

COST_CLIP = 1000.0
"""The largest section cost the observation shows, as a fraction of the episode's budget."""
LOG_RANGE = 30.0
"""The bound of the log-scaled entries: 1e30 FLOPs or cycles would be 30."""

# header metrics whose values are words, not numbers (measured on the H200)
_STRINGS = frozenset({"launch__cluster_scheduling_policy", "launch__func_cache_config",
                      "launch__preferred_cluster_size", "launch__tpc_enabled",
                      "derived__local_spilling_requests_pct",
                      "lts__average_gcomp_output_sector_compression_achieved_rate.ratio"})


def key_metrics(sections: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(section, metric) of every numeric header metric of the sections, each metric once, under
    the first section that shows it: the metrics an observation holds."""
    catalogue = load_catalogue()
    seen, out = set(), []
    for s in sections:
        for _, name in catalogue.section(s).header:
            if name not in seen and not name.startswith("profiler__") and name not in _STRINGS:
                seen.add(name)
                out.append((s, name))
    return tuple(out)


def squash(x: float) -> float:
    """sign(x) log10(1 + |x|): cycles (1e6) and percentages (0-100) on one scale."""
    return math.copysign(math.log10(1.0 + abs(x)), x)


def unsquash(y: float) -> float:
    """The inverse of :func:`squash`: a metric's value in ncu's units from the observation's."""
    return math.copysign(10.0 ** abs(y) - 1.0, y)


@dataclass(frozen=True)
class SectionView:
    """What collecting one section adds to an observation, and what it costs."""

    metric_values: np.ndarray  # squashed values of the key metrics it shows (NaN: not numeric)
    finding_score: float       # its OPT findings' time-weighted estimated speedups, summed (%)
    seconds: float             # replay seconds of collecting it alone
    passes: int                # replay passes per kernel

    def entry(self) -> ViewEntry:
        """What the observation writes when the section is collected: the key metrics are
        grouped by the section that shows them (:func:`key_metrics`), so a section writes one
        block of them."""
        known = np.flatnonzero(~np.isnan(self.metric_values))
        block = slice(int(known[0]), int(known[-1]) + 1) if known.size else slice(0, 0)
        values = self.metric_values[block]
        return ViewEntry(block, np.where(np.isnan(values), 0.0, values).astype(np.float32),
                         (~np.isnan(values)).astype(np.int8), self.finding_score / 100.0)


@dataclass(frozen=True)
class ViewEntry:
    """A section's contribution to the observation (:meth:`SectionView.entry`)."""

    block: slice             # the key metrics it shows lie in this block
    values: np.ndarray       # their squashed values in the block, 0 where unknown
    known: np.ndarray        # 1 where known, in the block
    finding: float           # its findings' entry (percent / 100)


def section_view(profile: Profile, section: str,
                 metrics: tuple[tuple[str, str], ...]) -> SectionView:
    """What the profile of ``section`` alone adds to an observation (``metrics`` as
    :func:`key_metrics` gives them), and its cost."""
    values = np.full(len(metrics), np.nan, dtype=np.float32)
    for i, (owner, name) in enumerate(metrics):
        v = profile.metric(name) if owner == section else None
        if v is not None:
            values[i] = squash(v)
    score = sum(r.weighted for r in profile.findings() if r.finding.kind == "OPT")
    return SectionView(values, float(score), profile.cost.replay_s, profile.cost.passes)


def observation_space(n_sections: int, n_metrics: int) -> spaces.Dict:
    """The environment's observation space for ``n_sections`` actions and ``n_metrics`` key
    metrics."""
    return spaces.Dict({
        "features": spaces.Box(-LOG_RANGE, LOG_RANGE, (len(FEATURE_NAMES),), np.float32),
        "collected": spaces.MultiBinary(n_sections),
        "metrics": spaces.Box(-LOG_RANGE, LOG_RANGE, (n_metrics,), np.float32),
        "metrics_known": spaces.MultiBinary(n_metrics),
        "findings": spaces.Box(0.0, 100.0, (n_sections,), np.float32),
        "budget": spaces.Box(0.0, 1.0, (1,), np.float32),
        "budget_total": spaces.Box(0.0, LOG_RANGE, (2,), np.float32),
        "costs": spaces.Box(0.0, COST_CLIP, (n_sections,), np.float32),
        "action_mask": spaces.MultiBinary(n_sections + 1),
    })


class Observation:
    """One episode's observation, kept in two flat buffers (the float entries, the 0/1
    entries) and updated in place as sections are collected. :meth:`copy`, what ``reset``
    and ``step`` return, copies the two buffers and hands out views of the copies: the caller
    may keep or change them freely.

    The action mask is set from a bit set of the valid sections (bit ``i``: section ``i``),
    through a table of every mask for up to 16 sections."""

    def __init__(self, n_sections: int, n_metrics: int) -> None:
        self.n, self.n_metrics = n_sections, n_metrics
        floats = (("features", len(FEATURE_NAMES)), ("metrics", n_metrics),
                  ("findings", n_sections), ("budget", 1), ("budget_total", 2),
                  ("costs", n_sections))
        ints = (("collected", n_sections), ("metrics_known", n_metrics),
                ("action_mask", n_sections + 1))
        self.floats = np.zeros(sum(k for _, k in floats), dtype=np.float32)
        self.ints = np.zeros(sum(k for _, k in ints), dtype=np.int8)
        self._layout = []   # (key, 0: floats / 1: ints, slice)
        for which, entries in ((0, floats), (1, ints)):
            at = 0
            for key, size in entries:
                self._layout.append((key, which, slice(at, at + size)))
                at += size
        self._at = {key: where for key, _, where in self._layout}
        self.arrays = self._views(self.floats, self.ints)
        a = self.arrays
        self._collected, self._metrics, self._known = (a["collected"], a["metrics"],
                                                       a["metrics_known"])
        self._findings, self._budget, self._mask = a["findings"], a["budget"], a["action_mask"]
        self._sections_mask = self._mask[:-1]
        self._mask[-1] = 1  # STOP is always valid
        self._ints_template = self.ints.copy()  # nothing collected, only STOP valid
        self._ints_template.flags.writeable = False  # shared by every episode's template
        self._table = _mask_table(n_sections)

    def __getstate__(self) -> dict:  # the views are rebuilt over the buffers, not pickled
        return {"n": self.n, "n_metrics": self.n_metrics, "floats": self.floats,
                "ints": self.ints}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["n"], state["n_metrics"])
        self.floats[:] = state["floats"]
        self.ints[:] = state["ints"]

    def template(self, features: np.ndarray, budget_total: np.ndarray,
                 costs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The buffers an episode starts from: its static features, its budget
        (``budget_total``'s two values), the sections' costs as fractions of it, nothing
        collected, the whole budget left (the mask is set by :meth:`set_mask`)."""
        floats = np.zeros_like(self.floats)
        at = self._at
        floats[at["features"]] = features
        floats[at["budget_total"]] = budget_total
        floats[at["costs"]] = costs
        floats[at["budget"]] = 1.0
        return floats, self._ints_template  # start() copies it: one serves every episode

    def start(self, template: tuple[np.ndarray, np.ndarray]) -> None:
        """A new episode, from its :meth:`template`."""
        self.floats[:] = template[0]
        self.ints[:] = template[1]

    def collect(self, index: int, entry: ViewEntry, remaining: float) -> None:
        """Section ``index`` collected (its ``entry``); ``remaining``: the budget left, as a
        fraction of the episode's."""
        block = entry.block
        self._metrics[block] = entry.values
        self._known[block] = entry.known
        self._collected[index] = 1
        self._findings[index] = entry.finding
        self._budget[0] = remaining

    def set_mask(self, bits: int) -> None:
        """The valid sections: bit ``i`` of ``bits`` for section ``i`` (STOP stays valid)."""
        if self._table is not None:
            self._sections_mask[:] = self._table[bits]
        else:
            self._sections_mask[:] = [(bits >> i) & 1 for i in range(self.n)]

    @property
    def mask(self) -> np.ndarray:
        """The valid actions, as booleans (a view of ``action_mask``)."""
        return self._mask.view(bool)

    def copy(self) -> dict:
        return self._views(self.floats.copy(), self.ints.copy())

    def _views(self, floats: np.ndarray, ints: np.ndarray) -> dict:
        """The observation's entries as views of the two buffers."""
        buffers = (floats, ints)
        return {key: buffers[w][s] for key, w, s in self._layout}


_TABLES: dict[int, np.ndarray] = {}


def _mask_table(n: int) -> np.ndarray | None:
    """Row ``bits``: the 0/1 mask of ``n`` sections that bit set names (n <= 16: 1 MiB at
    most, shared by every environment of the process); None for more sections."""
    if n > 16:
        return None
    if n not in _TABLES:
        rows = np.arange(1 << n, dtype=np.int64)[:, None]
        _TABLES[n] = ((rows >> np.arange(n)) & 1).astype(np.int8)
    return _TABLES[n]


def budget_entries(budget: float, full: float | None) -> np.ndarray:
    """``budget_total``: the episode's budget as a fraction of the full set's cost (0 where
    that is unknown) and as ``log10(1 + budget)`` in the budget's unit, each at most
    :data:`LOG_RANGE`, the space's bound (a budget of 1e31 stays inside the space)."""
    return np.array([min(budget / full, LOG_RANGE) if full else 0.0,
                     min(math.log10(1.0 + budget), LOG_RANGE)], dtype=np.float32)
