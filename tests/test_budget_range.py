"""The ``budget_range`` make kwarg: each episode's budget drawn log-uniformly with the env's
seeded generator, unless ``reset`` gives one."""

import json
import math

import gymnasium as gym
import numpy as np
import pytest

import autoprofiler_env  # noqa: F401  (registers the ids)
from autoprofiler_env.envs import REPLAY_ID


def make(dataset, **kwargs):
    return gym.make(REPLAY_ID, dataset=str(dataset), split=None, **kwargs)


def budgets(env, n, seed=0):
    """The budgets of ``n`` episodes (each stopped at once), from a seeded first reset."""
    drawn = []
    for i in range(n):
        env.reset(seed=seed if i == 0 else None)
        _, _, _, _, info = env.step(env.unwrapped.STOP)
        drawn.append(info["record"].budget)
    return drawn


def test_budgets_are_drawn_log_uniformly_in_the_range(study_dataset):
    env = make(study_dataset, budget_range=[0.05, 1.0])
    drawn = np.array(budgets(env, 400))
    assert drawn.min() >= 0.05 and drawn.max() <= 1.0
    assert len(set(drawn.tolist())) == len(drawn)  # drawn, not a fixed grid
    # log-uniform: the log budgets' mean is the middle of the log range (uniform would put
    # it near log(0.525)); its standard error is about 0.043 here
    middle = (math.log(0.05) + math.log(1.0)) / 2
    assert abs(np.log(drawn).mean() - middle) < 0.2
    assert abs(np.log(drawn).mean() - math.log(0.525)) > 0.5
    # each episode's observation says its budget (as the fraction of the full set's cost)
    obs, _ = env.reset()
    base = env.unwrapped
    full_seconds = base.backend.full_cost(base.problem)[0]
    assert obs["budget_total"][0] == pytest.approx(base.episode_budget / full_seconds, rel=1e-5)


def test_same_seed_same_budgets_and_reset_option_wins(study_dataset):
    a = budgets(make(study_dataset, budget_range=[0.1, 0.5]), 20, seed=3)
    b = budgets(make(study_dataset, budget_range=[0.1, 0.5]), 20, seed=3)
    c = budgets(make(study_dataset, budget_range=[0.1, 0.5]), 20, seed=4)
    assert a == b and a != c
    env = make(study_dataset, budget_range=[0.1, 0.5])
    env.reset(seed=0, options={"budget": 0.9})
    assert env.unwrapped.episode_budget == pytest.approx(
        0.9 * env.unwrapped.backend.full_cost(env.unwrapped.problem)[0])


def test_without_a_range_the_budget_kwarg_and_the_stream_are_unchanged(study_dataset):
    fixed = make(study_dataset, budget=0.3)
    assert set(budgets(fixed, 10)) == {0.3}
    # no range, no draw: the first draw of a seed is still the problem (Gymnasium seeds
    # np_random as numpy's default_rng does)
    _, info = fixed.reset(seed=5)
    problems = fixed.unwrapped.problems
    assert info["problem"] == problems[int(np.random.default_rng(5).random() * len(problems))]
    # a range of one point draws that budget
    point = make(study_dataset, budget_range=[0.3, 0.3])
    assert budgets(point, 10) == pytest.approx([0.3] * 10)


def test_spec_json_round_trip_keeps_the_range(study_dataset):
    env = make(study_dataset, budget_range=[0.05, 1.0])
    spec = gym.envs.registration.EnvSpec.from_json(env.spec.to_json())
    assert spec.kwargs["budget_range"] == [0.05, 1.0]
    assert json.loads(env.spec.to_json())["kwargs"]["budget_range"] == [0.05, 1.0]
    again = gym.make(spec)
    assert again.unwrapped.budget_range == [0.05, 1.0]


@pytest.mark.parametrize("bad", [0.25, "0.1,0.5", [0.1], [0.1, 0.2, 0.3], [0.0, 0.5],
                                 [0.5, 0.1], [0.1, float("nan")], [0.1, True],
                                 {"low": 0.1, "high": 0.5}])
def test_a_bad_range_is_one_clear_value_error(study_dataset, bad):
    with pytest.raises(ValueError, match=r"budget_range must be a list \[low, high\]"):
        make(study_dataset, budget_range=bad)


