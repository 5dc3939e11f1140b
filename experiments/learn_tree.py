"""``autoprofiler learn-tree``: learn an AutoProfiler tree on a dataset's train split.

    autoprofiler learn-tree --budget 0.1,0.25 --proposer search --rounds 200 --seed 0 \\
                            --out runs/tree [--dataset FILE] [--optimizer NAME]
                            [--tolerance kernelbench] [--wandb]

For each budget, :func:`agents.tree.learner.learn` runs on the train split with the
validation split choosing the tree; several budgets give one tree whose root branches on
the budget (:func:`agents.tree.nodes.by_budget`). The budgets are learned from the smallest
up, each starting from the better, on train at its budget, of ``--start`` and the tree
learned for the budget below (a larger budget affords what a smaller one's tree collects,
so the ladder never starts a larger budget lower than the one below ended). ``--out`` gets

- ``tree.json`` (the tree, its metadata saying how it was learned and what it scored),
  ``tree.txt`` (its rendering) and ``tree.png`` (its picture);
- ``log-<budget>.jsonl``: every round (proposals, scores, decisions); a run started again
  with the same settings (the proposer's included: ``--seed`` and the ``--llm-*`` settings
  that change its replies) resumes from it, more ``--rounds`` going on after its last round
  and fewer replaying only its first ones; a larger budget's log whose start the ladder has
  moved since (the budget below learned further, or less) is kept as
  ``log-<budget>.superseded-<k>.jsonl`` and that budget learned again;
- ``curve.png``: train and validation score against round;
- ``run.json``: the settings (the proposer's too) and the command line, to run it again.

Interrupted (Ctrl-C, SIGTERM), it stops with :class:`~agents.tree.learner.LearnInterruptedError`
saying that the same command resumes: every round done is in the logs.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from agents.tree.config import LearnConfig
from autoprofiler_env.atomic import one_writer, write_atomic, write_png
from autoprofiler_env.errors import AutoProfilerError
from autoprofiler_env.numeric import budgets_once, is_finite_number

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
    """``stop`` (no profile), ``roofline`` or a tree file (refused while a running command
    writes its folder: a learn-tree run rewrites its tree at each accepted edit)."""
    from agents.tree.nodes import Stop, Tree, load, roofline_tree

    if spec == "stop":
        return Tree(Stop(), {"name": "no-profile"})
    if spec == "roofline":
        return roofline_tree()
    if Path(spec).is_file():
        from experiments.policies import not_being_written

        not_being_written(f"--start {spec}", Path(spec).parent, "the tree")
        return load(spec, vocab)
    raise AutoProfilerError(f"--start must be stop, roofline or a tree file; {spec!r} is none")


def learn_tree(budgets: list[float], proposer, out: Path, rounds: int = LearnConfig.rounds,
               dataset: str | None = None, optimizer: str | None = None,
               tolerance: str | float | None = None, start: str = "stop",
               proposals: int = LearnConfig.proposals, margin: float = LearnConfig.margin,
               patience: int = LearnConfig.patience,
               cost_penalty: float = 0.0, wandb_run=None, progress: bool = True,
               command: list[str] | None = None, llm_missing: str = "raise"):
    """Learns one tree per budget, joins them, writes ``out`` (the module docstring says
    what); returns the joined tree and the results per budget. ``llm_missing``: the
    environment's, for an LLM optimizer's dataset (what a section set it did not record
    gives); ``command``: the command line run.json records (None: not run from one).

    Raises:
        ValueError: a budget given more than once.
        AutoProfilerError: a log of ``out`` holds a run of other settings (the message names
            them), or the smallest budget's log began from the budget ladder of a run of more
            budgets (the message says which to give).
        ProposerUnreachableError: the proposer gave no reply several times in a row, or
            its server refused a request.
        LearnInterruptedError: Ctrl-C or SIGTERM; the same call resumes.
        FolderBusyError: another process is learning into ``out``.
    """
    from agents.tree.learner import LearnInterruptedError
    from autoprofiler_env.profiler.runner import terminate_becomes_exit

    budgets_once(budgets)
    at: dict = {}  # the budget and the log being learned
    try:
        # SIGTERM (a job scheduler, timeout) as Ctrl-C: the message says how to go on; a
        # second run into out is refused (two would interleave the logs)
        with terminate_becomes_exit(lambda: KeyboardInterrupt("SIGTERM")), \
                one_writer(Path(out), "autoprofiler learn-tree"):
            return _learn_tree(budgets, proposer, out, rounds, dataset, optimizer,
                               tolerance, start, proposals, margin, patience, cost_penalty,
                               wandb_run, progress, command, llm_missing, at)
    except KeyboardInterrupt as e:
        if isinstance(e, LearnInterruptedError):
            raise
        budget, log = at.get("budget"), at.get("log")
        if log is None:
            where = "before any round was run"
        else:
            done = _logged_rounds(log)
            where = (f"at budget {budget:g} with {done} round{'s' if done != 1 else ''} of "
                     f"it done, kept in {log}")
        raise LearnInterruptedError(
            f"learn-tree was interrupted{' (SIGTERM)' if str(e) == 'SIGTERM' else ''} "
            f"{where}: run the same command again to resume it") from None


def _learn_tree(budgets, proposer, out, rounds, dataset, optimizer, tolerance, start,
                proposals, margin, patience, cost_penalty, wandb_run, progress, command,
                llm_missing, at: dict):
    """:func:`learn_tree`'s work; ``at`` is kept saying which budget and log it is at."""
    import gymnasium as gym

    import autoprofiler_env  # noqa: F401  (registers the ids)
    from agents.tree.learner import Scorer, learn
    from agents.tree.nodes import by_budget, vocabulary
    from agents.tree.proposers.base import proposer_settings
    from agents.tree.render import export_text, plot

    kwargs = ({"dataset": dataset} if dataset else {}) | (
        {"optimizer": optimizer} if optimizer else {}) | (
        {"tolerance": tolerance} if tolerance is not None else {}) | (
        {"llm_missing": llm_missing} if llm_missing != "raise" else {}) | {
        "cost_penalty": cost_penalty}
    train_env = gym.make("AutoProfiler-v0", split="train", **kwargs)
    val_env = gym.make("AutoProfiler-v0", split="val", **kwargs)
    base = train_env.unwrapped
    vocab = vocabulary(tuple(base.sections))
    first = start_tree(start, vocab)
    budgets = sorted(budgets)
    refuse_another_run(out, budgets)
    out.mkdir(parents=True, exist_ok=True)
    settings = {"budgets": budgets, "proposer": proposer.name, "rounds": rounds,
                "dataset": dataset, "optimizer": base.optimizer, "tolerance": tolerance,
                "start": start, "starts_from": "the better on train of start and the tree "
                "of the budget below", "proposals": proposals, "margin": margin,
                "patience": patience, "cost_penalty": cost_penalty,
                **({"llm_missing": llm_missing} if llm_missing != "raise" else {}),
                "dataset_sha256": base.backend.dataset.metadata.get("sha256"),
                "proposer_settings": proposer_settings(proposer),
                "proposer_endpoint": getattr(proposer, "endpoint", None)}
    trees, results, curves, starts = {}, {}, {}, {}
    below, below_budget = None, None
    if wandb_run is not None:
        wandb_run.config.update({"settings": settings}, allow_val_change=True)
    for budget in budgets:
        config = LearnConfig(budget=budget, rounds=rounds, proposals=proposals, margin=margin,
                             patience=patience)
        key = f"budget={budget:g}"
        if wandb_run is not None:  # each budget's curves against its own rounds (a dot in
            # a name given to define_metric is a nesting, unless escaped)
            metric = key.replace(".", "\\.")
            wandb_run.define_metric(f"{metric}/round")
            wandb_run.define_metric(f"{metric}/*", step_metric=f"{metric}/round")

        def on_round(line, key=key):
            if wandb_run is not None:
                wandb_run.log({f"{key}/train": math.exp(line["train_objective"]),
                               f"{key}/validation": math.exp(line["validation_objective"]),
                               f"{key}/tree_size": line["tree_size"],
                               f"{key}/accepted": int(line["accepted"] is not None),
                               f"{key}/round": line["round"]})

        begin, log = first, out / f"log-{budget:g}.jsonl"
        at.update(budget=budget, log=log)
        if below is not None:
            scorer = Scorer(train_env, budget)
            if scorer(below).objective > scorer(first).objective:
                begin = below
            _supersede_if_moved(log, begin)
        else:
            _refuse_another_ladder(log, begin, budget, start)
        starts[budget] = "start" if begin is first else "budget below"
        result = learn(train_env, val_env, proposer, config, start=begin, log=log,
                       progress=progress, on_round=on_round,
                       started_from=f"--start {start}" if begin is first
                       else f"{LADDER} {below_budget:g} (the budget ladder)")
        trees[budget], results[budget], curves[budget] = result.tree, result, result.curve
        below, below_budget = result.tree, budget
    meta = {"learned": settings,
            "scores": {f"{b:g}": {"train": r.train, "validation": r.validation,
                                  "rounds": r.rounds, "accepted": r.accepted,
                                  "nodes": r.tree.size(), "started_from": starts[b]}
                       for b, r in results.items()}}
    tree = by_budget(trees, meta)
    # written once the logs have accepted these settings (a refused resume leaves it as it was)
    write_atomic(out / "run.json", (json.dumps(
        {"settings": settings, "command": command},
        indent=1) + "\n").encode())
    tree.save(out / "tree.json")
    write_atomic(out / "tree.txt", (export_text(tree) + "\n").encode())
    plot(tree, out / "tree.png")
    plot_curves(curves, out / "curve.png", proposer.name,
                kept={b: r.best_round for b, r in results.items()})
    if wandb_run is not None:
        import wandb

        wandb_run.log({"curve": wandb.Image(str(out / "curve.png")),
                       "tree": wandb.Image(str(out / "tree.png"))})
        for b, r in results.items():  # the tree kept (the best on validation), not the last
            wandb_run.summary.update({f"budget={b:g}/train": r.train,
                                      f"budget={b:g}/validation": r.validation,
                                      f"budget={b:g}/tree_size": r.tree.size(),
                                      f"budget={b:g}/kept_round": r.best_round,
                                      f"budget={b:g}/accepted": r.accepted})
        if not wandb_run.disabled:  # the tree itself, as train's model is
            artifact = wandb.Artifact(f"tree-{wandb_run.id}", type="model",
                                      metadata={"settings": settings, "scores": meta["scores"]})
            for name in ("tree.json", "tree.txt", "run.json"):
                artifact.add_file(str(out / name))
            wandb_run.log_artifact(artifact)
    return tree, results


