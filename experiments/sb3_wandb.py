"""stable-baselines3's logger reaching wandb, without tensorboard: an output format.

>>> from stable_baselines3.common.logger import configure
>>> logger = configure(str(out), ["csv"])
>>> logger.output_formats.append(WandbOutputFormat(run))
>>> model.set_logger(logger)

Every ``logger.dump(step)`` (SB3 dumps each on-policy iteration, every ``log_interval``
episodes off-policy, and the evaluation callback after each evaluation) becomes one
``run.log(values, step=step)`` with SB3's own keys (``rollout/ep_rew_mean``, ``train/loss``,
``time/fps``, ``eval/geomean_speedup``, ...): the wandb step is the number of environment
steps, as SB3's tensorboard output uses it. This is what SB3's own ``WandbCallback`` leaves to
tensorboard's sync, which would make tensorboard a dependency.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from stable_baselines3.common.logger import KVWriter

FORMAT = "wandb"
"""The name a ``logger.record(..., exclude=...)`` uses to keep a value out of wandb."""


class WandbOutputFormat(KVWriter):
    """Writes SB3's logged numbers to a wandb run (strings, videos and figures are left to
    the formats that show them; a value recorded with ``exclude="wandb"`` is left out)."""

    def __init__(self, run) -> None:
        self.run = run

    def write(self, key_values: dict[str, Any], key_excluded: dict[str, tuple[str, ...]],
              step: int = 0) -> None:
        data = {}
        for key, value in key_values.items():
            excluded = key_excluded.get(key) or ()
            if FORMAT in excluded:
                continue
            if hasattr(value, "item") and getattr(value, "size", 1) == 1:  # numpy / torch
                value = value.item()
            if isinstance(value, numbers.Real) and math.isfinite(float(value)):
                data[key] = value
        if data:
            self.run.log(data, step=int(step))

    def close(self) -> None:
        """The run is the command's to finish, not the logger's."""
