"""What a recording call checks before and while it records: one machine's rows per recording,
the options it is given, the saved runs and logs it reads, the KernelBench checkout it is
pointed at; and what it says (tests/test_record.py: what it records)."""

import json
import shutil
from pathlib import Path

import pytest

from autoprofiler_env.dataset.record import record, recording_cost
from autoprofiler_env.dataset.record.machine import OtherMachineError, machine_info
from autoprofiler_env.errors import (
    DatasetError,
    NcuNotFoundError,
    ReportReadError,
    SourceMismatchError,
)
from autoprofiler_env.harness import HarnessConfig
from autoprofiler_env.jsonlines import (
    RESUMED,
    JsonlAppender,
    read_jsonl,
    read_jsonl_checked,
    scan_jsonl,
)
from autoprofiler_env.problems import load_file
from autoprofiler_env.problems.kernelbench import KernelBenchCheckout
from experiments.cli import main

ROOT = Path(__file__).parents[1]
RELU = ROOT / "tests" / "data" / "problems" / "relu_small.py"
H200_REFERENCE = ROOT / "docs" / "data" / "recording_h200" / "reference.jsonl"
STUDY = ROOT / "docs" / "data" / "profile_study_h200"
SUITE = ROOT / "autoprofiler_env" / "problems" / "suite"
SHIPPED_MANIFEST = ROOT / "docs" / "data" / "recording_kernelbench_h200" / "kernelbench.json"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
H200 = {"torch": "2.11.0+cu130", "python": "3.12.3", "device": "cuda", "gpu": "NVIDIA H200",
        "cuda": "13.0", "sm_count": 132, "memory_gb": 139.8}
"""What machine_info gives on the H200 the shipped recordings were made on."""
SMOKE = HarnessConfig(device="cpu", size="smoke", timing_budget_ms=2, min_trials=1,
                      max_trials=2, warmup_ms=0)


def _h200_rows(out: Path, n: int = 2) -> bytes:
    """``out/reference.jsonl`` with the H200 recording's first ``n`` rows; its bytes."""
    out.mkdir(parents=True, exist_ok=True)
    lines = H200_REFERENCE.read_text().splitlines(keepends=True)[:n]
    (out / "reference.jsonl").write_text("".join(lines))
    return (out / "reference.jsonl").read_bytes()


def _this_machine() -> dict:
    return {k: machine_info("cpu").get(k) for k in ("device", "gpu", "torch")}


# -- 1. a recording is one machine's --------------------------------------------------------

def test_a_cpu_check_into_a_gpus_recording_is_refused_before_anything_is_recorded(
        tmp_path, capsys):
    """Reviewed: `record --device cpu --parts reference URI` into the H200's recording wrote a
    row of device cpu, which a later GPU run took for done."""
    out = tmp_path / "rec"
    before = _h200_rows(out)
    assert main(["record", "--out", str(out), "--device", "cpu", "--parts", "reference",
                 str(RELU)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"autoprofiler: error: {out} was recorded on "
                                               "device cuda, GPU NVIDIA H200, torch "
                                               "2.11.0+cu130 (reference.jsonl: problem://")
    assert f"this is device cpu, torch {_this_machine()['torch']}" in err[0]
    assert err[0].endswith("record this machine's into another --out")
    # no timings line (the lock, .lock, is the command's: autoprofiler_env/atomic.py)
    assert sorted(p.name for p in out.iterdir()) == [".lock", "reference.jsonl"]
    assert (out / "reference.jsonl").read_bytes() == before


def test_rows_of_two_machines_are_refused_and_the_candidates_part_checks_its_own(
        tmp_path, monkeypatch):
    from autoprofiler_env.dataset.record import record_candidates
    from autoprofiler_env.optimizers import compose

    relu = load_file(RELU)
    out = tmp_path / "rec"
    _h200_rows(out, 1)
    with (out / "reference.jsonl").open("a") as f:  # what the reviewed recorder let in
        f.write(json.dumps({"uri": relu.uri, "median_ms": 1.0, "error": None,
                            **_this_machine()}) + "\n")
    with pytest.raises(OtherMachineError, match=r"holds rows of 2 machines \(device cuda, GPU "
                       r"NVIDIA H200, torch 2.11.0\+cu130 \(reference.jsonl: .*\); device cpu"):
        record(out, [relu], parts=("reference",), device="cpu")
    # the part alone (a unit of a fan-out, a caller of its own) checks its file too
    candidates = tmp_path / "other" / "candidates.jsonl"
    candidates.parent.mkdir()
    candidates.write_text(json.dumps({"uri": relu.uri, "transformation": "compile",
                                      "correct": True, "judge": 4, **H200}) + "\n")
    source = (ROOT / "tests" / "data" / "candidates" / "relu_correct.py").read_text()
    monkeypatch.setattr(compose, "compose", lambda problem, features, name: source)
    with pytest.raises(OtherMachineError, match="was recorded on device cuda, GPU NVIDIA H200"):
        record_candidates([relu], candidates, SMOKE, warm_workers=1, timeout_s=60,
                          plan={relu.uri: ["tf32"]})
    assert len(read_jsonl(candidates)) == 1


def _kernelbench_checkout(root: Path, extra: dict | None = None) -> KernelBenchCheckout:
    """A fake checkout of two level-1 files (the suite's, under KernelBench's names)."""
    files = {"level1/1_ReLU.py": "level1/relu_16384x16384.py",
             "level1/2_Softmax.py": "level1/softmax_16384x4096.py", **(extra or {})}
    for kb, suite in files.items():
        (root / kb).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SUITE / suite, root / kb)
    return KernelBenchCheckout(root, commit=COMMIT)


