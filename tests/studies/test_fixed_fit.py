"""The fixed configurations' stop rule study: its skipping variant and its train-chosen row."""

import gymnasium as gym
import numpy as np

import autoprofiler_env  # noqa: F401
from baselines.agents import FixedSections
from experiments.experiment import best_fixed
from experiments.studies.fixed_fit import SkipUnaffordable, main, train_chosen


def test_the_skipping_variant_goes_on_past_a_section_the_budget_does_not_afford():
    env = gym.make("AutoProfiler-v0", split="test", budget=0.1)
    sections = ["SpeedOfLight", "Occupancy", "LaunchStats"]  # the first fits no problem at 10%
    obs, _ = env.reset(seed=0)
    assert not obs["action_mask"][env.unwrapped.sections.index("SpeedOfLight")]
    shipped, skipping = FixedSections(env, sections, "x"), SkipUnaffordable(env, sections, "x")
    assert skipping.name == "x~skip"
    assert int(shipped.predict(obs)[0]) == env.unwrapped.STOP
    action = int(skipping.predict(obs)[0])
    assert env.unwrapped.sections[action] == "Occupancy" and obs["action_mask"][action]
    obs, *_ = env.step(action)
    assert env.unwrapped.sections[int(skipping.predict(obs)[0])] == "LaunchStats"


def test_the_train_chosen_row_is_the_experiments_choice():
    train, test = (gym.make("AutoProfiler-v0", split=s) for s in ("train", "test"))
    from baselines import all_agents, baseline, is_fixed

    makers = [lambda env, n=a.name: baseline(env, n) for a in all_agents(train)
              if is_fixed(a.name)]  # no-profile among them, as in the experiment
    for budget in (0.02, 0.1, 0.5):
        name, on_train, on_test = train_chosen(train, test, makers, budget)
        assert name == best_fixed(train, budget)
        assert 0 < on_train and np.isfinite(on_test)


def test_the_study_prints_one_row_per_budget(capsys):
    main(["--budgets", "0.1", "1.0"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "20 fixed configurations; train 60, test 24 problems"
    assert [line.split(" | ")[0] for line in lines[3:]] == ["| 0.1", "| 1"]
