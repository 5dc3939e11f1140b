"""The one evaluation: a policy on every problem of a split once, at a budget.

>>> env = gym.make("AutoProfiler-v0", split="test")
>>> records = rollout(env, NoProfile(env), budget=0.25)
>>> geomean(shipped_speedup(r.correct, r.speedup) for r in records)

Each episode starts with ``reset(options={"problem": uri, "budget": budget})`` in the order of
``problems`` (every problem of the environment by default), the policy is told the episode
started (``episode_start``, as SB3's recurrent policies expect) and acts with
``deterministic=True`` and the episode's action mask; the result is one
:class:`~autoprofiler_env.envs.profiling_env.EpisodeRecord` per problem, which
``env.validate`` can replay. The benchmark, the tree's learner and the RL evaluation all go
through here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from autoprofiler_env.envs.profiling_env import EpisodeRecord
from autoprofiler_env.errors import AutoProfilerError
from autoprofiler_env.policy import Policy, predict
from autoprofiler_env.scoring import geomean, shipped_speedup


def rollout(env, policy: Policy, problems: Iterable[str] | None = None,
            budget: float | None = None, deterministic: bool = True,
            seed: int | None = None,
            observe: Callable[[EpisodeRecord, dict], None] | None = None,
            ) -> list[EpisodeRecord]:
    """One episode per problem (in order), each at ``budget`` (None: the environment's);
    ``seed`` seeds the environment's generator at the first reset (None: leave it);
    ``observe(record, observation)`` is called at the end of each episode with its last
    observation (what an analysis needs besides the record: the tree learner reads the
    path its tree walked there)."""
    base = env.unwrapped
    uris = list(base.problems if problems is None else problems)
    records = []
    for i, uri in enumerate(uris):
        options = {"problem": uri}
        if budget is not None:
            options["budget"] = budget
        obs, info = env.reset(seed=seed if i == 0 else None, options=options)
        state, start = None, np.ones(1, dtype=bool)
        while True:
            action, state = predict(policy, obs, state=state, episode_start=start,
                                    deterministic=deterministic,
                                    action_masks=info["action_mask"])
            start = np.zeros(1, dtype=bool)
            obs, _, terminated, truncated, info = env.step(_scalar(action))
            if terminated or truncated:
                break
        if "record" not in info:  # a wrapper cut the episode before the optimizer ran
            raise AutoProfilerError(f"the episode on {uri} was truncated (a TimeLimit "
                                    "wrapper?): rollout needs episodes that end in the "
                                    "environment, which it does within n_sections steps")
        records.append(info["record"])
        if observe is not None:
            observe(info["record"], obs)
    return records


def _scalar(action):
    """One action from a policy's output (an int, a numpy integer or a one-element array)."""
    array = np.asarray(action)
    return array.reshape(()).item() if array.size == 1 else action


def masked_note(name: str, masked: int, episodes: int) -> str | None:
    """What to warn where the policy ``name`` ended ``masked`` of its ``episodes`` on an
    action its mask forbade (``EpisodeRecord.invalid_action``: the environment takes it as
    STOP, the profile cut short, silently); None where it ended none so."""
    if not masked:
        return None
    return (f"{name} ended {masked} of {episodes} episodes on an action the mask forbade "
            "(a section collected already, or one the budget left cannot pay), which the "
            "environment takes as STOP: its profiles were cut short there. A policy reads "
            "info['action_mask'] or env.action_masks() (MaskablePPO does; a PPO model "
            "trained without them does not)")


def score(records: Iterable[EpisodeRecord]) -> float:
    """The geometric-mean speedup of the program one would ship (the project's one score)."""
    return geomean(shipped_speedup(r.correct, r.speedup) for r in records)