def _in_process_features(problem):
    from autoprofiler_env.features import static_features

    return static_features(problem)


def _prepared(tmp_path: Path, extra: dict | None = None):
    from autoprofiler_env.dataset.record.kernelbench import MANIFEST, prepare_manifest

    checkout = _kernelbench_checkout(tmp_path / "checkout", extra)
    manifest = prepare_manifest(checkout, (1,), features=_in_process_features)
    out = tmp_path / "rec"
    out.mkdir()
    manifest.save(out / MANIFEST)
    return checkout, manifest, out


def test_a_kernelbench_recordings_cpu_references_are_not_taken_for_a_gpus(tmp_path,
                                                                          monkeypatch):
    """Reviewed: a CPU `--parts reference` run, then a default `--device cuda` run, kept the
    CPU's references (their constant_needed too, which decides whether a problem is
    ill-posed) and went on to the ncu runs."""
    import autoprofiler_env.dataset.record as record_module
    from autoprofiler_env.dataset.record import machine
    from autoprofiler_env.dataset.record.kernelbench import record_kernelbench
    from autoprofiler_env.profiler import runner

    checkout, manifest, out = _prepared(tmp_path)
    with (out / "reference.jsonl").open("w") as f:  # the CPU's `--parts reference`
        for m in manifest.problems:
            f.write(json.dumps({"uri": m.uri, "median_ms": 9.0, "constant_needed": None,
                                "error": None, **_this_machine()}) + "\n")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    monkeypatch.setattr(machine, "machine_info", lambda device: H200)  # on the H200 now
    monkeypatch.setattr(runner, "find_ncu", lambda ncu=None: "/usr/local/bin/ncu")

    def no_ncu(*args, **kwargs):
        raise AssertionError("the CPU's references were taken for the GPU's")
    monkeypatch.setattr(record_module, "record_ncu", no_ncu)
    with pytest.raises(OtherMachineError, match=r"was recorded on device cpu, torch .*; this "
                       r"is device cuda, GPU NVIDIA H200, torch 2.11.0\+cu130"):
        record_kernelbench(out, checkout, chunk=2, device="cuda")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


class _RowsFrom:
    """Fan-out workers whose units come back with a reference row of ``machine`` (the rows
    of a Ray node: the driver cannot check its machine before)."""

    def __init__(self, machine: dict):
        self.machine = machine

    def run(self, work, setup, interrupted):
        from autoprofiler_env.dataset.record.fanout import _digests

        for unit, _ in work:
            rows = [{"uri": unit.uri, "median_ms": 1.0, "error": None, **self.machine}]
            yield unit, {"rows": rows, "files": {}, "sha256": _digests(rows, {}),
                         "wall_s": 0.1, "gpu": "0"}


