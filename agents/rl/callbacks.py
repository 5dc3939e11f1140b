"""stable-baselines3 callbacks for training on the environment: evaluation with the project's
one evaluation (keeping the best model; its log in JSON lines and in SB3's ``evaluations.npz``
format), per-episode outcomes in SB3's logger, a progress bar.

They write to SB3's logger, so whatever output formats the logger has (CSV, stdout, wandb
through :class:`experiments.sb3_wandb.WandbOutputFormat`) get the same values.
"""

from __future__ import annotations

import io
import json
import math
import time
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from autoprofiler_env.atomic import write_atomic
from autoprofiler_env.errors import warn
from autoprofiler_env.evaluation import rollout, score
from autoprofiler_env.jsonlines import JsonlAppender
from autoprofiler_env.scoring import log_score, shipped_speedup


RECORD_MEMBER = "autoprofiler.json"
"""The member of a saved model's zip that holds what it was trained on (:func:`save_model`'s
``record``): copied out of its run folder, a model still says it (SB3 reads no other
member)."""

RECORD_KEYS = ("schema", "algorithm", "seed", "env_kwargs", "optimizer", "dataset_sha256",
               "package_version")
"""What of a training run's ``run.json`` a saved model carries."""


def save_model(model, path: Path, record: dict | None = None) -> Path:
    """``model.save`` to ``path``, atomically (a reader never sees half a file); with
    ``record`` (a run's ``run.json``), its :data:`RECORD_KEYS` as the zip's
    :data:`RECORD_MEMBER`."""
    buffer = io.BytesIO()
    model.save(buffer)
    if record:
        with zipfile.ZipFile(buffer, "a") as archive:
            archive.writestr(RECORD_MEMBER, json.dumps(
                {k: record[k] for k in RECORD_KEYS if k in record}, indent=1))
    write_atomic(path, buffer.getvalue())
    return path


def saved_record(path: Path) -> dict | None:
    """The :data:`RECORD_MEMBER` of the saved model ``path`` (None: it has none, or it is
    not one that can be read)."""
    try:
        with zipfile.ZipFile(path) as archive:
            record = json.loads(archive.read(RECORD_MEMBER))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, RecursionError):
        return None
    return record if isinstance(record, dict) else None


@dataclass(frozen=True)
class BudgetResult:
    """The policy's evaluation at one budget: the project's score (the geometric-mean
    speedup) and what it collected; ``log_scores`` and ``lengths``, each episode's (one per
    problem, in the evaluation environment's order) log score (``ln`` of the shipped speedup:
    their mean is ``ln(geomean_speedup)``) and length in steps (None: not recorded, as in
    the ``evaluations.jsonl`` of a run interrupted before they were)."""

    budget: float
    geomean_speedup: float
    mean_sections: float
    mean_cost: float  # in the environment's budget_unit
    correct: float    # the fraction of problems whose candidate was correct
    log_scores: tuple[float, ...] | None = None
    lengths: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Evaluation:
    """One evaluation during training: the step, every budget's result, and the objective
    the best model is kept by (the mean over budgets of the log geometric-mean speedups)."""

    step: int
    results: tuple[BudgetResult, ...]
    objective: float
    best: bool
    seconds: float

    @property
    def geomean_speedup(self) -> float:
        """The geometric mean over budgets of the geometric-mean speedups."""
        return math.exp(self.objective)

    def to_dict(self, episodes: bool = True) -> dict:
        """One line of ``evaluations.jsonl`` (``episodes`` false: without each budget's
        per-episode ``log_scores`` and ``lengths``, as ``run.json`` keeps it)."""
        def budget(r: BudgetResult) -> dict:
            d = asdict(r)
            if not episodes or r.log_scores is None:
                d.pop("log_scores")
                d.pop("lengths")
            return d

        return {"step": self.step, "geomean_speedup": self.geomean_speedup,
                "objective": self.objective, "best": self.best, "seconds": self.seconds,
                "budgets": {f"{r.budget:g}": budget(r) for r in self.results}}

    @classmethod
    def from_dict(cls, line: dict) -> Evaluation:
        """The evaluation one line of ``evaluations.jsonl`` holds (:meth:`to_dict`'s
        inverse; a line without per-episode values gives ``log_scores`` and ``lengths``
        None)."""
        def budget(v: dict) -> BudgetResult:
            scores, lengths = v.get("log_scores"), v.get("lengths")
            return BudgetResult(
                **{k: v[k] for k in ("budget", "geomean_speedup", "mean_sections",
                                     "mean_cost", "correct")},
                log_scores=None if scores is None else tuple(float(x) for x in scores),
                lengths=None if lengths is None else tuple(int(x) for x in lengths))

        results = tuple(budget(v) for v in line["budgets"].values())
        return cls(int(line["step"]), results, float(line["objective"]), bool(line["best"]),
                   float(line["seconds"]))

    @property
    def episodes(self) -> tuple[list[float], list[int]] | None:
        """Every episode's log score and length, budget after budget (each budget's in its
        problems' order): the mean of the scores is :attr:`objective` (each budget has one
        episode per problem); None where a budget's were not recorded."""
        if any(r.log_scores is None or r.lengths is None for r in self.results):
            return None
        return ([s for r in self.results for s in r.log_scores],
                [n for r in self.results for n in r.lengths])


