"""Training (``autoprofiler train``): a short run that saves, reloads and evaluates a model;
every shipped config builds and learns; a bad config is one error naming the key; the wandb
offline run holds the training curves."""

import copy
import importlib.metadata
import json
import math
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml

import autoprofiler_env  # noqa: F401  (registers the ids)
from agents.rl.config import ALGORITHMS, POLICIES, ConfigError, config_from_dict, load_config
from autoprofiler_env.evaluation import rollout, score
from autoprofiler_env.jsonlines import read_jsonl
from autoprofiler_env.scoring import log_score
from experiments.train import CONFIGS, build_model, make_eval_env, make_train_env, train

# the training configs: every file of experiments/configs in the zoo's format (the others,
# such as an experiment's, have their own tests)
CONFIG_FILES = sorted(p for p in CONFIGS.glob("*.yaml")
                      if "AutoProfiler-v0" in (yaml.safe_load(p.read_text()) or {}))

TINY = {  # MaskablePPO small enough for a test: an update every 128 steps
    "AutoProfiler-v0": {
        "policy": "MultiInputPolicy",
        "n_timesteps": 2000,
        "n_envs": 2,
        "env_kwargs": {"split": "train", "budget_range": [0.05, 1.0]},
        "n_steps": 64, "batch_size": 64, "n_epochs": 2, "learning_rate": "lin_1.0e-3",
        "gamma": 1.0, "policy_kwargs": "dict(net_arch=[32, 32], activation_fn=nn.Tanh)"},
    "autoprofiler": {"algorithm": "maskable_ppo", "vec_env": "dummy",
                     "eval": {"frequency": 1000, "split": "val", "budgets": [0.25, 1.0]}},
}


def _check_npz(out: Path, lines: list[dict]) -> dict:
    """``out/evaluations.npz`` as SB3's EvalCallback writes it, one row per evaluation of
    ``lines`` (``evaluations.jsonl``'s): the mean of a row of ``results`` is its objective,
    each budget's part the budget's log geometric-mean speedup."""
    with np.load(out / "evaluations.npz") as file:
        npz = dict(file)
    assert set(npz) == {"timesteps", "results", "ep_lengths"}
    assert npz["timesteps"].tolist() == [line["step"] for line in lines]
    assert npz["results"].ndim == 2 and npz["results"].shape == npz["ep_lengths"].shape
    assert npz["results"].shape[0] == len(lines)
    assert npz["results"].mean(axis=1) == pytest.approx([line["objective"] for line in lines])
    assert npz["ep_lengths"].dtype.kind == "i" and npz["ep_lengths"].min() >= 1
    for row, line in enumerate(lines):
        width = npz["results"].shape[1] // len(line["budgets"])
        for i, result in enumerate(line["budgets"].values()):
            part = slice(width * i, width * (i + 1))
            assert npz["results"][row, part].tolist() == result["log_scores"]
            assert npz["ep_lengths"][row, part].tolist() == result["lengths"]
            assert np.mean(result["log_scores"]) == pytest.approx(
                math.log(result["geomean_speedup"]))
            assert 0 <= np.mean(result["lengths"]) - result["mean_sections"] <= 1
    return npz


def _tiny(**settings):
    """TINY with some of its environment's settings changed."""
    given = copy.deepcopy(TINY)
    given["AutoProfiler-v0"].update(settings)
    return given


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def test_a_short_run_saves_reloads_and_evaluates(tmp_path):
    from experiments.policies import load

    out = tmp_path / "run"
    result = train(config_from_dict(TINY, "tiny"), out, seed=3, given=TINY, source="tiny",
                   progress=False, command=["autoprofiler", "train", "test"])
    for name in ("model.zip", "best_model.zip", "run.json", "evaluations.jsonl",
                 "evaluations.npz", "evaluations.png", "progress.csv", "0.monitor.csv",
                 "1.monitor.csv"):
        assert (out / name).is_file(), name
    assert not (out / "monitor").exists()  # SB3's and the zoo's layout: at the top
    assert (out / "evaluations.png").read_bytes().startswith(b"\x89PNG")
    # the evaluations: every 1000 steps and at the end (on-policy: 16 updates of 128 steps);
    # the one due at 2000, the total, inside the last rollout, is the end's, after its update
    lines = read_jsonl(out / "evaluations.jsonl")
    assert [line["step"] for line in lines] == [1000, 2048] == [
        e.step for e in result.evaluations]
    assert set(lines[0]["budgets"]) == {"0.25", "1"}
    best = max(lines, key=lambda line: line["objective"])
    assert best["best"] and best["step"] == result.best.step
    assert best["geomean_speedup"] == pytest.approx(math.exp(
        (math.log(best["budgets"]["0.25"]["geomean_speedup"])
         + math.log(best["budgets"]["1"]["geomean_speedup"])) / 2))
    # run.json: the config as given and resolved, the seed, the checksum, the versions
    run = json.loads((out / "run.json").read_text())
    val = make_eval_env(config_from_dict(TINY))
    assert run["algorithm"] == "maskable_ppo" and run["seed"] == 3
    assert run["config_given"] == TINY and run["config"]["total_timesteps"] == 2000
    assert run["config"]["algorithm"] == "maskable_ppo"
    assert run["config"]["hyperparameters"]["learning_rate"] == "lin_1.0e-3"
    assert run["env_kwargs"]["budget_range"] == [0.05, 1.0]
    assert run["dataset_sha256"] == val.unwrapped.backend.dataset.metadata["sha256"]
    assert run["package_version"] == importlib.metadata.version("autoprofiler-env")
    assert run["status"] == "finished" and run["steps"] == 2048
    assert run["command"] == ["autoprofiler", "train", "test"]
    assert run["best"]["step"] == best["step"]
    assert "log_scores" not in run["best"]["budgets"]["1"]  # evaluations.jsonl has them
    # SB3's EvalCallback format, as rl-baselines3-zoo's all_plots reads it: an episode per
    # (budget, problem), 2 budgets x the 12 val problems
    npz = _check_npz(out, lines)
    assert npz["results"].shape == npz["ep_lengths"].shape == (2, 2 * 12)
    # SB3's load_results reads the monitor files at the top of the run directory
    from stable_baselines3.common.monitor import load_results

    episodes = load_results(str(out))
    assert len(episodes) == sum(len(_lines(out / f"{rank}.monitor.csv")) - 2 for rank in (0, 1))
    assert {"r", "l", "t", "problem", "speedup"} <= set(episodes.columns)
    assert episodes["l"].sum() <= 2048
    # the run directory as a policy: its best model reproduces its recorded evaluation
    entry = load(f"sb3:{out}", val)
    assert type(entry.policy).__name__ == "MaskablePPO"
    row = lines.index(best)
    for i, budget in enumerate(("0.25", "1")):
        records = rollout(val, entry.policy, budget=float(budget), seed=3)
        assert score(records) == pytest.approx(best["budgets"][budget]["geomean_speedup"])
        # the npz's row: each episode's log score and length, budget after budget
        scores = npz["results"][row, 12 * i:12 * (i + 1)]
        lengths = npz["ep_lengths"][row, 12 * i:12 * (i + 1)]
        assert scores == pytest.approx([log_score(r.correct, r.speedup) for r in records])
        assert all(len(r.sections) <= n <= len(r.sections) + 1 for r, n in zip(
            records, lengths))  # a step per section, and STOP unless the budget ran out
    # the final model by file, as before
    final = load(f"sb3:{out / 'model.zip'}", val)
    last = lines[-1]["budgets"]["1"]["geomean_speedup"]
    assert score(rollout(val, final.policy, budget=1.0, seed=3)) == pytest.approx(last)
    # a run is never overwritten
    with pytest.raises(Exception, match="holds a run already"):
        train(config_from_dict(TINY), out, progress=False)


@pytest.mark.parametrize("path", CONFIG_FILES, ids=[p.stem for p in CONFIG_FILES])
def test_every_shipped_config_builds_and_learns(path):
    config = load_config(path)
    assert config.policy == POLICIES.get(config.algorithm, "MultiInputPolicy")
    assert config.env.get("budget_range")
    assert config.eval.split == "val" and config.total_timesteps >= 100_000
    # one env (the configs' vector envs differ only in how many), one rollout and update
    small = config.replace(n_envs=1, vec_env="dummy")
    env = make_train_env(small, seed=0)
    try:
        model = build_model(small, env, seed=0)
        assert type(model).__name__.lower() == config.algorithm.replace("_", "")
        steps = config.hyperparameters.get("n_steps", 1)
        learning_starts = config.hyperparameters.get("learning_starts", 0)
        model.learn(max(steps, 1) if "n_steps" in config.hyperparameters
                    else learning_starts + 8)
        assert model.num_timesteps >= 1
    finally:
        env.close()


