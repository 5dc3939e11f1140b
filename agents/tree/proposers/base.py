"""What a proposer is told and what it answers.

Each round the learner gives the proposer a :class:`Feedback` (the current tree, its score on
the train split, per problem what it collected, what came of it and what the hindsight oracle
reached, and the sections' costs) and asks for ``n`` edits; the proposer answers a
:class:`Proposal`: the edits it offers (each is then applied, checked and scored by the
learner), what it could not use of its own reply, and what the proposal cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from agents.tree.edits import Edit
from agents.tree.nodes import Tree, Vocabulary


@dataclass(frozen=True)
class ProblemFeedback:
    """One train episode of the current tree."""

    problem: str
    budget: float            # the episode's budget (a fraction of the full set's cost)
    sections: tuple[str, ...]  # what the tree collected, in order
    path: tuple[int, ...]    # the numbers of the nodes its walk visited
    candidate: str           # what the optimizer made of that profile
    speedup: float           # the shipped speedup (1.0: incorrect or eager)
    oracle_sections: tuple[str, ...] | None  # the best affordable set (None: no hindsight)
    oracle_speedup: float | None
    observation: dict = field(repr=False, compare=False)  # the episode's last observation

    @property
    def regret(self) -> float:
        """ln(oracle speedup) - ln(speedup): what the tree loses here (0 without hindsight)."""
        if self.oracle_speedup is None:
            return 0.0
        return float(np.log(self.oracle_speedup) - np.log(self.speedup))


@dataclass(frozen=True)
class Feedback:
    """What the learner knows after scoring the current tree on the train split."""

    tree: Tree
    score: float                     # the objective: exp(mean episode return)
    problems: tuple[ProblemFeedback, ...]
    section_costs: dict              # section -> its median cost, a share of the full set's
    vocabulary: Vocabulary
    metric_names: tuple[str, ...]    # the observation's metrics, in order
    round: int = 0
    history: tuple[str, ...] = ()    # earlier rounds, one line each (edit, decision, delta)


@dataclass
class Proposal:
    """A proposer's answer."""

    edits: list[Edit]
    unusable: list[str] = field(default_factory=list)  # what of the reply was dropped, why
    seconds: float = 0.0
    tokens: dict | None = None   # the endpoint's usage (prompt/completion tokens), if any
    error: str | None = None     # the whole reply was unusable (a timeout, not JSON, ...)
    unreached: bool = False      # no reply at all (connection, HTTP, timeout): asked again
    refused: bool = False        # the server refused the request (an HTTP 4xx but 408 and
    # 429: LLMError.refused): not asked again


@runtime_checkable
class Proposer(Protocol):
    """Offers edits of the current tree.

    A proposer may also have ``settings``, a dict of JSON values: whatever, besides its
    ``name``, changes what it proposes (a seed, a model's sampling and prompt settings; not
    a time-out or a key). The learner writes it in the log's first line and resumes a log
    only with the same (:func:`proposer_settings`)."""

    name: str

    def propose(self, feedback: Feedback, n: int) -> Proposal:
        """Up to ``n`` edits; never raises for what a model replies (that goes in
        :attr:`Proposal.error` / :attr:`Proposal.unusable`)."""
        ...


def proposer_settings(proposer) -> dict:
    """``proposer.settings`` (what changes what it proposes), ``{}`` for a proposer without
    any."""
    return dict(getattr(proposer, "settings", None) or {})
