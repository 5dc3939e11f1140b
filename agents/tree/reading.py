"""The value a :class:`~agents.tree.nodes.Condition` reads from an observation, in one place.

A condition is in its own units (:mod:`agents.tree.nodes` says them: ncu's for a metric,
percent for a finding); the observation holds a metric squashed
(:func:`~autoprofiler_env.envs.observation.squash`), a finding as percent / 100, a feature and
the budget fraction as they are. A value is unknown (None) where its section is not collected,
the metric is not known, or, for the budget, the full set's cost is unknown (0).

- :func:`observed`: the value in the condition's units (what the LLM proposer shows);
- :func:`locate` and :func:`raw`: the value in the observation's units, which the compiled
  policy compares with :func:`threshold` and between which the search proposer puts
  thresholds (:func:`to_condition` gives them in the condition's units).
"""

from __future__ import annotations

import numpy as np

from agents.tree.nodes import Condition, Vocabulary
from autoprofiler_env.envs.observation import squash, unsquash

Where = tuple[str, str | None, int]
"""(the observation's entry holding the value, the entry saying whether it is known or None
where it always is, the index in both)."""


def locate(kind: str, name: str, vocab: Vocabulary, metric_names: tuple[str, ...]) -> Where:
    """Where an observation holds the value ``kind`` ``name`` (``metric_names``: the
    observation's metrics, in order)."""
    if kind == "metric":
        return "metrics", "metrics_known", metric_names.index(name)
    if kind == "finding":
        return "findings", "collected", vocab.sections.index(name)
    if kind == "feature":
        return "features", None, vocab.features.index(name)
    return "budget_total", "budget_total", 0  # 0: the full set's cost unknown


def raw(obs: dict, where: Where) -> float | None:
    """The value at ``where`` in the observation's units (None: unknown)."""
    entry, known, j = where
    if known is not None and not obs[known][j]:
        return None
    return float(obs[entry][j])


def to_condition(kind: str, value: float) -> float:
    """A value of ``kind`` in the observation's units, in the condition's."""
    if kind == "metric":
        return unsquash(value)
    if kind == "finding":
        return value * 100.0
    return value


def threshold(condition: Condition) -> float:
    """``condition.at_least`` in the observation's units, rounded to float32 as the
    observation's values are."""
    if condition.kind == "metric":
        return float(np.float32(squash(condition.at_least)))
    if condition.kind == "finding":
        return float(np.float32(condition.at_least / 100.0))
    return float(np.float32(condition.at_least))


def observed(obs: dict, kind: str, name: str, vocab: Vocabulary,
             metric_names: tuple[str, ...]) -> float | None:
    """The value ``kind`` ``name`` in ``obs``, in the condition's units (None: unknown)."""
    value = raw(obs, locate(kind, name, vocab, metric_names))
    return None if value is None else to_condition(kind, value)
