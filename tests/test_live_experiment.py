"""An experiment evaluated on the live backend (experiments/live.py), on a CPU: the live
backend with the dataset's recorded evidence (no ncu here) judging at the smoke size, one unit
per problem in local processes and in Ray tasks with fake GPUs; each candidate judged once per
problem, the replay's leaderboard format without the oracle, resumable."""

import json
import shutil
import signal
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import autoprofiler_env  # noqa: F401
from autoprofiler_env.dataset.record.fanout import LocalWorkers
from autoprofiler_env.jsonlines import read_jsonl
from experiments.experiment import TRAIN_CHOSEN, ConfigError, load_config, run_experiment
from experiments.live import run_live, write

ROOT = Path(__file__).parents[1]
SMOKE = {"size": "smoke", "timing_budget_ms": 2, "min_trials": 1, "max_trials": 2,
         "warmup_ms": 0}
TINY = "problem://autoprofiler/v1/level2/linear_tiny_pointwise_chain_64x256"
CUMSUM = "problem://autoprofiler/v1/level1/cumsum_8192x8192"


def _config(tmp_path: Path, dataset: Path, problems: list[str], harness: dict = SMOKE,
            device: str = "cpu"):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "exp.yaml"
    path.write_text(f"""
name: live
budgets: [0.1, 0.5]
splits: [test]
seeds: 2
env: {{dataset: {dataset}}}
agents:
  tree: {{kind: tree, rounds: 3}}
  ppo: {{kind: rl, config: maskable_ppo, steps: 512}}
baselines: [no-profile, "section:SpeedOfLight", oracle]
reps: 50
poi_reps: 10
live:
  device: {device}
  evidence: recorded
  harness: {json.dumps(harness)}
  problems: {json.dumps(problems)}
""")
    return load_config(path)


@pytest.fixture(scope="module")
def replayed(study_dataset, tmp_path_factory):
    """The replay experiment (the tree learned per seed, the fixed configuration chosen on
    train), run once: each test evaluates a copy of it live."""
    root = tmp_path_factory.mktemp("replayed")
    config = _config(root, study_dataset, [TINY, CUMSUM])
    run_experiment(config, root / "out", progress=False)
    return root / "out"


