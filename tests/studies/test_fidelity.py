"""The fidelity experiment's plan, its live loop (on a CPU, with a recorded ncu run standing in
for ncu) and its comparison with the replay."""

import json
import math
from dataclasses import replace
from pathlib import Path

from autoprofiler_env.dataset import Dataset
from autoprofiler_env.envs.backends import ReplayBackend
from autoprofiler_env.envs.profiling_env import ProfilingEnv
from autoprofiler_env.harness import HarnessConfig
from autoprofiler_env.jsonlines import read_jsonl
from autoprofiler_env.profiler import NcuRun
from baselines.agents import RooflineTree
from experiments.studies import fidelity

STUDY = Path(__file__).parents[2] / "docs" / "data" / "profile_study_h200"
CPU_JUDGE = HarnessConfig(device="cpu", size="smoke", timing_budget_ms=2, min_trials=1,
                          max_trials=2, warmup_ms=0)


def _run_of(uri: str, status: dict | None = None) -> NcuRun:
    """The profile study's SpeedOfLight run as a live run of ``uri`` alone (its status line
    updated with ``status``), standing in for ncu."""
    study = NcuRun.load(STUDY / "section-SpeedOfLight")
    index = [p["uri"] for p in study.problems].index(uri)
    lines = [{"event": "primer", "s": 1.0}] + [
        {**r, **(status or {})} if r.get("index") == index else r
        for r in study.status if r.get("index") in (None, index)]
    return replace(study, problems=[{"uri": uri} if i == index else {"uri": f"other{i}"}
                                    for i in range(len(study.problems))], status=lines)


def test_the_plan_draws_36_pairs_of_sets_of_1_to_8_sections(study_dataset):
    dataset = Dataset.load(study_dataset)
    groups = fidelity.plan(dataset, seed=0)
    assert groups == fidelity.plan(dataset, seed=0)
    assert [len(g["sections"]) for g in groups] == list(fidelity.SIZES)
    assert sum(len(g["uris"]) for g in groups) == 36
    for g in groups:
        assert len(set(g["uris"])) == fidelity.PER_SET
        assert tuple(g["sections"]) == dataset.canonical(g["sections"])
        assert set(g["uris"]) <= set(dataset.uris())
    assert fidelity.plan(dataset, seed=1) != groups


def test_the_plan_draws_no_problem_ill_posed_at_the_recorded_tolerance(study_dataset,
                                                                       tmp_path):
    from autoprofiler_env.dataset.format import DatasetFile

    content = Dataset.load(study_dataset).content
    drawn = {u for g in fidelity.plan(Dataset(content), seed=0) for u in g["uris"]}
    ill = next(iter(drawn))
    record = content.problems[ill]
    record = replace(record, eager={**record.eager, "constant_needed": {"float32": 1e-3}})
    DatasetFile(content.metadata, content.sections, {**content.problems, ill: record}).save(
        tmp_path / "ill.json.gz")
    groups = fidelity.plan(Dataset.load(tmp_path / "ill.json.gz"), seed=0)
    assert sum(len(g["uris"]) for g in groups) == 36
    assert ill not in {u for g in groups for u in g["uris"]}


def test_the_live_loop_profiles_optimizes_and_times_each_pair_and_resumes(tmp_path,
                                                                        monkeypatch):
    import autoprofiler_env.dataset.record.ncu as record

    uri = "problem://autoprofiler/v1/level1/matmul_4096x4096x4096"
    (tmp_path / "plan.json").write_text(json.dumps([
        {"key": "SpeedOfLight", "sections": ["SpeedOfLight"], "uris": [uri]}]))
    calls = []

    def fake_run_ncu(problems, sections, **kwargs):
        calls.append([p.uri for p in problems])
        return _run_of(uri)

    monkeypatch.setattr(record, "run_ncu", fake_run_ncu)
    fidelity.live_pairs(tmp_path, warm_workers=1, config=CPU_JUDGE)
    rows = read_jsonl(tmp_path / "live.jsonl")
    assert calls == [[uri]]
    assert [(r["uri"], r["sections"], r["repeat"]) for r in rows] == [
        (uri, "SpeedOfLight", i) for i in range(fidelity.REPEATS)]
    assert len({r["transformation"] for r in rows}) == 1 and rows[0]["reason"]
    fidelity.live_pairs(tmp_path, warm_workers=1, config=CPU_JUDGE)  # nothing is redone
    assert calls == [[uri]] and len(read_jsonl(tmp_path / "live.jsonl")) == fidelity.REPEATS


