"""``autoprofiler train``: train a selection policy with stable-baselines3 / sb3-contrib.

    autoprofiler train [--config maskable_ppo|FILE] [--seed 0] [--out DIR] [--steps N]
                       [--wandb] [--wandb-group NAME]

The config (:mod:`agents.rl.config`; one YAML file per algorithm in ``experiments/configs/``:
``maskable_ppo`` is the default, ``ppo``, ``a2c``, ``dqn``, ``qrdqn``; rl-baselines3-zoo's
format) names the algorithm, its hyperparameters, the environment's ``make`` kwargs (a
``budget_range`` trains one policy for every budget), the vector env and the evaluation. Training runs on ``n_envs``
copies of ``AutoProfiler-v0`` (SB3's ``make_vec_env``: ``Monitor``-wrapped, seeded
``seed + rank``, in a ``DummyVecEnv`` or a ``SubprocVecEnv``); MaskablePPO reads each
sub-environment's ``action_masks()``, the other algorithms train without masks (the
environment answers a masked action as STOP). Every ``autoprofiler.eval.frequency`` steps,
and at the end, :class:`agents.rl.callbacks.RolloutEvalCallback` evaluates the policy with
the project's one evaluation (:func:`autoprofiler_env.evaluation.rollout`) on the
``eval.split`` problems at each of ``eval.budgets`` and keeps the best model by the mean of
the log scores over the budgets. ``--out`` (default ``runs/train/<config>-seed<N>``) gets

- ``model.zip`` (the final model) and ``best_model.zip`` (the best evaluated), SB3 files;
- ``run.json``: the config as given and as resolved, the environment's kwargs, the command
  line, the seed, the dataset's checksum, the package's and the libraries' versions, the
  best and the last evaluation;
- ``evaluations.jsonl``: each evaluation (step, per-budget geometric-mean speedup, ...);
- ``progress.csv`` (SB3's logger) and ``monitor/<rank>.monitor.csv`` (every episode: its
  return, length, problem, sections, cost, speedup, correctness).

``autoprofiler benchmark --policy sb3:DIR`` puts the run's best model beside the baselines
(:func:`agents.rl.load_run`). With ``--wandb`` the run (one group per config unless
``--wandb-group`` says otherwise; offline without a key) gets SB3's logger
(:class:`experiments.sb3_wandb.WandbOutputFormat`: ``rollout/``, ``train/``, ``time/``,
``episode/`` and ``eval/`` keys against environment steps), the config, the last
evaluation's episodes as a table and the run directory's files as a ``model`` artifact.
"""

from __future__ import annotations

import json
import math
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from agents.rl.callbacks import Evaluation, save_model
from agents.rl.config import ENV_ID as CONFIG_ENV_ID
from agents.rl.config import ConfigError, TrainConfig, algorithm_kwargs
from autoprofiler_env.atomic import write_atomic
from autoprofiler_env.errors import AutoProfilerError

CONFIGS = Path(__file__).parent / "configs"
"""The shipped configs, one per algorithm."""
DEFAULT_CONFIG = "maskable_ppo"
ENV_ID = "autoprofiler_env:AutoProfiler-v0"
"""The training id: ``module:id`` imports the package (and registers the id) in every
subprocess of a ``SubprocVecEnv``."""
RUN_SCHEMA = 1
INFO_KEYWORDS = ("problem", "sections", "cost", "speedup", "correct")
"""What each episode's line of ``monitor/<rank>.monitor.csv`` holds besides SB3's return,
length and time."""


def config_path(spec: str | Path) -> Path:
    """A config file: a path, or the name of a shipped one (``maskable_ppo``)."""
    path = Path(spec)
    if path.is_file():
        return path
    shipped = CONFIGS / f"{spec}.yaml"
    if shipped.is_file():
        return shipped
    # an experiment's config (its first key is ``experiment:``) is not a training config
    names = ", ".join(sorted(p.stem for p in CONFIGS.glob("*.yaml")
                             if "\nexperiment:" not in "\n" + p.read_text()))
    raise ConfigError(f"--config {spec}: no such file, nor a shipped config (one of {names})")


def portable(path: str | Path) -> str:
    """``path`` as a run's record keeps it, free of this machine's directories: a shipped
    config as ``experiments/configs/<name>``, a path under the working directory relative to
    it, any other as given."""
    path = Path(path)
    try:
        return f"experiments/configs/{path.resolve().relative_to(CONFIGS.resolve())}"
    except ValueError:
        pass
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def default_out(config_file: Path, seed: int) -> Path:
    """Where a run goes by default: ``runs/train/<config stem>-seed<N>``."""
    return Path("runs") / "train" / f"{config_file.stem}-seed{seed}"


def check_out(out: str | Path) -> Path:
    """``out`` as a path, or an error if it holds a run already (a run is never
    overwritten)."""
    out = Path(out)
    if (out / "run.json").exists():
        raise AutoProfilerError(f"{out} holds a run already (run.json): give another --out, "
                                "or remove the directory to train again")
    return out


