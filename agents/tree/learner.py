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
3. the best edited tree that beats the current one by more than ``margin`` (in mean log
   score: 0.002 is 0.2% of geometric mean) is kept; where none does, the best of those that
   are smaller and score at least as well (a simpler tree that loses nothing), so that an
   edit scoring a little better, but below the margin, does not hide such a prune;
4. a kept tree is scored on the validation environment. The tree with the best validation
   score so far (the train score breaks ties, then the smaller, then the earlier) is the one
   returned, and the run stops after ``patience`` rounds without a better one (0: it runs
   every round).

Every round is one JSON line of the log: the proposals (each edit's JSON, its train score or
why it was unusable), the decision, the scores, the proposer's time and tokens. The log is
the run's state: a run started again with the same log and settings (the proposer's
``settings`` included: its seed, a model's sampling and prompt settings) resumes after its
last round (the accepted edits are replayed; the search proposer draws round ``r`` from its
seed and ``r``, so the resumed run goes on as the uninterrupted one would have). More rounds
may be asked; fewer replay only the first ``rounds`` of the log, which gives the tree a run
of that many rounds gives (the log keeps the others, for a later run asking for them).

A round whose reply gave no edit to score (no reply at all is asked again, see
:data:`RETRY_WAITS`) counts among :attr:`LearnResult.failed`, by kind
(:func:`unusable_kind`).
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
import zlib
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from agents.tree.config import LearnConfig
from agents.tree.edits import edit_from_dict
from agents.tree.nodes import Stop, Tree, TreeFormatError, from_dict, vocabulary
from agents.tree.policy import TreePolicy
from agents.tree.proposers.base import Feedback, ProblemFeedback, Proposer, proposer_settings
from autoprofiler_env.envs.backends import Hindsight
from autoprofiler_env.dataset.format import recorded_as_now
from autoprofiler_env.errors import AutoProfilerError, warn
from autoprofiler_env.evaluation import rollout
from autoprofiler_env.numeric import is_finite_number
from autoprofiler_env.oracle import best_affordable
from autoprofiler_env.scoring import shipped_speedup


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
    failed: dict = field(default_factory=dict)  # rounds whose reply gave no edit to score,
    # by kind (unusable_kind: no_json, schema, empty, invalid, ...; the resumed ones included)
    best_round: int = 0       # the round that made ``tree`` (0: the start)


RETRY_WAITS = (2.0, 4.0, 8.0)
"""Seconds waited before asking a round again after the proposer gave no reply (connection
refused, an HTTP error other than a refusal, a time-out): one wait per retry, so a round is
asked ``len(RETRY_WAITS) + 1`` times (14 s of waiting: a server restarting) before learning
stops with :class:`ProposerUnreachableError`. A request the server refused (an HTTP 4xx
other than 408 and 429: :attr:`~autoprofiler_env.errors.LLMError.refused`) stops it at
once. Such rounds are never logged as done, so that the same command goes on once the
endpoint answers."""


class ProposerUnreachableError(AutoProfilerError):
    """The proposer's endpoint gave no reply several times in a row, or refused a request."""


class LearnInterruptedError(AutoProfilerError, KeyboardInterrupt):
    """Learning was interrupted (Ctrl-C, SIGTERM); the rounds done are in the log and the
    same command resumes. A :class:`KeyboardInterrupt` too, for code that stops on one."""


def unusable_kind(line: dict) -> str | None:
    """Why a round's reply (its log line) gave no edit to score: the kind of its error
    (``no_json``, ``schema``, ``empty``, ...), ``invalid`` (it offered edits and none gave a
    valid tree that changes something: an unknown node or section, a bad op, a metric read
    above its section) or ``no_edits`` (it offered none); None where an edit was scored."""
    if line.get("error"):
        return str(line["error"]).split(":")[0]
    proposals = line.get("proposals") or []
    if any(p.get("error") is None for p in proposals):
        return None
    return "invalid" if proposals or line.get("unusable") else "no_edits"