def test_the_live_loop_sets_aside_what_another_setting_made_and_does_it_again(tmp_path,
                                                                            monkeypatch):
    """KernelBench's first live runs cut forwards at 64 operators where the recording cut at
    24, and chose without the eager time: a live run cut under another cap than the
    dataset's, and a row judging another candidate than the one chosen now, go to ``stale/``
    and are done again. ncu runs under the dataset's cap; the eager time is timed once, kept
    in ``eager.jsonl`` and written beside each row. A planned problem the dataset lacks (its
    recording not complete yet) waits: nothing of it is loaded, profiled or judged."""
    import autoprofiler_env.dataset.record.ncu as record
    from autoprofiler_env.profiler import MAX_OPS

    uri = "problem://autoprofiler/v1/level1/matmul_4096x4096x4096"
    waiting = "problem://kernelbench/level3/16_DenseNet201"  # not in the suite's dataset
    (tmp_path / "plan.json").write_text(json.dumps([
        {"key": "SpeedOfLight", "sections": ["SpeedOfLight"], "uris": [uri, waiting]}]))
    caps = []

    def fake_run_ncu(problems, sections, max_ops=None, **kwargs):
        assert [p.uri for p in problems] == [uri]
        caps.append(max_ops)
        return _run_of(uri, {"ops": 100, "ops_profiled": 24 if len(caps) == 1 else 64})

    monkeypatch.setattr(record, "run_ncu", fake_run_ncu)
    fidelity.live_pairs(tmp_path, warm_workers=1, config=CPU_JUDGE)
    [eager] = read_jsonl(tmp_path / "eager.jsonl")
    rows = read_jsonl(tmp_path / "live.jsonl")
    assert eager["uri"] == uri and eager["eager_ms"] > 0
    assert all(r["chosen_with_eager_ms"] == eager["eager_ms"] for r in rows)
    chosen = rows[0]["transformation"]
    rows[1] = {**rows[1], "transformation": "bogus"}
    (tmp_path / "live.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    fidelity.live_pairs(tmp_path, warm_workers=1, config=CPU_JUDGE)
    assert caps == [MAX_OPS, MAX_OPS]  # the suite's file: the profiler's default cap
    [stale_run] = (tmp_path / "stale" / "ncu" / "SpeedOfLight").iterdir()
    assert (stale_run / "run.json").exists()
    assert [r["transformation"] for r in read_jsonl(tmp_path / "stale" / "live.jsonl")] == [
        "bogus"]
    rows = read_jsonl(tmp_path / "live.jsonl")
    assert sorted(r["repeat"] for r in rows) == list(range(fidelity.REPEATS))
    assert {r["transformation"] for r in rows} == {chosen}
    assert {r["uri"] for r in rows} == {uri}
    assert read_jsonl(tmp_path / "eager.jsonl") == [eager]  # timed once


def test_choices_on_saved_live_profiles_are_compared_without_a_gpu(study_dataset, tmp_path):
    """The study's SpeedOfLight run stands in as the live ncu run of a one-set plan."""
    import shutil

    dataset = Dataset.load(study_dataset)
    study = NcuRun.load(STUDY / "section-SpeedOfLight")
    uris = [p["uri"] for p in study.problems][:3]
    (tmp_path / "plan.json").write_text(json.dumps([
        {"key": "SpeedOfLight", "sections": ["SpeedOfLight"], "uris": uris}]))
    shutil.copytree(STUDY / "section-SpeedOfLight", tmp_path / "ncu" / "SpeedOfLight" / "run0")
    rows = fidelity.choice_rows(tmp_path, dataset)
    replay = ReplayBackend(dataset)
    assert [r["problem"] for r in rows] == [u.rsplit("/", 1)[1] for u in uris]
    for r, uri in zip(rows, uris):
        assert r["replay_choice"] == replay.finish(uri, ("SpeedOfLight",)).transformation
    # the dataset cuts its evidence out of the full-set run; here it leads to the same choices
    assert all(r["same_choice"] for r in rows)
    summary = fidelity.summarize([], [], rows)
    assert summary == {"profiled_pairs": 3, "same_choice_on_live_profiles": 3}


def test_analysis_counts_same_choices_noise_and_episode_rewards(study_dataset, tmp_path):
    dataset = Dataset.load(study_dataset)
    replay = ReplayBackend(dataset)
    groups = fidelity.plan(dataset)[:4]
    live = []
    far = (groups[-1]["uris"][-1], groups[-1]["key"])  # live three times faster: not noise
    assert replay.finish(far[0], tuple(groups[-1]["sections"])).speedup
    for n, g in enumerate(groups):
        for uri in g["uris"]:
            expected = replay.finish(uri, tuple(g["sections"]))
            scale = 3.0 if (uri, g["key"]) == far else 1.0
            for repeat, jitter in enumerate((0.99 * scale, 1.0 * scale, 1.01 * scale)):
                live.append({"uri": uri, "sections": g["key"], "repeat": repeat,
                             "transformation": expected.transformation if n else "other",
                             "correct": expected.correct,
                             "reference_ms": 1.02 * dataset.record(uri).eager["median_ms"],
                             "speedup": expected.speedup * jitter if expected.speedup else None})
    (tmp_path / "live.jsonl").write_text("".join(json.dumps(r) + "\n" for r in live))
    env = ProfilingEnv(dataset=dataset, split=None, **fidelity.EPISODE_BUDGET)
    agent = RooflineTree(env)
    episodes = []
    for uri in groups[0]["uris"]:
        obs, _ = env.reset(options={"problem": uri})
        terminated = False
        while not terminated:
            action, _ = agent.predict(obs, action_masks=env.action_masks())
            obs, _, terminated, _, _ = env.step(int(action))
        episodes.append({**json.loads(env.last_record.to_json()), "wall_s": 1.0})
    (tmp_path / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))

    assert fidelity.analyze(tmp_path, fidelity.settings(tmp_path, str(study_dataset))) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    n_pairs = sum(len(g["uris"]) for g in groups)
    assert summary["pairs"] == n_pairs
    assert summary["same_choice"] == n_pairs - len(groups[0]["uris"])  # group 0 chose "other"
    assert abs(summary["median_spread"] - 0.0202) < 1e-3  # 1.01 / 0.99 - 1
    assert summary["within_noise"] == summary["in_live_range"] == summary["compared"] - 1
    assert summary["within_noise_judged"] == summary["compared"]
    assert abs(summary["eager_drift_median"] - math.log(1.02)) < 1e-9
    assert summary["episodes"] == summary["same_candidate"] == summary["same_sections"] == 3
    assert summary["reward_gap_max"] == 0.0
    assert (tmp_path / "pairs.csv").exists() and (tmp_path / "episodes.csv").exists()