def test_configs_are_one_per_algorithm():
    names = {p.stem for p in CONFIG_FILES}
    assert set(ALGORITHMS) <= names
    for name in ALGORITHMS:
        assert load_config(CONFIGS / f"{name}.yaml").algorithm == name


def test_the_shipped_configs_read_as_rl_baselines3_zoo_reads_them():
    """What rl_zoo3's ExperimentManager does with a hyperparams file (read_hyperparameters,
    _preprocess_hyperparams), without the zoo: the environment id's entry, n_timesteps, the
    zoo's keys taken out, policy_kwargs evaluated with torch as th and torch.nn as nn; what is
    left must be keyword arguments of the algorithm's class."""
    import inspect

    from torch import nn

    from agents.rl import algorithms

    for path in CONFIG_FILES:
        entry = dict(yaml.safe_load(path.read_text())["AutoProfiler-v0"])
        int(entry.pop("n_timesteps"))
        for key in ("n_envs", "env_kwargs", "normalize"):
            entry.pop(key, None)
        entry["policy_kwargs"] = eval(entry["policy_kwargs"], {"th": torch, "nn": nn})
        policy = entry.pop("policy")
        cls = algorithms()[load_config(path).algorithm]
        assert set(entry) <= set(inspect.signature(cls.__init__).parameters), path.name
        assert policy in cls.policy_aliases
        assert load_config(path).hyperparameters | {"policy_kwargs": None} == entry | {
            "policy_kwargs": None}


def test_policy_kwargs_in_the_zoos_string_form_are_parsed_not_evaluated():
    from torch import nn

    from agents.rl.config import algorithm_kwargs

    config = config_from_dict(_tiny(policy_kwargs="dict(net_arch=dict(pi=[8], vf=[8]), "
                                    "activation_fn=nn.ReLU, optimizer_class=th.optim.SGD)"))
    assert algorithm_kwargs(config)["policy_kwargs"] == {
        "net_arch": {"pi": [8], "vf": [8]}, "activation_fn": nn.ReLU,
        "optimizer_class": torch.optim.SGD}
    mapping = config_from_dict(_tiny(policy_kwargs={"net_arch": [16]}))
    assert algorithm_kwargs(mapping)["policy_kwargs"] == {"net_arch": [16]}
    # the zoo's own hyperparams/a2c.yml names its optimizer bare, as the zoo's module imports it
    from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike

    zoo_a2c = config_from_dict(_tiny(policy_kwargs="dict(optimizer_class=RMSpropTFLike, "
                                     "optimizer_kwargs=dict(eps=1e-5))"))
    assert algorithm_kwargs(zoo_a2c)["policy_kwargs"] == {
        "optimizer_class": RMSpropTFLike, "optimizer_kwargs": {"eps": 1e-5}}
    for text, message in [
            ("dict(net_arch=[8], activation_fn=__import__('os').system('true'))",
             "a literal .* or a class named as the zoo does"),
            ("dict(activation_fn=nn.NoSuchLayer)", r"nn.NoSuchLayer: no such class in torch.nn"),
            ("dict(activation_fn=os.path)", r"os.path: name a class as the zoo does"),
            ("[64, 64]", r"a dict\(...\) call or a \{...\} literal"),
            ("dict(net_arch=[8]", "not a Python expression")]:
        with pytest.raises(ConfigError, match=r"^z: AutoProfiler-v0.policy_kwargs: the zoo's "
                                              r"form is a string .*: " + message):
            config_from_dict(_tiny(policy_kwargs=text), "z")


def _with(change):
    given = copy.deepcopy(TINY)
    change(given["AutoProfiler-v0"], given["autoprofiler"])
    return given


BAD = [
    (lambda c, o: c.update(n_timestep=10), r"AutoProfiler-v0.n_timestep: not a parameter of "
                                           r"MaskablePPO"),
    (lambda c, o: c.pop("n_timesteps"), r"AutoProfiler-v0.n_timesteps: missing"),
    (lambda c, o: o.update(algorithm="sac"), r"autoprofiler.algorithm: unknown algorithm "
                                             r"'sac': one of maskable_ppo, ppo, a2c, dqn, qrdqn, "
                                             r"recurrent_ppo, trpo"),
    (lambda c, o: o.pop("algorithm"), r"autoprofiler.algorithm: missing"),
    (lambda c, o: o.update(algo="ppo"), r"autoprofiler.algo: unknown key \(did you mean "
                                        r"autoprofiler.algorithm\?\)"),
    (lambda c, o: c.update(policy="MlpPolicyy"), r"AutoProfiler-v0.policy: 'MlpPolicyy' is not "
                                                 r"a policy of MaskablePPO"),
    (lambda c, o: c.update(n_step=8),
     r"AutoProfiler-v0.n_step: not a parameter of MaskablePPO \(did you mean n_steps\?\)"),
    (lambda c, o: c.update(learning_rate="fast"),
     r"AutoProfiler-v0.learning_rate: a number or a linear schedule"),
    (lambda c, o: c.update(batch_size=6.5), r"AutoProfiler-v0.batch_size: a whole number >= 1"),
    (lambda c, o: c.update(normalize_advantage="yes"),
     r"AutoProfiler-v0.normalize_advantage: true or false"),
    (lambda c, o: c.update(seed=1),
     r"AutoProfiler-v0.seed: not a hyperparameter: it is set by the --seed option"),
    (lambda c, o: c.update(policy_kwargs={"activation_fn": "tanh"}),
     r"AutoProfiler-v0.policy_kwargs.activation_fn: a class: write policy_kwargs as the zoo "
     r"does, a string such as \"dict\(net_arch=\[64, 64\], activation_fn=nn.ReLU\)\""),
    (lambda c, o: c.update(normalize=True), r"AutoProfiler-v0.normalize: autoprofiler train "
                                            r"does not normalize"),
    (lambda c, o: c.update(env_wrapper=["gymnasium.wrappers.TimeLimit"]),
     r"AutoProfiler-v0.env_wrapper: a key of rl-baselines3-zoo that autoprofiler train does "
     r"not apply"),
    (lambda c, o: c["env_kwargs"].update(budgt=0.3),
     r"AutoProfiler-v0.env_kwargs.budgt: not a make kwarg of the environment \(did you mean "
     r"budget\?\)"),
    (lambda c, o: c["env_kwargs"].update(cost_penalty="high"),
     r"AutoProfiler-v0.env_kwargs.cost_penalty: a number"),
    (lambda c, o: c.update(env_kwargs=[1, 2]), r"AutoProfiler-v0.env_kwargs: a mapping"),
    (lambda c, o: c.update(n_envs=0), r"AutoProfiler-v0.n_envs: a whole number >= 1, got 0"),
    (lambda c, o: c.update(n_envs="2"), r"AutoProfiler-v0.n_envs: a whole number >= 1, "
                                        r"got '2'"),
    (lambda c, o: o.update(vec_env="ray"), r"autoprofiler.vec_env: one of dummy, subproc, "
                                           r"got 'ray'"),
    (lambda c, o: c.update(n_timesteps="1e5"), r"AutoProfiler-v0.n_timesteps: a whole number"),
    (lambda c, o: o["eval"].update(frequncy=5), r"autoprofiler.eval.frequncy: unknown key "
                                                r"\(did you mean autoprofiler.eval.frequency\?\)"),
    (lambda c, o: o["eval"].update(budgets=[]), r"autoprofiler.eval.budgets: a non-empty list"),
    (lambda c, o: o["eval"].update(budgets=[10**400]),  # YAML reads 1 and 400 zeros as an int
     r"autoprofiler.eval.budgets: a non-empty list"),
    (lambda c, o: o["eval"].update(budgets=[0.25, 0.5, 0.250]),  # weighed twice, logged once
     r"autoprofiler.eval.budgets: each budget once; 0.25 is given more than once"),
    (lambda c, o: c.update(gamma=10**400), r"AutoProfiler-v0.gamma: a number"),
    (lambda c, o: o["eval"].update(split="validation"),
     r"autoprofiler.eval.split: one of train, val, test"),
    # the best model would be chosen on the problems it is then reported on
    (lambda c, o: o["eval"].update(split="test"),
     r"autoprofiler.eval.split: the evaluation chooses the best model \(and tune's trials\): "
     r"on the test split"),
    (lambda c, o: c["env_kwargs"].update(split="test"),
     r"AutoProfiler-v0.env_kwargs.split: a policy trained on the test split leaves no "
     r"held-out problems"),
]
@pytest.mark.parametrize("change, message", BAD, ids=[m.split(":")[0] for _, m in BAD])
def test_a_bad_config_is_one_error_naming_the_key(change, message):
    with pytest.raises(ConfigError, match=f"^bad.yaml: {message}"):
        config_from_dict(_with(change), "bad.yaml")


