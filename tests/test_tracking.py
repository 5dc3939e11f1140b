"""wandb runs: each lands where its environment says (wandb's own settings where it finds
a key, offline where it finds none), with its group and name; a failed or interrupted one
ends failed; a --wandb that could not log is one error before the command's work; what each
command logs (its config, its summary, its curves' step axes)."""

import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from autoprofiler_env.errors import AutoProfilerError
from experiments.tracking import check_wandb, finishing, wandb_mode, wandb_run
from experiments.wandb_offline import read_offline_run


def test_two_runs_of_one_process_each_land_in_their_own_directory(no_key, monkeypatch):
    tmp_path = no_key
    for name, group in (("first", None), ("second", "g2")):
        monkeypatch.setenv("WANDB_DIR", str(tmp_path / name))
        run = wandb_run("test", {"name": name}, group=group)
        run.log({"x": 1.0})
        run.finish()
        runs = list((tmp_path / name / "wandb").glob("offline-run-*"))
        assert len(runs) == 1, f"{name}: {list(tmp_path.rglob('offline-run-*'))}"
        logged = read_offline_run(runs[0], wait_s=30)
        assert logged.finished
        assert (logged.group, logged.job_type, logged.config["name"]) == (group or "", "test",
                                                                          name)
        assert logged.curve("x") == [(0, 1.0)]


def test_a_run_still_being_written_is_read_as_far_as_written_after_the_wait(no_key):
    """wandb's service can still be flushing the file when finish() returns: the reader
    waits for the exit record, and past ``wait_s`` gives the run as far as written."""
    import time

    tmp_path = no_key
    run = wandb_run("test", {"name": "partial"}, group="g")
    run.log({"x": 1.0})
    run.finish()
    (written,) = (tmp_path / "wandb").glob("offline-run-*/*.wandb")
    whole = read_offline_run(written, wait_s=30)
    assert whole.finished and whole.group == "g"
    head = tmp_path / "head.wandb"
    head.write_bytes(written.read_bytes()[:1024])  # its first records, no exit record yet
    started = time.monotonic()
    partial = read_offline_run(head, wait_s=0.5)
    assert not partial.finished and 0.5 <= time.monotonic() - started < 10


def _one_run(where: Path):
    runs = list((where / "wandb").glob("offline-run-*"))
    assert len(runs) == 1, runs
    return read_offline_run(runs[0], wait_s=30)


def test_where_wandb_finds_a_key_its_own_settings_decide(no_key, monkeypatch):
    """`wandb login` puts the key in ~/.netrc, not the environment: wandb decides then (here
    `wandb offline` in its settings); without a key the run is offline; WANDB_MODE wins."""
    from urllib.parse import urlsplit

    from wandb.sdk import wandb_setup

    # wandb reads its settings once per process: written before it first looks
    (no_key / "wandb-config" / "settings").write_text("[default]\nmode = offline\n")
    monkeypatch.setenv("WANDB_INIT_TIMEOUT", "10")  # should it try the server: fail soon
    assert wandb_mode() == "offline"
    host = urlsplit(wandb_setup.singleton().settings.base_url).netloc
    (no_key / "netrc").write_text(f"machine {host}\n  login user\n  password {'k' * 40}\n")
    assert wandb_mode() is None  # wandb's to decide
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert wandb_mode() == "disabled"
    monkeypatch.delenv("WANDB_MODE")
    monkeypatch.setenv("WANDB_PROJECT", "mine")
    with finishing(wandb_run("test", {"a": 1}, name="named")) as run:
        assert run.settings.mode == "offline" and run.project == "mine"
    logged = _one_run(no_key)
    assert (logged.project, logged.name, logged.exit_code) == ("mine", "named", 0)


