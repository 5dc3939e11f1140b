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


def shown(value: object) -> str:
    """``value`` for an error message: ``reprlib``'s short repr (a long number or list cut in
    the middle), and an int too long for Python to turn into digits (over 4,300 of them:
    ``repr`` itself raises ``ValueError``) by its size, so that the message never fails."""
    import reprlib
    import sys

    if isinstance(value, int) and not isinstance(value, bool):
        digits = int(abs(value).bit_length() * 0.30103) + 1  # log10(2): within one digit
        limit = getattr(sys, "get_int_max_str_digits", lambda: 0)()  # 0: no limit
        if limit and digits > limit:  # said by its size before repr is tried: Python 3.14's
            # reprlib no longer raises, but names the object in words that it then cuts
            return f"an integer of about {digits} digits"
    try:
        return reprlib.repr(value)
    except ValueError:
        return f"a {type(value).__name__} that cannot be shown"


def repeated(values) -> list:
    """The values given more than once (an equal number twice: 0.25 and 0.250), each once,
    in the order first seen: the budgets, splits or seeds of a run, each of which would be
    run and reported again."""
    seen, again = set(), []
    for value in values:
        if value in seen and value not in again:
            again.append(value)
        seen.add(value)
    return again


def budgets_once(budgets) -> None:
    """A ``ValueError`` where a budget is given more than once (``0.25`` and ``0.250``): a
    benchmark or a learned tree would run it, and report it, twice."""
    again = repeated(budgets)
    if again:
        raise ValueError(f"budgets {', '.join(map(repr, again))} given more than once: give "
                         "each budget once")