def test_sb3_contribs_recurrent_ppo_and_trpo_are_named_as_here_or_as_the_zoo_names_them(
        tmp_path):
    """RecurrentPPO (the zoo's ppo_lstm) and TRPO are trained; a config names them, or a file
    is named after them as the zoo's hyperparams/<algo>.yml; RecurrentPPO's default policy is
    the Dict observation's LSTM one. ARS, which takes no Dict observation, is refused saying
    so, not as an unknown algorithm."""
    from agents.rl.config import read_config

    def recurrent(c, o):
        o.update(algorithm="ppo_lstm")
        c.pop("policy")

    config = config_from_dict(_with(recurrent), "f")
    assert (config.algorithm, config.policy) == ("recurrent_ppo", "MultiInputLstmPolicy")
    with pytest.raises(ConfigError, match=r"'MultiInputPolicy' is not a policy of RecurrentPPO"
                                          r".*\(the observation is a Dict: "
                                          r"MultiInputLstmPolicy\)"):
        config_from_dict(_with(lambda c, o: o.update(algorithm="recurrent_ppo")), "f")
    for name, algorithm in (("ppo_lstm", "recurrent_ppo"), ("trpo", "trpo")):
        given = _with(lambda c, o: (o.pop("algorithm"), c.pop("policy"), c.pop("n_epochs")))
        (tmp_path / f"{name}.yml").write_text(yaml.safe_dump(given))
        assert read_config(tmp_path / f"{name}.yml")[0].algorithm == algorithm
    with pytest.raises(ConfigError, match=r"'ars' \(ARS\) is not trained .* \(ARS takes no "
                                          r"Dict observation"):
        config_from_dict(_with(lambda c, o: o.update(algorithm="ars")), "f")


def test_a_file_without_the_environments_entry_says_what_a_config_is():
    with pytest.raises(ConfigError, match=r"^f: no AutoProfiler-v0 key \(is 'AutoProfiler-v1' "
                                          r"a misspelling\?\): a config maps the environment"):
        config_from_dict({"AutoProfiler-v1": TINY["AutoProfiler-v0"]}, "f")
    with pytest.raises(ConfigError, match=r"^f: a config maps the environment id"):
        config_from_dict(["AutoProfiler-v0"], "f")
    # the zoo's fallback entry, and the algorithm named by the file, as the zoo's <algo>.yml
    zoo = {"CartPole-v1": {"n_timesteps": 1}, "default": TINY["AutoProfiler-v0"]}
    assert config_from_dict(zoo, "ppo.yml", algorithm="ppo").algorithm == "ppo"


def test_values_the_env_or_sb3_check_are_named_when_built():
    bad_range = config_from_dict(_with(lambda c, o: c["env_kwargs"].update(
        budget_range=[0.5])), "b")
    with pytest.raises(ConfigError, match=r"^b: AutoProfiler-v0.env_kwargs: budget_range must "
                                          r"be a list \[low, high\]"):
        make_train_env(bad_range, seed=0, source="b")
    bad_split = config_from_dict(_with(lambda c, o: c["env_kwargs"].update(split="nope")), "b")
    with pytest.raises(ConfigError, match=r"^b: AutoProfiler-v0.env_kwargs: no problems in "
                                          r"split 'nope'"):
        make_train_env(bad_split, seed=0, source="b")
    bad_arch = config_from_dict(_tiny(policy_kwargs="dict(net_arch='wide')"), "b")
    env = make_train_env(config_from_dict(TINY).replace(n_envs=1), seed=0)
    try:
        with pytest.raises(ConfigError, match=r"^b: AutoProfiler-v0: MaskablePPO refused its "
                                              r"arguments"):
            build_model(bad_arch, env, seed=0, source="b")
    finally:
        env.close()


def test_the_command_reports_a_bad_config_in_one_line(tmp_path, capsys):
    from experiments.cli import main

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_tiny(n_step=8)))
    assert main(["train", "--config", str(path), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"autoprofiler: error: {path}: AutoProfiler-v0.n_step: not a parameter of "
                   f"MaskablePPO (did you mean n_steps?); its parameters are "
                   + err[0].split("its parameters are ")[1]]
    path.write_text("AutoProfiler-v0: [maskable_ppo\n")
    assert main(["train", "--config", str(path)]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    path.write_text("AutoProfiler-v0: {n_timesteps: 1" + "0" * 5000 + "}\n")  # YAML's int raises
    assert main(["train", "--config", str(path)]) == 2
    assert "not a config Python can read (Exceeds the limit" in capsys.readouterr().err
    path.write_text("AutoProfiler-v0:\n  n_timesteps: 64\n  n_timesteps: 128\n")
    assert main(["train", "--config", str(path)]) == 2
    assert ("not valid YAML (line 3): found the key 'n_timesteps' twice in one mapping"
            in capsys.readouterr().err)
    assert main(["train", "--config", "sac"]) == 2
    assert "no such file, nor a shipped config (one of a2c, dqn" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_the_training_threads_are_the_zoos_num_threads_and_recorded(tmp_path, capsys):
    """``--num-threads`` as rl-baselines3-zoo's train takes it (-1: torch's default); the
    threads a model was trained with are in its run.json (one thread and two give other
    models of one seed)."""
    import torch

    from experiments.cli import main

    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(_with(lambda c, o: c.update(n_timesteps=64) or o[
        "eval"].update(frequency=64))))
    for bad in ("0", "-2"):
        assert main(["train", "--config", str(path), "--num-threads", bad]) == 2
        assert f"--num-threads {bad}: a count of threads >= 1, or -1" in capsys.readouterr().err
    before = torch.get_num_threads()
    try:
        given = before + 1  # conftest.py sets one thread: another count, to be set
        assert main(["train", "--config", str(path), "--out", str(tmp_path / "run"),
                     "--num-threads", str(given)]) == 0
        assert torch.get_num_threads() == given
    finally:
        torch.set_num_threads(before)
    numerics = json.loads((tmp_path / "run" / "run.json").read_text())["numerics"]
    assert numerics["torch_threads"] == given


def test_the_wandb_offline_run_holds_the_training_curves(tmp_path, monkeypatch, capsys,
                                                        fresh_wandb):
    from experiments.cli import main
    from experiments.wandb_offline import read_offline_run

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    given = _with(lambda c, o: c.update(n_timesteps=512, n_envs=1) or o["eval"].update(
        frequency=256))
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(given))
    assert main(["train", "--config", "tiny.yaml", "--out", "run", "--seed", "1",
                 "--wandb", "--wandb-group", "test-group"]) == 0
    assert "best (step" in capsys.readouterr().out
    # the run directory, as run.json names it
    identity = json.loads(Path("run/run.json").read_text())["wandb"]
    assert identity["mode"] == "offline" and identity["group"] == "test-group"
    run = read_offline_run(Path(identity["dir"]).parent, wait_s=30)
    assert run.finished  # wandb may still be flushing the file after finish() returns
    assert run.path.name == f"run-{identity['id']}.wandb"
    assert run.group == "test-group" and run.job_type == "train" and run.name == "tiny-seed1"
    assert run.exit_code == 0  # finished, not failed
    assert run.config["algorithm"] == "maskable_ppo" and run.config["seed"] == 1
    assert run.config["dataset_sha256"] == json.loads(Path("run/run.json").read_text())[
        "dataset_sha256"]
    # SB3's logger: one row per update (64 steps each), against environment steps
    losses = run.curve("train/loss")
    assert [step for step, _ in losses] == list(range(128, 513, 64))
    assert all(math.isfinite(v) for _, v in losses)
    assert [s for s, _ in run.curve("rollout/ep_rew_mean")] == list(range(64, 513, 64))
    assert run.curve("episode/log_speedup") and run.curve("episode/sections")
    # the evaluations, as evaluations.jsonl has them
    lines = read_jsonl(Path("run/evaluations.jsonl"))
    assert run.curve("eval/geomean_speedup") == [(line["step"], pytest.approx(
        line["geomean_speedup"])) for line in lines]
    assert [s for s, _ in run.curve("eval/budget=0.25/geomean_speedup")] == [256, 512]
    # SB3's EvalCallback's two, as evaluations.npz (SB3's format) has the episodes: the
    # default reward's return is the episode's log score
    npz = np.load("run/evaluations.npz")
    assert run.curve("eval/mean_reward") == [(int(t), pytest.approx(float(r.mean()))) for t, r
                                             in zip(npz["timesteps"], npz["results"])]
    assert run.curve("eval/mean_ep_length") == [
        (int(t), pytest.approx(float(n.mean()))) for t, n in zip(npz["timesteps"],
                                                                   npz["ep_lengths"])]
    assert run.summary["best/geomean_speedup"] == pytest.approx(
        max(line["geomean_speedup"] for line in lines))
    assert f"model-{run.run_id}" in run.artifacts
    assert run.curve("evaluations/_type") == [(512, "image-file")]  # evaluations.png


