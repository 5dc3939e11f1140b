"""Checks of numbers read from users' files, arguments and replies."""

from __future__ import annotations

import math
import numbers


def is_finite_number(value: object) -> bool:
    """Whether ``value`` is a real number that is finite as a float: not a bool (True is not
    a threshold, nor a budget), not NaN or infinite, and not an int too large for a float.

    ``math.isfinite`` alone raises ``OverflowError`` for an int beyond ~1.8e308 (JSON and
    YAML read ``1`` followed by 400 zeros as one), so a check built on it crashes on the very
    input it exists to refuse.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False  # numpy's bool_ is no numbers.Real; its numbers are
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