class Scorer:
    """Scores trees on one environment at one budget, remembering each tree's result.

    Where outcomes are drawn (an LLM optimizer's recorded replies, several per problem and
    section set), each problem's episode is played with the environment's generator seeded
    from (:data:`SEED`, the problem), whatever the episodes before it drew: two trees
    collecting the same sets on a problem get the same reply there (common random numbers),
    and a run resumed, or run again, scores each tree as it did. A rule optimizer's replay
    draws nothing: its episodes are played as they come."""

    SEED = 0

    def __init__(self, env, budget: float) -> None:
        base = env.unwrapped
        if base.reward_kind != "log_speedup":
            raise AutoProfilerError("the learner sums log rewards: build its environments "
                                    "with reward='log_speedup' (the default)")
        if base.incorrect_reward is not None:  # the one score: autoprofiler_env.scoring
            raise AutoProfilerError("the learner scores the program one would ship (eager "
                                    "where the candidate is incorrect): build its "
                                    "environments without incorrect_reward, a training "
                                    "shaping")
        self.env, self.budget = env, budget
        self.vocab = vocabulary(tuple(base.sections))
        self._memo: dict = {}
        self.episodes = 0

    def __call__(self, tree: Tree) -> Evaluation:
        key = tree.root
        if key not in self._memo:
            observations, records = [], []
            policy = TreePolicy(tree, self.env)
            base = self.env.unwrapped

            def observe(record, obs):
                observations.append(obs)

            if str(base.optimizer).startswith("llm:"):  # replies drawn: seeded per problem
                for uri in base.problems:
                    records += rollout(self.env, policy, problems=[uri], budget=self.budget,
                                       seed=zlib.crc32(f"{self.SEED} {uri}".encode()),
                                       observe=observe)
            else:  # nothing drawn (a seeded reset per episode cost a fifth of the time)
                records = rollout(self.env, policy, budget=self.budget, observe=observe)
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
          progress: bool = True, on_round=None, *, started_from: str | None = None,
          retry_waits: tuple[float, ...] = RETRY_WAITS, sleep=None) -> LearnResult:
    """Learns a tree (the module docstring says how); ``log``: the JSON-lines log, resumed
    when it holds rounds of a run with the same settings (of a run of more rounds, only the
    first ``config.rounds`` are replayed); ``on_round(line)`` is called with each round's log
    line (wandb logging, a test's probe). ``started_from``: where ``start`` came from, in
    words, written in the log's first line (not compared on resuming: ``start`` is) and said
    when a resume is refused for another start. ``retry_waits``: the seconds waited before
    each retry of a round without a reply (:data:`RETRY_WAITS`), through ``sleep``
    (``time.sleep``; a test's fake).

    Raises:
        AutoProfilerError: ``log`` holds a run of other settings (the message names each one,
            as in the log and now), or is corrupted.
        ProposerUnreachableError: no reply ``len(retry_waits) + 1`` times in a row, or a
            request the server refused (:attr:`Proposal.refused`: an HTTP 4xx such as a bad
            key or model), at once: waiting would not change its answer.
    """
    from tqdm import tqdm

    sleep = sleep or time.sleep
    start = start or Tree(Stop())
    train, val = Scorer(train_env, config.budget), Scorer(val_env, config.budget)
    base = train_env.unwrapped
    dataset = getattr(base.backend, "dataset", None)
    header = {"kind": "start", "config": asdict(config), "proposer": proposer.name,
              "proposer_settings": proposer_settings(proposer),
              "choice": CHOICE,
              "start": start.to_dict(), "train_problems": list(base.problems),
              "validation_problems": list(val_env.unwrapped.problems),
              "env": {"optimizer": base.optimizer, "cost_penalty": base.cost_penalty,
                      "dataset_sha256": dataset.metadata.get("sha256") if dataset else None}}
    tolerance = _logged_tolerance(getattr(base.backend, "tolerance", None))
    if tolerance is not None:
        header["env"]["tolerance"] = tolerance
    if started_from is not None:
        header["started_from"] = started_from
    # a run of fewer rounds than the log holds is the run of its first rounds
    lines = _resume(log, header, train.vocab, dataset.metadata if dataset else None
                    )[:config.rounds]
    # the resumed rounds: replay their kept edits, and find the best tree among them
    current = start
    best = (val(start).objective, train(start).objective, -start.size(), start)
    best_round, accepted = 0, 0
    for line in lines:
        if line.get("accepted") is not None:
            current = _replay(line, current, train.vocab, log)
            accepted += 1
            mark = (line["validation_objective"], line["train_objective"], -current.size())
            if mark > best[:3]:
                best = (*mark, current)
                best_round = line["round"]
    curve = [(line["round"], math.exp(line["train_objective"]),
              math.exp(line["validation_objective"])) for line in lines]
    history = [line["summary"] for line in lines][-config.history:] if config.history else []
    failed = Counter(kind for line in lines if (kind := unusable_kind(line)) is not None)
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
                if proposal.refused or len(unreached) > len(retry_waits):
                    done = round_ - 1
                    where = f" in {Path(log).name}" if log else ""
                    logged = (f"{done} round{'s' if done != 1 else ''} of budget "
                              f"{config.budget:g} {'are' if done != 1 else 'is'} done and "
                              f"logged{where}")
                    if proposal.refused:
                        raise ProposerUnreachableError(
                            f"the server of the proposer {proposer.name} refused its request "
                            f"at budget {config.budget:g} ({unreached[-1]}), which asking "
                            f"again would not change: {logged}; with the key or the server "
                            f"fixed, run the same command again to go on from round "
                            f"{round_} of budget {config.budget:g}; with another model or "
                            "--llm-structured, give another --out (a log goes on only with "
                            "the settings it was started with)")
                    raise ProposerUnreachableError(
                        f"the proposer {proposer.name} gave no reply {len(unreached)} times "
                        f"in a row at budget {config.budget:g} (the last: {unreached[-1]}): "
                        f"{logged}; fix the endpoint and run the same command again "
                        f"to go on from round {round_} of budget {config.budget:g}")
                wait = retry_waits[len(unreached) - 1]
                if progress:
                    bar.write(f"learn-tree: no reply from {proposer.name} ({unreached[-1]}): "
                              f"round {round_} at budget {config.budget:g} is asked again in "
                              f"{wait:g} s", file=sys.stderr)
                sleep(wait)
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
            # the best edit that adds more than the margin; where none does, the best of
            # those that make the tree smaller and lose nothing (a better-scoring edit below
            # the margin does not hide such a prune)
            keep = ([c for c in candidates if c[0] > before + config.margin]
                    or [c for c in candidates if -c[1] < current.size()
                        and c[0] >= before - 1e-12])
            if keep:
                _, _, neg_k, tree = max(keep, key=lambda c: c[:3])
                choice = -neg_k
                current, now, now_val = tree, train(tree), val(tree)
                accepted += 1
                if (mark := (now_val.objective, now.objective, -tree.size())) > best[:3]:
                    best, best_round = (*mark, tree), round_
            offered = len(rows) + len(proposal.unusable)  # what the reply offered
            bad = len(proposal.unusable) + sum(1 for row in rows if row["error"] is not None)
            if choice is not None:
                outcome = f"kept {proposal.edits[choice].describe()} " \
                          f"({now.objective - before:+.4f})"
            elif proposal.error is not None:
                outcome = f"no usable reply ({proposal.error.split(':')[0]})"
            elif not offered:
                outcome = "no edit offered"
            else:
                outcome = f"none of {offered} edits kept" + (
                    f" ({bad} unusable)" if bad else "")
            summary = f"round {round_}: {outcome}"
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
            if (kind := unusable_kind(line)) is not None:
                failed[kind] += 1
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
    return LearnResult(best[3], math.exp(best[1]), math.exp(best[0]),
                       curve[-1][0] if curve else 0, accepted, curve, dict(failed), best_round)


