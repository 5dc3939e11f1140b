"""The comparison's statistics: the bootstrap intervals (rliable's, and the paired ones that
resample whole seeds and problems), the wins, ties and losses per problem, the sign-flip test
over problems and Holm's adjustment. :mod:`experiments.experiment` reads them into its
leaderboard; each says what it assumes."""

from __future__ import annotations

import math

import numpy as np

from autoprofiler_env.errors import AutoProfilerError, install_hint

BOOTSTRAP_SEED = 0
"""numpy's global generator is seeded with this before every bootstrap: each agent's
interval in each cell (and its P(> fixed) interval, and its performance profile's band) is
drawn afresh from it, so the same scores give the same interval whatever else the config
compares (rliable's stratified bootstrap draws its resamples from ``np.random``, whatever
``random_state`` it is given)."""


def rliable():
    """rliable's library and metrics, or a clear error saying how to install them."""
    try:
        from rliable import library, metrics
    except ImportError as e:
        raise AutoProfilerError(f"autoprofiler experiment needs rliable ({e}): "
                                f"{install_hint('experiment')}") from None
    except Exception as e:  # a library it imports breaks (arch 7 under pandas 3: a TypeError)
        raise AutoProfilerError(
            f"rliable is installed but its import fails ({type(e).__name__}: {e}): probably a "
            "library it imports is at a version it does not support (the experiment extra's bounds "
            f"keep them apart: {install_hint('experiment')})") from e
    return library, metrics


def bootstrap(scores: dict, func, reps: int, task_bootstrap: bool) -> tuple[dict, dict]:
    """rliable's point and interval estimates of each entry of ``scores``, each drawn from
    numpy's global generator seeded with :data:`BOOTSTRAP_SEED` (an entry's interval does
    not depend on the entries beside it)."""
    rly, _ = rliable()
    points, intervals = {}, {}
    for name, score in scores.items():
        np.random.seed(BOOTSTRAP_SEED)
        point, interval = rly.get_interval_estimates({name: score}, func, reps=reps,
                                                     task_bootstrap=task_bootstrap)
        points[name], intervals[name] = point[name], interval[name]
    return points, intervals


def interquartile_mean(scores: np.ndarray) -> float:
    """The interquartile mean of ``scores`` (runs x problems, all of them together):
    rliable's ``metrics.aggregate_iqm``, which is scipy's ``trim_mean(scores, 0.25,
    axis=None)``, computed as that does (the same partition and mean: the same digits for
    finite float64 scores, all the experiment gives; scipy's NaN and float32 handling are not
    copied) without scipy's per-call argument handling, which took most of a bootstrap's
    2,000 calls per agent and cell."""
    a = np.asarray(scores, dtype=float).ravel()
    if a.size == 0:
        return math.nan
    low = int(0.25 * a.size)
    high = a.size - low
    return np.mean(np.partition(a, (low, high - 1))[low:high])


def probability_of_improvement(scores: np.ndarray, other: np.ndarray) -> float:
    """rliable's ``metrics.probability_of_improvement``: per problem ``P(X > Y)`` over every
    (run, other run) pair, ties counting half, then the mean over the problems. rliable asks
    scipy's Mann-Whitney test per problem, whose U statistic is that count (exactly: the
    ranks of a few runs are whole or half numbers); counted directly it is the same number
    for finite float64 scores (all the experiment gives; not rliable's NaN or float32
    results), some 1,000 times faster (a profile of the KernelBench experiment: 86 s of its
    15 minutes)."""
    a, b = scores[:, None, :], other[None, :, :]
    count = np.sum(a > b, axis=(0, 1)) + 0.5 * np.sum(a == b, axis=(0, 1))
    return np.mean(count / (scores.shape[0] * other.shape[0]))


def wins_ties_losses(scores: np.ndarray, fixed: np.ndarray) -> tuple[int, int, int]:
    """(wins, ties, losses) of ``scores`` (runs x problems) against ``fixed`` (its runs x
    the same problems), over every (run, fixed run, problem): with the fixed configuration's
    one run, over the (run, problem) pairs. A tie is the same shipped speedup (the same
    candidate, or candidates equally fast: exact equality, as rliable's probability of
    improvement counts it)."""
    a, b = scores[:, None, :], fixed[None, :, :]
    return int(np.sum(a > b)), int(np.sum(a == b)), int(np.sum(a < b))


