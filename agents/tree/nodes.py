"""The AutoProfiler tree: its nodes, its file format and the checks a tree must pass.

A tree is made of three kinds of node (small frozen records, so equal trees compare and hash
equal):

- :class:`Collect` ``(section, next)``: collect one Nsight Compute section, then go on to
  ``next``;
- :class:`Branch` ``(condition, then, otherwise)``: go to ``then`` when the
  :class:`Condition` holds, to ``otherwise`` when it does not or its value is unknown;
- :class:`Stop`: stop profiling (the optimizer then sees what was collected).

A :class:`Condition` compares one value with a threshold (``value >= at_least``). The value
is one of

- ``metric``: a header metric of a collected section, in ncu's own units (a percentage, a
  count, bytes), e.g. ``sm__throughput.avg.pct_of_peak_sustained_elapsed >= 60``;
- ``finding``: the sum of a collected section's OPT findings' estimated speedups, in percent
  (each weighted by its kernel's share of the time, as ncu's rule output gives them);
- ``feature``: a static feature of the problem (free: known before any profiling), in the
  observation's units (``log_flops`` is log10(1 + FLOPs));
- ``budget``: the episode's budget as a fraction of the full set's cost (``fraction``), so
  that one tree can serve several budgets.

A ``metric`` or ``finding`` condition may only read a section collected on the way to it
(a :class:`Collect` of that section above it): :func:`check` refuses any other tree. Where that
Collect was passed over because its section did not fit the budget, the value is unknown and
the branch takes ``otherwise``.

The file is JSON (:data:`FORMAT`, version :data:`VERSION`), a person can read and diff it::

    {"format": "autoprofiler-tree", "version": 1, "meta": {...},
     "root": {"collect": "SpeedOfLight",
              "next": {"if": {"metric": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                              "at_least": 60.0},
                       "then": {"collect": "ComputeWorkloadAnalysis", "next": {"stop": true}},
                       "else": {"stop": true}}}}

:func:`load` and :func:`from_dict` check everything and raise :class:`TreeFormatError`
saying where (the node's path, e.g. ``root.next.then``) and what is accepted.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any, Iterator, Union

from autoprofiler_env.atomic import write_atomic
from autoprofiler_env.errors import AutoProfilerError
from autoprofiler_env.numeric import is_finite_number
from autoprofiler_env.profiler.metrics import MEM_PCT

FORMAT = "autoprofiler-tree"
VERSION = 1
KINDS = ("metric", "finding", "feature", "budget")
"""What a condition may read (the module docstring says each one's units)."""
BUDGET_VALUES = ("fraction",)
"""The budget a ``budget`` condition reads: ``fraction``, of the full set's cost."""
MAX_DEPTH = 64
MAX_NODES = 512


class TreeFormatError(AutoProfilerError):
    """A tree file or an edit that is not a valid tree: it says where and what is accepted."""


@dataclass(frozen=True)
class Condition:
    """``value >= at_least``, the value read as ``kind`` says (``name``: the metric, the
    section of the findings, the feature, or ``fraction`` for the budget)."""

    kind: str
    name: str
    at_least: float

    def describe(self) -> str:
        if self.kind == "finding":
            return f"finding({self.name}) >= {self.at_least:g}%"
        if self.kind == "budget":
            return f"budget >= {self.at_least:g} of the full set"
        return f"{self.name} >= {self.at_least:g}"

    def to_dict(self) -> dict:
        return {self.kind: self.name, "at_least": self.at_least}


@dataclass(frozen=True)
class Stop:
    """Stop profiling."""

    def to_dict(self) -> dict:
        return {"stop": True}


@dataclass(frozen=True)
class Collect:
    """Collect ``section``, then go on to ``next``. Where the section is already collected or
    does not fit the remaining budget, the node is passed over (the walk goes on to
    ``next``)."""

    section: str
    next: Node = field(default_factory=Stop)

    def to_dict(self) -> dict:
        return {"collect": self.section, "next": self.next.to_dict()}


@dataclass(frozen=True)
class Branch:
    """``then`` when ``condition`` holds, else ``otherwise`` (also when its value is
    unknown)."""

    condition: Condition
    then: Node
    otherwise: Node

    def to_dict(self) -> dict:
        return {"if": self.condition.to_dict(), "then": self.then.to_dict(),
                "else": self.otherwise.to_dict()}


Node = Union[Collect, Branch, Stop]


@dataclass(frozen=True)
class Tree:
    """A profiling tree: its root, and free-form metadata (how it was learned) that the
    policy never reads."""

    root: Node
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "meta": self.meta,
                "root": self.root.to_dict()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1) + "\n"

    def save(self, path: str | Path) -> None:
        """Writes the file atomically (a reader sees the old file or the new one)."""
        write_atomic(Path(path), self.to_json().encode("utf-8"))

    def with_root(self, root: Node) -> Tree:
        return replace(self, root=root)

    def nodes(self) -> list[Node]:
        """The nodes in preorder: a node's number (what edits and renderings name) is its
        index here."""
        return [node for _, node in walk(self.root)]

    def sections(self) -> set[str]:
        return {n.section for n in self.nodes() if isinstance(n, Collect)}

    def size(self) -> int:
        return len(self.nodes())