def test_a_fanned_out_unit_of_another_machine_is_not_written(tmp_path):
    from autoprofiler_env.dataset.record.fanout import LocalWorkers, record_fanout

    relu = load_file(RELU)
    out = tmp_path / "rec"
    before = _h200_rows(out)
    with pytest.raises(OtherMachineError, match=r"the reference of .*relu_small was recorded "
                       r"on device cpu, torch .* \(GPU id 0\), and is not written"):
        record_fanout(out, [relu], _RowsFrom(_this_machine()), ("reference",), config=SMOKE)
    assert (out / "reference.jsonl").read_bytes() == before
    assert record_fanout(out, [relu], _RowsFrom(H200), ("reference",),
                         config=SMOKE)["reference"] == 3  # the recording's machine: written
    # local workers are this machine: refused before a unit starts
    (out / "reference.jsonl").write_bytes(before)
    timings = (out / "timings.jsonl").read_bytes()
    with pytest.raises(OtherMachineError, match="this is device cpu"):
        record_fanout(out, [relu], LocalWorkers([None]), ("reference",), config=SMOKE)
    assert (out / "reference.jsonl").read_bytes() == before
    assert (out / "timings.jsonl").read_bytes() == timings


# -- 2, 4. the options ----------------------------------------------------------------------

@pytest.mark.parametrize("option", [["--time-budget", "0"], ["--time-budget", "-5"],
                                    ["--time-budget", "nan"], ["--chunk", "0"],
                                    ["--chunk", "-1"]])
def test_a_time_budget_or_chunk_that_is_not_one_is_refused(tmp_path, capsys, option):
    """Reviewed: --time-budget 0 was no budget without --workers and 'stop at once' with
    them, a negative one was taken; --chunk 0 was a raw range() error and -1 did nothing."""
    for where in ([str(RELU)], ["--source", str(tmp_path)]):
        assert main(["record", "--out", str(tmp_path / "rec"), "--device", "cpu", *option,
                     *where]) == 2
        err = capsys.readouterr().err
        assert (f"{option[0]} must be a" in err and "got" in err
                and ("> 0" in err if option[0] == "--time-budget" else ">= 1" in err)), err
    assert not (tmp_path / "rec").exists()


def test_a_time_budget_of_zero_stops_at_once_everywhere(tmp_path, monkeypatch):
    import autoprofiler_env.dataset.record as record_module
    from autoprofiler_env.dataset.record.kernelbench import record_kernelbench

    relu = load_file(RELU)
    summary = record(tmp_path / "rec", [relu], parts=("reference",), device="cpu",
                     time_budget_s=0)
    assert summary["reference"] == 0 and summary["stopped_by_time_budget"]
    assert read_jsonl(tmp_path / "rec" / "reference.jsonl") == []
    checkout, _, out = _prepared(tmp_path / "kb")

    def timed(*args, **kwargs):
        raise AssertionError("a budget of 0 s timed a reference")
    monkeypatch.setattr(record_module, "record_reference", timed)
    summary = record_kernelbench(out, checkout, chunk=1, device="cpu", time_budget_s=0,
                                 reference_only=True)
    assert summary["stopped_by_time_budget"] and summary["needs"]["reference"] == 2
    with pytest.raises(ValueError, match="a chunk holds at least 1 problem, not 0"):
        record_kernelbench(out, checkout, chunk=0, device="cpu")
    with pytest.raises(ValueError, match="a chunk holds at least 1 problem, not 0"):
        record(tmp_path / "rec", [relu], parts=("reference",), device="cpu", chunk=0)


# -- 3. a damaged saved run -----------------------------------------------------------------