LADDER = "the tree learned for budget"
"""How a log's first line says that it began from the budget ladder (``started_from``)."""


def _header(log: Path) -> dict | None:
    """The first line of a log (None: none yet, or a damaged one, which the learner says)."""
    try:
        with open(log, encoding="utf-8") as f:
            header = json.loads(f.readline())
    except (OSError, ValueError):
        return None
    return header if isinstance(header, dict) else None


def _logged_rounds(log: Path) -> int:
    """The whole round lines of a log."""
    try:
        with open(log, encoding="utf-8") as f:
            return sum(1 for text in f if text.startswith('{"kind": "round"')
                       and text.endswith("\n"))
    except OSError:
        return 0


def goes_on(out: Path, budgets: list[float] | None = None, rounds: int | None = None) -> bool:
    """Whether a learn-tree run in ``out`` would go on from logged rounds: a log of ``budgets``
    (None: of any) holds some, and (``rounds`` given) one of them fewer than ``rounds`` or a
    budget has none yet (what ``--wandb`` resumes its wandb run for)."""
    logs = ([out / f"log-{b:g}.jsonl" for b in budgets] if budgets is not None else
            [out / f"log-{b:g}.jsonl" for b in _logged_budgets(out)])
    done = [_logged_rounds(log) for log in logs]
    return any(done) and (rounds is None or any(n < rounds for n in done))


