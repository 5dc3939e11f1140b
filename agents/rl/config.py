"""Training configurations: rl-baselines3-zoo's hyperparameter files
(``hyperparams/<algo>.yml``), one per algorithm in ``experiments/configs/``.

>>> config = load_config("experiments/configs/maskable_ppo.yaml")
>>> config.algorithm, config.hyperparameters["n_steps"], config.env["budget_range"]
('maskable_ppo', 256, [0.05, 1.0])

A file maps the environment id to its settings, as the zoo reads them, so that the same
file trains with ``python -m rl_zoo3.train --algo ppo --env AutoProfiler-v0 --gym-packages
autoprofiler_env -conf experiments/configs/ppo.yaml --eval-env-kwargs split:"'val'"`` (the zoo
has no MaskablePPO; it does not read ``eval`` below, and without ``--eval-env-kwargs`` it
evaluates, and keeps its best model, on an environment of default kwargs: the train split)
and with ``autoprofiler train --config ppo``::

    AutoProfiler-v0:            # (or the zoo's fallback key, default)
      policy: MultiInputPolicy  # the observation is a Dict
      n_timesteps: 200000
      n_envs: 4
      env_kwargs: {split: train, budget_range: [0.05, 1.0]}
      n_steps: 256              # every other key: a keyword argument of the algorithm
      learning_rate: lin_3.0e-4 # a linear schedule from 3e-4 to 0 (also clip_range, ...)
      policy_kwargs: "dict(net_arch=[128, 128], activation_fn=nn.ReLU)"
    autoprofiler:               # this project's own settings; the zoo ignores the key
      algorithm: maskable_ppo   # else the file's name (the zoo's hyperparams/<algo>.yml)
      vec_env: dummy            # dummy (one process) or subproc (the zoo's --vec-env)
      log_interval: null        # SB3's (the zoo's --log-interval); null: its default
      eval: {frequency: 5000, split: val, budgets: [0.1, 0.25, 0.5, 1.0]}

- ``algorithm``: ``maskable_ppo`` (sb3-contrib, the default), ``ppo``, ``a2c``, ``dqn``,
  ``qrdqn``, ``recurrent_ppo`` (sb3-contrib's RecurrentPPO; the zoo's ``ppo_lstm``) or
  ``trpo``; ``policy``: one of the algorithm's policy names (the Dict observation's:
  ``MultiInputPolicy``, RecurrentPPO's ``MultiInputLstmPolicy``);
- ``n_timesteps`` (required, as in the zoo), ``n_envs`` (1), ``env_kwargs``: the
  environment's ``make`` kwargs (``split``, ``budget`` or ``budget_range``, ``dataset``,
  ``optimizer``, ``cost_penalty``, ``incorrect_reward``, ...: the class docstring of
  :class:`~autoprofiler_env.envs.profiling_env.ProfilingEnv`; ``split: test`` is refused:
  the test split is the one results are reported on);
- ``policy_kwargs``: a mapping of plain values, or the zoo's string ``"dict(...)"`` whose
  classes are named as the zoo names them (``nn.ReLU``, ``th.optim.RMSprop``,
  ``RMSpropTFLike``); it is parsed, never evaluated;
- ``normalize: false`` is accepted; the zoo's wrappers and callbacks (``normalize: true``,
  ``env_wrapper``, ``frame_stack``, ``callback``, ...) are refused by name: this command
  does not apply them;
- ``eval``: ``frequency`` (environment steps between evaluations), ``split`` (``val``, or
  ``train``; not ``test``, as the best model and tune's trials are chosen by it) and
  ``budgets`` (the fractions of the full set's cost the policy is evaluated at).

A bad file is one :class:`ConfigError` naming the key (``AutoProfiler-v0.n_step: ...``) and
saying what is accepted; values the environment or the algorithm check themselves (a
``budget_range`` of the wrong shape, a ``net_arch`` torch cannot build) are named the same
way when the model is built (:func:`experiments.train.build_model`).
"""

from __future__ import annotations

import ast
import difflib
import inspect
import math
import numbers
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from agents.rl import ZOO_NAMES  # the zoo's names: a config may use them (ppo_lstm.yml)
from autoprofiler_env.configfile import read_yaml
from autoprofiler_env.errors import ConfigError
from autoprofiler_env.pyast import parse
from autoprofiler_env.numeric import is_finite_number, repeated
from autoprofiler_env.problems.loaders import SPLITS

