"""Baselines and the benchmark, on the small real dataset of the profiler study's 12 problems."""

import math
import re

import gymnasium as gym
import numpy as np
import pytest

import autoprofiler_env  # noqa: F401
from autoprofiler_env.errors import AutoProfilerError
from autoprofiler_env.evaluation import rollout
from baselines import (
    FixedSections,
    HindsightOracle,
    NoProfile,
    OracleUseError,
    RooflineTree,
    all_agents,
)
from experiments.benchmark import benchmark, episode_row, plot, print_table
from experiments.policies import Entry


def run_episode(env, agent, uri: str) -> dict:
    """One episode of ``agent`` on ``uri``, as a row of the benchmark's episodes."""
    record = rollout(env, agent, [uri])[0]
    return episode_row(Entry(agent.name, agent, agent.stochastic), record, env.unwrapped.budget, 0)


@pytest.fixture()
def env(study_dataset):
    return gym.make("AutoProfiler-v0", dataset=str(study_dataset), split=None, budget=0.25)


def test_every_baseline_runs_an_episode_on_every_problem(env):
    for agent in all_agents(env):
        for uri in env.unwrapped.problems:
            row = run_episode(env, agent, uri)
            assert row["cost_s"] <= env.unwrapped.episode_budget + 1e-9


def test_fixed_configurations_report_when_they_do_not_fit(study_dataset):
    small = gym.make("AutoProfiler-v0", dataset=str(study_dataset), split=None, budget=0.3)
    full = FixedSections(small, [s for s in small.unwrapped.sections], "all")
    row = run_episode(small, full, small.unwrapped.problems[0])
    assert row["fits_budget"] is False and row["sections"]
    # cut where the environment itself ended the episode (nothing affordable left), which
    # the agent never sees: judged from the sections the episode ended with
    two = gym.make("AutoProfiler-v0", dataset=str(study_dataset), split=None, budget=2,
                   budget_unit="sections", budget_is_fraction=False)
    three = FixedSections(two, ["SpeedOfLight", "Occupancy", "LaunchStats"], "three")
    row = run_episode(two, three, two.unwrapped.problems[0])
    assert row["sections"] == "SpeedOfLight+Occupancy" and row["fits_budget"] is False
    assert run_episode(small, NoProfile(small), small.unwrapped.problems[0])["fits_budget"]
    none = run_episode(small, NoProfile(small), small.unwrapped.problems[0])
    assert none["cost_s"] == 0 and none["sections"] == ""


def test_roofline_tree_branches_on_the_bottleneck(study_dataset):
    env = gym.make("AutoProfiler-v0", dataset=str(study_dataset), split=None, budget=1.0)
    tree = RooflineTree(env)
    memory = run_episode(env, tree, "problem://autoprofiler/v1/level1/relu_16384x16384")
    compute = run_episode(env, tree, "problem://autoprofiler/v1/level1/matmul_4096x4096x4096")
    assert memory["sections"].startswith("SpeedOfLight+MemoryWorkloadAnalysis")
    assert compute["sections"].startswith("SpeedOfLight+ComputeWorkloadAnalysis")


def test_the_oracle_is_an_upper_bound(env):
    oracle = HindsightOracle(env)
    for uri in env.unwrapped.problems:
        best = run_episode(env, oracle, uri)["speedup"]
        for agent in all_agents(env):
            assert run_episode(env, agent, uri)["speedup"] <= best + 1e-12, agent.name


@pytest.mark.slow
def test_no_agent_beats_the_oracle_on_the_shipped_dataset():
    """Every problem, every budget of the benchmark, every agent (random with 3 seeds), under
    the benchmark's own measure: the oracle is the upper bound it claims to be."""
    summary, episodes = benchmark(None, [0.1, 0.25, 0.5, 1.0], seeds=3, split=None)
    oracle = {(e["budget"], e["problem"]): e["speedup"] for e in episodes
              if e["agent"] == "oracle"}
    assert len(oracle) == 4 * 96
    beaten = [(e["agent"], e["budget"], e["problem"], e["speedup"])
              for e in episodes if e["speedup"] > oracle[(e["budget"], e["problem"])] + 1e-12]
    assert beaten == []
    assert all(r["regret"] >= -1e-12 for r in summary)