CHOICE = "above the margin, else smaller and as good"
"""The rule that picks a round's kept edit (the module docstring's step 3), in a log's first
line: a log begun before it was recorded picked the best-scoring edit, then kept it only if it
passed either test (an edit below the margin could hide a prune), and resuming one says so."""

DESCRIPTIVE = ("started_from",)
"""Keys of the log's first line that say something and are not compared on resuming."""
_ABSENT = object()


def _show(value) -> str:
    """A setting's value, short, for a message."""
    if value is _ABSENT or value is None:
        return "none"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_show(v)}" for k, v in value.items()) or "none"
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _size(node) -> int:
    """The nodes of a tree's JSON (a rough count for a message; 0 for what is not a node)."""
    if not isinstance(node, dict):
        return 0
    return 1 + sum(_size(node.get(k)) for k in ("next", "then", "else"))


def _differences(old, new, first: dict, header: dict, path: str = "") -> list[str]:
    """Each setting that differs between the log (``old``) and this run (``new``):
    ``"config.proposals: 8 in the log, 4 now"``."""
    if isinstance(old, dict) and isinstance(new, dict) and path != "start":
        out = []  # at the top, the keys this run writes (a later one's others are said)
        for k in [*new, *(k for k in old if k not in new and path)]:
            out += _differences(old.get(k, _ABSENT), new.get(k, _ABSENT), first, header,
                                f"{path}.{k}" if path else k)
        return out
    if old == new:
        return []
    if path == "start":
        def tree(h: dict, value) -> str:
            n = _size((value or {}).get("root") if isinstance(value, dict) else None)
            came = h.get("started_from")
            return f"a tree of {n} node{'s' if n != 1 else ''}" + (
                f" ({came})" if came else "")
        return [f"start: {tree(first, old)} in the log, {tree(header, new)} now"]
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [f"{path}: {len(old)} in the log, {len(new)} now"]
        i = next(i for i, (a, b) in enumerate(zip(old, new)) if a != b)
        return [f"{path}[{i}]: {_show(old[i])} in the log, {_show(new[i])} now"]
    return [f"{path}: {_show(old)} in the log, {_show(new)} now"]


