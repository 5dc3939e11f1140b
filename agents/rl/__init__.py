"""Reinforcement-learning policies: stable-baselines3 and sb3-contrib models as policies of
the environment.

A saved model (SB3's ``.zip``) is a :class:`~autoprofiler_env.policy.Policy` as it is: its
``predict`` is the interface. :func:`load_model` loads one, naming the algorithm or reading it
from the policy class saved in the file; given a run directory of ``autoprofiler train``, it
loads the run's best model with the algorithm its ``run.json`` names (:func:`load_run`), and
given one of rl-baselines3-zoo's (``logs/<algo>/AutoProfiler-v0_<N>``, trained with
``python -m rl_zoo3.train --env AutoProfiler-v0 --gym-packages autoprofiler_env -conf
experiments/configs/<algo>.yaml --eval-env-kwargs split:"'val'"``: without that option the
zoo evaluates, and keeps its best model, on the train split), the zoo's best model (or its
final one).
Training: :mod:`agents.rl.config` (the YAML configs), :mod:`agents.rl.callbacks` (the
evaluation during training), ``experiments/train.py`` (the command).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from agents.rl.unpickle import safe_objects
from autoprofiler_env.errors import AutoProfilerError


def algorithms() -> dict:
    """The algorithms a saved model may be loaded with, by lower-case name (rl-baselines3-zoo's
    names; ``autoprofiler train`` trains each: :data:`agents.rl.config.ALGORITHMS`).
    RecurrentPPO's LSTM state is carried through an episode by
    :func:`~autoprofiler_env.evaluation.rollout`."""
    from sb3_contrib import QRDQN, TRPO, MaskablePPO, RecurrentPPO
    from stable_baselines3 import A2C, DQN, PPO

    return {"maskable_ppo": MaskablePPO, "ppo": PPO, "a2c": A2C, "dqn": DQN, "qrdqn": QRDQN,
            "recurrent_ppo": RecurrentPPO, "trpo": TRPO}


ZOO_NAMES = {"ppo_lstm": "recurrent_ppo"}
"""rl-baselines3-zoo's names of the algorithms that :func:`algorithms` names otherwise
(``sb3:ppo_lstm:FILE`` as the zoo's ``--algo ppo_lstm``)."""


# the module of a saved policy class -> the algorithm that loads it (A2C and TRPO save PPO's
# policy class, SB3's ActorCriticPolicy; their predictions are the same loaded either way,
# and sb3:a2c:FILE / sb3:trpo:FILE name them)
_BY_POLICY_MODULE = (("sb3_contrib.common.maskable", "maskable_ppo"),
                     ("sb3_contrib.common.recurrent", "recurrent_ppo"),
                     ("sb3_contrib.qrdqn", "qrdqn"), ("stable_baselines3.dqn", "dqn"),
                     ("stable_baselines3.common.policies", "ppo"))


def saved_algorithm(path: Path) -> str:
    """The algorithm of a saved model, from the policy class its ``data`` names."""
    try:
        with zipfile.ZipFile(path) as archive:
            data = json.loads(archive.read("data"))
        module = data["policy_class"]["__module__"]
    except (OSError, KeyError, TypeError, ValueError, zipfile.BadZipFile) as e:
        raise AutoProfilerError(f"{path}: not a stable-baselines3 model file ({e})") from e
    for prefix, name in _BY_POLICY_MODULE:
        if module.startswith(prefix):
            return name
    raise AutoProfilerError(f"{path}: its policy class comes from {module!r}, which names no "
                            f"algorithm here; give it as sb3:ALGO:{path} with ALGO one of "
                            f"{', '.join(algorithms())}")


def _check_archive(path: Path) -> None:
    """A saved model's archive whole (every member's CRC, the ``data`` and the policy's
    weights that ``model.save`` writes) before SB3 reads it: a truncated or damaged file
    said to be one, not an algorithm's ``AssertionError``."""
    try:
        with zipfile.ZipFile(path) as archive:
            names, broken = set(archive.namelist()), archive.testzip()
    except (OSError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile) as e:
        raise AutoProfilerError(f"{path}: not a stable-baselines3 model file: not a whole "
                                f"zip archive ({e}; a truncated or damaged copy?): copy or "
                                "train it again") from e
    missing = [m for m in ("data", "policy.pth") if m not in names]
    if broken is not None or missing:
        what = (f"its member {broken} is damaged" if broken is not None
                else f"it lacks {', '.join(missing)}")
        raise AutoProfilerError(f"{path}: {what}, which a stable-baselines3 model saved with "
                                "model.save has: a damaged copy, or another zip: copy or "
                                "train it again")


RUN_SCHEMA = 1
"""The schema of a training run's ``run.json`` that this package writes and reads."""


def check_run_schema(run: dict, path: Path) -> None:
    """An error where a run's record ``run`` (read from ``path``) is of a newer schema than
    this package reads: written by a newer autoprofiler-env, it may mean other things."""
    schema = run.get("schema", RUN_SCHEMA)
    if isinstance(schema, int) and not isinstance(schema, bool) and schema > RUN_SCHEMA:
        made = run.get("package_version")
        raise AutoProfilerError(f"{path}: a run's record of schema {schema}, newer than this "
                                f"autoprofiler-env reads ({RUN_SCHEMA})"
                                + (f"; written by autoprofiler-env {made}" if made else "")
                                + ": upgrade autoprofiler-env to read it")


RUN_FILE, BEST_MODEL, FINAL_MODEL = "run.json", "best_model.zip", "model.zip"
"""A training run directory's files (``autoprofiler train --out DIR``)."""


def load_run(directory: str | Path, algorithm: str | None = None, device: str = "cpu",
             which: str = "best"):
    """The model of a training run directory: its best model (``which="best"``, the model
    the evaluation during training kept) or its final one (``"final"``).

    A run of ``autoprofiler train`` (its ``run.json``): ``best_model.zip`` or ``model.zip``,
    loaded with the algorithm ``run.json`` names (or ``algorithm``). A run of
    rl-baselines3-zoo (its saved hyperparameters in ``<env id>/``): ``best_model.zip`` (the
    zoo's ``EvalCallback`` writes it where ``--eval-freq`` evaluated) or ``<env id>.zip``,
    with ``algorithm`` or the one the file's policy class names; a zoo run trained with
    ``normalize`` is refused (its observations were normalized by the
    ``vecnormalize.pkl`` statistics, which a policy here is not given)."""
    directory = Path(directory)
    names = {"best": BEST_MODEL, "final": FINAL_MODEL}
    if which not in names:
        raise AutoProfilerError(f"which must be best or final, got {which!r}")
    run_file = directory / RUN_FILE
    if not run_file.is_file():
        env_id = zoo_run(directory)
        if env_id is None:
            raise AutoProfilerError(
                f"{directory}: no {RUN_FILE}; not a run directory of `autoprofiler train "
                "--out DIR` nor of rl-baselines3-zoo (logs/<algo>/<env id>_<N>) (or give the "
                "model's .zip)")
        return _load_zoo_run(directory, env_id, algorithm, device, which)
    try:
        run = json.loads(run_file.read_text())
    except (OSError, ValueError) as e:
        raise AutoProfilerError(f"{run_file}: unreadable ({e})") from e
    if isinstance(run, dict):
        check_run_schema(run, run_file)
    path = directory / names[which]
    if not path.is_file():
        status = run.get("status", "unknown") if isinstance(run, dict) else "unknown"
        raise AutoProfilerError(f"{directory}: no {names[which]} (the run's status: {status}; "
                                "a run writes it at its first evaluation)")
    name = algorithm or (run.get("algorithm") if isinstance(run, dict) else None)
    return load_model(path, name, device)


def zoo_run(directory: str | Path) -> str | None:
    """The environment id of an rl-baselines3-zoo run directory (``<folder>/<algo>/<env
    id>_<N>``, which holds the run's saved hyperparameters in ``<env id>/config.yml`` or
    ``args.yml``); None where ``directory`` is not one."""
    directory = Path(directory)
    env_id = directory.name.rpartition("_")[0]
    saved = directory / env_id
    if env_id and ((saved / "config.yml").is_file() or (saved / "args.yml").is_file()):
        return env_id
    return None


def zoo_env_kwargs(directory: str | Path) -> dict | None:
    """The environment's make kwargs an rl-baselines3-zoo run trained with: its saved
    hyperparameters' ``env_kwargs`` (``<env id>/config.yml``), overridden by the command
    line's (``args.yml``), as ``rl_zoo3.enjoy`` reads them; None where ``directory`` is not
    a zoo run or its files cannot be read. The zoo saves them as YAML of ``OrderedDict``s and
    tuples (``!!python/tuple``), read here with a safe loader that builds only those: any
    other Python tag (the classes a study's best trial names,
    ``!!python/name:torch.nn.modules.activation.Tanh``) is read as an inert marker, nothing
    imported or constructed, and an ``env_kwargs`` holding one cannot be known: None."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    class Inert(str):  # a Python object a file names, never made
        pass

    def ordered(loader, node):
        [pairs] = loader.construct_sequence(node, deep=True)
        return dict(pairs)

    def inert(loader, suffix, node):
        return Inert(f"python/{suffix}")

    Loader.add_constructor("tag:yaml.org,2002:python/object/apply:collections.OrderedDict",
                           ordered)
    Loader.add_constructor("tag:yaml.org,2002:python/tuple",
                           lambda loader, node: tuple(loader.construct_sequence(node, deep=True)))
    Loader.add_multi_constructor("tag:yaml.org,2002:python/", inert)

    def holds_inert(value) -> bool:
        if isinstance(value, Inert):
            return True
        if isinstance(value, dict):
            return any(holds_inert(v) for v in (*value.keys(), *value.values()))
        return isinstance(value, (list, tuple)) and any(holds_inert(v) for v in value)

    env_id = zoo_run(directory)
    if env_id is None:
        return None
    kwargs: dict = {}
    for name in ("config.yml", "args.yml"):
        path = Path(directory) / env_id / name
        if not path.is_file():
            continue
        try:
            saved = yaml.load(path.read_text(), Loader=Loader)  # noqa: S506 (a safe loader)
        except (OSError, ValueError, TypeError, yaml.YAMLError):
            return None
        if not isinstance(saved, dict):  # not the zoo's file
            return None
        given = saved.get("env_kwargs")
        if isinstance(given, dict):
            if holds_inert(given):  # a setting the file names as a Python object
                return None
            kwargs = given if name == "args.yml" else {**kwargs, **given}
    return kwargs


def _load_zoo_run(directory: Path, env_id: str, algorithm: str | None, device: str,
                  which: str):
    if (directory / env_id / "vecnormalize.pkl").is_file():
        raise AutoProfilerError(
            f"{directory}: the zoo trained it with `normalize` (VecNormalize; "
            f"{env_id}/vecnormalize.pkl): its policy expects normalized observations, which "
            "the environment here does not give; train it without `normalize`")
    path = directory / (BEST_MODEL if which == "best" else f"{env_id}.zip")
    if not path.is_file():
        hint = (f"the zoo writes it when --eval-freq evaluates during training; give "
                f"sb3:{directory / (env_id + '.zip')} for the final model"
                if which == "best" else "the zoo writes it when training ends")
        raise AutoProfilerError(f"{directory}: no {path.name} ({hint})")
    return load_model(path, algorithm, device)


def load_model(path: str | Path, algorithm: str | None = None, device: str = "cpu",
               trusted: bool = False):
    """A saved SB3 / sb3-contrib model, loaded with ``algorithm`` (None: read from the
    file); a training run directory: its best model (:func:`load_run`). Its pickled
    entries are built without running code from the file (:mod:`agents.rl.unpickle`)
    unless ``trusted`` (a run this package trains on, which goes on training from them)."""
    path = Path(path)
    if path.is_dir():
        return load_run(path, algorithm, device)
    if not path.is_file():
        raise AutoProfilerError(f"{path}: no such model file (an SB3 .zip saved with "
                                "model.save)")
    _check_archive(path)
    known = algorithms()
    name = algorithm.lower() if algorithm else saved_algorithm(path)
    name = ZOO_NAMES.get(name, name)
    if name not in known:
        raise AutoProfilerError(f"unknown algorithm {algorithm!r}: one of "
                                f"{', '.join([*known, *ZOO_NAMES])}")
    try:
        return known[name].load(path, device=device,
                                custom_objects=None if trusted else safe_objects(path))
    except (TypeError, ValueError, KeyError, AssertionError, zipfile.BadZipFile) as e:
        try:
            saved = saved_algorithm(path)
        except AutoProfilerError:
            saved = None
        hint = (f"; the file holds a {saved} model: give sb3:{saved}:{path}, or sb3:{path}"
                if saved is not None and saved != name else "")
        raise AutoProfilerError(f"{path}: {known[name].__name__} cannot load it "
                                f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
                                f"{hint}") from e


DATA = Path(__file__).parent / "data"
"""The policies the project ships: ``data/<algorithm>-<optimizer>.zip`` and its
``.json`` (the training run's run.json: config, dataset checksum, versions)."""


def shipped_model(optimizer: str, algorithm: str = "maskable_ppo") -> Path | None:
    """The shipped model trained with ``optimizer``'s outcomes on the shipped dataset (None:
    none is)."""
    import re

    path = DATA / f"{algorithm}-{re.sub(r'[^A-Za-z0-9._-]', '-', optimizer)}.zip"
    return path if path.is_file() else None
