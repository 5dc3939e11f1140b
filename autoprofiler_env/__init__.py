"""autoprofiler-env: a Gymnasium environment and toolkit for learning what to profile.

Importing the package registers the environments ``AutoProfiler-v0`` (replay) and
``AutoProfilerLive-v0`` (live, on a GPU).
"""

from autoprofiler_env.envs import register_envs

__version__ = "0.1.0"

register_envs()
