"""Training configurations: one YAML file per algorithm, in the spirit of rl-baselines3-zoo's
hyperparameter files (``experiments/configs/*.yaml``).

>>> config = load_config("experiments/configs/maskable_ppo.yaml")
>>> config.algorithm, config.hyperparameters["n_steps"], config.env["budget_range"]
('maskable_ppo', 256, [0.05, 1.0])

The keys (every one but ``algorithm`` optional, with the defaults of :class:`TrainConfig`):

- ``algorithm``: ``maskable_ppo`` (sb3-contrib, the default), ``ppo``, ``a2c``, ``dqn`` or
  ``qrdqn``; ``policy``: one of the algorithm's policy names (``MultiInputPolicy``: the
  observation is a ``Dict``);
- ``hyperparameters``: keyword arguments of the algorithm's constructor, as the zoo writes
  them: ``lin_<x>`` is a schedule decaying linearly from ``x`` to 0 (``learning_rate``,
  ``clip_range``, ``clip_range_vf``), and ``policy_kwargs.activation_fn`` names a torch
  activation (``tanh``, ``relu``, ``elu``, ``leaky_relu``, ``gelu``);
- ``env``: the environment's ``make`` kwargs (``split``, ``budget`` or ``budget_range``,
  ``dataset``, ``optimizer``, ``cost_penalty``, ``incorrect_reward``, ...: the class
  docstring of :class:`~autoprofiler_env.envs.profiling_env.ProfilingEnv`);
- ``n_envs`` and ``vec_env`` (``dummy``: one process, or ``subproc``: one process per env);
- ``total_timesteps``; ``log_interval`` (SB3's: iterations for on-policy algorithms,
  episodes for off-policy ones; None: the algorithm's default);
- ``eval``: ``frequency`` (environment steps between evaluations), ``split`` (``val``) and
  ``budgets`` (the fractions of the full set's cost the policy is evaluated at).

A bad file is one :class:`ConfigError` naming the key (``hyperparameters.n_step: ...``) and
saying what is accepted; values the environment or the algorithm check themselves (a
``budget_range`` of the wrong shape, a ``net_arch`` torch cannot build) are named the same
way when the model is built (:func:`experiments.train.build_model`).
"""

from __future__ import annotations

import difflib
import inspect
import math
import numbers
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from autoprofiler_env.errors import AutoProfilerError

ALGORITHMS = ("maskable_ppo", "ppo", "a2c", "dqn", "qrdqn")
VEC_ENVS = ("dummy", "subproc")
SPLITS = ("train", "val", "test")
SCHEDULED = ("learning_rate", "clip_range", "clip_range_vf")
"""The hyperparameters that take a ``lin_<x>`` schedule."""
COUNTS = frozenset({"n_steps", "batch_size", "n_epochs", "buffer_size", "learning_starts",
                    "gradient_steps", "target_update_interval", "stats_window_size",
                    "sde_sample_freq"})
"""The hyperparameters that are whole numbers."""
RESERVED = {"policy": "the top-level key policy", "env": "the top-level key env",
            "seed": "the --seed option", "verbose": "the command (its progress bar)",
            "tensorboard_log": "the command (it logs to the run directory and wandb)",
            "_init_setup_model": "nothing: it is SB3's own"}
"""Constructor arguments a config may not set, and what sets them."""
ACTIVATIONS = ("tanh", "relu", "elu", "leaky_relu", "gelu")


class ConfigError(AutoProfilerError):
    """A training configuration is wrong: the message names the file and the key."""


@dataclass(frozen=True)
class EvalConfig:
    """When and how the policy is evaluated during training (with
    :func:`autoprofiler_env.evaluation.rollout`: every problem of ``split`` once, at each of
    ``budgets``, deterministically)."""

    frequency: int = 10_000
    split: str = "val"
    budgets: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0)


@dataclass(frozen=True)
class TrainConfig:
    """One training run's settings (the YAML file's keys; the module docstring says what
    each means)."""

    algorithm: str = "maskable_ppo"
    policy: str = "MultiInputPolicy"
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    n_envs: int = 1
    vec_env: str = "dummy"
    total_timesteps: int = 100_000
    log_interval: int | None = None
    eval: EvalConfig = field(default_factory=EvalConfig)

    def to_dict(self) -> dict:
        """The settings as plain JSON-serializable values (what ``run.json`` stores)."""
        d = asdict(self)
        d["eval"]["budgets"] = list(self.eval.budgets)
        return d

    def replace(self, **changes) -> TrainConfig:
        """A copy with ``changes`` (``total_timesteps=...`` from ``--steps``)."""
        from dataclasses import replace

        return replace(self, **changes)