def test_subproc_vec_env_trains_and_its_subprocesses_do_not_repeat_the_warnings(tmp_path):
    """The KernelBench dataset warns of its ill-posed problems when an environment is made:
    the command says it once, where each subprocess said it again, in Python's format and
    pointed at multiprocessing/process.py. A command of its own: in this process, another
    test's SubprocVecEnv may have started the forkserver, whose output no capture sees."""
    import subprocess
    import sys

    given = _with(lambda c, o: c.update(n_timesteps=256) or c["env_kwargs"].update(
        dataset="kernelbench") or o.update(vec_env="subproc") or o["eval"].update(
        frequency=128, budgets=[0.25]))
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(given))
    done = subprocess.run([sys.executable, "-m", "experiments.cli", "train", "--config",
                           str(tmp_path / "tiny.yaml"), "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    for rank in (0, 1):  # each subprocess's Monitor wrote its episodes
        lines = (tmp_path / "run" / f"{rank}.monitor.csv").read_text().splitlines()
        assert lines[1] == "r,l,t,problem,sections,cost,speedup,correct" and len(lines) > 10
    said = [line for line in done.stderr.splitlines() if "left out" in line]
    assert len(said) == 1 and said[0].startswith("autoprofiler: warning: "), done.stderr


def test_a_directory_that_is_not_a_finished_run_is_named(tmp_path):
    from agents.rl import load_run
    from autoprofiler_env.errors import AutoProfilerError

    with pytest.raises(AutoProfilerError, match=r"no run.json; not a run directory of "
                                                r"`autoprofiler train"):
        load_run(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"algorithm": "ppo", "status": "running"}))
    with pytest.raises(AutoProfilerError, match=r"no best_model.zip \(the run's status: "
                                                r"running"):
        load_run(tmp_path)


def test_a_run_directory_of_rl_baselines3_zoo_loads_as_the_zoo_laid_it_out(tmp_path):
    """rl_zoo3.train's layout (rl_zoo3 2.9.2, trained from experiments/configs/ppo.yaml):
    logs/ppo/AutoProfiler-v0_1/{AutoProfiler-v0.zip, best_model.zip, AutoProfiler-v0/
    {config.yml, args.yml}}; the config as the zoo saves it (an OrderedDict's YAML)."""
    from stable_baselines3 import PPO

    from agents.rl import load_run, zoo_env_kwargs, zoo_run
    from autoprofiler_env.errors import AutoProfilerError
    from experiments.policies import learned_elsewhere, load

    env = gym.make("AutoProfiler-v0", split="val")
    run = tmp_path / "logs" / "ppo" / "AutoProfiler-v0_1"
    (run / "AutoProfiler-v0").mkdir(parents=True)
    (run / "AutoProfiler-v0" / "config.yml").write_text(
        "!!python/object/apply:collections.OrderedDict\n- - - n_timesteps\n    - 2048\n"
        "  - - policy\n    - MultiInputPolicy\n")
    final, best = (PPO("MultiInputPolicy", env, seed=seed, n_steps=64, batch_size=64)
                   for seed in (0, 1))
    final.save(run / "AutoProfiler-v0.zip")
    assert zoo_run(run) == "AutoProfiler-v0" and zoo_run(tmp_path) is None
    with pytest.raises(AutoProfilerError, match=r"no best_model.zip \(the zoo writes it when "
                                                r"--eval-freq .* give sb3:.*AutoProfiler-v0.zip"):
        load_run(run)
    best.save(run / "best_model.zip")
    obs, _ = env.reset(seed=0)
    for which, model in (("best", best), ("final", final)):
        loaded = load_run(run, which=which)
        assert type(loaded) is PPO
        assert np.array_equal(loaded.predict(obs, deterministic=True)[0],
                              model.predict(obs, deterministic=True)[0])
        for key, value in model.policy.state_dict().items():
            assert torch.equal(loaded.policy.state_dict()[key], value)
    entry = load(f"sb3:{run}", env)  # the benchmark's --policy sb3:DIR
    suite = env.unwrapped.backend.dataset.metadata["sha256"]
    assert entry.name == f"sb3:{run}" and entry.learned_on == suite  # no dataset: the default
    assert learned_elsewhere(entry, env) == []
    # the env kwargs the zoo saved (args.yml's override config.yml's, as rl_zoo3.enjoy reads
    # them) bear on what the benchmark warns about
    (run / "AutoProfiler-v0" / "args.yml").write_text(
        "!!python/object/apply:collections.OrderedDict\n- - - algo\n    - ppo\n"
        "  - - env_kwargs\n    - budget_unit: sections\n")
    assert zoo_env_kwargs(run) == {"budget_unit": "sections"}
    [said] = learned_elsewhere(load(f"sb3:{run}", env), env)
    assert "budget_unit='sections' there, 'seconds' here" in said
    # the zoo saves no dataset checksum: the dataset its env_kwargs name is compared, as an
    # `autoprofiler train` run's sha256 is (--env-kwargs dataset:"'kernelbench'")
    (run / "AutoProfiler-v0" / "args.yml").write_text(
        "!!python/object/apply:collections.OrderedDict\n- - - algo\n    - ppo\n"
        "  - - env_kwargs\n    - dataset: kernelbench\n")
    [said] = learned_elsewhere(load(f"sb3:{run}", env), env)
    assert said.startswith(f"sb3:{run} was learned on another dataset (sha256 ")
    assert f"(the default, sha256 {suite[:12]}...)" in said
    (run / "AutoProfiler-v0" / "args.yml").write_text(
        "!!python/object/apply:collections.OrderedDict\n- - - algo\n    - ppo\n"
        "  - - env_kwargs\n    - dataset: elsewhere/mine.json.gz\n")
    [said] = learned_elsewhere(load(f"sb3:{run}", env), env)
    assert ("was learned on the dataset 'elsewhere/mine.json.gz' (its rl-baselines3-zoo "
            "env_kwargs), which cannot be read from here") in said
    # read with a safe loader: a Python object named inside env_kwargs is never made (the
    # file would exist), and settings that hold one cannot be known
    marker = tmp_path / "made"
    (run / "AutoProfiler-v0" / "args.yml").write_text(
        "!!python/object/apply:collections.OrderedDict\n- - - env_kwargs\n"
        f"    - split: !!python/object/apply:os.system [\"touch {marker}\"]\n")
    assert zoo_env_kwargs(run) is None and not marker.exists()
    # the zoo's tuples (an --env-kwargs value given as one) are read as tuples
    (run / "AutoProfiler-v0" / "args.yml").write_text(
        "!!python/object/apply:collections.OrderedDict\n- - - env_kwargs\n"
        "    - budget_range: !!python/tuple [0.05, 1.0]\n")
    assert zoo_env_kwargs(run) == {"budget_range": (0.05, 1.0)}
    # a study's best trial names classes in config.yml (`--trial-id`): read as text, and the
    # run's env_kwargs still are
    (run / "AutoProfiler-v0" / "args.yml").unlink()
    (run / "AutoProfiler-v0" / "config.yml").write_text(
        "!!python/object/apply:collections.OrderedDict\n"
        "- - - activation_fn\n    - !!python/name:torch.nn.modules.activation.Tanh ''\n"
        "  - - env_kwargs\n    - budget_unit: passes\n")
    assert zoo_env_kwargs(run) == {"budget_unit": "passes"}
    (run / "AutoProfiler-v0" / "vecnormalize.pkl").write_bytes(b"")
    with pytest.raises(AutoProfilerError, match="trained it with `normalize`"):
        load_run(run)


