"""The recorder's bookkeeping (chunks, resuming, the time budget) and the dataset commands."""

import json
import math
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from autoprofiler_env.dataset import Dataset
from autoprofiler_env.dataset.build import build_from_recording
from autoprofiler_env.dataset.record import chunks, covered, record_candidates, record_ncu
from autoprofiler_env.dataset.record.candidates import _LIMIT_RAN, WARM_STOPPED, CandidateWarmer
from autoprofiler_env.dataset.record.ncu import BATCH_TIMEOUT_S
from autoprofiler_env.dataset.record.reference import record_reference
from autoprofiler_env.harness import HarnessConfig
from autoprofiler_env.jsonlines import read_jsonl
from autoprofiler_env.problems import load_file, load_problem, load_suite
from autoprofiler_env.profiler import NcuRun
from autoprofiler_env.profiler.runner import range_timeout_s

ROOT = Path(__file__).parents[1]
STUDY = ROOT / "docs" / "data" / "profile_study_h200"
REFERENCE = ROOT / "docs" / "data" / "recording_h200" / "reference.jsonl"


def test_chunks_are_named_by_their_members():
    suite = load_suite()
    a = chunks(suite, 12)
    assert len(a) == 8 and sum(len(m) for _, m in a) == len(suite)
    assert chunks(suite, 12) == a
    b = chunks(suite[1:], 12)
    assert a[0][0] != b[0][0]  # other members, another name: a stale run is never reused


def test_ncu_runs_resume_per_problem_and_keep_what_a_deadline_finished(tmp_path, monkeypatch):
    calls = []
    stop_after_one = []

    def fake_run_ncu(problems, sections, **kwargs):
        calls.append((tuple(p.name for p in problems), tuple(sections)))
        done = problems[:1] if stop_after_one else problems
        status = [{"event": "primer", "s": 1.0}] + [row for i, p in enumerate(done) for row in (
            {"event": "begin", "index": i, "uri": p.uri},
            {"event": "problem", "index": i, "uri": p.uri, "ok": True})]
        if stop_after_one:
            status += [{"event": "begin", "index": len(problems) - 1, "uri": problems[-1].uri},
                       {"event": "deadline", "deadline_s": 1.0}]
        else:
            status.append({"event": "finished"})
        return replace(NcuRun.load(STUDY / f"section-{sections[0]}"),
                       problems=[{"uri": p.uri} for p in problems], status=status)

    import autoprofiler_env.dataset.record as record
    import autoprofiler_env.dataset.record.ncu as ncu  # where record_ncu looks run_ncu up

    monkeypatch.setattr(ncu, "run_ncu", fake_run_ncu)
    problems = [load_problem(n) for n in ("relu_16384x16384", "softmax_16384x4096",
                                          "matmul_4096x4096x4096")]
    configs = {"SpeedOfLight": ["SpeedOfLight"], "LaunchStats": ["LaunchStats"]}
    assert record_ncu(problems, configs, tmp_path, chunk=2, deadline=time.monotonic() - 1) == 0
    # too little time left to finish even one problem: no run is started (and saved)
    assert record_ncu(problems, configs, tmp_path, chunk=2,
                      deadline=time.monotonic() + record.MIN_RUN_S / 2) == 0
    assert not list(tmp_path.rglob("run.json"))
    stop_after_one.append(True)
    assert record_ncu(problems, {"SpeedOfLight": ["SpeedOfLight"]}, tmp_path, chunk=2) == 2
    assert covered(tmp_path / "SpeedOfLight") == {problems[0].uri, problems[2].uri}
    stop_after_one.clear()
    calls.clear()
    assert record_ncu(problems, configs, tmp_path, chunk=2) == 3
    assert calls == [(("softmax_16384x4096",), ("SpeedOfLight",)),
                     (("relu_16384x16384", "softmax_16384x4096"), ("LaunchStats",)),
                     (("matmul_4096x4096x4096",), ("LaunchStats",))]
    assert record_ncu(problems, configs, tmp_path, chunk=2) == 0  # all done: nothing redone
    assert len(list(tmp_path.rglob("run.json"))) == 5


def test_a_run_saved_in_the_same_second_as_its_chunks_last_keeps_both(tmp_path, monkeypatch):
    """Runs are saved under the time to the second and the chunk: a run of a chunk that
    ended at once (a deadline's stop before its first problem) made again in the same second
    gets a folder of its own, so the first's record (the stop) is not overwritten."""
    import autoprofiler_env.dataset.record.ncu as ncu

    def stopped_at_once(problems, sections, **kwargs):
        return replace(NcuRun.load(STUDY / f"section-{sections[0]}"),
                       problems=[{"uri": p.uri} for p in problems], status=[
                           {"event": "primer", "s": 1.0},
                           {"event": "begin", "index": 0, "uri": problems[0].uri},
                           {"event": "deadline", "deadline_s": 1.0}])

    monkeypatch.setattr(ncu, "run_ncu", stopped_at_once)
    monkeypatch.setattr(ncu.time, "strftime", lambda fmt, *a: "20261207-120000")
    problems = [load_problem("relu_16384x16384")]
    for _ in range(3):
        assert record_ncu(problems, {"LaunchStats": ["LaunchStats"]}, tmp_path, chunk=1) == 1
    saved = sorted(p.parent.name for p in tmp_path.rglob("run.json"))
    stem = f"20261207-120000-{chunks(problems, 1)[0][0]}"
    assert saved == [stem, f"{stem}.2", f"{stem}.3"]
    assert not covered(tmp_path / "LaunchStats")


def test_a_problem_that_hung_is_not_retried(tmp_path):
    run = replace(NcuRun.load(STUDY / "section-LaunchStats"),
                  problems=[{"uri": "a"}, {"uri": "b"}, {"uri": "c"}], status=[
                      {"event": "primer", "s": 1.0},
                      {"event": "begin", "index": 0, "uri": "a"},
                      {"event": "problem", "index": 0, "uri": "a", "ok": True},
                      {"event": "begin", "index": 1, "uri": "b"}])
    run.save(tmp_path / "x" / "run1")
    assert covered(tmp_path / "x") == {"a", "b"}


def test_the_first_problem_of_a_run_without_the_primer_is_profiled_again(tmp_path):
    """Runs recorded before the driver's primer: their first problem's cost holds ncu's
    start-up, so the recorder owes it a primed run; the others are done."""
    run = NcuRun.load(STUDY / "section-LaunchStats")
    run.save(tmp_path / "x" / "old")
    uris = [p["uri"] for p in run.problems]
    assert covered(tmp_path / "x") == set(uris[1:])
    replace(run, problems=run.problems[:1], status=[
        {"event": "primer", "s": 1.0}, {"event": "begin", "index": 0, "uri": uris[0]},
        {"event": "problem", "index": 0, "uri": uris[0], "ok": True},
        {"event": "finished"}]).save(tmp_path / "x" / "new")
    assert covered(tmp_path / "x") == set(uris)


def test_a_problem_that_timed_out_in_a_batch_is_run_again_alone_with_the_kernel_cap(
        tmp_path, monkeypatch):
    import autoprofiler_env.dataset.record.ncu as ncu  # where record_ncu looks run_ncu up

    calls, timeouts = [], []

    def fake_run_ncu(problems, sections, **kwargs):
        calls.append(([p.name for p in problems], kwargs["max_kernels"]))
        timeouts.append((kwargs["problem_timeout_s"], kwargs["range_timeout_s"]))
        status = [{"event": "primer", "s": 1.0}]
        for i, p in enumerate(problems):
            status.append({"event": "begin", "index": i, "uri": p.uri})
            if p.name == "lstm_sequence_64x128x512":  # times out, capped or not
                status.append({"event": "timeout", "problem_timeout_s": 300.0})
                break
            status.append({"event": "problem", "index": i, "uri": p.uri, "ok": True})
        else:
            status.append({"event": "finished"})
        command = ["--launch-count", "64"] if kwargs["max_kernels"] else []
        return replace(NcuRun.load(STUDY / "section-LaunchStats"), command=command,
                       problems=[{"uri": p.uri} for p in problems], status=status)

    monkeypatch.setattr(ncu, "run_ncu", fake_run_ncu)
    names = ["relu_16384x16384", "lstm_sequence_64x128x512", "softmax_16384x4096"]
    problems = [load_problem(n) for n in names]
    configs = {"full": ["SpeedOfLight"]}
    assert record_ncu(problems, configs, tmp_path, chunk=3) == 1
    assert covered(tmp_path / "full") == {problems[0].uri}  # the LSTM is owed a capped run
    assert record_ncu(problems, configs, tmp_path, chunk=3) == 2
    assert calls == [(names, None), (["softmax_16384x4096"], None),
                     (["lstm_sequence_64x128x512"], 64)]
    # batched runs stop sooner, their profiled calls after a limit their operators set
    assert timeouts == [(BATCH_TIMEOUT_S, range_timeout_s), (BATCH_TIMEOUT_S, range_timeout_s),
                        (300.0, None)]
    assert covered(tmp_path / "full") == {p.uri for p in problems}  # capped, it is not retried
    assert record_ncu(problems, configs, tmp_path, chunk=3) == 0


def test_each_part_logs_its_device_time_and_the_dataset_carries_the_total(tmp_path):
    from autoprofiler_env.dataset.record import TIMINGS, record, recording_cost

    small = load_problem(str(ROOT / "tests" / "data" / "problems" / "relu_small.py"))
    out = tmp_path / "rec"
    summary = record(out, [small], parts=("reference",), device="cpu")
    assert summary["reference"] == 1
    record(out, [small], parts=("reference",), device="cpu")  # resumed: nothing to do
    rows = read_jsonl(out / TIMINGS)
    assert [r["part"] for r in rows] == ["reference", "reference"]
    assert rows[0]["wall_s"] > rows[1]["wall_s"] >= 0 and rows[0]["holds"] == 1
    shutil.copytree(STUDY / "section-LaunchStats", out / "profiles" / "LaunchStats" / "a")
    cost = recording_cost(out)
    assert cost["logged_s"]["reference"] == rows[0]["wall_s"] + rows[1]["wall_s"]
    assert cost["ncu_runs"] == 1 and cost["ncu_runs_s"] == NcuRun.load(
        STUDY / "section-LaunchStats").wall_s
    assert cost["candidates"] == 0
    # another program's run.json beside the recording's folders is none of its ncu runs (a
    # candidates file kept with an experiment's runs failed the build on its missing wall_s)
    (out / "runs" / "tree").mkdir(parents=True)
    (out / "runs" / "tree" / "run.json").write_text('{"status": "finished"}')
    assert recording_cost(out) == cost