def test_an_older_wandb_finds_the_key_wandb_login_wrote(no_key, monkeypatch):
    """The floor's audit: on a wandb before 0.31 the lookup's arguments differ (and before
    0.24.1 it is missing), and the key `wandb login` wrote to ~/.netrc was taken for none:
    the run went offline and WANDB_MODE=online was refused. Such a wandb is stood in for by
    a lookup that refuses the arguments."""
    from experiments.tracking import _api_key_configured, _key_by_hand

    def older(**kwargs):
        raise TypeError("authenticate_session() got an unexpected keyword argument "
                        "'update_session'")

    try:
        from wandb.sdk.lib import wbauth
    except ImportError:  # an older wandb indeed
        pass
    else:
        monkeypatch.setattr(wbauth, "authenticate_session", older)
    assert not _api_key_configured()
    (no_key / "netrc").write_text(f"machine {_host()}\n  login user\n  password "
                                  f"{'k' * 40}\n")
    assert _api_key_configured() and wandb_mode() is None
    assert not _key_by_hand("https://wandb.example.org")  # another host's
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    assert _key_by_hand("https://wandb.example.org")


def _host() -> str:
    """The host wandb's settings name (its server: api.wandb.ai, or another by version)."""
    from urllib.parse import urlsplit

    from wandb.sdk import wandb_setup

    setup = wandb_setup.singleton()
    return urlsplit(setup.settings.base_url if setup else "https://api.wandb.ai").netloc


def test_a_log_file_not_written_yet_is_waited_for(no_key):
    """wandb before 0.22.1 often leaves the file empty when finish() returns: read as not
    written yet until ``wait_s``, not refused at once as too short."""
    import threading

    wandb_run("test", {"name": "late"}, group="g").finish()
    whole = _one_run(no_key).path.read_bytes()
    empty = no_key / "run-x.wandb"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="too short for a wandb log"):
        read_offline_run(empty)  # no wait: as it is
    timer = threading.Timer(0.5, empty.write_bytes, (whole,))
    timer.start()
    try:
        assert read_offline_run(empty, wait_s=20).group == "g"
    finally:
        timer.cancel()


def test_a_run_that_raises_ends_failed(no_key):
    with pytest.raises(KeyboardInterrupt), finishing(wandb_run("test", {})) as run:
        run.log({"x": 1.0})
        raise KeyboardInterrupt
    logged = _one_run(no_key)
    assert logged.finished and logged.exit_code == 1 and logged.curve("x") == [(0, 1.0)]


def test_a_wandb_that_cannot_log_is_one_error(no_key, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "bogus")
    with pytest.raises(AutoProfilerError, match=r"WANDB_MODE='bogus' is not a mode wandb "
                                                r"knows: give one of online, offline"):
        check_wandb()
    monkeypatch.delenv("WANDB_MODE")
    monkeypatch.setitem(sys.modules, "wandb", None)  # its import fails, as when missing
    with pytest.raises(AutoProfilerError, match=r"wandb cannot be imported .*pip install "
                                                r"wandb.*or leave out --wandb"):
        check_wandb()


@pytest.mark.parametrize("command", [
    ["benchmark", "--budgets", "0.25"], ["learn-tree", "--rounds", "1"], ["experiment"],
    ["train", "--steps", "64"], ["tune", "--trials", "1", "--steps", "64"]])
