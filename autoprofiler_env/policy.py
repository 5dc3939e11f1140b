"""The one policy interface: stable-baselines3's ``predict``.

A baseline, the AutoProfiler tree and a trained SB3 model are all policies:

    actions, state = policy.predict(observation, state=None, episode_start=None,
                                    deterministic=True, action_masks=None)

``observation`` is one observation of ``ProfilingEnv`` or a batch of them (a vector env's);
``action_masks`` the valid actions (one mask, or one per observation), as sb3-contrib's
``MaskablePPO.predict`` takes them. A policy that takes no masks (SB3's ``PPO``, ``DQN``) is a
policy too: :func:`predict` leaves them out for it, and the environment answers a masked
action as STOP. Everything a policy may read is in the observation (its ``action_mask``
included) or in the documented part of the environment (``sections``, ``metric_names``,
``section_costs``, ``episode_budget``, ``optimizer``; ``problem`` only for an analysis tool
such as the hindsight oracle): never a private attribute.

The benchmark and the experiment also read, where a policy has them (all optional):

- ``name``: its row in the tables where it is given as an object (without one: its class or
  function name; a spec string names its own row);
- ``stochastic``: whether its episodes vary with a seed (then run once per seed); without it,
  a policy with a ``seed(int)`` method is taken as stochastic;
- ``seed(int)``: seeds a stochastic policy before each seed's episodes;
- ``fits_budget(sections)``: for a fixed configuration, whether it ran whole within the
  budget (True/False; None for a policy that is not one): the leaderboard's fits column.

(:class:`experiments.policies.Entry` holds the rules.)
"""

from __future__ import annotations

import inspect
import weakref
from typing import Any, Protocol, runtime_checkable

import numpy as np

from autoprofiler_env.errors import PolicyError


@runtime_checkable
class Policy(Protocol):
    """Anything with SB3's ``predict``."""

    def predict(self, observation: dict[str, np.ndarray], state: Any = None,
                episode_start: np.ndarray | None = None, deterministic: bool = False,
                action_masks: np.ndarray | None = None) -> tuple[np.ndarray, Any]:
        ...


def takes_masks(policy: Policy) -> bool:
    """Whether ``policy.predict`` accepts ``action_masks`` (sb3-contrib's maskable algorithms
    and the project's policies do; SB3's own algorithms do not). Asked once per function
    (:func:`inspect.signature` took 17 us a step, 47% of a tree's learning)."""
    method = policy.predict
    function = getattr(method, "__func__", method)  # a bound method's function
    try:
        return _TAKES_MASKS[function]
    except (KeyError, TypeError):  # not seen, or no weak reference to it (__slots__)
        pass
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        answer = False
    else:
        answer = "action_masks" in parameters or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    try:
        _TAKES_MASKS[function] = answer
    except TypeError:
        pass
    return answer


_TAKES_MASKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
""":func:`takes_masks`'s answers by ``predict``'s function (a bound method's: one per class)."""


def predict(policy: Policy, observation, state=None, episode_start=None,
            deterministic: bool = True, action_masks=None):
    """``policy.predict``, with ``action_masks`` only where the policy takes them; a
    :class:`~autoprofiler_env.errors.PolicyError` where it returns no ``(action, state)``."""
    if action_masks is not None and takes_masks(policy):
        out = policy.predict(observation, state=state, episode_start=episode_start,
                             deterministic=deterministic, action_masks=action_masks)
    else:
        out = policy.predict(observation, state=state, episode_start=episode_start,
                             deterministic=deterministic)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        name = getattr(policy, "name", None) or type(policy).__name__
        raise PolicyError(f"{name}.predict returned {_short(out)}; a policy's predict returns "
                          "a pair (action, state), as stable-baselines3's does: return "
                          "(action, None) where it keeps no state")
    return out


def _short(value) -> str:
    text = repr(value)
    return (text if len(text) <= 60 else text[:57] + "...") + f" ({type(value).__name__})"
