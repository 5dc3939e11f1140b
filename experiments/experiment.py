"""``autoprofiler experiment``: the comparison the mission names, in one command.

    autoprofiler experiment --config experiments/configs/compare.yaml [--out DIR] [--wandb]

The learned agents (the AutoProfiler tree, learned once per seed; RL policies, trained once
per seed) and the fixed policies of ``baselines`` (any spec :func:`experiments.policies.load`
takes: a baseline's name, a saved model or run, a tree file, a policy of your own; each run
once, a stochastic one -- the random baseline, a policy with ``seed(int)`` or ``stochastic =
True`` -- once per seed, seeded with it, as the benchmark runs it) run every problem of the
test and validation splits at every budget through the one evaluation
(:func:`~autoprofiler_env.evaluation.rollout`). The specs are loaded before anything runs (a
typo, a missing file or module is an error then, not after hours of training); a learned
policy among them whose record names another dataset or environment kwargs, or that was
trained on problems of a split scored, is warned about
(:func:`experiments.policies.learned_elsewhere`). Beside them
stands the fixed configuration chosen on the train split at each budget (the best geometric
mean there among ncu's sets, single sections, the curated list and no profile: those alone
are run on train, :func:`_choose_fixed`), the bar a learned agent must clear.

Per (budget, split) the scores are aggregated with rliable over runs x problems, on the log of
the shipped speedup: the mean (reported as the geometric-mean speedup, the project's one
score) and the interquartile mean (reported as a speedup: exp of the IQM of the logs, a
geometric IQM), each with a 95% stratified bootstrap
confidence interval that resamples the problems as well as the runs (``task_bootstrap``: the
uncertainty of a new set of kernels, which a deterministic baseline has too), and the
probability that a learned agent improves on the train-chosen fixed configuration (on a
random problem, ``P(X > Y)`` with ties counting half) with its interval, which resamples
whole runs only (:func:`improvement_over_seeds`): it says how much the seeds move it, not how
sure it is on new kernels. Beside it, every agent's wins, ties and
losses against that fixed configuration over (run, problem) pairs: where most pairs tie (the
same candidate shipped), P(> fixed) sits near 0.5 whatever happens on the rest. And every
row's geometric mean over that of the train-chosen fixed configuration and over that of the
best fixed configuration in hindsight (:data:`HINDSIGHT`: every fixed configuration run on
the split scored, the best kept per budget; a replay-only row, as the oracle's), each with
the interval of a paired bootstrap (:func:`paired_ratio`): what the problems share cancels
in a ratio on the same problems; and, against the fixed configuration chosen on train,
how many problems each row is better, equal and worse on (its runs averaged) and the p-value
of a paired sign-flip permutation test over the problems (:func:`sign_flip_p`), Holm-adjusted
for the learned agents over every learned agent and budget of the split (the claim that one
of them beats the fixed configuration is made that many times at once). Each
agent's bootstrap in each cell (and its performance profile's band) is drawn from numpy's
generator seeded afresh with :data:`BOOTSTRAP_SEED`: the same scores give the same interval
whatever else the config compares (the statistics are :mod:`experiments.stats`'). Written to
``--out``: ``leaderboard.md`` and ``leaderboard.csv``, ``near.csv`` (where the config
scores the test split: its problems with a near twin in train and the others, scored apart,
the leaderboard's last table: :func:`~autoprofiler_env.dataset.splits.near_train`),
``budgets.png`` (speedup against
budget, and each agent's ratio to the fixed configuration chosen on train, the learned
agents' with their paired intervals), ``cost.png`` (speedup against profiling cost),
``profiles.png`` (performance profiles: the share of runs x problems reaching each speedup,
the learned agents' with their bootstrap bands), ``sections.png`` and ``sections.csv`` (what
each agent profiles: per budget, the share of its episodes that collected each section),
and every run's per-problem outcomes in ``runs/<agent>/seed-<n>.json``.

Resumable: a run whose file exists is not run again, where the folder's ``settings.json``
(the env, the budgets, the splits and the dataset's sha256) is the config's, and the run
file's settings (the agent's options, and the sha256 of each file its spec reads:
:func:`experiments.policies.files_read` -- a ``tree:`` file, an ``sb3:`` model or a run's
best model, a ``py:`` module's source, the shipped tree and model; an RL agent's config
file's contents, :func:`config_sha256`) are what they would be now; a folder made with other
settings is an error, and a file changed since is a :class:`StaleRunError` naming it and the
folders to remove to run that policy again (every finished run is checked before anything
runs). A tree's learning resumes exactly (its logs replay); an RL agent's interrupted
training resumes from its last save, which is not bit-identical to an uninterrupted training
(experiments/train.py says why): the leaderboard names the agents and seeds whose training
resumed, and at which steps.
``--wandb`` starts a wandb run named after the experiment (its group too) before anything
runs (a failed one ends failed) and logs the config, the dataset's sha256, the leaderboard
and the plots; each learned agent's seed that learns or trains is a run of the same group
beside it (``<agent>-seed<n>``, job type ``learn-tree`` or ``train``: the curves those
commands log, and the agent's geometric-mean speedup and cost per split and budget in its
summary). An agent whose run file ``--out`` holds logs nothing again; one whose learning or
training finished but whose evaluation did not (interrupted between the two) gets a run with
its scores and, having nothing left to learn, no curves.

The config (YAML)::

    name: compare
    budgets: [0.1, 0.25, 0.5, 1.0]
    splits: [test, val]
    seeds: 5
    env: {}                      # make kwargs: the evaluation's environments and the RL
                                 # training get them all; the tree learner and the train-
                                 # split choice of the fixed configuration get those that
                                 # judge and score an episode (JUDGING_KWARGS)
    agents:                      # the learned agents, each run once per seed
      autoprofiler-tree: {kind: tree, rounds: 200}
      maskable-ppo: {kind: rl, config: maskable_ppo.yaml}
    baselines: [no-profile, roofline-tree, set:full, curated:cudaforge-like]
                                 # fixed policies: any spec experiments.policies.load
                                 # takes (a baseline's name, sb3:FILE, sb3:DIR, tree:FILE,
                                 # py:MODULE:ATTR); a stochastic one runs once per seed
    reps: 2000                   # bootstrap resamples
    poi_reps: 200                # for P(> fixed), whose resamples cost 50 times more
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from autoprofiler_env.atomic import one_writer, write_atomic, write_png
from autoprofiler_env.checksum import file_sha256
from autoprofiler_env.configfile import read_yaml
from autoprofiler_env.errors import AutoProfilerError, ConfigError, EmptySplitError, warn
from autoprofiler_env.numeric import is_finite_number, repeated
from autoprofiler_env.problems.loaders import SPLITS
from experiments.benchmark import best_fixed_row, write_csv
from experiments.live import LiveConfig
from experiments.stats import (
    BOOTSTRAP_SEED,
    EQUAL,
    EXACT_UP_TO,
    bootstrap,
    holm,
    improvement_over_seeds,
    interquartile_mean,
    paired_ratio,
    problem_differences,
    rliable,
    sign_flip_p,
    wins_ties_losses,
)
from experiments.tracking import finishing

TRAIN_CHOSEN = "fixed (chosen on train)"
HINDSIGHT = "fixed (best in hindsight)"
"""The fixed configuration with the best geometric mean on the split scored, at each budget:
what the best fixed choice could have shipped there, the strongest fixed comparator (a
replay-only row, as the oracle's)."""
AGENT_KINDS = ("tree", "rl")
_KEYS = {"name", "budgets", "splits", "seeds", "env", "agents", "baselines", "reps",
         "poi_reps", "live", "experiment"}


class StaleRunError(ConfigError):
    """A resumed experiment whose finished runs were made from a file that has changed
    since (a fixed policy's tree, model or module, an RL agent's config): it names the file
    and the folders to remove to run them again."""


class DamagedRunError(ConfigError):
    """A file of an experiment's folder that is not what the experiment wrote (cut short,
    edited by hand, another kind of file): it names the file and says to remove it, so that
    the run is made again rather than scored as it reads."""


def read_json(path: Path, remedy: str = "remove it to make it again (the other runs are "
                                          "kept)") -> dict:
    """The JSON object ``path`` holds, or a :class:`DamagedRunError` naming it."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise DamagedRunError(f"{path} cannot be read ({e}): {remedy}") from None
    if not isinstance(data, dict):
        raise DamagedRunError(f"{path} is not a JSON object as the experiment writes: {remedy}")
    return data


def run_outcomes(path: Path, run: dict, key: str) -> dict[str, tuple[float, float]]:
    """Per problem, the log of the shipped speedup and the profiling cost that the run file
    ``path`` (read as ``run``) holds for ``key`` (``split/budget``); a missing cell, a speedup
    that is not a number > 0 or a cost that is not a number >= 0 is a
    :class:`DamagedRunError`."""
    outcomes = run.get("outcomes")
    cell = outcomes.get(key) if isinstance(outcomes, dict) else None
    if not isinstance(cell, dict) or not cell:
        raise DamagedRunError(f"{path} holds no outcomes for {key}: remove it to make it "
                              "again (the other runs are kept)")
    values = {}
    for problem, outcome in cell.items():
        speedup, cost = ((outcome.get("speedup"), outcome.get("cost"))
                         if isinstance(outcome, dict) else (None, None))
        if not (is_finite_number(speedup) and is_finite_number(cost) and speedup > 0
                and cost >= 0):
            raise DamagedRunError(
                f"{path}: the outcome of {problem} at {key} is not a speedup > 0 and a cost "
                f">= 0 ({str(outcome)[:80]}): remove the file to make it again (the other "
                "runs are kept)")
        values[problem] = (math.log(speedup), float(cost))
    return values


@dataclass(frozen=True)
class AgentSpec:
    name: str
    kind: str
    options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ExperimentConfig:
    name: str
    budgets: tuple[float, ...]
    splits: tuple[str, ...]
    seeds: tuple[int, ...]
    env: dict
    agents: tuple[AgentSpec, ...]
    baselines: tuple[str, ...]
    reps: int = 2000
    poi_reps: int = 200
    path: Path | None = None
    live: LiveConfig | None = None  # evaluate on the live backend too (experiments/live.py)


def load_config(path: str | Path) -> ExperimentConfig:
    """The experiment config in ``path``; :class:`ConfigError` naming the key otherwise."""
    path = Path(path)
    data = read_yaml(path, "experiment config")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: an experiment config is a mapping of keys "
                          f"({', '.join(sorted(_KEYS))})")
    unknown = set(data) - _KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown key {sorted(unknown)[0]!r}; the keys are "
                          f"{', '.join(sorted(_KEYS - {'experiment'}))}")

    def need(key: str, kind: type, default=None):
        value = data.get(key, default)
        if value is None or not isinstance(value, kind) or isinstance(value, bool):
            raise ConfigError(f"{path}: {key!r} must be a {kind.__name__}, got {value!r}")
        return value

    budgets = need("budgets", list, [0.1, 0.25, 0.5, 1.0])
    if not budgets or any(not is_finite_number(b) or b <= 0 for b in budgets):
        raise ConfigError(f"{path}: 'budgets' must be a list of fractions > 0, got {budgets!r}")
    splits = need("splits", list, ["test", "val"])
    if not splits or any(s not in SPLITS for s in splits):
        raise ConfigError(f"{path}: 'splits' must name train, val or test, got {splits!r}")
    seeds = data.get("seeds", 5)
    if isinstance(seeds, int) and not isinstance(seeds, bool) and seeds > 0:
        seeds = list(range(seeds))
    if not isinstance(seeds, list) or not seeds or any(
            not isinstance(s, int) or isinstance(s, bool) for s in seeds):
        raise ConfigError(f"{path}: 'seeds' must be a count > 0 or a list of integers, got "
                          f"{seeds!r}")
    for key, values in (("budgets", budgets), ("splits", splits), ("seeds", seeds)):
        again = repeated(values)
        if again:  # each would be run and reported again
            raise ConfigError(f"{path}: {key!r} names {', '.join(map(str, again))} more than "
                              "once: give each once")
    agents = need("agents", dict, {})
    specs = []
    for name, options in agents.items():
        if not re.fullmatch(FOLDER_NAME, str(name)):  # agents/<name>: never a path
            raise ConfigError(f"{path}: agents: {str(name)[:80]!r} must be a folder name "
                              "(letters, digits, . _ -; its runs are in agents/<name>)")
        if not isinstance(options, dict) or options.get("kind") not in AGENT_KINDS:
            raise ConfigError(f"{path}: agents.{name} must be a mapping with kind one of "
                              f"{', '.join(AGENT_KINDS)}, got {options!r}")
        options = {k: v for k, v in options.items() if k != "kind"}
        _check_agent(path, str(name), AGENT_OPTIONS[agents[name]["kind"]], options)
        specs.append(AgentSpec(str(name), agents[name]["kind"], options))
        if specs[-1].kind == "rl":  # there, not after the runs before it
            _rl_config_file(specs[-1], path)
    baselines = need("baselines", list, [])
    _check_baselines(path, baselines, [s.name for s in specs], "live" in data)
    reps = need("reps", int, 2000)
    poi_reps = need("poi_reps", int, 200)
    for key, value in (("reps", reps), ("poi_reps", poi_reps)):
        if value < 1:  # checked now, not when the statistics come after every run
            raise ConfigError(f"{path}: {key!r} must be a count of bootstrap resamples >= 1, "
                              f"got {value}")
    name = str(need("name", str, path.stem))
    if not re.fullmatch(FOLDER_NAME, name):
        raise ConfigError(f"{path}: 'name' must be a folder name (letters, digits, . _ -; it "
                          f"is runs/experiment/<name>), got {name!r}")
    env = need("env", dict, {})
    for key in ("split", "problems"):
        if key in env:
            raise ConfigError(f"{path}: env.{key}: the experiment sets each environment's "
                              "problems from 'splits' (and learns on train): leave it out")
    from agents.rl.config import check_env_kwargs

    check_env_kwargs(env, lambda key, message: ConfigError(f"{path}: {key}: {message}"), "env.")
    live = LiveConfig.parse(data["live"], str(path)) if "live" in data else None
    return ExperimentConfig(name, tuple(float(b) for b in budgets), tuple(splits), tuple(seeds),
                            env, tuple(specs), tuple(str(b) for b in baselines), reps, poi_reps,
                            path, live)


FOLDER_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
"""An experiment's ``name`` and its agents' names: each is a folder's name."""


AGENT_OPTIONS = {
    "tree": {"rounds": "count", "proposals": "count", "patience": "count0",
             "margin": "fraction", "start": "str", "proposer": "str"},
    "rl": {"config": "str", "steps": "count"},
}
"""Each agent kind's options and what each takes (:func:`_check_agent`, when the config is
read: the one check of them)."""


def _check_agent(path: Path, name: str, accepted: dict[str, str], options: dict) -> None:
    """An agent's options checked when the config is read, not after hours of runs."""
    for key, value in options.items():
        where = f"{path}: agents.{name}.{key}"
        kind = accepted.get(key)
        if kind is None:
            raise ConfigError(f"{path}: agents.{name}: unknown key {key!r} "
                              f"({', '.join(accepted)})")
        if kind in ("count", "count0") and not (
                isinstance(value, int) and not isinstance(value, bool)
                and value >= (1 if kind == "count" else 0)):
            raise ConfigError(f"{where}: a whole number >= {1 if kind == 'count' else 0}, "
                              f"got {value!r}")
        if kind == "fraction" and not (is_finite_number(value) and value >= 0):
            raise ConfigError(f"{where}: a finite number >= 0, got {value!r}")
        if kind == "str" and not (isinstance(value, str) and value):
            raise ConfigError(f"{where}: a name, got {value!r}")


def _check_baselines(path: Path, baselines: list, agents: list[str], live: bool) -> None:
    """The fixed policies' specs checked as far as they can be without an environment, when
    the config is read (each is loaded for the environment before anything runs)."""
    from experiments.policies import check, kind

    for spec in baselines:
        if not isinstance(spec, str) or not spec:
            raise ConfigError(f"{path}: 'baselines' must be a list of policy specs (a "
                              "baseline's name, sb3:FILE, sb3:DIR, tree:FILE, py:MODULE:ATTR), "
                              f"got {spec!r}")
        if live and kind(spec) != "baseline":
            raise ConfigError(f"{path}: baselines: {spec!r}: the live evaluation (the 'live' "
                              "key) plays the baselines by name only (experiments/live.py): "
                              "give sb3:, tree:, py: and the shipped policies in a config "
                              "without 'live'")
        try:
            check(spec)
        except AutoProfilerError as e:
            raise ConfigError(f"{path}: baselines: {e}") from None
    names = agents + [str(b) for b in baselines] + [TRAIN_CHOSEN, HINDSIGHT]
    names += [] if "oracle" in baselines else ["oracle"]  # the rows the experiment adds
    folders = [_run_file(Path(), name, 0).parent for name in names]
    clash = next((n for n, f in zip(names, folders) if folders.count(f) > 1), None)
    if clash is not None:
        raise ConfigError(f"{path}: {clash!r} is given twice (or its run folder, runs/"
                          f"{_run_file(Path(), clash, 0).parent.name}, is another's): name "
                          "each agent and baseline once")


def config_path(spec: str | Path) -> Path:
    """An experiment config: a path, or the name of a shipped one (``compare``)."""
    from experiments.train import config_path as find

    try:
        return find(spec, experiment=True)
    except AutoProfilerError as e:
        raise ConfigError(str(e)) from None


# -- running --------------------------------------------------------------------------------

def _outcomes(env, policy, budget: float, masked: list | None = None) -> dict:
    """Per problem: the shipped speedup and the profiling cost (seconds) at ``budget``; each
    episode's record is added to ``masked`` (what :func:`masked_note` reads)."""
    from autoprofiler_env.evaluation import rollout
    from autoprofiler_env.scoring import shipped_speedup

    records = rollout(env, policy, budget=budget)
    if masked is not None:
        masked += records
    return {r.problem: {"speedup": shipped_speedup(r.correct, r.speedup), "cost": r.cost,
                        "sections": list(r.sections), "candidate": r.candidate}
            for r in records}


JUDGING_KWARGS = ("dataset", "optimizer", "tolerance", "llm_missing", "cost_penalty")
"""The environment kwargs of a config's ``env`` that the tree learner and the train-split choice
of the fixed configuration take (what judges and scores an episode), so that they learn and
choose under the rules the evaluation applies."""


def _judging(config: ExperimentConfig) -> dict:
    """The config's :data:`JUDGING_KWARGS` that it sets."""
    return {k: config.env[k] for k in JUDGING_KWARGS if config.env.get(k) is not None}


def _run_file(out: Path, agent: str, seed: int) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in agent)
    return out / "runs" / safe / f"seed-{seed}.json"


