"""The hindsight oracle's search: per problem and budget, the affordable section set whose
outcome scores best, found through a backend's hindsight API (the replay's ``finish``,
which charges no episode). The oracle baseline and the tree learner's feedback both use it.
"""

from __future__ import annotations

import itertools
import math

from autoprofiler_env.envs.backends import Hindsight
from autoprofiler_env.scoring import log_score


def best_affordable(backend, uri: str, sections, costs, budget: float) -> tuple[int, ...]:
    """The indices (into ``sections``) of the affordable set with the highest score
    (:func:`~autoprofiler_env.scoring.log_score`), smallest sets first, the first of equals
    kept; the search stops early once it reaches the best outcome the problem has at all.

    Raises:
        TypeError: the backend has no hindsight (the live backend).
    """
    if not isinstance(backend, Hindsight):
        raise TypeError(f"the oracle needs a backend with hindsight (the replay's "
                        f"best_score and finish); {type(backend).__name__} has none")
    ceiling = backend.best_score(uri)
    best_value, best = -math.inf, ()
    affordable = [i for i in range(len(sections)) if costs[i] <= budget + 1e-12]
    for size in range(len(affordable) + 1):
        fits_any = False
        for combo in itertools.combinations(affordable, size):
            if sum(costs[i] for i in combo) > budget + 1e-12:
                continue
            fits_any = True
            outcome = backend.finish(uri, tuple(sections[i] for i in combo))
            value = log_score(outcome.correct, outcome.speedup)
            if value > best_value + 1e-12:
                best_value, best = value, combo
                if best_value >= ceiling - 1e-12:
                    return best
        if not fits_any:
            break
    return best
