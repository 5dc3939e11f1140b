"""The Gymnasium environments. Importing :mod:`autoprofiler_env` registers them:

>>> import gymnasium as gym
>>> import autoprofiler_env
>>> env = gym.make("AutoProfiler-v0")
"""

from __future__ import annotations

import gymnasium as gym

ENTRY_POINT = "autoprofiler_env.envs.profiling_env:ProfilingEnv"
REPLAY_ID = "AutoProfiler-v0"
LIVE_ID = "AutoProfilerLive-v0"


def register_envs() -> None:
    """Registers both ids (once)."""
    if REPLAY_ID not in gym.registry:
        gym.register(REPLAY_ID, entry_point=ENTRY_POINT,
                     kwargs={"backend": "replay", "split": "train", "budget": 0.25,
                             "budget_unit": "seconds"})
    if LIVE_ID not in gym.registry:
        gym.register(LIVE_ID, entry_point=ENTRY_POINT, nondeterministic=True,
                     kwargs={"backend": "live", "split": "train", "budget": 0.25,
                             "budget_unit": "sections"})
