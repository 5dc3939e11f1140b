"""The tree learner: REWRITE and SPLIT edits, each kept only when the measured score improves.

    result = learn(train_env, val_env, SearchProposer(seed=0), LearnConfig(budget=0.25),
                   log="runs/tree/log.jsonl")
    result.tree.save("tree.json")

Each round:

1. the current tree runs every problem of the train environment once at the budget
   (:func:`~autoprofiler_env.evaluation.rollout`, the one evaluation), giving the proposer its
   :class:`~agents.tree.proposers.base.Feedback`: per problem what the tree collected, the
   nodes it walked, what came of it and what the hindsight oracle reached (where the backend
   has hindsight: the replay);
2. the proposer offers up to ``proposals`` edits; each is applied and checked, and the edited
   tree is scored on the train split the same way. The score is the mean episode return (the
   log of the shipped speedup, minus the environment's cost term where ``cost_penalty`` is
   set), reported as its exponential: the geometric-mean speedup;
3. the best edited tree is kept when it beats the current one by more than ``margin`` (in
   mean log score: 0.002 is 0.2% of geometric mean), or when it is smaller and scores at
   least as well (a simpler tree that loses nothing);
4. a kept tree is scored on the validation environment. The tree with the best validation
   score so far (the train score breaks ties, then the earlier) is the one returned, and the
   run stops after ``patience`` rounds without a better one (0: it runs every round).

Every round is one JSON line of the log: the proposals (each edit's JSON, its train score or
why it was unusable), the decision, the scores, the proposer's time and tokens. The log is
the run's state: a run started again with the same log and settings (more rounds may be
asked) resumes after its last round (the accepted edits are replayed; the search proposer draws round ``r`` from its seed
and ``r``, so the resumed run goes on as the uninterrupted one would have).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from agents.tree.edits import edit_from_dict
from agents.tree.nodes import Stop, Tree, TreeFormatError, from_dict, vocabulary
from agents.tree.policy import TreePolicy
from agents.tree.proposers.base import Feedback, ProblemFeedback, Proposer
from autoprofiler_env.envs.backends import Hindsight
from autoprofiler_env.errors import AutoProfilerError
from autoprofiler_env.evaluation import rollout
from autoprofiler_env.oracle import best_affordable
from autoprofiler_env.scoring import shipped_speedup


@dataclass(frozen=True)
class LearnConfig:
    """The learner's settings (all of them go into the log's first line)."""

    budget: float = 0.25       # the episodes' budget, a fraction of the full set's cost
    rounds: int = 200
    proposals: int = 8         # edits asked of the proposer per round
    margin: float = 0.002      # mean log score an edit must add to be kept
    patience: int = 0          # rounds without a better validation tree before stopping
    history: int = 8           # earlier rounds shown to the proposer


@dataclass
class Evaluation:
    """A tree's episodes on one environment."""

    objective: float                  # mean episode return
    records: list
    observations: list = field(repr=False)

    @property
    def score(self) -> float:
        """exp(mean return): the geometric-mean shipped speedup when no cost term is set."""
        return math.exp(self.objective)


@dataclass
class LearnResult:
    tree: Tree                # the tree with the best validation score
    train: float              # its scores (exp of mean return)
    validation: float
    rounds: int               # rounds run in all (the resumed ones included)
    accepted: int             # edits kept
    curve: list = field(default_factory=list)  # (round, train, validation) after each round
    failed: dict = field(default_factory=dict)  # rounds whose whole reply was unusable, by
    # the error's kind (no_json, schema, ...; the resumed ones included)


UNREACHED_LIMIT = 3
"""Rounds in a row without a reply from the proposer (connection, HTTP, timeout) after which
learning stops with :class:`ProposerUnreachableError`; such rounds are asked again, never
logged as done, so that the same command goes on once the endpoint answers."""


class ProposerUnreachableError(AutoProfilerError):
    """The proposer's endpoint gave no reply several rounds in a row."""


class Scorer:
    """Scores trees on one environment at one budget, remembering each tree's result."""

    def __init__(self, env, budget: float) -> None:
        base = env.unwrapped
        if base.reward_kind != "log_speedup":
            raise AutoProfilerError("the learner sums log rewards: build its environments "
                                    "with reward='log_speedup' (the default)")
        self.env, self.budget = env, budget
        self.vocab = vocabulary(tuple(base.sections))
        self._memo: dict = {}
        self.episodes = 0

    def __call__(self, tree: Tree) -> Evaluation:
        key = tree.root
        if key not in self._memo:
            observations = []
            records = rollout(self.env, TreePolicy(tree, self.env), budget=self.budget,
                              observe=lambda record, obs: observations.append(obs))
            self.episodes += len(records)
            objective = statistics.fmean(r.reward for r in records)
            self._memo[key] = Evaluation(objective, records, observations)
        return self._memo[key]


