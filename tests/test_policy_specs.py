"""Policy specs beyond the baselines: a policy of your own (py:MODULE:ATTR), policy objects
given to the benchmark, stochastic policies run once per seed (the benchmark and the
experiment), the warning when a policy was learned on another environment, recurrent
sb3-contrib models, and a model of a wrapped observation."""

import json
import os
import re
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import pytest

import autoprofiler_env  # noqa: F401
from autoprofiler_env.errors import AutoProfilerError
from autoprofiler_env.evaluation import rollout
from experiments.benchmark import benchmark
from experiments.policies import check, load

ROOT = Path(__file__).parents[1]

COIN = '''
import numpy as np


class Coin:
    """Random among the valid actions, seeded with seed(n)."""

    def __init__(self, env):
        self.rng = np.random.default_rng(0)

    def seed(self, seed):
        self.rng = np.random.default_rng(seed)

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        return np.array(int(self.rng.choice(np.flatnonzero(observation["action_mask"])))), state


class Unseeded(Coin):
    """Says it is stochastic, and has no seed method: its own generator runs on."""

    stochastic = True
    seed = None


class Steady(Coin):
    """Has seed(), and says it is deterministic."""

    stochastic = False


def stop_at_once(env):
    """A function called with the environment, returning a policy."""
    return Steady(env)


def no_policy(env):
    return 42


nested = type("Nested", (), {"Policy": Coin})
'''