ALGORITHMS = ("maskable_ppo", "ppo", "a2c", "dqn", "qrdqn", "recurrent_ppo", "trpo")
NOT_TRAINED = {"ars": ("ARS", "ars")}
"""Algorithms of sb3-contrib that ``autoprofiler train`` does not train, with their class and
the zoo's name: a config naming one (or a file named after one, as the zoo's
``hyperparams/<algo>.yml``) is refused saying why, not as an unknown algorithm."""
POLICIES = {"recurrent_ppo": "MultiInputLstmPolicy"}
"""The policy an algorithm takes the Dict observation with, where it is not
``MultiInputPolicy`` (the default of a config that names none)."""
DEFAULT_CONFIG = "maskable_ppo"
"""The shipped training config (``experiments/configs/<name>.yaml``) that ``autoprofiler
train`` and an experiment's RL agent use unless told another."""
VEC_ENVS = ("dummy", "subproc")
SCHEDULED = ("learning_rate", "clip_range", "clip_range_vf")
"""The hyperparameters that take a ``lin_<x>`` schedule."""
COUNTS = frozenset({"n_steps", "batch_size", "n_epochs", "buffer_size", "learning_starts",
                    "gradient_steps", "target_update_interval", "stats_window_size",
                    "sde_sample_freq"})
"""The hyperparameters that are whole numbers (>= 1, but those of :data:`MAY_BE_ZERO`)."""
MAY_BE_ZERO = frozenset({"learning_starts"})
"""The whole-number hyperparameters that may be 0 (an off-policy algorithm learning from its
first step: rl-baselines3-zoo's tuning samples it)."""
RESERVED = {"env": "env_kwargs", "seed": "the --seed option",
            "verbose": "the command (its progress bar)",
            "tensorboard_log": "the command (it logs to the run directory and wandb)",
            "_init_setup_model": "nothing: it is SB3's own"}
"""Constructor arguments a config may not set, and what sets them."""
ENV_ID = "AutoProfiler-v0"
"""The key of a file's settings (the zoo's: the environment id; ``default`` is its
fallback)."""
OWN = "autoprofiler"
"""The key of this project's own settings, which the zoo ignores."""
ZOO_KEYS = ("policy", "n_timesteps", "n_envs", "env_kwargs", "normalize")
"""The zoo's keys besides the algorithm's arguments that ``autoprofiler train`` applies."""
ZOO_NOT_APPLIED = ("normalize_kwargs", "frame_stack", "env_wrapper", "vec_env_wrapper",
                   "callback", "monitor_kwargs", "noise_type", "noise_std")
"""The zoo's keys that ``autoprofiler train`` does not apply (refused by name)."""
CLASS_ROOTS = {"nn": "torch.nn", "th": "torch", "torch": "torch"}
"""How the zoo's ``policy_kwargs`` strings name classes (its module imports ``torch as th``
and ``torch.nn as nn``), and the modules the names resolve in."""
BARE_CLASSES = {"RMSpropTFLike": "stable_baselines3.common.sb2_compat.rmsprop_tf_like"}
"""The classes the zoo's ``policy_kwargs`` strings name bare (its module imports them; its
``hyperparams/a2c.yml`` gives ``optimizer_class=RMSpropTFLike``), and their modules."""


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
    """One training run's settings, as resolved from a file (the module docstring says what
    each means; ``env`` is the file's ``env_kwargs``, ``total_timesteps`` its
    ``n_timesteps``, ``hyperparameters`` the algorithm's keyword arguments)."""

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
    """The configuration in a YAML file and the file's content as given. The algorithm is
    the file's ``autoprofiler.algorithm``, else its name (the zoo's ``<algo>.yml``)."""
    path = Path(path)
    given = read_yaml(path, "config")
    named = (path.stem if path.stem in ALGORITHMS or path.stem in NOT_TRAINED
             or path.stem in ZOO_NAMES else None)
    return config_from_dict(given, str(path), algorithm=named), given


