"""``autoprofiler learn-tree``: learn an AutoProfiler tree on a dataset's train split.

    autoprofiler learn-tree --budget 0.1,0.25 --proposer search --rounds 200 --seed 0 \\
                            --out runs/tree [--dataset FILE] [--optimizer NAME] [--wandb]

For each budget, :func:`agents.tree.learner.learn` runs on the train split with the
validation split choosing the tree; several budgets give one tree whose root branches on
the budget (:func:`agents.tree.nodes.by_budget`). The budgets are learned from the smallest
up, each starting from the better, on train at its budget, of ``--start`` and the tree
learned for the budget below (a larger budget affords what a smaller one's tree collects,
so the ladder never starts a larger budget lower than the one below ended). ``--out`` gets

- ``tree.json`` (the tree, its metadata saying how it was learned and what it scored),
  ``tree.txt`` (its rendering) and ``tree.png`` (its picture);
- ``log-<budget>.jsonl``: every round (proposals, scores, decisions); a run started again
  with the same settings (more ``--rounds`` too) resumes from it; a larger budget's log
  whose start the ladder has moved since (the budget below learned further) is kept as
  ``log-<budget>.superseded-<k>.jsonl`` and that budget learned again;
- ``curve.png``: train and validation score against round;
- ``run.json``: the settings and the command line, to run it again.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from autoprofiler_env.atomic import write_atomic
from autoprofiler_env.errors import AutoProfilerError

PROPOSERS = ("search", "llm")


def make_proposer(kind: str, seed: int, base_url: str | None = None,
                  model: str | None = None, timeout_s: float | None = None,
                  temperature: float | None = None, structured: str | None = "json_schema",
                  fold_system: bool = False, schema_depth: int | None = None):
    """The proposer ``kind`` names (``search``: seeded; ``llm``: an OpenAI-compatible
    endpoint, from the arguments or ``$AUTOPROFILER_LLM_BASE_URL``/``_MODEL``; ``structured``
    the response_format it asks for: ``json_schema`` (OpenAI, vLLM, SGLang, llama.cpp's
    llama-server), ``json_object`` (llama-cpp-python's server) or None)."""
    if kind == "search":
        from agents.tree.proposers.search import SearchProposer

        return SearchProposer(seed)
    if kind == "llm":
        from agents.tree.proposers.llm import LLMProposer
        from autoprofiler_env.optimizers.llm import OpenAIChatBackend

        kwargs = {"seed": seed, "structured": structured, "fold_system": fold_system,
                  "schema_depth": schema_depth} | (
            {"timeout_s": timeout_s} if timeout_s else {}) | (
            {"temperature": temperature} if temperature is not None else {})
        return LLMProposer(OpenAIChatBackend(base_url, model), **kwargs)
    raise AutoProfilerError(f"--proposer must be one of {', '.join(PROPOSERS)}, got {kind!r}")


def start_tree(spec: str, vocab=None):
    """``stop`` (no profile), ``roofline`` or a tree file."""
    from agents.tree.nodes import Stop, Tree, load, roofline_tree

    if spec == "stop":
        return Tree(Stop(), {"name": "no-profile"})
    if spec == "roofline":
        return roofline_tree()
    if Path(spec).is_file():
        return load(spec, vocab)
    raise AutoProfilerError(f"--start must be stop, roofline or a tree file; {spec!r} is none")


def learn_tree(budgets: list[float], proposer, out: Path, rounds: int = 200,
               dataset: str | None = None, optimizer: str | None = None,
               start: str = "stop", proposals: int = 8, margin: float = 0.002,
               patience: int = 0, cost_penalty: float = 0.0, wandb_run=None,
               progress: bool = True, command: list[str] | None = None):
    """Learns one tree per budget, joins them, writes ``out`` (the module docstring says
    what); returns the joined tree."""
    import gymnasium as gym

    import autoprofiler_env  # noqa: F401  (registers the ids)
    from agents.tree.learner import LearnConfig, Scorer, learn
    from agents.tree.nodes import by_budget, vocabulary
    from agents.tree.render import export_text, plot

    kwargs = ({"dataset": dataset} if dataset else {}) | (
        {"optimizer": optimizer} if optimizer else {}) | {"cost_penalty": cost_penalty}
    train_env = gym.make("AutoProfiler-v0", split="train", **kwargs)
    val_env = gym.make("AutoProfiler-v0", split="val", **kwargs)
    base = train_env.unwrapped
    vocab = vocabulary(tuple(base.sections))
    first = start_tree(start, vocab)
    out.mkdir(parents=True, exist_ok=True)
    budgets = sorted(budgets)
    settings = {"budgets": budgets, "proposer": proposer.name, "rounds": rounds,
                "dataset": dataset, "optimizer": base.optimizer,
                "start": start, "starts_from": "the better on train of start and the tree "
                "of the budget below", "proposals": proposals, "margin": margin,
                "patience": patience, "cost_penalty": cost_penalty,
                "dataset_sha256": base.backend.dataset.metadata.get("sha256")}
    trees, results, curves, starts = {}, {}, {}, {}
    below = None
    for budget in budgets:
        config = LearnConfig(budget=budget, rounds=rounds, proposals=proposals, margin=margin,
                             patience=patience)

        def on_round(line, budget=budget):
            if wandb_run is not None:
                wandb_run.log({f"budget={budget:g}/train": math.exp(line["train_objective"]),
                               f"budget={budget:g}/validation":
                                   math.exp(line["validation_objective"]),
                               f"budget={budget:g}/tree_size": line["tree_size"],
                               f"budget={budget:g}/accepted": line["accepted"] is not None,
                               "round": line["round"]})

        begin = first
        if below is not None:
            scorer = Scorer(train_env, budget)
            if scorer(below).objective > scorer(first).objective:
                begin = below
            _supersede_if_moved(out / f"log-{budget:g}.jsonl", begin)
        starts[budget] = "start" if begin is first else "budget below"
        result = learn(train_env, val_env, proposer, config, start=begin,
                       log=out / f"log-{budget:g}.jsonl", progress=progress,
                       on_round=on_round)
        trees[budget], results[budget], curves[budget] = result.tree, result, result.curve
        below = result.tree
    meta = {"learned": settings,
            "scores": {f"{b:g}": {"train": r.train, "validation": r.validation,
                                  "rounds": r.rounds, "accepted": r.accepted,
                                  "nodes": r.tree.size(), "started_from": starts[b]}
                       for b, r in results.items()}}
    tree = by_budget(trees, meta)
    # written once the logs have accepted these settings (a refused resume leaves it as it was)
    write_atomic(out / "run.json", (json.dumps(
        {"settings": settings, "command": command or ["autoprofiler", *sys.argv[1:]]},
        indent=1) + "\n").encode())
    tree.save(out / "tree.json")
    write_atomic(out / "tree.txt", (export_text(tree) + "\n").encode())
    plot(tree, out / "tree.png")
    plot_curves(curves, out / "curve.png", proposer.name)
    if wandb_run is not None:
        import wandb

        wandb_run.log({"curve": wandb.Image(str(out / "curve.png")),
                       "tree": wandb.Image(str(out / "tree.png"))})
        for b, r in results.items():
            wandb_run.summary[f"budget={b:g}/train"] = r.train
            wandb_run.summary[f"budget={b:g}/validation"] = r.validation
    return tree, results


def _supersede_if_moved(log: Path, start) -> None:
    """A budget above the first starts from the ladder's tree: where ``log`` began from
    another one (the budget below was learned further since, with more ``--rounds``), its
    rounds no longer follow from this start. The log is kept beside, renamed, and the
    budget is learned again from ``start``, as a fresh run with these settings would."""
    try:
        with open(log, encoding="utf-8") as f:
            header = json.loads(f.readline())
    except (OSError, ValueError):  # none yet, or a damaged one: the learner says what is wrong
        return
    logged = (header.get("start") or {}).get("root") if isinstance(header, dict) else None
    if logged is None or logged == start.root.to_dict():
        return
    k = 1
    while (kept := log.with_name(f"{log.stem}.superseded-{k}.jsonl")).exists():
        k += 1
    log.rename(kept)
    print(f"learn-tree: {log.name} began from another tree than the budget below now gives "
          f"(it was learned further): kept as {kept.name}, this budget is learned again",
          file=sys.stderr)


def plot_curves(curves: dict, path: Path, title: str) -> Path:
    """Train and validation score against round, one panel per budget."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 3.6), squeeze=False)
    for ax, (budget, curve) in zip(axes[0], sorted(curves.items())):
        if curve:
            rounds, train, val = zip(*curve)
            ax.step(rounds, train, where="post", label="train", color="tab:blue")
            ax.step(rounds, val, where="post", label="validation", color="tab:orange")
        ax.set_title(f"budget {budget:.0%} of the full set")
        ax.set_xlabel("round")
        ax.set_ylabel("geometric-mean speedup")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"learn-tree ({title})")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    write_atomic(path, buffer.getvalue())
    return path