# -- an interrupted run resumes -------------------------------------------------------------

def _interrupt_at(monkeypatch, step: int, seen: dict | None = None) -> None:
    """Ctrl-C once the run reaches ``step``: a KeyboardInterrupt raised inside
    ``model.learn`` (from a callback, where SIGINT would raise it too); ``seen`` gets the
    model's replay buffer's size at that moment."""
    from agents.rl.callbacks import EpisodeOutcomeCallback

    original, armed = EpisodeOutcomeCallback._on_step, [True]

    def on_step(self):
        if armed[0] and self.num_timesteps >= step:
            armed[0] = False
            if seen is not None and getattr(self.model, "replay_buffer", None) is not None:
                seen["interrupted"] = self.model.replay_buffer.size()
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(EpisodeOutcomeCallback, "_on_step", on_step)


def _interrupted(tmp_path: Path, monkeypatch, steps: int = 512, frequency: int = 256):
    """A one-environment run of ``steps`` steps evaluated every ``frequency``, interrupted
    (Ctrl-C) at step 300; its folder and config."""
    out = tmp_path / "run"
    config = config_from_dict(_with(lambda c, o: c.update(n_timesteps=steps, n_envs=1)
                                    or o["eval"].update(frequency=frequency, budgets=[1.0])))
    _interrupt_at(monkeypatch, 300)
    with pytest.raises(KeyboardInterrupt):
        train(config, out, progress=False)
    return out, config


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_an_interrupted_run_resumes_where_it_stopped(tmp_path, monkeypatch):
    from experiments.policies import load

    out, config = tmp_path / "run", config_from_dict(TINY, "tiny")
    args = {"seed": 3, "given": TINY, "source": "tiny", "progress": False,
            "command": ["autoprofiler", "train", "test"]}
    _interrupt_at(monkeypatch, 1100)  # mid-rollout (128 steps each), after the 1000's evaluation
    with pytest.raises(KeyboardInterrupt):
        train(config, out, **args)
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "interrupted" and run["steps"] == 1100 and run["seconds"] > 0
    assert run["unlearned"] == 1100 - 1024  # the rollout under way, from step 1024
    assert (out / "model.zip").is_file() and not (out / "replay_buffer.pkl").exists()
    assert [line["step"] for line in read_jsonl(out / "evaluations.jsonl")] == [1000]
    _check_npz(out, read_jsonl(out / "evaluations.jsonl"))
    before = {name: _lines(out / name) for name in (
        "progress.csv", "0.monitor.csv", "1.monitor.csv")}

    result = train(config, out, **args)  # the same call again: it resumes
    # SB3 goes on from step 1100 in whole rollouts to the total (2000): 1100 + 8 x 128
    assert result.steps == 2124 and result.seconds > run["seconds"]
    lines = read_jsonl(out / "evaluations.jsonl")
    assert [line["step"] for line in lines] == [1000, 2124] == [
        e.step for e in result.evaluations]
    _check_npz(out, lines)  # the interrupted run's evaluation, then the resumed run's
    # the best is kept across the interruption: an evaluation is the best only if it beats
    # every one before it, the 1000's included
    assert [line["best"] for line in lines] == [
        i == 0 or line["objective"] > max(e["objective"] for e in lines[:i])
        for i, line in enumerate(lines)]
    best = max(lines, key=lambda line: line["objective"])  # the first of the highest
    assert best["best"] and result.best.step == best["step"]
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "finished" and run["steps"] == 2124 and run["resumed"] == [1100]
    assert run["best"]["step"] == best["step"] and run["last"]["step"] == 2124
    assert run["command"] == ["autoprofiler", "train", "test"] and run["config_given"] == TINY
    val = make_eval_env(config)
    entry = load(f"sb3:{out}", val)  # best_model.zip: the best of all the evaluations
    for budget in ("0.25", "1"):
        records = rollout(val, entry.policy, budget=float(budget), seed=3)
        assert score(records) == pytest.approx(best["budgets"][budget]["geomean_speedup"])
    # SB3's logger and the monitors were appended to, not started anew
    for name, kept in before.items():
        now = _lines(out / name)
        assert len(now) > len(kept) and now[0] == kept[0], name
    progress = [row.split(",") for row in _lines(out / "progress.csv")]
    column = progress[0].index("time/total_timesteps")
    steps = [int(row[column]) for row in progress[1:] if row[column]]
    assert steps[:steps.index(1000) + 1] == [128 * i for i in range(1, 8)] + [1000]
    assert max(steps) == 2124 and 1228 in steps and steps == sorted(steps)
    for rank in (0, 1):  # an episode's t keeps counting from the file's t_start
        times = [float(row.split(",")[2]) for row in _lines(out / f"{rank}.monitor.csv")[2:]]
        assert times == sorted(times)
    # finished, it is never trained again
    with pytest.raises(Exception, match=r"holds a run already \(run.json\): give another "
                                        r"--out, or remove the directory to train again$"):
        train(config, out, **args)


def test_a_run_interrupted_in_its_last_rollout_learns_from_it_when_resumed(tmp_path,
                                                                           monkeypatch):
    """Ctrl-C at step 2010 of 2000 (the last rollout, 1920-2048, collected past the total but
    not learned from): the resumed run learned nothing, one update short of an
    uninterrupted run, and called itself finished. It collects that rollout again now."""
    from sb3_contrib import MaskablePPO

    out, config = tmp_path / "run", config_from_dict(TINY, "tiny")
    _interrupt_at(monkeypatch, 2010)
    with pytest.raises(KeyboardInterrupt):
        train(config, out, progress=False)
    run = json.loads((out / "run.json").read_text())
    assert (run["steps"], run["unlearned"]) == (2010, 90)
    result = train(config, out, progress=False)
    assert result.steps == 2010 + 128 and "unlearned" not in json.loads(
        (out / "run.json").read_text())
    epochs = TINY["AutoProfiler-v0"]["n_epochs"]
    assert MaskablePPO.load(out / "model.zip")._n_updates == 16 * epochs


@pytest.mark.parametrize("killed", [False, True])
def test_a_run_stopped_again_in_its_first_resumed_rollout_still_owes_the_first(
        tmp_path, monkeypatch, killed):
    """A review: stopped at 1900 (the rollout from 1792 unlearned), resumed, then stopped
    again at 1950 (Ctrl-C: counted from 1900 only) or killed before a checkpoint (the
    resumed run's record had dropped what model.zip still owed): both finished with 15
    updates of 16."""
    from sb3_contrib import MaskablePPO

    from agents.rl.callbacks import EpisodeOutcomeCallback
    from experiments.train import read_run

    out, config = tmp_path / "run", config_from_dict(TINY, "tiny")
    _interrupt_at(monkeypatch, 1900)
    with pytest.raises(KeyboardInterrupt):
        train(config, out, progress=False)
    assert read_run(out)["unlearned"] == 1900 - 1792
    if killed:  # dies (not Ctrl-C: nothing saved) at step 1950, before its next checkpoint
        original = EpisodeOutcomeCallback._on_step

        def dies(self):
            if self.num_timesteps >= 1950:
                raise RuntimeError("killed")
            return original(self)

        monkeypatch.setattr(EpisodeOutcomeCallback, "_on_step", dies)
        with pytest.raises(RuntimeError, match="killed"):
            train(config, out, progress=False)
        monkeypatch.setattr(EpisodeOutcomeCallback, "_on_step", original)
        assert read_run(out)["status"] == "running"
        assert read_run(out)["unlearned"] == 1900 - 1792  # model.zip's, still
    else:
        _interrupt_at(monkeypatch, 1950)
        with pytest.raises(KeyboardInterrupt):
            train(config, out, progress=False)
        assert read_run(out)["unlearned"] == 1950 - 1792
    train(config, out, progress=False)
    epochs = TINY["AutoProfiler-v0"]["n_epochs"]
    assert MaskablePPO.load(out / "model.zip")._n_updates == 16 * epochs
    assert "unlearned" not in read_run(out)