def config_from_dict(given: Any, source: str = "config",
                     algorithm: str | None = None) -> TrainConfig:
    """The configuration in ``given`` (a YAML file's content; ``algorithm``: the one the
    file's name says, where its ``autoprofiler`` key names none); a :class:`ConfigError`
    naming the bad key, as ``source: key: what is wrong``."""
    def fail(key: str, message: str) -> ConfigError:
        return ConfigError(f"{source}: {key}: {message}")

    if not isinstance(given, dict):
        raise ConfigError(f"{source}: a config maps the environment id ({ENV_ID}) to its "
                          f"settings, as rl-baselines3-zoo's hyperparams/<algo>.yml; got "
                          f"{type(given).__name__}")
    key = ENV_ID if ENV_ID in given else "default" if "default" in given else None
    if key is None:
        close = difflib.get_close_matches(str(next(iter(given), "")), [ENV_ID], n=1)
        hint = f" (is {next(iter(given))!r} a misspelling?)" if close else ""
        raise ConfigError(f"{source}: no {ENV_ID} key{hint}: a config maps the environment "
                          f"id to its settings (n_timesteps, policy, the algorithm's "
                          f"arguments), as rl-baselines3-zoo's hyperparams/<algo>.yml; the "
                          f"keys are {', '.join(map(str, given)) or 'none'}")
    settings = _mapping(given, key, fail, "")
    own = _mapping(given, OWN, fail, "")
    _known_keys(own, ["algorithm", "vec_env", "log_interval", "eval"], f"{OWN}.", fail)
    algorithm = own.get("algorithm", algorithm)
    if algorithm is None:
        raise fail(f"{OWN}.algorithm", f"missing: one of {', '.join(ALGORITHMS)} (or name "
                   "the file after it, as the zoo's hyperparams/<algo>.yml)")
    if isinstance(algorithm, str) and algorithm.lower() in NOT_TRAINED:
        name, _ = NOT_TRAINED[algorithm.lower()]
        raise fail(f"{OWN}.algorithm", f"{algorithm!r} ({name}) is not trained by autoprofiler "
                   f"train, which trains {', '.join(ALGORITHMS)} ({name} takes no Dict "
                   "observation, and the project's evaluation gives one)")
    if isinstance(algorithm, str):
        algorithm = ZOO_NAMES.get(algorithm.lower(), algorithm.lower())
    if algorithm not in ALGORITHMS:
        raise fail(f"{OWN}.algorithm", f"unknown algorithm {algorithm!r}: one of "
                   f"{', '.join(ALGORITHMS)}")
    cls = _algorithm_class(algorithm)
    at = f"{key}."
    dict_policy = POLICIES.get(algorithm, TrainConfig.policy)
    policy = settings.get("policy", dict_policy)
    if not isinstance(policy, str) or policy not in cls.policy_aliases:
        raise fail(f"{at}policy", f"{policy!r} is not a policy of {cls.__name__}: one of "
                   f"{', '.join(cls.policy_aliases)} (the observation is a Dict: "
                   f"{dict_policy})")
    if "n_timesteps" not in settings:
        raise fail(f"{at}n_timesteps", "missing: the environment steps to train for (the "
                   "zoo requires it too; --steps overrides it)")
    total = _count(settings, "n_timesteps", None, fail, at)
    n_envs = _count(settings, "n_envs", TrainConfig.n_envs, fail, at)
    env = _mapping(settings, "env_kwargs", fail, at)
    check_env_kwargs(env, fail, f"{at}env_kwargs.")
    if env.get("split") == "test":
        raise fail(f"{at}env_kwargs.split", "a policy trained on the test split leaves no "
                   "held-out problems to report it on: train on train (the default), or on "
                   "null (every problem) for a policy to deploy, whose test scores then mean "
                   "nothing")
    normalize = settings.get("normalize", False)
    if normalize is not False:
        raise fail(f"{at}normalize", "autoprofiler train does not normalize (VecNormalize "
                   "refuses the observation's MultiBinary entries; its Box entries are "
                   "scaled already): remove it or set it to false")
    for name in settings:
        if name in ZOO_NOT_APPLIED:
            raise fail(f"{at}{name}", "a key of rl-baselines3-zoo that autoprofiler train "
                       "does not apply: remove it (the zoo's wrappers and callbacks are the "
                       "zoo's to run)")
    hyperparameters = {k: v for k, v in settings.items() if k not in ZOO_KEYS}
    _check_hyperparameters(hyperparameters, cls, fail, at)
    vec_env = own.get("vec_env", TrainConfig.vec_env)
    if vec_env not in VEC_ENVS:
        raise fail(f"{OWN}.vec_env", f"one of {', '.join(VEC_ENVS)}, got {vec_env!r}")
    log_interval = (None if own.get("log_interval") is None
                    else _count(own, "log_interval", None, fail, f"{OWN}."))
    evaluation = _mapping(own, "eval", fail, f"{OWN}.")
    at = f"{OWN}.eval."
    _known_keys(evaluation, [f.name for f in fields(EvalConfig)], at, fail)
    frequency = _count(evaluation, "frequency", EvalConfig.frequency, fail, at)
    split = evaluation.get("split", EvalConfig.split)
    if split not in SPLITS:
        raise fail(f"{at}split", f"one of {', '.join(SPLITS)}, got {split!r}")
    if split == "test":  # the best model, and tune's trials, are chosen by this evaluation
        raise fail(f"{at}split", "the evaluation chooses the best model (and tune's trials): "
                   "on the test split, the test scores reported after would be chosen on "
                   "themselves; evaluate on val (the default) or train")
    budgets = evaluation.get("budgets", list(EvalConfig.budgets))
    if (not isinstance(budgets, list) or not budgets
            or not all(is_finite_number(b) and b > 0 for b in budgets)):
        raise fail(f"{at}budgets", f"a non-empty list of budgets > 0 (fractions of the full "
                   f"set's cost), e.g. [0.1, 0.25, 0.5, 1.0]; got {budgets!r}")
    again = repeated(budgets)
    if again:  # each would weigh twice in the objective, once in the log
        raise fail(f"{at}budgets", f"each budget once; {again[0]!r} is given more than once")
    return TrainConfig(algorithm=algorithm, policy=policy, hyperparameters=hyperparameters,
                       env=env, n_envs=n_envs, vec_env=vec_env, total_timesteps=total,
                       log_interval=log_interval,
                       eval=EvalConfig(frequency=frequency, split=split,
                                       budgets=tuple(float(b) for b in budgets)))


