"""``autoprofiler train``: train a selection policy with stable-baselines3 / sb3-contrib.

    autoprofiler train [--config maskable_ppo|FILE] [--seed 0] [--out DIR] [--steps N]
                       [--wandb] [--wandb-group NAME]

The config (:mod:`agents.rl.config`; one YAML file per algorithm in ``experiments/configs/``:
``maskable_ppo`` is the default, ``ppo``, ``a2c``, ``dqn``, ``qrdqn``, ``recurrent_ppo``,
``trpo``; rl-baselines3-zoo's format) names the algorithm, its hyperparameters, the
environment's ``make`` kwargs (a ``budget_range`` trains one policy for every budget), the
vector env and the evaluation.
Training runs on ``n_envs`` copies of ``AutoProfiler-v0`` (SB3's ``make_vec_env``:
``Monitor``-wrapped, seeded ``seed + rank``, in a ``DummyVecEnv`` or a ``SubprocVecEnv``);
MaskablePPO reads each sub-environment's ``action_masks()``, the other algorithms train without
masks (the environment answers a masked action as STOP). Every ``autoprofiler.eval.frequency``
steps, and at the end (of the saved model: one due once the total is reached, inside the
last rollout, is the end's), :class:`agents.rl.callbacks.RolloutEvalCallback` evaluates the policy
with the project's one evaluation (:func:`autoprofiler_env.evaluation.rollout`) on the
``eval.split`` problems at each of ``eval.budgets`` and keeps the best model by the mean of
the log scores over the budgets. ``--out`` (default ``runs/train/<config>-seed<N>``) gets

- ``model.zip`` (the final model) and ``best_model.zip`` (the best evaluated), SB3 files;
- ``run.json``: the config as given and as resolved, the environment's kwargs, the command
  line, the seed, the dataset's checksum, the package's and the libraries' versions, the
  ``numerics`` (torch's threads, the CPU and its kernels' settings:
  :func:`experiments.tracking.numerics`; a seed's model is the same bit for bit only where
  they are the same too, not on another CPU or thread count; a resumption on other numerics
  adds them, with its step, to ``numerics_resumed``), the best and the last evaluation;
- ``evaluations.jsonl``: each evaluation (step, per-budget geometric-mean speedup, ...,
  each episode's log score and length); ``evaluations.png``: the same as curves, one per
  budget, the best evaluation marked;
- ``evaluations.npz``: the evaluations in the format of SB3's ``EvalCallback``
  (``timesteps`` (n_evals,); ``results`` and ``ep_lengths`` (n_evals, n_episodes), an
  episode per (budget, problem) of the evaluation, budget after budget: its log score, the
  ``ln`` of its shipped speedup, and its length in steps), so that the mean of a row of
  ``results`` is that evaluation's objective (the mean over the budgets of the log
  geometric-mean speedups, ``evaluations.jsonl``'s ``objective``);
- ``progress.csv`` (SB3's logger) and ``<rank>.monitor.csv`` (SB3's ``Monitor``: every
  training episode, its return, length, problem, sections, cost, speedup, correctness).

The files are where SB3 and rl-baselines3-zoo look for them: SB3's ``load_results(out)``
reads the monitor files, and a run given ``--out logs/maskable_ppo/AutoProfiler-v0_1`` is
plotted by the zoo's ``rl_zoo3.plots.plot_train -a maskable_ppo -e AutoProfiler-v0 -f logs``
(the monitor files) and ``rl_zoo3.plots.all_plots -a maskable_ppo -e AutoProfiler-v0 -f logs``
(``evaluations.npz``).

A long run that is interrupted loses nothing and resumes. Ctrl-C (a ``KeyboardInterrupt``)
saves ``model.zip`` (and an off-policy algorithm's replay buffer, ``replay_buffer.pkl``) and
``run.json`` with the status ``interrupted`` and the steps done; the same command again
resumes the run (:func:`train`): the model is loaded with the run's algorithm, the training
environments are made again as they were (seeded), training goes on to the run's total steps,
the evaluations continue on their schedule and the best model kept stays the best unless an
evaluation beats it; ``evaluations.jsonl``, ``progress.csv`` and the monitor files are
appended to (a run interrupted when they were in ``monitor/``, as they were before, keeps
them there), ``evaluations.npz`` is written again from ``evaluations.jsonl`` (leaving out,
with a warning, the evaluations of an ``evaluations.jsonl`` written before it held each
episode's score), and ``run.json``'s ``resumed`` lists the steps at which the run resumed.
The config and ``--steps`` must resolve to the run's config, and ``--seed`` and the dataset
(its sha256) must be the run's, else the command refuses, naming the first difference (give
another ``--out`` to train anew). A resumed run is not bit-identical to an uninterrupted one:
the environments' and the random number generators' states are not restored (:func:`train`
says what). With ``--wandb`` a resumption goes on in the run's wandb run (its id kept in the
run directory's ``wandb.json``: :mod:`experiments.tracking`; ``run.json``'s ``wandb`` names
where it was started, ``wandb_resumed`` where each resumption wrote). A finished run is never
trained again. A run killed outright (SIGKILL, the OOM killer, a lost machine) resumes the same way
from its last checkpoint: every evaluation saves ``model.zip`` and the steps done in
``run.json`` (its status stays ``running``); an off-policy algorithm's replay buffer, large,
is saved only at an interruption, so a killed one resumes with an empty buffer (a warning
says so), and a run killed before its first evaluation starts again from step 0. The run
directory is held while a run trains (:func:`~autoprofiler_env.atomic.one_writer`, an
``flock`` on ``.lock`` that the system lets go of when the process ends, however it ends):
a second run given the same ``--out`` is refused at once, and a ``running`` run found by
the process holding it is a killed one.

``autoprofiler benchmark --policy sb3:DIR`` puts the run's best model beside the baselines
(:func:`agents.rl.load_run`). With ``--wandb`` the run (named ``<config>-seed<N>``, one
group per config unless ``--wandb-group`` or ``WANDB_RUN_GROUP`` says otherwise; where it goes:
:mod:`experiments.tracking`, offline without a key) gets SB3's logger
(:class:`experiments.sb3_wandb.WandbOutputFormat`: ``rollout/``, ``train/``, ``time/``,
``episode/`` and ``eval/`` keys against environment steps), the config, the last
evaluation's episodes as a table, ``evaluations.png`` and the run directory's files as a
``model`` artifact. An interrupted run's wandb run ends failed (exit code 1), with the saved
``model.zip`` and the run directory as its artifact (the replay buffer left out).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agents.rl import RUN_SCHEMA, check_run_schema
from agents.rl.callbacks import Evaluation, read_evaluations, save_model
from agents.rl.config import ENV_ID as CONFIG_ENV_ID
from agents.rl.config import OWN as CONFIG_OWN
from agents.rl.config import ConfigError, TrainConfig, algorithm_kwargs
from autoprofiler_env.atomic import holds, one_writer, write_atomic, write_png
from autoprofiler_env.errors import AutoProfilerError, EmptySplitError, warn
from autoprofiler_env.profiler.runner import terminate_becomes_exit
from experiments.tracking import numerics, versions

CONFIGS = Path(__file__).parent / "configs"
"""The shipped configs, one per algorithm."""
ENV_ID = "autoprofiler_env:AutoProfiler-v0"
"""The training id: ``module:id`` imports the package (and registers the id) in every
subprocess of a ``SubprocVecEnv``."""
INFO_KEYWORDS = ("problem", "sections", "cost", "speedup", "correct")
"""What each episode's line of ``<rank>.monitor.csv`` holds besides SB3's return, length and
time."""
REPLAY_BUFFER = "replay_buffer.pkl"
"""An interrupted off-policy run's replay buffer (SB3's ``save_replay_buffer``), which its
resumption loads; removed when the run finishes."""


def config_path(spec: str | Path, experiment: bool = False) -> Path:
    """A config file: a path, or the name of a shipped one: a training config
    (``maskable_ppo``), or with ``experiment`` an experiment's (``compare``: its first key is
    ``experiment:``)."""
    def is_experiment(path: Path) -> bool:
        return "\nexperiment:" in "\n" + path.read_text()

    path = Path(spec)
    if path.is_file():
        return path
    shipped = CONFIGS / f"{spec}.yaml"
    if shipped.is_file() and is_experiment(shipped) == experiment:
        return shipped
    names = ", ".join(sorted(p.stem for p in CONFIGS.glob("*.yaml")
                             if is_experiment(p) == experiment))
    raise ConfigError(f"--config {spec}: no such file, nor a shipped "
                      f"{'experiment config' if experiment else 'config'} (one of {names})")


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


def read_run(out: str | Path) -> dict | None:
    """The ``run.json`` of the run directory ``out`` (None: it has none)."""
    path = Path(out) / "run.json"
    try:
        run = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise AutoProfilerError(f"{path}: unreadable ({e}): remove the directory to train "
                                "again, or give another --out") from e
    if not isinstance(run, dict):
        raise AutoProfilerError(f"{path}: not a run's record (a JSON object): remove the "
                                "directory to train again, or give another --out")
    check_run_schema(run, path)
    return run


def interrupted_run(out: str | Path) -> dict | None:
    """The ``run.json`` of ``out`` where it is a run that :func:`train` resumes: interrupted
    (its status ``interrupted``) or killed (``running``, seen holding the folder), with a
    ``model.zip`` saved (at the interruption, or the last evaluation's checkpoint); None
    otherwise."""
    run = read_run(out)
    if run is not None and run.get("status") in ("interrupted", "running") \
            and (Path(out) / "model.zip").is_file():
        return run
    return None


def check_out(out: str | Path, config: TrainConfig | None = None, seed: int | None = None,
              resume: bool = True) -> Path:
    """``out`` as a path, or an error if it holds a run that is not to be trained into: a
    finished one (a run is never overwritten), an interrupted or killed one where ``resume``
    is false, or one whose config (``config``, resolved, with ``--steps``) or seed differs
    from the run's (:func:`check_resumable`; not checked where ``config`` is None). Call it
    holding ``out`` (:func:`~autoprofiler_env.atomic.one_writer`, as :func:`train` does):
    a run whose status is ``running`` is then one whose process was killed (a live one holds
    the folder), and it resumes from its last checkpoint as an interrupted one does. A run
    without its ``model.zip`` passes: :func:`train` starts it afresh."""
    out = Path(out)
    run = read_run(out)
    if run is None:
        return out
    status = run.get("status")
    if status == "running" and not holds(out):  # unlocked (Windows): it may be training
        raise AutoProfilerError(f"{out} holds a run whose status is running (run.json): it "
                                "is training in another process, or was killed, and the "
                                "folder cannot be locked here to tell which: give another "
                                "--out, or remove the directory to train again")
    if status in ("interrupted", "running"):
        if not resume:
            raise AutoProfilerError(f"{out} holds {stopped_run(run)} (run.json): resume it "
                                    "(train(..., resume=True), or the same `autoprofiler "
                                    "train` command), give another --out, or remove the "
                                    "directory to train again")
        if config is not None and (out / "model.zip").is_file():
            check_resumable(out, run, config, seed)
        return out
    if status == "finished":
        raise AutoProfilerError(f"{out} holds a run already (run.json): give another --out, "
                                "or remove the directory to train again")
    raise AutoProfilerError(f"{out}/run.json: the status {status!r} is none of a run's "
                            "(running, interrupted, finished): remove the directory to train "
                            "again, or give another --out")


def stopped_run(run: dict) -> str:
    """How a run that did not finish stopped, for the messages."""
    return ("an interrupted run" if run.get("status") == "interrupted"
            else "a run that was killed before it finished")


def _config_key(path: tuple[str, ...]) -> str:
    """A key of :meth:`TrainConfig.to_dict` as a config file spells it
    (``hyperparameters.n_steps`` -> ``AutoProfiler-v0.n_steps``)."""
    head, rest = path[0], list(path[1:])
    spelled = {"hyperparameters": [CONFIG_ENV_ID], "env": [CONFIG_ENV_ID, "env_kwargs"],
               "policy": [CONFIG_ENV_ID, "policy"], "n_envs": [CONFIG_ENV_ID, "n_envs"],
               "total_timesteps": [CONFIG_ENV_ID, "n_timesteps"],
               "algorithm": [CONFIG_OWN, "algorithm"], "vec_env": [CONFIG_OWN, "vec_env"],
               "log_interval": [CONFIG_OWN, "log_interval"], "eval": [CONFIG_OWN, "eval"]}
    key = ".".join(spelled.get(head, [head]) + rest)
    return key + " (or --steps)" if head == "total_timesteps" else key


_MISSING = "(not set)"


def _first_difference(old, new, path: tuple[str, ...] = ()):
    """The first key (as a path) whose value differs between two JSON values, with the two
    values; None if they are equal."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*old, *(k for k in new if k not in old)]:
            if key not in old or key not in new:
                return (*path, key), old.get(key, _MISSING), new.get(key, _MISSING)
            found = _first_difference(old[key], new[key], (*path, key))
            if found is not None:
                return found
        return None
    return None if old == new else (path, old, new)


def _as_json(value):
    return json.loads(json.dumps(value, default=str))


def check_resumable(out: Path, run: dict, config: TrainConfig, seed: int | None) -> None:
    """A :class:`ConfigError` naming the first difference, where ``config`` (resolved, its
    ``total_timesteps`` from ``--steps`` where given) or ``seed`` is not the interrupted or
    killed run's: a run resumes only as it was started."""
    head = f"{out}: cannot resume {stopped_run(run)}"
    tail = ("resume it with the run's --config, --steps and --seed (its run.json says "
            "them), or give another --out to train anew")
    if seed is not None and run.get("seed") is not None and int(seed) != run["seed"]:
        raise ConfigError(f"{head}: --seed is {seed} now, the run's is {run['seed']}: {tail}")
    found = _first_difference(_as_json(run.get("config")), _as_json(config.to_dict()))
    if found is not None:
        path, old, new = found
        raise ConfigError(f"{head}: {_config_key(path) if path else 'the config'} is "
                          f"{json.dumps(new)} now, the run's is {json.dumps(old)}: {tail}")


def _check_same_environment(out: Path, run: dict, dataset: dict, kwargs: dict) -> None:
    """A :class:`ConfigError` where the environment a run resumes on is not the one it was
    trained on: another dataset (its sha256, or an earlier file of its content: ``dataset``
    is its metadata), other ``make`` kwargs (the registered defaults changed)."""
    from autoprofiler_env.dataset.format import same_content

    head = f"{out}: cannot resume {stopped_run(run)}"
    if not same_content(dataset, run.get("dataset_sha256")):
        raise ConfigError(f"{head}: it was trained on the dataset of sha256 "
                          f"{run.get('dataset_sha256')}, the environment's now is "
                          f"{dataset.get('sha256')}: resume it with the run's dataset, or give "
                          "another --out to train anew")
    found = _first_difference(_as_json(run.get("env_kwargs")), _as_json(kwargs))
    if found is not None:
        path, old, new = found
        raise ConfigError(f"{head}: the environment's make kwarg {'.'.join(path)} is "
                          f"{json.dumps(new)} now, the run's is {json.dumps(old)} (its default "
                          "changed?): resume it with the run's package version, or give "
                          "another --out to train anew")


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
                   source: str = "config", append: bool = False):
    """``n_envs`` Monitor-wrapped training environments in the config's vector env, their
    episodes in ``monitor_dir``'s ``<rank>.monitor.csv`` (where given). ``append``: the
    monitor files are a resumed run's, appended to (their ``t`` keeps counting from their
    header's ``t_start``), not started anew."""
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    kwargs = env_kwargs(config)
    if config.vec_env == "subproc":  # a bad kwarg would only surface as a dead subprocess
        _checked(lambda: gym.make(ENV_ID, **kwargs), source).close()
    starts = (_monitor_starts(Path(monitor_dir), config.n_envs)
              if append and monitor_dir is not None else None)
    subproc = config.vec_env == "subproc"
    vec_env = _checked(lambda: make_vec_env(
        # make_vec_env makes each with render_mode rgb_array, as the zoo's training does (the
        # environment draws its picture only when render() is called: no cost per step)
        _make_in_subprocess if subproc else ENV_ID, n_envs=config.n_envs, seed=seed,
        env_kwargs={"render_mode": "rgb_array", **kwargs} if subproc else kwargs,
        monitor_dir=str(monitor_dir) if monitor_dir is not None else None,
        monitor_kwargs={"info_keywords": INFO_KEYWORDS, "override_existing": starts is None},
        vec_env_cls=SubprocVecEnv if subproc else DummyVecEnv), source)
    for rank, start in enumerate(starts or ()):
        vec_env.set_attr("t_start", start, indices=[rank])
    return vec_env


