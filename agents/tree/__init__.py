"""The AutoProfiler tree: a deterministic profiling tree and its learner.

- :mod:`agents.tree.nodes`: Collect / Branch / Stop, the versioned JSON file, its checks;
- :mod:`agents.tree.policy`: :class:`TreePolicy`, the tree as a policy (SB3's ``predict``);
- :mod:`agents.tree.reading`: the value a condition reads from an observation (one reader
  for the policy and both proposers);
- :mod:`agents.tree.render`: :func:`export_text` and :func:`plot` (PNG);
- :mod:`agents.tree.edits`: the learner's REWRITE and SPLIT edits;
- :mod:`agents.tree.proposers`: who offers edits (``search``: seeded; ``llm``: a model);
- :mod:`agents.tree.learner`: :func:`learn`, edits kept only when the measured score improves.

docs/tree.md documents the file format and the learner's algorithm.

>>> env = gym.make("AutoProfiler-v0", split="test")
>>> policy = TreePolicy(shipped_tree("reference"), env)
>>> rollout(env, policy, budget=0.25)
"""

from __future__ import annotations

import re
from pathlib import Path

from agents.tree.edits import Rewrite, Split, edit_from_dict
from agents.tree.nodes import (
    Branch,
    Collect,
    Condition,
    Stop,
    Tree,
    TreeFormatError,
    by_budget,
    check,
    from_dict,
    load,
    roofline_tree,
    vocabulary,
)
from agents.tree.policy import TreePolicy
from agents.tree.render import export_text, plot

DATA = Path(__file__).parent / "data"
"""The trees the project ships, one per optimizer (:func:`shipped_tree`)."""


def shipped_tree(optimizer: str) -> Path | None:
    """The shipped tree learned for ``optimizer`` on the shipped dataset (None: none is):
    ``data/<optimizer>.json``, characters other than letters, digits, ``.``, ``_`` and ``-``
    as ``-`` (``llm:org/model`` is ``llm-org-model.json``)."""
    path = DATA / f"{re.sub(r'[^A-Za-z0-9._-]', '-', optimizer)}.json"
    return path if path.is_file() else None


__all__ = ["Branch", "Collect", "Condition", "DATA", "Rewrite", "Split", "Stop", "Tree",
           "TreeFormatError", "TreePolicy", "by_budget", "check", "edit_from_dict",
           "export_text", "from_dict", "load", "plot", "roofline_tree", "shipped_tree",
           "vocabulary"]
