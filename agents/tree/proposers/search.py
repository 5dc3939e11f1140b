"""The seeded search proposer: random REWRITE and SPLIT edits drawn where the tree loses.

Deterministic for a seed: round ``r`` draws from ``numpy.random.default_rng([seed, r])``, so
a resumed run proposes what the uninterrupted one would have. Each edit is one of

- ``split`` (SPLIT): a node reached by at least two train problems becomes a branch on a
  value known there (a static feature, a metric or the findings of a section collected above
  it, the budget when the episodes have several) with a threshold halfway between two of the
  values the problems reaching it have; the new side collects one more section (or stops);
- ``retune`` (REWRITE): a branch gets another threshold, or another value and threshold,
  drawn the same way;
- ``insert`` (REWRITE): a Collect of a section is put above a node;
- ``swap`` (REWRITE): a Collect collects another section;
- ``remove`` (REWRITE): a Collect is replaced by what follows it, a branch by one of its
  sides, or a subtree by a stop.

Nodes are drawn with weights 1 + the regret (ln oracle - ln tree speedup) of the train
problems that reach them, so edits go where the tree loses to the oracle. Every edit offered
is valid (checked against the tree); ``n`` are offered unless the tree admits fewer.
"""

from __future__ import annotations

import time

import numpy as np

from agents.tree.edits import Edit, Rewrite, Split
from agents.tree.nodes import Branch, Collect, Condition, Node, Stop, TreeFormatError, walk
from agents.tree.proposers.base import Feedback, Proposal
from agents.tree.reading import locate, raw, to_condition

MOVES = ("split", "retune", "insert", "swap", "remove")
WEIGHTS = (0.35, 0.15, 0.2, 0.15, 0.15)


def _round(x: float, low: float, high: float) -> float:
    """A short number strictly between ``low`` and ``high`` (near ``x``), for a readable
    threshold."""
    for digits in range(2, 9):
        r = float(f"{x:.{digits}g}")
        if low < r < high:
            return r
    return x


class SearchProposer:
    """Random valid edits, seeded (:mod:`agents.tree.proposers.search`)."""

    def __init__(self, seed: int = 0, attempts: int = 50) -> None:
        self.seed = seed
        self.attempts = attempts
        self.name = f"search:{seed}"

    @property
    def settings(self) -> dict:
        """What changes the edits it draws (the learner resumes a log only with the same)."""
        return {"seed": self.seed, "attempts": self.attempts}

    def propose(self, feedback: Feedback, n: int) -> Proposal:
        started = time.perf_counter()
        rng = np.random.default_rng([self.seed, feedback.round])
        context = _Context(feedback)
        edits: list[Edit] = []
        seen = set()
        for _ in range(self.attempts * n):
            if len(edits) >= n:
                break
            move = MOVES[rng.choice(len(MOVES), p=WEIGHTS)]
            edit = getattr(context, move)(rng)
            if edit is None or edit in seen:
                continue
            try:
                edit.apply(feedback.tree, feedback.vocabulary)
            except TreeFormatError:
                continue
            seen.add(edit)
            edits.append(edit)
        return Proposal(edits, seconds=time.perf_counter() - started)