def _logged_budgets(out: Path) -> list[float]:
    """The budgets with a log in ``out`` (their superseded logs aside)."""
    budgets = []
    for path in out.glob("log-*.jsonl"):
        try:
            budgets.append(float(path.stem.removeprefix("log-")))
        except ValueError:  # log-0.25.superseded-1
            continue
    return sorted(budgets)


def refuse_another_run(out: Path, budgets: list[float]) -> None:
    """Where ``out`` holds another command's run (``autoprofiler train``'s ``run.json``) or a
    finished tree of budgets this run would drop from ``tree.json``, an error saying what to
    give, before anything is written (a resume, or a run of more budgets, goes on)."""
    path = out / "run.json"
    if not path.is_file():
        return
    try:
        made = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        made = None
    settings = made.get("settings") if isinstance(made, dict) else None
    had = settings.get("budgets") if isinstance(settings, dict) else None
    if not isinstance(had, list) or not all(is_finite_number(b) for b in had):
        raise AutoProfilerError(f"{out} holds another command's run ({path} is not a "
                                "learn-tree run's record): give learn-tree another --out")
    dropped = sorted(set(had) - set(budgets))
    if dropped:
        listed = ",".join(f"{b:g}" for b in sorted(set(had) | set(budgets)))
        raise AutoProfilerError(
            f"{out} holds a tree learned for --budget {','.join(f'{b:g}' for b in had)}; "
            f"this run's --budget {','.join(f'{b:g}' for b in budgets)} would replace it "
            f"without budget {', '.join(f'{b:g}' for b in dropped)}: run with --budget "
            f"{listed} to keep and extend it, or give another --out")