def _oracle(env, budget: float) -> dict:
    """Per problem: (the oracle's sections, its shipped speedup, each section's cost as a share
    of the full set's); the oracle is None where the backend has no hindsight."""
    base = env.unwrapped
    out = {}
    for uri in base.problems:
        env.reset(options={"problem": uri, "budget": budget})
        costs, total = base.section_costs, base.episode_budget
        full = total / budget if base.budget_is_fraction else None
        shares = {s: (float(c) / full if full else math.nan)
                  for s, c in zip(base.sections, costs)}
        if not isinstance(base.backend, Hindsight):  # the live backend: no oracle
            out[uri] = (None, None, shares)
            continue
        best = best_affordable(base.backend, uri, base.sections, costs, total)
        sections = tuple(base.sections[i] for i in best)
        outcome = base.backend.finish(uri, sections)
        out[uri] = (sections, shipped_speedup(outcome.correct, outcome.speedup), shares)
    return out


def feedback(tree: Tree, evaluation: Evaluation, scorer: Scorer, oracle: dict,
             round_: int, history: tuple[str, ...]) -> Feedback:
    """What the proposer is told about ``tree`` (scored as ``evaluation``)."""
    policy = TreePolicy(tree, scorer.env)
    problems = []
    for record, obs in zip(evaluation.records, evaluation.observations):
        sections, speedup, _ = oracle[record.problem]
        problems.append(ProblemFeedback(
            record.problem, scorer.budget, tuple(record.sections), tuple(policy.path(obs)),
            record.candidate, shipped_speedup(record.correct, record.speedup), sections,
            speedup, obs))
    shares = [v[2] for v in oracle.values()]
    costs = {s: float(np.nanmedian([d[s] for d in shares])) if shares else math.nan
             for s in scorer.vocab.sections}
    return Feedback(tree, evaluation.score, tuple(problems), costs, scorer.vocab,
                    tuple(scorer.env.unwrapped.metric_names), round_, history)