def test_work_left_for_want_of_time_before_the_deadline_is_a_stop_by_the_time_budget(
        tmp_path, monkeypatch):
    """The ncu part starts nothing with less than MIN_RUN_S left, though the deadline has not
    passed: the summary must say that the budget stopped the recording, so that it is run
    again; a call that did all its work, or had no budget, says not."""
    import autoprofiler_env.dataset.record as record_module
    from autoprofiler_env.dataset.record import record
    from autoprofiler_env.profiler import runner

    small = load_problem(str(ROOT / "tests" / "data" / "problems" / "relu_small.py"))
    out = tmp_path / "rec"
    monkeypatch.setattr(record_module, "record_ncu", lambda *args, **kwargs: 0)  # declines
    monkeypatch.setattr(runner, "find_ncu", lambda ncu=None: "ncu")  # as if ncu were here
    assert record(out, [small], parts=("reference", "full"), device="cpu",
                  time_budget_s=600)["stopped_by_time_budget"]
    assert not record(out, [small], parts=("reference",), device="cpu",
                      time_budget_s=600)["stopped_by_time_budget"]  # all it was asked: done
    assert not record(out, [small], parts=("reference", "full"),
                      device="cpu")["stopped_by_time_budget"]  # no budget, no stop by it


def test_section_sets_for_the_llm_part_are_parsed_and_checked():
    import pytest

    from autoprofiler_env.dataset.record import parse_section_sets
    from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS

    sets = parse_section_sets("none;SpeedOfLight;SpeedOfLight+WarpStateStats;basic;;full",
                              ACTION_SECTIONS)
    assert sets[:3] == ((), ("SpeedOfLight",), ("SpeedOfLight", "WarpStateStats"))
    assert sets[3] == ("SpeedOfLight", "LaunchStats", "Occupancy", "WorkloadDistribution")
    assert sets[4] == ACTION_SECTIONS and len(sets) == 5  # "" is none again: once
    with pytest.raises(ValueError, match="SpeedOfDark"):
        parse_section_sets("SpeedOfDark", ACTION_SECTIONS)


