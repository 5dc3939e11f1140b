"""The tree learner's settings (:class:`LearnConfig`), in a module of their own: importing it
is cheap (the learner imports the replay, torch with it), so that ``autoprofiler``'s parser
states the learner's defaults from here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LearnConfig:
    """The learner's settings (all of them go into the log's first line)."""

    budget: float = 0.25       # the episodes' budget, a fraction of the full set's cost
    rounds: int = 200
    proposals: int = 8         # edits asked of the proposer per round
    margin: float = 0.002      # mean log score an edit must add to be kept
    patience: int = 0          # rounds without a better validation tree before stopping
    history: int = 8           # earlier rounds shown to the proposer
