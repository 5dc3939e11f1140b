"""Policies by name, as ``autoprofiler benchmark --policy SPEC`` takes them.

- a baseline's name: ``no-profile``, ``set:basic|detailed|full``, ``section:<Section>``,
  ``curated:cudaforge-like``, ``roofline-tree``, ``random``, ``oracle``;
- ``sb3:FILE`` or ``sb3:ALGO:FILE``, or a path ending in ``.zip``: a saved stable-baselines3 /
  sb3-contrib model (:func:`agents.rl.load_model`; ALGO one of maskable_ppo, ppo, a2c, dqn,
  qrdqn, read from the file when left out); ``sb3:DIR``: a run directory of
  ``autoprofiler train`` or of rl-baselines3-zoo (``logs/<algo>/AutoProfiler-v0_<N>``), its
  best model (:func:`agents.rl.load_run`);
- ``tree:FILE``: an AutoProfiler tree file (:mod:`agents.tree`), named ``tree:<file stem>``
  in the tables; ``autoprofiler-tree``: the tree the project ships for the environment's
  optimizer (:func:`agents.tree.shipped_tree`), which the benchmark shows by default;
- ``maskable-ppo``: the MaskablePPO policy the project ships for the environment's optimizer
  (:func:`agents.rl.shipped_model`), shown by default too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autoprofiler_env.errors import AutoProfilerError
from autoprofiler_env.policy import Policy

SHIPPED_TREE = "autoprofiler-tree"
"""The name of the shipped tree's entry."""
SHIPPED_RL = "maskable-ppo"
"""The name of the shipped MaskablePPO policy's entry."""


@dataclass
class Entry:
    """A policy in the benchmark: its name in the tables, and whether its episodes vary with
    a seed (they are then run once per seed)."""

    name: str
    policy: Policy
    stochastic: bool = False
    learned_on: str | None = None
    """The sha256 of the dataset a learned policy was learned on, where its files say."""

    def fits_budget(self, sections) -> bool:
        """Whether a fixed configuration ran whole (always, for other policies)."""
        check = getattr(self.policy, "fits_budget", None)
        return bool(check(sections)) if check is not None else True


def load(spec: str, env) -> Entry:
    """The policy ``spec`` names, for ``env``; an ``AutoProfilerError`` saying what is
    accepted otherwise."""
    from baselines import baseline

    if spec == SHIPPED_RL:
        from agents.rl import load_model, shipped_model

        path = shipped_model(env.unwrapped.optimizer)
        if path is None:
            raise AutoProfilerError(f"no MaskablePPO policy is shipped for the optimizer "
                                    f"{env.unwrapped.optimizer!r}: train one with "
                                    "`autoprofiler train` and give sb3:DIR")
        return Entry(SHIPPED_RL, _fitting(load_model(path, "maskable_ppo"), env, spec),
                     learned_on=_learned_on(path.with_suffix(".json")))
    if spec.startswith("tree:") or spec == SHIPPED_TREE:
        from agents.tree import TreePolicy, shipped_tree

        if spec == SHIPPED_TREE:
            path = shipped_tree(env.unwrapped.optimizer)
            if path is None:
                raise AutoProfilerError(f"no tree is shipped for the optimizer "
                                        f"{env.unwrapped.optimizer!r}: learn one "
                                        "with `autoprofiler learn-tree` and give tree:FILE")
            return Entry(SHIPPED_TREE, TreePolicy(path, env, SHIPPED_TREE),
                         learned_on=_learned_on(path))
        path = Path(spec.removeprefix("tree:"))
        return Entry(f"tree:{path.stem}", TreePolicy(path, env, f"tree:{path.stem}"),
                     learned_on=_learned_on(path))
    if spec.startswith("sb3:") or spec.endswith(".zip"):
        from agents.rl import load_model

        rest = spec.removeprefix("sb3:")
        head, sep, tail = rest.partition(":")
        algorithm, path = (head, tail) if sep and not Path(rest).exists() else (None, rest)
        if not path:
            raise AutoProfilerError(f"--policy {spec!r}: give the model after sb3: (sb3:FILE, "
                                    "sb3:ALGO:FILE or sb3:DIR, a training run)")
        path = Path(path)
        run = path / "run.json" if path.is_dir() else path.parent / "run.json"
        return Entry(spec, _fitting(load_model(path, algorithm), env, spec),
                     learned_on=_learned_on(run if run.is_file() else path.with_suffix(".json")))
    try:
        agent = baseline(env, spec)
    except ValueError as e:
        raise AutoProfilerError(f"--policy {spec!r}: {e}; or sb3:FILE / sb3:ALGO:FILE, a "
                                "saved stable-baselines3 model, or sb3:DIR, a training "
                                "run; or tree:FILE, a tree "
                                f"file; or {SHIPPED_TREE}") from None
    return Entry(agent.name, agent, agent.stochastic)


def _fitting(model, env, spec: str):
    """``model``, if its observation and action spaces have the environment's shapes; an
    error naming the difference otherwise (a policy trained on a dataset of other
    sections or metrics)."""
    def shapes(space) -> dict:
        inner = getattr(space, "spaces", None)
        return ({k: tuple(v.shape or ()) for k, v in inner.items()} if inner is not None
                else {"": tuple(space.shape or ())})

    mine, theirs = shapes(model.observation_space), shapes(env.observation_space)
    differ = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
    if differ or getattr(model.action_space, "n", None) != getattr(env.action_space, "n", None):
        what = (f"observation {differ[0]!r}: {mine.get(differ[0])} against the "
                f"environment's {theirs.get(differ[0])}" if differ else
                f"{model.action_space} actions against the environment's {env.action_space}")
        raise AutoProfilerError(f"--policy {spec}: the model was trained on another "
                                f"environment ({what}): a dataset with other sections or "
                                "metrics; train one on this dataset")
    return model


def _learned_on(path: Path) -> str | None:
    """The dataset checksum a learned policy's record names: a training run's ``run.json``
    (or the ``.json`` shipped beside a model), a tree file's ``meta.learned``; None where
    there is none to read."""
    import json

    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    learned = (record.get("meta") or {}).get("learned") if "meta" in record else record
    found = learned.get("dataset_sha256") if isinstance(learned, dict) else None
    return found if isinstance(found, str) else None