@pytest.mark.parametrize("broken", ["mode", "import", "online without a key"])
def test_each_command_refuses_a_wandb_that_cannot_log_before_its_work(
        no_key, monkeypatch, capsys, command, broken):
    """Reviewed: WANDB_MODE=online without a key ran the benchmark, then ended in wandb's
    traceback."""
    from experiments.cli import main

    if broken == "mode":
        monkeypatch.setenv("WANDB_MODE", "bogus")
    elif broken == "online without a key":
        monkeypatch.setenv("WANDB_MODE", "online")
    else:
        monkeypatch.setitem(sys.modules, "wandb", None)
    out = no_key / "out"
    assert main([*command, "--out", str(out), "--wandb"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("autoprofiler: error: --wandb: "), err
    assert not out.exists()


def _shipped_tree_twice(where: Path) -> list[str]:
    """Two tree specs of one short name (tree:tree): the benchmark names them by the spec,
    which holds a ``/``."""
    from agents.tree import shipped_tree

    specs = []
    for name in ("a", "b"):
        (where / name).mkdir()
        shutil.copy(shipped_tree("reference"), where / name / "tree.json")
        specs.append(f"tree:{where / name / 'tree.json'}")
    return specs


@pytest.mark.filterwarnings("ignore:.*was learned on")
def test_benchmark_logs_its_settings_and_a_summary_key_per_agent(no_key, study_dataset,
                                                                  monkeypatch):
    from experiments.cli import main

    monkeypatch.setenv("WANDB_MODE", "offline")
    specs = _shipped_tree_twice(no_key)
    assert main(["benchmark", "--dataset", str(study_dataset), "--budgets", "0.25",
                 "--seeds", "1", "--split", "val", "--out", str(no_key / "out"),
                 *[a for spec in specs for a in ("--policy", spec)], "--wandb"]) == 0
    logged = _one_run(no_key)
    assert logged.exit_code == 0 and logged.job_type == "benchmark"
    config = logged.config
    assert {k: config[k] for k in ("budgets", "seeds", "split", "policies", "dataset")} == {
        "budgets": [0.25], "seeds": 1, "split": "val", "policies": specs,
        "dataset": str(study_dataset)}
    # what it ran, not null: the study dataset's own optimizer, the default tolerance
    assert config["optimizer"] == "reference-v1" and config["tolerance"] == "default"
    assert len(config["dataset_sha256"]) == 64 and config["versions"]["python"]
    assert not {"func", "wandb", "out"} & set(config)
    # which tree or model each learned agent was read from (reviewed: the specs only)
    files = config["policy_files"]
    assert {spec: list(found.values()) for spec, found in files.items() if spec in specs} == {
        spec: [hashlib.sha256(Path(spec[len("tree:"):]).read_bytes()).hexdigest()]
        for spec in specs}
    assert "autoprofiler-tree" in files and "no-profile" not in files
    # keyed as an experiment's leaderboard is: <split>/budget=<b>/<agent>/<column>
    scores = {k: v for k, v in logged.summary.items() if k.endswith("/geomean_speedup")}
    assert "val/budget=0.25/no-profile/geomean_speedup" in scores
    assert "val/budget=0.25/no-profile/mean_cost_s" in logged.summary
    assert all(len(k.split("/")) == 4 for k in scores), sorted(scores)
    assert {k.split("/")[2] for k in scores} >= {spec.replace("/", "_") for spec in specs}


def test_learn_tree_logs_its_settings_and_each_budgets_curves_against_its_rounds(
        no_key, monkeypatch):
    from experiments.cli import main

    monkeypatch.setenv("WANDB_MODE", "offline")
    assert main(["learn-tree", "--budget", "0.1,0.25", "--rounds", "2", "--proposals", "2",
                 "--out", str(no_key / "out"), "--wandb"]) == 0
    logged = _one_run(no_key)
    assert logged.exit_code == 0 and logged.name == "search-seed0"
    config = logged.config
    assert config["budgets"] == [0.1, 0.25] and config["rounds"] == 2
    assert config["settings"]["dataset_sha256"] == json.loads(
        (no_key / "out" / "run.json").read_text())["settings"]["dataset_sha256"]
    assert config["versions"]["python"] and not {"func", "wandb", "llm_base_url"} & set(config)
    for budget in ("0.1", "0.25"):
        key = f"budget={budget}"
        metric = key.replace(".", "\\.")  # escaped: else wandb nests at the dot
        assert logged.metrics[f"{metric}/*"] == f"{metric}/round"
        rounds = [row[f"{key}/round"] for row in logged.history if f"{key}/train" in row]
        assert rounds == sorted(rounds) and len(rounds) >= 2
        assert {row[f"{key}/accepted"] for row in logged.history if key + "/train" in row} <= {0, 1}
    assert not any("round" in row for row in logged.history)
    # reviewed: unescaped, every row also held a "budget=0" / "1/round" of 0
    assert all(k.startswith(("_", "budget=0.1/", "budget=0.25/", "curve", "tree"))
               for row in logged.history for k in row), logged.history[0]
    # the tree kept, and the tree itself (as train's model)
    tree = json.loads((no_key / "out" / "tree.json").read_text())
    for budget, scores in tree["meta"]["scores"].items():
        assert logged.summary[f"budget={budget}/tree_size"] == scores["nodes"]
    assert logged.artifacts == [f"tree-{logged.run_id}"]


def test_an_interrupted_learn_tree_run_ends_failed(no_key, monkeypatch, capsys):
    import experiments.learn_tree
    from experiments.cli import main

    def interrupted(*args, **kwargs):
        kwargs["wandb_run"].log({"budget=0.25/train": 1.0})
        raise KeyboardInterrupt

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setattr(experiments.learn_tree, "learn_tree", interrupted)
    assert main(["learn-tree", "--out", str(no_key / "out"), "--wandb"]) == 2
    assert capsys.readouterr().err.strip().endswith("autoprofiler: error: interrupted")
    assert _one_run(no_key).exit_code == 1


EXPERIMENT = """name: wb
budgets: [0.25]
splits: [test]
seeds: 1
baselines: [no-profile]
reps: 50
"""


def test_experiment_logs_its_config_and_leaderboard_from_a_run_started_first(
        no_key, monkeypatch, capsys):
    import experiments.experiment
    from experiments.cli import main

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.chdir(no_key)
    Path("wb.yaml").write_text(EXPERIMENT)
    assert main(["experiment", "--config", "wb.yaml", "--out", "out", "--wandb"]) == 0
    logged = _one_run(no_key)
    assert (logged.name, logged.group, logged.job_type, logged.exit_code) == (
        "wb", "wb", "experiment", 0)
    config = logged.config
    assert {k: config[k] for k in ("name", "budgets", "splits", "seeds", "baselines",
                                   "path")} == {
        "name": "wb", "budgets": [0.25], "splits": ["test"], "seeds": [0],
        "baselines": ["no-profile"], "path": "wb.yaml"}
    assert config["dataset_sha256"] == json.loads(Path("out/settings.json").read_text())[
        "dataset_sha256"] and config["versions"]["python"]
    rows = {r["agent"]: r for r in experiments.experiment.aggregate(
        experiments.experiment.load_config("wb.yaml"), Path("out"))["rows"]}
    assert logged.summary["test/budget=0.25/no-profile/geomean_speedup"] == pytest.approx(
        rows["no-profile"]["geomean_speedup"])
    assert logged.summary["test/budget=0.25/no-profile/x_fixed"] == pytest.approx(
        rows["no-profile"]["x_fixed"])
    assert logged.curve("leaderboard/_type") and logged.curve("budgets/_type")
    assert logged.curve("near/_type")  # the test split's near twins, scored apart
    assert logged.curve("section_shares/_type") and logged.curve("sections/_type")
    # a failed experiment has its run, failed
    shutil.rmtree(Path("wandb"))

    def failed(config, out, progress=True, wandb_group=None):
        raise experiments.experiment.ConfigError("the experiment failed")

    monkeypatch.setattr(experiments.experiment, "run_experiment", failed)
    assert main(["experiment", "--config", "wb.yaml", "--out", "out2", "--wandb"]) == 2
    assert capsys.readouterr().err.strip().endswith("the experiment failed")
    assert _one_run(no_key).exit_code == 1


def test_each_learned_agent_of_an_experiment_is_a_run_of_its_group(no_key, monkeypatch):
    """The experiment's run and, beside it, one run per learned agent and seed that learns
    or trains, with that command's curves and the agent's scores; a finished agent loaded
    again logs nothing."""
    import experiments.experiment
    from experiments.cli import main

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.chdir(no_key)
    Path("wb.yaml").write_text(EXPERIMENT + "agents:\n"
                               "  t: {kind: tree, rounds: 2, proposals: 2}\n"
                               "  r: {kind: rl, config: maskable_ppo, steps: 1024}\n")
    assert main(["experiment", "--config", "wb.yaml", "--out", "out", "--wandb"]) == 0
    runs = [read_offline_run(path, wait_s=30)
            for path in sorted(Path("wandb").glob("offline-run-*"))]
    by_name = {run.name: run for run in runs}
    assert sorted(by_name) == ["r-seed0", "t-seed0", "wb"]
    assert {run.group for run in runs} == {"wb"} and {run.exit_code for run in runs} == {0}
    tree, rl = by_name["t-seed0"], by_name["r-seed0"]
    assert (tree.job_type, rl.job_type) == ("learn-tree", "train")
    assert tree.config["agent"] == "t" and tree.config["seed"] == 0
    assert any("budget=0.25/train" in row for row in tree.history)  # learn-tree's curves
    assert any("eval/geomean_speedup" in row for row in rl.history)  # train's
    rows = {r["agent"]: r for r in experiments.experiment.aggregate(
        experiments.experiment.load_config("wb.yaml"), Path("out"))["rows"]}
    for name, run in (("t", tree), ("r", rl)):  # one seed: its score is the row's
        assert run.summary["test/budget=0.25/geomean_speedup"] == pytest.approx(
            rows[name]["geomean_speedup"])
        assert run.summary["test/budget=0.25/cost_s"] >= 0
    shutil.rmtree(Path("wandb"))
    assert main(["experiment", "--config", "wb.yaml", "--out", "out", "--wandb"]) == 0
    assert _one_run(no_key).name == "wb"  # nothing learned again


def test_wandb_does_not_take_the_agents_package_for_openais(no_key, monkeypatch, capsys):
    """wandb suggested installing Weave ("Detected [agents] in use") on every run: it takes
    this project's `agents` package for the OpenAI Agents SDK."""
    import agents  # noqa: F401

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "false")
    monkeypatch.setenv("WANDB_DISABLE_WEAVE", "")  # restored after the test, unset now
    monkeypatch.delenv("WANDB_DISABLE_WEAVE")
    with finishing(wandb_run("test", {})):
        pass
    captured = capsys.readouterr()
    assert "Weave" not in captured.out + captured.err


def test_an_agent_that_fails_in_an_experiment_ends_its_run_and_the_experiments_failed(
        no_key, monkeypatch):
    import experiments.experiment
    from experiments.cli import main

    def failing(spec, seed, config, out, envs, wandb_run=None):
        wandb_run.log({"budget=0.25/train": 1.0})
        raise experiments.experiment.ConfigError("the agent failed")

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.chdir(no_key)
    Path("wb.yaml").write_text(EXPERIMENT + "agents:\n  t: {kind: tree, rounds: 2}\n")
    monkeypatch.setattr(experiments.experiment, "_learned_policy", failing)
    assert main(["experiment", "--config", "wb.yaml", "--out", "out", "--wandb"]) == 2
    runs = {run.name: run for run in (read_offline_run(path, wait_s=30) for path in
                                      sorted(Path("wandb").glob("offline-run-*")))}
    assert sorted(runs) == ["t-seed0", "wb"]
    assert runs["t-seed0"].exit_code == 1 and runs["wb"].exit_code == 1


def test_a_resumed_learn_tree_goes_on_in_its_wandb_run_named_as_the_environment_says(
        no_key, monkeypatch):
    """Reviewed: each resumption was another wandb run of the same name (a group counted it as
    another seed), and WANDB_RUN_GROUP / WANDB_NAME were not heard."""
    from experiments.cli import main
    from experiments.tracking import RUN_IDS

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_RUN_GROUP", "my-study")
    out, seen = no_key / "out", set()

    def learn(rounds):  # the offline run this call wrote (folders of one second sort by id)
        assert main(["learn-tree", "--budget", "0.25", "--rounds", str(rounds), "--out",
                     str(out), "--wandb"]) == 0
        (new,) = set((no_key / "wandb").glob("offline-run-*")) - seen
        seen.add(new)
        return read_offline_run(new, wait_s=30)

    first = learn(1)
    monkeypatch.setenv("WANDB_NAME", "renamed")
    second = learn(3)
    ids = json.loads((out / RUN_IDS).read_text())
    assert ids == {"learn-tree:search-seed0": first.run_id} and second.run_id == first.run_id
    assert (first.group, second.group) == ("my-study", "my-study")
    assert (first.name, second.name) == ("search-seed0", "renamed")
    assert (first.config["resumed"], second.config["resumed"]) == (False, True)
    rounds = [row["budget=0.25/round"] for row in second.history if "budget=0.25/round" in row]
    assert rounds == [2, 3]  # the resumption's own rounds: none logged twice
    # reviewed: learned anew where its logs were removed, it went on in the finished run
    for path in out.glob("log-*.jsonl"):
        path.unlink()
    third = learn(1)
    assert third.run_id != first.run_id and third.config["resumed"] is False
    assert json.loads((out / RUN_IDS).read_text()) == {"learn-tree:search-seed0": third.run_id}


TUNE_CONFIG = {  # MaskablePPO on one environment, evaluated every 64 steps at one budget
    "AutoProfiler-v0": {"policy": "MultiInputPolicy", "n_timesteps": 256,
                        "env_kwargs": {"split": "train", "budget_range": [0.05, 1.0]},
                        "n_steps": 64, "batch_size": 64, "n_epochs": 1, "gamma": 1.0,
                        "policy_kwargs": "dict(net_arch=[16])"},
    "autoprofiler": {"algorithm": "maskable_ppo",
                     "eval": {"frequency": 64, "split": "val", "budgets": [0.25]}},
}


@pytest.mark.usefixtures("one_torch_thread")
def test_a_tune_study_is_one_run_a_row_per_trial_and_goes_on_in_it(no_key, monkeypatch):
    """Reviewed: tune was the one long command that logged nothing to wandb."""
    pytest.importorskip("optuna")
    import csv

    import yaml

    from experiments.cli import main
    from experiments.tracking import RUN_IDS

    monkeypatch.setenv("WANDB_MODE", "offline")
    config, out, seen = no_key / "tiny.yaml", no_key / "study", set()
    config.write_text(yaml.safe_dump(TUNE_CONFIG))

    def tune(trials):
        assert main(["tune", "--config", str(config), "--trials", str(trials), "--sampler",
                     "random", "--seed", "3", "--out", str(out), "--wandb"]) == 0
        (new,) = set((no_key / "wandb").glob("offline-run-*")) - seen
        seen.add(new)
        return read_offline_run(new, wait_s=30)

    first = tune(1)
    assert (first.job_type, first.name, first.group) == ("tune", "tiny-seed3", "tune-tiny")
    assert first.exit_code == 0 and first.config["resumed"] is False
    assert first.config["sampler"] == "random" and first.config["seed"] == 3
    assert first.config["config"]["algorithm"] == "maskable_ppo"
    assert len(first.config["dataset_sha256"]) == 64 and first.config["versions"]["python"]
    assert first.metrics["*"] == "trial"
    second = tune(2)  # the study goes on: in the same run, with the new trial's row only
    assert second.run_id == first.run_id and second.config["resumed"] is True
    assert json.loads((out / RUN_IDS).read_text()) == {"tune:tiny-seed3": first.run_id}
    with (out / "trials.csv").open() as file:
        trials = list(csv.DictReader(file))
    for run, trial in ((first, trials[0]), (second, trials[1])):
        (row,) = [r for r in run.history if "state" in r]
        assert row["trial"] == int(trial["number"]) and row["state"] == trial["state"]
        assert row["objective"] == pytest.approx(float(trial["objective"]))
        assert row["steps"] == int(trial["steps"])
        params = {k.removeprefix("params/"): v for k, v in row.items()
                  if k.startswith("params/")}
        assert params.keys() == {k.removeprefix("params_") for k in trial
                                 if k.startswith("params_")}
        assert str(params["n_steps"]) == trial["params_n_steps"]
    best = max(trials, key=lambda t: float(t["objective"]))
    assert second.summary["best/trial"] == int(best["number"])
    assert second.summary["best/geomean_speedup"] == pytest.approx(
        float(best["geomean_speedup"]))
    assert second.summary["trials/complete"] == 2 and second.summary["trials/fail"] == 0
    assert f"tune-{second.run_id}" in second.artifacts  # best.yml (beside the table's own)
    # a study continued with --wandb after a command without it: its earlier trials are rows
    later = no_key / "later"
    assert main(["tune", "--config", str(config), "--trials", "1", "--sampler", "random",
                 "--seed", "3", "--out", str(later)]) == 0
    out = later
    third = tune(2)
    assert third.run_id != first.run_id and third.config["resumed"] is False
    assert [row["trial"] for row in third.history if "state" in row] == [0, 1]