def test_recording_with_an_llm_says_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.delenv("AUTOPROFILER_LLM_BASE_URL", raising=False)
    out = subprocess.run([sys.executable, "-m", "experiments.cli", "record", "--out",
                          str(tmp_path / "r"), "--parts", "llm", "--device", "cpu"],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    assert out.returncode == 2 and "no LLM endpoint" in out.stderr
    out = subprocess.run([sys.executable, "-m", "experiments.cli", "record", "--out",
                          str(tmp_path / "r"), "--parts", "llm", "--llm-base-url", "http://h/v1",
                          "--llm-model", "m", "--dataset", str(tmp_path / "missing.json.gz")],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    assert out.returncode == 2 and "missing.json.gz" in out.stderr


def test_candidates_that_generate_code_are_compiled_in_workers_in_batches_then_timed():
    """Two warm workers: each batch holds at most two candidates that compile, in order."""
    from autoprofiler_env.dataset.record.candidates import generates_code, warm_batches

    names = ["tf32", "compile", "compile+tf32", "autocast_fp16", "max_autotune+cuda_graph",
             "triton_softmax", "channels_last", "cuda_graph"]
    assert [generates_code(n) for n in names] == [False, True, True, False, True, True, False,
                                                  False]
    todo = [(None, n, "") for n in names]
    batches = [[n for _, n, _ in b] for b in warm_batches(todo, 2)]
    assert batches == [["tf32", "compile", "compile+tf32", "autocast_fp16"],
                       ["max_autotune+cuda_graph", "triton_softmax", "channels_last",
                        "cuda_graph"]]
    assert [[n for _, n, _ in b] for b in warm_batches(todo[:1], 4)] == [["tf32"]]
    assert warm_batches([], 2) == []
    # and within a memory budget: the compiling ones' costs sum to at most it (one costing
    # more than the budget is a batch of its own); those that compile nothing cost nothing
    costs = {"compile": 5, "compile+tf32": 5, "max_autotune+cuda_graph": 12,
             "triton_softmax": 4}
    batches = [[n for _, n, _ in b]
               for b in warm_batches(todo, 4, lambda item: costs[item[1]], budget=10)]
    assert batches == [["tf32", "compile", "compile+tf32", "autocast_fp16"],
                       ["max_autotune+cuda_graph"],
                       ["triton_softmax", "channels_last", "cuda_graph"]]
    assert warm_batches(todo, 2, lambda item: costs[item[1]], budget=None) == \
        warm_batches(todo, 2)


def test_a_warm_candidates_footprint_counts_both_processes_and_the_judges_copies():
    """SqueezeNetFireModule-like: an 8.5 GB reference peak and a 4.3 GB output take about
    26 GB while one candidate is checked, so an H200's batch share (0.8 x 140 GB) holds four
    of them at once, not six; a recorded peak below the problem's own sizes (measured above
    what the reference process still held) counts as those sizes."""
    from types import SimpleNamespace

    from autoprofiler_env.dataset.record.candidates import BATCH_SHARE, footprint

    gb = 10**9
    squeeze = SimpleNamespace(bytes_min=4.4 * gb, output_bytes=4.3 * gb)
    assert footprint(squeeze, 8.5 * gb) == pytest.approx(25.6 * gb)
    assert int(BATCH_SHARE * 140 * gb // footprint(squeeze, 8.5 * gb)) == 4
    assert footprint(squeeze, 150_000) == pytest.approx(2 * 4.4 * gb + 2 * 4.3 * gb)
    assert footprint(squeeze, None) == footprint(squeeze, 0)


def test_candidates_that_generate_no_code_are_timed_without_warming(tmp_path, monkeypatch):
    import autoprofiler_env.dataset.record as record

    events = []
    real_batch = record.CandidateWarmer.batch

    def batch(self, items, *args, **kwargs):
        events.append(len(items))
        return real_batch(self, items, *args, **kwargs)

    monkeypatch.setattr(record.CandidateWarmer, "batch", batch)
    problems = [load_problem(n) for n in ("conv2d_1x1_32x256x56x56", "conv2d_3x3_16x64x128x128",
                                          "conv2d_7x7_stride2_32x3x224x224",
                                          "conv2d_depthwise_3x3_16x128x256x256",
                                          "conv_transpose2d_16x128x64x64")]
    config = HarnessConfig(device="cpu", size="smoke", timing_budget_ms=2, min_trials=1,
                           max_trials=2, warmup_ms=0)
    out = tmp_path / "candidates.jsonl"
    rows = record_candidates(problems, out, config, warm_workers=2, timeout_s=120)
    assert events == [0] and len(rows) == 10  # one batch, nothing in it compiles
    assert {r["transformation"] for r in rows} == {"autocast_bf16", "channels_last"}
    assert all(r["correct"] in (True, False) and r["wall_s"] > 0 for r in rows)
    assert record_candidates(problems, out, config, warm_workers=2) == rows  # all done


def test_candidates_are_recorded_once(tmp_path):
    problem = load_problem("matmul_4096x4096x4096")  # on a CPU only autocast_bf16 applies
    config = HarnessConfig(device="cpu", size="smoke", timing_budget_ms=2, min_trials=1,
                           max_trials=2, warmup_ms=0)
    out = tmp_path / "candidates.jsonl"
    rows = record_candidates([problem], out, config, warm_workers=1, timeout_s=120)
    assert [(r["uri"], r["transformation"]) for r in rows] == [(problem.uri, "autocast_bf16")]
    assert rows[0]["correct"] in (True, False) and rows[0]["reference_ms"] > 0
    assert record_candidates([problem], out, config, warm_workers=1) == rows
    assert len(read_jsonl(out)) == 1


def test_a_cheating_verdict_on_the_optimizers_own_candidate_stops_the_recording(
        tmp_path, monkeypatch):
    """The recorder judges the reference optimizer's own transformations: a verdict that
    says one cheated (a judge's check wrong about an honest program) is not recorded as its
    outcome; the recording stops, naming it, and a fixed judge records it next time."""
    from dataclasses import replace

    from autoprofiler_env.errors import EvaluationError
    from autoprofiler_env.harness import ErrorKind, Evaluator

    problem = load_problem("matmul_4096x4096x4096")  # on a CPU only autocast_bf16 applies
    config = HarnessConfig(device="cpu", size="smoke", timing_budget_ms=2, min_trials=1,
                           max_trials=2, warmup_ms=0)
    real = Evaluator.evaluate

    def refused(self, *args, **kwargs):
        return replace(real(self, *args, **kwargs), correct=False,
                       error_kind=ErrorKind.SANDBOX, error_message="the guard, wrongly")

    monkeypatch.setattr(Evaluator, "evaluate", refused)
    out = tmp_path / "candidates.jsonl"
    with pytest.raises(EvaluationError, match=r"matmul_4096x4096x4096: the judge refused the "
                                              r"reference optimizer's own 'autocast_bf16' as "
                                              r"sandbox \(the guard, wrongly\)"):
        record_candidates([problem], out, config, warm_workers=1, timeout_s=120)
    assert read_jsonl(out) == []
    monkeypatch.setattr(Evaluator, "evaluate", real)
    assert [r["transformation"] for r in record_candidates([problem], out, config,
                                                           warm_workers=1)] == ["autocast_bf16"]


def test_a_problem_of_a_stepped_op_is_profiled_alone_and_capped_from_the_start(
        tmp_path, monkeypatch):
    import autoprofiler_env.dataset.record.ncu as ncu  # where record_ncu looks run_ncu up

    calls = []

    def fake_run_ncu(problems, sections, **kwargs):
        calls.append(([p.name for p in problems], kwargs["max_kernels"]))
        status = [{"event": "primer", "s": 1.0}]
        for i, p in enumerate(problems):
            status += [{"event": "begin", "index": i, "uri": p.uri},
                       {"event": "problem", "index": i, "uri": p.uri, "ok": True}]
        command = ["--launch-count", "64"] if kwargs["max_kernels"] else []
        return replace(NcuRun.load(STUDY / "section-LaunchStats"), command=command,
                       problems=[{"uri": p.uri} for p in problems],
                       status=status + [{"event": "finished"}])

    monkeypatch.setattr(ncu, "run_ncu", fake_run_ncu)
    names = ["relu_16384x16384", "lstm_sequence_64x128x512", "softmax_16384x4096"]
    problems = [load_problem(n) for n in names]
    lstm = problems[1]
    assert "rnn" in lstm.tags and ncu.STEPPED_OPS & set(lstm.tags)
    assert record_ncu(problems, {"full": ["SpeedOfLight"]}, tmp_path, chunk=3,
                      alone={lstm.uri}) == 2
    assert calls == [(["relu_16384x16384", "softmax_16384x4096"], None),
                     (["lstm_sequence_64x128x512"], ncu.MAX_KERNELS)]
    assert covered(tmp_path / "full") == {p.uri for p in problems}
    assert record_ncu(problems, {"full": ["SpeedOfLight"]}, tmp_path, chunk=3,
                      alone={lstm.uri}) == 0  # done, capped: not run again


def test_a_capped_run_starts_only_with_the_time_such_a_run_takes(tmp_path, monkeypatch):
    """A run alone with the kernel cap is not started with less than CAPPED_RUN_S left, nor,
    once a deadline stopped it after T s, with less than RETRY_MARGIN x T: it would keep
    nothing (level1/69 on the H200, 2026-12-04: started with 106 s left, stopped)."""
    import autoprofiler_env.dataset.record.ncu as ncu  # where record_ncu looks run_ncu up

    calls = []
    stopped_s = 140.0  # so that RETRY_MARGIN x it is more than CAPPED_RUN_S

    def fake_run_ncu(problems, sections, **kwargs):  # stopped by the deadline
        calls.append(kwargs["deadline_s"])
        p = problems[0]
        return replace(NcuRun.load(STUDY / "section-LaunchStats"),
                       command=["--launch-count", "64"], problems=[{"uri": p.uri}],
                       wall_s=stopped_s,
                       status=[{"event": "primer", "s": 1.0},
                               {"event": "begin", "index": 0, "uri": p.uri},
                               {"event": "deadline", "deadline_s": kwargs["deadline_s"]}])

    monkeypatch.setattr(ncu, "run_ncu", fake_run_ncu)
    lstm = load_problem("lstm_sequence_64x128x512")
    configs = {"full": ["SpeedOfLight"]}

    def record(left: float, problem_timeout_s: float = 300.0) -> int:
        return record_ncu([lstm], configs, tmp_path, chunk=1, alone={lstm.uri},
                          deadline=time.monotonic() + left, problem_timeout_s=problem_timeout_s)

    def may_start(left: float) -> bool:
        return ncu.ncu_may_start([lstm], configs, tmp_path, chunk=1, alone={lstm.uri},
                                 deadline=time.monotonic() + left)

    assert ncu.RETRY_MARGIN * stopped_s > ncu.CAPPED_RUN_S + 10
    with monkeypatch.context() as frozen:  # more than CAPPED_RUN_S: exactly that is too little
        frozen.setattr(ncu.time, "monotonic", lambda: 0.0)
        assert not ncu.ncu_may_start([lstm], configs, tmp_path, 1, ncu.CAPPED_RUN_S,
                                     alone={lstm.uri})
        assert ncu.ncu_may_start([lstm], configs, tmp_path, 1,
                                 math.nextafter(ncu.CAPPED_RUN_S, math.inf), alone={lstm.uri})
    assert not may_start(ncu.CAPPED_RUN_S - 10) and may_start(ncu.CAPPED_RUN_S + 10)
    assert record(ncu.CAPPED_RUN_S - 10) == 0 and calls == []  # too little for such a run
    assert ncu.stopped_after(tmp_path / "full", lstm.uri) == 0.0
    assert record(ncu.CAPPED_RUN_S + 10) == 1  # enough: tried (and stopped)
    assert ncu.stopped_after(tmp_path / "full", lstm.uri) == stopped_s
    assert lstm.uri not in covered(tmp_path / "full")
    assert not may_start(ncu.CAPPED_RUN_S + 10)
    assert record(ncu.CAPPED_RUN_S + 10) == 0 and len(calls) == 1  # not 1.25 x the 140 s
    assert record(ncu.RETRY_MARGIN * stopped_s + 30) == 1 and len(calls) == 2  # more: tried
    # never more asked for than the problem timeout and a start: a run that long ends it
    assert record(ncu.MIN_RUN_S + 10, problem_timeout_s=5.0) == 1 and len(calls) == 3
    # nor does the batched run of the others wait for that much time
    relu = load_problem("relu_16384x16384")
    assert record_ncu([relu, lstm], configs, tmp_path / "b", chunk=2, alone={lstm.uri},
                      deadline=time.monotonic() + ncu.MIN_RUN_S + 10) == 1
    assert len(calls) == 4 and calls[-1] < ncu.CAPPED_RUN_S  # the batch only, not lstm


def test_an_ncu_part_that_would_start_no_run_logs_no_device_time(tmp_path, monkeypatch):
    """With time for a batched run but not for the capped one a problem alone needs (between
    MIN_RUN_S and CAPPED_RUN_S left), the ncu part starts nothing: ``timings.jsonl`` gets no
    line of no device time for it (2026-12-05 on the H200: such lines of 0.02 s)."""
    import autoprofiler_env.dataset.record as record
    import autoprofiler_env.dataset.record.ncu as ncu

    calls = []
    monkeypatch.setattr(ncu, "run_ncu", lambda *args, **kwargs: calls.append(1))
    lstm = load_problem("lstm_sequence_64x128x512")  # STEPPED_OPS: alone, capped
    left = (ncu.MIN_RUN_S + ncu.CAPPED_RUN_S) / 2
    held = record._record_part("full", tmp_path, [lstm], chunk=1, device="cpu",
                               deadline=time.monotonic() + left, warm_workers=0, llm=None)
    assert held == {"full": 0} and calls == []
    assert not (tmp_path / record.TIMINGS).exists()


def test_a_broken_reference_is_logged_by_its_uri_without_the_machines_path(tmp_path):
    broken = load_file(ROOT / "tests" / "data" / "problems" / "degenerate_mean.py")
    relu = load_file(ROOT / "tests" / "data" / "problems" / "relu_small.py")
    config = HarnessConfig(device="cpu", timing_budget_ms=2, min_trials=1, max_trials=2,
                           warmup_ms=0)  # the files' own (small) sizes
    rows = {r["uri"]: r for r in record_reference([broken, relu], config,
                                                  tmp_path / "reference.jsonl")}
    error = rows[broken.uri]["error"]
    assert error.startswith(f"{broken.uri}: the reference output 0 is matched by zeros"), error
    assert str(ROOT) not in error and "degenerate_mean.py" not in error
    assert rows[relu.uri]["error"] is None and rows[relu.uri]["median_ms"] > 0


def _recording(tmp_path: Path) -> Path:
    recording = tmp_path / "recording"
    for directory in STUDY.glob("section-*"):
        shutil.copytree(directory, recording / "profiles" / directory.name / "000-study")
    for name in ("basic", "full"):
        shutil.copytree(STUDY / f"set-{name}", recording / "sets" / name / "000-study")
    shutil.copy(REFERENCE, recording / "reference.jsonl")
    relu = "problem://autoprofiler/v1/level1/relu_16384x16384"
    (recording / "candidates.jsonl").write_text(json.dumps({
        "uri": relu, "transformation": "compile", "correct": True, "error_kind": None,
        "candidate_ms": 0.5, "candidate_p20_ms": 0.49, "candidate_p80_ms": 0.51,
        "speedup": 1.02}) + "\n")
    return recording


def test_a_recording_builds_a_dataset_with_outcomes_and_set_costs(tmp_path):
    content = build_from_recording(_recording(tmp_path))
    ds = Dataset(content)
    relu = "problem://autoprofiler/v1/level1/relu_16384x16384"
    assert ds.outcome(relu, "compile", optimizer="reference-v1").speedup == 1.02
    assert ds.record(relu).set_costs["basic"].passes == 10
    assert ds.info()["complete"] and ds.info()["outcomes"] == {"reference-v1": 1}


def test_dataset_commands(tmp_path):
    recording = _recording(tmp_path)
    out = tmp_path / "ds.json.gz"
    composed = tmp_path / "v2" / "candidates.jsonl"  # another optimizer's recording
    composed.parent.mkdir()
    composed.write_text(json.dumps({
        "uri": "problem://autoprofiler/v1/level1/relu_16384x16384",
        "transformation": "compile+cuda_graph", "correct": True, "candidate_ms": 0.4,
        "speedup": 1.3, "judge": 3}) + "\n")
    cli = [sys.executable, "-m", "experiments.cli", "dataset"]
    built = subprocess.run(cli + ["build", "--recording", str(recording), "--out", str(out),
                                  "--candidates", f"reference={composed}"],
                           capture_output=True, text=True, cwd=ROOT)
    assert built.returncode == 0, built.stderr
    assert "12 problems, 15 sections" in built.stdout
    assert "outcomes: 1 pairs of reference, 1 pairs of reference-v1" in built.stdout
    info = subprocess.run(cli + ["info", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert info.returncode == 0 and json.loads(info.stdout)["problems"] == 12
    assert json.loads(info.stdout)["outcomes"] == {"reference": 1, "reference-v1": 1}
    missing = subprocess.run(cli + ["info", str(tmp_path / "nope.json.gz")],
                             capture_output=True, text=True, cwd=ROOT)
    assert missing.returncode == 2 and "no dataset file" in missing.stderr
    bad = subprocess.run(cli + ["build", "--recording", str(tmp_path), "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "not a recording" in bad.stderr


def test_llm_outcomes_are_recorded_per_section_set_and_repeat(tmp_path):
    """A chat backend that answers with a correct ReLU for the first seed and with prose for
    the next: both are recorded, the second as an incorrect `no_code` outcome."""
    from autoprofiler_env.dataset.build import build
    from autoprofiler_env.dataset.record import LLMPart, record, record_llm
    from autoprofiler_env.optimizers.llm import LLMOptimizer
    from autoprofiler_env.problems import load_file

    relu_code = (ROOT / "tests" / "data" / "candidates" / "relu_correct.py").read_text()

    class Scripted:
        model_name = "scripted"

        def complete(self, messages, *, max_tokens, temperature, seed, timeout_s):
            assert "relu" in messages[-1]["content"].lower()
            return f"```python\n{relu_code}```" if seed % 2 == 0 else "I would fuse it."

    relu = load_file(ROOT / "tests" / "data" / "problems" / "relu_small.py")
    ds = Dataset(build_from_recording(_recording(tmp_path)))
    config = HarnessConfig(device="cpu", timing_budget_ms=2, min_trials=1, max_trials=2)
    out = tmp_path / "llm.jsonl"
    sets = [(), ("SpeedOfLight",)]
    ds_uri = "problem://autoprofiler/v1/level1/relu_16384x16384"

    class Replay:  # the suite problem's recorded profile, shown for the local test problem
        def canonical(self, sections):
            return ds.canonical(sections)

        def profile(self, uri, sections):
            return ds.profile(ds_uri, sections)

    rows = record_llm([relu], Replay(), LLMOptimizer(Scripted(), seed=0), sets, out, config,
                      repeats=2)
    assert [(r["sections"], r["repeat"], r["correct"], r["error_kind"]) for r in rows] == [
        ("", 0, True, None), ("", 1, False, "no_code"),
        ("SpeedOfLight", 0, True, None), ("SpeedOfLight", 1, False, "no_code")]
    again = record_llm([relu], Replay(), LLMOptimizer(Scripted(), seed=0), sets, out, config,
                       repeats=2)
    assert again == rows  # nothing recorded twice
    # the recorder's llm part is the same call, resumed: a third repeat is all it adds
    summary = record(tmp_path, [relu], parts=("llm",), device="cpu", llm=LLMPart(
        LLMOptimizer(Scripted(), seed=0), Replay(), tuple(sets), repeats=3))
    assert summary["llm"] == 6 and summary["llm_left"] == 0 and read_jsonl(out)[:4] == rows
    # built into a dataset (the rows re-keyed to the suite problem whose profile was shown)
    run_dirs = [STUDY / "section-SpeedOfLight"]
    reference = read_jsonl(REFERENCE)
    content = build(run_dirs, reference, [], llm_rows=[{**r, "uri": ds_uri} for r in rows],
                    sections=("SpeedOfLight",))
    keyed = content.problems[ds_uri].llm_outcomes["llm:scripted"]
    assert [o.correct for o in keyed[""]] == [True, False] and len(keyed["SpeedOfLight"]) == 2


def test_a_request_the_model_never_answered_is_not_recorded_and_is_asked_again(tmp_path):
    """Reviewed: an endpoint down (connection refused, HTTP 500) was recorded as the model's
    incorrect outcome for good, and a second run never asked again. Now it is left out with a
    warning, three in a row stop the call, and the next run asks them; a build leaves out
    such rows of an older recorder."""
    import warnings

    from autoprofiler_env.dataset.build import build
    from autoprofiler_env.dataset.record import record_llm
    from autoprofiler_env.errors import LLMError
    from autoprofiler_env.jsonlines import JsonlAppender
    from autoprofiler_env.optimizers.llm import LLMOptimizer
    from autoprofiler_env.problems import load_file

    relu_code = (ROOT / "tests" / "data" / "candidates" / "relu_correct.py").read_text()

    class Flaky:
        model_name = "flaky"

        def __init__(self, down):
            self.down, self.asked = down, []  # shared by the copies each request asks through

        def complete(self, messages, *, max_tokens, temperature, seed, timeout_s):
            self.asked.append(seed)
            if self.down(seed):
                raise LLMError("connection", "cannot reach http://127.0.0.1:9/v1/...")
            return f"```python\n{relu_code}```"

    relu = load_file(ROOT / "tests" / "data" / "problems" / "relu_small.py")
    ds = Dataset(build_from_recording(_recording(tmp_path)))
    config = HarnessConfig(device="cpu", timing_budget_ms=2, min_trials=1, max_trials=2)
    out = tmp_path / "llm.jsonl"

    class Replay:
        def canonical(self, sections):
            return ds.canonical(sections)

        def profile(self, uri, sections):
            return ds.profile("problem://autoprofiler/v1/level1/relu_16384x16384", sections)

    def run(down, repeats=4):
        backend = Flaky(down)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rows = record_llm([relu], Replay(), LLMOptimizer(backend, seed=0), [()], out,
                              config, repeats=repeats)
        return rows, len(backend.asked), [str(w.message) for w in caught]

    rows, asked, said = run(lambda seed: seed == 1)  # one request of four fails
    assert [r["repeat"] for r in rows] == [0, 2, 3] and asked == 4
    assert any("1 LLM request(s) got no reply" in m and "run the same command again" in m
               for m in said), said
    rows, asked, said = run(lambda seed: False)  # the endpoint is back: only it is asked
    assert [r["repeat"] for r in rows] == [0, 2, 3, 1] and asked == 1 and not said
    # one prompt never answered, asked for several repeats, is one problem: no stop
    rows, asked, said = run(lambda seed: True, repeats=7)
    assert len(rows) == 4 and asked == 3 and not any("stopped" in m for m in said), said
    # down for three problems in a row: it stops there
    others = [load_file(ROOT / "tests" / "data" / "problems" / name)
              for name in ("mse_scalar.py", "matmul_cpu.py", "softmax_warns.py")]
    backend = Flaky(lambda seed: True)
    with pytest.warns(UserWarning, match="stopped after 3 problems in a row"):
        record_llm(others + [relu], Replay(), LLMOptimizer(backend, seed=0), [()],
                   tmp_path / "others.jsonl", config, repeats=2)
    assert len(backend.asked) == 5  # 2 + 2 + 1: the third problem's first failure stops it

    class Refusing(Flaky):  # a bad key: refused every time, so the first stops the call
        def complete(self, messages, **kwargs):
            self.asked.append(kwargs["seed"])
            raise LLMError("http", "HTTP 401 from http://127.0.0.1:9/v1/...: bad key",
                           status=401)

    backend = Refusing(None)
    with pytest.warns(UserWarning, match=r"stopped: the endpoint refused a request .*HTTP 401"):
        record_llm(others, Replay(), LLMOptimizer(backend, seed=0), [()],
                   tmp_path / "refused.jsonl", config, repeats=2)
    assert len(backend.asked) == 1
    # an older recorder's row of a request with no reply: not an outcome of the model's;
    # the next call asks it again (reviewed: it was taken as done for good)
    old = {**rows[0], "repeat": 9, "correct": False, "error_kind": "connection",
           "speedup": None, "candidate_ms": None}
    with JsonlAppender(out) as log:
        log.write(old)
    rows, asked, said = run(lambda seed: False, repeats=10)
    assert asked == 6 and [r["repeat"] for r in rows][-1] == 9  # 4..9, 9 despite its old row
    assert sum(r["repeat"] == 9 for r in rows) == 1  # the old row is not returned
    uri = "problem://autoprofiler/v1/level1/relu_16384x16384"
    with pytest.warns(UserWarning, match="1 LLM row of a request that got no reply"):
        content = build([STUDY / "section-SpeedOfLight"], read_jsonl(REFERENCE), [],
                        llm_rows=[{**r, "uri": uri} for r in [*rows, old]],
                        sections=("SpeedOfLight",))
    assert [o.correct for o in content.problems[uri].llm_outcomes["llm:flaky"][""]] == [
        True] * len(rows)


def test_a_part_stopped_by_sigterm_still_logs_its_device_time(tmp_path, monkeypatch):
    """``timeout`` ends a command with SIGTERM: the part's wall time is logged, marked."""
    import os
    import signal
    import time

    import pytest

    import autoprofiler_env.dataset.record as record

    def terminated(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises SystemExit before this ends

    monkeypatch.setattr(record, "record_reference", terminated)
    small = load_problem(str(ROOT / "tests" / "data" / "problems" / "relu_small.py"))
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit):
        record.record(tmp_path, [small], parts=("reference",), device="cpu")
    assert signal.getsignal(signal.SIGTERM) is before  # restored
    (row,) = read_jsonl(tmp_path / record.TIMINGS)
    assert row["part"] == "reference" and row["interrupted"] and row["holds"] is None
    assert 0 <= row["wall_s"] < 5
    assert record.recording_cost(tmp_path)["logged_s"] == {"reference": row["wall_s"]}


def test_warming_stops_at_the_deadline_killing_a_compile_in_flight(tmp_path, capsys):
    import time

    from autoprofiler_env.dataset.record import CandidateWarmer

    small = load_problem(str(ROOT / "tests" / "data" / "problems" / "relu_small.py"))
    hangs = "import time\ntime.sleep(300)\n"  # the worker never answers this one
    config = HarnessConfig(device="cpu", size="smoke")
    with CandidateWarmer(config, workers=2, timeout_s=300) as warmer:
        honest = (ROOT / "tests" / "data" / "candidates" / "relu_correct.py").read_text()
        assert warmer.warm([(small, "compile", honest)]) == {}  # compiled to the end
        # a failure in a batch is judged again alone; the log keeps its cause
        raises = (ROOT / "tests" / "data" / "candidates" / "relu_raises.py").read_text()
        assert warmer.warm([(small, "compile", raises)]) == {}
        log = capsys.readouterr().err
        assert f"compiled {small.uri} compile: " in log
        assert "(runtime: ValueError: this kernel is not written yet)" in log, log
        # so does a judge that raised (here: a problem whose reference fails)
        broken = load_problem(str(ROOT / "tests" / "data" / "problems" / "forward_raises.py"))
        assert warmer.warm([(broken, "compile", honest)]) == {}
        log = capsys.readouterr().err
        assert f"compiled {broken.uri} compile: " in log and "(raised ProblemError: " in log, log
        started = time.monotonic()
        stopped = warmer.warm([(small, "compile", hangs)] * 4, deadline=time.monotonic() + 20)
        elapsed = time.monotonic() - started
        assert set(stopped) == {0, 1, 2, 3}  # none finished
        assert 19 < elapsed < 60  # not the 300 s of the sleeps
        assert not any(e.judging for e in warmer._all)
        # two ran until stopped, two never began (two workers)
        assert sorted(stopped.values())[:2] == [0.0, 0.0]
        assert all(5 < s <= elapsed for s in sorted(stopped.values())[2:])
        # a batch's warming stops at its limit too, the deadline far away
        started = time.monotonic()
        warmer.warm([(small, "compile", hangs)] * 4, deadline=time.monotonic() + 300, limit_s=5)
        assert 4.5 < time.monotonic() - started < 40
        assert not any(e.judging for e in warmer._all)


def test_a_candidate_that_outlasts_the_judges_limit_is_recorded_as_a_timeout(tmp_path,
                                                                             monkeypatch):
    """A compile that never ends costs the judge's limit (warming, then alone, after the
    candidates queued behind it), is recorded as failed with the limit in its row."""
    from autoprofiler_env.optimizers import compose

    small = load_problem(str(ROOT / "tests" / "data" / "problems" / "relu_small.py"))
    data = ROOT / "tests" / "data" / "candidates"
    sources = {"compile": (data / "hangs.py").read_text(),  # generates code: warmed first
               "tf32": (data / "relu_correct.py").read_text()}
    monkeypatch.setattr(compose, "compose", lambda problem, features, name: sources[name])
    config = HarnessConfig(device="cpu", size="smoke", timing_budget_ms=2, min_trials=1,
                           max_trials=2, warmup_ms=0)
    started = time.monotonic()
    rows = record_candidates([small], tmp_path / "candidates.jsonl", config, warm_workers=2,
                             timeout_s=5, plan={small.uri: ["compile", "tf32"]})
    assert time.monotonic() - started < 90
    honest, hung = rows  # the compile warming did not finish is judged last
    assert hung["transformation"] == "compile" and not hung["correct"]
    assert hung["error_kind"] == "timeout" and hung["timeout_s"] == 5
    assert honest["transformation"] == "tf32" and honest["correct"], honest
    assert honest["timeout_s"] == 5
    # the compile the limit stopped is logged, and a later call does not warm it again
    (stop,) = read_jsonl(tmp_path / WARM_STOPPED)
    assert stop["transformation"] == "compile" and stop["limit_s"] == 5
    # logged as the limit's stop (ran at least _LIMIT_RAN of it), and short of _LIMIT_RAN of
    # the longer limit below, which warms it again
    assert _LIMIT_RAN * 5 <= stop["ran_s"] < _LIMIT_RAN * 7, stop
    warmed = []
    real_batch = CandidateWarmer.batch
    monkeypatch.setattr(CandidateWarmer, "batch", lambda self, items, *a, **k: (
        warmed.extend(name for _, name, _ in items), real_batch(self, items, *a, **k))[1])
    (tmp_path / "candidates.jsonl").unlink()
    rows = record_candidates([small], tmp_path / "candidates.jsonl", config, warm_workers=2,
                             timeout_s=5, plan={small.uri: ["compile", "tf32"]})
    assert warmed == [] and [r["transformation"] for r in rows] == ["tf32", "compile"]
    assert rows[1]["error_kind"] == "timeout"
    # under a longer limit it is warmed again: it may compile within that one
    (tmp_path / "candidates.jsonl").unlink()
    record_candidates([small], tmp_path / "candidates.jsonl", config, warm_workers=2,
                      timeout_s=7, plan={small.uri: ["compile", "tf32"]})
    assert warmed == ["compile"]


def test_a_compile_expected_to_outlast_a_batch_is_judged_alone_after_the_others(
        tmp_path, monkeypatch):
    """A large network's ``max_autotune`` held its batch to the judge's limit, then was
    judged alone anyway: a candidate :func:`compiles_long` names is not warmed, and is
    judged alone after the call's other candidates, when the judge's limit is left before
    the deadline. An RNN's operators are cuDNN's."""
    from dataclasses import replace as with_

    from autoprofiler_env.dataset.record import candidates
    from autoprofiler_env.features import static_features
    from autoprofiler_env.optimizers import compose

    small = load_problem(str(ROOT / "tests" / "data" / "problems" / "relu_small.py"))
    features = static_features(small)
    big = with_(features, n_ops=300, tags=("conv", "matmul"))
    assert candidates.compiles_long("max_autotune+cuda_graph", with_(big, n_ops=40))
    assert not candidates.compiles_long("max_autotune", with_(big, n_ops=39))
    assert candidates.compiles_long("compile+tf32", big)
    assert not candidates.compiles_long("compile+tf32", with_(big, n_ops=299))
    assert not candidates.compiles_long("tf32+channels_last", with_(big, n_ops=10**4))
    assert not candidates.compiles_long("max_autotune", with_(big, tags=("rnn", "matmul")))
    honest = (ROOT / "tests" / "data" / "candidates" / "relu_correct.py").read_text()
    sources = {"compile": honest, "max_autotune": honest + "\n# another\n", "tf32": honest}
    monkeypatch.setattr(compose, "compose", lambda problem, features, name: sources[name])
    monkeypatch.setitem(candidates.LONG_COMPILE_OPS, "max_autotune", features.n_ops)
    warmed, real_batch = [], CandidateWarmer.batch
    monkeypatch.setattr(CandidateWarmer, "batch", lambda self, items, *a, **k: (
        warmed.extend(name for _, name, _ in items), real_batch(self, items, *a, **k))[1])
    config = HarnessConfig(device="cpu", size="smoke", timing_budget_ms=2, min_trials=1,
                           max_trials=2, warmup_ms=0)
    plan = {small.uri: ["max_autotune", "compile", "tf32"]}
    # it starts only with the judge's whole limit left: a command's end would cut it (115 s:
    # under the limit, and room for the warm batch's and tf32's cold starts on a slow machine)
    rows = record_candidates([small], tmp_path / "candidates.jsonl", config, warm_workers=2,
                             timeout_s=120, plan=plan, deadline=time.monotonic() + 115)
    assert warmed == ["compile"]
    assert [r["transformation"] for r in rows] == ["compile", "tf32"]
    rows = record_candidates([small], tmp_path / "candidates.jsonl", config, warm_workers=2,
                             timeout_s=120, plan=plan, deadline=time.monotonic() + 150)
    assert warmed == ["compile"]  # the next call: judged alone, not warmed
    assert [r["transformation"] for r in rows] == ["compile", "tf32", "max_autotune"]
    assert all(r["correct"] for r in rows) and "queue" not in rows[-1]["phases_s"]
    # a budget under the limit still starts one, as the call's first
    rows = [r for r in rows if r["transformation"] != "max_autotune"]
    (tmp_path / "candidates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rows = record_candidates([small], tmp_path / "candidates.jsonl", config, warm_workers=2,
                             timeout_s=120, plan=plan, deadline=time.monotonic() + 60)
    assert [r["transformation"] for r in rows] == ["compile", "tf32", "max_autotune"]


def test_a_batch_is_timed_in_the_processes_that_compiled_it_one_at_a_time(tmp_path,
                                                                          monkeypatch):
    """Compiled candidates are held after their correctness runs and timed one at a time in
    their own processes (phase ``queue``, not in ``wall_s``); one that failed before its
    timing is judged again alone; the rows come in the plan's order."""
    from autoprofiler_env.harness import Evaluator
    from autoprofiler_env.optimizers import compose

    small = load_problem(str(ROOT / "tests" / "data" / "problems" / "relu_small.py"))
    data = ROOT / "tests" / "data" / "candidates"
    honest = (data / "relu_correct.py").read_text()
    sources = {"compile": honest, "max_autotune": honest + "\n# another\n",
               "compile+tf32": (data / "relu_zeros.py").read_text(), "tf32": honest}
    monkeypatch.setattr(compose, "compose", lambda problem, features, name: sources[name])
    timings = []  # which evaluator timed what, and when
    real_timing = Evaluator._timing

    def timing(self, prepared, *args, **kwargs):
        started = time.monotonic()
        try:
            return real_timing(self, prepared, *args, **kwargs)
        finally:
            timings.append((id(self), started, time.monotonic()))

    monkeypatch.setattr(Evaluator, "_timing", timing)
    config = HarnessConfig(device="cpu", size="smoke", timing_budget_ms=2, min_trials=1,
                           max_trials=2, warmup_ms=0)
    plan = {small.uri: ["compile", "tf32", "compile+tf32", "max_autotune"]}
    rows = record_candidates([small], tmp_path / "candidates.jsonl", config, warm_workers=3,
                             timeout_s=120, plan=plan)
    assert [r["transformation"] for r in rows] == plan[small.uri]
    by_name = {r["transformation"]: r for r in rows}
    assert by_name["compile"]["correct"] and by_name["max_autotune"]["correct"]
    assert not by_name["compile+tf32"]["correct"]  # zeros: failed before its timing
    for name in ("compile", "max_autotune"):  # held, then timed where they were compiled
        phases = by_name[name]["phases_s"]
        assert "queue" in phases and "load" in phases, phases
        # wall_s leaves the queue out: 2 s for what no phase holds (the static check, a
        # process's start, the GIL beside two warming threads: about 0 s here, unloaded)
        assert by_name[name]["wall_s"] < sum(phases.values()) - phases["queue"] + 2.0
    phases = by_name["max_autotune"]["phases_s"]
    assert phases["queue"] > 0  # waited for the others' timing (4.1 s here)
    # most of that wait is not in its wall_s (one holding it would be over the phases' sum)
    assert by_name["max_autotune"]["wall_s"] < sum(phases.values()) - phases["queue"] / 2
    for name in ("tf32", "compile+tf32"):  # judged alone (the second again, after the batch)
        assert "queue" not in by_name[name]["phases_s"]
    assert len({who for who, _, _ in timings}) == 3  # two held evaluators, and the judge's
    spans = sorted((start, end) for _, start, end in timings)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    assert not (tmp_path / WARM_STOPPED).exists()  # nothing was stopped
    # where the GPU would not hold them all, each is judged alone
    monkeypatch.setattr(CandidateWarmer, "_fits", lambda self, peak, held: False)
    alone = record_candidates([small], tmp_path / "alone.jsonl", config, warm_workers=3,
                              timeout_s=120, plan=plan)
    assert [r["correct"] for r in alone] == [r["correct"] for r in rows]
    assert not any("queue" in r["phases_s"] for r in alone)


def test_held_candidates_are_still_timed_when_the_deadline_passes(tmp_path, monkeypatch):
    """A deadline that passes after a batch compiled drops neither held candidate (their
    timings take seconds, their compiles took long); the eager one queued between them is
    left to the next call, which judges only it."""
    import autoprofiler_env.dataset.record.candidates as candidates
    from autoprofiler_env.optimizers import compose

    small = load_problem(str(ROOT / "tests" / "data" / "problems" / "relu_small.py"))
    honest = (ROOT / "tests" / "data" / "candidates" / "relu_correct.py").read_text()
    sources = {"compile": honest, "tf32": honest, "max_autotune": honest + "\n# another\n"}
    monkeypatch.setattr(compose, "compose", lambda problem, features, name: sources[name])
    deadline = time.monotonic() + 3600
    compiled = []  # set once the batch is compiled: the deadline passes then
    real_batch, real_past = CandidateWarmer.batch, candidates._past
    monkeypatch.setattr(CandidateWarmer, "batch", lambda self, *a, **k: (
        real_batch(self, *a, **k), compiled.append(True))[0])
    monkeypatch.setattr(candidates, "_past", lambda instant: (
        instant == deadline and bool(compiled)) or real_past(instant))
    config = HarnessConfig(device="cpu", size="smoke", timing_budget_ms=2, min_trials=1,
                           max_trials=2, warmup_ms=0)
    plan = {small.uri: ["compile", "tf32", "max_autotune"]}
    rows = record_candidates([small], tmp_path / "candidates.jsonl", config, warm_workers=2,
                             timeout_s=120, deadline=deadline, plan=plan)
    assert [r["transformation"] for r in rows] == ["compile", "max_autotune"]
    assert all(r["correct"] and "queue" in r["phases_s"] for r in rows)
    monkeypatch.setattr(candidates, "_past", real_past)
    rows = record_candidates([small], tmp_path / "candidates.jsonl", config, warm_workers=2,
                             timeout_s=120, plan=plan)
    assert [r["transformation"] for r in rows] == ["compile", "max_autotune", "tf32"]
    # a held timing not done by ``until`` is interrupted; one asked for after it never starts
    with CandidateWarmer(config, workers=2, timeout_s=120) as warmer, \
            warmer.batch([(small, "compile", honest)] * 2) as batch:
        assert batch.finish(0, until=time.monotonic() - 1) is None
        assert not batch.turns[0].go.is_set()
        assert batch.finish(1, until=time.monotonic() + 60).correct


def test_a_held_candidate_that_fails_in_its_timing_is_judged_again_alone(tmp_path,
                                                                        monkeypatch):
    """Only a correct verdict is kept from a held candidate: one that passes its correctness
    runs and then fails on the timed calls is judged again alone, and that verdict is
    recorded."""
    from autoprofiler_env.harness import Evaluator
    from autoprofiler_env.optimizers import compose

    matmul = load_file(ROOT / "tests" / "data" / "problems" / "matmul_cpu.py")
    cheats = ROOT / "tests" / "data" / "candidates" / "cheats"
    sources = {"compile": (cheats / "stateful_cache.py").read_text(),  # honest 3 calls
               "max_autotune": (cheats / "honest_linear.py").read_text()}
    monkeypatch.setattr(compose, "compose", lambda problem, features, name: sources[name])
    judged = []
    real_evaluate = Evaluator.evaluate

    def evaluate(self, problem, source, size=None, pause=None):
        judged.append((source == sources["compile"], pause is not None))
        return real_evaluate(self, problem, source, size, pause)

    monkeypatch.setattr(Evaluator, "evaluate", evaluate)
    config = HarnessConfig(device="cpu", timing_budget_ms=60, min_trials=3, max_trials=30,
                           static_check="off")
    rows = record_candidates([matmul], tmp_path / "candidates.jsonl", config, warm_workers=2,
                             timeout_s=120, plan={matmul.uri: ["compile", "max_autotune"]})
    cached, honest = rows
    assert not cached["correct"] and cached["error_kind"] == "mismatch", cached
    assert "queue" not in cached["phases_s"]  # the alone verdict is the one recorded
    assert honest["correct"] and "queue" in honest["phases_s"]
    assert sorted(judged) == [(False, True), (True, False), (True, True)]


@pytest.mark.parametrize("warm_workers, starves", [(2, 2), (1, 2), (2, 3)])
def test_a_candidate_out_of_memory_is_judged_again_with_the_gpu_to_itself(
        tmp_path, monkeypatch, warm_workers, starves):
    """A verdict of too little GPU memory is not kept while other processes of the recorder
    hold the GPU: the candidate is judged again after the batch, and once more after the
    warm workers' processes and the judge's own reference process are stopped; that verdict
    is recorded (``gpu_to_itself``), a starved one too (``starves`` 3). Before 2026-12-04
    the last try kept the judge's reference process and kept outputs, and a verdict without
    warm workers stood at once."""
    from autoprofiler_env.dataset.record.candidates import judged
    from autoprofiler_env.harness import Evaluator
    from autoprofiler_env.harness.records import ErrorKind
    from autoprofiler_env.optimizers import compose

    matmul = load_file(ROOT / "tests" / "data" / "problems" / "matmul_cpu.py")
    honest = (ROOT / "tests" / "data" / "candidates" / "cheats" / "honest_linear.py").read_text()
    sources = {"max_autotune": honest, "channels_last": honest + "\n# eager\n"}
    monkeypatch.setattr(compose, "compose", lambda problem, features, name: sources[name])
    starving, released, reference_alive = [starves], [], []
    real_evaluate, real_release = Evaluator.evaluate, CandidateWarmer.release

    def evaluate(self, problem, source, size=None, pause=None):
        if source == sources["channels_last"]:
            reference_alive.append(self.worker_pid is not None)
        result = real_evaluate(self, problem, source, size, pause)
        if source == sources["channels_last"] and starving[0]:
            starving[0] -= 1
            return replace(result, correct=False, error_kind=ErrorKind.RUNTIME,
                           error_message="OutOfMemoryError: CUDA out of memory. Tried to "
                                         "allocate 6.00 GiB")
        return result

    def release(self):
        released.append(self.occupied)
        real_release(self)
        assert not self.occupied

    monkeypatch.setattr(Evaluator, "evaluate", evaluate)
    monkeypatch.setattr(CandidateWarmer, "release", release)
    config = HarnessConfig(device="cpu", timing_budget_ms=30, min_trials=3, max_trials=10,
                           static_check="off")
    out = tmp_path / "candidates.jsonl"
    rows = record_candidates([matmul], out, config, warm_workers=warm_workers, timeout_s=120,
                             plan={matmul.uri: ["max_autotune", "channels_last"]})
    eager = {r["transformation"]: r for r in rows}["channels_last"]
    assert released == [warm_workers > 1] and starving == [max(starves - 3, 0)]
    assert len(reference_alive) == 3 and reference_alive[1:] == [True, False]  # last: none
    assert len(rows) == 2 and eager["gpu_to_itself"] is True and eager["caches_returned"]
    assert eager["correct"] is (starves < 3), eager
    assert (matmul.uri, "channels_last") in judged(rows)
    assert record_candidates([matmul], out, config, warm_workers=warm_workers, timeout_s=120,
                             plan={matmul.uri: ["max_autotune", "channels_last"]}) == rows


def test_a_starved_verdict_recorded_beside_other_processes_is_judged_again(tmp_path):
    """A recorded verdict of too little GPU memory without the last try's marks (the rows
    of KernelBench's ``level1/87`` ``tf32`` and ``level1/36`` ``compile``, 2026-12-04, had
    none; those of ``level1/87`` ``tf32`` and ``level1/63`` ``tf32+channels_last`` had
    ``gpu_to_itself`` but not ``caches_returned``) is judged again by the next call; its new
    row is the one a build takes (the later row wins)."""
    from autoprofiler_env.dataset.record.candidates import judged

    matmul = load_file(ROOT / "tests" / "data" / "problems" / "matmul_cpu.py")
    starved = {"uri": matmul.uri, "transformation": "tf32", "correct": False,
               "error_kind": "out_of_memory", "error_message": "the judge ran out of GPU "
               "memory holding the outputs beside the candidate's process: CUDA out of memory"}
    crashed = {**starved, "transformation": "compile", "error_kind": "runtime",
               "error_message": "OutOfMemoryError: CUDA out of memory. Tried to allocate 7 GiB"}
    mismatch = {**starved, "transformation": "max_autotune", "error_kind": "mismatch",
                "error_message": "input set 0: 3 values off"}
    rows = [starved, crashed, mismatch]
    assert judged(rows) == {(matmul.uri, "max_autotune")}
    assert judged([{**r, "gpu_to_itself": True} for r in rows]) == {
        (matmul.uri, "max_autotune")}
    assert judged([{**r, "gpu_to_itself": True, "caches_returned": True} for r in rows]) == {
        (matmul.uri, name) for name in ("tf32", "compile", "max_autotune")}
    out = tmp_path / "candidates.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = HarnessConfig(device="cpu", timing_budget_ms=30, min_trials=3, max_trials=10)
    again = record_candidates([matmul], out, config, warm_workers=1, timeout_s=120,
                              plan={matmul.uri: ["tf32", "max_autotune"]})
    assert [r["transformation"] for r in again] == ["tf32", "compile", "max_autotune", "tf32"]
    assert again[-1]["error_kind"] != "out_of_memory"


def test_the_batch_benchmark_judges_both_ways(capsys, monkeypatch):
    from autoprofiler_env.optimizers import compose
    from experiments import bench_batch

    honest = (ROOT / "tests" / "data" / "candidates" / "relu_correct.py").read_text()
    monkeypatch.setattr(compose, "compose", lambda problem, features, name: honest)
    small = ROOT / "tests" / "data" / "problems" / "relu_small.py"
    assert bench_batch.main(["--problem", str(small), "--candidates", "compile,max_autotune",
                             "--timeout", "120"]) == 0
    out = capsys.readouterr().out
    assert out.count("compile  ") == 2 and "failed" not in out
    assert " held: " in out and "again: " in out and "held saves" in out


def test_a_batch_is_held_only_where_the_gpu_holds_it():
    with CandidateWarmer(HarnessConfig(device="cuda"), workers=4) as warmer:
        warmer._gpu_bytes = 100  # no GPU asked
        assert warmer._fits(12, 38) and not warmer._fits(13, 38)  # HOLD_SHARE: half of it
        assert warmer._fits(None, 50)  # not measured: held
    with CandidateWarmer(HarnessConfig(device="cpu"), workers=4) as warmer:
        assert warmer._fits(1 << 60, 1 << 60)


def test_a_batch_holds_its_candidates_while_their_peaks_sum_within_the_share(tmp_path,
                                                                             monkeypatch):
    """Each held candidate counts its own problem's reference peak: of three compiled
    candidates whose references peak at 0.3 of a GPU of 1 GB (a share of 0.5), the first to
    reach its timing is held, the other two are judged alone; had each counted the peak
    times the batch's size (0.9), none would have been. (The three are one batch: their
    footprints while checked, a few KB, are far within the batch's share.)"""
    from autoprofiler_env.harness import Evaluator
    from autoprofiler_env.optimizers import compose

    small = load_problem(str(ROOT / "tests" / "data" / "problems" / "relu_small.py"))
    honest = (ROOT / "tests" / "data" / "candidates" / "relu_correct.py").read_text()
    sources = {"compile": honest, "max_autotune": honest + "\n# another\n",
               "compile+tf32": honest + "\n# a third\n"}
    monkeypatch.setattr(compose, "compose", lambda problem, features, name: sources[name])
    monkeypatch.setattr(Evaluator, "peak_memory_bytes", property(lambda self: 3 * 10**8))
    real_init = CandidateWarmer.__init__

    def on_a_gpu_of_1gb(self, *args, **kwargs):  # judged on the CPU, counted as on a GPU
        real_init(self, *args, **kwargs)
        self._device, self._gpu_bytes = "cuda", 10**9

    monkeypatch.setattr(CandidateWarmer, "__init__", on_a_gpu_of_1gb)
    config = HarnessConfig(device="cpu", size="smoke", timing_budget_ms=2, min_trials=1,
                           max_trials=2, warmup_ms=0)
    rows = record_candidates([small], tmp_path / "candidates.jsonl", config, warm_workers=3,
                             timeout_s=120, plan={small.uri: list(sources)})
    assert all(r["correct"] for r in rows)
    assert sum("queue" in r["phases_s"] for r in rows) == 1


def test_warm_batches_are_cut_by_the_gpu_memory_their_checks_take(tmp_path, monkeypatch):
    """On a GPU the recorder cuts a batch where its compiled candidates' footprints would
    pass :data:`BATCH_SHARE` of the GPU's memory, each estimated from the problem's sizes and
    its recorded reference peak (``reference.jsonl`` beside the candidates)."""
    from autoprofiler_env.dataset.record.candidates import BATCH_SHARE, footprint
    from autoprofiler_env.features import static_features
    from autoprofiler_env.optimizers import compose

    small = load_problem(str(ROOT / "tests" / "data" / "problems" / "relu_small.py"))
    honest = (ROOT / "tests" / "data" / "candidates" / "relu_correct.py").read_text()
    names = ["compile", "max_autotune", "compile+tf32"]
    monkeypatch.setattr(compose, "compose",
                        lambda problem, features, name: honest + f"\n# {name}\n")
    each = footprint(static_features(small), None)
    gpu = int(2.5 * each / BATCH_SHARE)  # two of them fit, not three
    real_init, sizes = CandidateWarmer.__init__, []

    def on_a_small_gpu(self, *args, **kwargs):  # judged on the CPU, counted as on a GPU
        real_init(self, *args, **kwargs)
        self._device, self._gpu_bytes = "cuda", gpu

    real_batch = CandidateWarmer.batch
    monkeypatch.setattr(CandidateWarmer, "__init__", on_a_small_gpu)
    monkeypatch.setattr(CandidateWarmer, "batch", lambda self, items, *a, **k: (
        sizes.append(len(items)), real_batch(self, items, *a, **k))[1])
    config = HarnessConfig(device="cpu", size="smoke", timing_budget_ms=2, min_trials=1,
                           max_trials=2, warmup_ms=0)
    rows = record_candidates([small], tmp_path / "a" / "candidates.jsonl", config,
                             warm_workers=3, timeout_s=120, plan={small.uri: names})
    assert all(r["correct"] for r in rows) and sizes == [2, 1]
    # a recorded peak larger than the sizes counts: one at a time
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "reference.jsonl").write_text(json.dumps(
        {"uri": small.uri, "peak_memory_mb": gpu / 2**20}) + "\n")
    sizes.clear()
    record_candidates([small], tmp_path / "b" / "candidates.jsonl", config, warm_workers=3,
                      timeout_s=120, plan={small.uri: names})
    assert sizes == [1, 1, 1]


def test_a_reused_timeout_under_a_shorter_limit_is_judged_again(tmp_path, monkeypatch):
    import hashlib

    from autoprofiler_env.dataset.record.machine import machine_info
    from autoprofiler_env.harness.records import JUDGE_VERSION
    from autoprofiler_env.optimizers import compose

    small = load_problem(str(ROOT / "tests" / "data" / "problems" / "relu_small.py"))
    source = (ROOT / "tests" / "data" / "candidates" / "relu_correct.py").read_text()
    monkeypatch.setattr(compose, "compose", lambda problem, features, name: source)
    here = {k: machine_info("cpu").get(k) for k in ("gpu", "torch", "device")}
    timed_out = {"uri": small.uri, "correct": False, "error_kind": "timeout",
                 "judge": JUDGE_VERSION, "source_sha256": hashlib.sha256(source.encode())
                 .hexdigest(), **here}
    reuse = [{**timed_out, "transformation": "tf32", "timeout_s": 5.0},  # shorter: again
             {**timed_out, "transformation": "channels_last", "timeout_s": 60.0}]
    config = HarnessConfig(device="cpu", size="smoke", timing_budget_ms=2, min_trials=1,
                           max_trials=2, warmup_ms=0)
    rows = record_candidates([small], tmp_path / "candidates.jsonl", config, warm_workers=1,
                             timeout_s=30, plan={small.uri: ["tf32", "channels_last"]},
                             reuse=reuse)
    by_name = {r["transformation"]: r for r in rows}
    assert by_name["channels_last"] == {**reuse[1], "reused": True}
    assert "reused" not in by_name["tf32"] and by_name["tf32"]["correct"]
    assert by_name["tf32"]["timeout_s"] == 30


def test_a_plan_names_the_candidates_and_a_same_source_row_is_reused(tmp_path):
    """With a plan the candidates part records its (composed) candidates, in its order; a row
    of the same judge and source is copied, one of another source is not."""
    import hashlib

    from autoprofiler_env.features import static_features
    from autoprofiler_env.harness.records import JUDGE_VERSION
    from autoprofiler_env.optimizers.compose import compose

    problem = load_problem("linear_gelu_layernorm_4096x4096")
    features = static_features(problem)
    config = HarnessConfig(device="cpu", size="smoke", timing_budget_ms=2, min_trials=1,
                           max_trials=2, warmup_ms=0)
    source = compose(problem, features, "compile")
    from autoprofiler_env.dataset.record.machine import machine_info

    here = {k: machine_info("cpu").get(k) for k in ("gpu", "torch", "device")}
    old = {"uri": problem.uri, "transformation": "compile", "correct": True, "speedup": 1.5,
           "judge": JUDGE_VERSION,
           "source_sha256": hashlib.sha256(source.encode()).hexdigest(), **here}
    stale = {**old, "transformation": "compile+autocast_bf16", "source_sha256": "0" * 64}
    elsewhere = {**old, "gpu": "NVIDIA H100", "speedup": 9.0}  # another machine's: not copied
    out = tmp_path / "candidates.jsonl"
    plan = {problem.uri: ["compile", "compile+autocast_bf16"]}
    rows = record_candidates([problem], out, config, warm_workers=1, timeout_s=300,
                             plan=plan, reuse=[elsewhere, old, stale])
    assert [r["transformation"] for r in rows] == ["compile", "compile+autocast_bf16"]
    assert rows[0] == {**old, "reused": True}
    measured = rows[1]
    assert "reused" not in measured and measured["judge"] == JUDGE_VERSION
    # judged, not crashed: bf16 at the smoke size may miss 1e-2 (a mismatch is a verdict)
    assert measured["correct"] or measured["error_kind"] == "mismatch", measured
    assert measured["tolerance_needed"] is not None
    assert measured["source_sha256"] == hashlib.sha256(
        compose(problem, features, "compile+autocast_bf16").encode()).hexdigest()
    # a problem the plan does not name is not recorded
    other = load_problem("relu_16384x16384")
    assert record_candidates([other, problem], out, config, warm_workers=1,
                             plan=plan) == rows


def test_recording_on_a_cuda_device_that_torch_does_not_see_is_one_clear_error(
        tmp_path, monkeypatch, capsys):
    import torch

    from experiments.cli import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["record", "--out", str(tmp_path / "rec"), "relu_16384x16384"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["autoprofiler: error: recording on --device cuda needs a CUDA GPU; this "
                   f"machine has no CUDA device (torch {torch.__version__} sees none): record "
                   "on a GPU machine (docs/dataset.md), or try the pipeline with --device cpu"]


def _own_recording(tmp_path: Path) -> tuple[Path, Path]:
    """A recording of "your own files": the study's full-set run and the recorded reference
    rows of its 12 suite problems, named as copies of their files in a folder ``mine``
    (``problem://local/mine/<stem>``) would be named when recorded from there."""
    mine, recording = tmp_path / "mine", tmp_path / "recording"
    mine.mkdir()
    run = json.loads((STUDY / "set-full" / "run.json").read_text())
    names = {}
    for p in run["problems"]:
        problem = load_problem(p["uri"])
        shutil.copy(problem.path, mine / problem.path.name)
        names[p["uri"]] = f"problem://local/mine/{problem.name}"
    shutil.copytree(STUDY / "set-full", recording / "sets" / "full" / "000-study")
    text = (recording / "sets" / "full" / "000-study" / "run.json").read_text()
    for old, new in names.items():
        text = text.replace(f'"{old}"', f'"{new}"')
    (recording / "sets" / "full" / "000-study" / "run.json").write_text(text)
    rows = [{**r, "uri": names[r["uri"]]} for r in read_jsonl(REFERENCE) if r["uri"] in names]
    (recording / "reference.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return recording, mine


def test_a_recording_of_your_own_files_builds_from_their_folder(tmp_path):
    """Reviewed: `record --out DIR my/*.py` recorded, but nothing could build it (the build
    looked each URI up in the suite), and your files have no split."""
    from autoprofiler_env.dataset.build import SPLIT_SEED
    from autoprofiler_env.dataset.record.reference import problem_sha256
    from autoprofiler_env.errors import DatasetError, SourceMismatchError

    recording, mine = _own_recording(tmp_path)
    with pytest.raises(DatasetError, match=r"holds problems of your own files \(problem://"
                                           r"local/mine/\w+ and 11 more\): give the folder"):
        build_from_recording(recording)
    content = build_from_recording(recording, source=mine)
    assert len(content.problems) == 12 and all(uri.startswith("problem://local/mine/")
                                               for uri in content.problems)
    splits = [r.split for r in content.problems.values()]
    assert set(splits) == {"train", "val", "test"}, splits
    assert content.metadata["splits_dealt"] == {
        "seed": SPLIT_SEED, "pattern": content.metadata["splits_dealt"]["pattern"],
        "stratified_by": "level, op", "problems": 12}
    # the same files, the same splits; found in the folders of the folder given too
    again = build_from_recording(recording, source=tmp_path)
    assert [r.split for r in again.problems.values()] == splits
    # a folder that lacks one, or a file edited since it was recorded, is refused
    lacking = tmp_path / "lacking" / "mine"
    shutil.copytree(mine, lacking)
    next(lacking.glob("*.py")).unlink()
    with pytest.raises(DatasetError, match=r"which --source .* does not \(its files are named "
                                           r"as problem://local/mine/\w+ is\)"):
        build_from_recording(recording, source=lacking)
    with pytest.raises(DatasetError, match=r"mine/\w+.py are both problem://local/mine/\w+: "
                                           r"give the folder of the one recorded"):
        build_from_recording(recording, source=tmp_path)
    # reviewed: a virtual environment inside the folder was searched (and its copies refused)
    venv = mine / ".venv" / "lib" / "site-packages" / "mine"
    shutil.copytree(mine, venv, ignore=shutil.ignore_patterns(".venv"))
    assert len(build_from_recording(recording, source=mine).problems) == 12
    broken = next(lacking.glob("*.py"))
    broken.write_text("class Model(:\n")
    with pytest.raises(DatasetError, match=r"the recorded problem://local/mine/\w+ is broken "
                                           r"now: .*syntax error at line 1"):
        build_from_recording(recording, source=lacking)
    rows = read_jsonl(recording / "reference.jsonl")
    first = load_file(mine / (rows[0]["uri"].rsplit("/", 1)[1] + ".py"))
    rows[0]["problem_sha256"] = problem_sha256(first)
    (recording / "reference.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert len(build_from_recording(recording, source=mine).problems) == 12
    first.path.write_text(first.path.read_text() + "\n# edited\n")
    with pytest.raises(SourceMismatchError, match="is not the file .* recorded as"):
        build_from_recording(recording, source=mine)


def test_a_recording_refuses_two_files_of_one_name_and_a_file_edited_since(tmp_path):
    """Reviewed: two files named alike in folders named alike were one URI's two rows, and a
    file edited between two calls was taken as recorded (its old rows kept)."""
    from autoprofiler_env.dataset.record import record
    from autoprofiler_env.dataset.record.reference import problem_sha256
    from autoprofiler_env.errors import ProblemError, SourceMismatchError

    relu = ROOT / "tests" / "data" / "problems" / "relu_small.py"
    for folder in ("a/mine", "b/mine"):
        (tmp_path / folder).mkdir(parents=True)
        shutil.copy(relu, tmp_path / folder / "relu.py")
    one, two = load_file(tmp_path / "a/mine/relu.py"), load_file(tmp_path / "b/mine/relu.py")
    out = tmp_path / "rec"
    with pytest.raises(ProblemError, match=r"b/mine/relu.py: is problem://local/mine/relu, as "
                                           r".*a/mine/relu.py is: a recording names each "
                                           r"problem once \(rename one"):
        record(out, [one, two], parts=("reference",), device="cpu")
    assert not out.exists()
    from autoprofiler_env.dataset.record.reference import check_sources

    # one file named twice (as a file, and in its folder) is one problem
    assert check_sources(out, [one, load_file(tmp_path / "a/mine/relu.py")]) == [one]
    out.mkdir()
    (out / "reference.jsonl").write_text(json.dumps({
        "uri": one.uri, "problem_sha256": problem_sha256(one), "error": None,
        "device": "cpu"}) + "\n")
    (tmp_path / "a/mine/relu.py").write_text(relu.read_text().replace("rows = 64", "rows = 65"))
    with pytest.raises(SourceMismatchError, match=r"relu.py: is not the file .* recorded as "
                                                  r"problem://local/mine/relu \(sha256"):
        record(out, [one], parts=("reference",), device="cpu")
    assert len(read_jsonl(out / "reference.jsonl")) == 1


def test_the_candidates_part_passes_over_a_failed_reference_and_a_broken_file(tmp_path):
    """Reviewed: one file whose inputs fail stopped the whole candidates part (and its
    reference had failed already)."""
    from autoprofiler_env.dataset.record.candidates import candidate_features

    relu = load_file(ROOT / "tests" / "data" / "problems" / "relu_small.py")
    (tmp_path / "mine").mkdir()
    broken = tmp_path / "mine" / "typo.py"
    broken.write_text((ROOT / "tests" / "data" / "problems" / "relu_small.py").read_text()
                      .replace("torch.randn(rows, cols)", "torch.randn(rowz, cols)"))
    failed = tmp_path / "mine" / "failed.py"
    shutil.copy(ROOT / "tests" / "data" / "problems" / "relu_small.py", failed)
    broken, failed = load_file(broken), load_file(failed)
    log = tmp_path / "reference.jsonl"
    log.write_text(json.dumps({"uri": failed.uri, "error": f"{failed.uri}: the reference "
                                                           "failed"}) + "\n")
    with pytest.warns(UserWarning, match=r"typo.*NameError.*its candidates are not recorded"):
        features = candidate_features([broken, failed, relu], log)
    assert list(features) == [relu.uri] and "pointwise" in features[relu.uri].tags


def test_record_takes_a_folder_and_names_the_problems_whose_reference_failed(tmp_path, capsys):
    """Reviewed: `record DIR` said "no such file", and a failed reference was counted among
    the recorded ones without a word."""
    from experiments.cli import main

    relu = (ROOT / "tests" / "data" / "problems" / "relu_small.py").read_text()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "relu.py").write_text(relu)
    (mine / "typo.py").write_text(relu.replace("torch.randn(rows, cols)", "torch.randn(rowz)"))
    (mine / "broken.py").write_text("def get_inputs(:\n")
    out = tmp_path / "rec"
    assert main(["record", "--out", str(out), "--device", "cpu", "--parts", "reference",
                 str(mine)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.splitlines()[-1])["reference"] == 2
    assert "autoprofiler: skipped " in captured.err and "broken.py" in captured.err
    assert ("autoprofiler: 1 of 2 problems failed their reference and are recorded so (a "
            "dataset built from the recording leaves them out):\n  problem://local/mine/typo: "
            "the reference failed: NameError") in captured.err
    assert main(["record", "--out", str(out), "--device", "cpu", "--parts", "reference",
                 str(tmp_path / "nothing")]) == 2
    assert "neither a suite URI, a suite name nor a file" in capsys.readouterr().err


def test_a_build_leaves_out_a_reference_row_without_a_verdict_or_a_uri(tmp_path):
    """Reviewed: a row with neither a time nor an error was taken for timed (the build wrote a
    file the loader then refused), and a row whose URI was not a string crashed the build."""
    recording = _recording(tmp_path)
    rows = read_jsonl(recording / "reference.jsonl")
    relu = next(i for i, r in enumerate(rows) if r["uri"].endswith("/relu_16384x16384"))
    rows[relu] = {k: v for k, v in rows[relu].items() if k not in ("median_ms", "error")}
    rows.append({"uri": 7, "median_ms": 1.0, "error": None})
    (recording / "reference.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.warns(UserWarning) as warned:
        content = build_from_recording(recording)
    said = sorted(str(w.message) for w in warned)
    assert any("1 record without a problem's URI (a string) left out" in m for m in said)
    assert any("1 reference row with neither a time (median_ms) nor an error" in m
               for m in said)
    assert rows[relu]["uri"] not in content.problems and len(content.problems) == 11
    Dataset(content)  # the file loads
