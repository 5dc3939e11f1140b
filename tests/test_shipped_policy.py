"""The shipped MaskablePPO policy: it loads, the benchmark shows it, and it reproduces the
validation scores its training run recorded."""

import json

import gymnasium as gym
import pytest

import autoprofiler_env  # noqa: F401
from agents.rl import DATA, shipped_model
from autoprofiler_env.evaluation import rollout, score
from experiments.policies import SHIPPED_RL, load


@pytest.mark.parametrize("optimizer", ["reference", "reference-v1"])
def test_the_shipped_policy_reproduces_its_recorded_validation_scores(optimizer):
    path = shipped_model(optimizer)
    assert path is not None and shipped_model("llm:nobody") is None
    run = json.loads((DATA / f"maskable_ppo-{optimizer}.json").read_text())
    assert run["optimizer"] == optimizer
    val = gym.make("AutoProfiler-v0", split="val", optimizer=optimizer)
    entry = load(SHIPPED_RL, val)
    assert entry.name == "maskable-ppo"
    for budget, recorded in run["best"]["budgets"].items():
        got = score(rollout(val, entry.policy, budget=float(budget)))
        assert got == pytest.approx(recorded["geomean_speedup"], rel=1e-9)