def _learned_policy(spec: AgentSpec, seed: int, config: ExperimentConfig, out: Path, envs,
                    wandb_run=None):
    """Learns (or trains) ``spec``'s agent for ``seed``, logging to ``wandb_run`` (None:
    nowhere); returns a policy for the environments."""
    if spec.kind == "tree":
        from agents.tree import TreePolicy
        from experiments.learn_tree import learn_tree, make_proposer

        options = dict(spec.options)
        proposer = make_proposer(options.pop("proposer", "search"), seed)
        tree, _ = learn_tree(list(config.budgets), proposer,
                             out / "agents" / spec.name / f"seed-{seed}", progress=False,
                             wandb_run=wandb_run, **(_judging(config) | options))
        return lambda env: TreePolicy(tree, env, spec.name)
    return _rl_policy(spec, seed, config, out, wandb_run)


def _rl_policy(spec: AgentSpec, seed: int, config: ExperimentConfig, out: Path,
               wandb_run=None):
    """Trains ``spec``'s RL agent for ``seed`` (``autoprofiler train``'s run, in
    ``out/agents/<name>/seed-<n>``; a finished run there is loaded, not trained again) and
    returns its best model (kept by the validation evaluation during training)."""
    from agents.rl import load_run
    from agents.rl.config import read_config
    from experiments.train import portable, read_run, train

    options = dict(spec.options)
    path = _rl_config_file(spec, config.path)
    train_config, given = read_config(path)
    if "steps" in options:
        train_config = train_config.replace(total_timesteps=int(options["steps"]))
    if config.env:  # the experiment's dataset and optimizer are the training's too
        train_config = train_config.replace(env=dict(train_config.env) | config.env)
    run_dir = out / "agents" / spec.name / f"seed-{seed}"
    run = read_run(run_dir) or {}
    status = run.get("status")
    if status == "finished":  # trained with the config as it was then
        from experiments.train import _as_json, _first_difference

        found = _first_difference(_as_json(run.get("config")),
                                  _as_json(train_config.to_dict()))
        if found is not None:
            key = ".".join(str(k) for k in found[0]) or "the config"
            raise StaleRunError(
                f"{run_dir} was trained with another config than {path} gives now ({key}: "
                f"{json.dumps(found[1], default=str)} then, "
                f"{json.dumps(found[2], default=str)} now): remove {run_dir.parent} (and "
                f"{_run_file(out, spec.name, seed).parent}) to train {spec.name} again "
                "with the config as it is now, or give another --out")
    if status != "finished":
        # an interrupted training (Ctrl-C, SIGTERM) resumes where it was saved, a killed one
        # from its last checkpoint (train says so)
        train(train_config, run_dir, seed=seed, given=given, source=str(path),
              progress=False, wandb_run=wandb_run,
              command=["autoprofiler", "experiment", "--config", portable(config.path)])
    model = load_run(run_dir)
    return lambda env: model