def algorithm_kwargs(config: TrainConfig) -> dict[str, Any]:
    """The algorithm's keyword arguments from ``config.hyperparameters``: schedules and
    class names resolved (``device`` defaults to ``cpu``: the policies are small MLPs,
    which a GPU does not speed up)."""
    kwargs = {"device": "cpu"} | dict(config.hyperparameters)
    for key in SCHEDULED:
        if isinstance(kwargs.get(key), str):
            kwargs[key] = LinearSchedule(float(kwargs[key].removeprefix("lin_")))
    policy_kwargs = kwargs.get("policy_kwargs")
    if isinstance(policy_kwargs, str):
        kwargs["policy_kwargs"] = _resolved_all(_zoo_kwargs(policy_kwargs))
    return kwargs


@dataclass(frozen=True)
class LinearSchedule:
    """rl-baselines3-zoo's ``lin_<x>``: ``initial`` x the progress remaining (1 -> 0)."""

    initial: float

    def __call__(self, progress_remaining: float) -> float:
        # SB3's last rollout may run past the total: the remaining progress goes below 0
        return max(progress_remaining, 0.0) * self.initial


class _ClassName(str):
    """A class the zoo's ``policy_kwargs`` string names (``nn.ReLU``)."""


def _zoo_kwargs(text: str) -> dict[str, Any]:
    """The zoo's ``policy_kwargs`` string (``"dict(net_arch=dict(pi=[64], vf=[64]),
    activation_fn=nn.ReLU)"`` or ``"{'net_arch': [64]}"``) as a mapping, parsed rather than
    evaluated: literals, ``dict(...)`` calls, lists, and classes as :class:`_ClassName`; a
    ``ValueError`` for anything else."""
    try:
        node = parse(text.strip(), mode="eval").body
    except SyntaxError as e:
        raise ValueError(f"not a Python expression ({e.msg})") from None
    parsed = _zoo_value(node, "policy_kwargs")
    if not isinstance(parsed, dict):
        raise ValueError("a dict(...) call or a {...} literal of keyword arguments")
    return parsed


def _zoo_value(node: ast.expr, name: str):
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == "dict" and not node.args \
            and all(kw.arg is not None for kw in node.keywords):
        return {kw.arg: _zoo_value(kw.value, kw.arg) for kw in node.keywords}
    if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant)
                                          and isinstance(k.value, str) for k in node.keys):
        return {k.value: _zoo_value(v, k.value) for k, v in zip(node.keys, node.values)}
    if isinstance(node, (ast.List, ast.Tuple)):
        values = [_zoo_value(e, name) for e in node.elts]
        return values if isinstance(node, ast.List) else tuple(values)
    dotted = _dotted(node)
    if dotted is not None:
        return _ClassName(dotted)
    if isinstance(node, ast.Name) and node.id in BARE_CLASSES:
        return _ClassName(node.id)
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ValueError(f"{name}: a literal (number, string, list, dict) or a class named "
                         f"as the zoo does (nn.ReLU, th.optim.Adam), got "
                         f"{ast.unparse(node)!r}") from None


