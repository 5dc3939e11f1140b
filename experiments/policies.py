"""Policies by name, as ``autoprofiler benchmark --policy SPEC`` and an experiment config's
``baselines`` take them (:func:`load`, the one grammar of them).

- a baseline's name: ``no-profile``, ``set:basic|detailed|full``, ``section:<Section>``,
  ``curated:cudaforge-like``, ``roofline-tree``, ``random``, ``oracle``;
- ``sb3:FILE`` or ``sb3:ALGO:FILE``, or a path ending in ``.zip``: a saved stable-baselines3 /
  sb3-contrib model (:func:`agents.rl.load_model`; ALGO one of :func:`agents.rl.algorithms`,
  read from the file when left out); ``sb3:DIR``: a run directory of ``autoprofiler train``
  or of rl-baselines3-zoo (``logs/<algo>/AutoProfiler-v0_<N>``), its best model
  (:func:`agents.rl.load_run`);
- ``tree:FILE``: an AutoProfiler tree file (:mod:`agents.tree`), named ``tree:<file stem>``
  in the tables (the benchmark names it by the spec as given where two specs would share a
  name: every ``learn-tree`` run writes ``tree.json``); ``autoprofiler-tree``: the tree the
  project ships for the environment's optimizer (:func:`agents.tree.shipped_tree`), which
  the benchmark shows by default;
- ``maskable-ppo``: the MaskablePPO policy the project ships for the environment's optimizer
  (:func:`agents.rl.shipped_model`), shown by default too;
- ``py:MODULE:ATTR``: a policy of your own (the ``module:attr`` form of entry points):
  MODULE importable from the current directory or ``PYTHONPATH``, ATTR (dotted for a nested
  one) a class or function that is called with the environment and returns an object with
  stable-baselines3's ``predict`` (:mod:`autoprofiler_env.policy`); named
  ``py:MODULE:ATTR`` in the tables.

A policy whose episodes vary with a seed -- one with a ``seed(int)`` method, or a
``stochastic = True`` attribute (the random baseline has both; ``stochastic = False`` says it
does not) -- runs once per seed, seeded with it where it has ``seed`` (:func:`is_stochastic`,
:meth:`Entry.seed`): in the benchmark once per ``--seeds``, in an experiment once per the
config's seeds.

A learned policy's record (a training run's ``run.json``, the ``.json`` shipped beside a model,
a tree file's ``meta.learned``) says what it was learned on: :func:`learned_elsewhere` names
what differs from the environment it is evaluated on (another dataset; another
``budget_unit``, ``optimizer``, ``tolerance`` or reward; problems it was trained on), which
the benchmark and the experiment warn about.

The files a spec reads (:func:`files_read`: a tree file, a model file or a run's best model,
a ``py:`` module's source) are checksummed in each experiment run's file (:func:`checksums`):
a resumed experiment refuses the runs of a file changed since.
"""

from __future__ import annotations

import inspect
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from autoprofiler_env.atomic import writer
from autoprofiler_env.errors import AutoProfilerError
from autoprofiler_env.policy import Policy
from autoprofiler_env.pyspec import imported, parts

SHIPPED_TREE = "autoprofiler-tree"
"""The name of the shipped tree's entry."""
SHIPPED_RL = "maskable-ppo"
"""The name of the shipped MaskablePPO policy's entry."""


class PolicySpecError(AutoProfilerError):
    """A policy spec that names no policy, or one that cannot be made for the environment
    (a module or attribute that is not there, an object without ``predict``, a model of
    another environment's spaces); the message says what is accepted."""


def is_stochastic(policy) -> bool:
    """Whether ``policy``'s episodes vary with a seed: its ``stochastic`` attribute where it
    has one, else whether it has a ``seed(int)`` method (an SB3 model's ``seed`` is a number,
    not a method: it is deterministic here, where rollouts are)."""
    flag = getattr(policy, "stochastic", None)
    if flag is not None:
        return bool(flag)
    return callable(getattr(policy, "seed", None))