def _refuse_another_ladder(log: Path, start, budget: float, spec: str) -> None:
    """The smallest budget of a run starts from ``--start``: where its log began from the
    tree of a smaller budget instead (the ladder of a run of more budgets, e.g. ``--budget
    0.25`` after ``--budget 0.1,0.25``), an error saying so and what to give. Any other
    difference the learner names."""
    header = _header(log)
    logged = (header.get("start") or {}).get("root") if header else None
    if logged is None or logged == start.root.to_dict():
        return
    came = header.get("started_from")
    budgets = _logged_budgets(log.parent)
    if not (isinstance(came, str) and came.startswith(LADDER)) and not (
            came is None and any(b < budget for b in budgets)):  # before started_from
        return
    listed = ",".join(f"{b:g}" for b in budgets)
    came = came or (f"another tree than --start {spec} (a smaller budget's, where its run "
                    "had several)")  # a log written before it said
    raise AutoProfilerError(
        f"{log} began from {came}, in a run of several budgets (the logs here are of "
        f"--budget {listed}); this run starts budget {budget:g}, its smallest, from --start "
        f"{spec}: run with --budget {listed} (and that run's other settings: "
        f"{log.parent / 'run.json'} has its command) to resume it, or give another --out")


def _supersede_if_moved(log: Path, start) -> None:
    """A budget above the first starts from the ladder's tree: where ``log`` began from
    another one (the budget below was learned further since, with more ``--rounds``), its
    rounds no longer follow from this start. The log is kept beside, renamed, and the
    budget is learned again from ``start``, as a fresh run with these settings would."""
    header = _header(log)  # none yet, or a damaged one: the learner says what is wrong
    logged = (header.get("start") or {}).get("root") if header else None
    if logged is None or logged == start.root.to_dict():
        return
    k = 1
    while (kept := log.with_name(f"{log.stem}.superseded-{k}.jsonl")).exists():
        k += 1
    log.rename(kept)
    print(f"learn-tree: {log.name} began from another tree than the budget below now gives "
          f"(it was learned further): kept as {kept.name}, this budget is learned again",
          file=sys.stderr)


def plot_curves(curves: dict, path: Path, title: str, kept: dict | None = None) -> Path:
    """Train and validation score against round, one panel per budget; ``kept``: per budget,
    the round whose tree is kept (the best validation score), marked."""

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # two panels a row, one y axis: a step of a few % looks its size in every panel
    columns = min(len(curves), 2)
    rows = -(-len(curves) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.5 * columns, 3.4 * rows),
                             squeeze=False, sharey=True)
    for ax in axes.flat[len(curves):]:
        ax.set_visible(False)
    for ax, (budget, curve) in zip(axes.flat, sorted(curves.items())):
        if curve:
            rounds, train, val = zip(*curve)
            ax.step(rounds, train, where="post", label="train", color="tab:blue")
            ax.step(rounds, val, where="post", label="validation", color="tab:orange")
        if kept and budget in kept:
            ax.axvline(kept[budget], color="black", linestyle=":", linewidth=1.5,
                       label=f"kept: round {kept[budget]} (best validation)")
        ax.set_title(f"budget {budget:.0%} of the full set")
        ax.set_xlabel("round")
        ax.set_ylabel("geometric-mean speedup")
        ax.yaxis.set_tick_params(labelleft=True)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"learn-tree, proposer {title}: the tree's score by round")
    fig.tight_layout()
    return write_png(fig, path)