def _trains_apart(config: ExperimentConfig, rl_configs: dict[str, Path], envs: dict) -> None:
    """A :class:`ConfigError` where an RL agent's training config (its ``env_kwargs``'
    ``split: null`` or ``problems``) trains on problems of a split the experiment scores,
    other than train: its rows there would score the problems it learned from."""
    from agents.rl.config import read_config
    from experiments.policies import in_sample

    for name, path in rl_configs.items():
        trained_on = read_config(path)[0].env
        for split, env in envs.items():
            said = (None if split == "train"
                    else in_sample(trained_on, env, f"of the {split} split"))
            if said is not None:
                raise ConfigError(
                    f"{config.path}: agents.{name}: its training config {path} trains on "
                    f"{said}, which the experiment scores: train on train (leave "
                    "env_kwargs.split and problems out)")


def _rl_config_file(spec: AgentSpec, experiment_file: Path | None = None) -> Path:
    """The training config file an RL agent's ``config`` option names: a path (relative: to
    the current directory, else to the experiment file's folder, where the two are kept
    side by side) or a shipped config's name; a :class:`ConfigError` naming the agent."""
    from agents.rl.config import DEFAULT_CONFIG
    from experiments.train import config_path as train_config_path

    given = spec.options.get("config", DEFAULT_CONFIG)
    beside = (Path(experiment_file).parent / given if experiment_file is not None
              and not Path(given).is_absolute() else None)
    if not Path(given).is_file() and beside is not None and beside.is_file():
        return beside
    try:
        return train_config_path(given)
    except AutoProfilerError as e:
        where = f"{experiment_file}: " if experiment_file is not None else ""
        said = str(e).removeprefix(f"--config {given}: ")
        folder = f" (here, nor in {beside.parent})" if beside is not None else ""
        raise ConfigError(f"{where}agents.{spec.name}.config: {given}: {said}{folder}") from None


def _chosen(path: Path) -> dict[str, str]:
    """The fixed configurations a chosen row's run file names, by budget (or split/budget)."""
    chosen = read_json(path).get("chosen")
    if not isinstance(chosen, dict) or not all(isinstance(v, str) for v in chosen.values()):
        raise DamagedRunError(f"{path} does not name its chosen configurations: remove it to "
                              "make it again (the other runs are kept)")
    return chosen