@dataclass
class Entry:
    """A policy in the benchmark or an experiment: its name in the tables, and whether its
    episodes vary with a seed (then run once per seed; None: :func:`is_stochastic` of the
    policy)."""

    name: str
    policy: Policy
    stochastic: bool | None = None
    learned_on: str | None = None
    """The sha256 of the dataset a learned policy was learned on, where its files say (an
    rl-baselines3-zoo run's: of the dataset its saved env_kwargs name, :func:`_zoo_learned`)."""
    learned_on_unread: str | None = None
    """The dataset its files name where that cannot be read here to take its sha256 (a zoo
    run's env_kwargs naming a path relative to where the zoo ran, or a file since gone)."""
    learned_with: dict | None = None
    """The make kwargs of the environment it was learned on that bear on what the
    observation and the reward mean (:data:`BEARING`), where its files say."""
    trained_on: dict | None = None
    """The problems whose rewards it was learned from, where its files say: ``{"split": s}``
    (``None``: every problem) or ``{"problems": [...]}``, the make kwargs of its training
    environment (a tree of learn-tree's: ``{"split": "train"}``; the split that chose the best
    model or kept tree, val, is not counted); :func:`trained_problems` lists them."""

    def __post_init__(self) -> None:
        if self.stochastic is None:
            self.stochastic = is_stochastic(self.policy)

    def seed(self, seed: int) -> None:
        """Seeds a stochastic policy that has a ``seed(int)`` method (one that has none draws
        from its own generator); a deterministic one is left as it is."""
        if self.stochastic and callable(getattr(self.policy, "seed", None)):
            self.policy.seed(seed)

    def fits_budget(self, sections) -> bool | None:
        """Whether a fixed configuration ran whole; None for a policy that is not one (one
        without ``fits_budget``, or whose ``fits_budget`` says None: the baselines' rule
        tree, random and oracle, the learned policies)."""
        check = getattr(self.policy, "fits_budget", None)
        fits = check(sections) if check is not None else None
        return bool(fits) if fits is not None else None


def kind(spec: str) -> str:
    """Which part of the grammar ``spec`` is: ``shipped`` (:data:`SHIPPED_TREE`,
    :data:`SHIPPED_RL`), ``tree``, ``sb3``, ``py`` or ``baseline`` (any other string: a
    baseline's name, checked when it is loaded)."""
    if spec in (SHIPPED_TREE, SHIPPED_RL):
        return "shipped"
    if spec.startswith("tree:"):
        return "tree"
    if spec.startswith("py:"):
        return "py"
    if spec.startswith("sb3:") or spec.endswith(".zip"):
        return "sb3"
    return "baseline"


def load(spec: str, env) -> Entry:
    """The policy ``spec`` names, for ``env``; a :class:`PolicySpecError` saying what is
    accepted otherwise."""
    from baselines import baseline

    if spec == SHIPPED_RL:
        from agents.rl import load_model, shipped_model

        path = shipped_model(env.unwrapped.optimizer)
        if path is None:
            raise PolicySpecError(f"no MaskablePPO policy is shipped for the optimizer "
                                  f"{env.unwrapped.optimizer!r}: train one with "
                                  "`autoprofiler train` and give sb3:DIR")
        return Entry(SHIPPED_RL, _fitting(load_model(path, "maskable_ppo"), env,
                                          f"the shipped {SHIPPED_RL} ({path.name})"),
                     **_learned(path.with_suffix(".json")))
    if kind(spec) in ("tree", "shipped"):
        from agents.tree import TreePolicy, shipped_tree

        if spec == SHIPPED_TREE:
            path = shipped_tree(env.unwrapped.optimizer)
            if path is None:
                raise PolicySpecError(f"no tree is shipped for the optimizer "
                                      f"{env.unwrapped.optimizer!r}: learn one "
                                      "with `autoprofiler learn-tree` and give tree:FILE")
            return Entry(SHIPPED_TREE, TreePolicy(path, env, SHIPPED_TREE), **_learned(path))
        path = _tree_path(spec)
        not_being_written(f"--policy {spec}", path.parent, "the tree")
        return Entry(f"tree:{path.stem}", TreePolicy(path, env, f"tree:{path.stem}"),
                     **_learned(path))
    if kind(spec) == "sb3":
        from agents.rl import load_model, zoo_env_kwargs
        from agents.rl.callbacks import saved_record

        algorithm, path = _sb3_parts(spec)
        not_being_written(f"--policy {spec}", path if path.is_dir() else path.parent,
                          "its model")
        run = path / "run.json" if path.is_dir() else path.parent / "run.json"
        zoo = None if run.is_file() else zoo_env_kwargs(path if path.is_dir() else path.parent)
        learned = (_learned(run) if run.is_file() else
                   _zoo_learned(zoo) if zoo is not None else
                   _learned(path.with_suffix(".json")) if path.with_suffix(".json").is_file()
                   else _said(saved_record(path) or {}))  # carried in the zip
        return Entry(spec, _fitting(load_model(path, algorithm), env, f"--policy {spec}"),
                     **learned)
    if kind(spec) == "py":
        return Entry(spec, made(_imported(spec), env, spec))
    try:
        agent = baseline(env, spec)
    except ValueError as e:
        raise PolicySpecError(f"--policy {spec!r}: {e}; or sb3:FILE / sb3:ALGO:FILE, a "
                              "saved stable-baselines3 model, or sb3:DIR, a training "
                              "run; or tree:FILE, a tree "
                              f"file; or {SHIPPED_TREE} or {SHIPPED_RL}, the shipped "
                              "agents; or py:MODULE:ATTR, a policy of your own") from None
    return Entry(agent.name, agent)


