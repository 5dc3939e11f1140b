"""``autoprofiler tune``: Optuna tuning of a training config's hyperparameters, as
rl-baselines3-zoo's ``-optimize`` tunes its hyperparameter files, for every algorithm
``autoprofiler train`` trains (MaskablePPO included, which the zoo lacks) and scored by the
project's own evaluation (masks used).

    autoprofiler tune [--config maskable_ppo|ppo|a2c|dqn|qrdqn|recurrent_ppo|trpo|FILE]
                      [--trials 20] [--steps N]
                      [--sampler tpe|random] [--pruner median|none] [--n-startup-trials 10]
                      [--n-evaluations N] [--seed 0] [--out runs/tune/<config>]
                      [--wandb] [--wandb-group NAME]

Each trial samples hyperparameters (:data:`SAMPLERS`: the zoo's ``hyperparams_opt`` ranges
and names, MaskablePPO PPO's), puts them over the config's (the zoo's ``kwargs.update``:
what is not sampled stays the config's) and trains with :func:`experiments.train.train`,
``--steps`` steps (default: the config's ``n_timesteps``) with ``--seed``, into
``<out>/trials/<number>`` (a training run's folder: ``autoprofiler benchmark --policy
sb3:<out>/trials/<number>`` plays its ``best_model.zip``, the run's own best evaluation's,
which may be one before the first update that the trial's objective leaves out). The trial's
objective is its best evaluation's on the config's ``eval`` split and budgets
(:class:`agents.rl.callbacks.Evaluation`'s ``objective``: the mean over the budgets of the
log geometric-mean speedups) among those made after its policy's first update
(:func:`first_update`: an evaluation within the first rollout scores the untrained network,
which would tie every trial whose rollout is longer than the evaluation interval), where the
zoo takes the last evaluation's mean episode reward. The sampled parameters replace the
config's of the same names, ``policy_kwargs`` whole (as the zoo's do); the zoo's ranges
never reach ``gamma`` 1.0, which the shipped configs use (an episode's one reward comes at
its end, 1-16 steps on).
``--n-evaluations N`` evaluates each trial every ``steps // N`` steps (the zoo's option);
without it, on the config's ``eval.frequency``. After each evaluation after its first update
the trial reports the objective to the pruner at its place on that schedule (``steps //
frequency``: trials of other rollout sizes meet at the same places): ``median`` (the zoo's
default: ``MedianPruner(n_startup_trials, n_warmup_steps=n_evaluations // 3)``) stops a
trial whose best so far is below the median of the COMPLETE trials' there (Optuna's rule:
pruned trials do not count), and the trial ends PRUNED, its run finished early
(``run.json``'s ``stopped_early``); ``none`` prunes nothing. The sampler is the zoo's
``tpe`` (``TPESampler(n_startup_trials, multivariate=True)``: random for the first
``--n-startup-trials``) or ``random``, seeded for each trial from ``--seed`` and how many
trials finished before it, and a trial that failed (stopped, killed) has its parameters
tried again by the next one, so that a study continued after a stop samples as one that
never stopped. A trial whose training raises a ``ValueError`` or an ``AssertionError`` (NaN
parameters from a large learning rate) is PRUNED with a warning, as the zoo does.

``--out`` (default ``runs/tune/<config stem>``) holds the study, ``study.db`` (Optuna's
SQLite storage), and after each trial

- ``trials.csv``: each trial's number, state (COMPLETE, PRUNED, FAIL, RUNNING), objective (a
  pruned trial's: its last evaluation's, as Optuna keeps it), geometric-mean speedup, steps
  trained, the step of its best evaluation, seconds, and its sampled parameters
  (``params_<name>``, Optuna's ``trials_dataframe`` names);
- ``best.yml``: the best finished trial's config, a hyperparameter file in the zoo's format
  (the config given, the trial's hyperparameters over it, its ``n_timesteps`` and ``eval``
  the config's own, the ``autoprofiler:`` key naming the algorithm) that ``autoprofiler train
  --config <out>/best.yml`` trains from, and ``python -m rl_zoo3.train -conf`` too (ppo, a2c,
  dqn, qrdqn, trpo; recurrent_ppo as the zoo's ``--algo ppo_lstm``).

The study is resumable: the same command again continues until ``--trials`` trials are
finished (COMPLETE or PRUNED), never running a finished one again. Ctrl-C (or SIGTERM) stops
the trial under way, which ends FAIL and is not counted, its folder removed at once; a trial
left RUNNING by a process killed outright is marked FAIL when the study continues, and its
folder removed then; the next trial takes a failed one's parameters. A study continues only
with its own settings: a ``--config`` that resolves otherwise (``--steps`` and
``--n-evaluations`` included), another ``--sampler``, ``--pruner``, ``--n-startup-trials``
or ``--seed`` into the same ``--out`` is refused, naming the first difference; so is a
dataset other than the one its trials trained on (its sha256). ``--out`` is held while the
study runs (:func:`~autoprofiler_env.atomic.one_writer`): a second command into it is
refused at once.

With ``--wandb`` the study is one wandb run (job type ``tune``, named ``<config>-seed<N>``,
in the group ``tune-<config>`` unless ``--wandb-group`` or ``WANDB_RUN_GROUP`` says
otherwise; where it goes: :mod:`experiments.tracking`), like Optuna's
``WeightsAndBiasesCallback`` (which names the objective ``value`` and the parameters bare):
each finished trial a row against ``trial`` (its number) with its ``state``, ``objective``,
``geomean_speedup``, ``steps``, ``seconds`` and sampled ``params/<name>``; the summary the
best trial's (``best/...``) and the counts, ``trials`` the table of ``trials.csv``, and
``best.yml`` a ``config`` artifact. A continued study goes on in the same wandb run (its id
kept in ``<out>/wandb.json``); one continued in a new run (started without ``--wandb``) logs
its earlier finished trials' rows first; a study stopped by Ctrl-C ends its run failed (the
stopped trial, FAIL, is in the table, not a row). The trials' trainings log nothing to wandb
(``autoprofiler train --config <out>/best.yml --wandb`` logs the best one's training).

Optuna is optional (``pip install -e '.[tune]'``): without it the command says how to
install it.
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import io
import json
import math
import shutil
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.rl.config import ENV_ID, OWN, ConfigError, TrainConfig, config_from_dict, read_config
from autoprofiler_env.atomic import one_writer, write_atomic
from autoprofiler_env.errors import AutoProfilerError, install_hint, warn
from experiments.train import (
    _as_json,
    _config_key,
    _first_difference,
    config_path,
    portable,
    train,
)

SAMPLER_METHODS = ("tpe", "random")
PRUNER_METHODS = ("median", "none")
DEFAULT_TRIALS = 20
DEFAULT_STARTUP_TRIALS = 10
"""rl-baselines3-zoo's ``--n-startup-trials``: the trials the TPE sampler draws at random,
and the finished ones the median pruner waits for, before either goes to work."""
STUDY_FILE = "study.db"
STUDY_NAME = "autoprofiler-tune"
TRIALS_CSV = "trials.csv"
BEST_FILE = "best.yml"
FINISHED = ("COMPLETE", "PRUNED")
"""The trial states that count towards ``--trials``."""


def _optuna():
    """The ``optuna`` module; an :class:`AutoProfilerError` saying how to install it where
    it is missing."""
    try:
        import optuna
    except ImportError:
        raise AutoProfilerError(f"autoprofiler tune needs Optuna: {install_hint('tune')}"
                                ) from None
    return optuna


# -- the samplers: rl-baselines3-zoo's hyperparams_opt ranges and names ----------------------

ROLLOUTS = (32, 64, 128, 256, 512, 1024, 2048)
"""The zoo's ``n_steps`` choices for PPO (and RecurrentPPO) and A2C."""
TRPO_ROLLOUTS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)
"""The zoo's TRPO ``n_steps`` choices."""
NET_ARCH = {"tiny": [64], "small": [64, 64], "medium": [256, 256]}
"""The zoo's ``net_arch`` choices (PPO, A2C and TRPO: one each for the policy and the value
function; DQN's: the Q-network's)."""
ACTIVATION = {"tanh": "nn.Tanh", "relu": "nn.ReLU"}
"""The zoo's ``activation_fn`` choices, as its ``policy_kwargs`` strings name them."""
LEARNING_STARTS = (0, 1000, 5000, 10000, 20000)
BUFFER_SIZES = (10_000, 50_000, 100_000)
"""The zoo's DQN ``buffer_size`` choices but its 1e6: an observation is about 1 KB, so a
million of them (with the next observations) would hold 2 GB."""