@pytest.fixture()
def here(tmp_path, monkeypatch):
    """``tmp_path`` as the current directory, not on the import path, as it is for the
    ``autoprofiler`` console script (whose sys.path[0] is its bin folder); the modules
    written there are forgotten afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path
                                      if p not in ("", ".", str(tmp_path))])
    yield tmp_path
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            sys.modules.pop(name)


def _doc_block(path: Path, marker: str) -> str:
    blocks = re.findall(r"^```python\n(.*?)^```", path.read_text(), re.S | re.M)
    return next(b for b in blocks if marker in b)


def test_a_policy_of_your_own_is_py_module_attr_from_the_current_directory(here):
    """docs/benchmark.md's example, saved as my_policies.py in the current directory, put
    beside the baselines as the docs say; the module's folder is not on the import path, as
    it is not for the console script."""
    (here / "my_policies_doc.py").write_text(_doc_block(ROOT / "docs" / "benchmark.md",
                                                        "class CheapestFirst"))
    summary, episodes = benchmark(None, [0.25, 1.0], seeds=2,
                                  policies=["py:my_policies_doc:CheapestFirst"])
    mine = [r for r in summary if r["agent"] == "py:my_policies_doc:CheapestFirst"]
    assert [r["budget"] for r in mine] == [0.25, 1.0]
    assert all(r["episodes"] == 24 for r in mine)  # deterministic: once, not per seed
    rows = [e for e in episodes if e["agent"] == "py:my_policies_doc:CheapestFirst"]
    assert all(len(e["sections"].split("+")) == 1 for e in rows)  # one section, then STOP


def test_a_py_spec_that_names_nothing_says_what(here):
    env = gym.make("AutoProfiler-v0", split="test")
    (here / "mine_errors.py").write_text(COIN)
    cases = [
        ("py:nowhere_module:X", r"no module 'nowhere_module' is importable from the current "
                                r"directory \(.*\) or PYTHONPATH"),
        ("py:mine_errors:Nope", r"mine_errors \(.*mine_errors.py\) has no attribute 'Nope'; "
                                r"its classes and functions: Coin, Steady, Unseeded, "
                                r"nested, no_policy, stop_at_once"),
        ("py:mine_errors:no_policy", r"no_policy\(env\) returned int 42, which has no predict"),
        ("py:mine_errors", r"give py:MODULE:ATTR"),
    ]
    from experiments.policies import PolicySpecError

    for spec, message in cases:
        with pytest.raises(PolicySpecError, match=message):
            load(spec, env)
    (here / "broken_dependency.py").write_text("import not_installed_anywhere\n")
    with pytest.raises(PolicySpecError, match=r"importing broken_dependency failed: No module "
                                              r"named 'not_installed_anywhere'"):
        load("py:broken_dependency:X", env)
    assert load("py:mine_errors:nested.Policy", env).stochastic  # a dotted attribute


def test_a_typo_in_a_py_specs_module_is_answered_with_the_name_meant(here, monkeypatch):
    """A module of the current directory, of the PYTHONPATH folders on the import path or
    of the package (at any depth) whose name is close; none for a name close to nothing,
    nor from a folder of PYTHONPATH that is not on the import path; no code of the user's
    is run to find it (a package whose import fails is not imported again)."""
    from autoprofiler_env.pyspec import imported

    (here / "my_optimizer.py").write_text("X = 1\n")
    (here / "pkg" / "sub").mkdir(parents=True)
    for init in ("pkg/__init__.py", "pkg/sub/__init__.py"):
        (here / init).write_text("")
    (here / "pkg" / "policies.py").write_text("X = 1\n")
    (here / "pkg" / "sub" / "policies.py").write_text("X = 1\n")
    (here / "bad").mkdir()
    (here / "bad" / "__init__.py").write_text(
        "open(__file__ + '.runs', 'a').write('x')\nfrom .policie import X\n")
    (here / "bad" / "policies.py").write_text("X = 1\n")
    elsewhere, unlisted = here / "elsewhere", here / "unlisted"
    for folder, name in ((elsewhere, "cheapest_first"), (unlisted, "walker_policy")):
        folder.mkdir()
        (folder / f"{name}.py").write_text("X = 1\n")
    # as given (relative, a trailing slash); Python's sys.path holds it absolute
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(("elsewhere/", str(unlisted))))
    monkeypatch.syspath_prepend(str(elsewhere))  # unlisted: in PYTHONPATH, not on sys.path
    for spec, answer in (("py:my_optimzer:X", "did you mean py:my_optimizer:X?"),
                         ("py:pkg.policie:X", "did you mean py:pkg.policies:X?"),
                         ("py:pkg.sbu.policies:X", "did you mean py:pkg.sub.policies:X?"),
                         ("py:cheapest_frst:X", "did you mean py:cheapest_first:X?"),
                         ("py:walker_polcy:X", "run from the folder that holds its file"),
                         ("py:zzz:X", "run from the folder that holds its file (zzz.py)"),
                         ("py:nopkg.policies:X", "did you mean py:pkg.policies:X?"),
                         ("py:qqq.policies:X", "run from the folder that holds its file"),
                         ("py:bad.policie:X", "run from the folder that holds its file")):
        with pytest.raises(ValueError) as raised:
            imported(spec, ValueError, "--policy", "a class")
        assert answer in str(raised.value), raised.value
        assert "did you mean" not in str(raised.value) or answer.startswith("did you mean")
    assert (here / "bad" / "__init__.py.runs").read_text() == "x"  # imported once
    # a folder named as a package this project installs (agents, baselines, experiments) is
    # hidden by it: said so (a walkthrough: told to run from the folder it ran from)
    (here / "agents").mkdir()
    (here / "agents" / "cheap.py").write_text("X = 1\n")
    with pytest.raises(ValueError, match=r"the package 'agents' is the one installed at .*"
                       r"hides your folder agents/ here: rename your folder \(e.g. my_agents/\)"
                       r" and give py:my_agents.cheap:ATTR"):
        imported("py:agents.cheap:X", ValueError, "--policy", "a class")


NOT_TAKING_THE_ENV = '''
class NoEnv:
    def __init__(self):
        pass


def two(env, extra):
    pass


class Raises:
    def __init__(self, env):
        raise TypeError("a bug inside a correct constructor")
'''


def test_a_py_class_or_function_that_does_not_take_the_env_says_what_it_must_be(here):
    env = gym.make("AutoProfiler-v0", split="test")
    (here / "mine_signatures.py").write_text(NOT_TAKING_THE_ENV)
    from experiments.policies import PolicySpecError

    for spec, shown in [("py:mine_signatures:NoEnv", r"NoEnv\(\)"),
                        ("py:mine_signatures:two", r"two\(env, extra\)")]:
        with pytest.raises(PolicySpecError, match=rf"^--policy {spec}: {shown} cannot be "
                                                  r"called with the environment \(.*\): give a "
                                                  r"class whose __init__ takes it"):
            load(spec, env)
    # the signature fits: a TypeError of the constructor's own body is its own, not hidden
    with pytest.raises(TypeError, match="a bug inside a correct constructor") as info:
        load("py:mine_signatures:Raises", env)
    assert not isinstance(info.value, AutoProfilerError)


def test_a_tree_spec_without_its_file_says_to_give_one():
    from experiments.policies import PolicySpecError

    env = gym.make("AutoProfiler-v0", split="test")
    message = r"^--policy tree:: give the tree's file after tree: \(tree:FILE"
    with pytest.raises(PolicySpecError, match=message):
        load("tree:", env)  # it read the current directory: "cannot read ... Is a directory"
    with pytest.raises(PolicySpecError, match=message):
        check("tree:")


def test_stochastic_policies_run_once_per_seed_as_the_random_baseline_does(here):
    (here / "mine_seeds.py").write_text(COIN)
    summary, episodes = benchmark(None, [0.25], seeds=3, policies=[
        "py:mine_seeds:Coin", "py:mine_seeds:Unseeded", "py:mine_seeds:Steady",
        "py:mine_seeds:stop_at_once"])
    runs = {r["agent"]: r["episodes"] for r in summary}
    assert runs["random"] == runs["py:mine_seeds:Coin"] == runs["py:mine_seeds:Unseeded"] == 72
    assert runs["py:mine_seeds:Steady"] == runs["py:mine_seeds:stop_at_once"] == 24

    def sections(agent):
        return [(e["seed"], e["sections"]) for e in episodes if e["agent"] == agent]

    # seeded with the seed, as random is: Coin draws as RandomAgent does
    assert sections("py:mine_seeds:Coin") == sections("random")


def test_the_benchmark_takes_policy_objects_classes_functions_and_named_pairs():
    from baselines import RandomAgent, RooflineTree

    env = gym.make("AutoProfiler-v0", split="test")
    summary, _ = benchmark(None, [0.25], seeds=2, policies=[
        ("my-roofline", RooflineTree(env)),  # an object (made on another env of the split)
        ("my-random", RandomAgent),  # a class, called with the benchmark's env
        ("by-function", lambda env: RooflineTree(env))])
    runs = {r["agent"]: r for r in summary}
    assert runs["my-random"]["episodes"] == 48 and runs["my-roofline"]["episodes"] == 24
    for name in ("my-roofline", "by-function"):
        assert runs[name]["geomean_speedup"] == runs["roofline-tree"]["geomean_speedup"]
    assert runs["my-random"]["geomean_speedup"] == runs["random"]["geomean_speedup"]
    with pytest.raises(ValueError, match="named twice: roofline-tree"):
        benchmark(None, [0.25], seeds=1, policies=[RooflineTree])  # named by its name
    with pytest.raises(AutoProfilerError, match=r"dict .*which has no predict"):
        benchmark(None, [0.25], seeds=1, policies=[("x", {"predict": 1})])


def _model_with_record(tmp_path: Path, env, **kwargs) -> Path:
    """An (untrained) MaskablePPO model saved with a record beside it, as the shipped ones
    are, naming ``kwargs`` as its training env's make kwargs."""
    from sb3_contrib import MaskablePPO

    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "model.zip"
    MaskablePPO("MultiInputPolicy", env, seed=0, n_steps=16, batch_size=16).save(path)
    sha256 = env.unwrapped.backend.dataset.metadata["sha256"]
    path.with_suffix(".json").write_text(json.dumps({
        "algorithm": "maskable_ppo", "dataset_sha256": sha256, "optimizer": "reference",
        "env_kwargs": {"backend": "replay", "split": "train", "budget": 0.25,
                       "budget_unit": "seconds", "budget_range": [0.05, 1.0]} | kwargs}))
    return path