def check(spec: str) -> None:
    """Checks what of ``spec`` can be checked without an environment (an experiment config
    when it is read): its form, that a model's or a tree's file is there, that a ``py:``
    module imports and has the attribute; :func:`load` checks the rest."""
    if kind(spec) == "sb3":
        _, path = _sb3_parts(spec)
        if not path.exists():
            raise PolicySpecError(f"--policy {spec}: {path}: no such model file or run "
                                  f"directory (a relative path is read from {Path.cwd()})")
    elif kind(spec) == "tree":
        path = _tree_path(spec)
        if not path.is_file():
            raise PolicySpecError(f"--policy {spec}: {path}: no such tree file (a relative "
                                  f"path is read from {Path.cwd()})")
    elif kind(spec) == "py":
        _imported(spec)


def files_read(spec: str, env) -> list[Path]:
    """The files the policy ``spec`` names is read from, for ``env`` (what a resumed
    experiment checks for changes, :func:`checksums`): a tree file (``tree:FILE``, or the
    shipped tree of ``env``'s optimizer); a model file (``sb3:FILE``, the shipped MaskablePPO
    policy; ``sb3:DIR``: the best model :func:`agents.rl.load_run` loads from it); a ``py:``
    module's source file (the module only, not what it imports); none for a baseline's
    name (the package's own code)."""
    if spec == SHIPPED_RL:
        from agents.rl import shipped_model

        found = shipped_model(env.unwrapped.optimizer)
        return [found] if found is not None else []
    if spec == SHIPPED_TREE:
        from agents.tree import shipped_tree

        found = shipped_tree(env.unwrapped.optimizer)
        return [found] if found is not None else []
    if kind(spec) == "tree":
        return [_tree_path(spec)]
    if kind(spec) == "sb3":
        from agents.rl import BEST_MODEL

        _, path = _sb3_parts(spec)
        return [path / BEST_MODEL if path.is_dir() else path]
    if kind(spec) == "py":
        _imported(spec)
        module = sys.modules[parts(spec)[0]]
        source = getattr(module, "__file__", None)
        return [Path(source)] if source else []
    return []