def paired_ratio(scores: np.ndarray, other: np.ndarray, reps: int) -> tuple[float, float, float]:
    """The ratio of two geometric-mean speedups on the same problems, ``scores`` (runs x
    problems, log speedups) over ``other`` (its runs x the same problems), with a 95%
    percentile interval of a paired bootstrap: each resample draws the problems (the same
    ones for both: a problem's difficulty cancels) and each side's runs, with replacement,
    from numpy's generator seeded with :data:`BOOTSTRAP_SEED`. Returns (ratio, low, high).

    Paired, what the problems share cancels: where the two ship similar programs it is much
    narrower than an unpaired comparison's, whose intervals carry the spread of the problems'
    difficulty, and it says whether a lead holds on new problems where overlapping
    intervals of the two leave it open. (Resampling the real pairs of two dozen skewed
    problems, a reviewer measured 87-92% coverage for the 95% interval.)"""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    n = scores.shape[1]
    diff = scores.mean(axis=0) - other.mean(axis=0)
    problems = rng.integers(n, size=(reps, n))
    mine = scores[rng.integers(scores.shape[0], size=(reps, scores.shape[0]))].mean(axis=1)
    theirs = other[rng.integers(other.shape[0], size=(reps, other.shape[0]))].mean(axis=1)
    resampled = np.take_along_axis(mine - theirs, problems, axis=1).mean(axis=1)
    low, high = np.percentile(resampled, [2.5, 97.5])
    return math.exp(diff.mean()), math.exp(low), math.exp(high)


def improvement_over_seeds(scores: np.ndarray, other: np.ndarray, reps: int
                           ) -> tuple[float, float, float]:
    """rliable's probability of improvement (:func:`probability_of_improvement`) of ``scores``
    (runs x problems) over ``other`` (its runs x the same problems: on a random problem,
    ``P(X > Y)``, ties counting half),
    with a 95% percentile interval over whole runs: each resample draws each side's runs
    with replacement (a run's every problem together: one trained agent acts on them all),
    from numpy's generator seeded with :data:`BOOTSTRAP_SEED`. Returns (point, low, high).

    So the interval is the seeds' spread, as said; rliable's own bootstrap draws a run per
    problem, which takes runs on different problems for independent trainings (reviewed:
    at 25%, where every seed of the tree was at or below 0.5, its interval reached 0.521)."""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    point = float(probability_of_improvement(scores, other))
    draws = [float(probability_of_improvement(
        scores[rng.integers(scores.shape[0], size=scores.shape[0])],
        other[rng.integers(other.shape[0], size=other.shape[0])])) for _ in range(reps)]
    low, high = np.percentile(draws, [2.5, 97.5])
    return point, float(low), float(high)


EXACT_UP_TO = 20
"""Problems that differ up to which :func:`sign_flip_p` enumerates every sign (2^20 sums)."""
PERMUTATIONS = 100_000
"""Random sign flips drawn by :func:`sign_flip_p` where more problems differ."""


EQUAL = 1e-12
"""Two problems' mean log speedups closer than this are equal: the same speedups on every
run, up to the rounding of their mean."""


def problem_differences(scores: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Per problem, the mean log speedup of ``scores`` (runs x problems) minus that of
    ``other`` (its runs x the same problems): the seeds averaged, so that each problem counts
    once (the problems, not the runs, are what a lead must hold on)."""
    return scores.mean(axis=0) - other.mean(axis=0)


def sign_flip_p(scores: np.ndarray, other: np.ndarray) -> float:
    """The two-sided p-value of a paired permutation test (Fisher's sign flip) over the
    problems: under the hypothesis that the two are alike on a random problem, each
    problem's difference (:func:`problem_differences`) is as likely negated, so the sum of
    the differences is compared with its value under every sign pattern. Two things it is
    not (a reviewer's simulations): a test of the method over seeds (the runs are averaged
    and taken as given: where the seeds' geometric means spread by 5-10% around the fixed
    configuration's, a method no better than it is rejected in 8-21% of cases at nominal 5%;
    the paired interval, :func:`paired_ratio`, resamples whole runs), nor of a
    geometric-mean ratio of 1 where the differences are skewed (a skewed difference of mean
    zero is rejected in 8-13% of cases). Problems where the two ship the same speedup add
    nothing whatever their sign; with at most :data:`EXACT_UP_TO` others every pattern is
    counted (exact), else :data:`PERMUTATIONS` random ones from numpy's generator seeded
    with :data:`BOOTSTRAP_SEED` (``(k + 1) / (n + 1)``). 1.0 where no problem differs."""
    d = problem_differences(scores, other)
    d = d[np.abs(d) > EQUAL]
    if d.size == 0:
        return 1.0
    observed = abs(d.sum()) - EQUAL  # a pattern's sum equal to it, up to rounding
    if d.size <= EXACT_UP_TO:
        sums = np.zeros(1)
        for x in d:
            sums = np.concatenate((sums + x, sums - x))
        return float(np.mean(np.abs(sums) >= observed))
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    hits = 0
    for start in range(0, PERMUTATIONS, 10_000):
        signs = rng.choice((-1.0, 1.0), size=(min(10_000, PERMUTATIONS - start), d.size))
        hits += int(np.sum(np.abs(signs @ d) >= observed))
    return (hits + 1) / (PERMUTATIONS + 1)


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (in their order): the family-wise
    error stays within the level whatever the comparisons' dependence. The i-th smallest is
    multiplied by (k - i + 1), k the family's size, made monotone and capped at 1."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