def test_sb3_evaluate_policy_takes_a_baseline(env):
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    monitored = Monitor(env)  # as SB3 asks: episode rewards and lengths as the env gave them
    rewards, lengths = evaluate_policy(RooflineTree(monitored), monitored, n_eval_episodes=4,
                                       return_episode_rewards=True)
    assert len(rewards) == 4 and all(np.isfinite(rewards)) and min(lengths) >= 1


def test_the_oracle_acts_only_for_its_own_environment_saying_what_it_needs(study_dataset):
    """It reads the episode's problem from the environment it was made with: a vector env's
    batch, an environment not reset, another environment's observation are each refused
    at predict (not the dataset's 'no problem None', nor a plan for another problem);
    evaluate_policy on its own environment (a batch of one) is served."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    def env():
        return gym.make("AutoProfiler-v0", dataset=str(study_dataset), split=None, budget=0.25)

    kwargs = {"dataset": str(study_dataset), "split": None, "budget": 0.25}
    vec = make_vec_env("AutoProfiler-v0", n_envs=2, seed=0, env_kwargs=kwargs)
    fresh = HindsightOracle(env())
    for oracle in (fresh, HindsightOracle(vec.envs[0])):
        with pytest.raises(OracleUseError, match=r"cannot act for the 2 sub-environments of a "
                           r"vector env: it acts for the one environment it was made with.*"
                           r"rollout\(env, oracle\)"):
            evaluate_policy(oracle, vec, n_eval_episodes=2)
    own, other = env(), env()
    problems = own.unwrapped.problems
    obs, _ = own.reset(options={"problem": problems[0]})
    with pytest.raises(OracleUseError, match="has not been reset") as raised:
        fresh.predict(obs, episode_start=np.ones(1, dtype=bool))
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, AutoProfilerError)
    other.reset(options={"problem": problems[1]})
    with pytest.raises(OracleUseError, match="another problem than its environment's "
                       f"episode \\({re.escape(problems[1])}\\)"):
        HindsightOracle(other).predict(obs, episode_start=np.ones(1, dtype=bool))
    monitored = Monitor(env())
    oracle = HindsightOracle(monitored)
    rewards, _ = evaluate_policy(oracle, monitored, n_eval_episodes=4,
                                 return_episode_rewards=True)
    assert len(rewards) == 4 and all(np.isfinite(rewards))


def test_a_batched_predict_gets_each_sub_envs_own_mask(study_dataset):
    """Four sub-environments on four problems, at a budget where what is affordable differs
    between them: SB3's evaluate_policy passes no masks, so each comes from its observation."""
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    probe = gym.make("AutoProfiler-v0", dataset=str(study_dataset), split=None, budget=0.1)
    masks = {}
    for uri in probe.unwrapped.problems:
        probe.reset(options={"problem": uri})
        masks.setdefault(tuple(probe.unwrapped.action_masks()), []).append(uri)
    assert len(masks) >= 2  # at this budget, what is affordable differs by problem
    groups = sorted(masks.values(), key=len, reverse=True)
    chosen = [groups[i % len(groups)][i // len(groups)] for i in range(4)
              if i // len(groups) < len(groups[i % len(groups)])][:4]
    assert len(chosen) == 4

    def one(uri):
        return lambda: Monitor(gym.make("AutoProfiler-v0", dataset=str(study_dataset),
                                        problems=[uri], budget=0.1))

    vec = DummyVecEnv([one(u) for u in chosen])
    obs = vec.reset()
    own = np.array([e.unwrapped.action_masks() for e in vec.envs])
    assert len({tuple(m) for m in own}) > 1  # the sub-envs' masks differ
    seen = []

    class Recorder(FixedSections):
        def act(self, observation, mask):
            seen.append(mask.copy())
            return super().act(observation, mask)

    agent = Recorder(vec.envs[0], list(vec.envs[0].unwrapped.sections), "all-in-order")
    agent.predict(obs)
    assert np.array_equal(np.array(seen), own)
    ends = []

    def collect(local, _):  # every episode's last info: was any action invalid for its env?
        if local["done"]:
            ends.append(local["info"]["invalid_action"])

    rewards, _ = evaluate_policy(agent, vec, n_eval_episodes=8, return_episode_rewards=True,
                                 callback=collect)
    assert len(rewards) == 8 and len(ends) >= 8
    assert not any(ends)


def test_benchmark_table_and_plot(study_dataset, tmp_path, capsys):
    summary, episodes = benchmark(str(study_dataset), [0.1, 1.0], seeds=2, split="train")
    names = {r["agent"] for r in summary}
    assert {"no-profile", "set:basic", "set:full", "roofline-tree", "random", "oracle",
            "curated:cudaforge-like", "section:SpeedOfLight"} <= names
    for r in summary:
        assert r["regret"] >= -1e-12 and 0 <= r["fast_1"] <= 1
        if r["agent"] == "oracle":
            assert r["regret"] == pytest.approx(0.0)
    random_rows = [e for e in episodes if e["agent"] == "random" and e["budget"] == 0.1]
    assert {e["seed"] for e in random_rows} == {0, 1}
    full = next(r for r in summary if r["agent"] == "set:full" and r["budget"] == 0.1)
    assert full["fits_budget"] < 1.0
    # fits_budget is the fixed configurations' (docs: README, experiments/benchmark.py): empty
    # for the agents it does not apply to, not 1.00
    for r in summary + episodes:
        fixed = r["agent"].startswith(("set:", "section:", "curated:", "no-profile"))
        assert (r["fits_budget"] is not None) == fixed, r
    assert {r["fits_budget"] for r in summary if r["agent"] == "no-profile"} == {1.0}
    print_table(summary)
    table = capsys.readouterr().out.splitlines()
    assert next(line for line in table if line.startswith("oracle ")).split()[-1] == "0.000"
    assert next(line for line in table if line.startswith("no-profile ")).endswith(" 1.00")
    assert plot(summary, tmp_path / "b.png") and (tmp_path / "b.png").stat().st_size > 10_000
    assert all(math.isfinite(r["geomean_speedup"]) for r in summary)


def test_wandb_logs_offline(study_dataset, no_key):
    from experiments.benchmark import log_wandb

    tmp_path = no_key
    summary, episodes = benchmark(str(study_dataset), [0.25], seeds=1, split="val")
    plot(summary, tmp_path / "b.png")
    log_wandb({"budgets": [0.25]}, summary, episodes, tmp_path / "b.png")
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and any(runs[0].rglob("*.wandb"))


def test_the_oracle_takes_the_smallest_then_cheapest_affordable_set_of_the_best_score():
    """``best_affordable``'s documented rule, on a stub backend with ties: smallest sets first,
    of those the cheapest, the first of equal costs; a set that fits only whole is found, one
    over the budget never taken (a mutation review: only its score was pinned, so the sets it
    chose could change). The rule is docs/report.md's "smallest optimal set"'s: the
    benchmark's oracle and the report name the same sets."""
    from autoprofiler_env.envs.backends.base import EpisodeOutcome
    from autoprofiler_env.oracle import best_affordable

    speedups = {(): 1.0, ("A",): 1.5, ("B",): 1.5, ("A", "C"): 2.0, ("B", "C"): 2.0,
                ("A", "B"): 3.0, ("A", "B", "C"): 4.0, ("C",): 1.2}

    class Stub:
        sections, metrics = ("A", "B", "C"), ()

        def __init__(self, ceiling):
            self.ceiling, self.asked = ceiling, []

        def problems(self, split): return ["p"]
        def features(self, uri): return np.zeros(1)
        def full_cost(self, uri): return 1.0, 1
        def cost(self, uri, section): return 1.0, 1
        def view(self, uri, section): raise NotImplementedError
        def profile(self, uri, sections): raise NotImplementedError
        def close(self): pass
        def best_score(self, uri): return self.ceiling

        def finish(self, uri, sections, profile=None, rng=None):
            self.asked.append(sections)
            return EpisodeOutcome("t", "r", True, speedups.get(sections, 1.0), None)

    sections = ("A", "B", "C")
    # the ties at 1.5 (A 0.4, B 0.3) and 2.0 (A+C 0.6, B+C 0.5): the cheaper kept; A+B (0.7)
    # fits only whole, and is the best
    costs = (0.4, 0.3, 0.2)
    assert best_affordable(Stub(math.log(3.0)), "p", sections, costs, 0.7) == (0, 1)
    assert best_affordable(Stub(math.log(3.0)), "p", sections, costs, 0.6) == (1, 2)
    assert best_affordable(Stub(math.log(3.0)), "p", sections, costs, 0.4) == (1,)
    assert best_affordable(Stub(math.log(4.0)), "p", sections, costs, 1.0) == (0, 1, 2)  # all
    # equal costs: the first of equals; a larger set of the same score is never taken
    assert best_affordable(Stub(math.log(3.0)), "p", sections, (0.4, 0.4, 0.2), 0.6) == (0, 2)
    # it stops at the problem's ceiling once the size that reaches it is searched: the
    # cheapest set of that size, nothing larger asked
    stub = Stub(math.log(1.5))
    assert best_affordable(stub, "p", sections, costs, 1.0) == (1,)
    assert stub.asked == [(), ("A",), ("B",), ("C",)]


def test_the_oracle_and_the_report_name_the_same_set_among_equal_costs():
    """Of equal size, score and cost the oracle keeps the least bit mask of section indices,
    as the data report's ``section_sets`` does (a reviewer: combinations order kept A+D where
    the report named B+C, with every section costing the same, as budget_unit='sections'
    has it)."""
    from autoprofiler_env.envs.backends.base import EpisodeOutcome
    from autoprofiler_env.oracle import best_affordable
    from experiments.studies.report import section_sets

    sections = ("A", "B", "C", "D")
    speedups = {("A", "D"): 2.0, ("B", "C"): 2.0}

    class Stub:
        metrics = ()

        def __init__(self):
            self.sections = sections

        def best_score(self, uri): return math.log(2.0)
        def full_cost(self, uri): return 4.0, 4
        def cost(self, uri, section): return 1.0, 1
        def problems(self, split): return ["p"]
        def features(self, uri): return np.zeros(1)
        def view(self, uri, section): raise NotImplementedError
        def profile(self, uri, sections): raise NotImplementedError
        def close(self): pass

        def finish(self, uri, chosen, profile=None, rng=None):
            return EpisodeOutcome("t", "r", True, speedups.get(tuple(chosen), 1.0), None)

    oracle = best_affordable(Stub(), "p", sections, (1.0,) * 4, 2.0)
    report = section_sets(Stub(), ["p"], [0.5])[0.5]["p"]["smallest_set"]
    assert tuple(sections[i] for i in oracle) == report == ("B", "C")


def test_a_predict_that_returns_no_pair_is_a_policy_error(env):
    """A user's policy that returns the bare action (not SB3's ``(action, state)``) is told
    what to return, not a TypeError from unpacking an int."""
    from autoprofiler_env.errors import PolicyError

    class BareAction:
        def predict(self, observation, state=None, episode_start=None, deterministic=True):
            return 0

    with pytest.raises(PolicyError, match=r"BareAction.predict returned 0 \(int\).*"
                                          r"\(action, None\)"):
        rollout(env, BareAction(), env.unwrapped.problems[:1])

    class ListPair:  # a list of two, as some users' code returns it: still a pair
        def predict(self, observation, state=None, episode_start=None, deterministic=True):
            return [len(env.unwrapped.sections), None]  # STOP

    assert len(rollout(env, ListPair(), env.unwrapped.problems[:1])) == 1


def test_a_baseline_names_only_sections_ncu_has_and_no_name_twice(env, monkeypatch):
    """A misspelt section in a curated list is an error, not a baseline that silently
    collects less than its name says; two baselines of one name are an error too."""
    from autoprofiler_env.errors import PolicyError, UnknownSectionError
    from baselines import agents

    monkeypatch.setattr(agents, "CUDAFORGE_LIKE", ("LaunchStats", "SchedulerStat"))
    with pytest.raises(UnknownSectionError, match="SchedulerStat"):
        all_agents(env)
    monkeypatch.setattr(agents, "CUDAFORGE_LIKE", ("LaunchStats",))
    monkeypatch.setattr(agents.RandomAgent, "name", "no-profile")
    with pytest.raises(PolicyError, match="baselines named twice: no-profile"):
        all_agents(env)