def env_kwargs(config: TrainConfig, split: str | None = None) -> dict:
    """The environment's ``make`` kwargs for training (``split``: the evaluation's, where
    the budget is the rollout's to give and the problems the split's)."""
    kwargs = dict(config.env)
    if split is not None:
        kwargs.pop("budget_range", None)
        kwargs.pop("problems", None)
        kwargs["split"] = split
    return kwargs


def make_eval_env(config: TrainConfig, source: str = "config"):
    """The evaluation environment (one, not vectorized: :func:`rollout` steps it)."""
    import gymnasium as gym

    return _checked(lambda: gym.make(ENV_ID, **env_kwargs(config, config.eval.split)),
                    source)


def make_train_env(config: TrainConfig, seed: int, monitor_dir: Path | None = None,
                   source: str = "config"):
    """``n_envs`` Monitor-wrapped training environments in the config's vector env."""
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    kwargs = env_kwargs(config)
    if config.vec_env == "subproc":  # a bad kwarg would only surface as a dead subprocess
        _checked(lambda: gym.make(ENV_ID, **kwargs), source).close()
    return _checked(lambda: make_vec_env(
        # render_mode: make_vec_env would ask for rgb_array, which the environment lacks
        ENV_ID, n_envs=config.n_envs, seed=seed, env_kwargs={"render_mode": None} | kwargs,
        monitor_dir=str(monitor_dir) if monitor_dir is not None else None,
        monitor_kwargs={"info_keywords": INFO_KEYWORDS},
        vec_env_cls=SubprocVecEnv if config.vec_env == "subproc" else DummyVecEnv), source)


def _checked(make, source: str):
    """``make()``, its errors about the environment's kwargs as a :class:`ConfigError`
    naming the config's ``env_kwargs`` key."""
    try:
        return make()
    except (ValueError, TypeError, AutoProfilerError) as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(f"{source}: {CONFIG_ENV_ID}.env_kwargs: "
                          f"{str(e).splitlines()[0]}") from e