def learn(train_env, val_env, proposer: Proposer, config: LearnConfig = LearnConfig(),
          start: Tree | None = None, log: str | Path | None = None,
          progress: bool = True, on_round=None) -> LearnResult:
    """Learns a tree (the module docstring says how); ``log``: the JSON-lines log, resumed
    when it holds rounds of a run with the same settings; ``on_round(line)`` is called with
    each round's log line (wandb logging, a test's probe)."""
    from tqdm import tqdm

    start = start or Tree(Stop())
    train, val = Scorer(train_env, config.budget), Scorer(val_env, config.budget)
    base = train_env.unwrapped
    dataset = getattr(base.backend, "dataset", None)
    header = {"kind": "start", "config": asdict(config), "proposer": proposer.name,
              "start": start.to_dict(), "train_problems": list(base.problems),
              "validation_problems": list(val_env.unwrapped.problems),
              "env": {"optimizer": base.optimizer, "cost_penalty": base.cost_penalty,
                      "dataset_sha256": dataset.metadata.get("sha256") if dataset else None}}
    lines = _resume(log, header, train.vocab)
    # the resumed rounds: replay their kept edits, and find the best tree among them
    current = start
    best = (val(start).objective, train(start).objective, start)
    best_round, accepted = 0, 0
    for line in lines:
        if line.get("accepted") is not None:
            current = edit_from_dict(line["proposals"][line["accepted"]]["edit"]).apply(
                current, train.vocab)
            accepted += 1
            if (line["validation_objective"], line["train_objective"]) > best[:2]:
                best = (line["validation_objective"], line["train_objective"], current)
                best_round = line["round"]
    curve = [(line["round"], math.exp(line["train_objective"]),
              math.exp(line["validation_objective"])) for line in lines]
    history = [line["summary"] for line in lines][-config.history:] if config.history else []
    failed = Counter(line["error"].split(":")[0] for line in lines if line.get("error"))
    oracle = _oracle(train_env, config.budget)
    now, now_val = train(current), val(current)
    first = len(lines) + 1
    out = open(log, "a", encoding="utf-8") if log else None
    if out and not lines:
        out.write(json.dumps(header) + "\n")
        out.flush()
    bar = tqdm(desc=f"learn-tree {proposer.name}", unit="round", disable=not progress,
               initial=first - 1, total=config.rounds)
    unreached: list[str] = []  # the proposer's last rounds without a reply, in a row
    round_ = first
    try:
        while round_ <= config.rounds:
            if config.patience and round_ - best_round > config.patience:
                break
            started = time.perf_counter()
            fb = feedback(current, now, train, oracle, round_, tuple(history))
            proposal = proposer.propose(fb, config.proposals)
            if proposal.unreached:  # no reply: the round is asked again, not logged as done
                unreached.append(proposal.error or "no reply")
                if len(unreached) >= UNREACHED_LIMIT:
                    raise ProposerUnreachableError(
                        f"the proposer {proposer.name} gave no reply {len(unreached)} times "
                        f"in a row (the last: {unreached[-1]}): {round_ - 1} rounds are "
                        f"done and logged; fix the endpoint and run the same command again "
                        f"to go on from round {round_}")
                continue  # the same round, asked again
            unreached.clear()
            rows, candidates = [], []
            for k, edit in enumerate(proposal.edits):
                try:
                    tree = edit.apply(current, train.vocab)
                except TreeFormatError as e:
                    rows.append({"edit": edit.to_dict(), "train_objective": None,
                                 "error": str(e)})
                    continue
                objective = train(tree).objective
                rows.append({"edit": edit.to_dict(), "train_objective": objective,
                             "error": None})
                candidates.append((objective, -tree.size(), -k, tree))
            choice, before = None, now.objective
            if candidates:
                objective, neg_size, neg_k, tree = max(candidates, key=lambda c: c[:3])
                if objective > before + config.margin or (
                        -neg_size < current.size() and objective >= before - 1e-12):
                    choice = -neg_k
                    current, now, now_val = tree, train(tree), val(tree)
                    accepted += 1
                    if (now_val.objective, now.objective) > best[:2]:
                        best, best_round = (now_val.objective, now.objective, tree), round_
            summary = f"round {round_}: " + (
                f"kept {proposal.edits[choice].describe()} ({now.objective - before:+.4f})"
                if choice is not None else f"none of {len(rows)} edits kept")
            history = (history + [summary])[-config.history:] if config.history else []
            line = {"kind": "round", "round": round_, "proposals": rows,
                    "unusable": proposal.unusable, "error": proposal.error,
                    "accepted": choice, "train_objective": now.objective,
                    "validation_objective": now_val.objective,
                    "best_validation_objective": best[0], "best_round": best_round,
                    "tree_size": current.size(), "proposer_seconds": proposal.seconds,
                    "tokens": proposal.tokens, "seconds": time.perf_counter() - started,
                    "summary": summary}
            if out:
                out.write(json.dumps(line) + "\n")
                out.flush()
            curve.append((round_, now.score, now_val.score))
            if proposal.error is not None:
                failed[proposal.error.split(":")[0]] += 1
            bar.update(1)
            bar.set_postfix(train=f"{now.score:.3f}", val=f"{now_val.score:.3f}",
                            nodes=current.size())
            if on_round is not None:
                on_round(line)
            round_ += 1
    finally:
        bar.close()
        if out:
            out.close()
    return LearnResult(best[2], math.exp(best[1]), math.exp(best[0]),
                       curve[-1][0] if curve else 0, accepted, curve, dict(failed))


def _resume(log, header: dict, vocab) -> list[dict]:
    """The round lines of an earlier run of the same settings in ``log`` (none for a new
    log); an error for a log of other settings."""
    if not log or not Path(log).exists() or Path(log).stat().st_size == 0:
        return []
    lines, dropped = [], False
    with open(log, encoding="utf-8") as f:
        raw = f.read().split("\n")
    for i, text in enumerate(raw):
        if not text.strip():
            continue
        try:
            lines.append(json.loads(text))
        except ValueError:
            if i >= len(raw) - 2:  # a last line cut by an interruption
                dropped = True
                break
            raise AutoProfilerError(f"{log}: line {i + 1} is not JSON: the log is corrupted "
                                    "(start a new run with another --out)") from None
    if not lines or lines[0].get("kind") != "start":
        raise AutoProfilerError(f"{log}: not a learn-tree log (its first line is not the "
                                "run's settings)")
    first = lines[0]

    def settings(h: dict) -> dict:  # more rounds may be asked of a resumed run
        return h | {"config": {k: v for k, v in (h.get("config") or {}).items()
                               if k != "rounds"}}

    keys = [k for k in header if settings(first).get(k) != settings(header)[k]]
    if keys:
        raise AutoProfilerError(f"{log} holds a run with other settings ({', '.join(keys)} "
                                "differ): give the same settings to resume it, or another "
                                "--out")
    rounds = [line for line in lines[1:] if line.get("kind") == "round"]
    for k, line in enumerate(rounds, 1):
        if line.get("round") != k:
            raise AutoProfilerError(f"{log}: round {k} is missing: the log is corrupted")
    if dropped:  # rewrite the file without the cut line, so appends stay whole lines
        Path(log).write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    from_dict(header["start"], vocab)
    return rounds