def test_the_benchmark_warns_when_a_policy_was_learned_with_other_env_kwargs(tmp_path):
    env = gym.make("AutoProfiler-v0", split="test")
    same = _model_with_record(tmp_path / "same", env)
    other = _model_with_record(tmp_path / "other", env, budget_unit="sections",
                               cost_penalty=0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        benchmark(None, [0.25], seeds=1, policies=[f"sb3:{same}", f"sb3:{other}"])
    said = [str(w.message) for w in caught if "was learned" in str(w.message)]
    assert len(said) == 1, said  # the shipped ones and `same` were learned on this env
    assert said[0].startswith(f"sb3:{other} was learned on an environment made with other "
                              "kwargs than this one (budget_unit='sections' there, "
                              "'seconds' here: the observation's costs and budget_total were "
                              "in other units; cost_penalty=0.1 there, 0.0 here")
    # a tree file names what its learner was given
    from agents.tree import DATA

    tree = json.loads((DATA / "reference.json").read_text())
    tree["meta"]["learned"] |= {"optimizer": "reference-v1", "cost_penalty": 0.0}
    (tmp_path / "tree.json").write_text(json.dumps(tree))
    from experiments.policies import learned_elsewhere

    entry = load(f"tree:{tmp_path / 'tree.json'}", env)
    assert learned_elsewhere(entry, env) == [
        "tree:tree was learned on an environment made with other kwargs than this one "
        "(optimizer='reference-v1' there, 'reference' here: its reward was another "
        "optimizer's outcomes); its rows measure how it transfers (learn it with this "
        "environment's kwargs, or evaluate it on an environment made with its own)"]


def test_the_benchmark_warns_when_a_policy_was_trained_on_the_problems_it_is_scored_on(
        tmp_path):
    """A model trained with ``split: null`` (every problem) or a problems list holding test
    problems was benchmarked on the test split without a word: its rows there scored the
    problems it learned from."""
    from experiments.policies import learned_elsewhere

    env = gym.make("AutoProfiler-v0", split="test")
    held = _model_with_record(tmp_path / "held", env)  # split: train
    every = _model_with_record(tmp_path / "every", env, split=None)
    some = _model_with_record(tmp_path / "some", env, problems=env.unwrapped.problems[:3])
    assert learned_elsewhere(load(f"sb3:{held}", env), env) == []
    [said] = learned_elsewhere(load(f"sb3:{every}", env), env)
    assert said == (f"sb3:{every} was trained on 24 of the 24 problems evaluated here "
                    "(split=None: every problem): its rows on them say how it fits the "
                    "problems it learned from, not how it does on new ones (evaluate it on a "
                    "split it was not trained on)")
    [said] = learned_elsewhere(load(f"sb3:{some}", env), env)
    assert "trained on 3 of the 24 problems evaluated here (its problems list)" in said
    # on another dataset the URIs name other problems: said as a transfer, not in-sample
    kernelbench = gym.make("AutoProfiler-v0", dataset="kernelbench", split="test",
                           tolerance="kernelbench")
    assert all("was trained on" not in m for m in learned_elsewhere(
        load(f"sb3:{every}", kernelbench), kernelbench))
    # the shipped learners' own split: a tree is learned on train, the model trained there
    train = gym.make("AutoProfiler-v0", split="train")
    for name in ("autoprofiler-tree", "maskable-ppo"):
        [said] = learned_elsewhere(load(name, train), train)
        n = len(train.unwrapped.problems)
        assert said.startswith(f"{name} was trained on {n} of the {n} problems evaluated "
                               "here (split='train')")
        assert learned_elsewhere(load(name, env), env) == []


def test_the_shipped_tree_is_said_learned_under_the_default_tolerance():
    """The shipped trees' files predate the tolerance in learn-tree's settings: they were
    learned under the default, and a benchmark under another said nothing of them (it did
    of the shipped MaskablePPO, whose run names every make kwarg)."""
    from experiments.policies import learned_elsewhere

    env = gym.make("AutoProfiler-v0", split="test", tolerance="kernelbench")
    [said] = learned_elsewhere(load("autoprofiler-tree", env), env)
    assert said.startswith("autoprofiler-tree was learned on an environment made with other "
                           "kwargs than this one (tolerance=None there, 'kernelbench' here")
    test = gym.make("AutoProfiler-v0", split="test")
    assert learned_elsewhere(load("autoprofiler-tree", test), test) == []


def test_a_recurrent_ppo_model_is_benchmarked_by_its_file(tmp_path):
    from sb3_contrib import TRPO, RecurrentPPO
    from stable_baselines3 import PPO

    env = gym.make("AutoProfiler-v0", split="test")
    model = RecurrentPPO("MultiInputLstmPolicy", env, seed=0, n_steps=16, batch_size=16,
                         policy_kwargs={"lstm_hidden_size": 8, "net_arch": [8]})
    model.learn(16)
    model.save(tmp_path / "recurrent.zip")
    summary, _ = benchmark(None, [0.25], seeds=1,
                           policies=[f"sb3:{tmp_path / 'recurrent.zip'}"])
    mine = [r for r in summary if r["agent"] == f"sb3:{tmp_path / 'recurrent.zip'}"]
    assert len(mine) == 1 and mine[0]["episodes"] == 24
    assert type(load(f"sb3:{tmp_path / 'recurrent.zip'}", env).policy) is RecurrentPPO
    # by rl-baselines3-zoo's name too (its --algo ppo_lstm)
    assert type(load(f"sb3:ppo_lstm:{tmp_path / 'recurrent.zip'}", env).policy) is RecurrentPPO
    # TRPO saves PPO's policy class: read from the file it is PPO, named it is TRPO, and
    # the two predict the same
    TRPO("MultiInputPolicy", env, seed=0, n_steps=16, batch_size=16).save(tmp_path / "t.zip")
    as_ppo, as_trpo = (load(s, env).policy for s in (f"sb3:{tmp_path / 't.zip'}",
                                                      f"sb3:trpo:{tmp_path / 't.zip'}"))
    assert type(as_ppo) is PPO and type(as_trpo) is TRPO
    assert rollout(env, as_ppo) == rollout(env, as_trpo)


def test_a_model_of_a_wrapped_observation_is_told_to_wrap_itself(tmp_path):
    from gymnasium.wrappers import FlattenObservation
    from stable_baselines3 import PPO

    from experiments.policies import PolicySpecError

    env = gym.make("AutoProfiler-v0", split="test")
    PPO("MlpPolicy", FlattenObservation(env), seed=0, n_steps=16,
        batch_size=16).save(tmp_path / "flat.zip")
    with pytest.raises(PolicySpecError, match=r"the model was trained on a wrapped observation "
                                              r"\(Box\(242,\), not the environment's "
                                              r"Dict of action_mask, .*\): FlattenObservation "
                                              r"or a similar wrapper.*py:MODULE:ATTR"):
        load(f"sb3:{tmp_path / 'flat.zip'}", env)
    # what it says to do: docs/benchmark.md's wrapper
    namespace: dict = {}
    exec(_doc_block(ROOT / "docs" / "benchmark.md", "class Flattened"), namespace)
    flattened = namespace["Flattened"](env, tmp_path / "flat.zip")
    assert len(rollout(env, flattened)) == 24


# -- the experiment -------------------------------------------------------------------------

def _experiment(tmp_path, baselines, extra=""):
    from experiments.experiment import load_config

    path = tmp_path / "exp.yaml"
    path.write_text(f"name: mine\nbudgets: [0.25]\nsplits: [test]\nseeds: [0, 1]\n"
                    f"agents: {{}}\nbaselines: {json.dumps(baselines)}\nreps: 50\n"
                    f"poi_reps: 10\n{extra}")
    return load_config(path)


def test_an_experiment_runs_any_spec_as_a_fixed_policy_and_a_stochastic_one_per_seed(here):
    from experiments.experiment import run_experiment

    env = gym.make("AutoProfiler-v0", split="test")
    model = _model_with_record(here / "m", env, budget_unit="passes")
    (here / "mine_experiment.py").write_text(COIN)
    config = _experiment(here, ["no-profile", "random", f"sb3:{model}",
                                "py:mine_experiment:Coin", "py:mine_experiment:Steady"])
    with pytest.warns(UserWarning, match=rf"sb3:{re.escape(str(model))} was learned on an "
                                         r"environment made with other kwargs .*"
                                         r"budget_unit='passes' there"):
        result = run_experiment(config, here / "out", progress=False)
    runs = {r["agent"]: r["runs"] for r in result["rows"]}
    assert runs == {"no-profile": 1, "random": 2, f"sb3:{model}": 1,
                    "py:mine_experiment:Coin": 2, "py:mine_experiment:Steady": 1,
                    "fixed (chosen on train)": 1, "fixed (best in hindsight)": 1,
                    "oracle": 1}
    # each seed's run seeded with it: random's seed 1 is RandomAgent seeded with 1
    from baselines import RandomAgent
    from experiments.experiment import _run_file

    agent = RandomAgent(env)
    agent.seed(1)
    expected = {r.problem: list(r.sections) for r in rollout(env, agent, budget=0.25)}
    for name in ("random", "py:mine_experiment:Coin"):
        run = json.loads(_run_file(here / "out", name, 1).read_text())
        assert {p: o["sections"] for p, o in run["outcomes"]["test/0.25"].items()} == expected


@pytest.mark.parametrize("baselines, extra, message", [
    (["sb3:missing.zip"], "", r"baselines: --policy sb3:missing.zip: missing.zip: no such "
                              r"model file or run directory"),
    (["tree:missing.json"], "", r"no such tree file"),
    (["py:nowhere_module:X"], "", r"no module 'nowhere_module' is importable"),
    (["py:mine_config:Nope"], "", r"has no attribute 'Nope'"),
    (["no-profile", "no-profile"], "", r"'no-profile' is given twice"),
    ([3], "", r"'baselines' must be a list of policy specs"),
    (["py:mine_config:Coin"], "live: {device: cuda}\n",
     r"baselines: 'py:mine_config:Coin': the live evaluation .* by name only"),
])
def test_an_experiments_fixed_policies_are_checked_when_the_config_is_read(
        here, baselines, extra, message):
    from experiments.experiment import ConfigError

    (here / "mine_config.py").write_text(COIN)
    with pytest.raises(ConfigError, match=message):
        _experiment(here, baselines, extra)


def test_an_experiments_fixed_policy_that_does_not_fit_is_an_error_before_any_run(here):
    from experiments.experiment import ConfigError, run_experiment

    (here / "mine_late.py").write_text(COIN)
    config = _experiment(here, ["section:NoSuchSection", "py:mine_late:no_policy"])
    with pytest.raises(ConfigError, match=r"baselines: --policy 'section:NoSuchSection': no "
                                          r"baseline"):
        run_experiment(config, here / "out", progress=False)
    assert not (here / "out").exists()
    config = _experiment(here, ["py:mine_late:no_policy"])
    with pytest.raises(ConfigError, match=r"no_policy\(env\) returned int 42"):
        run_experiment(config, here / "out", progress=False)


def test_two_tree_files_of_one_stem_are_named_by_their_specs(tmp_path):
    """Every learn-tree run writes tree.json: two of them were both tree:tree, and the
    benchmark refused them as one policy named twice."""
    from agents.tree import DATA

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "tree.json").write_text((DATA / "reference.json").read_text())
    a, b = f"tree:{tmp_path / 'a' / 'tree.json'}", f"tree:{tmp_path / 'b' / 'tree.json'}"
    summary, _ = benchmark(None, [0.25], seeds=1, policies=[a, b])
    names = {r["agent"] for r in summary}
    assert {a, b} <= names and "tree:tree" not in names
    summary, _ = benchmark(None, [0.25], seeds=1, policies=[a])  # alone: its short name
    assert "tree:tree" in {r["agent"] for r in summary}
    with pytest.raises(ValueError, match="named twice"):  # one spec twice is still an error
        benchmark(None, [0.25], seeds=1, policies=[a, a])


