"""Tuning (``autoprofiler tune``): tiny studies of a few trials of a few hundred steps. The
trials' objective is the runs' best evaluation, best.yml trains, the median pruner stops a
trial whose evaluations are bad, a study continues where it stopped (a killed trial, Ctrl-C)
and only with its own settings, each algorithm's sampler gives a config that builds, and
without Optuna the command says how to install it."""

import copy
import csv
import dataclasses
import json
import math
import sys

import pytest
import yaml

from agents.rl.config import ConfigError, load_config
from autoprofiler_env.jsonlines import read_jsonl
from experiments import tune as tune_module
from experiments.cli import main
from tests.conftest import one_torch_thread_here

# the zoo's hyperparams_opt names for each algorithm's sampled parameters
ZOO_PPO = {"batch_size", "n_steps", "one_minus_gamma", "one_minus_gae_lambda",
           "learning_rate", "ent_coef", "clip_range", "n_epochs", "max_grad_norm", "net_arch",
           "activation_fn"}
ZOO_A2C = ZOO_PPO - {"batch_size", "clip_range", "n_epochs"}
ZOO_DQN = {"gamma", "learning_rate", "batch_size", "buffer_size", "exploration_final_eps",
           "exploration_fraction", "target_update_interval", "learning_starts", "train_freq",
           "subsample_steps", "net_arch"}
ZOO_TRPO = {"batch_size", "n_steps", "gamma", "learning_rate", "n_critic_updates",
            "cg_max_steps", "target_kl", "gae_lambda", "net_arch", "activation_fn"}
ZOO_NAMES = {"maskable_ppo": ZOO_PPO, "ppo": ZOO_PPO, "a2c": ZOO_A2C, "dqn": ZOO_DQN,
             "qrdqn": ZOO_DQN | {"n_quantiles"}, "recurrent_ppo": ZOO_PPO, "trpo": ZOO_TRPO}

TINY = {  # MaskablePPO on 2 environments, evaluated every 128 steps at two budgets
    "AutoProfiler-v0": {
        "policy": "MultiInputPolicy", "n_timesteps": 2000, "n_envs": 2,
        "env_kwargs": {"split": "train", "budget_range": [0.05, 1.0]},
        "n_steps": 64, "batch_size": 64, "n_epochs": 2, "gamma": 1.0,
        "policy_kwargs": "dict(net_arch=[32, 32])"},
    "autoprofiler": {"algorithm": "maskable_ppo",
                     "eval": {"frequency": 128, "split": "val", "budgets": [0.25, 1.0]}},
}


def _config(folder, name="tiny.yaml", change=None):
    given = copy.deepcopy(TINY)
    given["AutoProfiler-v0"].update(change or {})
    path = folder / name
    path.write_text(yaml.safe_dump(given, sort_keys=False))
    return path