def _make_in_subprocess(**kwargs):
    """A ``SubprocVecEnv`` subprocess's environment. What making it warns of was said once
    already, when the command made one with the same kwargs to check them: each subprocess
    would say it again, in Python's format and pointed at ``multiprocessing``."""
    import warnings

    import gymnasium as gym

    from autoprofiler_env.errors import AutoProfilerWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AutoProfilerWarning)
        return gym.make(ENV_ID, **kwargs)


def _monitor_starts(monitor_dir: Path, n_envs: int) -> list[float]:
    """Each rank's monitor file's ``t_start`` (its JSON header line), the file created with
    its header where it is missing (Monitor appends to a file without writing one)."""
    from stable_baselines3.common.monitor import ResultsWriter

    monitor_dir.mkdir(parents=True, exist_ok=True)
    starts = []
    for rank in range(n_envs):
        path = monitor_dir / f"{rank}.monitor.csv"
        try:
            with path.open() as file:
                starts.append(float(json.loads(file.readline().removeprefix("#"))["t_start"]))
            continue
        except (OSError, ValueError, KeyError, TypeError):
            pass
        starts.append(time.time())
        ResultsWriter(str(path), header={"t_start": starts[-1], "env_id": ENV_ID.split(":")[1]},
                      extra_keys=INFO_KEYWORDS).close()
    return starts