def test_the_files_a_spec_reads(here):
    from agents.rl import BEST_MODEL
    from agents.tree import DATA
    from experiments.policies import checksums, files_read

    env = gym.make("AutoProfiler-v0", split="test")
    (here / "mine_files.py").write_text(COIN)
    (here / "run").mkdir()
    assert files_read("py:mine_files:Coin", env) == [Path(here / "mine_files.py")]
    assert files_read("sb3:run", env) == [Path("run") / BEST_MODEL]
    assert files_read("sb3:m.zip", env) == [Path("m.zip")]
    assert files_read("tree:t/tree.json", env) == [Path("t/tree.json")]
    assert files_read("autoprofiler-tree", env) == [DATA / "reference.json"]
    assert files_read("maskable-ppo", env)[0].suffix == ".zip"
    assert files_read("set:full", env) == files_read("random", env) == []
    import hashlib

    assert checksums("py:mine_files:Coin", env) == {
        str(here / "mine_files.py"): hashlib.sha256(COIN.encode()).hexdigest()}
    assert checksums("sb3:run", env) == {str(Path("run") / BEST_MODEL): "missing"}


def test_a_resumed_experiment_refuses_runs_of_a_fixed_policy_whose_file_changed(here):
    """A tree:FILE baseline overwritten with another tree kept its old score on resuming;
    the same for an sb3: model and a py: module. Now the run file holds the sha256 of what
    the spec reads, and a changed file is a StaleRunError naming it and what to remove."""
    from agents.tree import DATA
    from experiments.experiment import StaleRunError, run_experiment

    env = gym.make("AutoProfiler-v0", split="test")
    (here / "t").mkdir()
    tree = here / "t" / "tree.json"
    tree.write_text((DATA / "reference.json").read_text())
    model = _model_with_record(here / "m", env)
    module = here / "mine_stale.py"
    module.write_text(COIN)
    specs = [f"tree:{tree}", f"sb3:{model}", "py:mine_stale:Steady"]
    config = _experiment(here, ["no-profile", *specs])
    out = here / "out"
    first = run_experiment(config, out, progress=False)
    assert run_experiment(config, out, progress=False)["rows"] == first["rows"]  # resumed
    from sb3_contrib import MaskablePPO

    MaskablePPO("MultiInputPolicy", env, seed=1, n_steps=16, batch_size=16).save(
        here / "other.zip")
    changes = [(tree, (DATA / "reference-v1.json").read_bytes()),
               (model, (here / "other.zip").read_bytes()),  # another model
               (module, (COIN + "\n# edited\n").encode())]
    for spec, (path, content) in zip(specs, changes):
        kept = path.read_bytes()
        path.write_bytes(content)
        folder = out / "runs" / "".join(c if c.isalnum() or c in "-_." else "-" for c in spec)
        with pytest.raises(StaleRunError, match=rf"{re.escape(str(path))} changed since "
                                                rf".*was made from it \(sha256 \w+ then, \w+ "
                                                rf"now\): {re.escape(spec)}'s runs there are "
                                                rf"the old file's.*remove "
                                                rf"{re.escape(str(folder))}"):
            run_experiment(config, out, progress=False)
        path.write_bytes(kept)  # put back: resumes again
        assert run_experiment(config, out, progress=False)["rows"] == first["rows"]
    # or remove what it names, and that policy's runs are made again from the file as it is
    tree.write_text((DATA / "reference-v1.json").read_text())
    import shutil

    shutil.rmtree(out / "runs" / "".join(c if c.isalnum() or c in "-_." else "-"
                                         for c in specs[0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reference-v1 was learned for another optimizer
        again = run_experiment(config, out, progress=False)
    assert [r for r in again["rows"] if r["agent"] != specs[0]] == \
        [r for r in first["rows"] if r["agent"] != specs[0]]
    # two changed at once: both said in one error (one at a time made a rerun per policy)
    kept = {path: path.read_bytes() for path in (tree, module)}
    tree.write_text((DATA / "reference.json").read_text())
    module.write_text(COIN + "\n# edited again\n")
    with pytest.raises(StaleRunError) as e:
        run_experiment(config, out, progress=False)
    said = str(e.value)
    assert said.startswith(f"the runs of 2 agents ({specs[0]}, {specs[2]}) were made from "
                           "files changed since: ")
    assert f"{tree} changed since" in said and f"{module} changed since" in said
    for path, content in kept.items():
        path.write_bytes(content)