def checksums(spec: str, env) -> dict[str, str]:
    """``{path: sha256}`` of each file :func:`files_read` names (a file that is not there:
    ``"missing"``)."""
    from autoprofiler_env.checksum import file_sha256

    found = {}
    for path in files_read(spec, env):
        try:
            found[str(path)] = file_sha256(path)
        except OSError:
            found[str(path)] = "missing"
    return found


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The paths whose checksums (:func:`checksums`) differ between ``before`` and ``after``
    (one that either lacks included), sorted."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def not_being_written(option: str, folder: Path, what: str) -> None:
    """Refuses a policy (or ``learn-tree --start``'s tree: ``option`` names it, ``--policy
    SPEC``) read from a folder that a running command writes (a training run rewrites its
    best model at each evaluation, a learn-tree run its tree at each accepted edit): an
    experiment scored such a run's ``best_model.zip`` of one evaluation at one budget and of
    the next at the others.
    ``folder``'s parents are asked too, where a command that writes models below its folder
    holds them (:data:`_WRITES_BELOW`: a tuning run writes its trials' models in
    ``trials/<number>``); another command's (a recording's) or another tool's lock on a
    parent refuses nothing."""
    folder = Path(os.path.realpath(folder))
    for held in (folder, *folder.parents):
        holder = writer(held)
        if holder is not None and (held == folder or any(
                command in holder for command in _WRITES_BELOW)):
            raise PolicySpecError(f"{option}: {held} is being written ({holder}): wait for "
                                  f"it to end, or give a copy of {what}")


_WRITES_BELOW = ("autoprofiler tune", "autoprofiler experiment")
"""The commands whose runs write policies in folders below the one they hold (a lock file's
words name the command: :func:`autoprofiler_env.atomic.one_writer`)."""


def _tree_path(spec: str) -> Path:
    """The file of ``tree:FILE`` (an empty FILE would be the current directory)."""
    path = spec.removeprefix("tree:")
    if not path:
        raise PolicySpecError(f"--policy {spec}: give the tree's file after tree: "
                              f"(tree:FILE, e.g. the tree.json a learn-tree run writes), or "
                              f"{SHIPPED_TREE} for the tree the project ships")
    return Path(path)


def _sb3_parts(spec: str) -> tuple[str | None, Path]:
    """(the algorithm or None, the path) of ``sb3:FILE``, ``sb3:ALGO:FILE``, ``sb3:DIR`` or
    ``FILE.zip``."""
    rest = spec.removeprefix("sb3:")
    head, sep, tail = rest.partition(":")
    algorithm, path = (head, tail) if sep and not Path(rest).exists() else (None, rest)
    if not path:
        raise PolicySpecError(f"--policy {spec!r}: give the model after sb3: (sb3:FILE, "
                              "sb3:ALGO:FILE or sb3:DIR, a training run)")
    return algorithm, Path(path)


def as_entry(item, env) -> Entry:
    """The benchmark's entry for ``item``: a spec (:func:`load`); a policy (an object with
    ``predict``); a class or function called with ``env`` that returns one (as
    ``py:MODULE:ATTR``'s ATTR is); or a ``(name, policy or class or function)`` pair.
    Unnamed, a policy is named by its ``name`` attribute, else by its class or function."""
    if isinstance(item, str):
        return load(item, env)
    name = None
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        name, item = item
    where = name or getattr(item, "__qualname__", None) or type(item).__name__
    policy = made(item, env, where)
    if name is None:
        own = getattr(policy, "name", None)
        name = own if isinstance(own, str) and own else where
    return Entry(name, policy)


def made(thing, env, spec: str):
    """A policy from ``thing``: a class or a function (anything callable without
    ``predict``) is called with ``env``; an object with ``predict`` is the policy itself. A
    stable-baselines3 model is checked against the environment's spaces (:func:`_fitting`);
    an object without ``predict`` is a :class:`PolicySpecError`."""
    policy = thing
    if isinstance(thing, type) or (not hasattr(thing, "predict") and callable(thing)):
        _takes_the_environment(thing, spec)
        policy = thing(env)
    if not callable(getattr(policy, "predict", None)):
        made_by = (f"{getattr(thing, '__qualname__', thing)}(env) returned "
                   if policy is not thing else "")
        raise PolicySpecError(
            f"--policy {spec}: {made_by}{type(policy).__name__} {policy!r:.60}, which has no "
            "predict: a policy is an object with stable-baselines3's predict(observation, "
            "state=None, episode_start=None, deterministic=False[, action_masks=None]) -> "
            "(action, state) (autoprofiler_env/policy.py); give a class or function that "
            "returns one")
    from stable_baselines3.common.base_class import BaseAlgorithm

    if isinstance(policy, BaseAlgorithm):
        _fitting(policy, env, f"--policy {spec}")
    return policy