def test_a_run_interrupted_in_the_layout_before_resumes_in_it(tmp_path, monkeypatch):
    """A run interrupted when its monitor files were in monitor/ and its evaluations.jsonl
    had no per-episode values (no evaluations.npz): the monitor files there are appended
    to, and evaluations.npz holds the evaluations made from the resumption on."""
    out, config = _interrupted(tmp_path, monkeypatch)
    (out / "monitor").mkdir()
    (out / "0.monitor.csv").rename(out / "monitor" / "0.monitor.csv")
    (out / "evaluations.npz").unlink()
    lines = read_jsonl(out / "evaluations.jsonl")
    for line in lines:
        for result in line["budgets"].values():
            del result["log_scores"], result["lengths"]
    (out / "evaluations.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    before = _lines(out / "monitor" / "0.monitor.csv")

    with pytest.warns(UserWarning, match=r"evaluations.npz: leaves out the 1 restored "
                                         r"evaluation\(s\) without per-episode scores "
                                         r"\(step 256: evaluations.jsonl has none"):
        result = train(config, out, progress=False)
    # SB3 goes on from step 300 in whole rollouts (64 steps) to the total: 300 + 4 x 64
    assert result.steps == 556 and [e.step for e in result.evaluations] == [256, 556]
    now = _lines(out / "monitor" / "0.monitor.csv")
    assert len(now) > len(before) and now[:len(before)] == before
    assert not list(out.glob("*.monitor.csv"))
    lines = read_jsonl(out / "evaluations.jsonl")
    assert "log_scores" not in lines[0]["budgets"]["1"]
    _check_npz(out, lines[1:])


def test_the_command_resumes_only_the_runs_own_config(tmp_path, monkeypatch, capsys):
    from experiments.cli import main

    monkeypatch.chdir(tmp_path)
    given = _with(lambda c, o: c.update(n_timesteps=512, n_envs=1) or o["eval"].update(
        frequency=256, budgets=[1.0]))
    Path("tiny.yaml").write_text(yaml.safe_dump(given))
    command = ["train", "--config", "tiny.yaml", "--out", "run", "--seed", "1"]
    _interrupt_at(monkeypatch, 300)
    assert main(command) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "autoprofiler: error: interrupted: run the same command again to resume it (what was "
        "done is kept)")
    assert json.loads(Path("run/run.json").read_text())["status"] == "interrupted"

    def refused(args) -> str:
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("autoprofiler: error: run: cannot resume "
                                                   "an interrupted run: ")
        return err[0].split("cannot resume an interrupted run: ")[1]

    assert refused(command + ["--steps", "600"]).startswith(
        "AutoProfiler-v0.n_timesteps (or --steps) is 600 now, the run's is 512: resume it "
        "with the run's --config, --steps and --seed")
    changed = copy.deepcopy(given)
    changed["AutoProfiler-v0"]["learning_rate"] = "lin_2.0e-3"
    Path("changed.yaml").write_text(yaml.safe_dump(changed))
    assert refused(["train", "--config", "changed.yaml", "--out", "run", "--seed", "1"]
                   ).startswith('AutoProfiler-v0.learning_rate is "lin_2.0e-3" now, the '
                                "run's is \"lin_1.0e-3\"")
    changed = _with(lambda c, o: c.update(n_timesteps=512, n_envs=1) or o["eval"].update(
        frequency=128, budgets=[1.0]))
    Path("changed.yaml").write_text(yaml.safe_dump(changed))
    assert refused(["train", "--config", "changed.yaml", "--out", "run", "--seed", "1"]
                   ).startswith("autoprofiler.eval.frequency is 128 now, the run's is 256")
    assert refused(command[:-1] + ["2"]).startswith("--seed is 2 now, the run's is 1")
    run = json.loads(Path("run/run.json").read_text())
    Path("run/run.json").write_text(json.dumps(run | {"dataset_sha256": "0" * 64}))
    assert refused(command).startswith(f"it was trained on the dataset of sha256 {'0' * 64}, "
                                       f"the environment's now is {run['dataset_sha256']}")
    Path("run/run.json").write_text(json.dumps(run))
    with pytest.raises(ConfigError, match=r"^run: cannot resume an interrupted run: "
                                          r"AutoProfiler-v0.n_envs is 2 now, the run's is 1"):
        train(config_from_dict(given).replace(n_envs=2), Path("run"), seed=1, progress=False)
    assert json.loads(Path("run/run.json").read_text())["status"] == "interrupted"
    # the run's own command resumes it
    assert main(command) == 0
    assert "resuming an interrupted run in run at step 300 of 512" in capsys.readouterr().out
    run = json.loads(Path("run/run.json").read_text())
    assert run["status"] == "finished" and run["resumed"] == [300] and run["steps"] >= 512
    assert [line["step"] for line in read_jsonl(Path("run/evaluations.jsonl"))] == [
        256, run["steps"]]  # the one due at 512, the total, is the end's
    assert main(command) == 2
    assert "holds a run already (run.json): give another --out" in capsys.readouterr().err


def test_an_interrupted_wandb_run_is_failed_with_its_model_and_a_disabled_one_is_not_named(
        tmp_path, monkeypatch, capsys, fresh_wandb):
    """Ctrl-C: the wandb run ends failed (exit code 1), with the saved model and run folder
    as its artifact (what the resumption starts from); a resumption with WANDB_MODE=disabled
    names no wandb run in run.json (a disabled run writes nothing)."""
    from experiments.cli import main
    from experiments.wandb_offline import read_offline_run

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    given = _with(lambda c, o: c.update(n_timesteps=512, n_envs=1) or o["eval"].update(
        frequency=256, budgets=[1.0]))
    Path("tiny.yaml").write_text(yaml.safe_dump(given))
    command = ["train", "--config", "tiny.yaml", "--out", "run", "--wandb"]
    _interrupt_at(monkeypatch, 300)
    assert main(command) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "autoprofiler: error: interrupted: run the same command again to resume it (what was "
        "done is kept)")
    identity = json.loads(Path("run/run.json").read_text())["wandb"]
    run = read_offline_run(Path(identity["dir"]).parent, wait_s=30)
    assert run.finished and run.exit_code == 1 and run.name == "tiny-seed0"
    assert run.artifacts == [f"model-{run.run_id}"]
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert main(command) == 0
    meta = json.loads(Path("run/run.json").read_text())
    assert meta["status"] == "finished" and meta["wandb"] == identity
    assert meta["wandb_resumed"] == [None]


@pytest.mark.parametrize("status, said", [
    ("interrupted", "an interrupted run"),
    # killed (SIGKILL) before its first evaluation's checkpoint: its status stays running
    ("running", "a run that was killed before it finished")])
def test_a_run_stopped_before_it_saved_its_model_starts_afresh(tmp_path, status, said):
    out = tmp_path / "run"
    out.mkdir()
    # stopped before it could save: a run.json and a stale evaluation, no model.zip
    (out / "run.json").write_text(json.dumps({"status": status, "steps": 64,
                                              "config": {"n_envs": 7}, "seed": 9}))
    (out / "evaluations.jsonl").write_text(json.dumps({"step": 64}) + "\n")
    config = config_from_dict(_with(lambda c, o: c.update(n_timesteps=256, n_envs=1)
                                    or o["eval"].update(frequency=128, budgets=[1.0])))
    with pytest.warns(UserWarning, match=rf"{said} there has no model.zip .*: "
                                         r"trained afresh from step 0"):
        result = train(config, out, seed=0, progress=False)
    assert result.steps == 256 and [e.step for e in result.evaluations] == [128, 256]
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "finished" and "resumed" not in run and run["seed"] == 0
    assert [line["step"] for line in read_jsonl(out / "evaluations.jsonl")] == [128, 256]


