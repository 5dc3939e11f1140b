"""The experiment: learned agents (a tree, MaskablePPO) beside the baselines, per seed, with
rliable's statistics; resumable; its config checked."""

import csv
import dataclasses
import io
import json
import math
import re
from pathlib import Path

import pytest

from autoprofiler_env.errors import AutoProfilerError
from experiments.experiment import (HINDSIGHT, TRAIN_CHOSEN, ConfigError, load_config,
                                    markdown, run_experiment, write)

ROOT = Path(__file__).parents[1]


def _csv(path) -> list[dict]:
    """A CSV file's rows (read whole: no file left open)."""
    return list(csv.DictReader(io.StringIO(path.read_text())))


def _config(tmp_path, text):
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    return load_config(path)


SMALL = """
name: small
budgets: [0.25]
splits: [test]
seeds: 2
agents:
  tree: {kind: tree, rounds: 3}
  ppo: {kind: rl, config: maskable_ppo, steps: 1024}
baselines: [no-profile]
reps: 200
"""


def test_without_rliable_the_experiment_says_so_before_running_anything(tmp_path,
                                                                         monkeypatch):
    import sys

    from autoprofiler_env.errors import AutoProfilerError

    monkeypatch.setitem(sys.modules, "rliable", None)  # its import fails, as when missing
    with pytest.raises(AutoProfilerError, match=r"needs rliable .*pip install -e "
                                                r"'.\[experiment\]'"):
        run_experiment(_config(tmp_path, SMALL), tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_an_rliable_that_fails_to_import_is_named_before_running_anything(tmp_path,
                                                                          monkeypatch):
    """Under pandas 3, rliable's import of arch 7 raises a TypeError, not an ImportError."""
    import sys

    from autoprofiler_env.errors import AutoProfilerError

    fake = tmp_path / "site" / "rliable"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise TypeError(\"deprecate_kwarg() missing 1 required "
                                      "positional argument: 'new_arg_name'\")\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name in [m for m in sys.modules if m == "rliable" or m.startswith("rliable.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(AutoProfilerError, match=r"rliable is installed but its import fails "
                                                r"\(TypeError: deprecate_kwarg.*pip install"):
        run_experiment(_config(tmp_path, SMALL), tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_the_experiment_runs_aggregates_and_resumes(tmp_path):
    config = _config(tmp_path, SMALL)
    out = tmp_path / "out"
    result = run_experiment(config, out, progress=False)
    rows = {r["agent"]: r for r in result["rows"]}
    assert set(rows) == {"tree", "ppo", "no-profile", TRAIN_CHOSEN, HINDSIGHT, "oracle"}
    assert rows["tree"]["runs"] == rows["ppo"]["runs"] == 2 and rows["oracle"]["runs"] == 1
    for r in rows.values():
        assert r["problems"] == 24
        assert r["geomean_lo"] <= r["geomean_speedup"] <= r["geomean_hi"]
        assert r["iqm_lo"] <= r["iqm_speedup"] <= r["iqm_hi"]
        assert r["geomean_speedup"] <= rows["oracle"]["geomean_speedup"] + 1e-9
    assert 0 <= rows["tree"]["p_beats_fixed"] <= 1 and rows["no-profile"]["p_beats_fixed"] is None
    files = sorted((out / "runs").rglob("seed-*.json"))
    assert len(files) == 2 * 2 + 4
    stamps = {f: f.stat().st_mtime_ns for f in files}
    again = run_experiment(config, out, progress=False)  # nothing is run again
    assert {f: f.stat().st_mtime_ns for f in files} == stamps
    assert again["rows"] == result["rows"]
    import experiments.experiment

    drawn = {}
    real = experiments.experiment.write_png

    def keep(fig, path, *args, **kwargs):
        drawn[Path(path).name] = fig
        return real(fig, path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(experiments.experiment, "write_png", keep)
        written = write(config, result, out, "autoprofiler experiment --config exp.yaml")
    assert {p.name for p in written} == {"leaderboard.md", "leaderboard.csv", "near.csv",
                                         "sections.csv", "budgets.png", "cost.png",
                                         "profiles.png", "sections.png"}
    # what each agent collects: the share of its runs x problems, from the run files
    shares = {(r["agent"], r["section"]): float(r["share"])
              for r in _csv(out / "sections.csv")}
    episodes = [o["sections"] for f in files if f.parent.name == "ppo"
                for o in json.loads(f.read_text())["outcomes"]["test/0.25"].values()]
    assert len(episodes) == 2 * 24
    for (agent, section), share in shares.items():
        if agent == "ppo":
            assert share == pytest.approx(sum(section in e for e in episodes) / 48)
    assert not any(agent == "no-profile" for agent, _ in shares)  # it collects nothing
    (panel, _colorbar) = drawn["sections.png"].axes
    labels = [t.get_text() for t in panel.get_yticklabels()]
    assert labels[:2] == ["tree", "ppo"] and "oracle" in labels
    # reviewed: every row's band overlaid the others; the learned agents' alone are banded
    (profiles,) = drawn["profiles.png"].axes
    assert len(profiles.collections) == 2  # tree, ppo
    widths = {line.get_label(): line.get_linewidth() for line in profiles.get_lines()}
    assert min(widths["tree"], widths["ppo"]) > widths["no-profile"]
    text = (out / "leaderboard.md").read_text()
    assert "## test, budget 25% of the full set's cost" in text and "| ppo | 2 (" in text
    # each run's own geometric mean, beside the count: the seeds' spread
    for row in result["rows"]:
        if row["agent"] == "ppo":  # the pooled geometric mean is the runs' own's
            assert row["run_min"] <= row["geomean_speedup"] <= row["run_max"]
            assert row["run_min"] * row["run_max"] == pytest.approx(
                row["geomean_speedup"] ** 2)  # two runs: their geometric mean
            assert f"| ppo | 2 ({row['run_min']:.3f}-{row['run_max']:.3f}) |" in text
        elif row["runs"] == 1:
            assert row["run_min"] is None and row["run_max"] is None
    # what the runs were made on (reviewed: only settings.json said it)
    assert "Environment: `AutoProfiler-v0` made with its defaults" in text
    kernelbench = dataclasses.replace(config, env={"tolerance": "kernelbench",
                                                   "dataset": "kernelbench"})
    assert ("Environment: `AutoProfiler-v0` made with dataset='kernelbench', "
            "tolerance='kernelbench'") in markdown(kernelbench, result, "the command")
    chosen = json.loads(next(f for f in files if "chosen-on-train" in str(f)).read_text())[
        "chosen"]
    assert chosen["0.25"].startswith(("set:", "section:", "curated:", "no-profile"))


def test_runs_made_on_another_build_of_the_dataset_are_not_reused(tmp_path):
    """A dataset rebuilt under the same path (the KernelBench one grows as it is recorded)
    has another checksum: the runs and trained agents made on the last build are refused,
    not scored as this one's (2026-12-04: a rebuilt KernelBench dataset was scored in 40 s
    from the runs of the build before)."""
    from autoprofiler_env.dataset.format import DatasetFile
    from autoprofiler_env.dataset.names import resolve_dataset

    path = tmp_path / "data.json.gz"
    content = DatasetFile.load(resolve_dataset(None))
    checksum = content.save(path)
    config = _config(tmp_path, f"name: d\nbudgets: [0.25]\nsplits: [test]\nseeds: 1\n"
                               f"env: {{dataset: {path}}}\nbaselines: [no-profile]\nreps: 50\n")
    out = tmp_path / "out"
    first = run_experiment(config, out, progress=False)
    assert json.loads((out / "settings.json").read_text())["dataset_sha256"] == checksum
    assert run_experiment(config, out, progress=False)["rows"] == first["rows"]  # resumed
    rebuilt = DatasetFile(metadata={**content.metadata, "built": "another day"},
                          sections=content.sections, problems=content.problems)
    rebuilt.save(path)
    with pytest.raises(ConfigError, match="made with other settings.*remove"):
        run_experiment(config, out, progress=False)
    (out / "settings.json").unlink()  # the runs themselves say so too
    with pytest.raises(ConfigError, match="was made with other settings"):
        run_experiment(config, out, progress=False)


@pytest.mark.parametrize("text, message", [
    ("name: x\ncolour: red\n", "unknown key 'colour'"),
    ("budgets: [0.1, -1]\n", "'budgets' must be a list of fractions > 0"),
    ("splits: [holdout]\n", "'splits' must name train, val or test"),
    ("seeds: 0\n", "'seeds' must be a count > 0"),
    ("agents: {a: {kind: genetic}}\n", "agents.a must be a mapping with kind one of tree, rl"),
    ("- just a list\n", "an experiment config is a mapping"),
    # read when the config is read, not after hours of runs
    ("env: {bogus: 1}\n", r"env.bogus: not a make kwarg of the environment"),
    ("env: {cost_penalty: high}\n", r"env.cost_penalty: a number"),
    ("env: {split: train}\n", r"env.split: the experiment sets each environment's problems"),
    # the same problems in every split's environment: its test rows scored train's
    ("env: {problems: ['problem://autoprofiler/v1/level1/conv1d_32x128x8192']}\n",
     r"env.problems: the experiment sets each environment's problems from 'splits'"),
    ("agents: {r: {kind: rl, steps: many}}\n", r"agents.r.steps: a whole number >= 1"),
    ("agents: {t: {kind: tree, rounds: fast}}\n", r"agents.t.rounds: a whole number >= 1"),
    ("agents: {t: {kind: tree, margin: .nan}}\n", r"agents.t.margin: a finite number >= 0"),
    ("agents: {t: {kind: tree, margin: 1" + "0" * 400 + "}}\n",
     r"agents.t.margin: a finite number >= 0"),
    ("budgets: [1" + "0" * 400 + "]\n", r"'budgets' must be a list of fractions > 0"),
    ("budgets: [1" + "0" * 5000 + "]\n", r"not a config Python can read \(Exceeds the limit"),
    ("agents: {t: {kind: tree, epochs: 3}}\n", r"agents.t: unknown key 'epochs' \(rounds, "),
    ("budgets: [0.25, 0.5, 0.25]\n", r"'budgets' names 0.25 more than once: give each once"),
    ("splits: [test, val, test]\n", r"'splits' names test more than once"),
    ("seeds: [0, 1, 1]\n", r"'seeds' names 1 more than once"),
    ("reps: -5\n", r"'reps' must be a count of bootstrap resamples >= 1, got -5"),
    ("poi_reps: 0\n", r"'poi_reps' must be a count of bootstrap resamples >= 1"),
    ("name: ../../escape\n", r"'name' must be a folder name"),
    # agents/<name> was joined as given: /abs or ../.. wrote the agent's runs anywhere
    ("agents: {/tmp/x: {kind: tree}}\n", r"agents: '/tmp/x' must be a folder name"),
    ("agents: {../../x: {kind: tree}}\n", r"agents: '../../x' must be a folder name"),
    # PyYAML keeps the last of two: the first agents would be dropped without a word
    ("agents: {a: {kind: tree}}\nname: x\nagents: {b: {kind: tree}}\n",
     r"not valid YAML \(line 3\): found the key 'agents' twice in one mapping: give it once"),
    ("agents: {t: {kind: tree, rounds: 5, rounds: 9}}\n", r"\(line 1\): found the key 'rounds' "
                                                          "twice"),
])
def test_a_bad_config_is_one_error_naming_the_key(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, text)


def test_an_environment_that_cannot_be_made_is_the_env_keys_error(tmp_path):
    """A missing dataset named in env: was reported as the baselines' error."""
    config = _config(tmp_path, f"name: x\nbudgets: [0.25]\nsplits: [test]\nseeds: 1\n"
                               f"env: {{dataset: {tmp_path / 'nope.json.gz'}}}\n"
                               "baselines: [no-profile]\n")
    with pytest.raises(ConfigError, match=r"exp.yaml: env: no dataset file at .*nope.json.gz"):
        run_experiment(config, tmp_path / "out", progress=False)


def test_an_rl_agents_config_is_found_beside_the_experiment_file(tmp_path, monkeypatch):
    """``config: mine.yaml`` kept beside the experiment file was looked for in the current
    directory only, after the runs before it (an error about a --config never given)."""
    from experiments.experiment import _rl_config_file

    folder = tmp_path / "ex"
    folder.mkdir()
    (folder / "mine.yaml").write_text(
        (ROOT / "experiments" / "configs" / "maskable_ppo.yaml").read_text())
    text = "name: x\nbudgets: [0.25]\nagents: {r: {kind: rl, config: mine.yaml}}\n"
    (folder / "exp.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    config = load_config(folder / "exp.yaml")
    assert _rl_config_file(config.agents[0], config.path) == folder / "mine.yaml"
    (folder / "exp.yaml").write_text(text.replace("mine.yaml", "other.yaml"))
    with pytest.raises(ConfigError, match=r"exp.yaml: agents.r.config: other.yaml: no such "
                                          r"file, nor a shipped config .* \(here, nor in "):
        load_config(folder / "exp.yaml")


@pytest.mark.parametrize("env_kwargs, said", [
    ("{split: null}", r"trains on 24 of the 24 problems of the test split \(split=None: "
                      r"every problem\), which the experiment scores"),
    ("{problems: [PROBLEM, TRAIN]}",
     r"trains on 1 of the 24 problems of the test split \(its problems list\)"),
])
def test_an_rl_agent_trained_on_the_scored_problems_is_refused_before_it_trains(
        tmp_path, env_kwargs, said):
    """An RL agent's training config with ``split: null`` (every problem) or a problems list
    holding test problems was trained on them, and the experiment scored it there as on
    held-out problems; refused before anything is trained or run."""
    import gymnasium as gym
    import yaml

    test_problem = gym.make("AutoProfiler-v0", split="test").unwrapped.problems[0]
    train_problem = gym.make("AutoProfiler-v0", split="train").unwrapped.problems[0]
    source = yaml.safe_load((ROOT / "experiments" / "configs" / "maskable_ppo.yaml").read_text())
    source["AutoProfiler-v0"]["env_kwargs"] = yaml.safe_load(
        env_kwargs.replace("PROBLEM", test_problem).replace("TRAIN", train_problem))
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(source))
    config = _config(tmp_path, f"name: c\nbudgets: [0.25]\nsplits: [test, val]\nseeds: 1\n"
                               f"agents: {{ppo: {{kind: rl, config: {tmp_path / 'mine.yaml'}, "
                               "steps: 64}}\nreps: 20\npoi_reps: 5\n")
    with pytest.raises(ConfigError, match=r"agents.ppo: its training config .*mine.yaml "
                                          + said + r".*train on train"):
        run_experiment(config, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()  # nothing trained, nothing written


def test_a_baseline_trained_on_a_scored_split_is_warned_about_on_that_split(tmp_path):
    """The experiment warned what a fixed policy's record says from its first split's
    environment only: a model trained on val, scored on test and val, was not said."""
    import warnings

    import gymnasium as gym

    from tests.test_policy_specs import _model_with_record

    env = gym.make("AutoProfiler-v0", split="val")
    model = _model_with_record(tmp_path / "m", env, split="val")
    config = _config(tmp_path, f"name: w\nbudgets: [0.25]\nsplits: [test, val]\nseeds: 1\n"
                               f"baselines: [\"sb3:{model}\"]\nreps: 20\npoi_reps: 5\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_experiment(config, tmp_path / "out", progress=False)
    said = [str(w.message) for w in caught if "was trained on" in str(w.message)]
    assert said == [f"sb3:{model} was trained on 12 of the 12 problems of the val split "
                    "(split='val'): its rows on them say how it fits the problems it learned "
                    "from, not how it does on new ones (evaluate it on a split it was not "
                    "trained on)"]


def test_an_unknown_experiment_config_lists_the_experiment_configs():
    from experiments.experiment import config_path

    with pytest.raises(ConfigError, match=r"--config compre: no such file, nor a shipped "
                                          r"experiment config \(one of compare, "
                                          r"compare_algorithms, compare_algorithms_kernelbench, "
                                          r"compare_kernelbench, "
                                          r"compare_live, "
                                          r"compare_reference_v1\)"):
        config_path("compre")


def test_the_shipped_comparison_config_reads():
    from experiments.experiment import config_path

    config = load_config(config_path("compare"))
    assert config.seeds == (0, 1, 2, 3, 4) and {a.kind for a in config.agents} == {"tree", "rl"}


def test_the_algorithms_comparison_trains_every_algorithm_for_the_same_steps():
    """compare_algorithms holds each algorithm train trains, from its shipped config, for the
    steps compare gives MaskablePPO, on compare's budgets, splits and seeds."""
    from agents.rl.config import ALGORITHMS, read_config
    from experiments.experiment import _rl_config_file, config_path

    compare = load_config(config_path("compare"))
    algorithms = load_config(config_path("compare_algorithms"))
    assert (algorithms.budgets, algorithms.splits, algorithms.seeds, algorithms.env) == (
        compare.budgets, compare.splits, compare.seeds, compare.env)
    trained = {read_config(_rl_config_file(a))[0].algorithm for a in algorithms.agents}
    assert trained == set(ALGORITHMS) and {a.kind for a in algorithms.agents} == {"rl"}
    steps = {a.options["steps"] for a in algorithms.agents}
    assert steps == {next(a for a in compare.agents if a.kind == "rl").options["steps"]}


def test_the_kernelbench_algorithms_comparison_is_compare_algorithms_on_kernelbench():
    """compare_algorithms_kernelbench trains compare_algorithms' agents on compare_kernelbench's
    dataset and budgets, with the same baselines, splits, seeds and repetitions."""
    from dataclasses import replace

    from experiments.experiment import config_path

    algorithms = load_config(config_path("compare_algorithms"))
    kernelbench = load_config(config_path("compare_kernelbench"))
    mine = load_config(config_path("compare_algorithms_kernelbench"))
    assert mine.env == kernelbench.env == {"dataset": "kernelbench"}
    assert mine == replace(algorithms, name="compare_algorithms_kernelbench", path=mine.path,
                           env=kernelbench.env, budgets=kernelbench.budgets)


def test_the_reference_v1_comparison_is_compare_with_the_first_optimizer():
    """compare_reference_v1 (whose seed 0 made the shipped reference-v1 MaskablePPO) differs
    from compare by its name and env.optimizer alone."""
    from dataclasses import replace

    from experiments.experiment import config_path

    compare = load_config(config_path("compare"))
    v1 = load_config(config_path("compare_reference_v1"))
    assert v1.env == {"optimizer": "reference-v1"}
    assert replace(v1, name="compare", path=compare.path, env=compare.env) == compare


def test_an_interrupted_rl_agent_resumes_its_training_rather_than_starting_again(
        tmp_path, monkeypatch):
    from experiments.experiment import AgentSpec, _rl_policy
    from tests.test_train import _interrupt_at

    config = _config(tmp_path, SMALL)
    spec = AgentSpec("ppo", "rl", {"config": "maskable_ppo", "steps": 2048})
    _interrupt_at(monkeypatch, 1500)
    with pytest.raises(KeyboardInterrupt):
        _rl_policy(spec, 0, config, tmp_path / "out")
    run_file = tmp_path / "out" / "agents" / "ppo" / "seed-0" / "run.json"
    assert json.loads(run_file.read_text())["status"] == "interrupted"
    _rl_policy(spec, 0, config, tmp_path / "out")  # the experiment run again
    run = json.loads(run_file.read_text())
    assert run["status"] == "finished" and run["resumed"] and run["resumed"][0] >= 1024


# -- the review of 2026-12: statistics, resumption, stale runs, plots ---------------------

BASELINES_ONLY = """
name: fixed
budgets: [0.25, 0.5]
splits: [test]
seeds: 1
baselines: [no-profile, "set:full", "section:SpeedOfLight_RooflineChart",
            "curated:cudaforge-like"]
reps: 200
"""


def _intervals_of(rows):
    return {(r["split"], r["budget"], r["agent"]): (r["geomean_lo"], r["geomean_hi"],
                                                    r["iqm_lo"], r["iqm_hi"], r["p_lo"],
                                                    r["p_hi"]) for r in rows}


def test_an_agents_intervals_are_the_same_whatever_else_the_config_compares(tmp_path):
    """One generator advancing across the agents gave the fixed configuration another
    interval when an agent was left out, and two agents of identical scores different
    intervals; each bootstrap is now seeded afresh."""
    import dataclasses

    import numpy as np

    from experiments.experiment import aggregate

    config = _config(tmp_path, BASELINES_ONLY)
    out = tmp_path / "out"
    result = run_experiment(config, out, progress=False)
    state = np.random.get_state()
    fewer = aggregate(dataclasses.replace(config, baselines=("set:full",)), out)
    assert np.random.get_state()[1].tolist() == state[1].tolist()  # put back as it was
    everything, alone = _intervals_of(result["rows"]), _intervals_of(fewer["rows"])
    assert set(alone) < set(everything)
    for key, interval in alone.items():
        assert interval == everything[key], key
    # identical scores, identical intervals: in one cell, and across cells
    same = 0
    for (split, b), by_agent in result["data"]["scores"].items():
        names = list(by_agent)
        for i, a in enumerate(names):
            for other in names[i + 1:]:
                if np.array_equal(by_agent[a], by_agent[other]):
                    same += 1
                    assert everything[split, b, a] == everything[split, b, other], (b, a, other)
    assert same >= 2  # the chosen fixed configuration is one of the baselines at each budget
    assert everything["test", 0.25, "no-profile"] == everything["test", 0.5, "no-profile"]


def test_probability_intervals_and_wins_ties_losses_of_synthetic_scores():
    """P(> fixed)'s interval of an agent does not depend on the other learned agents; the
    win/tie/loss counts are over (run, problem) pairs and P(> fixed) is (wins + ties / 2) /
    pairs."""
    import numpy as np

    from experiments.experiment import _intervals

    rng = np.random.default_rng(3)
    fixed = np.round(rng.normal(size=(1, 12)), 1)
    a = fixed + np.round(rng.normal(scale=0.3, size=(3, 12)), 1) * (rng.random((3, 12)) < .3)
    b = np.round(rng.normal(size=(3, 12)), 1)

    class Config:  # the config's bootstrap resamples, all _intervals reads of it
        reps, poi_reps = 100, 50

    def rows_of(scores, learned):
        data = {"scores": {("test", 0.25): scores},
                "costs": {("test", 0.25): dict.fromkeys(scores, 1.0)}}
        rows: list = []
        _intervals(Config, data, learned, rows)
        return {r["agent"]: r for r in rows}

    both = rows_of({"a": a, "b": b, TRAIN_CHOSEN: fixed, "a-again": a.copy()}, ["a", "b"])
    alone = rows_of({"a": a, TRAIN_CHOSEN: fixed}, ["a"])
    for key in ("p_beats_fixed", "p_lo", "p_hi", "geomean_lo", "geomean_hi", "iqm_lo"):
        assert both["a"][key] == alone["a"][key], key
    for key in ("geomean_lo", "geomean_hi", "iqm_lo", "iqm_hi", "wins", "ties", "losses"):
        assert both["a"][key] == both["a-again"][key], key
    for name in ("a", "b"):
        r = both[name]
        diff = {"a": a, "b": b}[name] - fixed
        assert (r["wins"], r["ties"], r["losses"]) == (int((diff > 0).sum()),
                                                       int((diff == 0).sum()),
                                                       int((diff < 0).sum()))
        assert r["wins"] + r["ties"] + r["losses"] == 3 * 12
        assert r["p_beats_fixed"] == pytest.approx((r["wins"] + r["ties"] / 2) / 36)
    assert both["a"]["ties"] > 12  # most pairs tie, as the review found on the suite
    assert both[TRAIN_CHOSEN]["wins"] is None  # not against itself


def test_the_interval_of_p_beats_fixed_is_the_spread_of_whole_seeds():
    """Reviewed: rliable's bootstrap drew a run per problem, mixing seeds: where every seed's
    own P(> fixed) was at most 0.5, the interval reached 0.521. Resampling whole runs, it
    lies within the seeds' own values."""
    import numpy as np

    from experiments.stats import improvement_over_seeds, rliable

    _, metrics = rliable()
    rng = np.random.default_rng(0)
    fixed = rng.normal(size=(1, 24))
    runs = []
    for wins, losses in ((2, 5), (3, 4), (4, 4), (5, 3), (3, 6)):  # ties on the others
        run = fixed[0].copy()
        moved = rng.choice(24, size=wins + losses, replace=False)
        run[moved[:wins]] += 0.3
        run[moved[wins:]] -= 0.3
        runs.append(run)
    scores = np.array(runs)
    per_seed = [float(metrics.probability_of_improvement(scores[[i]], fixed))
                for i in range(5)]
    point, low, high = improvement_over_seeds(scores, fixed, reps=200)
    assert point == pytest.approx(float(metrics.probability_of_improvement(scores, fixed)))
    assert len(set(per_seed)) > 1 and min(per_seed) <= low < point < high <= max(per_seed)
    assert improvement_over_seeds(scores, fixed, reps=200) == (point, low, high)  # seeded


def test_the_iqm_and_probability_of_improvement_are_rlibles_to_the_last_digit():
    """The experiment counts P(X > Y) and trims the IQM itself (rliable asked scipy's
    Mann-Whitney test per problem and scipy's trim_mean per resample: 130 of the KernelBench
    experiment's 890 s, a profile); the numbers are rliable's, bit for bit: ties within and
    across the two, identical columns, other run counts, a problem count that 4 does not
    divide, the leaderboard's shapes."""
    import numpy as np

    from experiments.stats import interquartile_mean, probability_of_improvement, rliable

    _, metrics = rliable()
    rng = np.random.default_rng(7)
    for runs, other_runs, problems in ((5, 1, 24), (5, 5, 35), (3, 4, 13), (1, 1, 1), (5, 2, 2)):
        for _ in range(20):
            x = rng.choice([-0.5, 0.0, 0.1, 0.7], size=(runs, problems)) + rng.choice(
                [0.0, 1e-3 * rng.normal()], size=(runs, problems))
            y = rng.choice([-0.5, 0.0, 0.1, 0.7], size=(other_runs, problems))
            if runs == other_runs:
                y[:, : problems // 2] = x[:, : problems // 2]  # identical columns
            want = metrics.probability_of_improvement(x, y)
            got = probability_of_improvement(x, y)
            assert got == want and type(float(got)) is float, (runs, other_runs, problems)
            assert interquartile_mean(x) == metrics.aggregate_iqm(x)
            assert interquartile_mean(y) == metrics.aggregate_iqm(y)
    assert np.isnan(interquartile_mean(np.zeros((0, 3))))


def test_the_performance_profiles_are_seeded_per_agent():
    import numpy as np

    from experiments.experiment import performance_profiles

    rng = np.random.default_rng(0)
    scores = {"y": np.exp(rng.normal(size=(2, 20))), "x": np.exp(rng.normal(size=(3, 20)))}
    taus = np.linspace(0.5, 3, 15)
    np.random.seed(123)
    with_y = performance_profiles(scores, taus, reps=50)
    np.random.seed(456)  # another global state: the same bands
    alone = performance_profiles({"x": scores["x"]}, taus, reps=50)
    assert np.array_equal(with_y[1]["x"], alone[1]["x"])
    assert np.array_equal(with_y[0]["x"], alone[0]["x"])


def test_the_leaderboard_has_wins_ties_losses_and_says_the_iqm_is_geometric(tmp_path):

    config = _config(tmp_path, BASELINES_ONLY)
    out = tmp_path / "out"
    result = run_experiment(config, out, progress=False)
    write(config, result, out, "autoprofiler experiment --config exp.yaml")
    text = (out / "leaderboard.md").read_text()
    assert "geometric IQM (exp of the interquartile mean of the logs)" in text
    assert "| W/T/L vs fixed |" in text
    rows = _csv(out / "leaderboard.csv")
    assert {"wins", "ties", "losses", "resumed"} <= set(rows[0])
    shown, section = {}, None  # (budget, agent) -> the table's W/T/L cell
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("## test, budget "):
            section = line.split()[3]
        elif line.startswith("## "):  # the near problems' table, another layout
            section = None
        elif line.startswith("| agent"):
            column = cells.index("W/T/L vs fixed")
        elif line.startswith("| ") and section:
            shown[section, cells[0]] = cells[column]
    assert len(shown) == len(rows) == 2 * 7
    for r in rows:
        cell = shown[f"{float(r['budget']):.0%}", r["agent"]]
        if r["agent"] == TRAIN_CHOSEN:
            assert r["wins"] == r["ties"] == r["losses"] == "" == cell
            continue
        assert int(r["wins"]) + int(r["ties"]) + int(r["losses"]) == 24
        assert cell == f"{r['wins']}/{r['ties']}/{r['losses']}"
    # the chosen fixed configuration is one of the baselines: it ties itself everywhere
    assert any(cell == "0/24/0" for cell in shown.values())
    assert "Resumed training" not in text


def test_a_resumed_rl_training_is_named_in_the_leaderboard(tmp_path, monkeypatch):
    """A resumed training is not bit-identical to an uninterrupted one: the leaderboard
    says which agent and seed resumed, and at which steps."""

    from tests.test_train import _interrupt_at

    config = _config(tmp_path, "name: r\nbudgets: [0.25]\nsplits: [test]\nseeds: 1\n"
                               "agents: {ppo: {kind: rl, config: maskable_ppo, steps: 2048}}\n"
                               "baselines: [no-profile]\nreps: 50\npoi_reps: 10\n")
    out = tmp_path / "out"
    _interrupt_at(monkeypatch, 1500)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(config, out, progress=False)
    result = run_experiment(config, out, progress=False)
    steps = json.loads((out / "agents" / "ppo" / "seed-0" / "run.json").read_text())["resumed"]
    assert steps and result["resumed"] == {"ppo": {0: steps}}
    write(config, result, out, "autoprofiler experiment --config exp.yaml")
    text = (out / "leaderboard.md").read_text()
    assert f"**Resumed training** (the steps at which it resumed): ppo: seed 0 at {steps[0]}" \
        in text and "not bit-identical" in text and "| ppo (resumed) | 1 |" in text
    rows = {r["agent"]: r for r in _csv(out / "leaderboard.csv")}
    assert rows["ppo"]["resumed"] == f"seed 0 at {steps[0]}" and rows["no-profile"]["resumed"] == ""


def test_a_changed_rl_config_file_refuses_the_runs_made_from_it(tmp_path):
    """A resumed experiment reused the runs of an RL agent whose config YAML had changed;
    now the config's sha256 is in what a run file must say, and a finished training of
    another config is refused too."""
    from experiments.experiment import StaleRunError

    source = (ROOT / "experiments" / "configs" / "maskable_ppo.yaml").read_text()
    yaml_file = tmp_path / "mine.yaml"
    yaml_file.write_text(source)
    config = _config(tmp_path, f"name: c\nbudgets: [0.25]\nsplits: [test]\nseeds: 1\n"
                               f"agents: {{ppo: {{kind: rl, config: {yaml_file}, steps: 1024}}}}\n"
                               "reps: 20\npoi_reps: 5\n")
    out = tmp_path / "out"
    first = run_experiment(config, out, progress=False)
    assert run_experiment(config, out, progress=False)["rows"] == first["rows"]  # resumed
    # a comment and another layout of the same contents: the runs still stand (by bytes,
    # they were stale, the agent's every seed to be trained again)
    yaml_file.write_text("# tried once more\n" + source.replace(": ", ":   ") + "\n\n")
    assert run_experiment(config, out, progress=False)["rows"] == first["rows"]
    # a run made when configs were keyed by their bytes names the bytes' checksum: read as
    # the contents' while the file's bytes are those
    from autoprofiler_env.checksum import file_sha256

    run_file = out / "runs" / "ppo" / "seed-0.json"
    made = json.loads(run_file.read_text())
    made["settings"]["reads"] = {str(yaml_file): file_sha256(yaml_file)}
    run_file.write_text(json.dumps(made))
    assert run_experiment(config, out, progress=False)["rows"] == first["rows"]
    yaml_file.write_text(source.replace("learning_rate: 3.0e-4", "learning_rate: 1.0e-3"))
    with pytest.raises(StaleRunError, match=rf"{yaml_file} changed since .*ppo.*seed-0.json "
                                            r"was made from it .*remove .*runs/ppo and "
                                            r".*agents/ppo"):
        run_experiment(config, out, progress=False)
    (out / "runs" / "ppo" / "seed-0.json").unlink()  # the training is still the old one's
    with pytest.raises(StaleRunError, match=r"agents/ppo/seed-0 was trained with another "
                                            rf"config than {yaml_file} gives now "
                                            r"\(hyperparameters.learning_rate: 0.0003 then, "
                                            r"0.001 now\): remove .*agents/ppo"):
        run_experiment(config, out, progress=False)


def test_choosing_the_fixed_configuration_runs_the_baselines_only(tmp_path):
    """On a dataset the shipped agents were not learned on (a rebuilt one), the choice on
    train warned that they were learned elsewhere: it benchmarked them though the config
    does not compare them. It chooses as the benchmark's rows would."""
    import warnings

    from autoprofiler_env.dataset.format import DatasetFile
    from autoprofiler_env.dataset.names import resolve_dataset
    from baselines import FIXED_PREFIXES
    from experiments.benchmark import benchmark
    from experiments.experiment import _choose_fixed

    path = tmp_path / "data.json.gz"
    content = DatasetFile.load(resolve_dataset(None))
    DatasetFile(metadata={**content.metadata, "built": "another day"},
                sections=content.sections, problems=content.problems).save(path)
    config = _config(tmp_path, f"name: d\nbudgets: [0.25]\nsplits: [test]\nseeds: 1\n"
                               f"env: {{dataset: {path}}}\nbaselines: [no-profile]\nreps: 20\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_experiment(config, tmp_path / "out", progress=False)
    said = [str(w.message) for w in caught]
    assert not [m for m in said if "autoprofiler-tree" in m or "maskable-ppo" in m], said
    # the same choice as from the benchmark's rows of the train split
    default = _config(tmp_path, "name: e\nbudgets: [0.1, 0.5]\nsplits: [test]\n")
    rows, _ = benchmark(None, [0.1, 0.5], seeds=1, split="train")
    for b in (0.1, 0.5):
        fixed = [r for r in rows if r["budget"] == b and r["agent"].startswith(FIXED_PREFIXES)]
        best = max(fixed, key=lambda r: (round(r["geomean_speedup"], 9), r["fits_budget"]))
        assert _choose_fixed(default)[b] == best["agent"]


def test_the_budget_axis_is_labelled_at_the_budgets_only(tmp_path):
    """budgets.png showed a stray 2x10^-1: a log axis's minor tick label."""
    from experiments.experiment import budgets_figure

    for budgets in ([0.25], [0.25, 0.5], [0.1, 0.25, 0.5], [0.1, 0.25, 0.5, 1.0],
                    [0.02, 0.05, 0.1, 0.25, 0.5, 1.0]):
        config = _config(tmp_path, f"name: p\nbudgets: {budgets}\nsplits: [test]\n")
        rows = [{"split": "test", "budget": b, "agent": a, "geomean_speedup": 1.5 + b,
                 "geomean_lo": 1.2, "geomean_hi": 2.0 + b} for a in ("x", "y") for b in budgets]
        fig = budgets_figure(config, {"rows": rows})
        fig.canvas.draw()
        ax = fig.axes[0]
        low, high = sorted(ax.get_xlim())
        ticks = ax.xaxis.get_major_ticks() + ax.xaxis.get_minor_ticks()
        labels = [t.label1.get_text() for t in ticks if low <= t.get_loc() <= high
                  and t.label1.get_visible() and t.label1.get_text()]
        assert labels == [f"{b:.0%}" for b in budgets], (budgets, labels)


def test_each_agent_of_a_figure_has_a_line_of_its_own(tmp_path):
    """Past 10 agents, matplotlib's colour cycle gave two agents one line (a config with the
    user's policies beside the shipped agents: 14 rows); each has its colour and marker."""
    from experiments.experiment import HINDSIGHT, budgets_figure

    config = _config(tmp_path, "name: p\nbudgets: [0.1, 0.25]\nsplits: [test]\n")
    agents = [f"agent-{i}" for i in range(13)] + [HINDSIGHT]
    rows = [{"split": "test", "budget": b, "agent": a, "geomean_speedup": 1.5 + b,
             "geomean_lo": 1.2, "geomean_hi": 2.0 + b} for a in agents for b in (0.1, 0.25)]
    fig = budgets_figure(config, {"rows": rows})
    lines = fig.axes[0].get_lines()
    assert [line.get_label() for line in lines] == agents
    looks = {(line.get_color(), line.get_marker(), line.get_linestyle()) for line in lines}
    assert len(looks) == len(agents)
    assert lines[-1].get_linestyle() == "--"


def test_the_budgets_figure_shows_each_agents_paired_ratio_to_the_train_chosen_one(tmp_path):
    """Reviewed: the figure showed only the levels' unpaired bands, which overlap wherever the
    problems differ, where the leaderboard's test is the paired ratio to the fixed
    configuration chosen on train."""
    from matplotlib.colors import to_rgba

    from experiments.experiment import TRAIN_CHOSEN, budgets_figure

    config = _config(tmp_path, "name: p\nbudgets: [0.1, 0.25]\nsplits: [test]\nagents:\n"
                     "  learned: {kind: tree, rounds: 1}\n")
    ratios = {"learned": (1.2, 0.9, 1.5, 0.04), "baseline": (0.8, 0.7, 0.9, None),
              TRAIN_CHOSEN: (1.0, 1.0, 1.0, None)}
    rows = [{"split": "test", "budget": b, "agent": a, "geomean_speedup": 2.0 * x,
             "geomean_lo": 1.0, "geomean_hi": 3.0, "x_fixed": x, "x_fixed_lo": lo,
             "x_fixed_hi": hi, "p_fixed_holm": p} for a, (x, lo, hi, p) in ratios.items()
            for b in (0.1, 0.25)]
    fig = budgets_figure(config, {"rows": rows})
    level, ratio = fig.axes
    assert ratio.get_yscale() == "log"
    lines = ratio.get_lines()
    drawn = {tuple(line.get_ydata()) for line in lines}
    assert (1.2, 1.2) in drawn and (0.8, 0.8) in drawn  # each agent's ratio, both budgets
    assert (1.0, 1.0) in drawn  # the train-chosen one as the line at 1x, not a curve
    assert sum(tuple(line.get_ydata()) == (1.0, 1.0) for line in lines) == 1
    bands = ratio.collections
    assert len(bands) == 1  # the learned agent's interval; the baseline's is the leaderboard's
    (path,) = bands[0].get_paths()
    assert path.vertices[:, 1].min() == pytest.approx(0.9)
    assert path.vertices[:, 1].max() == pytest.approx(1.5)
    learned = [line for line in level.get_lines() if line.get_label() == "learned"][0]
    assert to_rgba(bands[0].get_facecolor()[0])[:3] == to_rgba(learned.get_color())[:3]
    # reviewed: ratios within 10% were labelled 1x alone; one budget's interval vanished
    one = _config(tmp_path, "name: p\nbudgets: [0.25]\nsplits: [test]\nagents:\n"
                  "  learned: {kind: tree, rounds: 1}\n")
    close = [dict(r, x_fixed=r["x_fixed"] ** 0.1, x_fixed_lo=r["x_fixed_lo"] ** 0.1,
                  x_fixed_hi=r["x_fixed_hi"] ** 0.1) for r in rows if r["budget"] == 0.25]
    fig = budgets_figure(one, {"rows": close})
    fig.canvas.draw()
    ratio = fig.axes[1]
    labels = [t.get_text() for t in ratio.get_yticklabels() if t.get_text()]
    assert len(labels) >= 3 and "1x" in labels, labels
    (bar,) = [c for c in ratio.collections if len(c.get_segments()) == 1]
    (segment,) = bar.get_segments()
    assert sorted(segment[:, 1]) == pytest.approx([0.9 ** 0.1, 1.5 ** 0.1])
    # no fixed configuration chosen on train: no ratios, said in the panel
    fig = budgets_figure(config, {"rows": [dict(r, x_fixed=None) for r in rows]})
    assert "no ratios" in fig.axes[1].texts[0].get_text()


def test_paired_ratios_cancel_what_the_problems_share():
    """The paired ratio of two geometric means: a problem's difficulty cancels, so an agent
    1.1x faster on every problem has the interval [1.1, 1.1] however much the problems
    differ, where the two geometric means' own intervals overlap; drawn from its own seeded
    generator, whatever numpy's global state."""
    import math

    import numpy as np

    from experiments.stats import paired_ratio

    rng = np.random.default_rng(1)
    fixed = rng.normal(scale=1.0, size=(1, 30))  # log speedups: problems differ a lot
    faster = np.repeat(fixed, 3, axis=0) + math.log(1.1)
    ratio, low, high = paired_ratio(faster, fixed, reps=500)
    assert ratio == pytest.approx(1.1) and low == pytest.approx(1.1) and high == pytest.approx(1.1)
    assert paired_ratio(fixed, fixed, reps=200) == (1.0, 1.0, 1.0)
    noisy = faster + rng.normal(scale=0.2, size=faster.shape)
    np.random.seed(7)
    first = paired_ratio(noisy, fixed, reps=500)
    np.random.seed(8)
    assert paired_ratio(noisy, fixed, reps=500) == first
    ratio, low, high = first
    assert low < ratio < high and ratio == pytest.approx(math.exp((noisy - fixed).mean()))
    assert high / low < 1.3  # the problems' spread (a factor of e^4 across them) cancels


def test_the_paired_interval_resamples_problems_and_runs_at_2_5_and_97_5_percent():
    """The documented bootstrap, redone here one resample at a time for a tiny matrix: each
    resample takes the problems (the same for both sides) and each side's runs with
    replacement, from a generator seeded with BOOTSTRAP_SEED (problems, then this side's
    runs, then the other's), and the interval is the 2.5th and 97.5th percentiles of the
    resampled mean log ratios. With one run a side, only the problems' resampling spreads it."""
    import math

    import numpy as np

    from experiments.stats import BOOTSTRAP_SEED, paired_ratio

    scores = np.array([[0.30, -0.10, 0.50, 0.05],
                       [0.10, 0.20, 0.40, -0.20],
                       [0.25, 0.00, 0.35, 0.10]])  # 3 runs x 4 problems, log speedups
    other = np.array([[0.00, 0.10, 0.20, 0.00],
                      [0.05, -0.05, 0.10, 0.15]])
    reps = 300
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    problems = rng.integers(4, size=(reps, 4))
    mine_runs = rng.integers(3, size=(reps, 3))
    their_runs = rng.integers(2, size=(reps, 2))
    resampled = []
    for r in range(reps):
        total = 0.0
        for p in problems[r]:
            mine = sum(scores[run, p] for run in mine_runs[r]) / 3
            theirs = sum(other[run, p] for run in their_runs[r]) / 2
            total += mine - theirs
        resampled.append(total / 4)
    resampled.sort()

    def percentile(q):  # numpy's default, linear between the closest ranks
        at = q / 100 * (reps - 1)
        below = math.floor(at)
        return resampled[below] + (at - below) * (resampled[below + 1] - resampled[below])

    point = (scores.sum() / 12) - (other.sum() / 8)
    ratio, low, high = paired_ratio(scores, other, reps=reps)
    assert ratio == pytest.approx(math.exp(point), abs=1e-12)
    assert low == pytest.approx(math.exp(percentile(2.5)), abs=1e-9)
    assert high == pytest.approx(math.exp(percentile(97.5)), abs=1e-9)
    # one run a side: the interval is the problems' spread alone, not a point
    _, low, high = paired_ratio(scores[:1], other[:1], reps=reps)
    differences = sorted(scores[0] - other[0])
    assert math.exp(differences[0]) <= low < high <= math.exp(differences[-1])
    assert high / low > 1.2


def test_the_sign_flip_test_counts_every_pattern_of_the_differing_problems():
    """Exact where few problems differ: three problems better by the same amount and any
    number equal give p = 2/8 (all three signs alike, either way); the runs are averaged per
    problem first, so five seeds do not count as five problems."""
    import itertools

    import numpy as np

    from experiments.stats import EXACT_UP_TO, sign_flip_p

    fixed = np.zeros((1, 10))
    better = np.zeros((5, 10))
    better[:, :3] = 0.1  # three problems better on every seed, seven equal
    assert sign_flip_p(better, fixed) == pytest.approx(2 / 8)
    assert sign_flip_p(fixed, fixed) == 1.0
    rng = np.random.default_rng(3)
    d = rng.normal(size=(1, 12))
    brute = np.mean([abs(np.dot(signs, d[0])) >= abs(d.sum()) - 1e-12
                     for signs in itertools.product((-1, 1), repeat=12)])
    assert sign_flip_p(d, np.zeros((1, 12))) == pytest.approx(brute)
    # past EXACT_UP_TO, random patterns: close to the exact value
    d = rng.normal(loc=0.2, size=(1, EXACT_UP_TO + 1))
    sums = np.zeros(1)
    for x in d[0]:
        sums = np.concatenate((sums + x, sums - x))
    exact = float(np.mean(np.abs(sums) >= abs(d.sum()) - 1e-12))
    assert sign_flip_p(d, np.zeros_like(d)) == pytest.approx(exact, abs=0.005)


def test_the_sign_flip_test_keeps_its_level_where_the_two_are_alike():
    """Under the null (each problem's difference symmetric about 0) p < 0.05 in about 5% of
    draws: 2,000 draws of 12 skewed-in-size, symmetric-in-sign differences."""
    import numpy as np

    from experiments.stats import sign_flip_p

    rng = np.random.default_rng(0)
    rejected = 0
    for _ in range(2000):
        d = rng.exponential(size=12) * rng.choice((-1.0, 1.0), size=12)
        rejected += sign_flip_p(d[None, :], np.zeros((1, 12))) < 0.05
    assert 0.03 < rejected / 2000 < 0.07


def test_holm_adjusts_a_family_of_p_values_step_down():
    from experiments.stats import holm

    # sorted 0.005, 0.01, 0.03, 0.04: x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> monotone
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == [1.0, 1.0] and holm([]) == []


def test_the_leaderboard_tests_each_row_against_the_fixed_configuration(tmp_path):
    """Per row, the problems it is better, equal and worse on against the fixed
    configuration chosen on train, and a sign-flip p-value; the learned agents' Holm-adjusted
    over every learned agent and budget of the split."""

    from experiments.stats import holm

    config = _config(tmp_path, "name: t\nbudgets: [0.1, 0.5]\nsplits: [test]\nseeds: 1\n"
                               "agents:\n  tree: {kind: tree, rounds: 2}\n"
                               "baselines: [no-profile]\nreps: 50\npoi_reps: 20\n")
    out = tmp_path / "out"
    result = run_experiment(config, out, progress=False)
    write(config, result, out, "autoprofiler experiment --config exp.yaml")
    rows = _csv(out / "leaderboard.csv")
    for r in rows:
        if r["agent"] == TRAIN_CHOSEN:
            assert r["p_fixed"] == r["better"] == ""
            continue
        assert int(r["better"]) + int(r["equal"]) + int(r["worse"]) == 24
        if r["agent"] in (HINDSIGHT, "oracle"):  # chosen on these problems: nothing to test
            assert r["p_fixed"] == r["p_fixed_holm"] == ""
            continue
        assert 0 < float(r["p_fixed"]) <= 1
        assert (r["p_fixed_holm"] != "") == (r["agent"] == "tree")
    tree = [r for r in rows if r["agent"] == "tree"]
    raw = [float(r["p_fixed"]) for r in tree]
    assert [float(r["p_fixed_holm"]) for r in tree] == pytest.approx(holm(raw))
    oracle = next(r for r in rows if r["agent"] == "oracle" and r["budget"] == "0.1")
    assert int(oracle["worse"]) == 0  # the oracle is never below a fixed configuration
    text = (out / "leaderboard.md").read_text()
    assert "| +/=/- vs fixed | p vs fixed [Holm] |" in text and "Holm's adjustment" in text


def test_the_best_fixed_configuration_in_hindsight_is_the_strongest_fixed_row(tmp_path):
    """Per split and budget, the experiment runs every fixed configuration there and keeps
    the best (its run file names it per key, the leaderboard's heading too); every row's
    ratios over it and over the train-chosen one are its geometric mean over theirs."""

    from baselines import FIXED_PREFIXES
    from experiments.experiment import _run_file

    config = _config(tmp_path, BASELINES_ONLY)
    out = tmp_path / "out"
    result = run_experiment(config, out, progress=False)
    write(config, result, out, "autoprofiler experiment --config exp.yaml")
    best = json.loads(_run_file(out, HINDSIGHT, 0).read_text())["chosen"]
    assert set(best) == {"test/0.25", "test/0.5"}
    text = (out / "leaderboard.md").read_text()
    rows = _csv(out / "leaderboard.csv")
    for b in (0.25, 0.5):
        assert best[f"test/{b:g}"].startswith(FIXED_PREFIXES)
        assert f"; the best here in hindsight: `{best[f'test/{b:g}']}`." in text
        cell = {r["agent"]: r for r in rows if float(r["budget"]) == b}
        top = float(cell[HINDSIGHT]["geomean_speedup"])
        for name, r in cell.items():
            if name.startswith(FIXED_PREFIXES) or name == TRAIN_CHOSEN:
                assert float(r["geomean_speedup"]) <= top + 1e-12, name
            for column, against in (("x_fixed", TRAIN_CHOSEN), ("x_best_fixed", HINDSIGHT)):
                if name == against:
                    assert r[column] == r[f"{column}_lo"] == "", (name, column)  # not itself
                    continue
                ratio = float(r["geomean_speedup"]) / float(cell[against]["geomean_speedup"])
                assert float(r[column]) == pytest.approx(ratio), (name, column)
                assert float(r[f"{column}_lo"]) <= float(r[column]) <= float(r[f"{column}_hi"])
        # the baseline that is the best in hindsight: 1.0 over it, exactly
        if best[f"test/{b:g}"] in cell:
            same = cell[best[f"test/{b:g}"]]
            assert float(same["x_best_fixed"]) == float(same["x_best_fixed_lo"]) == 1.0
    # on the suite the best in hindsight is one of the config's baselines at some budget, so
    # the check above ran
    assert any(name in {"no-profile", "set:full", "section:SpeedOfLight_RooflineChart",
                        "curated:cudaforge-like"} for name in best.values())
    assert "| x fixed [paired, nominal 95%] | x best fixed [paired, nominal 95%] |" in text
    # what choosing on train cost here, in the train-chosen row
    for b in (0.25, 0.5):
        cell = {r["agent"]: r for r in rows if float(r["budget"]) == b}
        assert float(cell[TRAIN_CHOSEN]["x_best_fixed"]) <= 1.0


def _cut(path):
    path.write_text(path.read_text()[:300])


def _list(path):
    path.write_text("[]")


def _garbled_speedup(path):
    run = json.loads(path.read_text())
    cell = run["outcomes"]["test/0.25"]
    cell[next(iter(cell))]["speedup"] = "abc"
    path.write_text(json.dumps(run))


def _huge_cost(path):
    run = json.loads(path.read_text())
    cell = run["outcomes"]["test/0.5"]
    text = json.dumps(run).replace(f'"cost": {json.dumps(cell[next(iter(cell))]["cost"])}',
                                   '"cost": 1' + "0" * 400, 1)
    path.write_text(text)


def _one_problem_fewer(path):
    run = json.loads(path.read_text())
    cell = run["outcomes"]["test/0.25"]
    del cell[next(iter(cell))]
    path.write_text(json.dumps(run))


@pytest.mark.parametrize("damage, message", [
    (_cut, r"cannot be read \(.*\): remove it to make it again"),
    (_list, "is not a JSON object as the experiment writes: remove it"),
    (_garbled_speedup, r"the outcome of .* at test/0.25 is not a speedup > 0 and a cost >= 0"),
    (_huge_cost, r"the outcome of .* at test/0.(25|5) is not a speedup > 0 and a cost >= 0"),
    (_one_problem_fewer, r"holds 23 problems at test/0.25 where 6 other run files hold the "
                         r"same 24, not those: remove it"),
])
@pytest.mark.parametrize("damaged", ["no-profile", "set:full"])  # read first, and later
def test_a_damaged_run_file_is_named_when_the_experiment_resumes(tmp_path, damage, message,
                                                                 damaged):
    """A run file cut short, edited by hand or of another kind is an error naming it (and
    saying to remove it), never a traceback from the statistics, nor scored as it reads;
    whichever file is read first (a reviewer saw the healthy files blamed for a first file
    that lacked a problem)."""
    from experiments.experiment import DamagedRunError, _run_file

    config = _config(tmp_path, BASELINES_ONLY)
    out = tmp_path / "out"
    run_experiment(config, out, progress=False)
    path = _run_file(out, damaged, 0)
    damage(path)
    with pytest.raises(DamagedRunError, match=message) as caught:
        run_experiment(config, out, progress=False)
    assert str(path) in str(caught.value)
    path.unlink()  # as the error says: that run alone is made again
    run_experiment(config, out, progress=False)


def test_two_run_files_of_different_problems_are_both_named():
    """Where no set of problems is held by more files than another, neither is blamed."""
    from experiments.experiment import DamagedRunError, _same_problems

    runs = [(Path("a.json"), {"p": 0, "q": 0}), (Path("b.json"), {"p": 0})]
    with pytest.raises(DamagedRunError, match=r"different problems at test/0.25 \(2 in "
                                              r"a.json; 1 in b.json\): remove the damaged"):
        _same_problems("test/0.25", runs)
    assert _same_problems("k", runs[:1] * 3) == ["p", "q"]


def test_a_damaged_settings_file_says_to_remove_it(tmp_path):
    from experiments.experiment import DamagedRunError

    config = _config(tmp_path, BASELINES_ONLY)
    out = tmp_path / "out"
    run_experiment(config, out, progress=False)
    (out / "settings.json").write_text("{")
    with pytest.raises(DamagedRunError, match=r"settings.json cannot be read .*: remove it"):
        run_experiment(config, out, progress=False)
    (out / "settings.json").unlink()
    run_experiment(config, out, progress=False)


@pytest.mark.parametrize("name, message", [
    (HINDSIGHT, "must be a folder name"), ("fixed [best in hindsight]", "must be a folder name"),
    ("oracle", "run folder")])
def test_an_agent_named_as_a_row_the_experiment_adds_is_refused(tmp_path, name, message):
    """Its runs would share the folder of the row's (runs/fixed--best-in-hindsight-/): the
    experiment skipped the hindsight job and failed on the agent's file. (An agent's name is
    a folder's name now, which the rows' names with spaces are not.)"""
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, SMALL.replace("  tree: {kind: tree", f"  '{name}': {{kind: tree"))


def test_the_tree_learner_and_the_fixed_choice_judge_as_the_evaluation_does(tmp_path,
                                                                           monkeypatch):
    """A review: with ``env: {tolerance: kernelbench}`` the tree was learned and the fixed
    configuration chosen at the recorded 1e-2, then judged at 1e-4. Both now take the env's
    kwargs that judge and score an episode."""
    import experiments.learn_tree
    from agents.tree import Stop
    from experiments import experiment
    from experiments.experiment import AgentSpec, _choose_fixed, _learned_policy

    config = _config(tmp_path, "name: t\nbudgets: [0.25]\nsplits: [test]\nseeds: 1\n"
                               "env: {tolerance: kernelbench, cost_penalty: 0.1, "
                               "reward: log_speedup}\n")
    made = []
    monkeypatch.setattr(experiment, "best_fixed", lambda env, b: made.append(
        dict(env.spec.kwargs)) or "set:full")
    assert _choose_fixed(config) == {0.25: "set:full"}
    assert len(made) == 1 and made[0]["split"] == "train"
    assert made[0]["tolerance"] == "kernelbench" and made[0]["cost_penalty"] == 0.1
    assert "reward" not in made[0]  # not a judging kwarg
    learned = []
    monkeypatch.setattr(experiments.learn_tree, "learn_tree",
                        lambda budgets, proposer, out, **kw: learned.append(kw) or (Stop(), {}))
    _learned_policy(AgentSpec("tree", "tree", {"rounds": 3}), 0, config, tmp_path, {})
    assert learned == [{"progress": False, "wandb_run": None, "rounds": 3,
                        "tolerance": "kernelbench", "cost_penalty": 0.1}]


def test_a_run_read_the_same_file_from_another_folder_is_reused(tmp_path):
    """A review: an RL agent's config read as mine.yaml from ex/, then as ex/mine.yaml from
    the folder above (or from another clone), was 'changed since'; the files' contents are
    what a run must match."""
    from experiments.experiment import AgentSpec, StaleRunError, _check_run

    spec, path = AgentSpec("ppo", "rl", {"config": "mine.yaml"}), tmp_path / "seed-0.json"
    made = {"options": spec.options, "reads": {"mine.yaml": "a" * 64}}
    _check_run(path, made, {"options": spec.options, "reads": {"ex/mine.yaml": "a" * 64}},
               spec, tmp_path)
    with pytest.raises(StaleRunError, match=r"ex/mine.yaml changed since"):
        _check_run(path, made, {"options": spec.options, "reads": {"ex/mine.yaml": "b" * 64}},
                   spec, tmp_path)
    # a run made when configs were keyed by their bytes: the bytes' checksum read as the
    # contents' where the file's bytes are the same now
    _check_run(path, made, {"options": spec.options, "reads": {"ex/mine.yaml": "b" * 64}},
               spec, tmp_path, aliases={"a" * 64: "b" * 64})


def test_the_test_split_is_scored_apart_on_problems_near_a_train_problem(tmp_path):
    """A scientific-validity audit: the splits are dealt within strata, so test problems
    have near twins in train (the suite's cumsum and cumprod); the leaderboard scores them
    and the others apart. The two sides hold every test problem once, and their geometric
    means, weighted by their counts, are the row's own."""

    config = _config(tmp_path, BASELINES_ONLY)
    out = tmp_path / "out"
    result = run_experiment(config, out, progress=False)
    write(config, result, out, "autoprofiler experiment --config exp.yaml")
    near = result["near"]
    assert near["problems"] == 24 and 0 < len(near["pairs"]) < 24
    short = {u.rsplit("/", 1)[-1]: t.rsplit("/", 1)[-1] for u, t in near["pairs"].items()}
    assert short["cumsum_8192x8192"] == "cumprod_8192x8192"  # same ops, same size
    overall = {(r["budget"], r["agent"]): r["geomean_speedup"] for r in result["rows"]
               if r["split"] == "test"}
    rows = _csv(out / "near.csv")
    assert {r["agent"] for r in rows} == {TRAIN_CHOSEN, "oracle"}  # no learned agent here
    assert len(rows) == 2 * 2
    for r in rows:
        n, m = int(r["near_problems"]), int(r["other_problems"])
        assert n + m == 24 and n == len(near["pairs"])
        pooled = math.exp((n * math.log(float(r["near_geomean"]))
                           + m * math.log(float(r["other_geomean"]))) / 24)
        assert pooled == pytest.approx(overall[float(r["budget"]), r["agent"]], rel=1e-9)
        if r["agent"] == TRAIN_CHOSEN:
            assert float(r["near_x_fixed"]) == float(r["other_x_fixed"]) == 1.0
        else:  # the oracle is never below the fixed configuration, on either side
            assert float(r["near_x_fixed"]) >= 1.0 and float(r["other_x_fixed"]) >= 1.0
    text = (out / "leaderboard.md").read_text()
    section = text.split("## test: the problems near a train problem, and the others")[1]
    assert f"Near ({len(near['pairs'])} of 24)" in section
    # how much the count rests on the bound: 0 (the same vector), 0.2, 0.5 beside 0.35
    within = near["within"]
    assert list(within) == [0.0, 0.2, 0.5]
    assert (within[0.0], within[0.2], len(near["pairs"]), within[0.5]) == (4, 5, 9, 9)
    assert (f"{within[0.0]} with the same feature vector as a train problem, "
            f"{within[0.2]} within 0.2, {within[0.5]} within 0.5.") in section
    assert "`cumsum_8192x8192` ~ `cumprod_8192x8192`" in section
    assert section.count("\n| 25% | ") == section.count("\n| 50% | ") == 2


def test_near_train_needs_the_same_ops_at_a_similar_size():
    import numpy as np

    from autoprofiler_env.dataset.splits import NEAR_LOG10, near_train

    names = ("log_flops", "log_n_ops", "log_n_matmul", "log_n_pointwise")

    def v(flops, ops, matmul, pointwise):
        return np.log10(1.0 + np.array([flops, ops, matmul, pointwise], dtype=float))

    vectors = {
        "train/a": ("train", v(1e9, 2, 1, 1)),
        "train/b": ("train", v(1.5e9, 2, 1, 1)),
        "val/c": ("val", v(1e9, 2, 1, 1)),  # the same as a, but not in the split asked
        "test/twin": ("test", v(1.2e9, 2, 1, 1)),  # 0.079 from a, 0.097 from b
        "test/bigger": ("test", v(1.5e9 * 10 ** (NEAR_LOG10 + 0.01), 2, 1, 1)),  # past b
        "test/other_ops": ("test", v(1e9, 2, 2, 0)),  # same size, other op histogram
        "test/same_ops_more": ("test", v(1e9, 3, 1, 1)),  # log_n_ops is a size: near
    }
    near = near_train(vectors, names, "test")
    assert near == {"test/twin": "train/a", "test/same_ops_more": "train/a"}
    assert near_train(vectors, names, "val") == {"val/c": "train/a"}


def test_an_rl_configs_contents_checksum_takes_any_yaml_and_is_the_same_in_every_process(
        tmp_path):
    """A review: keys of two types in one mapping made the checksum a TypeError traceback
    (json cannot sort them), and a !!set's repr follows the process's hash seed, which made
    every resume stale."""
    import os
    import subprocess
    import sys

    from experiments.experiment import config_sha256

    path = tmp_path / "mine.yaml"
    path.write_text("AutoProfiler-v0: {n_timesteps: 1024}\n1: one\n"
                    "tags: !!set {alpha, beta, gamma, delta, epsilon}\n")
    same = tmp_path / "same.yaml"  # the same contents, written otherwise
    same.write_text("# a comment\ntags: !!set {epsilon, delta, gamma, beta, alpha}\n1: one\n"
                    "AutoProfiler-v0:\n  n_timesteps: 1024\n")
    assert config_sha256(path) == config_sha256(same)
    script = ("import sys; from pathlib import Path; from experiments.experiment import "
              f"config_sha256; print(config_sha256(Path({str(path)!r})))")
    seen = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           check=True, env={**os.environ,
                                            "PYTHONHASHSEED": seed}).stdout.strip()
            for seed in ("1", "2", "3")}
    assert seen == {config_sha256(path)}
    # a mapping and the list of its pairs, {} and [], a set and its sorted list: not the same
    pairs = [("m.yaml", "a: {x: 1}\n"), ("l.yaml", "a: [[x, 1]]\n"), ("e.yaml", "a: {}\n"),
             ("f.yaml", "a: []\n"), ("s.yaml", "a: !!set {x}\n"), ("t.yaml", "a: [x]\n")]
    for name, text in pairs:
        (tmp_path / name).write_text(text)
    assert len({config_sha256(tmp_path / name) for name, _ in pairs}) == len(pairs)
    looped = tmp_path / "loop.yaml"  # an anchor inside its own value
    looped.write_text("a: &x [1, *x]\n")
    with pytest.raises(ConfigError, match=r"loop.yaml: a value refers to itself"):
        config_sha256(looped)


def test_a_baseline_whose_file_changes_while_it_is_scored_is_refused(tmp_path, monkeypatch):
    """Reviewed: a baseline is loaded again for each split and budget, its checksum taken
    once before: a model rewritten meanwhile (a training run started into its folder) was
    scored as two models under one checksum."""
    import shutil

    import gymnasium as gym

    import experiments.experiment as experiment
    from agents.tree import shipped_tree

    env = gym.make("AutoProfiler-v0")
    tree = tmp_path / "tree.json"
    shutil.copy(shipped_tree(env.unwrapped.optimizer), tree)
    config = _config(tmp_path, f"name: c\nbudgets: [0.1, 0.25]\nsplits: [test]\nseeds: 1\n"
                               f"baselines: [\"tree:{tree}\"]\nreps: 20\npoi_reps: 5\n")
    scored = experiment._outcomes

    def rewriting(env, policy, budget, records):  # another process rewrites it meanwhile
        if policy is not None and budget == 0.1:
            tree.write_text(tree.read_text() + "\n")
        return scored(env, policy, budget, records)

    monkeypatch.setattr(experiment, "_outcomes", rewriting)
    with pytest.raises(AutoProfilerError, match=rf"baselines: tree:{re.escape(str(tree))}: "
                                                rf"{re.escape(str(tree))} changed since the "
                                                r"experiment started, while it scored it"):
        run_experiment(config, tmp_path / "out", progress=False)
    assert not list((tmp_path / "out").glob("runs/tree*/*.json"))  # no run file of it
