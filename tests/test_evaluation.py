"""The one evaluation (rollout), the one policy interface (SB3's predict, with or without
masks), policies by name for the benchmark, and the per-episode budget option."""

import math
import re

import gymnasium as gym
import numpy as np
import pytest

import autoprofiler_env  # noqa: F401
from autoprofiler_env.errors import AutoProfilerError
from autoprofiler_env.evaluation import rollout, score
from autoprofiler_env.policy import Policy, takes_masks
from baselines import FixedSections, NoProfile, RandomAgent, RooflineTree
from experiments.benchmark import benchmark
from experiments.policies import load


@pytest.fixture()
def env(study_dataset):
    return gym.make("AutoProfiler-v0", dataset=str(study_dataset), split=None, budget=0.25)


def test_rollout_runs_every_problem_once_and_its_records_replay(env):
    records = rollout(env, RooflineTree(env))
    assert [r.problem for r in records] == env.unwrapped.problems
    assert all(r.budget == 0.25 for r in records)
    assert all(env.unwrapped.validate(r) for r in records)
    # the same episodes by hand
    by_hand = []
    for uri in env.unwrapped.problems:
        obs, info = env.reset(options={"problem": uri})
        tree = RooflineTree(env)
        while True:
            action, _ = tree.predict(obs, action_masks=info["action_mask"])
            obs, _, terminated, _, info = env.step(int(action))
            if terminated:
                break
        by_hand.append(info["record"])
    assert records == by_hand
    assert math.isfinite(score(records)) and score(records) >= 1.0


def test_the_budget_option_is_the_budget_kwarg_for_one_episode(study_dataset, env):
    small = gym.make("AutoProfiler-v0", dataset=str(study_dataset), split=None, budget=0.1)
    full = FixedSections(env, list(env.unwrapped.sections), "all")
    assert rollout(env, full, budget=0.1) == rollout(small, full)
    assert rollout(env, full, budget=0.1) != rollout(env, full)  # and 0.25 is still the default
    uri = env.unwrapped.problems[0]
    env.reset(options={"problem": uri, "budget": 0.5})
    half = env.unwrapped.episode_budget
    env.reset(options={"problem": uri})
    assert half == pytest.approx(2 * env.unwrapped.episode_budget)
    for bad in (float("nan"), 0, -1, "0.5", None):
        with pytest.raises(ValueError, match="budget"):
            env.reset(options={"budget": bad})


def test_a_stochastic_baseline_is_seeded_and_a_deterministic_one_is_not_changed(env):
    agent = RandomAgent(env, seed=3)
    first = rollout(env, agent)
    agent.seed(3)
    assert rollout(env, agent) == first
    assert rollout(env, NoProfile(env)) == rollout(env, NoProfile(env))


def _saved(tmp_path, algorithm, env):
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import DQN, PPO

    cls = {"maskable_ppo": MaskablePPO, "ppo": PPO, "dqn": DQN}[algorithm]
    extra = {"learning_starts": 0} if cls is DQN else {"n_steps": 32, "batch_size": 16}
    model = cls("MultiInputPolicy", env, seed=0, verbose=0, **extra)
    model.learn(64)
    path = tmp_path / f"{algorithm}.zip"
    model.save(path)
    return path


@pytest.mark.parametrize("algorithm", ["maskable_ppo", "ppo", "dqn"])
def test_a_saved_sb3_model_is_a_policy_by_name(env, tmp_path, algorithm):
    """With masks where the algorithm takes them (sb3-contrib's), without where it does not:
    a masked action of PPO or DQN is the environment's to answer (as STOP)."""
    path = _saved(tmp_path, algorithm, env)
    entry = load(f"sb3:{path}", env)
    assert isinstance(entry.policy, Policy) and not entry.stochastic
    assert takes_masks(entry.policy) == (algorithm == "maskable_ppo")
    records = rollout(env, entry.policy)
    assert len(records) == len(env.unwrapped.problems)
    assert rollout(env, entry.policy) == records  # deterministic
    assert rollout(env, load(f"sb3:{algorithm}:{path}", env).policy) == records
    if algorithm == "maskable_ppo":
        for r in records:  # masked: every episode within its budget
            env.reset(options={"problem": r.problem, "budget": 0.25})
            assert r.cost <= env.unwrapped.episode_budget + 1e-9