def _takes_the_environment(thing, spec: str) -> None:
    """A :class:`PolicySpecError` for a class or function whose signature cannot take the
    environment as its one argument. Checked on the signature, before the call: a TypeError
    of the call itself would look the same as one raised inside a correct constructor's
    body, which is the policy's own error and is left to surface as it is."""
    try:
        signature = inspect.signature(thing)
    except (TypeError, ValueError):  # no signature to read (some built-ins): just called
        return
    try:
        signature.bind(object())
    except TypeError as e:
        name = getattr(thing, "__qualname__", None) or type(thing).__name__
        raise PolicySpecError(
            f"--policy {spec}: {name}{signature} cannot be called with the environment ({e}): "
            "give a class whose __init__ takes it (def __init__(self, env)) or a function "
            "f(env), either returning a policy: an object with stable-baselines3's "
            "predict(observation, state=None, episode_start=None, deterministic=False[, "
            "action_masks=None]) -> (action, state) (autoprofiler_env/policy.py); or such "
            "an object itself") from None


def _imported(spec: str):
    """The object ``py:MODULE:ATTR`` names (:func:`autoprofiler_env.pyspec.imported`)."""
    found = imported(spec, PolicySpecError, "--policy",
                     "a class or function in it that is called with the environment (e.g. "
                     "py:my_policies:CheapestFirst for my_policies.py here)")
    if not callable(found) and not hasattr(found, "predict"):
        attribute = parts(spec)[2]
        raise PolicySpecError(f"--policy {spec}: {attribute} is a {type(found).__name__}, "
                              "not a class or function to call with the environment")
    return found


def _fitting(model, env, who: str):
    """``model``, if its observation and action spaces have the environment's shapes; an
    error naming the difference otherwise (a policy trained on a dataset of other
    sections or metrics, or on a wrapped observation), beginning with ``who``: the
    ``--policy`` spec or the shipped model."""
    def shapes(space) -> dict:
        inner = getattr(space, "spaces", None)
        return ({k: tuple(v.shape or ()) for k, v in inner.items()} if inner is not None
                else {"": tuple(space.shape or ())})

    mine, theirs = (getattr(model.observation_space, "spaces", None),
                    getattr(env.observation_space, "spaces", None))
    if mine is None and theirs is not None:
        space = model.observation_space
        raise PolicySpecError(
            f"{who}: the model was trained on a wrapped observation "
            f"({type(space).__name__}{tuple(space.shape or ())}, not the environment's Dict of "
            f"{', '.join(theirs)}): FlattenObservation or a similar wrapper. The benchmark "
            "and the experiment give the environment's Dict observation, which the model "
            "cannot take: wrap it in a policy of your own whose predict flattens the "
            "observation (gymnasium.spaces.flatten(env.observation_space, observation)) "
            "before calling the model's, and give it as py:MODULE:ATTR (docs/benchmark.md)")
    mine, theirs = shapes(model.observation_space), shapes(env.observation_space)
    differ = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
    if differ or getattr(model.action_space, "n", None) != getattr(env.action_space, "n", None):
        what = (f"observation {differ[0]!r}: {mine.get(differ[0])} against the "
                f"environment's {theirs.get(differ[0])}" if differ else
                f"{model.action_space} actions against the environment's {env.action_space}")
        raise PolicySpecError(f"{who}: the model was trained on another "
                              f"environment ({what}): a dataset with other sections or "
                              "metrics; train one on this dataset")
    return model