class _Context:
    """The current tree's nodes, which problems reach each, and what is known at each."""

    def __init__(self, feedback: Feedback) -> None:
        self.feedback = feedback
        self.vocab = feedback.vocabulary
        self.sections = self.vocab.sections
        self.nodes: list[Node] = []
        self.above: list[frozenset] = []  # the sections collected above each node
        self._index(feedback.tree.root, frozenset())
        reach: list[list] = [[] for _ in self.nodes]
        for p in feedback.problems:
            for i in p.path:
                reach[i].append(p)
        self.reach = reach
        self.weights = np.array([1.0 + sum(max(p.regret, 0.0) for p in r) for r in reach])
        self.budgets = sorted({p.budget for p in feedback.problems})
        self.metrics = frozenset(feedback.metric_names)  # those the observation holds

    def _index(self, node: Node, above: frozenset) -> None:
        self.nodes.append(node)
        self.above.append(above)
        if isinstance(node, Collect):
            self._index(node.next, above | {node.section})
        elif isinstance(node, Branch):
            self._index(node.then, above)
            self._index(node.otherwise, above)

    def _node(self, rng, where=lambda i: True) -> int | None:
        choices = [i for i in range(len(self.nodes)) if where(i)]
        if not choices:
            return None
        w = self.weights[choices]
        return int(choices[rng.choice(len(choices), p=w / w.sum())])

    def _section(self, rng, exclude) -> str | None:
        options = [s for s in self.sections if s not in exclude]
        return options[rng.integers(len(options))] if options else None

    def _values(self, i: int) -> list[tuple[str, str]]:
        """The (kind, name) of every value known at node ``i``."""
        out = [("feature", f) for f in self.vocab.features]
        if len(self.budgets) > 1:
            out.append(("budget", "fraction"))
        for s in (s for s in self.sections if s in self.above[i]):  # in the sections' order:
            out.append(("finding", s))  # a set's would follow PYTHONHASHSEED, not the seed
            out += [("metric", m) for m, owner in self.vocab.metric_owner.items()
                    if owner == s and m in self.metrics]
        return out

    def _condition(self, rng, i: int) -> Condition | None:
        """A condition on a value known at node ``i``, whose threshold splits the problems
        reaching it in two non-empty groups."""
        options = self._values(i)
        for _ in range(10):
            kind, name = options[rng.integers(len(options))]
            where = locate(kind, name, self.vocab, self.feedback.metric_names)
            values = sorted({v for p in self.reach[i]
                             if (v := raw(p.observation, where)) is not None})
            if len(values) < 2:
                continue
            k = int(rng.integers(len(values) - 1))
            low, high = values[k], values[k + 1]  # halfway, in the observation's units
            at_least = _round(to_condition(kind, (low + high) / 2), to_condition(kind, low),
                              to_condition(kind, high))
            return Condition(kind, name, at_least)
        return None

    def _new_side(self, rng, i: int) -> Node:
        if rng.random() < 0.2:
            return Stop()
        section = self._section(rng, self.above[i])
        if section is None:
            return Stop()
        return Collect(section, Stop())

    # -- the moves --------------------------------------------------------------------------

    def split(self, rng) -> Edit | None:
        i = self._node(rng, lambda j: len(self.reach[j]) >= 2)
        if i is None:
            return None
        condition = self._condition(rng, i)
        return Split(i, condition, self._new_side(rng, i)) if condition else None

    def retune(self, rng) -> Edit | None:
        i = self._node(rng, lambda j: isinstance(self.nodes[j], Branch)
                       and len(self.reach[j]) >= 2)
        if i is None:
            return None
        node = self.nodes[i]
        condition = self._condition(rng, i)
        if condition is None or condition == node.condition:
            return None
        return Rewrite(i, Branch(condition, node.then, node.otherwise))

    def insert(self, rng) -> Edit | None:
        i = self._node(rng)
        section = self._section(rng, self.above[i] | _below(self.nodes[i]))
        return Rewrite(i, Collect(section, self.nodes[i])) if section else None

    def swap(self, rng) -> Edit | None:
        i = self._node(rng, lambda j: isinstance(self.nodes[j], Collect))
        if i is None:
            return None
        node = self.nodes[i]
        section = self._section(rng, self.above[i] | _below(node))
        return Rewrite(i, Collect(section, node.next)) if section else None

    def remove(self, rng) -> Edit | None:
        i = self._node(rng, lambda j: not isinstance(self.nodes[j], Stop))
        if i is None:
            return None
        node = self.nodes[i]
        if isinstance(node, Collect):
            return Rewrite(i, node.next) if rng.random() < 0.7 else Rewrite(i, Stop())
        side = node.then if rng.random() < 0.5 else node.otherwise
        return Rewrite(i, side) if rng.random() < 0.8 else Rewrite(i, Stop())


def _below(node: Node) -> set[str]:
    return {n.section for _, n in walk(node) if isinstance(n, Collect)}