def _checked(make, source: str):
    """``make()``, its errors about the environment's kwargs as a :class:`ConfigError`
    naming the config's ``env_kwargs`` key."""
    try:
        return make()
    except (ValueError, TypeError, AutoProfilerError) as e:
        if isinstance(e, (ConfigError, EmptySplitError)):  # a split the dataset lacks: the
            raise  # command says it in its terms
        raise ConfigError(f"{source}: {CONFIG_ENV_ID}.env_kwargs: "
                          f"{str(e).splitlines()[0]}") from e


def build_model(config: TrainConfig, env, seed: int, source: str = "config"):
    """The config's algorithm on ``env``; an error of its hyperparameters (a ``net_arch``
    torch cannot build, a value SB3 refuses) as a :class:`ConfigError`."""
    from agents.rl import algorithms

    cls = algorithms()[config.algorithm]
    try:
        return cls(config.policy, env, seed=seed, verbose=0, **algorithm_kwargs(config))
    except (ValueError, TypeError, AssertionError, KeyError, RuntimeError) as e:
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


def _appending_logger(out: Path, verbose: int):
    """SB3's logger of a resumed run: its ``progress.csv`` appended to (SB3's ``configure``
    opens the file ``w+``, truncating it)."""
    from stable_baselines3.common.logger import CSVOutputFormat, Logger, make_output_format

    class AppendingCSV(CSVOutputFormat):
        """SB3's CSV format on an existing file: its header's keys kept, rows appended (a
        new key rewrites the file with an empty column for the rows before, as SB3's
        does)."""

        def __init__(self, path: Path) -> None:
            if not path.is_file() or path.stat().st_size == 0:
                super().__init__(str(path))
                return
            self.file = open(path, "r+")  # noqa: SIM115  (SB3's format closes it)
            header = self.file.readline().rstrip("\n")
            self.keys = header.split(",") if header else []
            self.separator, self.quotechar = ",", '"'
            self.file.seek(0, 2)
            if not path.read_bytes().endswith(b"\n"):  # a row cut off by the interruption
                self.file.write("\n")

    formats = [AppendingCSV(out / "progress.csv")]
    if verbose:
        formats.append(make_output_format("stdout", str(out)))
    return Logger(folder=str(out), output_formats=formats)