def test_an_interrupted_dqn_run_resumes_with_its_replay_buffer(tmp_path, monkeypatch):
    from agents.rl.callbacks import EpisodeOutcomeCallback

    given = {"AutoProfiler-v0": {
        "policy": "MultiInputPolicy", "n_timesteps": 600, "n_envs": 1,
        "env_kwargs": {"split": "train", "budget_range": [0.05, 1.0]},
        "buffer_size": 2000, "learning_starts": 100, "batch_size": 16, "train_freq": 4,
        "target_update_interval": 100, "gamma": 1.0, "policy_kwargs": "dict(net_arch=[16])"},
        "autoprofiler": {"algorithm": "dqn", "vec_env": "dummy",
                         "eval": {"frequency": 300, "split": "val", "budgets": [1.0]}}}
    config, out, seen = config_from_dict(given, "dqn"), tmp_path / "run", {}
    _interrupt_at(monkeypatch, 400, seen)
    with pytest.raises(KeyboardInterrupt):
        train(config, out, seed=0, progress=False)
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "interrupted" and run["replay_buffer"] == "replay_buffer.pkl"
    assert (out / "replay_buffer.pkl").is_file()
    assert seen["interrupted"] == 399  # the 400th step's transition was not stored yet

    def on_training_start(self):  # the resumed model's replay buffer, before its first step
        seen["resumed"] = self.model.replay_buffer.size()

    monkeypatch.setattr(EpisodeOutcomeCallback, "_on_training_start", on_training_start,
                        raising=False)
    result = train(config, out, seed=0, progress=False)
    assert seen["resumed"] == seen["interrupted"]
    assert result.steps == 600 and [e.step for e in result.evaluations] == [300, 600]
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "finished" and run["resumed"] == [400]
    assert "replay_buffer" not in run and not (out / "replay_buffer.pkl").exists()


def test_sigterm_saves_the_run_as_interrupted_and_the_same_command_resumes_it(tmp_path):
    """A job scheduler's (or timeout's) SIGTERM is Ctrl-C: the run is saved, not lost."""
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(_tiny(n_timesteps=200_000)))
    command = [sys.executable, "-m", "experiments.cli", "train", "--config", "tiny.yaml",
               "--out", "run"]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    monitor = tmp_path / "run" / "0.monitor.csv"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and (
            not monitor.is_file() or len(monitor.read_text().splitlines()) < 50):
        time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 2 and "interrupted" in err, err[-2000:]
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["status"] == "interrupted" and run["steps"] > 0
    assert (tmp_path / "run" / "model.zip").is_file()


def test_ctrl_c_reaching_the_subproc_workers_is_an_interruption_not_a_broken_pipe(
        tmp_path, monkeypatch):
    """Ctrl-C in a terminal reaches the whole process group: a SubprocVecEnv's workers die of
    it too. The run was saved as interrupted, but closing the training environments then met
    the dead workers' pipes (BrokenPipeError, ConnectionResetError) and that error took the
    KeyboardInterrupt's place: the command exited 0 without a word (main takes a
    BrokenPipeError for a reader that closed stdout) or with a traceback."""
    import experiments.train as train_module

    made = []

    def keep(*args, **kwargs):
        made.append(make_train_env(*args, **kwargs))
        return made[-1]

    def ctrl_c(steps, objective):  # the workers' share of the SIGINT, then the main's
        for process in made[0].processes:
            process.terminate()
            process.join()
        raise KeyboardInterrupt

    monkeypatch.setattr(train_module, "make_train_env", keep)
    config = config_from_dict(_with(lambda c, o: c.update(n_timesteps=512) or o.update(
        vec_env="subproc") or o["eval"].update(frequency=128, budgets=[0.25])))
    with pytest.raises(KeyboardInterrupt):
        train(config, tmp_path / "run", seed=0, progress=False, after_evaluation=ctrl_c)
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["status"] == "interrupted" and (tmp_path / "run" / "model.zip").is_file()
    assert made[0].closed and not any(p.is_alive() for p in made[0].processes)


def test_a_linear_schedule_stops_at_zero_past_the_total():
    from agents.rl.config import LinearSchedule

    assert LinearSchedule(1e-3)(0.5) == 5e-4
    assert LinearSchedule(1e-3)(-0.05) == 0.0  # SB3's last rollout past the total


def test_a_run_killed_outright_resumes_from_its_last_evaluations_checkpoint(tmp_path, capsys):
    """SIGKILL (the OOM killer, a lost machine) saves nothing at the kill: every evaluation
    saved the model and the steps, and the same command resumes from there, not from 0, its
    logs cut back to the checkpoint (the steps after it are made again)."""
    import csv
    import signal
    import subprocess
    import sys
    import time

    from experiments.cli import main
    from experiments.train import saved_steps

    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(_with(lambda c, o: c.update(
        n_timesteps=4096, n_envs=1) or o["eval"].update(frequency=256, budgets=[1.0]))))
    out = tmp_path / "run"
    command = ["train", "--config", str(tmp_path / "tiny.yaml"), "--out", str(out)]
    process = subprocess.Popen([sys.executable, "-m", "experiments.cli", *command],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline, logged_past = time.monotonic() + 240, False
    while time.monotonic() < deadline and process.poll() is None and not logged_past:
        try:  # killed once it has logged past a checkpoint: episodes and a rollout
            lines = json.loads((out / "run.json").read_text()).get("log_lines") or {}
            logged_past = bool(lines) and all(
                (out / name).read_bytes().count(b"\n") > lines[name]
                for name in ("progress.csv", "0.monitor.csv"))
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    _, err = process.communicate(timeout=60)
    assert logged_past, err[-2000:]
    killed = json.loads((out / "run.json").read_text())
    checkpoint = saved_steps(out / "model.zip")
    assert killed["status"] == "running" and 256 <= checkpoint < 4096
    # the same command: the killed process's lock went with it, and the run resumes
    assert main(command) == 0
    assert (f"resuming a run that was killed before it finished in {out} at step "
            f"{checkpoint} of 4096") in capsys.readouterr().out
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "finished" and run["resumed"] == [checkpoint]
    steps = [line["step"] for line in read_jsonl(out / "evaluations.jsonl")]
    assert steps == sorted(set(steps)) and steps[0] == 256 and steps[-1] >= 4096
    with (out / "progress.csv").open() as file:  # no rows of the steps made again
        logged = [int(row["time/total_timesteps"]) for row in csv.DictReader(file)]
    assert logged == sorted(logged) and logged[-1] == run["steps"]
    episodes = (out / "0.monitor.csv").read_text().splitlines()[2:]
    assert sum(int(line.split(",")[1]) for line in episodes) <= run["steps"]


def test_a_second_training_into_a_held_folder_is_refused_and_writes_nothing(tmp_path,
                                                                             capsys):
    from experiments.cli import main
    from tests.test_one_writer import holding

    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(_tiny(n_timesteps=256)))
    out = tmp_path / "run"
    with holding(out, "autoprofiler train"):
        assert main(["train", "--config", str(tmp_path / "tiny.yaml"), "--out",
                     str(out)]) == 2
        assert [p.name for p in out.iterdir()] == [".lock"]
    assert re.fullmatch(rf"autoprofiler: error: {re.escape(str(out))} is being written by "
                        r"another process \(process \d+: autoprofiler train\): wait for it to "
                        r"end, or give another --out", capsys.readouterr().err.strip())


def test_a_run_recorded_by_a_newer_package_says_to_upgrade(tmp_path):
    from experiments.train import RUN_SCHEMA, read_run

    (tmp_path / "run.json").write_text(json.dumps({"schema": RUN_SCHEMA + 1,
                                                   "package_version": "9.0"}))
    with pytest.raises(Exception, match=rf"schema {RUN_SCHEMA + 1}, newer than this "
                                        rf"autoprofiler-env reads \({RUN_SCHEMA}\); written by "
                                        r"autoprofiler-env 9.0: upgrade autoprofiler-env"):
        read_run(tmp_path)
    from agents.rl import load_run  # sb3:DIR reads it too

    with pytest.raises(Exception, match=r"upgrade autoprofiler-env to read it"):
        load_run(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"schema": RUN_SCHEMA, "status": "x"}))
    assert read_run(tmp_path)["status"] == "x"


def test_a_damaged_model_of_an_interrupted_run_says_how_to_go_on(tmp_path, monkeypatch):
    from autoprofiler_env.errors import AutoProfilerError

    out, config = _interrupted(tmp_path, monkeypatch)
    model = out / "model.zip"
    model.write_bytes(model.read_bytes()[:100])  # damaged since (a disk, a copy cut short)
    with pytest.raises(AutoProfilerError, match=rf"cannot resume an interrupted run from it; "
                                                rf"remove {re.escape(str(model))} to train it "
                                                r"again from step 0, or give another --out"):
        train(config, out, progress=False)
    model.unlink()  # as the message says
    with pytest.warns(UserWarning, match="an interrupted run there has no model.zip"):
        assert train(config, out, progress=False).steps == 512