def _replay(line: dict, tree: Tree, vocab, log) -> Tree:
    """``tree`` with the edit that round ``line`` kept; an error naming the log and the
    round where that edit does not apply (the log was edited, or is of another start)."""
    try:
        return edit_from_dict(line["proposals"][line["accepted"]]["edit"]).apply(tree, vocab)
    except TreeFormatError as e:
        raise AutoProfilerError(f"{log}: round {line['round']} is corrupted (the edit it kept "
                                f"does not apply to the tree of the rounds before it: {e}): "
                                "start a new run with another --out") from None


def _line_problem(line) -> str | None:
    """What makes a decoded log line unusable, or None. A round line is checked here, once,
    for every field that resuming reads (its number, its objectives, its kept edit), so that
    a hand-edited log is one error naming its line, not a KeyError where it is used."""
    if not isinstance(line, dict):
        return f"a log line is a JSON object, not {type(line).__name__}"
    if line.get("kind") != "round":
        return None
    number, proposals, accepted = line.get("round"), line.get("proposals"), line.get("accepted")
    if isinstance(number, bool) or not isinstance(number, int):
        return "its round is not a whole number"
    for key in ("train_objective", "validation_objective"):
        if not is_finite_number(line.get(key)):
            return f"its {key} is not a finite number"
    if not isinstance(line.get("summary"), str):
        return "its summary is not a string"
    if not isinstance(proposals, list) or not all(isinstance(p, dict) for p in proposals):
        return "its proposals are not a list of objects"
    if accepted is None:
        return None
    if isinstance(accepted, bool) or not isinstance(accepted, int) or \
            not 0 <= accepted < len(proposals):
        return f"its accepted is not the index of one of its {len(proposals)} proposals"
    try:
        edit_from_dict(proposals[accepted].get("edit"))
    except TreeFormatError as e:
        return f"its kept edit is not an edit: {e}"
    return None