# -- structure ------------------------------------------------------------------------------

def walk(node: Node, path: str = "root") -> Iterator[tuple[str, Node]]:
    """(path, node) of every node under ``node``, in preorder (``root``, ``root.next``,
    ``root.then``, ``root.else``, ...)."""
    yield path, node
    if isinstance(node, Collect):
        yield from walk(node.next, f"{path}.next")
    elif isinstance(node, Branch):
        yield from walk(node.then, f"{path}.then")
        yield from walk(node.otherwise, f"{path}.else")


def replace_node(root: Node, index: int, new: Node) -> Node:
    """``root`` with its node number ``index`` (preorder) replaced by ``new``."""
    counter = [0]

    def rebuild(node: Node) -> Node:
        i = counter[0]
        counter[0] += 1
        if i == index:
            # skip the numbers of the replaced subtree
            counter[0] += sum(1 for _ in walk(node)) - 1
            return new
        if isinstance(node, Collect):
            return Collect(node.section, rebuild(node.next))
        if isinstance(node, Branch):
            then = rebuild(node.then)
            return Branch(node.condition, then, rebuild(node.otherwise))
        return node

    n = sum(1 for _ in walk(root))
    if not 0 <= index < n:
        raise TreeFormatError(f"no node {_short(index)}: the tree has nodes 0-{n - 1}")
    return rebuild(root)


# -- the vocabulary a tree may use ----------------------------------------------------------

@dataclass(frozen=True)
class Vocabulary:
    """What conditions and Collects may name: the action sections, the key metrics (each
    under the section that shows it) and the static features."""

    sections: tuple[str, ...]
    metric_owner: dict = field(hash=False)  # metric -> the section that shows it
    features: tuple[str, ...]

    def names(self, kind: str) -> tuple[str, ...]:
        if kind == "metric":
            return tuple(self.metric_owner)
        if kind == "finding":
            return self.sections
        if kind == "feature":
            return self.features
        return BUDGET_VALUES

    def source(self, condition: Condition) -> str | None:
        """The section a condition reads (None: free, a feature or the budget)."""
        if condition.kind == "metric":
            return self.metric_owner[condition.name]
        if condition.kind == "finding":
            return condition.name
        return None


@cache
def vocabulary(sections: tuple[str, ...] | None = None) -> Vocabulary:
    """The vocabulary of an environment over ``sections`` (None: the 15 action sections)."""
    from autoprofiler_env.envs.observation import key_metrics
    from autoprofiler_env.features import FEATURE_NAMES
    from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS

    sections = tuple(ACTION_SECTIONS if sections is None else sections)
    owner = {name: section for section, name in key_metrics(sections)}
    return Vocabulary(sections, owner, tuple(FEATURE_NAMES))


def _close(word: str, options) -> str:
    import difflib

    near = difflib.get_close_matches(word, list(options), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(near)}?)" if near else ""


# -- checking -------------------------------------------------------------------------------