def _fitting(choices, fits) -> list:
    """The ``choices`` that ``fits`` accepts, else the smallest: a study's ``--steps`` (fixed
    for the study) leaves out a rollout or a warm-up longer than the whole trial."""
    return [c for c in choices if fits(c)] or [min(choices)]


def _rollouts(config: TrainConfig, choices=None) -> list[int]:
    """The zoo's ``n_steps`` choices (:data:`ROLLOUTS` unless given) whose rollout (x
    ``n_envs``) is shorter than the trial, so that the policy is updated before its last
    evaluation."""
    return _fitting(ROLLOUTS if choices is None else choices,
                    lambda n: n * config.n_envs < config.total_timesteps)


def sample_ppo_params(trial, config: TrainConfig) -> dict[str, Any]:
    """PPO's (and MaskablePPO's) parameters as the zoo samples PPO's, by its names
    (``one_minus_gamma``, ``net_arch: tiny``, ...; :func:`ppo_hyperparameters` makes them
    the config's); ``n_steps`` one of :func:`_rollouts`."""
    fit = _rollouts(config)
    return {
        "batch_size": trial.suggest_categorical("batch_size", [32, 64, 128, 256, 512]),
        "n_steps": trial.suggest_categorical("n_steps", fit),
        "one_minus_gamma": trial.suggest_float("one_minus_gamma", 1e-4, 0.03, log=True),
        "one_minus_gae_lambda": trial.suggest_float("one_minus_gae_lambda", 1e-4, 0.1,
                                                    log=True),
        "learning_rate": trial.suggest_float("learning_rate", 1e-5, 2e-3, log=True),
        "ent_coef": trial.suggest_float("ent_coef", 1e-8, 0.1, log=True),
        "clip_range": trial.suggest_categorical("clip_range", [0.1, 0.2, 0.3, 0.4]),
        "n_epochs": trial.suggest_categorical("n_epochs", [1, 5, 10, 20]),
        "max_grad_norm": trial.suggest_float("max_grad_norm", 0.3, 2.0),
        "net_arch": trial.suggest_categorical("net_arch", ["tiny", "small", "medium"]),
        "activation_fn": trial.suggest_categorical("activation_fn", ["tanh", "relu"]),
    }


def sample_a2c_params(trial, config: TrainConfig) -> dict[str, Any]:
    """A2C's parameters as the zoo samples them (``n_steps`` one of :func:`_rollouts`)."""
    fit = _rollouts(config)
    return {
        "n_steps": trial.suggest_categorical("n_steps", fit),
        "one_minus_gamma": trial.suggest_float("one_minus_gamma", 1e-4, 0.03, log=True),
        "one_minus_gae_lambda": trial.suggest_float("one_minus_gae_lambda", 1e-4, 0.1,
                                                    log=True),
        "learning_rate": trial.suggest_float("learning_rate", 1e-5, 2e-3, log=True),
        "max_grad_norm": trial.suggest_float("max_grad_norm", 0.3, 2.0),
        "ent_coef": trial.suggest_float("ent_coef", 1e-8, 0.1, log=True),
        "net_arch": trial.suggest_categorical("net_arch", ["small", "medium"]),
        "activation_fn": trial.suggest_categorical("activation_fn", ["tanh", "relu"]),
    }