@pytest.mark.parametrize("bad", [[1e-10, 1e300], [5e-324, 1.0]])
def test_a_range_whose_ratio_overflows_is_refused(study_dataset, bad):
    """A fuzzer's find: high / low past a float's range made every draw inf (the episode ran
    on an infinite budget, and its record could not be replayed: the budget option refuses
    inf); a subnormal low did the same."""
    with pytest.raises(ValueError, match=r"budget_range must be .* high / low a finite "
                                         r"number"):
        make(study_dataset, budget_range=bad)
    wide = make(study_dataset, budget_range=[1e-150, 1e150])  # wide, but its draws finite
    for seed in range(20):
        wide.reset(seed=seed)
        assert 1e-150 <= wide.unwrapped.episode_budget / wide.unwrapped._full_cost(
            wide.unwrapped.problem) <= 1e150 * (1 + 1e-9)


def test_an_episode_budget_past_a_floats_range_is_refused_and_the_episode_goes_on(
        study_dataset):
    """A review: a finite fraction times the problem's full-set cost could still be inf
    (budget 1e308, or a range up to it: a vector env's autoreset raised at a random step),
    and the episode ran on an infinite budget; a subnormal one overflowed the costs divided
    by it. make refuses budgets past BUDGET_BOUNDS; a reset's budget option past a float's
    range is refused naming it, and the episode that was running goes on as it was."""
    from autoprofiler_env.envs.profiling_env import BUDGET_BOUNDS

    for kwargs in ({"budget": 1e308}, {"budget": 1e-310}, {"budget_range": [1e300, 1e301]},
                   {"budget_range": [1e-305, 1e-302]}):
        with pytest.raises(ValueError, match=r"between 1e-300 and 1e\+300"):
            make(study_dataset, **kwargs)
    assert BUDGET_BOUNDS == (1e-300, 1e300)
    env = make(study_dataset)
    env.reset(seed=0)
    section = int(np.flatnonzero(env.unwrapped.action_masks()[:-1])[0])
    _, _, _, _, info = env.step(section)
    mask, spent = env.unwrapped.action_masks().copy(), env.unwrapped._spent
    problem, budget = env.unwrapped.problem, env.unwrapped.episode_budget
    for option in (1e308, 5e-324):
        with pytest.raises(ValueError, match=r"the budget .* gives .* an episode budget of .*"
                                             r"not a normal finite number"):
            env.reset(options={"budget": option})
    assert env.unwrapped.problem == problem and env.unwrapped.episode_budget == budget
    assert env.unwrapped._spent == spent and (env.unwrapped.action_masks() == mask).all()
    assert list(info["sections"]) == [env.unwrapped.sections[section]]
    _, _, terminated, _, info = env.step(env.unwrapped.STOP)  # the earlier episode ends
    assert terminated and info["record"].budget == 0.25 and info["problem"] == problem
    assert list(info["record"].sections) == [env.unwrapped.sections[section]]


def test_each_problems_costs_are_read_once_whatever_the_budgets_drawn(study_dataset):
    """Every reset under a range draws a new budget: the problem's part of an episode's
    start (its sections' costs, features, full set's cost) is kept per problem, and a drawn
    budget's start is the one a fresh environment made with that budget gives."""
    env = make(study_dataset, budget_range=[0.05, 1.0])
    backend, read = env.unwrapped.backend, []
    cost, features = backend.cost, backend.features
    backend.cost = lambda uri, section: read.append(("cost", uri)) or cost(uri, section)
    backend.features = lambda uri: read.append(("features", uri)) or features(uri)
    n = len(env.unwrapped.sections)
    for i in range(200):
        obs, info = env.reset(seed=0 if i == 0 else None)
    seen = {uri for _, uri in read}
    assert sorted(read) == sorted([("cost", u) for u in seen for _ in range(n)]
                                  + [("features", u) for u in seen])
    budget = env.unwrapped._episode_budget_given
    fresh = make(study_dataset, budget=budget)
    again, _ = fresh.reset(options={"problem": env.unwrapped._uri})
    assert all(np.array_equal(obs[k], again[k]) for k in obs)