def load_config(path: str | Path) -> TrainConfig:
    """The configuration in a YAML file; a :class:`ConfigError` naming the bad key."""
    config, _ = read_config(path)
    return config


def read_config(path: str | Path) -> tuple[TrainConfig, dict]:
    """The configuration in a YAML file and the file's content as given."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the config ({e.strerror or e})") from None
    try:
        given = yaml.safe_load(text)
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise ConfigError(f"{path}: not valid YAML{line}: "
                          f"{getattr(e, 'problem', None) or e}") from None
    return config_from_dict(given, str(path)), given


def config_from_dict(given: Any, source: str = "config") -> TrainConfig:
    """The configuration in ``given`` (a YAML file's content); a :class:`ConfigError`
    naming the bad key, as ``source: key: what is wrong``."""
    def fail(key: str, message: str) -> ConfigError:
        return ConfigError(f"{source}: {key}: {message}")

    if not isinstance(given, dict):
        raise ConfigError(f"{source}: a config is a mapping of keys "
                          f"({', '.join(f.name for f in fields(TrainConfig))}), got "
                          f"{type(given).__name__}")
    _known_keys(given, [f.name for f in fields(TrainConfig)], "", fail)
    if "algorithm" not in given:
        raise fail("algorithm", f"missing: one of {', '.join(ALGORITHMS)}")
    algorithm = given["algorithm"]
    if not isinstance(algorithm, str) or algorithm.lower() not in ALGORITHMS:
        raise fail("algorithm", f"unknown algorithm {algorithm!r}: one of "
                   f"{', '.join(ALGORITHMS)}")
    algorithm = algorithm.lower()
    cls = _algorithm_class(algorithm)
    policy = given.get("policy", TrainConfig.policy)
    if not isinstance(policy, str) or policy not in cls.policy_aliases:
        raise fail("policy", f"{policy!r} is not a policy of {cls.__name__}: one of "
                   f"{', '.join(cls.policy_aliases)} (the observation is a Dict: "
                   "MultiInputPolicy)")
    hyperparameters = _mapping(given, "hyperparameters", fail)
    _check_hyperparameters(hyperparameters, cls, fail)
    env = _mapping(given, "env", fail)
    _check_env(env, fail)
    n_envs = _count(given, "n_envs", TrainConfig.n_envs, fail)
    vec_env = given.get("vec_env", TrainConfig.vec_env)
    if vec_env not in VEC_ENVS:
        raise fail("vec_env", f"one of {', '.join(VEC_ENVS)}, got {vec_env!r}")
    total = _count(given, "total_timesteps", TrainConfig.total_timesteps, fail)
    log_interval = (None if given.get("log_interval") is None
                    else _count(given, "log_interval", None, fail))
    evaluation = _mapping(given, "eval", fail)
    _known_keys(evaluation, [f.name for f in fields(EvalConfig)], "eval.", fail)
    frequency = _count(evaluation, "frequency", EvalConfig.frequency, fail, "eval.")
    split = evaluation.get("split", EvalConfig.split)
    if split not in SPLITS:
        raise fail("eval.split", f"one of {', '.join(SPLITS)}, got {split!r}")
    budgets = evaluation.get("budgets", list(EvalConfig.budgets))
    if (not isinstance(budgets, list) or not budgets
            or not all(_number(b) and math.isfinite(b) and b > 0 for b in budgets)):
        raise fail("eval.budgets", f"a non-empty list of budgets > 0 (fractions of the full "
                   f"set's cost), e.g. [0.1, 0.25, 0.5, 1.0]; got {budgets!r}")
    return TrainConfig(algorithm=algorithm, policy=policy, hyperparameters=hyperparameters,
                       env=env, n_envs=n_envs, vec_env=vec_env, total_timesteps=total,
                       log_interval=log_interval,
                       eval=EvalConfig(frequency=frequency, split=split,
                                       budgets=tuple(float(b) for b in budgets)))


def algorithm_kwargs(config: TrainConfig) -> dict[str, Any]:
    """The algorithm's keyword arguments from ``config.hyperparameters``: schedules and
    activation names resolved (``device`` defaults to ``cpu``: the policies are small MLPs,
    which a GPU does not speed up)."""
    kwargs = {"device": "cpu"} | dict(config.hyperparameters)
    for key in SCHEDULED:
        if isinstance(kwargs.get(key), str):
            kwargs[key] = LinearSchedule(float(kwargs[key].removeprefix("lin_")))
    policy_kwargs = kwargs.get("policy_kwargs")
    if policy_kwargs and isinstance(policy_kwargs.get("activation_fn"), str):
        import torch.nn as nn

        names = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "leaky_relu": nn.LeakyReLU,
                 "gelu": nn.GELU}
        kwargs["policy_kwargs"] = policy_kwargs | {
            "activation_fn": names[policy_kwargs["activation_fn"]]}
    return kwargs


@dataclass(frozen=True)
class LinearSchedule:
    """rl-baselines3-zoo's ``lin_<x>``: ``initial`` x the progress remaining (1 -> 0)."""

    initial: float

    def __call__(self, progress_remaining: float) -> float:
        return progress_remaining * self.initial


# -- checks ---------------------------------------------------------------------------------

def _algorithm_class(name: str):
    from agents.rl import algorithms

    return algorithms()[name]


def _known_keys(mapping: dict, known: list[str], prefix: str, fail) -> None:
    for key in mapping:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
            raise fail(f"{prefix}{key}", f"unknown key{hint}; the keys are "
                       f"{', '.join(known)}")


def _mapping(given: dict, key: str, fail) -> dict:
    value = given.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fail(key, f"a mapping of names to values, got {type(value).__name__}")
    bad = [k for k in value if not isinstance(k, str)]
    if bad:
        raise fail(f"{key}.{bad[0]}", "keys are names (strings)")
    return dict(value)


def _number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _count(given: dict, key: str, default, fail, prefix: str = "") -> int:
    value = given.get(key, default)
    # YAML reads 1e5 as a string and 1.0e+5 as a float: take a whole float as the number
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise fail(f"{prefix}{key}", f"a whole number >= 1, got {value!r}")
    return value


def _check_hyperparameters(hyperparameters: dict, cls, fail) -> None:
    parameters = inspect.signature(cls.__init__).parameters
    accepted = [p for p in parameters if p != "self" and p not in RESERVED]
    for key, value in hyperparameters.items():
        name = f"hyperparameters.{key}"
        if key in RESERVED:
            raise fail(name, f"not a hyperparameter: it is set by {RESERVED[key]}")
        if key not in parameters:
            close = difflib.get_close_matches(key, accepted, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise fail(name, f"not a parameter of {cls.__name__}{hint}; its parameters are "
                       f"{', '.join(accepted)}")
        default = parameters[key].default
        if key in SCHEDULED and isinstance(value, str):
            rest = value.removeprefix("lin_")
            if rest == value or not _float(rest):
                raise fail(name, f"a number or a linear schedule 'lin_<number>' (e.g. "
                           f"lin_3.0e-4), got {value!r}")
        elif key in COUNTS:
            if isinstance(value, float) and value.is_integer():
                hyperparameters[key] = value = int(value)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise fail(name, f"a whole number >= 1, got {value!r}")
        elif key == "train_freq":
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1) \
                    and not (isinstance(value, list) and len(value) == 2
                             and value[1] in ("step", "episode")):
                raise fail(name, f"a whole number of steps, or [n, step|episode]; got "
                           f"{value!r}")
            if isinstance(value, list):
                hyperparameters[key] = (value[0], value[1])
        elif key == "policy_kwargs":
            _check_policy_kwargs(value, fail)
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise fail(name, f"true or false, got {value!r}")
        elif _number(default) and not (_number(value) and math.isfinite(value)):
            raise fail(name, f"a number, got {value!r}")


def _float(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _check_policy_kwargs(value, fail) -> None:
    if not isinstance(value, dict):
        raise fail("hyperparameters.policy_kwargs", f"a mapping (e.g. net_arch: [64, 64]), "
                   f"got {type(value).__name__}")
    activation = value.get("activation_fn")
    if activation is not None and activation not in ACTIVATIONS:
        raise fail("hyperparameters.policy_kwargs.activation_fn",
                   f"one of {', '.join(ACTIVATIONS)}, got {activation!r}")


def _check_env(env: dict, fail) -> None:
    from autoprofiler_env.envs.profiling_env import ProfilingEnv

    parameters = inspect.signature(ProfilingEnv.__init__).parameters
    accepted = [p for p in parameters if p not in ("self", "render_mode")]
    for key, value in env.items():
        if key not in accepted:
            close = difflib.get_close_matches(key, accepted, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise fail(f"env.{key}", f"not a make kwarg of the environment{hint}; they are "
                       f"{', '.join(accepted)}")
        default = parameters[key].default
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise fail(f"env.{key}", f"true or false, got {value!r}")
        elif _number(default) and not _number(value):
            raise fail(f"env.{key}", f"a number, got {value!r}")
        elif isinstance(default, str) and not isinstance(value, str) \
                and not (key == "split" and value is None):  # split None: every problem
            raise fail(f"env.{key}", f"a string, got {value!r}")