def sample_trpo_params(trial, config: TrainConfig) -> dict[str, Any]:
    """TRPO's parameters as the zoo samples them (:func:`trpo_hyperparameters` makes them
    the config's); ``n_steps`` one of :func:`_rollouts` of the zoo's TRPO choices."""
    return {
        "batch_size": trial.suggest_categorical("batch_size", [8, 16, 32, 64, 128, 256, 512]),
        "n_steps": trial.suggest_categorical("n_steps", _rollouts(config, TRPO_ROLLOUTS)),
        "gamma": trial.suggest_categorical("gamma", [0.9, 0.95, 0.98, 0.99, 0.995, 0.999,
                                                     0.9999]),
        "learning_rate": trial.suggest_float("learning_rate", 1e-5, 1.0, log=True),
        "n_critic_updates": trial.suggest_categorical("n_critic_updates", [5, 10, 20, 25, 30]),
        "cg_max_steps": trial.suggest_categorical("cg_max_steps", [5, 10, 20, 25, 30]),
        "target_kl": trial.suggest_categorical("target_kl", [0.1, 0.05, 0.03, 0.02, 0.01,
                                                             0.005, 0.001]),
        "gae_lambda": trial.suggest_categorical("gae_lambda", [0.8, 0.9, 0.92, 0.95, 0.98,
                                                               0.99, 1.0]),
        "net_arch": trial.suggest_categorical("net_arch", ["small", "medium"]),
        "activation_fn": trial.suggest_categorical("activation_fn", ["tanh", "relu"]),
    }


def sample_dqn_params(trial, config: TrainConfig) -> dict[str, Any]:
    """DQN's parameters as the zoo samples them (``buffer_size`` without its 1e6:
    :data:`BUFFER_SIZES`; ``learning_starts`` one that leaves steps to learn in)."""
    starts = _fitting(LEARNING_STARTS, lambda n: n < config.total_timesteps)
    return {
        "gamma": trial.suggest_categorical("gamma", [0.9, 0.95, 0.98, 0.99, 0.995, 0.999,
                                                     0.9999]),
        "learning_rate": trial.suggest_float("learning_rate", 1e-5, 1.0, log=True),
        "batch_size": trial.suggest_categorical("batch_size", [16, 32, 64, 100, 128, 256, 512]),
        "buffer_size": trial.suggest_categorical("buffer_size", list(BUFFER_SIZES)),
        "exploration_final_eps": trial.suggest_float("exploration_final_eps", 0.0, 0.2),
        "exploration_fraction": trial.suggest_float("exploration_fraction", 0.0, 0.5),
        "target_update_interval": trial.suggest_categorical(
            "target_update_interval", [1, 1000, 5000, 10000, 15000, 20000]),
        "learning_starts": trial.suggest_categorical("learning_starts", starts),
        "train_freq": trial.suggest_categorical("train_freq", [1, 4, 8, 16, 128, 256, 1000]),
        "subsample_steps": trial.suggest_categorical("subsample_steps", [1, 2, 4, 8]),
        "net_arch": trial.suggest_categorical("net_arch", ["tiny", "small", "medium"]),
    }


def sample_qrdqn_params(trial, config: TrainConfig) -> dict[str, Any]:
    """QR-DQN's: DQN's and the number of quantiles, as the zoo samples them."""
    return sample_dqn_params(trial, config) | {
        "n_quantiles": trial.suggest_int("n_quantiles", 5, 200)}


def ppo_hyperparameters(params: dict[str, Any], config: TrainConfig) -> dict[str, Any]:
    """PPO's, MaskablePPO's or A2C's sampled ``params`` as a config's hyperparameters:
    ``gamma`` and ``gae_lambda`` from their ``one_minus_`` forms, ``net_arch`` and
    ``activation_fn`` as the zoo's ``policy_kwargs`` string, ``batch_size`` at most a
    rollout (``n_steps`` x ``n_envs``)."""
    arch = NET_ARCH[params["net_arch"]]
    out = {k: v for k, v in params.items()
           if k not in ("one_minus_gamma", "one_minus_gae_lambda", "net_arch", "activation_fn")}
    if "batch_size" in out:
        out["batch_size"] = min(out["batch_size"], params["n_steps"] * config.n_envs)
    out["gamma"] = 1.0 - params["one_minus_gamma"]
    out["gae_lambda"] = 1.0 - params["one_minus_gae_lambda"]
    out["policy_kwargs"] = (f"dict(net_arch=dict(pi={arch}, vf={arch}), "
                            f"activation_fn={ACTIVATION[params['activation_fn']]})")
    return out


def trpo_hyperparameters(params: dict[str, Any], config: TrainConfig) -> dict[str, Any]:
    """TRPO's sampled ``params`` as a config's hyperparameters: ``net_arch`` and
    ``activation_fn`` as the zoo's ``policy_kwargs`` string (its ``ortho_init=False``),
    ``batch_size`` at most a rollout (``n_steps`` x ``n_envs``; the zoo caps it at
    ``n_steps``)."""
    arch = NET_ARCH[params["net_arch"]]
    out = {k: v for k, v in params.items() if k not in ("net_arch", "activation_fn")}
    out["batch_size"] = min(out["batch_size"], params["n_steps"] * config.n_envs)
    out["policy_kwargs"] = (f"dict(net_arch=dict(pi={arch}, vf={arch}), "
                            f"activation_fn={ACTIVATION[params['activation_fn']]}, "
                            "ortho_init=False)")
    return out


