"""The hindsight oracle's search: per problem and budget, the affordable section set whose
outcome scores best, found through a backend's hindsight API (the replay's ``finish``,
which charges no episode). The oracle baseline and the tree learner's feedback both use it.
"""

from __future__ import annotations

import itertools
import math

from autoprofiler_env.envs.backends import Hindsight
from autoprofiler_env.scoring import log_score

#: Scores closer than this are one score (the data report's ties too); costs compare to 1e-12.
SCORE_TIE = 1e-9


def best_affordable(backend, uri: str, sections, costs, budget: float) -> tuple[int, ...]:
    """The indices (into ``sections``) of the affordable set with the highest score
    (:func:`~autoprofiler_env.scoring.log_score`): of the sets that reach it, the smallest,
    of those the cheapest, and of equal costs the one whose bit mask of section indices is
    least (docs/report.md's "smallest optimal set", ``experiments/studies/report.py``'s
    ``section_sets``: the same sets); the search stops early once a size reaches the best
    outcome the problem has at all.

    Raises:
        TypeError: the backend has no hindsight (the live backend).
    """
    if not isinstance(backend, Hindsight):
        raise TypeError(f"the oracle needs a backend with hindsight (the replay's "
                        f"best_score and finish); {type(backend).__name__} has none")
    ceiling = backend.best_score(uri)
    best_value, best_cost, best = -math.inf, math.inf, ()
    affordable = [i for i in range(len(sections)) if costs[i] <= budget + 1e-12]
    for size in range(len(affordable) + 1):
        fits_any = False
        for combo in itertools.combinations(affordable, size):
            cost = sum(costs[i] for i in combo)
            if cost > budget + 1e-12:
                continue
            fits_any = True
            outcome = backend.finish(uri, tuple(sections[i] for i in combo))
            value = log_score(outcome.correct, outcome.speedup)
            if value > best_value + SCORE_TIE or (
                    value >= best_value - SCORE_TIE and len(combo) == len(best)
                    and (cost < best_cost - 1e-12 or (cost <= best_cost + 1e-12
                                                      and _mask(combo) < _mask(best)))):
                best_value, best_cost, best = max(value, best_value), cost, combo
        if not fits_any or best_value >= ceiling - SCORE_TIE:
            break
    return best


def _mask(combo: tuple[int, ...]) -> int:
    """The bit mask of section indices (the report's order of sets of one size)."""
    return sum(1 << i for i in combo)