def build_model(config: TrainConfig, env, seed: int, source: str = "config"):
    """The config's algorithm on ``env``; an error of its hyperparameters (a ``net_arch``
    torch cannot build, a value SB3 refuses) as a :class:`ConfigError`."""
    from agents.rl import algorithms

    cls = algorithms()[config.algorithm]
    try:
        return cls(config.policy, env, seed=seed, verbose=0, **algorithm_kwargs(config))
    except (ValueError, TypeError, AssertionError, KeyError) as e:
        raise ConfigError(f"{source}: {CONFIG_ENV_ID}: {cls.__name__} refused its arguments: "
                          f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from e


@dataclass
class TrainResult:
    """What a training run wrote and scored."""

    out: Path
    model: Path
    best_model: Path
    best: Evaluation
    last: Evaluation
    steps: int
    seconds: float
    evaluations: list[Evaluation] = field(default_factory=list)

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else math.nan


def versions() -> dict:
    """The versions a model's results depend on."""
    import importlib.metadata as metadata

    found = {"python": platform.python_version()}
    for name in ("autoprofiler-env", "stable-baselines3", "sb3-contrib", "gymnasium",
                 "torch", "numpy"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def train(config: TrainConfig, out: Path, seed: int = 0, given: dict | None = None,
          source: str = "config", wandb_run=None, progress: bool = True,
          command: list[str] | None = None, verbose: int = 0) -> TrainResult:
    """Trains a model as ``config`` says and writes ``out`` (the module docstring says
    what); returns what it wrote and scored. ``given``: the config file's content, kept in
    ``run.json`` beside the resolved config."""
    import gymnasium as gym
    from stable_baselines3.common.callbacks import CallbackList
    from stable_baselines3.common.logger import configure

    from agents.rl.callbacks import (
        EpisodeOutcomeCallback,
        ProgressBarCallback,
        RolloutEvalCallback,
    )

    out = check_out(out)
    out.mkdir(parents=True, exist_ok=True)
    eval_env = make_eval_env(config, source)
    base = eval_env.unwrapped
    try:
        vec_env = make_train_env(config, seed, out / "monitor", source)
    except BaseException:
        eval_env.close()
        raise
    try:
        model = build_model(config, vec_env, seed, source)
        found = versions()
        meta = {"schema": RUN_SCHEMA, "algorithm": config.algorithm, "seed": seed,
                "config_file": portable(source) if source != "config" else source,
                "config_given": given, "config": config.to_dict(),
                "env_kwargs": dict(gym.spec(ENV_ID.split(":")[1]).kwargs)
                | env_kwargs(config),
                "optimizer": base.optimizer,
                "dataset_sha256": base.backend.dataset.metadata.get("sha256"),
                "package_version": found["autoprofiler-env"], "versions": found,
                "command": list(command if command is not None
                                else ["autoprofiler", *sys.argv[1:]]),
                "status": "running", "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "models": {"final": "model.zip", "best": "best_model.zip"},
                "wandb": _wandb_identity(wandb_run)}
        _write_json(out / "run.json", meta)
        logger = configure(str(out), ["csv"] + (["stdout"] if verbose else []))
        if wandb_run is not None:
            from experiments.sb3_wandb import WandbOutputFormat

            wandb_run.config.update({k: meta[k] for k in (
                "algorithm", "seed", "config", "env_kwargs", "optimizer", "dataset_sha256",
                "package_version", "versions", "command")}, allow_val_change=True)
            logger.output_formats.append(WandbOutputFormat(wandb_run))
        model.set_logger(logger)
        last_records: dict = {}

        def on_evaluation(evaluation, records):
            last_records.clear()
            last_records.update(records)

        evaluator = RolloutEvalCallback(eval_env, config.eval.budgets, config.eval.frequency,
                                        best_model_path=out / "best_model.zip",
                                        log_path=out / "evaluations.jsonl", seed=seed,
                                        on_evaluation=on_evaluation, verbose=verbose)
        callbacks = [EpisodeOutcomeCallback(), evaluator]
        if progress:
            callbacks.append(ProgressBarCallback(config.total_timesteps,
                                                 f"{config.algorithm} seed {seed}"))
        learn = {"log_interval": config.log_interval} if config.log_interval else {}
        started = time.perf_counter()
        try:
            model.learn(config.total_timesteps, callback=CallbackList(callbacks), **learn)
        except KeyboardInterrupt:
            save_model(model, out / "model.zip")
            _write_json(out / "run.json", meta | {"status": "interrupted",
                                                  "steps": int(model.num_timesteps)})
            raise
        seconds = time.perf_counter() - started
        save_model(model, out / "model.zip")
        result = TrainResult(out, out / "model.zip", out / "best_model.zip", evaluator.best,
                             evaluator.evaluations[-1], int(model.num_timesteps), seconds,
                             list(evaluator.evaluations))
        meta |= {"status": "finished", "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                 "steps": result.steps, "seconds": seconds,
                 "steps_per_second": result.steps_per_second,
                 "best": result.best.to_dict(), "last": result.last.to_dict()}
        _write_json(out / "run.json", meta)
        if wandb_run is not None:
            _log_wandb(wandb_run, result, last_records)
        return result
    finally:
        vec_env.close()
        eval_env.close()


def _write_json(path: Path, data: dict) -> None:
    write_atomic(path, (json.dumps(data, indent=1, default=str) + "\n").encode())


def _wandb_identity(run) -> dict | None:
    if run is None:
        return None
    return {"id": run.id, "group": run.group or None, "dir": str(run.dir),
            "mode": run.settings.mode}


def _log_wandb(run, result: TrainResult, records: dict) -> None:
    """The end of a run in wandb: the last evaluation's episodes as a table, the best and
    the last scores in the summary, the run directory's files as a ``model`` artifact."""
    import wandb

    columns = ["budget", "problem", "sections", "cost", "candidate", "correct", "speedup"]
    rows = [[budget, r.problem, ",".join(r.sections), r.cost, r.candidate, r.correct,
             r.speedup] for budget, episodes in records.items() for r in episodes]
    run.log({"eval/episodes": wandb.Table(columns=columns, data=rows)}, step=result.steps)
    run.summary["best/step"] = result.best.step
    run.summary["best/geomean_speedup"] = result.best.geomean_speedup
    for r in result.best.results:
        run.summary[f"best/budget={r.budget:g}/geomean_speedup"] = r.geomean_speedup
    run.summary["steps_per_second"] = result.steps_per_second
    artifact = wandb.Artifact(f"model-{run.id}", type="model",
                              metadata={"best": result.best.to_dict()})
    for name in ("model.zip", "best_model.zip", "run.json", "evaluations.jsonl",
                 "progress.csv"):
        if (result.out / name).is_file():
            artifact.add_file(str(result.out / name))
    if (result.out / "monitor").is_dir():
        artifact.add_dir(str(result.out / "monitor"), name="monitor")
    run.log_artifact(artifact, aliases=["latest", f"best-{result.best.step}"])


def print_summary(result: TrainResult) -> None:
    """The run's best and last evaluation, one line per budget."""
    print(f"trained {result.steps} steps in {result.seconds:.1f} s "
          f"({result.steps_per_second:.0f} steps/s)")
    for name, evaluation in (("best", result.best), ("last", result.last)):
        budgets = ", ".join(f"{r.budget:g}: {r.geomean_speedup:.4f}" for r in evaluation.results)
        print(f"{name} (step {evaluation.step}): geomean speedup "
              f"{evaluation.geomean_speedup:.4f} ({budgets})")
    print(f"saved {result.model}, {result.best_model}, {result.out / 'run.json'}, "
          f"{result.out / 'evaluations.jsonl'}")
