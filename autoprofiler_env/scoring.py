"""What an outcome is worth: the one score of the project.

The benchmark, the report, the hindsight oracle and the environment's default reward all
value an episode's outcome by the program one would ship: the candidate when it is correct,
the eager reference otherwise (an incorrect candidate is never shipped). A correct candidate
slower than eager counts at its slowdown: the optimizer's choice is what ships, and a profile
that leads it to a slower program is charged for it (not floored at 1.0, which would hide
that; KernelBench's speedups count such candidates the same way). So

- ``shipped_speedup(correct, speedup)`` is the candidate's speedup, or
  :data:`INCORRECT_SPEEDUP` (1.0, the eager program) when it is incorrect or was not timed;
- ``log_score`` is its natural log (0 for eager); a mean of log scores is the log of the
  geometric-mean speedup that every table reports.

The environment's ``incorrect_reward`` kwarg can charge an incorrect candidate more than
eager during training (a shaping choice); evaluations never use it.

>>> shipped_speedup(True, 2.0), shipped_speedup(False, None)
(2.0, 1.0)
"""

from __future__ import annotations

import math
from typing import Iterable

INCORRECT_SPEEDUP = 1.0
"""The speedup of an episode whose candidate is incorrect: the eager program is shipped."""


def shipped_speedup(correct: bool, speedup: float | None) -> float:
    """The speedup of the program one would ship after this outcome."""
    if correct and speedup is not None and speedup > 0 and math.isfinite(speedup):
        return float(speedup)
    return INCORRECT_SPEEDUP


def log_score(correct: bool, speedup: float | None) -> float:
    """``ln`` of :func:`shipped_speedup`: what rewards, regrets and the oracle add up."""
    return math.log(shipped_speedup(correct, speedup))


def geomean(speedups: Iterable[float]) -> float:
    """The geometric mean of shipped speedups (1.0 for none)."""
    return geomean_of_scores(math.log(s) for s in speedups)


def geomean_of_scores(scores: Iterable[float]) -> float:
    """The geometric-mean speedup of log scores (:func:`log_score`): ``exp`` of their mean
    (1.0 for none). The sum is :func:`math.fsum`'s, correctly rounded, so every Python gives
    the same digits (``sum`` of floats is compensated from Python 3.12 on, plain before)."""
    values = list(scores)
    return math.exp(math.fsum(values) / len(values)) if values else 1.0