def _copy(replayed: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(replayed, out)
    return out


def test_every_run_plays_each_problem_live_each_candidate_judged_once(
        replayed, study_dataset, tmp_path):
    config = _config(tmp_path, study_dataset, [TINY, CUMSUM])
    out = _copy(replayed, tmp_path)
    # a time budget spent before the first unit: none starts, nothing is written
    stopped = run_live(config, out, LocalWorkers([None]), time_budget_s=-1, progress=False)
    assert stopped["problems"] == [0, 2] and stopped["stopped_by_time_budget"]
    assert stopped["rows"] == [] and write(config, stopped, out, "c") == []
    result = run_live(config, out, LocalWorkers([None, None]), progress=False)
    assert result["problems"] == [2, 2] and result["failed"] == 0
    assert not result["stopped_by_time_budget"]

    rows = read_jsonl(out / "live" / "live.jsonl")
    runs = {("tree", 0), ("tree", 1), ("ppo", 0), ("ppo", 1), ("no-profile", 0),
            ("section:SpeedOfLight", 0), (TRAIN_CHOSEN, 0)}  # no oracle: it needs hindsight
    assert {(r["agent"], r["seed"]) for r in rows} == runs
    assert sorted((r["uri"], r["agent"], r["seed"], r["budget"]) for r in rows) == sorted(
        (u, a, s, b) for u in (TINY, CUMSUM) for a, s in runs for b in (0.1, 0.5))
    # one unit per problem, each distinct candidate of its episodes judged once, no ncu run
    units = {t["uri"]: t for t in read_jsonl(out / "live" / "timings.jsonl")}
    assert set(units) == {TINY, CUMSUM}
    for uri, unit in units.items():
        shipped = {r["candidate"] for r in rows if r["uri"] == uri} - {"identity"}
        assert sorted(unit["judged"]) == sorted(shipped) and unit["ncu_runs"] == 0
        assert unit["part"] == "live" and unit["uri"] == uri
        assert unit["episodes"] == len(runs) * 2 and unit["wall_s"] > 0
    # recorded evidence: the observation is the replay's, so every run collects what it
    # collected there
    rows_ = {r["agent"]: r for r in result["rows"]}
    assert set(rows_) == {a for a, _ in runs} and "oracle" not in rows_
    assert all(c["same_sections"] == 1.0 for c in result["comparison"])
    assert {c["agent"] for c in result["comparison"]} == {a for a, _ in runs}

    paths = write(config, result, out, "autoprofiler experiment --config exp.yaml")
    assert {p.name for p in paths} == {"leaderboard.md", "leaderboard.csv", "budgets.png",
                                       "cost.png", "profiles.png", "replay_vs_live.md",
                                       "replay_vs_live.csv", "sections.csv", "sections.png"}
    text = (out / "live" / "leaderboard.md").read_text()
    assert "2 of 2 problems finished" in text and "| oracle |" not in text
    chosen = json.loads((out / "live" / "runs" / "fixed--chosen-on-train-" / "seed-0.json")
                        .read_text())
    assert chosen["chosen"] == json.loads(
        (out / "runs" / "fixed--chosen-on-train-" / "seed-0.json").read_text())["chosen"]

    # resumed: nothing is played again
    before = (out / "live" / "live.jsonl").read_bytes()
    again = run_live(config, out, LocalWorkers([None]), progress=False)
    assert (out / "live" / "live.jsonl").read_bytes() == before
    assert again["rows"] == result["rows"]
    # a sample of the problems is part of the whole: its rows are the whole's
    sample = run_live(_config(tmp_path / "sample", study_dataset, [TINY]), out,
                      LocalWorkers([None]), progress=False)
    assert sample["problems"] == [1, 1] and (out / "live" / "live.jsonl").read_bytes() == before
    # another judge's settings over the same folder are refused, not mixed in
    other = _config(tmp_path / "other", study_dataset, [TINY],
                    harness=SMOKE | {"timing_budget_ms": 3})
    with pytest.raises(ConfigError, match="other settings or agents"):
        run_live(other, out, LocalWorkers([None]), progress=False)


def test_live_units_run_as_ray_tasks_each_on_its_own_gpu(replayed, study_dataset, tmp_path):
    import ray

    from autoprofiler_env.dataset.record.fanout import RayWorkers

    config = _config(tmp_path, study_dataset, [TINY])
    out = _copy(replayed, tmp_path)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        workers = RayWorkers(init_kwargs={"num_cpus": 2, "num_gpus": 4,
                                          "include_dashboard": False})
        result = run_live(config, out, workers, progress=False)
    finally:
        ray.shutdown()
        for sig, handler in handlers.items():  # ray.init's handlers outlive its shutdown
            signal.signal(sig, handler)
    assert result["problems"] == [1, 1] and result["failed"] == 0
    timings = read_jsonl(out / "live" / "timings.jsonl")
    assert [t["uri"] for t in timings] == [TINY] and timings[0]["gpu"] in {"0", "1", "2", "3"}


def test_a_live_backend_with_recorded_evidence_shows_the_replays_observation(study_dataset):
    kwargs = {"dataset": str(study_dataset), "problems": [CUMSUM], "budget": 1.0}
    replay = gym.make("AutoProfiler-v0", **kwargs)
    live = gym.make("AutoProfilerLive-v0", budget_unit="seconds", device="cpu",
                    evidence="recorded", harness=SMOKE, **kwargs)
    seen, _ = replay.reset(options={"problem": CUMSUM})
    met, _ = live.reset(options={"problem": CUMSUM})
    for action in (3, 0, 7):
        seen = replay.step(action)[0]
        met = live.step(action)[0]
        assert all(np.array_equal(seen[k], met[k]) for k in seen)
    backend = live.unwrapped.backend
    assert backend.profiled == []  # no ncu
    sections = tuple(live.unwrapped.sections[a] for a in (3, 0, 7))
    assert backend.profile(CUMSUM, sections) == replay.unwrapped.backend.profile(
        CUMSUM, sections)


def test_closing_a_live_env_stops_its_judge_and_a_copy_starts_its_own(study_dataset):
    import copy
    import pickle

    live = gym.make("AutoProfilerLive-v0", budget_unit="seconds", device="cpu",
                    evidence="recorded", harness=SMOKE, dataset=str(study_dataset),
                    problems=[CUMSUM], budget=1.0)
    live.reset(options={"problem": CUMSUM})
    live.step(3)
    _, _, terminated, _, first = live.step(live.unwrapped.STOP)
    evaluator = live.unwrapped.backend.evaluator
    workers = [w for w in (evaluator._reference, evaluator._candidate, evaluator._spare) if w]
    assert terminated and workers and all(w.alive() for w in workers)
    twin = copy.deepcopy(live)   # Gymnasium's and pickle's copies: settings, not processes
    assert pickle.loads(pickle.dumps(live.unwrapped)).backend.evaluator._reference is None
    live.close()
    live.close()
    assert not any(w.alive() for w in workers)
    assert evaluator._reference is evaluator._candidate is evaluator._spare is None
    twin.reset(options={"problem": CUMSUM})
    twin.step(3)
    _, _, _, _, again = twin.step(twin.unwrapped.STOP)  # judged from the copied cache
    assert (again["candidate"], again["speedup"]) == (first["candidate"], first["speedup"])
    twin.close()


@pytest.mark.parametrize("kwargs, message", [
    ({"evidence": "sampled"}, "evidence must be one of"),
    ({"evidence": "recorded"}, "give dataset= too"),
    ({"harness": {"device": "cuda"}}, "unknown setting 'device'"),
    ({"import_timeout_s": 10 ** 400}, "import_timeout_s must be a finite number of seconds"),
    ({"import_timeout_s": True}, "import_timeout_s must be a finite number of seconds"),
])
def test_a_live_backend_refuses_bad_settings(data_dir, kwargs, message):
    from autoprofiler_env.envs.backends import LiveBackend

    with pytest.raises(ValueError, match=message):
        LiveBackend([str(data_dir / "problems" / "relu_small.py")], device="cpu", **kwargs)


def test_the_replay_refuses_the_live_backends_settings():
    with pytest.raises(ValueError, match="the live backend's"):
        gym.make("AutoProfiler-v0", evidence="recorded")


@pytest.mark.parametrize("live, message", [
    ("live: [cuda]", "'live' must be a mapping"),
    ("live: {gpus: 2}", "unknown key live.gpus"),
    ("live: {evidence: guessed}", "live.evidence must be one of"),
    ("live: {problems: []}", "live.problems must be a non-empty list"),
    ("live: {harness: smoke}", "live.harness must be a mapping"),
])
def test_a_bad_live_key_is_one_error_naming_it(tmp_path, live, message):
    path = tmp_path / "exp.yaml"
    path.write_text(f"name: x\n{live}\n")
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_a_live_comparison_on_cuda_without_a_gpu_is_one_error_before_any_unit(
        replayed, study_dataset, tmp_path):
    """Not one failed unit per problem (each a process that found no GPU, minutes for the
    36 of compare_live): the machine is checked first, where the units would run."""
    import torch

    from autoprofiler_env.errors import MachineError

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    config = _config(tmp_path, study_dataset, [TINY], device="cuda")
    out = _copy(replayed, tmp_path)
    with pytest.raises(MachineError, match=r"the live comparison on device 'cuda' needs a CUDA "
                                           r"GPU; this machine has no CUDA device.*--workers "
                                           r"ray --address ADDR"):
        run_live(config, out, progress=False)
    assert not (out / "live" / "failures.jsonl").exists()


def test_the_command_checks_the_machine_before_learning_anything(tmp_path, capsys):
    """`autoprofiler experiment --config compare_live` on a CPU: one line at once, not the
    replay's learning first and then a failed unit per problem."""
    import torch

    from experiments.cli import main

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    out = tmp_path / "out"
    assert main(["experiment", "--config", "compare_live", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "compare_live.yaml: the live comparison on device 'cuda' needs " \
        "a CUDA GPU" in err[0]
    assert not out.exists()


def test_live_problems_outside_the_splits_are_refused(replayed, study_dataset, tmp_path):
    config = _config(tmp_path, study_dataset,
                     ["problem://autoprofiler/v1/level1/relu_16384x16384"])  # train
    with pytest.raises(ConfigError, match="is not a problem of the splits test"):
        run_live(config, _copy(replayed, tmp_path), progress=False)


def test_the_shipped_live_comparison_is_compare_played_live():
    """compare_live differs from compare by its live key alone, so that given compare's
    folder it evaluates compare's finished runs rather than learning them again."""
    from dataclasses import replace

    from experiments.experiment import config_path

    compare, live = load_config(config_path("compare")), load_config(config_path("compare_live"))
    assert live.live is not None and live.live.device == "cuda" and live.live.evidence == "ncu"
    assert replace(live, name="compare", path=compare.path, live=None) == compare
    # its env names no dataset: the live one is the replay's default, budgeted in its seconds
    kwargs = live.live.env(live)
    assert kwargs["dataset"] == "suite" and kwargs["budget_unit"] == "seconds"
    env = gym.make("AutoProfilerLive-v0", problems=[CUMSUM],
                   **kwargs | {"device": "cpu", "evidence": "recorded"})
    env.reset(options={"problem": CUMSUM})
    env.close()


class _Judged:
    """A harness verdict as the live backend reads it."""

    def __init__(self, error_name=None, speedup=2.0):
        self.error_name, self.correct = error_name, error_name is None
        self.error_message = "" if self.correct else f"the harness's words on {error_name}"
        self.speedup = speedup if self.correct else None
        self.reference_ms, self.candidate_ms = 1.0, 0.5


def test_a_live_backend_judges_each_distinct_candidate_once_and_a_fluke_twice(data_dir):
    """Five section sets reach three programs and identity: each program is judged once
    (a crash, twice; a timeout, once: a hang is the code's), identity never (1.0x, as in the
    replay)."""
    from autoprofiler_env.envs.backends import LiveBackend
    from autoprofiler_env.optimizers.candidate import Candidate

    backend = LiveBackend([str(data_dir / "problems" / "relu_small.py")], device="cpu",
                          harness=SMOKE)
    uri = backend.problems(None)[0]
    programs = {(): "identity", ("SpeedOfLight",): "compile", ("Occupancy",): "compile",
                ("LaunchStats",): "tf32", ("WarpStateStats",): "tf32",
                ("InstructionStats",): "hangs"}
    seen = []

    class Optimizer:
        def optimize(self, problem, profile, eager_ms=None):
            name = programs[profile.sections if profile else ()]
            return Candidate(uri, f"# {name}", name, f"because of {profile and profile.sections}")

    def judge(problem, source, size=None):
        seen.append(source)
        if source == "# hangs":
            return _Judged("timeout")
        return _Judged("crash" if source == "# tf32" and seen.count(source) == 1 else None)

    backend.optimizer, backend.evaluator.evaluate = Optimizer(), judge
    backend._eager[uri] = 1.0
    backend.profile = lambda uri, sections: type("P", (), {"sections": tuple(sections)})()
    outcomes = {s: backend.finish(uri, s) for s in programs}
    assert seen == ["# compile", "# tf32", "# tf32", "# hangs"]  # the crash judged again
    assert outcomes[()].speedup == 1.0 and outcomes[()].correct
    assert outcomes[("SpeedOfLight",)].speedup == outcomes[("Occupancy",)].speedup == 2.0
    assert outcomes[("Occupancy",)].reason == "because of ('Occupancy',)"  # its own reason
    assert outcomes[("LaunchStats",)].correct and outcomes[("WarpStateStats",)].correct
    hangs = outcomes[("InstructionStats",)]
    assert not hangs.correct and hangs.error_kind == "timeout"
    assert hangs.error == "the harness's words on timeout"
    assert [name for _, name in backend.judged] == ["compile", "tf32", "tf32", "hangs"]


def test_a_unit_plays_only_what_is_not_written_and_stops_past_the_time_budget(
        replayed, study_dataset, tmp_path, monkeypatch):
    """A unit's process, run here: seeded with the episodes written, it plays the others;
    past the time budget and its grace it plays none (the next run does)."""
    import time

    from autoprofiler_env.dataset.record.fanout import read_spec
    from autoprofiler_env.envs.backends import LiveBackend
    from experiments import live

    config = _config(tmp_path, study_dataset, [TINY])
    out = _copy(replayed, tmp_path)
    agents = live._agents(config, out)
    every = {(a["name"], a["seed"], b) for a in agents for b in config.budgets}
    played = every - {("no-profile", 0, 0.5)}
    monkeypatch.setattr(LiveBackend, "_judge", lambda self, problem, c: _Judged())

    def play(deadline_epoch):
        unit, seed = live._unit(TINY, "test", agents, config, played)
        scratch = tmp_path / f"scratch-{deadline_epoch}"
        scratch.mkdir()
        spec = {"unit": {"part": unit.part, "problem": unit.problem, "candidates": []},
                "deadline_epoch": deadline_epoch, "seed": seed}
        (scratch / "spec.json").write_text(json.dumps(spec))
        assert read_spec(scratch)[1] == unit
        live._live_unit(scratch)
        return json.loads((scratch / "result.json").read_text())

    result = play(None)
    assert [(r["agent"], r["seed"], r["budget"]) for r in result["rows"]] == [
        ("no-profile", 0, 0.5)]
    assert result["rows"][0]["shipped"] == result["rows"][0]["speedup"] > 0
    assert play(time.time() - live.STOP_GRACE_S - 1)["rows"] == []
