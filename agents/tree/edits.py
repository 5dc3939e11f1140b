"""The learner's two edits, as small records with a JSON form (what an LLM proposer replies).

- :class:`Rewrite` ``(node, with_)``: node number ``node`` (preorder, as
  :meth:`~agents.tree.nodes.Tree.nodes` and the renderings number them) becomes the subtree
  ``with_``: a Collect of another section, a branch on another value or threshold, a pruned
  subtree (``{"stop": true}``), a Collect inserted above the node, ... ;
- :class:`Split` ``(node, condition, new)``: node ``node`` becomes a branch on ``condition``
  whose ``then`` is the new subtree ``new`` and whose ``else`` is what the node was (so the
  problems for which the condition does not hold are profiled as before).

JSON::

    {"op": "rewrite", "node": 3, "with": {"collect": "Occupancy", "next": {"stop": true}}}
    {"op": "split", "node": 3, "if": {"feature": "log_flops", "at_least": 9.5},
     "then": {"collect": "ComputeWorkloadAnalysis", "next": {"stop": true}}}

:func:`edit_from_dict` reads one, raising :class:`~agents.tree.nodes.TreeFormatError` for a
malformed one; :meth:`Edit.apply` gives the edited tree, checked
(:func:`~agents.tree.nodes.check`), raising the same error for an edit that makes it invalid
(a node that does not exist, a section not collected above a branch that reads it, ...).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Union

from agents.tree.nodes import (
    Branch,
    Condition,
    Node,
    Tree,
    TreeFormatError,
    Vocabulary,
    _short,
    check,
    condition_from_dict,
    node_from_dict,
    replace_node,
)


@dataclass(frozen=True)
class Rewrite:
    """Node ``node`` becomes ``with_``."""

    node: int
    with_: Node

    op = "rewrite"

    def apply(self, tree: Tree, vocab: Vocabulary | None = None) -> Tree:
        root = replace_node(tree.root, self.node, self.with_)
        check(root, vocab)
        return tree.with_root(root)

    def to_dict(self) -> dict:
        return {"op": "rewrite", "node": self.node, "with": self.with_.to_dict()}

    def describe(self) -> str:
        return f"rewrite node {self.node} as {json.dumps(self.with_.to_dict())}"


@dataclass(frozen=True)
class Split:
    """Node ``node`` becomes ``Branch(condition, then=new, otherwise=<the node>)``."""

    node: int
    condition: Condition
    new: Node

    op = "split"

    def apply(self, tree: Tree, vocab: Vocabulary | None = None) -> Tree:
        nodes = tree.nodes()
        if not 0 <= self.node < len(nodes):
            raise TreeFormatError(f"no node {_short(self.node)}: the tree has nodes "
                                  f"0-{len(nodes) - 1}")
        root = replace_node(tree.root, self.node,
                            Branch(self.condition, self.new, nodes[self.node]))
        check(root, vocab)
        return tree.with_root(root)

    def to_dict(self) -> dict:
        return {"op": "split", "node": self.node, "if": self.condition.to_dict(),
                "then": self.new.to_dict()}

    def describe(self) -> str:
        return (f"split node {self.node} on {self.condition.describe()}: then "
                f"{json.dumps(self.new.to_dict())}")


Edit = Union[Rewrite, Split]


def edit_from_dict(data: Any) -> Edit:
    """An edit from its JSON form; :class:`TreeFormatError` saying what is accepted."""
    if not isinstance(data, dict) or data.get("op") not in ("rewrite", "split"):
        raise TreeFormatError('an edit is {"op": "rewrite", "node": N, "with": NODE} or '
                              '{"op": "split", "node": N, "if": CONDITION, "then": NODE}')
    node = data.get("node")
    if isinstance(node, bool) or not isinstance(node, int):
        raise TreeFormatError(f"an edit's node is a node number (an integer), got "
                              f"{_short(node)}")
    if data["op"] == "rewrite":
        if set(data) != {"op", "node", "with"}:
            raise TreeFormatError(f"a rewrite has the keys op, node, with; got {sorted(data)}")
        return Rewrite(node, node_from_dict(data["with"], "with"))
    if set(data) != {"op", "node", "if", "then"}:
        raise TreeFormatError(f"a split has the keys op, node, if, then; got {sorted(data)}")
    return Split(node, condition_from_dict(data["if"]), node_from_dict(data["then"], "then"))