BEARING = {
    "budget_unit": "the observation's costs and budget_total were in other units",
    "optimizer": "its reward was another optimizer's outcomes",
    "tolerance": "its reward judged correctness under another tolerance",
    "reward": "it was trained for another reward",
    "incorrect_reward": "its reward for an incorrect candidate was shaped otherwise",
    "cost_penalty": "its reward charged profiling otherwise",
}
"""The make kwargs of the environment that change what the observation or the reward means,
and how; a learned policy's record naming another value than the evaluation's environment
is warned about (:func:`learned_elsewhere`). The others do not: ``split``, ``problems``,
``budget``, ``budget_range`` and ``budget_is_fraction`` choose the episodes and their
budgets, which the observation states in the same terms; ``device``, ``backend`` and the
live backend's ``evidence``, ``harness`` and ``source`` say how an outcome is obtained, not
what it means; ``dataset`` is compared by its sha256 (a zoo run's, of the dataset its
env_kwargs name)."""


def _learned(path: Path) -> dict:
    """What a learned policy's record says it was learned on, as :class:`Entry`'s
    ``learned_on`` (the dataset's sha256) and ``learned_with`` (:data:`BEARING`'s make
    kwargs): a training run's ``run.json`` (or the ``.json`` shipped beside a model; its
    ``env_kwargs`` are every make kwarg given, the others took the environment's defaults,
    and its ``optimizer`` the one they resolved to), a tree file's ``meta.learned`` (the
    kwargs it names); None for what there is none to read."""
    import json

    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(record, dict):
        return {}
    learned = (record.get("meta") or {}).get("learned") if "meta" in record else record
    return _said(learned) if isinstance(learned, dict) else {}


def _zoo_learned(env_kwargs: dict) -> dict:
    """:func:`_learned` of an rl-baselines3-zoo run, from its saved ``env_kwargs``
    (:func:`agents.rl.zoo_env_kwargs`): the zoo records no dataset checksum, so the dataset
    those name (``dataset``; none: the default) is loaded for its sha256, or named as
    ``learned_on_unread`` where it cannot be read here."""
    from autoprofiler_env.dataset import Dataset
    from autoprofiler_env.errors import DatasetError

    named = env_kwargs.get("dataset")
    try:
        sha256 = Dataset.load(named).metadata["sha256"]
    except DatasetError:
        return _said({"env_kwargs": env_kwargs}) | {"learned_on_unread": str(named)}
    return _said({"env_kwargs": env_kwargs, "dataset_sha256": sha256})


def _said(learned: dict) -> dict:
    """:func:`_learned` of a record read (an rl-baselines3-zoo run's: its ``env_kwargs``
    with the sha256 :func:`_zoo_learned` took)."""
    import inspect

    from autoprofiler_env.envs.profiling_env import ProfilingEnv

    found = learned.get("dataset_sha256")
    kwargs = learned.get("env_kwargs")
    if isinstance(kwargs, dict):  # a training run's: every kwarg, the rest the defaults
        defaults = inspect.signature(ProfilingEnv.__init__).parameters
        said = {k: kwargs.get(k, defaults[k].default) for k in BEARING}
        said["optimizer"] = learned.get("optimizer") or kwargs.get("optimizer")
    else:  # a tree's: what it names
        said = {k: learned[k] for k in BEARING if k in learned}
        if "dataset_sha256" in learned:  # a tree of learn-tree's: the tolerance it learned
            said.setdefault("tolerance", None)  # under, None (the default) before it logged one
    said = {k: v for k, v in said.items() if not (k == "optimizer" and v is None)}
    trained = None
    if isinstance(kwargs, dict):  # its training environment's problems
        problems = kwargs.get("problems")
        trained = ({"problems": [str(p) for p in problems]} if isinstance(problems, list)
                   else {"split": kwargs.get("split", "train")})
    elif "dataset_sha256" in learned:  # learn-tree's: its edits are scored on train
        trained = {"split": "train"}
    return {"learned_on": found if isinstance(found, str) else None,
            "learned_with": said or None, "trained_on": trained}


def trained_problems(trained_on: dict, backend) -> list[str]:
    """The problem URIs an :attr:`Entry.trained_on` (or a training config's env kwargs: its
    ``split``, default train, or ``problems``) names in ``backend``'s dataset."""
    if isinstance(trained_on.get("problems"), list):
        return [str(p) for p in trained_on["problems"]]
    return list(backend.problems(trained_on.get("split", "train")))