def _load_for_resume(config: TrainConfig, out: Path, vec_env, previous: dict):
    """An interrupted or killed run's ``model.zip`` with the run's algorithm, on ``vec_env``
    (reset when training resumes); an off-policy one's replay buffer loaded where its
    ``run.json`` (``previous``) names one saved with the model (a killed run's checkpoint
    has none: a buffer file left by an earlier interruption is older than its model)."""
    from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

    from agents.rl import load_model

    device = algorithm_kwargs(config).get("device", "cpu")
    try:
        model = load_model(out / "model.zip", config.algorithm, device=device, trusted=True)
    except AutoProfilerError as e:  # damaged since it was written (it is written atomically)
        raise AutoProfilerError(f"{e}: cannot resume {stopped_run(previous)} from it; remove "
                                f"{out / 'model.zip'} to train it again from step 0, or give "
                                "another --out") from None
    try:
        model.set_env(vec_env)  # force_reset: the environments restart, seeded
    except (AssertionError, ValueError) as e:
        raise ConfigError(f"{out}: cannot resume {stopped_run(previous)}: its model does not "
                          f"fit the training environment ({str(e).splitlines()[0]}); give "
                          "another --out to train anew") from e
    if isinstance(model, OffPolicyAlgorithm):
        if previous.get("replay_buffer") and (out / REPLAY_BUFFER).is_file():
            model.load_replay_buffer(out / REPLAY_BUFFER)
        elif previous.get("status") == "running":
            warn(f"{out}: the killed {config.algorithm} run resumes from its last checkpoint "
                 "with an empty replay buffer (a checkpoint saves none; an interruption, "
                 "Ctrl-C or SIGTERM, does)")
        else:
            warn(f"{out}: no {REPLAY_BUFFER}: the resumed {config.algorithm} run "
                 "starts with an empty replay buffer")
    return model