def dqn_hyperparameters(params: dict[str, Any], config: TrainConfig) -> dict[str, Any]:
    """DQN's or QR-DQN's sampled ``params`` as a config's hyperparameters: ``gradient_steps``
    from ``train_freq // subsample_steps`` (at least 1), ``net_arch`` (and ``n_quantiles``)
    as the zoo's ``policy_kwargs`` string."""
    out = {k: v for k, v in params.items()
           if k not in ("subsample_steps", "net_arch", "n_quantiles")}
    out["gradient_steps"] = max(params["train_freq"] // params["subsample_steps"], 1)
    quantiles = (f", n_quantiles={params['n_quantiles']}" if "n_quantiles" in params else "")
    out["policy_kwargs"] = f"dict(net_arch={NET_ARCH[params['net_arch']]}{quantiles})"
    return out


@dataclass(frozen=True)
class Sampler:
    """An algorithm's search space: ``sample(trial, config)`` draws the parameters by the
    zoo's names, ``hyperparameters(params, config)`` makes them the config's."""

    sample: Callable[[Any, TrainConfig], dict[str, Any]]
    hyperparameters: Callable[[dict[str, Any], TrainConfig], dict[str, Any]]


SAMPLERS = {
    "maskable_ppo": Sampler(sample_ppo_params, ppo_hyperparameters),
    "ppo": Sampler(sample_ppo_params, ppo_hyperparameters),
    "a2c": Sampler(sample_a2c_params, ppo_hyperparameters),
    "dqn": Sampler(sample_dqn_params, dqn_hyperparameters),
    "qrdqn": Sampler(sample_qrdqn_params, dqn_hyperparameters),
    "recurrent_ppo": Sampler(sample_ppo_params, ppo_hyperparameters),
    "trpo": Sampler(sample_trpo_params, trpo_hyperparameters),
}
"""Each algorithm's search space (MaskablePPO's is PPO's, as the zoo would sample it;
RecurrentPPO's is PPO's, as the zoo's ``sample_ppo_lstm_params`` samples it)."""


def first_update(hyperparameters: dict[str, Any], n_envs: int) -> int:
    """The step at which a trial's policy is first updated, after the evaluation made there
    (SB3 evaluates a rollout's last step before it learns from it): on-policy, a rollout
    (``n_steps`` x ``n_envs``); off-policy, the first rollout (``train_freq`` x ``n_envs``)
    that ends past ``learning_starts`` (SB3's defaults, 4 and 100, where the config gives
    none). An evaluation at or before it scores the untrained network, which neither counts
    towards the trial's objective nor is shown to the pruner."""
    if "n_steps" in hyperparameters:
        return int(hyperparameters["n_steps"]) * n_envs
    rollout = int(hyperparameters.get("train_freq", 4)) * n_envs
    return (int(hyperparameters.get("learning_starts", 100)) // rollout + 1) * rollout


def trial_config(given: dict, algorithm: str, hyperparameters: dict[str, Any]) -> dict:
    """The config file's content ``given`` with ``hyperparameters`` over its environment's
    settings (its ``AutoProfiler-v0`` key, or the zoo's fallback ``default``) and its
    ``autoprofiler.algorithm`` set (a file named otherwise than its algorithm still says
    it)."""
    content = copy.deepcopy(given)
    key = ENV_ID if ENV_ID in content else "default"
    content[key] = {**(content.get(key) or {}), **hyperparameters}
    own = dict(content.get(OWN) or {})
    content[OWN] = {"algorithm": algorithm, **{k: v for k, v in own.items()
                                              if k != "algorithm"}}
    return content


# -- the study -------------------------------------------------------------------------------

@dataclass(frozen=True)
class TrialRecord:
    """One trial as the study holds it (a line of ``trials.csv``)."""

    number: int
    state: str              # COMPLETE, PRUNED, FAIL, RUNNING (Optuna's names)
    objective: float | None  # its best evaluation's; a pruned trial's last (Optuna's)
    params: dict[str, Any]   # sampled, by the zoo's names
    steps: int | None        # trained
    best_step: int | None    # the step of its best evaluation
    seconds: float | None
    folder: Path

    @property
    def geomean_speedup(self) -> float | None:
        return None if self.objective is None else math.exp(self.objective)


@dataclass(frozen=True)
class TuneResult:
    """What a study holds once the command is done with it."""

    out: Path
    algorithm: str
    steps: int
    trials: tuple[TrialRecord, ...]
    best: TrialRecord | None  # the best COMPLETE trial; None where none is
    best_config: Path | None
    csv: Path
    ran: int                  # trials this command finished
    seconds: float            # this command's

    def count(self, *states: str) -> int:
        return sum(t.state in states for t in self.trials)


def default_out(config_file: Path) -> Path:
    """Where a study goes by default: ``runs/tune/<config stem>``."""
    return Path("runs") / "tune" / Path(config_file).stem


def trial_seed(seed: int, place: int) -> int:
    """The sampler's seed for the trial that finishes ``place``-th (from 0; failed trials do
    not count) in a study seeded ``seed``: the same whether the study ran through or was
    stopped and continued."""
    import numpy as np

    return int(np.random.SeedSequence([seed, place]).generate_state(1)[0])


def _make_sampler(optuna, method: str, seed: int, n_startup_trials: int):
    if method == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    with warnings.catch_warnings():  # multivariate: experimental in Optuna 4
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(n_startup_trials=n_startup_trials, seed=seed,
                                          multivariate=True)


def _make_pruner(optuna, method: str, n_startup_trials: int, n_evaluations: int):
    if method == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=n_startup_trials,
                                           n_warmup_steps=n_evaluations // 3)
    return optuna.pruners.NopPruner()


def tune(config: str | Path = "maskable_ppo", out: str | Path | None = None,
         trials: int = DEFAULT_TRIALS, steps: int | None = None, sampler: str = "tpe",
         pruner: str = "median", seed: int = 0,
         n_startup_trials: int = DEFAULT_STARTUP_TRIALS, n_evaluations: int | None = None,
         progress: bool = True, command: list[str] | None = None, wandb: bool = False,
         wandb_group: str | None = None) -> TuneResult:
    """Runs (or continues) the study of ``config`` (a shipped config's name or a file) in
    ``out`` until ``trials`` trials are finished (the module docstring says how); writes
    ``trials.csv`` and ``best.yml`` after each trial, and returns what the study holds. A
    ``KeyboardInterrupt`` ends the trial under way FAIL, writes the files and goes on up.
    ``wandb``: the study logged to a wandb run (the module docstring; started once the study
    in ``out`` is found to be this command's, so a refused one starts none).
    Errors: an :class:`AutoProfilerError` without Optuna, a :class:`ConfigError` for a bad
    config or settings other than the study's in ``out``."""
    optuna = _optuna()
    for name, value, least in (("--trials", trials, 1), ("--seed", seed, 0),
                               ("--n-startup-trials", n_startup_trials, 0),
                               ("--steps", 1 if steps is None else steps, 1),
                               ("--n-evaluations",
                                1 if n_evaluations is None else n_evaluations, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise AutoProfilerError(f"{name} {value}: a whole number >= {least}")
    if sampler not in SAMPLER_METHODS:
        raise AutoProfilerError(f"--sampler {sampler}: one of {', '.join(SAMPLER_METHODS)}")
    if pruner not in PRUNER_METHODS:
        raise AutoProfilerError(f"--pruner {pruner}: one of {', '.join(PRUNER_METHODS)}")
    path = config_path(config)
    base, given = read_config(path)
    if steps is not None:
        base = base.replace(total_timesteps=steps)
    if n_evaluations is not None:
        base = base.replace(eval=dataclasses.replace(
            base.eval, frequency=max(base.total_timesteps // n_evaluations, 1)))
    if base.eval.frequency == 1 and n_evaluations is not None \
            and n_evaluations > base.total_timesteps:
        warn(f"--n-evaluations {n_evaluations} is more than --steps {base.total_timesteps}: "
             "each trial is evaluated at every step")
    if base.algorithm in ("maskable_ppo", "ppo", "a2c") and \
            base.total_timesteps <= min(ROLLOUTS) * base.n_envs:
        warn(f"--steps {base.total_timesteps}: no rollout of the zoo's (n_steps >= "
             f"{min(ROLLOUTS)}, x {base.n_envs} environments) ends before a trial's last "
             "evaluation, so every trial is scored untrained: give more --steps")
    settings = {"config": base.to_dict(), "sampler": sampler, "pruner": pruner, "seed": seed,
                "n_startup_trials": n_startup_trials}
    out = Path(out) if out is not None else default_out(path)
    command = list(command if command is not None else ["autoprofiler", *sys.argv[1:]])
    tracking = {"group": wandb_group} if wandb else None
    with one_writer(out, "autoprofiler tune"):
        return _Study(optuna, out, path, base, given, settings, command, progress,
                      tracking).run(trials)


class _Study:
    """A study in ``out``, held by this process."""

    def __init__(self, optuna, out: Path, path: Path, base: TrainConfig, given: dict,
                 settings: dict, command: list[str], progress: bool,
                 tracking: dict | None = None) -> None:
        self.optuna, self.out, self.path, self.base, self.given = optuna, out, path, base, given
        self.settings, self.command, self.progress = settings, command, progress
        self.tracking = tracking  # wandb's options (None: no wandb)
        self.source = str(path)
        self.storage = f"sqlite:///{(out / STUDY_FILE).resolve()}"
        # the places of the evaluations on the schedule (the pruner's steps)
        self.n_evaluations = max(base.total_timesteps // base.eval.frequency, 1)

    def run(self, trials: int) -> TuneResult:
        from experiments.tracking import finishing

        optuna = self.optuna
        started, ran = time.perf_counter(), 0
        verbosity = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.WARNING)  # this command says its own
        try:
            study = self._open()
            goes_on = bool(self._trials(study))
            self._fail_killed(study)
            with finishing(self._wandb_run(goes_on)) as run:
                if run is not None and goes_on and not run.config.get("resumed"):
                    for record in self._records(study):  # continued in a new wandb run: the
                        if record.state in FINISHED:  # trials before it are its rows too
                            log_trial(run, record)
                try:
                    while self._finished(study) < trials:
                        waiting = study.get_trials(deepcopy=False,
                                                   states=(optuna.trial.TrialState.WAITING,))
                        # the next trial: a failed one's parameters queued again, else new
                        number = (waiting[0].number if waiting
                                  else len(study.get_trials(deepcopy=False)))
                        place = self._finished(study)
                        print(f"trial {number} ({place + 1} of {trials})", flush=True)
                        study = self._load(place)  # its sampler seeded for this place
                        record = self._run_trial(study)
                        ran += 1
                        self._write(study)
                        if run is not None:
                            log_trial(run, record)
                        print(_trial_line(record), flush=True)
                finally:  # a Ctrl-C too: the files say what the study holds
                    records, best, best_config = self._write(study)
                    if run is not None:
                        try:
                            log_study(run, records, best, best_config)
                        except Exception as e:  # noqa: BLE001  (not to replace a Ctrl-C)
                            warn(f"wandb: the study's summary was not logged "
                                 f"({type(e).__name__}: {e})")
        finally:
            optuna.logging.set_verbosity(verbosity)
        return TuneResult(self.out, self.base.algorithm, self.base.total_timesteps, records,
                          best, best_config, self.out / TRIALS_CSV, ran,
                          time.perf_counter() - started)

    def _wandb_run(self, goes_on: bool):
        """The study's wandb run (None without ``--wandb``): the one its earlier commands
        logged to where the study goes on, else a new one."""
        if self.tracking is None:
            return None
        from experiments.tracking import versions, wandb_run

        stem = self.path.stem
        config = {"command": "tune", "config_file": portable(self.path),
                  **_as_json(self.settings), "dataset_sha256": self._dataset().get("sha256"),
                  "versions": versions()}
        run = wandb_run("tune", config, group=self.tracking.get("group"),
                        default_group=f"tune-{stem}", name=f"{stem}-seed{self.settings['seed']}",
                        folder=self.out, resuming=goes_on)
        run.define_metric("trial")
        run.define_metric("*", step_metric="trial")  # each trial's row against its number
        return run

    # -- the storage

    def _open(self):
        """The study of ``out``: created with this command's settings, or the one there,
        whose settings must be this command's."""
        optuna = self.optuna
        from sqlalchemy.exc import SQLAlchemyError

        dataset = self._dataset()  # an unknown dataset says so, not that the study is bad
        try:
            study = optuna.create_study(storage=self.storage, study_name=STUDY_NAME,
                                        direction="maximize", load_if_exists=True)
            if "settings" not in study.user_attrs and not study.get_trials(deepcopy=False):
                # new (or made by a command stopped before it said its settings)
                study.set_user_attr("settings", _as_json(self.settings))
                study.set_user_attr("dataset_sha256", dataset.get("sha256"))
                study.set_user_attr("config_file", portable(self.path))
                study.set_user_attr("command", self.command)
                return study
        except (SQLAlchemyError, optuna.exceptions.OptunaError, ValueError) as e:
            raise AutoProfilerError(f"{self.out / STUDY_FILE}: not a study autoprofiler tune "
                                    f"can read ({type(e).__name__}: "
                                    f"{str(e).splitlines()[0] if str(e) else ''}): remove it "
                                    "to start a new study, or give another --out") from None
        if "settings" not in study.user_attrs:
            raise AutoProfilerError(f"{self.out / STUDY_FILE}: a study of trials that "
                                    "autoprofiler tune did not start (it has no settings): "
                                    "give another --out, or remove it to start a new study")
        self._check_same(study)
        self._check_same_dataset(study)
        return study

    def _dataset(self) -> dict:
        """The metadata of the dataset the config's environment replays."""
        from autoprofiler_env.dataset import Dataset

        return Dataset.load(self.base.env.get("dataset")).metadata

    def _check_same_dataset(self, study) -> None:
        """A :class:`ConfigError` where the config's dataset is not the one the study's trials
        trained on (its sha256, or an earlier file of the same content)."""
        from autoprofiler_env.dataset.format import same_content

        was = study.user_attrs.get("dataset_sha256")
        metadata = self._dataset()
        if was is not None and not same_content(metadata, was):
            raise ConfigError(f"{self.out}: cannot continue the study there: its trials trained "
                              f"on the dataset of sha256 {was}, the config's is now "
                              f"{metadata.get('sha256')}: continue it with that dataset, or "
                              "give another --out to start a new study")

    def _check_same(self, study) -> None:
        """A :class:`ConfigError` naming the first setting of this command that is not the
        study's: a study continues only as it was started."""
        old = study.user_attrs.get("settings") or {}
        new = _as_json(self.settings)
        said = " ".join(study.user_attrs.get("command") or []) or "its command"
        head = f"{self.out}: cannot continue the study there with other settings"
        tail = (f"continue it with its own (it was started by `{said}`), or give another "
                "--out to start a new study")
        found = _first_difference(old.get("config"), new["config"])
        if found is not None:
            key, was, now = found
            name = _config_key(key) if key else "the config"
            if key == ("eval", "frequency"):
                name += " (or --n-evaluations)"
            raise ConfigError(f"{head}: {name} is {json.dumps(now)} now (--config "
                              f"{portable(self.path)}), the study's is {json.dumps(was)} "
                              f"(--config {study.user_attrs.get('config_file')}): {tail}")
        for key in ("sampler", "pruner", "seed", "n_startup_trials"):
            if old.get(key) != new[key]:
                raise ConfigError(f"{head}: --{key.replace('_', '-')} is {new[key]} now, the "
                                  f"study's is {old.get(key)}: {tail}")

    def _load(self, place: int):
        """The study, its sampler seeded for the trial that finishes ``place``-th (trials that
        failed do not count)."""
        seed = self.settings["seed"]
        return self.optuna.load_study(
            study_name=STUDY_NAME, storage=self.storage,
            sampler=_make_sampler(self.optuna, self.settings["sampler"],
                                  trial_seed(seed, place), self.settings["n_startup_trials"]),
            pruner=_make_pruner(self.optuna, self.settings["pruner"],
                                self.settings["n_startup_trials"], self.n_evaluations))

    def _fail_killed(self, study) -> None:
        """Marks FAIL the trials a killed process left RUNNING (this one holds ``out``: no
        other runs them) and removes the folders of the failed trials."""
        state = self.optuna.trial.TrialState
        for trial in study.get_trials(deepcopy=False, states=(state.RUNNING,)):
            study.tell(trial.number, state=state.FAIL)
            self._retry(study, trial.number)
            print(f"trial {trial.number} was left running by a process that ended (killed): "
                  "marked FAIL, not counted; its parameters are tried again as the next "
                  "trial", flush=True)
        for trial in study.get_trials(deepcopy=False, states=(state.FAIL,)):
            self._remove(self._folder(trial.number))

    def _retry(self, study, number: int) -> None:
        """Queues the parameters of the failed trial ``number`` for the next trial (Optuna's
        ``enqueue_trial``): the study goes on as one that never stopped would."""
        params = study.get_trials(deepcopy=False)[number].params
        if params:
            study.enqueue_trial(dict(params), skip_if_exists=False)

    def _trials(self, study) -> list:
        """The study's trials but those queued and not started (``WAITING``: a failed trial's
        parameters, :meth:`_retry`)."""
        state = self.optuna.trial.TrialState
        return study.get_trials(deepcopy=False, states=(state.COMPLETE, state.PRUNED,
                                                        state.FAIL, state.RUNNING))

    def _finished(self, study) -> int:
        state = self.optuna.trial.TrialState
        return len(study.get_trials(deepcopy=False, states=(state.COMPLETE, state.PRUNED)))

    def _folder(self, number: int) -> Path:
        return self.out / "trials" / str(number)

    def _remove(self, folder: Path) -> None:
        if folder.is_dir():
            shutil.rmtree(folder)

    # -- a trial

    def _run_trial(self, study) -> TrialRecord:
        """Asks the study for a trial, trains it and tells the study how it ended."""
        optuna = self.optuna
        state = optuna.trial.TrialState
        trial = study.ask()
        try:
            value = self._objective(trial)
        except optuna.TrialPruned:
            frozen = study.tell(trial, state=state.PRUNED)
        except BaseException:  # an error, Ctrl-C: the trial failed, the study stops
            study.tell(trial, state=state.FAIL)
            self._retry(study, trial.number)
            self._remove(self._folder(trial.number))
            raise
        else:
            frozen = study.tell(trial, value)
        return self._record(frozen)

    def _objective(self, trial) -> float:
        """Trains the trial's config; its best evaluation's objective. Raises
        ``optuna.TrialPruned`` where the pruner stopped it (or its training raised a
        ``ValueError`` or an ``AssertionError``, as the zoo prunes those)."""
        base = self.base
        sampler = SAMPLERS[base.algorithm]
        params = sampler.sample(trial, base)
        content = trial_config(self.given, base.algorithm,
                               sampler.hyperparameters(params, base))
        config = config_from_dict(content, self.source, algorithm=base.algorithm).replace(
            total_timesteps=base.total_timesteps, eval=base.eval)
        folder = self._folder(trial.number)
        self._remove(folder)  # a number is never used twice: anything there is stale
        trial.set_user_attr("folder", folder.relative_to(self.out).as_posix())
        reported, stopped = set(), []
        untrained = first_update(config.hyperparameters, config.n_envs)

        def after_evaluation(steps: int, objective: float) -> bool:
            if steps <= untrained:  # the untrained network's score: not the trial's
                return True
            place = steps // base.eval.frequency
            if place not in reported:  # a rollout longer than the frequency: once a place
                reported.add(place)
                trial.report(objective, place)
            if steps < base.total_timesteps and trial.should_prune():
                stopped.append(steps)
                return False
            return True

        try:
            result = train(config, folder, seed=self.settings["seed"], given=content,
                           source=self.source, progress=self.progress,
                           command=self.command, resume=False,
                           after_evaluation=after_evaluation)
        except AutoProfilerError:
            raise
        except (ValueError, AssertionError) as e:  # NaN from the sampled parameters
            message = str(e).splitlines()[0] if str(e) else type(e).__name__
            trial.set_user_attr("error", message)
            warn(f"trial {trial.number}: its training raised {type(e).__name__} ({message}): "
                 "pruned, as rl-baselines3-zoo prunes such a trial")
            raise self.optuna.TrialPruned(message) from e
        trained = [e for e in result.evaluations if e.step > untrained]
        if not trained:  # --steps below every rollout (_fitting's fallback): say so
            warn(f"trial {trial.number}: no evaluation after its first update (step "
                 f"{untrained}; it trained {result.steps}): scored by its last, an untrained "
                 "network's; give more --steps")
            trained = result.evaluations[-1:]
        best = max(trained, key=lambda e: e.objective)  # the first of equals
        trial.set_user_attr("steps", result.steps)
        trial.set_user_attr("best_step", best.step)
        trial.set_user_attr("seconds", result.seconds)
        if stopped:
            raise self.optuna.TrialPruned(f"pruned at step {stopped[0]}")
        return best.objective

    def _records(self, study) -> tuple[TrialRecord, ...]:
        return tuple(self._record(t) for t in self._trials(study))

    def _record(self, trial) -> TrialRecord:
        attrs = trial.user_attrs
        return TrialRecord(trial.number, trial.state.name, trial.value, dict(trial.params),
                           attrs.get("steps"), attrs.get("best_step"), attrs.get("seconds"),
                           self._folder(trial.number))

    # -- the files

    def _write(self, study) -> tuple[tuple[TrialRecord, ...], TrialRecord | None,
                                     Path | None]:
        """``trials.csv`` and (where a trial is COMPLETE) ``best.yml``; returns the trials,
        the best COMPLETE one (:func:`best_trial`) and ``best.yml``'s path (or None, None)."""
        records = self._records(study)
        write_trials_csv(list(records), self.out / TRIALS_CSV)
        best = best_trial(records)
        if best is None:
            return records, None, None
        path = self.out / BEST_FILE
        write_atomic(path, self._best_yaml(best, len(records)).encode())
        return records, best, path

    def _best_yaml(self, best: TrialRecord, n_trials: int) -> str:
        import yaml

        base = self.base
        sampler = SAMPLERS[base.algorithm]
        content = trial_config(self.given, base.algorithm,
                               sampler.hyperparameters(dict(best.params), base))
        budgets = ", ".join(f"{b:g}" for b in base.eval.budgets)
        lines = [
            f"# The best trial of {n_trials} so far (written {time.strftime('%Y-%m-%d %H:%M')}) "
            f"of: {' '.join(self.command)}",
            f"# trial {best.number} ({self.out / 'trials' / str(best.number)}): objective "
            f"{best.objective:.4f}, geometric-mean speedup {best.geomean_speedup:.4f}",
            f"# on the {base.eval.split} split at budgets {budgets}, trained "
            f"{best.steps} steps with seed {self.settings['seed']} from "
            f"{portable(self.path)}.",
            "# Its sampled parameters (rl-baselines3-zoo's names):",
            *(f"#   {k}: {_short(v)}" for k, v in best.params.items()),
            f"# Train it: autoprofiler train --config {self.out / BEST_FILE}",
            f"# (n_timesteps and eval are the config's; the trial trained --steps "
            f"{base.total_timesteps} --seed {self.settings['seed']})",
        ]
        return "\n".join(lines) + "\n" + yaml.safe_dump(content, sort_keys=False,
                                                         default_flow_style=None, width=100)


def _short(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def log_trial(run, record: TrialRecord) -> None:
    """A finished trial as a row of the study's wandb run, against its number (``trial``)."""
    row = {"trial": record.number, "state": record.state, "steps": record.steps,
           "seconds": record.seconds, **{f"params/{k}": v for k, v in record.params.items()}}
    if record.objective is not None:
        row |= {"objective": record.objective, "geomean_speedup": record.geomean_speedup}
    run.log({k: v for k, v in row.items() if v is not None})


def best_trial(records) -> TrialRecord | None:
    """The best COMPLETE trial (the first of equals, as Optuna's ``best_trial``); None where
    none is complete."""
    complete = [r for r in records if r.state == "COMPLETE"]
    return max(complete, key=lambda r: r.objective, default=None)


def log_study(run, records: tuple[TrialRecord, ...], best: TrialRecord | None,
              best_config: Path | None) -> None:
    """What the study holds, in its wandb run's summary: the counts, the best COMPLETE
    trial (``best/...``), the trials' table, and ``best.yml`` as a ``config`` artifact."""
    import wandb

    counts = {f"trials/{s.lower()}": sum(r.state == s for r in records)
              for s in ("COMPLETE", "PRUNED", "FAIL")}
    run.summary.update(counts)
    if best is not None:
        run.summary.update({"best/trial": best.number, "best/objective": best.objective,
                            "best/geomean_speedup": best.geomean_speedup,
                            **{f"best/params/{k}": v for k, v in best.params.items()}})
    if records:
        columns, rows = trials_table(list(records))
        run.log({"trials": wandb.Table(columns=columns, data=rows)})
    if best_config is not None:
        artifact = wandb.Artifact(f"tune-{run.id}", type="config",
                                  metadata={"trial": best.number if best else None})
        artifact.add_file(str(best_config))
        run.log_artifact(artifact)


def trials_table(records: list[TrialRecord]) -> tuple[list[str], list[list]]:
    """The columns and rows of ``trials.csv``: a row per trial, its parameters in
    ``params_<name>`` columns (in the order they were first sampled); None where a trial has
    no value."""
    names = list(dict.fromkeys(k for r in records for k in r.params))
    columns = ["number", "state", "objective", "geomean_speedup", "steps", "best_step",
               "seconds", *(f"params_{n}" for n in names)]
    rows = [[r.number, r.state, r.objective, r.geomean_speedup, r.steps, r.best_step,
             None if r.seconds is None else round(r.seconds, 2),
             *(r.params.get(n) for n in names)] for r in records]
    return columns, rows


def write_trials_csv(records: list[TrialRecord], path: Path) -> Path:
    """``trials.csv`` (:func:`trials_table`; an empty field where a trial has no value)."""
    columns, rows = trials_table(records)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([_blank(v) for v in row] for row in rows)
    write_atomic(path, buffer.getvalue().encode())
    return path


def _blank(value) -> str:
    return "" if value is None else str(value)


def _trial_line(record: TrialRecord) -> str:
    """What a finished trial says: its state, objective and steps."""
    parts = [f"trial {record.number}: {record.state}"]
    if record.state == "COMPLETE":
        parts.append(f"objective {record.objective:.4f} (geomean speedup "
                     f"{record.geomean_speedup:.4f}, its best evaluation at step "
                     f"{record.best_step})")
    elif record.objective is not None:  # pruned: Optuna keeps its last evaluation's
        parts.append(f"at step {record.steps}, objective {record.objective:.4f} there")
    if record.steps is not None and record.seconds is not None:
        parts.append(f"{record.steps} steps in {record.seconds:.1f} s")
    return ", ".join(parts)


def print_summary(result: TuneResult) -> None:
    """The study's counts, its best trial, and how to train it."""
    print(f"study {result.out}: {result.count(*FINISHED)} trials finished "
          f"({result.count('COMPLETE')} complete, {result.count('PRUNED')} pruned), "
          f"{result.count('FAIL')} failed; {result.ran} run by this command in "
          f"{result.seconds:.1f} s")
    saved = [result.csv, result.out / STUDY_FILE]
    if result.best is None:
        print("no trial is complete yet: no best.yml (run the command again with more "
              "--trials)")
    else:
        best = result.best
        print(f"best: trial {best.number}, objective {best.objective:.4f} (geomean speedup "
              f"{best.geomean_speedup:.4f}), {best.steps} steps")
        for name, value in best.params.items():
            print(f"  {name}: {_short(value)}")
        saved.insert(1, result.best_config)
    print(f"saved {', '.join(str(p) for p in saved)}")
    if result.best is not None:
        print(f"train it: autoprofiler train --config {result.best_config}")