def _rows(out):
    with (out / "trials.csv").open() as file:
        return list(csv.DictReader(file))


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A finished study of two tiny random trials (256 steps each)."""
    pytest.importorskip("optuna")
    folder = tmp_path_factory.mktemp("study")
    with one_torch_thread_here():
        result = tune_module.tune(_config(folder), folder / "out", trials=2, steps=256,
                                  sampler="random", progress=False,
                                  command=["autoprofiler", "tune", "test"])
    return folder, result


def test_tiny_trials_complete_and_score_their_runs_best_evaluation(study):
    folder, result = study
    out = folder / "out"
    assert result.ran == 2 and result.count("COMPLETE") == 2 and len(result.trials) == 2
    rows = _rows(out)
    assert [(r["number"], r["state"]) for r in rows] == [("0", "COMPLETE"), ("1", "COMPLETE")]
    assert {k.removeprefix("params_") for k in rows[0] if k.startswith("params_")} == ZOO_PPO
    for row, trial in zip(rows, result.trials):
        run_dir = out / "trials" / row["number"]
        run = json.loads((run_dir / "run.json").read_text())
        evaluations = read_jsonl(run_dir / "evaluations.jsonl")
        # the objective: the run's best evaluation's (the project's evaluation, masks used)
        # after its first update (an evaluation at a rollout's last step precedes its update)
        rollout = trial.params["n_steps"] * 2
        best = max(e["objective"] for e in evaluations if e["step"] > rollout)
        assert float(row["objective"]) == pytest.approx(best) == trial.objective
        assert run["best"]["objective"] == pytest.approx(max(e["objective"]
                                                             for e in evaluations))
        assert float(row["geomean_speedup"]) == pytest.approx(math.exp(best))
        assert run["status"] == "finished" and run["steps"] == int(row["steps"]) == 256
        assert run["config"]["eval"]["frequency"] == 128 and len(evaluations) == 2
        # the trial trained the sampled parameters, converted as the zoo converts them
        trained = run["config"]["hyperparameters"]
        params = trial.params
        assert trained["gamma"] == pytest.approx(1 - params["one_minus_gamma"])
        assert trained["gae_lambda"] == pytest.approx(1 - params["one_minus_gae_lambda"])
        assert trained["n_steps"] == params["n_steps"] and params["n_steps"] * 2 < 256
        assert trained["batch_size"] == min(params["batch_size"], params["n_steps"] * 2)
        assert trained["learning_rate"] == params["learning_rate"]
        width = {"tiny": [64], "small": [64, 64], "medium": [256, 256]}[params["net_arch"]]
        assert f"pi={width}" in trained["policy_kwargs"]
    assert result.best.objective == max(t.objective for t in result.trials)
    assert result.best_config == out / "best.yml"


def test_best_yml_is_a_zoo_file_that_autoprofiler_train_trains_from(study, tmp_path, capsys):
    folder, result = study
    out = folder / "out"
    best = result.best
    content = yaml.safe_load((out / "best.yml").read_text())
    assert content["autoprofiler"]["algorithm"] == "maskable_ppo"  # not in its file name
    assert content["AutoProfiler-v0"]["n_timesteps"] == 2000  # the config's own
    config = load_config(out / "best.yml")
    run = json.loads((out / "trials" / str(best.number) / "run.json").read_text())
    assert config.algorithm == "maskable_ppo"
    assert config.hyperparameters == run["config"]["hyperparameters"]
    assert config.eval.frequency == 128 and config.n_envs == 2
    assert main(["train", "--config", str(out / "best.yml"), "--steps", "128",
                 "--out", str(tmp_path / "run")]) == 0
    trained = json.loads((tmp_path / "run" / "run.json").read_text())
    assert trained["status"] == "finished" and trained["algorithm"] == "maskable_ppo"
    assert trained["config"]["hyperparameters"] == run["config"]["hyperparameters"]
    said = capsys.readouterr().out
    assert "trained" in said


def test_the_summary_names_the_best_trial_and_how_to_train_it(study, capsys):
    folder, result = study
    tune_module.print_summary(result)
    said = capsys.readouterr().out
    assert "2 trials finished (2 complete, 0 pruned), 0 failed" in said
    assert f"best: trial {result.best.number}, objective {result.best.objective:.4f}" in said
    assert f"train it: autoprofiler train --config {folder / 'out' / 'best.yml'}" in said


@pytest.mark.parametrize("change, said", [
    ({"seed": 1}, "--seed is 1 now, the study's is 0"),
    ({"sampler": "tpe"}, "--sampler is tpe now, the study's is random"),
    ({"pruner": "none"}, "--pruner is none now, the study's is median"),
    ({"steps": 512}, "AutoProfiler-v0.n_timesteps (or --steps) is 512 now"),
    ({"n_evaluations": 4}, "autoprofiler.eval.frequency (or --n-evaluations) is 64 now"),
    ({"config": {"n_envs": 4}}, "AutoProfiler-v0.n_envs is 4 now"),
])
def test_a_study_continues_only_with_its_own_settings(study, monkeypatch, change, said):
    folder, _ = study
    out = folder / "out"
    before = (out / "trials.csv").read_bytes()
    monkeypatch.setattr(tune_module, "train", lambda *a, **k: pytest.fail("trained"))
    config = (_config(folder, "other.yaml", change["config"]) if "config" in change
              else folder / "tiny.yaml")
    settings = {"trials": 3, "steps": 256, "sampler": "random"} | {
        k: v for k, v in change.items() if k != "config"}
    with pytest.raises(ConfigError) as error:
        tune_module.tune(config, out, progress=False, **settings)
    assert said in str(error.value)
    assert "give another --out" in str(error.value)
    assert "autoprofiler tune test" in str(error.value)  # the study's command
    assert (out / "trials.csv").read_bytes() == before


def test_the_command_refuses_a_mismatched_study_in_one_line(study, capsys):
    folder, _ = study
    assert main(["tune", "--config", str(folder / "tiny.yaml"), "--out", str(folder / "out"),
                 "--steps", "256", "--sampler", "random", "--seed", "7"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--seed is 7 now, the study's is 0" in err[0]


def _evaluations_of_later_models_scored(monkeypatch, objective: float) -> None:
    """Every evaluation of the second model trained on (the second trial) gets
    ``objective``: a bad trial, as the pruner sees it."""
    from agents.rl import callbacks

    real, models = callbacks.evaluate, []

    def evaluate(env, model, budgets, seed=0, step=0):
        evaluation, records = real(env, model, budgets, seed, step)
        if not any(m is model for m in models):
            models.append(model)
        if models[0] is not model:
            evaluation = dataclasses.replace(evaluation, objective=objective)
        return evaluation, records

    monkeypatch.setattr(callbacks, "evaluate", evaluate)


@pytest.mark.parametrize("pruner", ["median", "none"])
def test_the_median_pruner_stops_a_trial_whose_evaluations_are_bad(tmp_path, monkeypatch,
                                                                    pruner):
    pytest.importorskip("optuna")
    _evaluations_of_later_models_scored(monkeypatch, -5.0)
    monkeypatch.setattr(tune_module, "ROLLOUTS", (32,))  # 64 steps: learned by the first
    out = tmp_path / "out"
    # 4 evaluations of 128 steps; the median pruner after 1 finished trial, from the first
    result = tune_module.tune(_config(tmp_path), out, trials=2, steps=512, sampler="random",
                              pruner=pruner, n_startup_trials=1, n_evaluations=4,
                              progress=False)
    first, second = result.trials
    assert first.state == "COMPLETE" and first.steps == 512
    run = json.loads((out / "trials" / "1" / "run.json").read_text())
    rows = _rows(out)
    if pruner == "median":
        assert second.state == "PRUNED" and rows[1]["state"] == "PRUNED"
        assert second.steps == 128 == run["steps"] == run["stopped_early"]  # its first
        assert second.objective == -5.0  # its last evaluation's, as Optuna keeps it
        assert [e["step"] for e in read_jsonl(out / "trials" / "1" / "evaluations.jsonl")
                ] == [128]
        assert result.best.number == 0
    else:
        assert second.state == "COMPLETE" and second.steps == 512 == run["steps"]
        assert "stopped_early" not in run
    assert result.count("COMPLETE", "PRUNED") == 2


def test_a_study_continues_to_its_trials_without_redoing_finished_ones(tmp_path, monkeypatch):
    optuna = pytest.importorskip("optuna")
    config, out = _config(tmp_path), tmp_path / "out"
    tune_module.tune(config, out, trials=2, steps=256, sampler="random", progress=False)
    kept = {n: (out / "trials" / n / "run.json").read_bytes() for n in ("0", "1")}
    # a process killed in its third trial: the study holds it RUNNING with the parameters
    # the command sampled (seeded for the third place), its folder half written
    storage = f"sqlite:///{out / 'study.db'}"
    killed = optuna.load_study(study_name=tune_module.STUDY_NAME, storage=storage,
                               sampler=optuna.samplers.RandomSampler(
                                   seed=tune_module.trial_seed(0, 2))).ask()
    base = load_config(config).replace(total_timesteps=256)
    drawn = tune_module.SAMPLERS["maskable_ppo"].sample(killed, base)
    (out / "trials" / "2").mkdir()
    (out / "trials" / "2" / "run.json").write_text("{}")
    trained = []
    real = tune_module.train
    monkeypatch.setattr(tune_module, "train",
                        lambda config, folder, **kw: trained.append(folder.name)
                        or real(config, folder, **kw))
    result = tune_module.tune(config, out, trials=4, steps=256, sampler="random",
                              progress=False)
    assert trained == ["3", "4"]  # two trials more; the finished ones not again
    states = ["COMPLETE", "COMPLETE", "FAIL", "COMPLETE", "COMPLETE"]
    assert [t.state for t in result.trials] == states and result.ran == 2
    assert not (out / "trials" / "2").exists()  # the killed trial's folder: removed
    assert {n: (out / "trials" / n / "run.json").read_bytes() for n in ("0", "1")} == kept
    assert [r["state"] for r in _rows(out)] == states
    # as a study that never stopped: the killed trial's parameters tried again, then the
    # fourth place's draw (the sampler seeded by place, not by trial number)
    assert result.trials[3].params == drawn
    fresh = optuna.create_study(sampler=optuna.samplers.RandomSampler(
        seed=tune_module.trial_seed(0, 3)))
    assert result.trials[4].params == tune_module.SAMPLERS["maskable_ppo"].sample(
        fresh.ask(), base)
    assert drawn not in [t.params for t in result.trials[:2]]
    # enough already: nothing runs
    again = tune_module.tune(config, out, trials=2, steps=256, sampler="random",
                             progress=False)
    assert again.ran == 0 and trained == ["3", "4"]


def test_ctrl_c_stops_the_study_cleanly_and_the_same_command_continues_it(tmp_path,
                                                                         monkeypatch, capsys):
    pytest.importorskip("optuna")
    config, out = _config(tmp_path), tmp_path / "out"
    command = ["tune", "--config", str(config), "--out", str(out), "--trials", "2",
               "--steps", "256", "--sampler", "random"]
    real, calls = tune_module.train, []

    def interrupted_in_the_second(config, folder, after_evaluation=None, **kw):
        calls.append(folder.name)

        def stop(steps, objective):
            after_evaluation(steps, objective)
            raise KeyboardInterrupt  # Ctrl-C after the trial's first evaluation

        return real(config, folder, after_evaluation=stop if len(calls) == 2
                    else after_evaluation, **kw)

    monkeypatch.setattr(tune_module, "train", interrupted_in_the_second)
    assert main(command) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("autoprofiler: error: interrupted: run the same command again to "
                          "continue the study")
    assert [r["state"] for r in _rows(out)] == ["COMPLETE", "FAIL"]
    assert not (out / "trials" / "1").exists()  # the stopped trial's folder: removed at once
    monkeypatch.setattr(tune_module, "train", real)
    assert main(command) == 0
    said = capsys.readouterr().out
    assert "2 trials finished (2 complete, 0 pruned), 1 failed; 1 run by this command" in said
    rows = _rows(out)
    assert [r["state"] for r in rows] == ["COMPLETE", "FAIL", "COMPLETE"]
    assert (out / "trials" / "2" / "run.json").is_file()
    # the stopped trial's parameters, tried again
    params = [{k: v for k, v in r.items() if k.startswith("params_")} for r in rows]
    assert params[2] == params[1] != params[0]


@pytest.mark.parametrize("algorithm", sorted(tune_module.SAMPLERS))
def test_each_algorithms_sampler_gives_a_config_that_loads_and_builds(algorithm):
    optuna = pytest.importorskip("optuna")
    from agents.rl.config import config_from_dict, read_config
    from experiments.train import CONFIGS, build_model, make_train_env

    base, given = read_config(CONFIGS / f"{algorithm}.yaml")
    base = base.replace(total_timesteps=2048)
    sampler = tune_module.SAMPLERS[algorithm]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(3):
        trial = study.ask()
        params = sampler.sample(trial, base)
        assert set(params) == ZOO_NAMES[algorithm]
        content = tune_module.trial_config(given, algorithm,
                                           sampler.hyperparameters(params, base))
        config = config_from_dict(content, "sampled")
        assert config.algorithm == algorithm
        if "n_steps" in params:  # a rollout fits in the trial
            assert params["n_steps"] * base.n_envs <= 2048
        if "learning_starts" in params:
            assert params["learning_starts"] < 2048 and params["buffer_size"] <= 100_000
        env = make_train_env(config, 0)
        try:
            model = build_model(config, env, 0, "sampled")
        finally:
            env.close()
        assert type(model).__name__.lower().replace("maskableppo", "maskable_ppo").replace(
            "recurrentppo", "recurrent_ppo") == algorithm
        if "batch_size" in params and "n_steps" in params:  # at most a rollout
            assert config.hyperparameters["batch_size"] <= params["n_steps"] * base.n_envs
        study.tell(trial, 0.0)


def test_without_optuna_the_command_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna: ImportError
    assert main(["tune", "--out", str(tmp_path / "out"), "--trials", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("autoprofiler: error: autoprofiler tune needs Optuna: pip install")
    assert "pip install -e '.[tune]'" in err[0]
    assert not (tmp_path / "out").exists()


def test_the_commands_defaults_and_choices_are_the_modules():
    """experiments/cli.py spells tune's defaults and choices out (importing experiments.tune
    would load stable-baselines3 for every command's --help): they must stay the module's."""
    from experiments import tune
    from experiments.cli import build_parser

    args = build_parser().parse_args(["tune"])
    assert (args.trials, args.n_startup_trials, args.sampler, args.pruner) == (
        tune.DEFAULT_TRIALS, tune.DEFAULT_STARTUP_TRIALS, tune.SAMPLER_METHODS[0],
        tune.PRUNER_METHODS[0])
    command = build_parser()._subparsers._group_actions[0].choices["tune"]
    choices = {a.dest: tuple(a.choices or ()) for a in command._actions}
    assert (choices["sampler"], choices["pruner"]) == (tune.SAMPLER_METHODS,
                                                       tune.PRUNER_METHODS)


@pytest.mark.parametrize("option, value", [("trials", 0), ("steps", 0), ("seed", -1),
                                           ("n_evaluations", 0), ("n_startup_trials", -1)])
def test_a_setting_out_of_range_is_refused_before_anything_runs(tmp_path, option, value):
    """(A reviewer: --n-evaluations 0 raised a ZeroDivisionError.)"""
    pytest.importorskip("optuna")
    from autoprofiler_env.errors import AutoProfilerError

    flag = "--" + option.replace("_", "-")
    with pytest.raises(AutoProfilerError, match=f"{flag} {value}: a whole number >= "):
        tune_module.tune(_config(tmp_path), tmp_path / "out", progress=False,
                         **{option: value})
    assert not (tmp_path / "out").exists()


def test_too_few_steps_for_any_rollout_says_every_trial_would_be_untrained(tmp_path):
    pytest.importorskip("optuna")
    from autoprofiler_env.errors import AutoProfilerWarning

    with pytest.warns(AutoProfilerWarning) as caught:
        result = tune_module.tune(_config(tmp_path), tmp_path / "out", trials=1, steps=64,
                                  sampler="random", progress=False)
    said = [str(w.message) for w in caught]
    assert said[0].startswith("--steps 64: no rollout")
    assert said[1].startswith("trial 0: no evaluation after its first update (step 64")
    assert result.count("COMPLETE") == 1


def test_the_first_update_is_a_rollout_or_the_first_train_after_learning_starts():
    """SB3 evaluates a rollout's last step before it learns from it: on-policy after
    n_steps x n_envs; off-policy at the end of the first rollout (train_freq x n_envs) past
    learning_starts (a reviewer: train_freq was left out)."""
    first = tune_module.first_update
    assert first({"n_steps": 64}, 2) == 128
    assert first({"learning_starts": 0, "train_freq": 1000}, 1) == 1000
    assert first({"learning_starts": 1000, "train_freq": 4}, 1) == 1004
    assert first({"learning_starts": 1000, "train_freq": 8}, 2) == 1008
    assert first({}, 1) == 104  # SB3's DQN defaults: learning_starts 100, train_freq 4


def test_a_study_continues_only_on_the_dataset_its_trials_trained_on(study, tmp_path):
    """Each trial's run.json names its dataset; the study refuses to mix trials of two."""
    optuna = pytest.importorskip("optuna")
    import shutil

    from autoprofiler_env.dataset import Dataset

    folder, _ = study
    out = tmp_path / "out"
    shutil.copytree(folder / "out", out)
    stored = optuna.load_study(study_name=tune_module.STUDY_NAME,
                               storage=f"sqlite:///{out / 'study.db'}")
    assert stored.user_attrs["dataset_sha256"] == Dataset.load(None).metadata["sha256"]
    stored.set_user_attr("dataset_sha256", "0" * 64)
    with pytest.raises(ConfigError, match="its trials trained on the dataset of sha256 0000"):
        tune_module.tune(_config(folder), out, trials=3, steps=256, sampler="random",
                         progress=False)
    assert [r["state"] for r in _rows(out)] == ["COMPLETE", "COMPLETE"]


def test_an_unknown_dataset_is_said_as_such_not_as_a_bad_study(tmp_path, capsys):
    """Reviewed: once an unknown dataset name became a ValueError too, the study's reader
    took it for an unreadable study.db and said to remove it."""
    pytest.importorskip("optuna")
    config = _config(tmp_path, change={"env_kwargs": {"split": "train", "dataset": "nope"}})
    assert main(["tune", "--config", str(config), "--trials", "1", "--steps", "128",
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "no dataset named 'nope'" in err and "remove it" not in err, err