def _monitor_files(out: Path) -> list[Path]:
    """The run's SB3 monitor files: at the top of ``out``, or in ``monitor/`` (a run begun
    in the layout before)."""
    return [*out.glob("*.monitor.csv"), *out.glob("monitor/*.monitor.csv")]


def _log_lines(out: Path) -> dict[str, int]:
    """The lines of the run's logs at a checkpoint (SB3's ``progress.csv``, the monitor
    files, ``evaluations.jsonl``; each written a whole line at a time and flushed), by path
    relative to ``out``. Lines, not bytes: SB3 rewrites ``progress.csv`` whole when a key
    first appears (its header and every row grow), keeping its lines."""
    return {path.relative_to(out).as_posix(): path.read_bytes().count(b"\n")
            for path in [out / "progress.csv", out / "evaluations.jsonl", *_monitor_files(out)]
            if path.is_file()}


def _cut_to_checkpoint(out: Path, lines: dict) -> None:
    """A run's logs cut back to their lines at the checkpoint it resumes from: what a killed
    run logged after it (episodes, rollouts, an evaluation) is of steps the resumed run
    makes again, which SB3's ``load_results`` and the zoo's plots would count twice."""
    for name, kept in lines.items():
        path = out / name
        if not isinstance(kept, int) or not path.is_file():
            continue
        data = path.read_bytes()
        if data.count(b"\n") > kept:
            end = 0
            for _ in range(kept):
                end = data.index(b"\n", end) + 1
            os.truncate(path, end)