def check(root: Node, vocab: Vocabulary | None = None) -> None:
    """Raises :class:`TreeFormatError` unless every Collect names a section of ``vocab`` not
    already collected on its way, every condition a known value with a finite threshold, every
    ``metric``/``finding`` condition a section collected on its way, and the tree is at most
    :data:`MAX_DEPTH` deep and :data:`MAX_NODES` large."""
    vocab = vocab or vocabulary()
    count = 0

    def visit(node: Node, path: str, above: frozenset, depth: int) -> None:
        nonlocal count
        count += 1
        if count > MAX_NODES:
            raise TreeFormatError(f"the tree has more than {MAX_NODES} nodes")
        if depth > MAX_DEPTH:
            raise TreeFormatError(f"{path}: the tree is deeper than {MAX_DEPTH}")
        if isinstance(node, Stop):
            return
        if isinstance(node, Collect):
            if node.section not in vocab.sections:
                raise TreeFormatError(f"{path}: collect {node.section!r} is not a section of "
                                      f"this environment{_close(node.section, vocab.sections)};"
                                      f" the sections are {', '.join(vocab.sections)}")
            if node.section in above:
                raise TreeFormatError(f"{path}: {node.section} is already collected above "
                                      "this node (a second Collect of it does nothing)")
            visit(node.next, f"{path}.next", above | {node.section}, depth + 1)
            return
        if isinstance(node, Branch):
            c = node.condition
            if c.kind not in KINDS:
                raise TreeFormatError(f"{path}: a condition reads one of {', '.join(KINDS)}, "
                                      f"not {c.kind!r}")
            names = vocab.names(c.kind)
            if c.name not in names:
                shown = ", ".join(names) if len(names) <= 30 else f"{len(names)} names"
                raise TreeFormatError(f"{path}: {c.kind} {c.name!r} is not known"
                                      f"{_close(c.name, names)}; the {c.kind}s are {shown}")
            if not is_finite_number(c.at_least):
                raise TreeFormatError(f"{path}: at_least must be a finite number, got "
                                      f"{c.at_least!r}")
            source = vocab.source(c)
            if source is not None and source not in above:
                raise TreeFormatError(
                    f"{path}: the condition {c.describe()!r} reads {source}, which is not "
                    f"collected above this node (put a Collect of {source} above it)")
            visit(node.then, f"{path}.then", above, depth + 1)
            visit(node.otherwise, f"{path}.else", above, depth + 1)
            return
        raise TreeFormatError(f"{path}: not a node: {node!r}")

    visit(root, "root", frozenset(), 0)


# -- the file -------------------------------------------------------------------------------

def node_from_dict(data: Any, path: str = "root", depth: int = 0) -> Node:
    """A node from its JSON form (checked for shape only; :func:`check` checks names)."""
    if depth > MAX_DEPTH:
        raise TreeFormatError(f"{path}: the tree is deeper than {MAX_DEPTH}")
    if not isinstance(data, dict):
        raise TreeFormatError(f"{path}: a node is an object ({{\"collect\": ...}}, "
                              f"{{\"if\": ...}} or {{\"stop\": true}}), got {_short(data)}")
    keys = set(data)
    if keys == {"stop"}:
        if data["stop"] is not True:
            raise TreeFormatError(f"{path}: a stop node is {{\"stop\": true}}")
        return Stop()
    if keys == {"collect", "next"}:
        if not isinstance(data["collect"], str):
            raise TreeFormatError(f"{path}: collect names a section, got "
                                  f"{_short(data['collect'])}")
        return Collect(data["collect"], node_from_dict(data["next"], f"{path}.next",
                                                       depth + 1))
    if keys == {"if", "then", "else"}:
        return Branch(condition_from_dict(data["if"], f"{path}.if"),
                      node_from_dict(data["then"], f"{path}.then", depth + 1),
                      node_from_dict(data["else"], f"{path}.else", depth + 1))
    raise TreeFormatError(f"{path}: a node has the keys collect+next, if+then+else or stop; "
                          f"got {sorted(keys)}")