def read_evaluations(path: Path) -> list[Evaluation]:
    """The evaluations ``evaluations.jsonl`` holds (none where it is missing), in order."""
    from autoprofiler_env.jsonlines import read_jsonl

    path = Path(path)
    return [Evaluation.from_dict(line) for line in read_jsonl(path)] if path.is_file() else []


class _StepCounter:
    """``env`` with a count of its ``step`` calls (an episode's length, as SB3's ``Monitor``
    counts it); everything else is ``env``'s."""

    def __init__(self, env) -> None:
        self._env, self.steps = env, 0

    def step(self, action):
        self.steps += 1
        return self._env.step(action)

    def __getattr__(self, name):
        return getattr(self._env, name)


def evaluate(env, model, budgets, seed: int | None = 0, step: int = 0
             ) -> tuple[Evaluation, dict[float, list]]:
    """``model`` on every problem of ``env`` at each budget (deterministic; masks where the
    model takes them); returns the evaluation (``best`` False; each budget's per-episode log
    scores and lengths in it) and each budget's records."""
    started = time.perf_counter()
    results, records = [], {}
    counted, lengths = _StepCounter(env), []

    def observe(record, observation):  # an episode's end: its steps, counted afresh after
        lengths.append(counted.steps)
        counted.steps = 0

    for budget in budgets:
        first = len(lengths)
        episodes = records[budget] = rollout(counted, model, budget=budget, seed=seed,
                                             observe=observe)
        results.append(BudgetResult(
            budget, score(episodes), float(np.mean([len(r.sections) for r in episodes])),
            float(np.mean([r.cost for r in episodes])),
            float(np.mean([bool(r.correct) for r in episodes])),
            tuple(log_score(r.correct, r.speedup) for r in episodes), tuple(lengths[first:])))
    objective = float(np.mean([math.log(r.geomean_speedup) for r in results]))
    return Evaluation(step, tuple(results), objective, False,
                      time.perf_counter() - started), records