def _canonical(value):
    """``value`` (what YAML reads) as JSON values in one order whatever the process, each
    container tagged with its kind (a mapping and the list of its pairs differ): a mapping
    as its (key, value) pairs sorted by the key's type and repr (keys of several types do
    not sort together), a set sorted (its repr follows the hash seed), anything else but
    JSON's scalars as its type and repr."""
    if isinstance(value, dict):
        pairs = sorted(value.items(), key=lambda kv: (type(kv[0]).__name__, repr(kv[0])))
        return {"map": [[_canonical(k), _canonical(v)] for k, v in pairs]}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return {"set": sorted((_canonical(v) for v in value), key=repr)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return {"repr": [type(value).__name__, repr(value)]}


def config_sha256(path: Path) -> str:
    """The sha256 of a YAML config's contents as read (:func:`_canonical`), not of its
    bytes: a comment or a layout change leaves the runs made from it as they were (keyed by
    the bytes, an RL agent's every seed was stale after one, to be trained again).

    Raises:
        ConfigError: the file cannot be read as YAML, or refers to itself (an anchor inside
            its own value).
    """
    try:
        data = _canonical(read_yaml(path, "RL config"))
    except RecursionError:
        raise ConfigError(f"{path}: a value refers to itself (a YAML anchor used inside "
                          "its own value): write it out") from None
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()


def _check_run(path: Path, made: dict | None, expected: dict, spec: AgentSpec,
               out: Path, aliases: dict[str, str] | None = None) -> None:
    """A finished run's settings against those it would be made with now: another
    setting is a :class:`ConfigError`, a file it read that changed since (its sha256 in
    ``reads``) a :class:`StaleRunError` naming the file. ``aliases`` maps a checksum a run
    may have recorded to the one read now for the same contents (an RL config's bytes to
    its contents', :func:`config_sha256`)."""
    made = made if isinstance(made, dict) else {}
    if ({k: v for k, v in made.items() if k != "reads"}
            != {k: v for k, v in expected.items() if k != "reads"}):
        raise ConfigError(f"{path} was made with other settings ({made}): give "
                          f"another --out, or remove {out} to run it again (its "
                          "trained agents too)")
    then, now = made.get("reads") or {}, expected.get("reads") or {}
    if aliases and isinstance(then, dict):
        then = {f: aliases.get(v, v) if isinstance(v, str) else v for f, v in then.items()}
    if sorted(map(str, then.values())) == sorted(map(str, now.values())):
        return  # the same files' contents, wherever they are read from now (another
        # working directory, another clone): the paths are the keys, not the settings
    changed = next((f for f in [*now, *then] if then.get(f) != now.get(f)), None)
    if changed is None:
        return
    was, is_ = then.get(changed), now.get(changed)
    again = f"remove {path.parent}"
    checksum = "sha256"
    if spec.kind == "rl":
        again += f" and {out / 'agents' / spec.name}"
        checksum = "checksum"  # then: its bytes' or its contents'; now: config_sha256's
    raise StaleRunError(
        f"{changed} changed since {path} was made from it ({checksum} "
        f"{(was or 'not recorded')[:12]} then, {(is_ or 'not read')[:12]} now"
        + (", of its contents" if spec.kind == "rl" else "") + "): "
        f"{spec.name}'s runs there are the old file's. To run {spec.name} again with the file "
        f"as it is now, {again} (the other runs are kept); or put the file back, or give "
        "another --out")


def best_fixed(env, budget: float) -> str:
    """The fixed configuration (ncu's sets, single sections, the curated list, no profile)
    with the best geometric-mean speedup on ``env``'s problems at ``budget``; ties go to the
    one that fits the budget on more problems, then to the first in the baselines' order.
    The fixed configurations only: the shipped agents and the other baselines are not run."""
    from autoprofiler_env.evaluation import rollout
    from autoprofiler_env.scoring import geomean, shipped_speedup
    from baselines import all_agents, is_fixed

    rows = []
    for agent in [a for a in all_agents(env) if is_fixed(a.name)]:
        records = rollout(env, agent, budget=budget)
        rows.append({"agent": agent.name,
                     "geomean_speedup": geomean(shipped_speedup(r.correct, r.speedup)
                                                for r in records),
                     "fits_budget": float(np.mean([bool(agent.fits_budget(r.sections))
                                                   for r in records]))})
    return best_fixed_row(rows)["agent"]


def _choose_fixed(config: ExperimentConfig) -> dict[float, str]:
    """Per budget, :func:`best_fixed` on the train split, on the environment of the config's
    :data:`JUDGING_KWARGS`."""
    import gymnasium as gym

    env = gym.make("AutoProfiler-v0", split="train", **_judging(config))
    chosen = {b: best_fixed(env, b) for b in config.budgets}
    env.close()
    return chosen


def run_experiment(config: ExperimentConfig, out: Path, progress: bool = True,
                   wandb_group: str | None = None) -> dict:
    """Runs what is not run yet, then aggregates; returns the leaderboard rows and the
    score matrices. ``wandb_group``: each learned agent's learning or training that runs is
    a wandb run of this group (:func:`_agent_wandb_run`), beside the experiment's own.
    ``out`` is held while it runs (:func:`~autoprofiler_env.atomic.one_writer`): a second
    experiment into it is refused."""
    with one_writer(Path(out), "autoprofiler experiment"):
        return _run_experiment(config, Path(out), progress, wandb_group)


def _run_experiment(config: ExperimentConfig, out: Path, progress: bool,
                    wandb_group: str | None) -> dict:
    """:func:`run_experiment`'s work, ``out`` held."""
    import gymnasium as gym
    from tqdm import tqdm

    import autoprofiler_env  # noqa: F401
    from autoprofiler_env.dataset.format import recorded_as_now
    from autoprofiler_env.evaluation import masked_note
    from baselines import baseline
    from experiments.policies import checksums, learned_elsewhere, load

    rliable()  # missing, it is an error now, not after every run
    fixed = {}  # a spec that names nothing is an error now, not after hours of training
    try:
        envs = {s: gym.make("AutoProfiler-v0", split=s, **config.env) for s in config.splits}
    except EmptySplitError:  # a split the dataset lacks: the command says it in its terms
        raise
    except (ValueError, AutoProfilerError) as e:
        raise ConfigError(f"{config.path}: env: {e}") from None
    try:
        for name in config.baselines:
            fixed[name] = load(name, envs[config.splits[0]])
            fixed[name].name = name  # named by the spec, as in the leaderboard
    except (ValueError, AutoProfilerError) as e:
        raise ConfigError(f"{config.path}: baselines: {e}") from None
    for entry in fixed.values():  # each split's: it may have been trained on one of them
        said = []
        for split, env in envs.items():
            for message in learned_elsewhere(entry, env, config.env.get("dataset"),
                                             f"of the {split} split"):
                said += [] if message in said else [message]
        for message in said:
            warn(message)
    rl_configs = {s.name: _rl_config_file(s, config.path) for s in config.agents
                  if s.kind == "rl"}
    _trains_apart(config, rl_configs, envs)  # before anything is written
    # the dataset's checksum too: a dataset rebuilt under the same name (the KernelBench one
    # grows as it is recorded) must not be scored by runs made on the one before
    dataset = getattr(envs[config.splits[0]].unwrapped.backend, "dataset", None)
    settings = {"env": config.env, "budgets": list(config.budgets),
                "splits": list(config.splits),
                "dataset_sha256": dataset.metadata.get("sha256") if dataset else None}
    # the whole folder's settings: its trained agents are reused as its run files are
    stamp = out / "settings.json"
    if stamp.is_file() and (made := recorded_as_now(  # an upgraded file of its dataset too
            read_json(stamp, "remove it (every run file is checked against the config as "
                      "well)"), dataset.metadata if dataset else None)) != settings:
        raise ConfigError(f"{out} holds runs and trained agents made with other settings "
                          f"({made}, not {settings}): give another --out, or remove {out} "
                          "to run it again")
    write_atomic(stamp, (json.dumps(settings, indent=1) + "\n").encode())
    jobs = [(spec, seed) for spec in config.agents for seed in config.seeds]
    jobs += [(AgentSpec(name, "baseline"), seed) for name, entry in fixed.items()
             for seed in (config.seeds if entry.stochastic else (0,))]
    jobs += [(AgentSpec(TRAIN_CHOSEN, "chosen"), 0), (AgentSpec(HINDSIGHT, "hindsight"), 0),
             (AgentSpec("oracle", "baseline"), 0)]
    # what each job's run file must say to be reused: the settings, the agent's options and
    # the sha256 of each file it reads (a fixed policy's tree, model or module; an RL
    # agent's config), every finished run checked before anything runs
    reads = {name: checksums(name, envs[config.splits[0]]) for name in fixed}
    contents = {name: config_sha256(path) for name, path in rl_configs.items()}
    reads |= {name: {str(path): contents[name]} for name, path in rl_configs.items()}
    # a run made before the configs were keyed by their contents names the file's bytes
    aliases = {file_sha256(path): contents[name] for name, path in rl_configs.items()}

    def expected(spec: AgentSpec) -> dict:
        return (settings | {"options": spec.options}
                | ({"reads": reads[spec.name]} if reads.get(spec.name) else {}))

    stale: dict[str, StaleRunError] = {}  # every agent's said at once, its first seed's
    for spec, seed in jobs:
        path = _run_file(out, spec.name, seed)
        if path.is_file() and spec.name not in stale:
            try:
                _check_run(path, recorded_as_now(read_json(path).get("settings"),
                                                 dataset.metadata if dataset else None),
                           expected(spec), spec, out, aliases)
            except StaleRunError as e:
                stale[spec.name] = e
    if len(stale) == 1:
        raise next(iter(stale.values()))
    if stale:
        raise StaleRunError(f"the runs of {len(stale)} agents ({', '.join(stale)}) were made "
                            "from files changed since: " + " | ".join(map(str, stale.values())))
    # the fixed configuration chosen on the train split, per budget (read back from its run
    # file when that is written: a resumed experiment does not score the train split again)
    chosen_file = _run_file(out, TRAIN_CHOSEN, 0)
    if chosen_file.is_file():
        try:
            chosen = {float(b): name for b, name in _chosen(chosen_file).items()}
        except ValueError:
            raise DamagedRunError(f"{chosen_file} names its choices by budgets that are not "
                                  "numbers: remove it to make it again (the other runs are "
                                  "kept)") from None
    else:
        chosen = _choose_fixed(config)
    for spec, seed in tqdm(jobs, desc=f"experiment {config.name}", unit="run",
                           disable=not progress):
        path = _run_file(out, spec.name, seed)
        if path.is_file():
            continue
        child = (_agent_wandb_run(config, spec, seed, wandb_group, out)
                 if wandb_group is not None and spec.kind in AGENT_KINDS else None)
        with finishing(child):  # an agent's run that fails or is interrupted ends failed
            if spec.kind in AGENT_KINDS:
                make = _learned_policy(spec, seed, config, out, envs, child)
            elif spec.kind in ("chosen", "hindsight"):
                def make(env):
                    return None
            else:
                def make(env, name=spec.name, seed=seed):
                    entry = load(name, env)
                    entry.seed(seed)  # a stochastic one, as the benchmark seeds it
                    return entry.policy
            result = {"agent": spec.name, "seed": seed, "kind": spec.kind, "outcomes": {},
                      "settings": expected(spec)}
            records: list = []
            for split, env in envs.items():
                for b in config.budgets:
                    if spec.kind == "chosen":
                        policy = baseline(env, chosen[b])
                    elif spec.kind == "hindsight":  # the best on this split, chosen here
                        best = best_fixed(env, b)
                        result.setdefault("chosen", {})[f"{split}/{b:g}"] = best
                        policy = baseline(env, best)
                    else:
                        policy = make(env)
                    result["outcomes"][f"{split}/{b:g}"] = _outcomes(env, policy, b, records)
            if spec.kind == "chosen":
                result["chosen"] = {f"{b:g}": chosen[b] for b in config.budgets}
            if spec.name in fixed:  # loaded again per split and budget: the same bytes
                _unchanged(spec.name, reads[spec.name], checksums(spec.name,
                                                                  envs[config.splits[0]]))
            note = masked_note(f"{spec.name} (seed {seed})",
                               sum(r.invalid_action for r in records), len(records))
            if note:
                warn(note)
            write_atomic(path, (json.dumps(result) + "\n").encode())
            if child is not None:
                child.summary.update(_agent_summary(result))
    return aggregate(config, out)


def goes_on_experiment(config: ExperimentConfig, out: Path) -> bool:
    """Whether the experiment in ``out`` would go on from runs it finished: some of its
    learned agents' seeds have their run file, and some not yet (what ``--wandb`` resumes
    its wandb run for)."""
    made = [_run_file(out, spec.name, seed).is_file() for spec in config.agents
            for seed in config.seeds]
    if any(made):
        return not all(made)
    return (out / "agents").is_dir()  # the first agent's seed begun, none finished


def _agent_goes_on(spec: AgentSpec, state: Path) -> bool:
    """Whether an agent's learning or training in ``state`` goes on from what it did: a tree's
    logged rounds, an RL run's checkpoint (:func:`~experiments.train.interrupted_run`)."""
    if spec.kind == "tree":
        from experiments.learn_tree import goes_on

        return goes_on(state)
    from experiments.train import interrupted_run

    return interrupted_run(state) is not None


def _agent_wandb_run(config: ExperimentConfig, spec: AgentSpec, seed: int, group: str,
                     out: Path):
    """The wandb run of one learned agent's seed in an experiment's group (named
    ``<agent>-seed<n>``, of the job type of the command that would learn it alone: its curves
    as ``learn-tree``'s or ``train``'s), opened beside the experiment's run; an interrupted
    one goes on in the same run when the experiment resumes (its id kept in the agent's seed
    folder, beside what the learning resumes from)."""
    from experiments.tracking import wandb_run

    state = out / "agents" / spec.name / f"seed-{seed}"  # its learning's, or training's
    return wandb_run("learn-tree" if spec.kind == "tree" else "train",
                     {"experiment": config.name, "agent": spec.name, "kind": spec.kind,
                      "options": dict(spec.options), "seed": seed},
                     group=group, name=f"{spec.name}-seed{seed}", alongside=True,
                     folder=state, resuming=_agent_goes_on(spec, state))


def experiment_wandb_config(config: ExperimentConfig) -> dict:
    """An experiment's wandb config: the experiment config as loaded (paths relative to the
    working directory where under it), the dataset's sha256 and the versions."""
    import dataclasses

    from experiments.tracking import dataset_sha256, versions
    from experiments.train import portable

    def plain(value):
        if isinstance(value, Path):
            return portable(value)
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value

    try:
        sha256 = dataset_sha256(config.env.get("dataset"))
    except (ValueError, AutoProfilerError) as e:  # as run_experiment says it, before it runs
        raise ConfigError(f"{config.path}: env: {e}") from None
    return plain(dataclasses.asdict(config)) | {
        "command": "experiment", "dataset_sha256": sha256, "versions": versions()}


def log_experiment(run, result: dict, paths: list[Path], live_result: dict | None,
                   live_paths: list[Path]) -> None:
    """The leaderboard as a table and in the run's summary (each row's geometric-mean
    speedup and its ratio to the fixed configuration chosen on train, under
    ``<split>/budget=<b>/<agent>/``), the test split's near twins scored apart as a table
    (``near``), the share of each agent's episodes that collected each section
    (``section_shares``), the plots as images; the live evaluation's too."""
    import wandb

    from experiments.benchmark import wandb_key

    def table(rows):
        return wandb.Table(columns=list(rows[0]), data=[list(r.values()) for r in rows])

    logged = {"leaderboard": table(result["rows"])}
    if result.get("near") and result["near"]["rows"]:  # a side without problems is empty
        logged["near"] = wandb.Table(columns=list(NEAR_COLUMNS), data=[
            [r.get(c) for c in NEAR_COLUMNS] for r in result["near"]["rows"]])
    if (collected := _sections_rows(result)):  # what each agent profiles
        logged["section_shares"] = table(collected)
    logged |= {p.stem: wandb.Image(str(p)) for p in paths if p.suffix == ".png"}
    if live_paths:
        logged |= {"live/leaderboard": table(live_result["rows"]),
                   "live/replay_vs_live": table(live_result["comparison"])}
        logged |= {f"live/{p.stem}": wandb.Image(str(p)) for p in live_paths
                   if p.suffix == ".png"}
    run.log(logged)
    for row in result["rows"]:
        key = f"{row['split']}/budget={row['budget']:g}/{wandb_key(row['agent'])}"
        for column in ("geomean_speedup", "x_fixed"):
            if row.get(column) is not None:
                run.summary[f"{key}/{column}"] = row[column]


def _agent_summary(result: dict) -> dict:
    """A learned agent's run file as wandb summary numbers: per split and budget, the
    geometric mean of the shipped speedups over the problems and the mean profiling cost."""
    from autoprofiler_env.scoring import geomean

    summary = {}
    for key, cell in result["outcomes"].items():
        split, budget = key.split("/")
        summary[f"{split}/budget={budget}/geomean_speedup"] = geomean(
            o["speedup"] for o in cell.values())
        summary[f"{split}/budget={budget}/cost_s"] = float(
            np.mean([o["cost"] for o in cell.values()]))
    return summary


# -- aggregating ----------------------------------------------------------------------------

def _matrices(config: ExperimentConfig, out: Path, oracle: bool = True,
              splits: Iterable[str] | None = None) -> dict:
    """(split, budget) -> agent -> (runs x problems) log speedups, and the costs; the
    replay-only rows (the oracle's, the best fixed configuration in hindsight) where
    ``oracle``, over ``splits`` (None: the config's). Every run file must hold the same
    problems at a (split, budget) (:func:`_same_problems`)."""
    names = [s.name for s in config.agents] + list(config.baselines) + [TRAIN_CHOSEN,
                                                                         HINDSIGHT, "oracle"]
    if not oracle:
        names = [n for n in names if n not in (HINDSIGHT, "oracle")]
    keys = [(split, b) for split in (config.splits if splits is None else
                                     [s for s in config.splits if s in set(splits)])
            for b in config.budgets]
    cells: dict = {}  # (split, budget) -> name -> [(path, problem -> (log speedup, cost))]
    collected: dict = {}  # (split, budget) -> name -> [each episode's sections]
    for name in names:
        seeds = config.seeds if name in {s.name for s in config.agents} else (
            # a fixed policy: once (seed 0), a stochastic one once per seed (the live
            # evaluation plays each fixed policy once)
            [s for s in config.seeds if _run_file(out, name, s).is_file()] or (0,))
        for path in [_run_file(out, name, seed) for seed in seeds]:
            run = read_json(path)
            for split, b in keys:
                cells.setdefault((split, b), {}).setdefault(name, []).append(
                    (path, run_outcomes(path, run, f"{split}/{b:g}")))
                episodes = collected.setdefault((split, b), {})
                said = [o.get("sections") for o in run["outcomes"][f"{split}/{b:g}"].values()]
                if name not in episodes or episodes[name] is not None:  # all said, or none
                    episodes[name] = (episodes.get(name, []) + said
                                      if all(isinstance(x, list) for x in said) else None)
    scores: dict = {}
    costs: dict = {}
    problems: dict = {}
    for (split, b), by_name in cells.items():
        order = _same_problems(f"{split}/{b:g}", [c for runs in by_name.values() for c in runs])
        problems[(split, b)] = order
        for name, runs in by_name.items():
            scores.setdefault((split, b), {})[name] = np.array(
                [[cell[p][0] for p in order] for _, cell in runs])
            costs.setdefault((split, b), {})[name] = float(np.mean(
                [[cell[p][1] for p in order] for _, cell in runs]))
    shares = {key: {name: _shares(episodes) for name, episodes in by_name.items()
                    if episodes}
              for key, by_name in collected.items()}
    return {"scores": scores, "costs": costs, "problems": problems, "collected": shares}


def _shares(episodes: list[list[str]]) -> dict[str, float]:
    """Per section, the share of ``episodes`` (each its list of sections) that collected it."""
    counts: dict[str, int] = {}
    for sections in episodes:
        for section in set(sections):
            counts[section] = counts.get(section, 0) + 1
    return {section: n / len(episodes) for section, n in counts.items()}


SECTIONS_COLUMNS = ("split", "budget", "agent", "section", "share")
"""sections.csv's columns: per split, budget and agent, each section it collected and the
share of its episodes (runs x problems) that collected it (a section none collected: no
row)."""


def _sections_rows(result: dict) -> list[dict]:
    return [{"split": split, "budget": b, "agent": name, "section": section, "share": share}
            for (split, b), by_name in result["data"].get("collected", {}).items()
            for name, shares in by_name.items() for section, share in sorted(shares.items())]


def _same_problems(key: str, runs: list[tuple[Path, dict]]) -> list[str]:
    """The problems every run file of ``runs`` (path, outcomes) holds at ``key``, sorted; a
    :class:`DamagedRunError` naming the files whose problems are not those most files hold
    (or, where no set is held by more files than another, every file's count)."""
    held: dict[tuple[str, ...], list[Path]] = {}
    for path, cell in runs:
        held.setdefault(tuple(sorted(cell)), []).append(path)
    if len(held) == 1:
        return list(next(iter(held)))
    counts = sorted((len(paths) for paths in held.values()), reverse=True)
    if counts[0] == counts[1]:  # no majority: the files themselves must say which is wrong
        said = "; ".join(f"{len(problems)} in {', '.join(map(str, paths))}"
                         for problems, paths in held.items())
        raise DamagedRunError(f"the run files hold different problems at {key} ({said}): "
                              "remove the damaged one to make it again (the others are kept)")
    usual = max(held, key=lambda problems: len(held[problems]))
    odd = [(problems, path) for problems, paths in held.items() if problems != usual
           for path in paths]
    problems, path = odd[0]
    raise DamagedRunError(
        f"{path} holds {len(problems)} problems at {key} where {len(held[usual])} other run "
        f"files hold the same {len(usual)}, not those: remove it to make it again (the other "
        "runs are kept)" + (f"; {len(odd) - 1} more file(s) differ so" if len(odd) > 1 else ""))


def aggregate(config: ExperimentConfig, out: Path, oracle: bool = True,
              splits: Iterable[str] | None = None) -> dict:
    """The leaderboard (rliable's statistics, the module docstring says which) from the run
    files in ``out``; without the replay-only rows (the oracle's, the best fixed
    configuration in hindsight) where not ``oracle`` (a live evaluation), over ``splits``
    (None: the config's)."""
    data = _matrices(config, out, oracle, splits)
    rows: list[dict] = []
    learned = [s.name for s in config.agents]
    resumed = _resumed(config, out)
    saved = np.random.get_state()  # seeded per bootstrap (BOOTSTRAP_SEED), then put back
    try:
        _intervals(config, data, learned, rows)
    finally:
        np.random.set_state(saved)
    for row in rows:
        row["resumed"] = _said_resumed(resumed.get(row["agent"], {}))
    chosen = _chosen(_run_file(out, TRAIN_CHOSEN, 0))
    hindsight = _chosen(_run_file(out, HINDSIGHT, 0)) if oracle else {}
    near = _near_rows(config, data) if oracle and "test" in config.splits else None
    return {"rows": rows, "data": data, "chosen": chosen, "hindsight": hindsight,
            "resumed": resumed, "near": near}


NEAR_COLUMNS = ("budget", "agent", "near_problems", "near_geomean", "near_x_fixed",
                "other_problems", "other_geomean", "other_x_fixed")
"""near.csv's columns: per budget and agent (the learned ones, the fixed configuration
chosen on train, the oracle), the geometric mean over runs x problems of the test problems
near a train problem (:func:`~autoprofiler_env.dataset.splits.near_train`) and of the others,
each also over the fixed configuration chosen on train's on the same problems."""


def _near_rows(config: ExperimentConfig, data: dict) -> dict | None:
    """The test split scored apart on its problems near a train problem and the others:
    ``{"pairs": {test problem: nearest train problem}, "problems": n, "rows": [...]}``
    (:data:`NEAR_COLUMNS`), ``"within"``: how many are near at other bounds (0: the same
    feature vector), or None where the test split has no rows. The twins are looked for
    among the problems the agents learned on (the train environment's: a tolerance can
    leave some of the split out)."""
    import gymnasium as gym

    from autoprofiler_env.dataset.replay import Dataset

    dataset = Dataset.load(config.env.get("dataset"))
    train = gym.make("AutoProfiler-v0", split="train", **config.env).unwrapped.problems
    pairs = dataset.near_train("test", train)
    agents = [s.name for s in config.agents] + [TRAIN_CHOSEN, "oracle"]
    rows, held = [], None
    for b in config.budgets:
        scores = data["scores"].get(("test", b))
        order = data["problems"].get(("test", b))
        if scores is None or TRAIN_CHOSEN not in scores:
            continue
        held = order
        near = np.array([u in pairs for u in order])
        fixed = scores[TRAIN_CHOSEN]
        for name in [a for a in agents if a in scores]:
            row = {"budget": b, "agent": name}
            for side, mask in (("near", near), ("other", ~near)):
                row[f"{side}_problems"] = int(mask.sum())
                if not mask.any():
                    continue
                mean = float(scores[name][:, mask].mean())
                row[f"{side}_geomean"] = math.exp(mean)
                row[f"{side}_x_fixed"] = math.exp(mean - float(fixed[:, mask].mean()))
            rows.append(row)
    if held is None:
        return None
    within = {bound: len(set(dataset.near_train("test", train, bound)) & set(held))
              for bound in NEAR_BOUNDS}
    return {"pairs": {u: pairs[u] for u in held if u in pairs}, "problems": len(held),
            "rows": rows, "within": within}


NEAR_BOUNDS = (0.0, 0.2, 0.5)
"""The other bounds (in log10(1 + x)) at which the leaderboard counts the near test problems,
beside :data:`~autoprofiler_env.dataset.splits.NEAR_LOG10`'s: how much the count rests on
that choice (0: the same feature vector as a train problem)."""


def _resumed(config: ExperimentConfig, out: Path) -> dict[str, dict[int, list[int]]]:
    """Per RL agent, the seeds whose training was interrupted and resumed, with the steps
    it resumed at (its ``run.json``'s ``resumed``): a resumed training is not bit-identical
    to an uninterrupted one (experiments/train.py), so those runs' rows are not what an
    uninterrupted experiment gives. The trained agents are in ``out/agents``, or for a live
    evaluation's folder (``<experiment>/live``) in the experiment's."""
    trained = out / "agents"
    if not trained.is_dir() and out.name == "live":
        trained = out.parent / "agents"
    found: dict[str, dict[int, list[int]]] = {}
    for spec in config.agents:
        if spec.kind != "rl":
            continue  # a tree's learning resumes from its logs exactly
        for seed in config.seeds:
            run_file = trained / spec.name / f"seed-{seed}" / "run.json"
            try:
                steps = read_json(run_file).get("resumed")
            except DamagedRunError:
                continue  # no record (the agent's training says so where it is resumed)
            if isinstance(steps, list) and steps:
                found.setdefault(spec.name, {})[seed] = [int(s) for s in steps]
    return found


def _said_resumed(seeds: dict[int, list[int]]) -> str:
    """``seed 1 at 24576; seed 3 at 1024, 30000`` (steps), or empty."""
    return "; ".join(f"seed {seed} at {', '.join(str(s) for s in steps)}"
                     for seed, steps in sorted(seeds.items()))


def _adjust(rows: list[dict], learned: list[str]) -> None:
    """Each split's learned rows' p-values against the fixed configuration chosen on train
    (every learned agent at every budget: the family of the claim that a learned agent beats
    it), Holm-adjusted (``p_fixed_holm``)."""
    for split in dict.fromkeys(r["split"] for r in rows):
        family = [r for r in rows if r["split"] == split and r["agent"] in learned
                  and r["p_fixed"] is not None]
        for row, adjusted in zip(family, holm([r["p_fixed"] for r in family])):
            row["p_fixed_holm"] = adjusted


COMPARATORS = {"fixed": TRAIN_CHOSEN, "best_fixed": HINDSIGHT}
"""The paired ratios' comparators, by the leaderboard's column prefix."""


def _intervals(config: ExperimentConfig, data: dict, learned: list[str], rows: list) -> None:
    _, metrics = rliable()

    for (split, b), by_agent in data["scores"].items():
        point, interval = bootstrap(
            by_agent, lambda s: np.array([metrics.aggregate_mean(s), interquartile_mean(s)]),
            config.reps, task_bootstrap=True)
        fixed = by_agent.get(TRAIN_CHOSEN)
        improvement = {name: improvement_over_seeds(by_agent[name], fixed, config.poi_reps)
                       for name in learned if name in by_agent and fixed is not None}
        for name in by_agent:
            (mean, iqm), ((mean_lo, iqm_lo), (mean_hi, iqm_hi)) = point[name], interval[name]
            row = {"split": split, "budget": b, "agent": name,
                   "runs": int(by_agent[name].shape[0]),
                   "problems": int(by_agent[name].shape[1]),
                   "geomean_speedup": math.exp(mean), "geomean_lo": math.exp(mean_lo),
                   "geomean_hi": math.exp(mean_hi), "iqm_speedup": math.exp(iqm),
                   "iqm_lo": math.exp(iqm_lo), "iqm_hi": math.exp(iqm_hi),
                   "mean_cost_s": data["costs"][(split, b)][name],
                   "p_beats_fixed": None, "p_lo": None, "p_hi": None,
                   "wins": None, "ties": None, "losses": None, "better": None,
                   "equal": None, "worse": None, "p_fixed": None, "p_fixed_holm": None,
                   "run_min": None, "run_max": None}
            if by_agent[name].shape[0] > 1:  # each run's (seed's) own geometric mean
                per_run = np.exp(by_agent[name].mean(axis=1))
                row["run_min"], row["run_max"] = float(per_run.min()), float(per_run.max())
            for column, comparator in COMPARATORS.items():
                ratio = (paired_ratio(by_agent[name], by_agent[comparator], config.reps)
                         if comparator in by_agent and name != comparator
                         else (None, None, None))
                row.update(zip((f"x_{column}", f"x_{column}_lo", f"x_{column}_hi"), ratio))
            if name in improvement:
                row["p_beats_fixed"], row["p_lo"], row["p_hi"] = improvement[name]
            if fixed is not None and name != TRAIN_CHOSEN:
                row["wins"], row["ties"], row["losses"] = wins_ties_losses(by_agent[name],
                                                                           fixed)
                d = problem_differences(by_agent[name], fixed)
                row["better"], row["equal"], row["worse"] = (
                    int(np.sum(d > EQUAL)), int(np.sum(np.abs(d) <= EQUAL)),
                    int(np.sum(d < -EQUAL)))
                if name not in (HINDSIGHT, "oracle"):  # chosen on these problems: no test
                    row["p_fixed"] = sign_flip_p(by_agent[name], fixed)
            rows.append(row)
    _adjust(rows, learned)


# -- writing --------------------------------------------------------------------------------

COLUMNS = ("split", "budget", "agent", "runs", "problems", "geomean_speedup", "geomean_lo",
           "geomean_hi", "iqm_speedup", "iqm_lo", "iqm_hi", "mean_cost_s", "p_beats_fixed",
           "p_lo", "p_hi", "wins", "ties", "losses", "x_fixed", "x_fixed_lo", "x_fixed_hi",
           "better", "equal", "worse", "p_fixed", "p_fixed_holm",
           "x_best_fixed", "x_best_fixed_lo", "x_best_fixed_hi", "resumed", "run_min",
           "run_max")
"""leaderboard.csv's columns: ``iqm_*`` the geometric IQM (exp of the IQM of the log
speedups); ``run_min`` and ``run_max`` the lowest and highest of the runs' own geometric
means (an agent of several runs: the seeds' spread, which the pooled interval does not
show); ``wins``, ``ties``, ``losses`` against the fixed configuration chosen on train
over (run, problem) pairs (:func:`wins_ties_losses`); ``x_fixed*`` and ``x_best_fixed*``
the row's geometric mean over the fixed configuration chosen on train's and over the best
one in hindsight's (:data:`HINDSIGHT`; empty for that comparator's own row), with a paired
bootstrap's interval (:func:`paired_ratio`); ``better``, ``equal``, ``worse`` the problems
where the row's mean log speedup over its runs is above, equal to or below the fixed
configuration chosen on train's (:func:`problem_differences`), ``p_fixed`` the two-sided
p-value of a sign-flip permutation test of that difference over the problems
(:func:`sign_flip_p`) and ``p_fixed_holm`` the learned agents' p-values Holm-adjusted over
every learned agent and budget of the split (:func:`holm`); ``resumed`` the seeds whose RL
training was interrupted and resumed, and at which steps (:func:`_resumed`)."""


def write(config: ExperimentConfig, result: dict, out: Path, command: str,
          header: str | None = None) -> list[Path]:
    """leaderboard.md (``header``: a paragraph that says what is particular to these runs),
    leaderboard.csv and the plots."""
    write_csv(result["rows"], out / "leaderboard.csv", COLUMNS, extrasaction="ignore")
    written = [out / "leaderboard.md", out / "leaderboard.csv"]
    if result.get("near"):
        write_csv(result["near"]["rows"], out / "near.csv", NEAR_COLUMNS)
        written.append(out / "near.csv")
    if (sections := _sections_rows(result)):
        write_csv(sections, out / "sections.csv", SECTIONS_COLUMNS)
        written.append(out / "sections.csv")
    write_atomic(out / "leaderboard.md", markdown(config, result, command, header).encode())
    return [*written, *plots(config, result, out)]


def _splits(config: ExperimentConfig, result: dict) -> list[str]:
    """The config's splits that the result has rows of."""
    return [s for s in config.splits if any(r["split"] == s for r in result["rows"])]


_PAIRED = ("with the nominal 95% percentile interval of a paired bootstrap (the same "
           f"problems drawn for both, and each side's runs, seeded with {BOOTSTRAP_SEED}): "
           "what the problems share cancels, so where the two ship similar programs it is "
           "narrower than an unpaired comparison's; on two dozen skewed problems such an "
           "interval covered 87-92% rather than 95% (a reviewer's resampling), and it speaks "
           "for one cell at a time. ")
_TESTED = ("+/=/-: the problems where the agent's speedup (its runs' geometric mean) is above, "
           "equal to or below the fixed configuration chosen on train's. p: the two-sided "
           "p-value of a sign-flip permutation test over those problems (exact up to "
           f"{EXACT_UP_TO} differing problems), and in brackets, for the learned agents, Holm's "
           "adjustment over every learned agent and budget of the split: the leaderboard "
           "makes that many comparisons with the fixed configuration at once, so a lead is "
           "shown at the 5% level only where the adjusted p is below 0.05. The test takes "
           "the agent's runs as given (their mean per problem): it asks whether these "
           "trained agents beat the fixed configuration on a random problem, not whether "
           "the method does with other seeds (the paired interval, which resamples whole "
           "runs, carries the seeds' spread); its null is that each problem's difference is "
           "as likely negated, which a skewed difference of mean zero rejects somewhat more "
           "often than 5% (a reviewer's simulation: 8-13% at nominal 5%). ")


def markdown(config: ExperimentConfig, result: dict, command: str,
             header: str | None = None) -> str:
    if result.get("hindsight"):
        comparators = COMPARATORS
        comparing = ("x fixed, x best fixed: the row's geometric mean over that of the fixed "
                     "configuration chosen on train, and over that of the best fixed "
                     "configuration in hindsight (the best of ncu's sets, single sections, "
                     "the curated list and no profile on this split at this budget: the "
                     "strongest fixed comparator, chosen on these same problems), each "
                     + _PAIRED)
    else:  # a live evaluation: no row in hindsight
        comparators = {"fixed": TRAIN_CHOSEN}
        comparing = ("x fixed: the row's geometric mean over that of the fixed "
                     "configuration chosen on train, " + _PAIRED)
    comparing += _TESTED
    seeds = len(config.seeds)
    resumed = result.get("resumed") or {}
    made = ", ".join(f"{k}={v!r}" for k, v in sorted(config.env.items()))
    lines = [f"# Experiment `{config.name}`", "",
             f"`{command}`", "",
             f"Environment: `AutoProfiler-v0` made with {made or 'its defaults'} (the "
             "config's `env`; the suite's dataset unless it names another).", "",
             *((header, "") if header else ()),
             f"Learned agents: {', '.join(s.name for s in config.agents) or 'none'}, each run "
             f"with {seeds} seed{'s' if seeds != 1 else ''}; deterministic baselines once, "
             "stochastic ones once per seed. "
             "Scores: the shipped speedup "
             "per problem (an incorrect candidate counts as eager, 1.0x), aggregated over runs "
             "x problems with rliable on the log of the speedup: the geometric mean (exp of "
             "the mean log) and the geometric IQM (exp of the interquartile mean of the logs), "
             "with 95% stratified bootstrap intervals resampling problems and runs, each "
             f"agent's drawn from numpy's generator seeded with {BOOTSTRAP_SEED} (the same "
             "scores give the same interval in any cell and beside any other agents); beside "
             "an agent's count of runs, the lowest and highest of its runs' own geometric "
             "means (the seeds' spread, which a pooled interval does not show); "
             "P(> fixed): the probability "
             "that the agent beats the fixed configuration chosen on the train split on a "
             "random problem (ties count half), its interval resampling whole runs only "
             "(a run's every problem together): the seeds' spread, not the certainty on new "
             "kernels. W/T/L: the (run, problem) pairs where the agent "
             "ships a faster, an equally fast (the same speedup) or a slower program than the "
             "fixed configuration chosen on train; where most pairs tie, P(> fixed) is near "
             "0.5 whatever the agent does on the others. "
             + comparing
             + "The validation rows flatter the "
             "learned agents: the tree and the RL model kept were both chosen on that split. "
             "Costs are in the environment's budget unit (seconds of ncu replay by default).",
             ""]
    if resumed:
        said = "; ".join(f"{name}: {_said_resumed(by_seed)}"
                         for name, by_seed in resumed.items())
        lines += [(f"**Resumed training** (the steps at which it resumed): {said}. A resumed "
                   "RL training is not bit-identical to an uninterrupted one (the "
                   "environments' and generators' states are not restored: "
                   "experiments/train.py), so these agents' rows are not those an "
                   "uninterrupted experiment gives; remove their `agents/<name>/seed-<n>` and "
                   "`runs/<name>/seed-<n>.json` and run again for those."), ""]
    for split in _splits(config, result):
        for b in config.budgets:
            rows = sorted((r for r in result["rows"] if r["split"] == split
                           and r["budget"] == b), key=lambda r: -r["geomean_speedup"])
            best = (result.get("hindsight") or {}).get(f"{split}/{b:g}")
            lines += [f"## {split}, budget {b:.0%} of the full set's cost", "",
                      f"Fixed configuration chosen on train: `{result['chosen'][f'{b:g}']}`"
                      + (f"; the best here in hindsight: `{best}`." if best else "."),
                      "", ("| agent | runs (each run's geomean) | geomean speedup [95% CI] "
                           "| IQM speedup [95% CI] "
                           "| mean cost | P(> fixed) [95% CI, runs] | W/T/L vs fixed | "
                           + " | ".join(f"x {c.replace('_', ' ')} [paired, nominal 95%]"
                                        for c in comparators)
                           + " | +/=/- vs fixed | p vs fixed [Holm] |"),
                      "|---|---|---|---|---|---|---" + "|---" * (len(comparators) + 2) + "|"]
            for r in rows:
                p = ("" if r["p_beats_fixed"] is None else
                     f"{r['p_beats_fixed']:.2f} [{r['p_lo']:.2f}, {r['p_hi']:.2f}]")
                wtl = ("" if r.get("wins") is None else
                       f"{r['wins']}/{r['ties']}/{r['losses']}")
                ratios = ["" if r.get(f"x_{c}") is None else
                          f"{r[f'x_{c}']:.3f} [{r[f'x_{c}_lo']:.3f}, {r[f'x_{c}_hi']:.3f}]"
                          for c in comparators]
                signs = ("" if r.get("better") is None else
                         f"{r['better']}/{r['equal']}/{r['worse']}")
                tested = ("" if r.get("p_fixed") is None else f"{r['p_fixed']:.3f}" + (
                    "" if r.get("p_fixed_holm") is None else f" [{r['p_fixed_holm']:.3f}]"))
                name = r["agent"] + (" (resumed)" if r.get("resumed") else "")
                runs = str(r["runs"]) + ("" if r.get("run_min") is None else
                                         f" ({r['run_min']:.3f}-{r['run_max']:.3f})")
                lines.append(f"| {name} | {runs} | {r['geomean_speedup']:.3f} "
                             f"[{r['geomean_lo']:.3f}, {r['geomean_hi']:.3f}] | "
                             f"{r['iqm_speedup']:.3f} [{r['iqm_lo']:.3f}, {r['iqm_hi']:.3f}] | "
                             f"{r['mean_cost_s']:.2f} | {p} | {wtl} | {' | '.join(ratios)} | "
                             f"{signs} | {tested} |")
            lines.append("")
    return "\n".join(lines + _near_markdown(result.get("near")))


def _short(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[-1].removesuffix(".py")


def _near_markdown(near: dict | None) -> list[str]:
    """leaderboard.md's last section: the test split's problems near a train problem and
    the others, scored apart (:func:`_near_rows`)."""
    if not near or not near["rows"]:
        return []
    from autoprofiler_env.dataset.splits import NEAR_LOG10

    pairs = "; ".join(f"`{_short(u)}` ~ `{_short(t)}`" for u, t in near["pairs"].items())
    lines = ["## test: the problems near a train problem, and the others", "",
             "A test problem is near a train problem when that one has the same op histogram "
             "(each op class's count) and each of its other static features within "
             f"{NEAR_LOG10} in log10(1 + x) (a factor of about {10 ** NEAR_LOG10:.1f}; "
             "`autoprofiler_env.dataset.splits.near_train`): the same kinds of ops at a "
             "similar size, which the features the agents observe tell little apart. The "
             "splits are dealt within (level, primary op) strata, so such pairs cross them; "
             "a learned agent's lead that holds on the near problems only speaks of their "
             "likeness to the train problems more than of new kernels. Point values (the "
             "geometric mean over runs x problems; x fixed: over the fixed configuration "
             "chosen on train's on the same problems), without intervals: each side holds a "
             f"few problems. Near ({len(near['pairs'])} of {near['problems']}): "
             f"{pairs or 'none'}. The count at other bounds: "
             + ", ".join(f"{n} with the same feature vector as a train problem" if bound == 0
                         else f"{n} within {bound:g}" for bound, n in near["within"].items())
             + ".", "",
             "| budget | agent | near: geomean | near: x fixed | others: geomean "
             "| others: x fixed |", "|---|---|---|---|---|---|"]

    def cell(row, key):
        return "" if row.get(key) is None else f"{row[key]:.3f}"

    for row in near["rows"]:
        lines.append(f"| {row['budget']:.0%} | {row['agent']} | "
                     + " | ".join(cell(row, f"{side}_{k}") for side in ("near", "other")
                                  for k in ("geomean", "x_fixed")) + " |")
    return lines + [""]


def _unchanged(name: str, before: dict[str, str], after: dict[str, str]) -> None:
    """Refuses a run whose policy's files changed while it was scored (a model that a
    training run started meanwhile rewrote): its budgets would hold two models' figures."""
    from experiments.policies import changed

    paths = changed(before, after)
    if paths:
        raise AutoProfilerError(f"baselines: {name}: {', '.join(paths)} changed since the "
                                "experiment started, while it scored it (another process "
                                "writes it): run the experiment again once it no longer "
                                "changes, or give a copy")


def agent_styles(agents) -> dict[str, dict]:
    """Per agent, a colour and marker no other agent of the figure has (the benchmark's
    :func:`~experiments.benchmark.agent_styles`: matplotlib's cycle of 10 colours gave two
    agents of a config of more rows one line); the best fixed configuration in hindsight,
    often the train-chosen one, dashed, so that the line it lies on shows through."""
    from experiments.benchmark import agent_styles as styles

    return {name: {"color": style["color"], "marker": style.get("marker", "o"),
                   "linestyle": "--" if name == HINDSIGHT else "-"}
            for name, style in styles(agents).items()}


def _legend_beside(ax) -> None:
    """The legend right of the axes, where it hides no curve."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


RATIO_TICKS = ((0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.1, 1.2, 1.3, 1.4, 1.5, 1.75, 2.0,
                2.5, 3.0, 4.0, 5.0, 10.0),
               (0.9, 0.92, 0.94, 0.96, 0.98, 1.02, 1.04, 1.06, 1.08, 1.1))
"""Where budgets.png's ratio axis may be labelled (with 1x always): the first list's ratios
in range, or the second's where fewer than two of the first's are (ratios within 10%)."""


def budgets_figure(config: ExperimentConfig, result: dict):
    """Two panels against the budget (the first split's): the geometric-mean speedups, and
    each agent's paired ratio to the fixed configuration chosen on train (the leaderboard's
    ``x fixed``; the learned agents', the config's ``agents``, with its nominal 95% paired
    interval: the problems are shared, so the ratio's interval, not two overlapping bands of
    levels, says whether an agent is ahead; the other rows' intervals are in the
    leaderboard), the ratio's axis logarithmic with 1x drawn. The x axes are logarithmic,
    labelled at the config's budgets only (no minor ticks, whose labels would read like
    2x10^-1)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    split = _splits(config, result)[0]
    agents = list(dict.fromkeys(r["agent"] for r in result["rows"]))
    styles = agent_styles(agents)
    fig = Figure(figsize=(12, 5.4), layout="constrained")
    FigureCanvasAgg(fig)
    level, ratio = fig.subplots(1, 2)

    def rows_of(name):
        return sorted((r for r in result["rows"] if r["agent"] == name and r["split"] == split),
                      key=lambda r: r["budget"])

    learned = {spec.name for spec in config.agents}
    for name in agents:
        rows = rows_of(name)
        x = [r["budget"] for r in rows]
        level.plot(x, [r["geomean_speedup"] for r in rows], label=name, **styles[name])
        if name == TRAIN_CHOSEN:
            continue
        paired = [r for r in rows if r.get("x_fixed") is not None]
        if not paired:
            continue
        x = [r["budget"] for r in paired]
        ratio.plot(x, [r["x_fixed"] for r in paired], **styles[name])
        bounded = [r for r in paired if None not in (r.get("x_fixed_lo"), r.get("x_fixed_hi"))]
        if name in learned and bounded:
            lo = [r["x_fixed"] - r["x_fixed_lo"] for r in bounded]
            hi = [r["x_fixed_hi"] - r["x_fixed"] for r in bounded]
            if len(bounded) > 1:
                ratio.fill_between([r["budget"] for r in bounded],
                                   [r["x_fixed_lo"] for r in bounded],
                                   [r["x_fixed_hi"] for r in bounded],
                                   color=styles[name]["color"], alpha=0.12)
            else:  # one budget: a band of no width; a bar
                ratio.errorbar([r["budget"] for r in bounded],
                               [r["x_fixed"] for r in bounded], yerr=[lo, hi], fmt="none",
                               ecolor=styles[name]["color"], capsize=4)
    if not ratio.get_lines():  # no row has a ratio: no fixed configuration chosen on train
        ratio.text(0.5, 0.5, f"no ratios: the config has no {TRAIN_CHOSEN!r} row",
                   transform=ratio.transAxes, ha="center", va="center")
        ratio.set_yticks([])
    else:
        ratio.axhline(1.0, color=agent_styles([TRAIN_CHOSEN])[TRAIN_CHOSEN]["color"],
                      linewidth=1.5, zorder=1)
        ratio.set_yscale("log")
        low, high = ratio.get_ylim()  # ticks at round ratios within the range, about 8
        ticks = [t for t in RATIO_TICKS[0] if low <= t <= high]
        if len(ticks) < 2:
            ticks = [t for t in RATIO_TICKS[1] if low <= t <= high]
        ratio.yaxis.set_major_locator(FixedLocator(ticks[::max(1, -(-len(ticks) // 9))]
                                                   + [1.0]))
        ratio.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
        ratio.yaxis.set_minor_locator(NullLocator())
    for ax in (level, ratio):
        ax.set_xscale("log")
        ax.set_xticks(list(config.budgets), [f"{b:.0%}" for b in config.budgets])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("budget (of the full set's profiling cost)")
        ax.grid(alpha=0.3)
    level.set_ylabel(f"geometric-mean speedup ({split})")
    level.set_title("speedup")
    ratio.set_ylabel(f"speedup / {TRAIN_CHOSEN}'s, paired by problem")
    ratio.set_title("ratio to the fixed configuration chosen on train\n(above 1x: ahead; "
                    "bands: the learned agents' paired 95% intervals)", fontsize=10)
    fig.suptitle(f"{config.name}: speedup against budget ({split} split)")
    fig.legend(*level.get_legend_handles_labels(), fontsize=8, loc="outside lower center",
               ncols=min(len(agents), 5))
    return fig


def performance_profiles(scores: dict, taus: np.ndarray, reps: int = 200
                         ) -> tuple[dict, dict]:
    """rliable's performance profiles of ``scores`` (agent -> runs x problems speedups) at
    ``taus``, with their bootstrap bands, which resample the problems as well as the runs
    (``task_bootstrap``, as the leaderboard's intervals: rliable's default resamples the runs
    only, which gave a deterministic baseline's profile no band at all); rliable's
    ``create_performance_profile`` takes no
    random state and draws from numpy's global generator, so each agent's is computed alone
    with that generator seeded with :data:`BOOTSTRAP_SEED` (and put back after): the same
    scores give the same band, beside any other agents."""
    rly, _ = rliable()
    saved = np.random.get_state()
    profiles, bands = {}, {}
    try:
        for name, score in scores.items():
            np.random.seed(BOOTSTRAP_SEED)
            profile, band = rly.create_performance_profile({name: score}, taus, reps=reps,
                                                           task_bootstrap=True)
            profiles[name], bands[name] = profile[name], band[name]
    finally:
        np.random.set_state(saved)
    return profiles, bands


def plots(config: ExperimentConfig, result: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    paths = []
    split = _splits(config, result)[0]
    agents = list(dict.fromkeys(r["agent"] for r in result["rows"]))

    styles = agent_styles(agents)

    def save(fig, name):
        paths.append(write_png(fig, out / name))

    save(budgets_figure(config, result), "budgets.png")

    # the benchmark's picture (budgets written beside the points, no-profile's level across)
    from experiments.benchmark import dataset_gpu
    from experiments.benchmark import figure as cost_figure

    fig = cost_figure([r for r in result["rows"] if r["split"] == split],
                      dataset_gpu(config.env.get("dataset")))
    fig.suptitle(f"{config.name}: speedup against profiling cost ({split} split)",
                 fontsize=13)
    save(fig, "cost.png")

    b = config.budgets[len(config.budgets) // 2 - (len(config.budgets) % 2 == 0)] \
        if len(config.budgets) > 1 else config.budgets[0]
    by_agent = result["data"]["scores"][(split, b)]
    taus = np.linspace(0.0, max(float(np.max(v)) for v in by_agent.values()) + 1e-9, 60)
    profiles, intervals = performance_profiles({k: np.exp(v) for k, v in by_agent.items()},
                                               np.exp(taus))
    fig, ax = plt.subplots(figsize=(9.5, 4.5), layout="constrained")
    learned = {spec.name for spec in config.agents}
    for name, profile in profiles.items():  # the learned agents above the rest, banded
        ax.plot(np.exp(taus), profile, label=name, markevery=6, markersize=5,
                linewidth=2.2 if name in learned else 1.3, zorder=3 if name in learned else 2,
                **styles.get(name, {}))
        if name in learned:
            lo, hi = intervals[name]
            ax.fill_between(np.exp(taus), lo, hi, color=styles.get(name, {}).get("color"),
                            alpha=0.12)
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("speedup τ")
    ax.set_ylabel("share of runs x problems with speedup > τ")
    ax.set_title(f"{config.name}: performance profiles ({split}, budget {b:.0%}; bands: the "
                 "learned agents' 95% bootstrap)")
    ax.grid(alpha=0.3)
    _legend_beside(ax)
    save(fig, "profiles.png")
    shares = {b: result["data"].get("collected", {}).get((split, b)) for b in config.budgets}
    if any(shares.values()):
        save(sections_figure(config, split, shares, agents), "sections.png")
    return paths


def sections_figure(config: ExperimentConfig, split: str, shares: dict, agents: list[str]):
    """What each agent profiles: per budget a panel, an agent a row, a section a column,
    each cell the share of its episodes (runs x problems) of ``split`` that collected the
    section (``shares``: budget -> agent -> section -> share)."""
    import matplotlib.pyplot as plt

    from autoprofiler_env.dataset.replay import Dataset
    from autoprofiler_env.errors import AutoProfilerError

    budgets = [b for b in config.budgets if shares.get(b)]
    seen = {s for b in budgets for by in shares[b].values() for s in by}
    try:  # the dataset's own order of its sections
        order = list(Dataset.load(config.env.get("dataset")).sections)
    except AutoProfilerError:  # gone since the runs were made: by name then
        order = []
    columns = order + sorted(seen - set(order))  # every section: what none took shows too
    rows = [a for a in agents if any(a in shares[b] for b in budgets)]
    across = min(len(budgets), 2)
    down = -(-len(budgets) // across)
    fig, axes = plt.subplots(down, across, squeeze=False, layout="constrained",
                             figsize=(6.2 * across, 0.5 + (0.32 * len(rows) + 1.6) * down))
    for ax in axes.flat[len(budgets):]:
        ax.set_visible(False)
    for k, (ax, b) in enumerate(zip(axes.flat, budgets)):
        grid = np.array([[shares[b].get(a, {}).get(s, 0.0) if a in shares[b] else np.nan
                          for s in columns] for a in rows])
        image = ax.imshow(grid, vmin=0, vmax=1, cmap="Blues", aspect="auto")
        for (i, j), value in np.ndenumerate(grid):
            if value >= 0.005:
                ax.text(j, i, f"{value:.0%}"[:-1], ha="center", va="center", fontsize=6,
                        color="white" if value > 0.6 else "black")
        bottom = k + across >= len(budgets)  # no panel below it: its column's labels
        ax.set_xticks(range(len(columns)), [c.removeprefix("SpeedOfLight_") for c in columns]
                      if bottom else [], rotation=55, ha="right", fontsize=7)
        ax.set_yticks(range(len(rows)), rows if k % across == 0 else [], fontsize=8)
        ax.set_title(f"budget {b:.0%}", fontsize=10)
    fig.colorbar(image, ax=axes, shrink=0.6, label="share of episodes collecting it")
    fig.suptitle(f"{config.name}: the sections each agent collects ({split} split; a cell: "
                 "% of runs x problems)", fontsize=12)
    return fig
