"""The one score: shipped speedups, their logs and the geometric mean."""

import functools
import itertools
import math
import operator

from autoprofiler_env.scoring import geomean, geomean_of_scores


def test_the_geometric_mean_has_the_same_digits_on_every_python_and_in_every_order():
    """``sum`` of floats is plain before Python 3.12 and compensated from it: the benchmark's
    numbers differed in their last digit between the two (33 of its 100 rows). The mean's sum
    is correctly rounded, so every Python and every order of the problems gives one value."""
    scores = [0.2, 1.1, 1.1, 0.2, 0.7, 0.1, 0.7, 0.3, 1.1, 1.1, 0.2]  # 3.11's sum: 1 ulp off
    assert geomean_of_scores(scores) == math.exp(math.fsum(scores) / len(scores))
    assert geomean_of_scores(scores) != math.exp(functools.reduce(operator.add, scores) / 11)
    values = [0.7, -0.2, 1e-3, 0.3, 2.5, -1.1]
    means = {geomean_of_scores(order) for order in itertools.permutations(values)}
    assert means == {math.exp(math.fsum(values) / len(values))}
    assert geomean([]) == geomean_of_scores([]) == 1.0
    assert math.isclose(geomean([2.0, 8.0]), 4.0)