def saved_steps(path: Path) -> int | None:
    """The steps a saved SB3 model (``model.zip``) was trained for, read from its ``data``
    without loading it; None where it cannot be read."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as saved:
            steps = json.loads(saved.read("data")).get("num_timesteps")
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    return steps if isinstance(steps, int) else None


class _Unlearned:
    """An on-policy algorithm's steps collected since its last update (its rollout under
    way, which no update learned from), for a checkpoint or an interruption to record: a
    resumed run learns them again. Without it, a run interrupted in its last rollout (the
    total reached, the update not yet made) resumed to learn nothing and called itself
    finished, one update short of an uninterrupted run."""

    def __init__(self, model, owed: int = 0) -> None:
        from stable_baselines3.common.callbacks import BaseCallback
        from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

        self.model = model
        self.on_policy = isinstance(model, OnPolicyAlgorithm)
        # a resumed run's last update was ``owed`` steps before the steps it resumes at, and
        # its first rollout starts with none made since: counted from there
        self.start = int(model.num_timesteps) - owed
        self.first = True
        marker = self

        class _Callback(BaseCallback):
            def _on_rollout_start(self) -> None:  # the previous rollout's update made
                if not marker.first:
                    marker.start = int(self.model.num_timesteps)
                marker.first = False

            def _on_step(self) -> bool:
                return True

        self.callback = _Callback()

    @property
    def steps(self) -> int:
        return int(self.model.num_timesteps) - self.start if self.on_policy else 0


def _save_interrupted(model, out: Path, record: dict | None = None) -> dict:
    """What an interruption saves to resume from: the model, an off-policy algorithm's
    replay buffer; returns what ``run.json`` says of it."""
    import io

    from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

    save_model(model, out / "model.zip", record)
    if isinstance(model, OffPolicyAlgorithm) and model.replay_buffer is not None:
        buffer = io.BytesIO()
        model.save_replay_buffer(buffer)
        write_atomic(out / REPLAY_BUFFER, buffer.getvalue())
        return {"replay_buffer": REPLAY_BUFFER}
    return {}


def train(config: TrainConfig, out: Path, seed: int = 0, given: dict | None = None,
          source: str = "config", wandb_run=None, progress: bool = True,
          command: list[str] | None = None, verbose: int = 0,
          resume: bool = True,
          after_evaluation: Callable[[int, float], bool | None] | None = None) -> TrainResult:
    """Trains a model as ``config`` says and writes ``out`` (the module docstring says
    what); returns what it wrote and scored. ``given``: the config file's content, kept in
    ``run.json`` beside the resolved config. A script that calls it with ``vec_env:
    subproc`` guards its own code with ``if __name__ == "__main__":`` (SB3 starts the
    workers with ``forkserver``, which imports the script again in each).

    ``after_evaluation(steps, objective)``, where given, is called after each evaluation
    (its checkpoint saved) with the steps done and the evaluation's objective (the mean over
    the budgets of the log geometric-mean speedups, :class:`Evaluation`); where it returns
    ``False`` the run stops there, finished early: its last evaluation is that one,
    ``run.json``'s ``stopped_early`` says at which step, and the result's ``steps`` are
    fewer than the config's (a tuning trial that its pruner stops: :mod:`experiments.tune`).
    What it raises ends the run as an error would (a killed run's files: resumable).

    Where ``out`` holds an interrupted run (``run.json``'s status ``interrupted``: a
    ``KeyboardInterrupt``, Ctrl-C, saved it) or a killed one (``running``, its last
    evaluation's checkpoint saved) and ``resume`` is true, the run is resumed rather than
    started: its ``model.zip`` loaded with its algorithm (an off-policy one's
    ``replay_buffer.pkl`` too, where the interruption saved one), the training
    environments made again as they were (:func:`make_train_env`, seeded with ``seed``),
    the evaluations so far restored
    (:meth:`RolloutEvalCallback.restore`: the best model kept stays the best unless beaten,
    the evaluations continue on their schedule) and training continued to the config's
    ``total_timesteps``; ``evaluations.jsonl``, ``progress.csv`` and the monitor files are
    appended to (first cut back to their lines at the checkpoint or interruption resumed
    from: a killed run's later lines are of steps made again), ``run.json``'s ``resumed``
    lists the steps at which the run resumed. The
    config (with ``--steps``) and the seed must be the run's, and the dataset (its sha256)
    and the environment's kwargs too, else a :class:`ConfigError` names the first
    difference. A run without a ``model.zip`` (stopped before it could save) is started
    afresh. ``out`` is held while it trains: another process training into it gets a
    :class:`~autoprofiler_env.errors.FolderBusyError`.

    What is not restored: the environments' state (an episode under way is dropped, the
    environments restart from their seeded reset, so the first episodes' problems and
    budgets repeat the run's start), the random number generators (SB3 seeds torch's and
    the action space's with the run's seed again when loading) and an on-policy rollout
    under way (its steps, counted in the run's steps and recorded as ``unlearned``, are
    collected again beyond the total, so that as many updates are made; the run may end up
    to one rollout past where an uninterrupted one would). A resumed run is therefore
    not bit-identical to an uninterrupted one of the same seed."""
    with one_writer(Path(out), "autoprofiler train"):
        return _train(config, Path(out), seed, given, source, wandb_run, progress, command,
                      verbose, resume, after_evaluation)


def _train(config, out, seed, given, source, wandb_run, progress, command, verbose,
           resume, after_evaluation=None) -> TrainResult:
    """:func:`train`'s work, ``out`` held."""
    import gymnasium as gym
    from stable_baselines3.common.callbacks import CallbackList
    from stable_baselines3.common.logger import configure

    from agents.rl.callbacks import (
        EpisodeOutcomeCallback,
        ProgressBarCallback,
        RolloutEvalCallback,
    )

    out = check_out(out, config, seed, resume=resume)
    previous = read_run(out)  # None, or an interrupted or killed run (check_out refused others)
    if previous is not None and not (out / "model.zip").is_file():
        warn(f"{out}: {stopped_run(previous)} there has no model.zip (stopped before its "
             f"first save, or removed since): trained afresh from step 0, its "
             f"evaluations and best model replaced")
        for name in ("best_model.zip", "evaluations.jsonl", "evaluations.npz", REPLAY_BUFFER):
            (out / name).unlink(missing_ok=True)  # stopped before it saved: start afresh
        for monitor in _monitor_files(out):
            monitor.unlink()  # a rank the new run lacks would stay in load_results' episodes
        if (out / "monitor").is_dir() and not any((out / "monitor").iterdir()):
            (out / "monitor").rmdir()
        previous = None
    if previous is not None:  # a kill after its last checkpoint (or interruption) logged on
        _cut_to_checkpoint(out, previous.get("log_lines") or {})
    out.mkdir(parents=True, exist_ok=True)
    eval_env = make_eval_env(config, source)
    base = eval_env.unwrapped
    dataset_sha256 = base.backend.dataset.metadata.get("sha256")
    kwargs = dict(gym.spec(ENV_ID.split(":")[1]).kwargs) | env_kwargs(config)
    try:
        if previous is not None:
            _check_same_environment(out, previous, base.backend.dataset.metadata, kwargs)
        # the monitor files at the top of the run directory, where SB3's load_results and
        # the zoo's plot_train look for them; a run interrupted when they were in monitor/
        # (before this layout) resumes appending to them there
        legacy = previous is not None and (out / "monitor").is_dir()
        vec_env = make_train_env(config, seed, out / "monitor" if legacy else out, source,
                                 append=previous is not None)
    except BaseException:
        eval_env.close()
        raise
    logger = None
    try:
        if previous is None:
            model = build_model(config, vec_env, seed, source)
            found = versions()
            meta = {"schema": RUN_SCHEMA, "algorithm": config.algorithm, "seed": seed,
                    "config_file": portable(source) if source != "config" else source,
                    "config_given": given, "config": config.to_dict(),
                    "env_kwargs": kwargs, "optimizer": base.optimizer,
                    "dataset_sha256": dataset_sha256,
                    "package_version": found["autoprofiler-env"], "versions": found,
                    "numerics": numerics(),
                    "command": list(command if command is not None
                                    else ["autoprofiler", *sys.argv[1:]]),
                    "status": "running", "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "models": {"final": "model.zip", "best": "best_model.zip"},
                    "wandb": _wandb_identity(wandb_run)}
            logger = configure(str(out), ["csv"] + (["stdout"] if verbose else []))
            done, before, owed = 0, 0.0, 0
        else:
            model = _load_for_resume(config, out, vec_env, previous)
            done, before = int(model.num_timesteps), float(previous.get("seconds") or 0.0)
            # the rollout under way when it stopped, not learned from: learned now (the run
            # may end up to one rollout past where an uninterrupted one would)
            owed = previous.get("unlearned")
            owed = owed if isinstance(owed, int) and 0 <= owed <= done else 0
            # steps, seconds, the logs' lines and an interruption's replay buffer stay until
            # the next checkpoint: a run killed before it resumes from the same model again
            meta = {k: v for k, v in previous.items()
                    if k != "interrupted"} | {  # "unlearned" too: model.zip's still
                "status": "running", "resumed": [*previous.get("resumed", []), done]}
            here = numerics()  # a resumption on other numerics: said, as the steps it took
            if here != previous.get("numerics"):
                meta["numerics_resumed"] = [*previous.get("numerics_resumed", []),
                                            {"step": done, **here}]
            if wandb_run is not None:  # the run's first wandb run stays "wandb"
                meta["wandb_resumed"] = [*previous.get("wandb_resumed", []),
                                         _wandb_identity(wandb_run)]
            logger = _appending_logger(out, verbose)
        _write_json(out / "run.json", meta)
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
            # a checkpoint: a run killed from here on (SIGKILL, the OOM killer, a lost
            # machine) resumes from this step, not from 0 (an off-policy algorithm's replay
            # buffer, large, is saved only when interrupted)
            save_model(model, out / "model.zip", meta)
            meta.pop("replay_buffer", None)  # older than this model now
            _write_json(out / "run.json", meta | {
                "steps": int(model.num_timesteps), "unlearned": unlearned.steps,
                "seconds": before + time.perf_counter() - started,
                "log_lines": _log_lines(out)})
            if after_evaluation is not None:  # False: the run stops here (a pruned trial)
                return after_evaluation(evaluation.step, evaluation.objective)
            return None

        evaluator = RolloutEvalCallback(eval_env, config.eval.budgets, config.eval.frequency,
                                        best_model_path=out / "best_model.zip",
                                        log_path=out / "evaluations.jsonl", seed=seed,
                                        on_evaluation=on_evaluation, verbose=verbose,
                                        npz_path=out / "evaluations.npz",
                                        total_timesteps=config.total_timesteps,
                                        record=meta)
        if previous is not None:
            evaluator.restore(read_evaluations(out / "evaluations.jsonl"))
        unlearned = _Unlearned(model, owed)
        callbacks = [unlearned.callback, EpisodeOutcomeCallback(), evaluator]
        bar = ProgressBarCallback(config.total_timesteps,
                                  f"{config.algorithm} seed {seed}") if progress else None
        if bar is not None:
            callbacks.append(bar)
        learn = {"log_interval": config.log_interval} if config.log_interval else {}
        started = time.perf_counter()
        try:
            # reset_num_timesteps=False: SB3 adds the steps done, training to the total
            # SIGTERM (a job scheduler, timeout) as Ctrl-C: the run is saved and resumes
            with terminate_becomes_exit(lambda: KeyboardInterrupt("SIGTERM")):
                model.learn(max(config.total_timesteps - done, 0) + owed,
                            callback=CallbackList(callbacks),
                            reset_num_timesteps=previous is None, **learn)
        except KeyboardInterrupt:
            if bar is not None:
                bar.close()  # the error's line after the bar's, not on it
            saved = _save_interrupted(model, out, meta)
            _write_json(out / "run.json", meta | saved | {"log_lines": _log_lines(out)} | {
                "status": "interrupted", "interrupted": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "steps": int(model.num_timesteps), "unlearned": unlearned.steps,
                "seconds": before + time.perf_counter() - started})
            if wandb_run is not None:  # what the resumption starts from, in wandb too
                _log_model_artifact(wandb_run, out, {"status": "interrupted",
                                                     "steps": int(model.num_timesteps)},
                                    ["latest", "interrupted"])
            raise
        seconds = before + time.perf_counter() - started
        save_model(model, out / "model.zip", meta)
        result = TrainResult(out, out / "model.zip", out / "best_model.zip", evaluator.best,
                             evaluator.evaluations[-1], int(model.num_timesteps), seconds,
                             list(evaluator.evaluations))
        if evaluator.stopped and result.steps < config.total_timesteps:
            meta["stopped_early"] = result.steps
        meta.pop("unlearned", None)  # every update made
        meta |= {"status": "finished", "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                 "steps": result.steps, "seconds": seconds,
                 "steps_per_second": result.steps_per_second,
                 "best": result.best.to_dict(episodes=False),
                 "last": result.last.to_dict(episodes=False)}
        _write_json(out / "run.json", meta)
        plot_evaluations(result.evaluations, out / "evaluations.png", out.name,
                         config.eval.split)
        (out / REPLAY_BUFFER).unlink(missing_ok=True)  # only a resumption reads it
        if wandb_run is not None:
            _log_wandb(wandb_run, result, last_records)
        return result
    finally:
        if logger is not None:  # progress.csv's file (a pruned tune trial left it open)
            logger.close()
        close_vec_env(vec_env)
        eval_env.close()


def close_vec_env(vec_env) -> None:
    """Closes the training environments, a ``SubprocVecEnv`` whose workers are gone
    included: Ctrl-C in a terminal reaches the whole process group, the workers die of it,
    and SB3's ``close`` then meets their pipes closed (a ``BrokenPipeError``, a
    ``ConnectionResetError``, an ``EOFError``), which raised from here would take the
    interruption's place (the command exiting 0 without a word, or with a traceback). The
    workers are joined (terminated where one still runs) without their pipes."""
    try:
        vec_env.close()
    except (EOFError, OSError):
        for process in getattr(vec_env, "processes", ()):
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
                process.join()
        vec_env.closed = True


def plot_evaluations(evaluations: list[Evaluation], path: Path, title: str,
                     split: str | None = None) -> Path:
    """The evaluations during training as curves: the geometric-mean speedup on the
    evaluation split against environment steps, one curve per budget (markers of their own,
    so that budgets of equal scores still show), and the objective (their geometric mean)
    with the best evaluation, the model kept, marked in black."""

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    steps = [e.step for e in evaluations]
    markers = ("o", "^", "s", "D", "v", "P")
    for i, budget in enumerate(r.budget for r in evaluations[0].results):
        ax.plot(steps, [e.results[i].geomean_speedup for e in evaluations],
                marker=markers[i % len(markers)], markersize=6 - i % 3, alpha=0.85,
                label=f"budget {budget:.0%}")
    ax.plot(steps, [e.geomean_speedup for e in evaluations], color="black", linewidth=2,
            marker="o", markersize=3, label="over the budgets (objective)")
    best = max(evaluations, key=lambda e: e.objective)  # the first of the highest, as kept
    ax.scatter([best.step], [best.geomean_speedup], s=120, facecolors="none",
               edgecolors="black", linewidths=1.8, zorder=3,
               label=f"best, kept (step {best.step})")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("geometric-mean speedup" + (f" ({split} split)" if split else ""))
    ax.set_title(f"autoprofiler train: {title}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return write_png(fig, path)


def _write_json(path: Path, data: dict) -> None:
    write_atomic(path, (json.dumps(data, indent=1, default=str) + "\n").encode())


def _wandb_identity(run) -> dict | None:
    """Where ``run.json``'s wandb run is (None: no run, or a disabled one, which writes
    nothing)."""
    if run is None or run.disabled:
        return None
    return {"id": run.id, "group": run.group or None, "dir": str(run.dir),
            "mode": run.settings.mode}


def _log_wandb(run, result: TrainResult, records: dict) -> None:
    """The end of a run in wandb: the last evaluation's episodes as a table, the curves of
    ``evaluations.png`` as an image, the best and the last scores in the summary, the run
    directory's files as a ``model`` artifact."""
    import wandb

    columns = ["budget", "problem", "sections", "cost", "candidate", "correct", "speedup"]
    rows = [[budget, r.problem, ",".join(r.sections), r.cost, r.candidate, r.correct,
             r.speedup] for budget, episodes in records.items() for r in episodes]
    logged = {"eval/episodes": wandb.Table(columns=columns, data=rows)}
    if (result.out / "evaluations.png").is_file():
        logged["evaluations"] = wandb.Image(str(result.out / "evaluations.png"))
    run.log(logged, step=result.steps)
    run.summary["best/step"] = result.best.step
    run.summary["best/geomean_speedup"] = result.best.geomean_speedup
    for r in result.best.results:
        run.summary[f"best/budget={r.budget:g}/geomean_speedup"] = r.geomean_speedup
    run.summary["steps_per_second"] = result.steps_per_second
    _log_model_artifact(run, result.out, {"best": result.best.to_dict(episodes=False)},
                        ["latest", f"best-{result.best.step}"])


def _log_model_artifact(run, out: Path, metadata: dict, aliases: list[str]) -> None:
    """The run directory's files (the models, ``run.json``, the evaluations, SB3's and the
    monitors' logs; not an off-policy run's replay buffer, which can be gigabytes) as the
    wandb run's ``model`` artifact."""
    import wandb

    artifact = wandb.Artifact(f"model-{run.id}", type="model", metadata=metadata)
    for name in ("model.zip", "best_model.zip", "run.json", "evaluations.jsonl",
                 "evaluations.npz", "evaluations.png", "progress.csv"):
        if (out / name).is_file():
            artifact.add_file(str(out / name))
    for monitor in sorted(out.glob("*.monitor.csv")):
        artifact.add_file(str(monitor))
    if (out / "monitor").is_dir():  # a run resumed from the layout before: monitor/<rank>
        artifact.add_dir(str(out / "monitor"), name="monitor")
    run.log_artifact(artifact, aliases=aliases)


def print_summary(result: TrainResult) -> None:
    """The run's best and last evaluation, one line per budget."""
    print(f"trained {result.steps} steps in {result.seconds:.1f} s "
          f"({result.steps_per_second:.0f} steps/s)")
    for name, evaluation in (("best", result.best), ("last", result.last)):
        budgets = ", ".join(f"{r.budget:g}: {r.geomean_speedup:.4f}" for r in evaluation.results)
        print(f"{name} (step {evaluation.step}): geomean speedup "
              f"{evaluation.geomean_speedup:.4f} ({budgets})")
    print(f"saved {result.model}, {result.best_model}, {result.out / 'run.json'}, "
          f"{result.out / 'evaluations.jsonl'}, {result.out / 'evaluations.npz'}, "
          f"{result.out / 'evaluations.png'}")