def condition_from_dict(data: Any, path: str = "if") -> Condition:
    if not isinstance(data, dict) or "at_least" not in data or len(data) != 2:
        raise TreeFormatError(f"{path}: a condition is {{\"<kind>\": NAME, \"at_least\": X}} "
                              f"with kind one of {', '.join(KINDS)}; got {_short(data)}")
    (kind,) = set(data) - {"at_least"}
    name, at_least = data[kind], data["at_least"]
    if kind not in KINDS:
        raise TreeFormatError(f"{path}: a condition reads one of {', '.join(KINDS)}, not "
                              f"{kind!r}")
    if not isinstance(name, str):
        raise TreeFormatError(f"{path}: {kind} names a value, got {_short(name)}")
    if not is_finite_number(at_least):
        raise TreeFormatError(f"{path}: at_least must be a finite number, got "
                              f"{_short(at_least)}")
    return Condition(kind, name, float(at_least))


def from_dict(data: Any, vocab: Vocabulary | None = None, where: str = "the tree") -> Tree:
    """A checked tree from the file's JSON object."""
    try:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise TreeFormatError(f"not an AutoProfiler tree (\"format\": {FORMAT!r} missing)")
        if data.get("version") != VERSION:
            raise TreeFormatError(f"version {data.get('version')!r} is not readable here (this "
                                  f"version reads {VERSION})")
        unknown = set(data) - {"format", "version", "meta", "root"}
        if unknown:
            raise TreeFormatError(f"unknown keys {sorted(unknown)}")
        meta = data.get("meta", {})
        if not isinstance(meta, dict):
            raise TreeFormatError("meta must be an object")
        if "root" not in data:
            raise TreeFormatError("no root")
        try:
            root = node_from_dict(data["root"])
            check(root, vocab)
        except RecursionError:
            raise TreeFormatError(_too_deep()) from None
    except TreeFormatError as e:
        raise TreeFormatError(f"{where}: {e}") from None
    return Tree(root, meta)


def _too_deep() -> str:
    """What a tree file nested past Python's recursion is told."""
    return (f"nested deeper than Python's recursion limit ({sys.getrecursionlimit()}): not a "
            "tree this project writes")


def load(path: str | Path, vocab: Vocabulary | None = None) -> Tree:
    """The tree in the file ``path``, checked."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TreeFormatError(f"{path}: cannot read the tree file ({e})") from e
    try:
        data = json.loads(text)
    except ValueError as e:
        raise TreeFormatError(f"{path}: not JSON ({e})") from e
    except RecursionError:
        raise TreeFormatError(f"{path}: {_too_deep()}") from None
    return from_dict(data, vocab, where=str(path))


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# -- trees built from others ----------------------------------------------------------------

ROOFLINE_MEMORY_BOUND = 60.0
"""The memory throughput (% of peak) from which :func:`roofline_tree` calls a kernel
memory-bound."""


def roofline_tree() -> Tree:
    """The roofline baseline's shape as a tree, a starting point for the learner: SpeedOfLight,
    then the memory branch (MemoryWorkloadAnalysis and its chart) when the memory throughput
    is at least :data:`ROOFLINE_MEMORY_BOUND` % of peak, else the compute branch
    (ComputeWorkloadAnalysis, WarpStateStats). (The baseline compares the memory throughput
    with the SM throughput; a condition compares one value with a threshold.)"""
    memory = Collect("MemoryWorkloadAnalysis", Collect("MemoryWorkloadAnalysis_Chart"))
    compute = Collect("ComputeWorkloadAnalysis", Collect("WarpStateStats"))
    return Tree(Collect("SpeedOfLight", Branch(
        Condition("metric", MEM_PCT, ROOFLINE_MEMORY_BOUND), memory, compute)),
        {"name": "roofline"})


def by_budget(trees: dict[float, Tree], meta: dict | None = None) -> Tree:
    """One tree serving several budgets: a chain of ``budget`` branches at the root, each
    budget's tree under it (a budget between two learned ones gets the tree of the larger one
    from halfway between them on, in log scale; neighbours with equal trees share one)."""
    if not trees:
        raise TreeFormatError("by_budget needs at least one tree")
    budgets = sorted(trees)
    node: Node = trees[budgets[0]].root
    for low, high in zip(budgets, budgets[1:]):
        if trees[high].root == trees[low].root:  # one tree serves both: no branch
            continue
        middle = math.sqrt(low * high)
        cut = next((c for d in range(3, 17) if low < (c := float(f"{middle:.{d}g}")) < high),
                   middle)
        node = Branch(Condition("budget", "fraction", cut), trees[high].root, node)
    return Tree(node, meta or {})