def test_a_run_resumed_then_killed_before_its_next_checkpoint_keeps_its_steps(tmp_path,
                                                                          monkeypatch):
    """Until the resumed run's first checkpoint, run.json keeps the interruption's steps and
    time (reviewed: they were dropped at the resumption, so a kill then said "at step None"
    and lost the earlier time)."""
    from agents.rl.callbacks import EpisodeOutcomeCallback

    out, config = _interrupted(tmp_path, monkeypatch, steps=1024, frequency=512)
    interrupted = json.loads((out / "run.json").read_text())

    def lost(self):  # the machine lost before the resumed run's first evaluation
        raise RuntimeError("lost")
    monkeypatch.setattr(EpisodeOutcomeCallback, "_on_step", lost)
    with pytest.raises(RuntimeError):
        train(config, out, progress=False)
    killed = json.loads((out / "run.json").read_text())
    assert killed["status"] == "running" and killed["resumed"] == [300]
    assert killed["steps"] == 300 and killed["seconds"] == interrupted["seconds"]
    monkeypatch.undo()
    result = train(config, out, progress=False)
    run = json.loads((out / "run.json").read_text())
    assert result.steps >= 1024 and run["resumed"] == [300, 300]
    assert run["seconds"] > interrupted["seconds"]


def test_the_last_evaluation_scores_the_saved_final_model(tmp_path, monkeypatch):
    """Reviewed: an evaluation due at the total, inside the last rollout, scored the model
    before the rollout's update, and the end's evaluation of the saved model was passed
    over as one of the same step: "best" and "last" scored a model that was not saved."""
    import zipfile

    import agents.rl.callbacks as callbacks

    seen = []  # the updates each evaluated model had had
    evaluate = callbacks.evaluate

    def counting(env, model, *args, **kwargs):
        seen.append(model._n_updates)
        return evaluate(env, model, *args, **kwargs)
    monkeypatch.setattr(callbacks, "evaluate", counting)
    # rollouts of 128 steps (2 envs x 64): evaluations due at 128 and 256, the total
    config = config_from_dict(_with(lambda c, o: c.update(n_timesteps=256) or o[
        "eval"].update(frequency=128, budgets=[0.25])))
    result = train(config, tmp_path / "run", progress=False)
    assert [e.step for e in result.evaluations] == [128, 256]
    with zipfile.ZipFile(tmp_path / "run" / "model.zip") as model:
        saved = json.loads(model.read("data"))["_n_updates"]
    assert seen[-1] == saved > seen[0]  # the last one after the last rollout's update


def test_a_run_killed_again_after_resuming_keeps_whole_logs_of_each_step_once(tmp_path,
                                                                               monkeypatch):
    """Reviewed: the logs were cut back by bytes (SB3 rewrites progress.csv whole when a key
    first appears, after which a byte offset falls inside a row), and not at all after a
    second kill (the sizes were dropped at the resumption, and an interruption recorded
    none). Evaluations every 32 steps come before the first rollout's dump (64 steps)."""
    import csv

    from agents.rl.callbacks import EpisodeOutcomeCallback

    out = tmp_path / "run"
    config = config_from_dict(_with(lambda c, o: c.update(n_timesteps=384, n_envs=1)
                                    or o["eval"].update(frequency=32, budgets=[1.0])))
    _interrupt_at(monkeypatch, 100)
    with pytest.raises(KeyboardInterrupt):
        train(config, out, progress=False)
    original = EpisodeOutcomeCallback._on_step
    for lost_at in (150, 215):  # killed twice (its status left running), each after logging
        def lost(self, at=lost_at):
            if self.num_timesteps >= at:
                raise RuntimeError("lost")
            return original(self)
        monkeypatch.setattr(EpisodeOutcomeCallback, "_on_step", lost)
        with pytest.raises(RuntimeError):
            train(config, out, progress=False)
        assert json.loads((out / "run.json").read_text())["status"] == "running"
    monkeypatch.undo()
    result = train(config, out, progress=False)
    with (out / "progress.csv").open() as file:
        rows = list(csv.DictReader(file))
    logged = [int(row["time/total_timesteps"]) for row in rows]  # every row whole
    assert logged == sorted(logged) and logged[-1] == result.steps
    episodes = (out / "0.monitor.csv").read_text().splitlines()[2:]
    assert sum(int(line.split(",")[1]) for line in episodes) <= result.steps
    steps = [line["step"] for line in read_jsonl(out / "evaluations.jsonl")]
    assert steps == sorted(set(steps))


def test_a_run_resumes_on_an_upgraded_file_of_its_dataset_and_not_on_another():
    """``dataset upgrade`` writes the same content in a new schema, under a new checksum; the
    file names the old one (``same_content_as``), and a run trained on the old file resumes
    on it."""
    from experiments.train import _check_same_environment

    old, new, other = "a" * 64, "b" * 64, "c" * 64
    run = {"status": "interrupted", "dataset_sha256": old, "env_kwargs": {"budget": 0.25}}
    _check_same_environment(Path("run"), run, {"sha256": new, "same_content_as": [old]},
                            {"budget": 0.25})
    _check_same_environment(Path("run"), run, {"sha256": old}, {"budget": 0.25})
    with pytest.raises(ConfigError, match=f"trained on the dataset of sha256 {old}, the "
                                          f"environment's now is {new}"):
        _check_same_environment(Path("run"), run, {"sha256": new, "same_content_as": [other]},
                                {"budget": 0.25})


def test_run_json_records_the_numerics_a_model_depends_on(tmp_path, monkeypatch):
    # one seed's model differs bit for bit with torch's threads and the CPU's instruction set
    # (MKL's matrix products): run.json says which, so that two runs can be told apart
    from experiments.tracking import numerics

    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")
    given = _tiny(n_timesteps=128)
    train(config_from_dict(given, "tiny"), tmp_path / "run", seed=0, given=given,
          source="tiny", progress=False, command=["autoprofiler", "train", "test"])
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["numerics"] == numerics()
    assert run["numerics"]["torch_threads"] == torch.get_num_threads() == 1  # the fixture's
    assert run["numerics"]["env"]["MKL_CBWR"] == "COMPATIBLE"
    assert run["numerics"]["cpus"] >= 1 and run["numerics"]["machine"]


def test_a_resumption_on_other_numerics_is_recorded_with_its_step(tmp_path, monkeypatch):
    """Reviewed: run.json kept the first machine's numerics through a resumption on another
    CPU or thread count, which changes the model's bits from there on."""
    monkeypatch.delenv("MKL_CBWR", raising=False)
    out, config = _interrupted(tmp_path, monkeypatch)  # Ctrl-C at step 300
    _interrupt_at(monkeypatch, 400)
    with pytest.raises(KeyboardInterrupt):  # resumed on the same numerics: nothing added
        train(config, out, progress=False)
    run = json.loads((out / "run.json").read_text())
    assert len(run["resumed"]) == 1 and "numerics_resumed" not in run
    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")  # as another machine's kernels would differ
    train(config, out, progress=False)
    run = json.loads((out / "run.json").read_text())
    (other,) = run["numerics_resumed"]
    assert other["step"] == run["resumed"][-1] and other["env"]["MKL_CBWR"] == "COMPATIBLE"
    assert "MKL_CBWR" not in run["numerics"]["env"]  # the run's first numerics stay


def test_a_model_copied_out_of_its_run_still_says_what_it_learned_on(tmp_path):
    """A researcher copied best_model.zip out of its run folder: the benchmark then had no
    record of its dataset and warned of nothing. The zip carries the record now."""
    import shutil

    from sb3_contrib import MaskablePPO

    from agents.rl.callbacks import saved_record
    from experiments.policies import load

    out, config = tmp_path / "run", config_from_dict(TINY, "tiny")
    train(config, out, progress=False)
    run = json.loads((out / "run.json").read_text())
    models = tmp_path / "models"
    models.mkdir()
    for name in ("best_model.zip", "model.zip"):
        record = saved_record(out / name)
        assert record["dataset_sha256"] == run["dataset_sha256"], name
        assert record["optimizer"] == run["optimizer"] and record["algorithm"] == "maskable_ppo"
        shutil.copy(out / name, models / name)
    env = make_eval_env(config)
    entry = load(f"sb3:{models / 'best_model.zip'}", env)
    assert entry.learned_on == run["dataset_sha256"]
    assert entry.learned_with["optimizer"] == run["optimizer"]
    bare = models / "bare.zip"  # a model saved by SB3 alone says nothing
    MaskablePPO.load(out / "model.zip").save(bare)
    assert saved_record(bare) is None and load(f"sb3:{bare}", env).learned_on is None