def test_a_truncated_run_json_is_one_clean_error_like_a_damaged_report(tmp_path, capsys):
    from autoprofiler_env.dataset.record import covered

    out = tmp_path / "rec"
    run = out / "sets" / "full" / "000-study"
    shutil.copytree(STUDY / "set-full", run)
    shutil.copy(H200_REFERENCE, out / "reference.jsonl")
    assert recording_cost(out)["ncu_runs"] == 1
    text = (run / "run.json").read_text()
    (run / "run.json").write_text(text[:len(text) // 2])
    message = f"cannot read the saved ncu run in {run}: run.json: "
    with pytest.raises(ReportReadError, match=message):
        recording_cost(out)
    with pytest.raises(ReportReadError, match="remove the folder: its problems are profiled "
                       "again"):
        covered(out / "sets" / "full")  # what the recorder resumes from
    assert main(["dataset", "build", "--recording", str(out), "--out",
                 str(tmp_path / "ds.json.gz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"autoprofiler: error: {message}"), err


# -- 5. preparing a checkout without the levels asked ---------------------------------------

def test_levels_the_checkout_lacks_are_said_and_a_manifest_of_none_is_not_written(
        tmp_path, capsys):
    """Reviewed: `--prepare --levels 4` on a checkout without level4 wrote a manifest of 0
    problems (rc 0), which then blocked preparing again; a missing level was stored among
    the skipped files."""
    from autoprofiler_env.dataset.record.kernelbench import (
        MANIFEST,
        RecordingManifest,
        prepare_manifest,
    )

    checkout = _kernelbench_checkout(tmp_path / "ck", {
        "level2/1_Gemm_GELU_LayerNorm.py": "level2/linear_gelu_layernorm_4096x4096.py"})
    with pytest.raises(DatasetError, match=r"no problem to record in .*: levels asked 4; level "
                       r"folders found: level1/, level2/: give --levels"):
        prepare_manifest(checkout, (4,), features=_in_process_features)
    out = tmp_path / "rec"
    cli = ["record", "--source", str(tmp_path / "ck"), "--out", str(out), "--prepare",
           "--commit", COMMIT]
    assert main([*cli, "--levels", "4"]) == 2
    assert "no manifest was written" in capsys.readouterr().err
    assert not (out / MANIFEST).exists()
    assert main(cli) == 0  # not blocked: the default levels, 1,2,3
    err = capsys.readouterr().err
    assert "has no folder for level 3 (levels asked 1, 2, 3; level folders found: level1/, " \
           "level2/): the manifest holds level 1, 2" in err
    manifest = RecordingManifest.load(out / MANIFEST)
    assert manifest.levels == (1, 2) and manifest.missing_levels == (3,)
    assert manifest.skipped == {} and len(manifest.problems) == 3
    # the shipped manifest loads as it is and writes the same bytes back
    shipped = RecordingManifest.load(SHIPPED_MANIFEST)
    assert len(shipped.problems) == 250 and shipped.levels == (1, 2, 3)
    assert shipped.missing_levels == () and shipped.skipped == {}
    assert shipped.to_dict() == json.loads(SHIPPED_MANIFEST.read_text())
    shipped.save(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == SHIPPED_MANIFEST.read_bytes()


# -- 6. torn lines ----------------------------------------------------------------------------

def test_a_torn_line_inside_a_log_is_told_apart_from_what_a_kill_leaves(tmp_path):
    log = tmp_path / "candidates.jsonl"
    a, b = json.dumps({"uri": "a", "ok": True}), json.dumps({"uri": "b", "ok": True})
    log.write_text(a + "\n" + b[:12] + "\n" + b + "\n")  # a line cut in half, more after it
    scan = scan_jsonl(log)
    assert [r["uri"] for r in scan.rows] == ["a", "b"] and scan.torn == [2]
    assert scan.unreadable == [] and scan.damaged == [2]
    assert read_jsonl_checked(log) == (scan.rows, [])  # the build's count, as it was
    log.write_text(a + "\n" + b[:12])  # what a kill leaves: the last line torn
    assert scan_jsonl(log).damaged == []
    with JsonlAppender(log) as appender:  # a resume ends it, marked as a kill's
        appender.write({"uri": "c"})
    assert log.read_text().splitlines()[1] == b[:12] + RESUMED
    scan = scan_jsonl(log)
    assert [r["uri"] for r in scan.rows] == ["a", "c"] and scan.damaged == []
    log.write_text(a)  # a whole record without its newline is only ended
    with JsonlAppender(log) as appender:
        appender.write({"uri": "c"})
    assert log.read_text() == a + "\n" + json.dumps({"uri": "c"}) + "\n"


def test_the_recorder_says_which_lines_of_its_logs_it_could_not_read(tmp_path, capsys):
    """Reviewed: the recorder re-timed the problems behind torn or garbage lines without a
    word."""
    relu = load_file(RELU)
    out = tmp_path / "rec"
    out.mkdir()
    done = json.dumps({"uri": relu.uri, "median_ms": 1.0, "error": None, **_this_machine()})
    (out / "reference.jsonl").write_text(done[:30] + "\nnot json\n" + done + "\n")
    assert record(out, [relu], parts=("reference",), device="cpu")["reference"] == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "autoprofiler:" in line]
    assert err == [(f"autoprofiler: {out / 'reference.jsonl'}: lines 1, 2 are not whole "
                    "records (cut off inside the file, or not JSON): what they held counts as "
                    "not done and is recorded again; check the file")]


# -- 7. refusals and messages -----------------------------------------------------------------

def test_a_run_refused_for_want_of_cuda_or_ncu_leaves_no_trace(tmp_path, monkeypatch, capsys):
    """Reviewed: it made the folder and logged a `{"part": ..., "interrupted": true}` line."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "rec"
    assert main(["record", "--out", str(out), str(RELU)]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err and not out.exists()
    monkeypatch.setenv("NCU", str(tmp_path / "no-ncu-here"))
    with pytest.raises(NcuNotFoundError):
        record(out, [load_file(RELU)], parts=("full",), device="cpu")
    assert not out.exists()
    (out / "sets" / "full").mkdir(parents=True)
    with pytest.raises(NcuNotFoundError):
        record(out, [load_file(RELU)], parts=("full",), device="cpu")
    assert not (out / "timings.jsonl").exists()


def test_a_checkout_that_is_not_the_recorded_one_says_what_to_give(tmp_path):
    from dataclasses import replace

    checkout, manifest, _ = _prepared(tmp_path)
    (checkout.root / "level1" / "1_ReLU.py").write_text("# another file\n")
    with pytest.raises(SourceMismatchError, match=r"\(give a checkout of KernelBench at "
                       f"commit {COMMIT}\\)$"):
        manifest.problems_from(checkout)
    unknown = replace(manifest, commit=None)
    with pytest.raises(SourceMismatchError) as e:
        unknown.problems_from(checkout)
    assert str(e.value).endswith("(give the checkout the recording was prepared from (its "
                                 "manifest records no commit))")
    assert "at commit the recorded one" not in str(e.value)


def test_files_added_to_a_prepared_checkout_are_said(tmp_path, monkeypatch, capsys):
    import autoprofiler_env.dataset.record as record_module
    from autoprofiler_env.dataset.record.kernelbench import record_kernelbench

    checkout, _, out = _prepared(tmp_path)
    shutil.copy(SUITE / "level1" / "layer_norm_16384x4096.py",
                checkout.root / "level1" / "3_LayerNorm.py")
    shutil.copy(SUITE / "level1" / "relu_16384x16384.py", checkout.root / "level1" / "_x.py")
    monkeypatch.setattr(record_module, "record_reference", lambda *args, **kwargs: [])
    record_kernelbench(out, checkout, chunk=2, device="cpu", reference_only=True)
    err = [line for line in capsys.readouterr().err.splitlines() if "autoprofiler:" in line]
    assert err == [(f"autoprofiler: the checkout holds 1 file that {out / 'kernelbench.json'} "
                    "does not (e.g. level1/3_LayerNorm.py), added since it was prepared: this "
                    "recording records its manifest's problems only; a new --out with "
                    "--prepare records them")]


def test_a_source_that_does_not_exist_says_so(tmp_path, capsys):
    assert main(["record", "--source", str(tmp_path / "nope"), "--out",
                 str(tmp_path / "rec"), "--prepare"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"autoprofiler: error: --source {tmp_path / 'nope'}: no such directory (give the "
        "KernelBench checkout: the folder holding level1/, or the repository's root)")
