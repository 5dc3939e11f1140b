"""The experiment: learned agents (a tree, MaskablePPO) beside the baselines, per seed, with
rliable's statistics; resumable; its config checked."""

import json

import pytest

from experiments.experiment import TRAIN_CHOSEN, ConfigError, load_config, run_experiment, write


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


def test_the_experiment_runs_aggregates_and_resumes(tmp_path):
    config = _config(tmp_path, SMALL)
    out = tmp_path / "out"
    result = run_experiment(config, out, progress=False)
    rows = {r["agent"]: r for r in result["rows"]}
    assert set(rows) == {"tree", "ppo", "no-profile", TRAIN_CHOSEN, "oracle"}
    assert rows["tree"]["runs"] == rows["ppo"]["runs"] == 2 and rows["oracle"]["runs"] == 1
    for r in rows.values():
        assert r["problems"] == 24
        assert r["geomean_lo"] <= r["geomean_speedup"] <= r["geomean_hi"]
        assert r["iqm_lo"] <= r["iqm_speedup"] <= r["iqm_hi"]
        assert r["geomean_speedup"] <= rows["oracle"]["geomean_speedup"] + 1e-9
    assert 0 <= rows["tree"]["p_beats_fixed"] <= 1 and rows["no-profile"]["p_beats_fixed"] is None
    files = sorted((out / "runs").rglob("seed-*.json"))
    assert len(files) == 2 * 2 + 3
    stamps = {f: f.stat().st_mtime_ns for f in files}
    again = run_experiment(config, out, progress=False)  # nothing is run again
    assert {f: f.stat().st_mtime_ns for f in files} == stamps
    assert again["rows"] == result["rows"]
    written = write(config, result, out, "autoprofiler experiment --config exp.yaml")
    assert {p.name for p in written} == {"leaderboard.md", "leaderboard.csv", "budgets.png",
                                         "cost.png", "profiles.png"}
    text = (out / "leaderboard.md").read_text()
    assert "## test, budget 25% of the full set's cost" in text and "| ppo | 2 |" in text
    chosen = json.loads(next(f for f in files if "fixed" in str(f)).read_text())["chosen"]
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
    ("env: {split: train}\n", r"env.split: the experiment sets each environment's split"),
    ("agents: {r: {kind: rl, steps: many}}\n", r"agents.r.steps: a whole number >= 1"),
    ("agents: {t: {kind: tree, rounds: fast}}\n", r"agents.t.rounds: a whole number >= 1"),
    ("agents: {t: {kind: tree, margin: .nan}}\n", r"agents.t.margin: a finite number >= 0"),
    ("agents: {t: {kind: tree, epochs: 3}}\n", r"agents.t: unknown key 'epochs' \(rounds, "),
    ("reps: -5\n", r"'reps' must be a count of bootstrap resamples >= 1, got -5"),
    ("poi_reps: 0\n", r"'poi_reps' must be a count of bootstrap resamples >= 1"),
    ("name: ../../escape\n", r"'name' must be a folder name"),
])
def test_a_bad_config_is_one_error_naming_the_key(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, text)


def test_an_unknown_experiment_config_lists_the_experiment_configs():
    from experiments.experiment import config_path

    with pytest.raises(ConfigError, match=r"--config compre: no such file, nor a shipped "
                                          r"experiment config \(one of compare, "
                                          r"compare_kernelbench, compare_live\)"):
        config_path("compre")


def test_the_shipped_comparison_config_reads():
    from experiments.experiment import config_path

    config = load_config(config_path("compare"))
    assert config.seeds == (0, 1, 2, 3, 4) and {a.kind for a in config.agents} == {"tree", "rl"}


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