def in_sample(trained_on: dict, env, where: str = "evaluated here") -> str | None:
    """How many of ``env``'s problems (said as ``where`` they are) a policy trained on
    ``trained_on``'s problems (:func:`trained_problems`) learned from, in words; None where
    none."""
    base = env.unwrapped
    learned = set(trained_problems(trained_on, base.backend))
    overlap = [p for p in base.problems if p in learned]
    if not overlap:
        return None
    how = ("its problems list" if isinstance(trained_on.get("problems"), list)
           else f"split={trained_on.get('split', 'train')!r}")
    how += ": every problem" if how == "split=None" else ""
    return f"{len(overlap)} of the {len(base.problems)} problems {where} ({how})"


def _environment_kwargs(env) -> dict:
    """:data:`BEARING`'s make kwargs of ``env``, as it was made."""
    base = env.unwrapped
    spec = getattr(env, "spec", None)
    given = dict(spec.kwargs) if spec is not None else {}
    return {"budget_unit": base.budget_unit, "optimizer": base.optimizer,
            "tolerance": getattr(base.backend, "tolerance", given.get("tolerance")),
            "reward": base.reward_kind, "incorrect_reward": base.incorrect_reward,
            "cost_penalty": base.cost_penalty}


def _same(a, b) -> bool:
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) if numbers else a == b


def learned_elsewhere(entry: Entry, env, dataset: str | None = None,
                      where: str = "evaluated here") -> list[str]:
    """What ``entry``'s record says it was learned on that ``env`` is not, one message each
    (none for a policy without a record): another dataset (``dataset``: the name it was
    given as, None for the default), other make kwargs that bear on the observation or the
    reward (:data:`BEARING`), problems of ``env`` it was trained on (:func:`in_sample`, on
    the same dataset; ``where``: how those problems are said, the experiment naming the
    split). The benchmark and the experiment warn them: the policy's rows then measure how
    it transfers, or how it fits."""
    from autoprofiler_env.dataset.format import same_content

    messages = []
    backend_dataset = getattr(env.unwrapped.backend, "dataset", None)
    sha256 = backend_dataset.metadata.get("sha256") if backend_dataset is not None else None
    if entry.learned_on_unread is not None:
        messages.append(f"{entry.name} was learned on the dataset {entry.learned_on_unread!r} "
                        "(its rl-baselines3-zoo env_kwargs), which cannot be read from here "
                        f"({Path.cwd()}) to compare with this one ({dataset or 'the default'}): "
                        "if it is another, its rows measure how it transfers (run from the "
                        "folder the zoo ran in, where a relative path names it)")
    if entry.learned_on is not None and sha256 is not None and not same_content(
            backend_dataset.metadata, entry.learned_on):
        messages.append(f"{entry.name} was learned on another dataset (sha256 "
                        f"{entry.learned_on[:12]}...) than this one "
                        f"({dataset or 'the default'}, sha256 {sha256[:12]}...): another "
                        "dataset, or an earlier build of this one; its rows measure how "
                        "it transfers (learn-tree, or train with env_kwargs naming the "
                        "dataset, learn one on this one)")
    here = _environment_kwargs(env)
    differ = [k for k, v in (entry.learned_with or {}).items()
              if k in here and not _same(v, here[k])]
    if differ:
        said = "; ".join(f"{k}={entry.learned_with[k]!r} there, {here[k]!r} here: "
                         f"{BEARING[k]}" for k in differ)
        messages.append(f"{entry.name} was learned on an environment made with other kwargs "
                        f"than this one ({said}); its rows measure how it transfers (learn "
                        "it with this environment's kwargs, or evaluate it on an "
                        "environment made with its own)")
    if entry.trained_on is not None and sha256 is not None and entry.learned_on is not None \
            and same_content(backend_dataset.metadata, entry.learned_on) \
            and (said := in_sample(entry.trained_on, env, where)) is not None:
        messages.append(f"{entry.name} was trained on {said}: its rows on them say how it "
                        "fits the problems it learned from, not how it does on new ones "
                        "(evaluate it on a split it was not trained on)")
    return messages