def _dotted(node: ast.expr) -> str | None:
    """``nn.ReLU`` for the expression ``nn.ReLU``; None for anything but a dotted name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or not parts:
        return None
    return ".".join([node.id, *reversed(parts)])


def _resolved_all(value):
    """``value`` with each :class:`_ClassName` in it resolved to its class."""
    if isinstance(value, _ClassName):
        return _resolved(value)
    if isinstance(value, dict):
        return {k: _resolved_all(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_resolved_all(v) for v in value)
    return value


def _resolved(name: str):
    """The class ``name`` (``nn.ReLU``, ``th.optim.Adam``) names; a ``ValueError`` if
    none."""
    import importlib

    root, _, rest = name.partition(".")
    if name in BARE_CLASSES:
        module, attribute = BARE_CLASSES[name], name
    elif root not in CLASS_ROOTS or not rest:
        raise ValueError(f"{name}: name a class as the zoo does, under "
                         f"{', '.join(f'{r}.' for r in CLASS_ROOTS)} (nn.ReLU, th.optim.Adam), "
                         f"or {', '.join(BARE_CLASSES)}")
    else:
        module, _, attribute = f"{CLASS_ROOTS[root]}.{rest}".rpartition(".")
    try:
        found = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError):
        found = None
    if not isinstance(found, type):
        raise ValueError(f"{name}: no such class in {module}")
    return found


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


def _mapping(given: dict, key: str, fail, prefix: str) -> dict:
    value = given.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fail(f"{prefix}{key}", f"a mapping of names to values, got "
                   f"{type(value).__name__}")
    bad = [k for k in value if not isinstance(k, str)]
    if bad:
        raise fail(f"{prefix}{key}.{bad[0]}", "keys are names (strings)")
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


def _check_hyperparameters(hyperparameters: dict, cls, fail, at: str) -> None:
    parameters = inspect.signature(cls.__init__).parameters
    accepted = [p for p in parameters if p != "self" and p not in RESERVED]
    for key, value in hyperparameters.items():
        name = f"{at}{key}"
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
            least = 0 if key in MAY_BE_ZERO else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise fail(name, f"a whole number >= {least}, got {value!r}")
        elif key == "train_freq":
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1) \
                    and not (isinstance(value, list) and len(value) == 2
                             and value[1] in ("step", "episode")):
                raise fail(name, f"a whole number of steps, or [n, step|episode]; got "
                           f"{value!r}")
            if isinstance(value, list):
                hyperparameters[key] = (value[0], value[1])
        elif key == "policy_kwargs":
            _check_policy_kwargs(value, fail, name)
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise fail(name, f"true or false, got {value!r}")
        elif _number(default) and not is_finite_number(value):
            raise fail(name, f"a number, got {value!r}")


def _float(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _check_policy_kwargs(value, fail, name: str) -> None:
    if isinstance(value, str):
        try:
            _resolved_all(_zoo_kwargs(value))
        except ValueError as e:
            raise fail(name, f"the zoo's form is a string such as "
                       f"\"dict(net_arch=[64, 64], activation_fn=nn.ReLU)\": {e}") from None
        return
    if not isinstance(value, dict):
        raise fail(name, f"a mapping (e.g. net_arch: [64, 64]) or the zoo's string "
                   f"\"dict(...)\", got {type(value).__name__}")
    for key in ("activation_fn", "optimizer_class", "features_extractor_class"):
        if key in value:
            raise fail(f"{name}.{key}", f"a class: write policy_kwargs as the zoo does, a "
                       f"string such as \"dict(net_arch=[64, 64], {key}=nn.ReLU)\"")


def check_env_kwargs(env: dict, fail, at: str) -> None:
    """Checks ``env``'s keys against the environment's ``make`` kwargs and their types;
    ``fail(key, message)`` makes the error raised (``at``: the key's prefix)."""
    from autoprofiler_env.envs.profiling_env import ProfilingEnv

    parameters = inspect.signature(ProfilingEnv.__init__).parameters
    accepted = [p for p in parameters if p not in ("self", "render_mode")]
    for key, value in env.items():
        if key not in accepted:
            close = difflib.get_close_matches(key, accepted, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise fail(f"{at}{key}", f"not a make kwarg of the environment{hint}; they are "
                       f"{', '.join(accepted)}")
        default = parameters[key].default
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise fail(f"{at}{key}", f"true or false, got {value!r}")
        elif _number(default) and not _number(value):
            raise fail(f"{at}{key}", f"a number, got {value!r}")
        elif isinstance(default, str) and not isinstance(value, str) \
                and not (key == "split" and value is None):  # split None: every problem
            raise fail(f"{at}{key}", f"a string, got {value!r}")
