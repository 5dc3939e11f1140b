"""Where an episode's answers come from: the replay backend (a recorded dataset, on a CPU, in
microseconds) or the live backend (ncu, the optimizer and the harness, on a GPU). Both
implement :class:`Backend`."""

from autoprofiler_env.envs.backends.base import (
                                                 OPTIMIZERS,
                                                 Backend,
                                                 EpisodeOutcome,
                                                 Hindsight,
                                                 llm_model,
)
from autoprofiler_env.envs.backends.live import LiveBackend
from autoprofiler_env.envs.backends.replay import ReplayBackend

__all__ = ["OPTIMIZERS", "Backend", "EpisodeOutcome", "Hindsight", "LiveBackend",
           "ReplayBackend", "llm_model"]