def test_live_episodes_run_the_live_environment_and_resume(study_dataset, tmp_path,
                                                           monkeypatch):
    """The live episodes' loop on a CPU: ncu stands in as the study's recorded evidence, the
    harness runs the problems at their smoke sizes (two whose candidates compile nothing:
    a CPU compile would be most of the test's time)."""
    import functools

    import autoprofiler_env.envs.backends.live as backends
    import autoprofiler_env.harness as harness

    dataset = Dataset.load(study_dataset)
    calls = []

    def fake_profile_problems(problems, sections, **kwargs):
        calls.append((problems[0].name, tuple(sections)))
        return [dataset.profile(problems[0].uri, sections)], []

    monkeypatch.setattr(backends, "profile_problems", fake_profile_problems)
    monkeypatch.setattr(harness, "HarnessConfig", functools.partial(
        HarnessConfig, size="smoke", timing_budget_ms=2, min_trials=1, max_trials=2,
        warmup_ms=0))
    uris = ["problem://autoprofiler/v1/level1/matmul_4096x4096x4096",
            "problem://autoprofiler/v1/level2/conv2d_batchnorm_relu_32x64x112x112"]
    (tmp_path / "plan.json").write_text(json.dumps([
        {"key": "SpeedOfLight", "sections": ["SpeedOfLight"], "uris": uris}]))
    fidelity.live_episodes(tmp_path, episodes=1, device="cpu")
    (row,) = read_jsonl(tmp_path / "episodes.jsonl")
    assert row["problem"] == uris[0] and row["sections"][0] == "SpeedOfLight"
    assert calls[0] == ("matmul_4096x4096x4096", ("SpeedOfLight",))
    assert row["candidate"] and row["wall_s"] > 0 and isinstance(row["reward"], float)
    assert row["eager_ms"] > 0  # the live eager time, against which the drift is measured
    fidelity.live_episodes(tmp_path, episodes=2, device="cpu")  # resumes: one more episode
    assert [r["problem"] for r in read_jsonl(tmp_path / "episodes.jsonl")] == uris