def _logged_tolerance(tolerance) -> dict | None:
    """An environment's tolerance as a log records it: by value (0.01 is 1e-2), as JSON
    reads it back; None for the default's, which the logs written before the tolerance was
    recorded say by saying none."""
    if tolerance is None:
        return None
    from autoprofiler_env.harness.tolerance import DEFAULT, resolve

    def value(t):
        return {"atol": t.atol, "rtol": t.rtol,
                **({"per_dtype": {k: list(v) for k, v in sorted(t.per_dtype.items())}}
                   if t.per_dtype else {})}
    logged = value(resolve(tolerance))
    return None if logged == value(resolve(DEFAULT)) else logged


_START = '{"kind": "start"'
"""How a log's first line begins (the run's settings, ``json.dumps`` of its header)."""


def _resume(log, header: dict, vocab, dataset: dict | None = None) -> list[dict]:
    """The round lines of an earlier run of the same settings in ``log`` (none for a new
    log); an error for a log of other settings (its dataset the same where ``dataset``, the
    metadata of this run's, says the log's is an earlier file of its content)."""
    if not log or not Path(log).exists() or Path(log).stat().st_size == 0:
        return []
    lines, dropped = [], False
    with open(log, encoding="utf-8") as f:
        raw = f.read().split("\n")
    for i, text in enumerate(raw):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except ValueError:
            if i >= len(raw) - 2:  # a last line cut by an interruption
                dropped, cut = True, text.strip()
                break
            raise AutoProfilerError(f"{log}: line {i + 1} is not JSON: the log is corrupted "
                                    "(start a new run with another --out)") from None
        problem = _line_problem(line)
        if problem:
            raise AutoProfilerError(f"{log}: line {i + 1} is corrupted ({problem}): start a "
                                    "new run with another --out")
        lines.append(line)
    if not lines and dropped and (_START.startswith(cut) or cut.startswith(_START)):
        # its first line, cut by an interruption: a new log (not another file's line)
        Path(log).write_text("", encoding="utf-8")
        return []
    if not lines or lines[0].get("kind") != "start":
        raise AutoProfilerError(f"{log}: not a learn-tree log (its first line is not the "
                                "run's settings)")
    first = lines[0]

    def settings(h: dict) -> dict:  # another number of rounds may be asked of a resumed run
        return {k: v for k, v in h.items() if k not in DESCRIPTIVE} | {
            "config": {k: v for k, v in (h.get("config") or {}).items() if k != "rounds"}}

    logged, now = settings(first), settings(header)
    if isinstance(logged.get("env"), dict):  # an upgraded file of its dataset: the same
        logged["env"] = recorded_as_now(logged["env"], dataset)
    if "proposer_settings" not in logged:  # a log written before they were recorded
        told = now.pop("proposer_settings")
        warn(f"{log} was written before the learner recorded the proposer's "
             f"settings: it is resumed with {_show(told)}, which it cannot check "
             "(give those it was written with)")
    if "choice" not in logged:  # a log written before the rule of choice was recorded
        now.pop("choice")
        warn(f"{log} was begun by a learner that picked a round's best-scoring edit and kept "
             "it only if it passed the margin or was smaller and as good (an edit below the "
             "margin could hide a prune): its rounds are replayed as logged, and the rounds "
             f"after them pick by the current rule ({CHOICE}); for a run under one rule, "
             "give another --out")
    differences = _differences(logged, now, first, header)
    if differences:
        raise AutoProfilerError(f"{log} holds a run with other settings ("
                                + "; ".join(differences) + "): give the same settings to "
                                "resume it, or another --out")
    rounds = [line for line in lines[1:] if line.get("kind") == "round"]
    for k, line in enumerate(rounds, 1):
        if line.get("round") != k:
            raise AutoProfilerError(f"{log}: round {k} is missing: the log is corrupted "
                                    "(start a new run with another --out)")
    if dropped:  # rewrite the file without the cut line, so appends stay whole lines
        Path(log).write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    from_dict(header["start"], vocab)
    return rounds
