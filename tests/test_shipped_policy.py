"""The shipped MaskablePPO policy: it loads, the benchmark shows it, and it reproduces the
validation scores its training run recorded."""

import json

import gymnasium as gym
import pytest

import autoprofiler_env  # noqa: F401
from agents.rl import DATA, shipped_model
from autoprofiler_env.evaluation import rollout, score
from experiments.policies import SHIPPED_RL, load


def test_the_shipped_policy_reproduces_its_recorded_validation_scores():
    path = shipped_model("reference-v1")
    assert path is not None and shipped_model("llm:nobody") is None
    run = json.loads((DATA / "maskable_ppo-reference-v1.json").read_text())
    val = gym.make("AutoProfiler-v0", split="val")
    entry = load(SHIPPED_RL, val)
    assert entry.name == "maskable-ppo"
    for budget, recorded in run["best"]["budgets"].items():
        got = score(rollout(val, entry.policy, budget=float(budget)))
        assert got == pytest.approx(recorded["geomean_speedup"], rel=1e-9)