class RolloutEvalCallback(BaseCallback):
    """Every ``frequency`` environment steps (counted over all sub-environments, not per
    call as SB3's ``EvalCallback`` counts), and once at the end of training, evaluates the
    model with :func:`autoprofiler_env.evaluation.rollout` on ``eval_env`` at each of
    ``budgets``; saves the model to ``best_model_path`` when the objective (the mean of the
    log scores over budgets) improves, appends each evaluation to ``log_path`` (JSON lines)
    and records ``eval/geomean_speedup``, ``eval/objective``, SB3's ``eval/mean_reward`` and
    ``eval/mean_ep_length`` (the mean return and length of every episode evaluated, under the
    name SB3's ``EvalCallback`` gives them, which dashboards and rl-baselines3-zoo's tuning
    read) and, per budget, ``eval/budget=<b>/geomean_speedup``, ``.../mean_sections``,
    ``.../mean_cost`` and ``.../correct`` in SB3's logger.

    ``npz_path``, when given, gets all the evaluations after each one (written whole,
    atomically) in the format of SB3's ``EvalCallback`` ``evaluations.npz``, which
    rl-baselines3-zoo's ``all_plots`` reads: ``timesteps`` (n_evals,), ``results`` and
    ``ep_lengths`` (n_evals, n_episodes): an episode per (budget, problem), budget after
    budget, its log score (``ln`` of the shipped speedup) and its length in steps; the mean
    of a row of ``results`` is the evaluation's ``objective``.

    ``on_evaluation(evaluation, records)``, when given, is called after each evaluation,
    once it is logged (the command keeps the records for wandb and saves its checkpoint
    there); where it returns ``False``, training stops there (SB3's callbacks' convention:
    a tuning trial that its pruner stops, :mod:`experiments.tune`), as if the steps were
    done: the evaluation just made is the last.

    A resumed run restores what the interrupted one evaluated (:meth:`restore`): the best
    model kept stays the best unless an evaluation beats it, and the evaluations continue on
    the same schedule (an evaluation the interruption missed is made up when training
    resumes), and ``npz_path`` is written again from them. ``total_timesteps``: the run's
    total, where a resumed ``learn`` call goes past it (the rollout an interruption left
    unlearned, collected again): an evaluation due from it on waits for the end. ``record``:
    the run's ``run.json``, which the best model saved carries (:func:`save_model`)."""

    def __init__(self, eval_env, budgets, frequency: int, best_model_path: Path | None = None,
                 log_path: Path | None = None, seed: int | None = 0, on_evaluation=None,
                 verbose: int = 0, npz_path: Path | None = None,
                 total_timesteps: int | None = None, record: dict | None = None) -> None:
        super().__init__(verbose)
        if frequency < 1:
            raise ValueError(f"frequency must be a whole number of steps >= 1, got {frequency}")
        self.eval_env = eval_env
        self.budgets = tuple(float(b) for b in budgets)
        self.frequency = int(frequency)
        self.best_model_path = Path(best_model_path) if best_model_path else None
        self.log_path = Path(log_path) if log_path else None
        self.npz_path = Path(npz_path) if npz_path else None
        self.seed = seed
        self.on_evaluation = on_evaluation
        self.evaluations: list[Evaluation] = []
        self.best: Evaluation | None = None
        self.stopped = False  # on_evaluation returned False: training stops
        self._next = self.frequency
        self.total_timesteps = total_timesteps  # None: the model's learn call's
        self.record = record

    def restore(self, evaluations) -> None:
        """Takes ``evaluations`` (an interrupted run's, as :func:`read_evaluations` reads
        them) as this callback's own: the best of them (the first of the highest objective,
        as :meth:`evaluate` keeps it) is the one to beat, the next evaluation is the
        schedule's next after the last of them, and ``npz_path`` is written again from them
        (an interruption may have come between the two files; a warning names the restored
        evaluations it leaves out, those of an ``evaluations.jsonl`` written before each
        episode's score was recorded in it)."""
        self.evaluations = list(evaluations)
        self.best = None
        for evaluation in self.evaluations:
            if self.best is None or evaluation.objective > self.best.objective:
                self.best = evaluation
        last = self.evaluations[-1].step if self.evaluations else 0
        self._next = (last // self.frequency + 1) * self.frequency
        unrecorded = [e.step for e in self.evaluations if e.episodes is None]
        if unrecorded and self.npz_path is not None:
            steps = (f"step {unrecorded[0]}" if len(unrecorded) == 1
                     else f"steps {unrecorded[0]} to {unrecorded[-1]}")
            warn(f"{self.npz_path}: leaves out the {len(unrecorded)} restored "
                 f"evaluation(s) without per-episode scores ({steps}: "
                 "evaluations.jsonl has none for them, written before they were "
                 "recorded)")
        if self.evaluations:
            self.write_npz()

    def write_npz(self) -> None:
        """``npz_path`` (if any) from the evaluations so far: those whose per-episode values
        are known (every one this callback made; a restored one may lack them)."""
        if self.npz_path is None:
            return
        rows = [(e.step, *e.episodes) for e in self.evaluations if e.episodes is not None]
        width = len(rows[0][1]) if rows else 0
        buffer = io.BytesIO()
        np.savez(buffer, timesteps=np.array([row[0] for row in rows], dtype=np.int64),
                 results=np.array([row[1] for row in rows], dtype=np.float64
                                  ).reshape(len(rows), width),
                 ep_lengths=np.array([row[2] for row in rows], dtype=np.int64
                                     ).reshape(len(rows), width))
        write_atomic(self.npz_path, buffer.getvalue())

    def _on_training_start(self) -> None:
        # a resumed run whose interruption came between a due evaluation and its end
        if self.num_timesteps >= self._next:
            self._next = (self.num_timesteps // self.frequency + 1) * self.frequency
            self.evaluate()

    def _on_step(self) -> bool:
        # one due once the total is reached is made at the training's end instead: the steps
        # go on to the end of the last rollout, and its update comes after them, so made now
        # it would score a model that is not the one saved (and, equal in steps, the end's
        # evaluation of the saved one would be passed over)
        total = self.total_timesteps or getattr(self.model, "_total_timesteps", math.inf)
        if self.num_timesteps >= self._next and self.num_timesteps < total:
            self._next = (self.num_timesteps // self.frequency + 1) * self.frequency
            self.evaluate()
        return not self.stopped

    def _on_training_end(self) -> None:
        if not self.evaluations or self.evaluations[-1].step != self.num_timesteps:
            self.evaluate()  # the final model (an evaluation due in the last rollout waited)

    def evaluate(self) -> Evaluation:
        """Evaluates the model now (what ``_on_step`` does every ``frequency`` steps)."""
        evaluation, records = evaluate(self.eval_env, self.model, self.budgets, self.seed,
                                       self.num_timesteps)
        if self.best is None or evaluation.objective > self.best.objective:
            evaluation = Evaluation(evaluation.step, evaluation.results, evaluation.objective,
                                    True, evaluation.seconds)
            self.best = evaluation
            if self.best_model_path is not None:
                save_model(self.model, self.best_model_path, self.record)
        self.evaluations.append(evaluation)
        if self.log_path is not None:
            with JsonlAppender(self.log_path) as log:
                log.write(evaluation.to_dict())
        self.write_npz()
        self.logger.record("eval/geomean_speedup", evaluation.geomean_speedup)
        self.logger.record("eval/objective", evaluation.objective)
        # SB3's own two, over every (budget, problem) episode: the return (the log score,
        # plus any cost penalties or incorrect reward the environment is given) and length
        episodes = [r for rs in records.values() for r in rs]
        self.logger.record("eval/mean_reward", float(np.mean([r.reward for r in episodes])))
        self.logger.record("eval/mean_ep_length", float(np.mean(
            [n for r in evaluation.results for n in r.lengths])))
        self.logger.record("eval/best_geomean_speedup", self.best.geomean_speedup)
        for r in evaluation.results:
            prefix = f"eval/budget={r.budget:g}"
            self.logger.record(f"{prefix}/geomean_speedup", r.geomean_speedup)
            self.logger.record(f"{prefix}/mean_sections", r.mean_sections)
            self.logger.record(f"{prefix}/mean_cost", r.mean_cost)
            self.logger.record(f"{prefix}/correct", r.correct)
        if self.verbose:
            print(f"step {evaluation.step}: geomean speedup {evaluation.geomean_speedup:.4f}"
                  + (" (best)" if evaluation.best else ""))
        # dump now, so that the evaluation is logged at its own step (as SB3's EvalCallback)
        self.logger.record("time/total_timesteps", self.num_timesteps, exclude="tensorboard")
        self.logger.dump(self.num_timesteps)
        if self.on_evaluation is not None:  # after the dump: the logs hold the evaluation
            if self.on_evaluation(evaluation, records) is False:
                self.stopped = True
        return evaluation


class EpisodeOutcomeCallback(BaseCallback):
    """Records every finished training episode's outcome in SB3's logger, averaged over the
    episodes between two dumps: ``episode/log_speedup`` (the ln of the shipped speedup,
    whatever reward shaping the environment has: its exp over a window is the window's
    geometric-mean speedup), ``episode/speedup``, ``episode/correct``, ``episode/sections``
    (how many were collected), ``episode/budget`` (the episode's budget, drawn from
    ``budget_range`` where that is set) and ``episode/budget_spent`` (the fraction of it
    spent). It reads the ``record`` of each sub-environment's final ``info``."""

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", ()):
            record = info.get("record")
            if record is None:
                continue
            self.logger.record_mean("episode/log_speedup",
                                    log_score(record.correct, record.speedup))
            self.logger.record_mean("episode/speedup",
                                    shipped_speedup(record.correct, record.speedup))
            self.logger.record_mean("episode/correct", float(bool(record.correct)))
            self.logger.record_mean("episode/sections", float(len(record.sections)))
            if record.budget is not None:
                self.logger.record_mean("episode/budget", float(record.budget))
            final = info.get("terminal_observation")  # the vector env has reset already
            if isinstance(final, dict) and "budget" in final:
                self.logger.record_mean("episode/budget_spent",
                                        1.0 - float(np.asarray(final["budget"]).reshape(-1)[0]))
        return True


class ProgressBarCallback(BaseCallback):
    """A tqdm bar over the environment steps (SB3's own needs rich, which the project does
    not depend on); a resumed run's bar starts at the steps it had taken."""

    def __init__(self, total: int, description: str = "training") -> None:
        super().__init__()
        self.total, self.description = int(total), description
        self._bar = None

    def _on_training_start(self) -> None:
        from tqdm.auto import tqdm

        done = int(self.model.num_timesteps)
        self._bar = tqdm(total=done + steps_taken(self.model, max(self.total - done, 0)),
                         initial=done, desc=self.description, unit="step",
                         dynamic_ncols=True)

    def _on_step(self) -> bool:
        self._bar.update(self.training_env.num_envs)
        return True

    def _on_training_end(self) -> None:
        self.close()

    def close(self) -> None:
        """Closes the bar (training that ends in an exception does not end it)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def steps_taken(model, total: int) -> int:
    """The environment steps ``model.learn(total)`` takes: SB3 collects whole rollouts
    (``n_steps`` x ``n_envs`` for on-policy algorithms, ``train_freq`` steps x ``n_envs`` for
    off-policy ones counted in steps), so it rounds ``total`` up to a multiple of one."""
    from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
    from stable_baselines3.common.type_aliases import TrainFrequencyUnit

    chunk = model.n_envs
    if isinstance(model, OnPolicyAlgorithm):
        chunk *= model.n_steps
    elif getattr(getattr(model, "train_freq", None), "unit", None) == TrainFrequencyUnit.STEP:
        chunk *= model.train_freq.frequency
    return -(-int(total) // chunk) * chunk
