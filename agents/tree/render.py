"""A tree for people: :func:`export_text` (like scikit-learn's ``export_text``, with the node
numbers edits use) and :func:`plot` (a PNG).

>>> print(export_text(tree))
[0] collect SpeedOfLight
[1] if sm__throughput.avg.pct_of_peak_sustained_elapsed >= 60
    [2] collect ComputeWorkloadAnalysis
    [3] stop
[1] else
    [4] stop
"""

from __future__ import annotations

import math
from pathlib import Path

from agents.tree.nodes import Branch, Collect, Node, Stop, Tree


def export_text(tree: Tree | Node, counts: dict[int, int] | None = None,
                start: int = 0) -> str:
    """One line per node, numbered in preorder, a branch's two sides indented; ``counts``
    (node number -> how many episodes reached it) is shown beside each node when given;
    ``start``: the root's number (a subtree's, to number it as its whole tree does)."""
    root = tree.root if isinstance(tree, Tree) else tree
    lines: list[str] = []
    number = start

    def tag(i: int) -> str:
        return f"  ({counts.get(i, 0)} problems)" if counts is not None else ""

    def visit(node: Node, indent: str) -> None:
        nonlocal number
        i = number
        number += 1
        if isinstance(node, Collect):
            lines.append(f"{indent}[{i}] collect {node.section}{tag(i)}")
            visit(node.next, indent)
        elif isinstance(node, Branch):
            lines.append(f"{indent}[{i}] if {node.condition.describe()}{tag(i)}")
            visit(node.then, indent + "    ")
            lines.append(f"{indent}[{i}] else")
            visit(node.otherwise, indent + "    ")
        elif isinstance(node, Stop):
            lines.append(f"{indent}[{i}] stop{tag(i)}")

    visit(root, "")
    return "\n".join(lines)


COUNTS = ("log_n_", "log_max_input_rank")
"""The features that count (operators, inputs, dimensions): whole numbers in plain terms."""


def plain(kind: str, name: str, value: float, threshold: bool = False) -> float | None:
    """A ``log_`` feature's value or threshold in plain numbers (the observation's log10(1 +
    x), autoprofiler_env/features.py, undone: ``log_input_bytes >= 7.405`` is
    ``input_bytes >= 2.54e+07``); a count's a whole number (``log_n_conv_transpose >= 0.15``
    is ``n_conv_transpose >= 1``: a ``threshold`` rounded up, a value to the nearest, the
    observation being float32); None for any other value."""
    if kind != "feature" or not name.startswith("log_"):
        return None
    x = 10.0 ** value - 1.0
    if name.startswith(COUNTS):
        return float(math.ceil(x - 1e-3) if threshold else round(x))
    return x


def plot(tree: Tree | Node, path: str | Path, counts: dict[int, int] | None = None,
         title: str | None = None) -> Path:
    """The tree as a picture (PNG): a box per node (collect: blue, branch: orange, stop:
    grey), top to bottom, a branch's ``then`` side on the left; ``counts`` as in
    :func:`export_text`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from autoprofiler_env.atomic import write_png

    root = tree.root if isinstance(tree, Tree) else tree
    boxes: list[tuple[float, int, str, str]] = []  # x, depth, text, colour
    edges: list[tuple[int, int, str]] = []
    leaves = [0]

    def place(node: Node, depth: int) -> int:
        index = len(boxes)
        boxes.append((0.0, depth, "", ""))
        note = f"\n{counts.get(index, 0)} problems" if counts is not None else ""
        if isinstance(node, Collect):
            child = place(node.next, depth + 1)
            x = boxes[child][0]
            boxes[index] = (x, depth, f"[{index}] collect\n{node.section}{note}", "#cfe2f3")
            edges.append((index, child, ""))
        elif isinstance(node, Branch):
            then = place(node.then, depth + 1)
            other = place(node.otherwise, depth + 1)
            x = (boxes[then][0] + boxes[other][0]) / 2
            text = node.condition.describe().replace(" >= ", "\n>= ")
            boxes[index] = (x, depth, f"[{index}] if {text}{note}", "#fce5cd")
            edges.extend([(index, then, "yes"), (index, other, "no")])
        else:
            boxes[index] = (float(leaves[0]), depth, f"[{index}] stop{note}", "#eeeeee")
            leaves[0] += 1
        return index

    place(root, 0)
    width = max(leaves[0], 1)
    depth = max(d for _, d, _, _ in boxes) + 1
    fig, ax = plt.subplots(figsize=(max(4.0, 3.2 * width), max(2.5, 1.3 * depth)))
    for a, b, label in edges:
        (xa, da, _, _), (xb, db, _, _) = boxes[a], boxes[b]
        ax.plot([xa, xb], [-da, -db], color="#888888", lw=1, zorder=1)
        if label:
            ax.text((xa + xb) / 2, -(da + db) / 2, label, fontsize=8, color="#555555",
                    ha="center", va="center", backgroundcolor="white", zorder=2)
    for x, d, text, colour in boxes:
        ax.text(x, -d, text, ha="center", va="center", fontsize=8, zorder=3,
                bbox={"boxstyle": "round,pad=0.4", "fc": colour, "ec": "#666666"})
    ax.set_xlim(-0.7, width - 0.3)
    ax.set_ylim(-depth + 0.4, 0.6)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return write_png(fig, path)