def test_policy_specs_that_name_nothing_say_what_is_accepted(env, tmp_path):
    with pytest.raises(AutoProfilerError, match="no baseline 'orcale'.*sb3:FILE"):
        load("orcale", env)
    with pytest.raises(AutoProfilerError, match="no such model file"):
        load(f"sb3:{tmp_path / 'missing.zip'}", env)
    (tmp_path / "junk.zip").write_bytes(b"not a zip")
    with pytest.raises(AutoProfilerError, match="not a stable-baselines3 model"):
        load(str(tmp_path / "junk.zip"), env)


def test_a_damaged_model_file_is_said_to_be_one(env, tmp_path):
    """A truncated copy given with its algorithm was an AssertionError of SB3's ("No data
    found in the saved file"); a zip without the model's members, the same."""
    import zipfile

    from agents.rl import DATA

    whole = next(iter(sorted(DATA.glob("maskable_ppo-*.zip")))).read_bytes()
    cut = tmp_path / "cut.zip"
    cut.write_bytes(whole[: len(whole) // 2])
    for spec in (f"sb3:maskable_ppo:{cut}", f"sb3:{cut}"):
        with pytest.raises(AutoProfilerError, match=r"not a whole zip archive .*a truncated "
                                                    r"or damaged copy\?\): copy or train"):
            load(spec, env)
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("data", "{}")
    with pytest.raises(AutoProfilerError, match=r"other.zip: it lacks policy.pth, which a "
                                                r"stable-baselines3 model saved with"):
        load(f"sb3:maskable_ppo:{other}", env)
    with pytest.raises(AutoProfilerError, match="unknown algorithm 'sac'"):
        load(f"sb3:sac:{_saved(tmp_path, 'ppo', env)}", env)
    masked = _saved(tmp_path, "maskable_ppo", env)
    with pytest.raises(AutoProfilerError, match=r"PPO cannot load it \(TypeError: .*\); the "
                                                r"file holds a maskable_ppo model: give "
                                                r"sb3:maskable_ppo:"):
        load(f"sb3:ppo:{masked}", env)


def test_the_benchmark_puts_a_trained_policy_beside_the_baselines(study_dataset, env,
                                                                  tmp_path):
    path = _saved(tmp_path, "maskable_ppo", env)
    summary, episodes = benchmark(str(study_dataset), [0.25, 1.0], seeds=1, split="train",
                                  policies=[f"sb3:{path}"])
    mine = [r for r in summary if r["agent"] == f"sb3:{path}"]
    assert [r["budget"] for r in mine] == [0.25, 1.0]
    assert all(r["regret"] >= -1e-12 and r["episodes"] == mine[0]["episodes"] for r in mine)
    with pytest.raises(ValueError, match="named twice"):
        benchmark(str(study_dataset), [0.25], seeds=1, split="train",
                  policies=[f"sb3:{path}", f"sb3:{path}"])
    again, _ = benchmark(str(study_dataset), [0.25], seeds=1, split="train",
                         policies=["oracle"])  # a baseline is in the table once
    assert [r["agent"] for r in again].count("oracle") == 1
    with pytest.raises(ValueError, match="named twice: oracle"):  # as a repeated sb3: spec is
        benchmark(str(study_dataset), [0.25], seeds=1, split="train",
                  policies=["oracle", "oracle"])


def test_the_benchmark_says_when_a_learned_policy_was_learned_on_another_dataset(
        study_dataset, tmp_path):
    import json
    import warnings

    from agents.tree import DATA
    from autoprofiler_env.dataset import Dataset

    # the shipped tree and policy were learned on a build of the suite, not the study dataset
    with pytest.warns(UserWarning) as caught:
        benchmark(str(study_dataset), [0.25], seeds=1, split="train")
    said = [str(w.message) for w in caught if "learned on another dataset" in str(w.message)]
    learned = json.loads((DATA / "reference-v1.json").read_text())["meta"][
        "learned"]["dataset_sha256"]
    assert sorted(m.split()[0] for m in said) == ["autoprofiler-tree", "maskable-ppo"]
    assert f"(sha256 {learned[:12]}...)" in said[0]
    # a tree file that names the dataset it is benchmarked on: nothing said
    tree = json.loads((DATA / "reference-v1.json").read_text())
    tree["meta"]["learned"]["dataset_sha256"] = Dataset.load(study_dataset).metadata["sha256"]
    (tmp_path / "mine.json").write_text(json.dumps(tree))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        benchmark(str(study_dataset), [0.25], seeds=1, split="train",
                  policies=[f"tree:{tmp_path / 'mine.json'}"])
    said = [str(w.message) for w in caught if "learned on another dataset" in str(w.message)]
    assert [m.split()[0] for m in said] == ["autoprofiler-tree", "maskable-ppo"]
    # a dataset naming theirs among the earlier files of its content (as ``dataset upgrade``
    # writes it): nothing said
    from autoprofiler_env.dataset import DatasetFile

    # (the shipped tree was learned again on the upgraded suite file, the model on the file
    # before it: both of one content)
    trained = json.loads((DATA.parents[1] / "rl" / "data" / "maskable_ppo-reference-v1.json")
                         .read_text())["dataset_sha256"]
    DatasetFile.load(study_dataset).save(tmp_path / "upgraded.json.gz",
                                         same_content_as=["0" * 64, learned, trained])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        benchmark(str(tmp_path / "upgraded.json.gz"), [0.25], seeds=1, split="train")
    assert not [w for w in caught if "learned on another dataset" in str(w.message)]


@pytest.mark.parametrize("gone, left_out, why", [
    # the shipped MaskablePPO model's action mask is one longer than the environment's
    ("SpeedOfLight_HierarchicalTensorRooflineChart", ["maskable-ppo"],
     r"the shipped maskable-ppo \(maskable_ppo-\S+\.zip\): the model was trained on another "
     r"environment.* \(maskable-ppo is left out of this benchmark\)"),
    # the shipped tree (reference-v1's, the study dataset's optimizer) collects
    # ComputeWorkloadAnalysis (so does the roofline rule tree)
    ("ComputeWorkloadAnalysis", ["autoprofiler-tree", "maskable-ppo", "roofline-tree"],
     r"collect 'ComputeWorkloadAnalysis' is not a section .*\(autoprofiler-tree is left out "
     r"of this benchmark\)"),
    # the roofline rule tree reads SpeedOfLight's metrics: not made ("tuple.index(x): x not in
    # tuple" failed every agent's rows)
    ("SpeedOfLight", ["autoprofiler-tree", "maskable-ppo", "roofline-tree"],
     r"maskable-ppo is left out"),
])
def test_a_shipped_agent_that_cannot_act_on_the_dataset_is_left_out_unless_asked_for(
        study_dataset, tmp_path, gone, left_out, why):
    """On a dataset of other sections a shipped agent may not be able to act: the benchmark
    leaves it out, saying why, instead of failing every other agent's rows; asked for by
    name, it is the error."""
    from dataclasses import replace

    from autoprofiler_env.dataset import Dataset
    from autoprofiler_env.dataset.format import DatasetFile

    content = Dataset.load(study_dataset).content
    path = tmp_path / "fewer.json.gz"
    DatasetFile(content.metadata, tuple(s for s in content.sections if s != gone), {
        uri: replace(r, profiles={s: v for s, v in r.profiles.items() if s != gone})
        for uri, r in content.problems.items()}).save(path)
    with pytest.warns(UserWarning, match=why):
        summary, _ = benchmark(str(path), [0.25], seeds=1, split="train")
    agents = {row["agent"] for row in summary}
    assert [a for a in ("autoprofiler-tree", "maskable-ppo", "roofline-tree")
            if a not in agents] == left_out
    assert {"oracle", "set:full", "random"} <= agents
    shipped = next(a for a in left_out if a != "roofline-tree")
    with pytest.raises(AutoProfilerError):
        benchmark(str(path), [0.25], seeds=1, split="train", policies=[shipped])
    if "roofline-tree" in left_out:
        with pytest.raises(AutoProfilerError, match=rf"roofline-tree reads {gone}, .*which "
                                                     r"this environment's dataset lacks"):
            benchmark(str(path), [0.25], seeds=1, split="train", policies=["roofline-tree"])


def test_a_model_of_another_environments_shapes_is_refused_naming_the_difference(env):
    import types

    from gymnasium import spaces

    from experiments.policies import _fitting

    same = types.SimpleNamespace(observation_space=env.observation_space,
                                 action_space=env.action_space)
    assert _fitting(same, env, "--policy sb3:x") is same
    fewer = types.SimpleNamespace(observation_space=spaces.Dict(
        {**env.observation_space.spaces, "action_mask": spaces.MultiBinary(15)}),
        action_space=env.action_space)
    with pytest.raises(AutoProfilerError, match=r"--policy sb3:x: the model was trained on "
                                                r"another environment \(observation "
                                                r"'action_mask': \(15,\) against the "
                                                r"environment's \(16,\)\)"):
        _fitting(fewer, env, "--policy sb3:x")
    with pytest.raises(AutoProfilerError, match=r"Discrete\(15\) actions"):
        _fitting(types.SimpleNamespace(observation_space=env.observation_space,
                                       action_space=spaces.Discrete(15)), env, "sb3:x")
    with pytest.raises(AutoProfilerError, match=r"give the model after sb3:"):
        load("sb3:", env)


def test_the_observation_tells_one_budget_from_another(env):
    """The observation tells a 10% budget from a 25% one (budget_total), so one policy can
    serve several."""
    uri = env.unwrapped.problems[0]
    low, _ = env.reset(options={"problem": uri, "budget": 0.1})
    high, _ = env.reset(options={"problem": uri, "budget": 0.25})
    assert high["budget_total"][0] == pytest.approx(2.5 * low["budget_total"][0])
    assert np.allclose(low["costs"], 2.5 * high["costs"], rtol=1e-5)


def test_both_backends_implement_the_protocol_and_only_the_replay_has_hindsight(env, data_dir):
    from autoprofiler_env.envs.backends import Backend, Hindsight, LiveBackend

    replay = env.unwrapped.backend
    assert isinstance(replay, Backend) and isinstance(replay, Hindsight)
    live = LiveBackend([str(data_dir / "problems" / "matmul_cpu.py")], device="cpu")
    assert isinstance(live, Backend) and not isinstance(live, Hindsight)
    assert live.sections == replay.sections and live.metrics == replay.metrics


def test_a_truncated_episode_is_a_clear_error_in_a_rollout(study_dataset):
    from gymnasium.wrappers import TimeLimit

    env = TimeLimit(gym.make("AutoProfiler-v0", dataset=str(study_dataset), split=None,
                             budget=1.0), max_episode_steps=1)
    with pytest.raises(AutoProfilerError, match="truncated"):
        rollout(env, FixedSections(env, list(env.unwrapped.sections), "all"))


def test_a_reset_problem_that_is_not_a_string_is_refused(env):
    with pytest.raises(AutoProfilerError, match="not among this environment's problems"):
        env.reset(options={"problem": ["a", "list"]})


def test_a_live_episode_of_a_recorded_problem_sees_the_replays_costs_and_budget(study_dataset):
    """Live with the dataset and a budget in seconds: the recorded costs, as in the replay,
    so that a policy learned there meets the same numbers (no GPU: reset profiles nothing)."""
    replay = gym.make("AutoProfiler-v0", dataset=str(study_dataset), split=None, budget=0.25)
    uri = replay.unwrapped.problems[0]
    live = gym.make("AutoProfilerLive-v0", dataset=str(study_dataset), problems=[uri],
                    device="cpu", budget=0.25, budget_unit="seconds")
    seen, _ = replay.reset(options={"problem": uri})
    met, _ = live.reset(options={"problem": uri})
    assert np.array_equal(live.unwrapped.section_costs, replay.unwrapped.section_costs)
    assert live.unwrapped.episode_budget == replay.unwrapped.episode_budget > 0
    assert np.array_equal(met["costs"], seen["costs"])
    assert np.array_equal(met["budget_total"], seen["budget_total"])
    with pytest.raises(AutoProfilerError, match="cannot know a section's cost in seconds"):
        gym.make("AutoProfilerLive-v0", problems=[uri], device="cpu", budget_unit="seconds")


def test_a_policy_that_ignores_the_mask_is_said_and_its_episodes_marked(study_dataset):
    """A masked action is taken as STOP: a policy ignoring the mask scored as a short-profile
    policy, silently (a PPO trained without masks ended 24 of 24 test episodes so). The
    record says it, episodes.csv has it, and the benchmark warns, naming the policy."""
    class AlwaysFirst:  # collects section 0 again and again: masked from the second step
        def predict(self, obs, state=None, episode_start=None, deterministic=True):
            return 0, state

    with pytest.warns(UserWarning) as caught:
        summary, episodes = benchmark(str(study_dataset), [1.0], seeds=1, split="train",
                                      policies=[("always-first", AlwaysFirst())])
    mine = [e for e in episodes if e["agent"] == "always-first"]
    assert mine and all(e["invalid_action"] for e in mine)
    assert not any(e["invalid_action"] for e in episodes if e["agent"] == "oracle")
    said = [str(w.message) for w in caught if "forbade" in str(w.message)]
    assert said == [f"always-first ended {len(mine)} of {len(mine)} episodes on an action the "
                    "mask forbade (a section collected already, or one the budget left cannot "
                    "pay), which the environment takes as STOP: its profiles were cut short "
                    "there. A policy reads info['action_mask'] or env.action_masks() "
                    "(MaskablePPO does; a PPO model trained without them does not)"]


def test_an_action_the_environment_refuses_names_the_policy(study_dataset):
    """With several --policy, 'action must be an integer of Discrete(16) ... got 13.0' left
    one to guess whose it was."""
    class FloatAction:
        def predict(self, obs, state=None, episode_start=None, deterministic=True):
            return np.float32(13.0), state

    with pytest.raises(ValueError, match=r"^float-action: action must be an integer of "
                                         r"Discrete\(16\).*got 13\.0"):
        benchmark(str(study_dataset), [1.0], seeds=1, split="train",
                  policies=[("float-action", FloatAction())])


def _with_entry(source, target, key: str, value):
    """A copy of the model file ``source`` whose data entry ``key`` pickles ``value``."""
    import base64
    import json
    import zipfile

    import cloudpickle

    with zipfile.ZipFile(source) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(members["data"])
    data[key] = {":type:": "x", ":serialized:": base64.b64encode(
        cloudpickle.dumps(value)).decode()}
    members["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(target, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return target


class _Touch:
    """Unpickled, runs a command: what a model file's pickle could do when loaded."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.path}",)


def test_a_model_file_runs_no_code_when_loaded(env, tmp_path):
    """SB3 unpickles a model's classes, spaces and schedules: a model file wrote a file
    when benchmarked. Its entries are built now from what SB3 saves there only; a schedule
    saved as a function (rl-baselines3-zoo's closures) is left unread, anything else
    refused, naming it."""
    from agents.rl import DATA, load_model
    from agents.rl.unpickle import Unread, safe_objects

    shipped = next(iter(sorted(DATA.glob("maskable_ppo-*.zip"))))
    touched = tmp_path / "touched"
    evil = _with_entry(shipped, tmp_path / "evil.zip", "lr_schedule", _Touch(touched))
    assert isinstance(safe_objects(evil)["lr_schedule"], Unread)
    load_model(evil, "maskable_ppo")
    assert not touched.exists()
    records = rollout(env, load(f"sb3:{evil}", env).policy)
    assert records == rollout(env, load(f"sb3:{shipped}", env).policy)
    closure = _with_entry(shipped, tmp_path / "zoo.zip", "clip_range", lambda p: p * 0.2)
    assert load(f"sb3:{closure}", env)  # a zoo-style schedule: left unread, the model loads
    evil = _with_entry(shipped, tmp_path / "evil2.zip", "observation_space", _Touch(touched))
    with pytest.raises(AutoProfilerError, match=r"evil2.zip: its 'observation_space' is "
                                                r"pickled with (posix|os)\.system, which a "
                                                r"model file is not trusted to run"):
        load(f"sb3:{evil}", env)
    assert not touched.exists()


class _Call:
    """Pickles as a call of ``fn`` with ``args`` (REDUCE)."""

    def __init__(self, fn, args=()):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


@pytest.mark.parametrize("make, refused", [
    # a call of an instance the pickle built of an allowed class (a review chained such calls
    # of a torch InterpreterModule into a file write and code run through torch.fx)
    (lambda: _Call(__import__("stable_baselines3").common.utils.ConstantSchedule(1.0),
                   (0.5,)), "a call of stable_baselines3.common.utils.ConstantSchedule instance"),
    (lambda: __import__("torch").nn.Module(), "a call of torch.nn.modules.module.Module"),
    (lambda: _Call(__import__("torch").nn.Tanh), "a call of torch.nn.modules.activation.Tanh"),
    (lambda: _Call(getattr, (1, "real")), "builtins.getattr"),
])
def test_a_model_files_pickle_calls_only_what_it_is_allowed_to(tmp_path, make, refused):
    from agents.rl import DATA
    from agents.rl.unpickle import safe_objects

    shipped = next(iter(sorted(DATA.glob("maskable_ppo-*.zip"))))
    evil = _with_entry(shipped, tmp_path / "evil.zip", "policy_class", make())
    with pytest.raises(AutoProfilerError, match=rf"its 'policy_class' is pickled with "
                                                rf"{re.escape(refused)}"):
        safe_objects(evil)


def test_whether_a_policy_takes_masks_is_asked_once_per_function(monkeypatch):
    """``takes_masks`` ran ``inspect.signature`` on every step (17 us: 47% of a tree's
    learning, a profile of the KernelBench experiment). It asks once per ``predict``
    function; classes, a predict set on the instance and a callable object are each their
    own, and a callable that cannot be held weakly is asked every time, rightly."""
    import inspect

    from autoprofiler_env import policy as policy_module

    asked = []
    real = inspect.signature
    monkeypatch.setattr(policy_module.inspect, "signature",
                        lambda f: asked.append(f) or real(f))

    class Masked:
        def predict(self, observation, state=None, episode_start=None, deterministic=False,
                    action_masks=None):
            return 0, None

    class Plain:
        def predict(self, observation, state=None, episode_start=None, deterministic=False):
            return 0, None

    class Keywords:
        def __call__(self, observation, **kwargs):
            return 0, None

    a, b, plain = Masked(), Masked(), Plain()
    assert [takes_masks(p) for p in (a, b, plain, a, b, plain)] == [True, True, False] * 2
    assert len(asked) == 2  # one per class's function, not one per call
    plain.predict = lambda observation, **kwargs: (0, None)  # its own function now
    keywords = Masked()
    keywords.predict = Keywords()
    assert takes_masks(plain) and takes_masks(keywords) and takes_masks(Plain()) is False
    assert len(asked) == 4
    class Slotted:  # no weak reference to it: asked, not kept
        __slots__ = ()

        def __call__(self, observation, state=None):
            return 0, None

    slotted = Plain()
    slotted.predict = Slotted()
    assert [takes_masks(slotted), takes_masks(slotted)] == [False, False] and len(asked) == 6
