"""The ``autoprofiler`` command, run as a user runs it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA

PROBLEM = str(DATA / "problems" / "relu_small.py")


def run(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "experiments.cli", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_problems_json_lists_the_suite():
    out = run("problems", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert len(rows) >= 80
    assert {r["level"] for r in rows} == {1, 2, 3}
    assert all({"uri", "level", "tags", "split"} <= set(r) for r in rows)
    assert all(r["uri"].startswith("problem://autoprofiler/v1/level") for r in rows)


def test_problems_of_a_kernelbench_directory(tmp_path):
    level = tmp_path / "KernelBench" / "level1"  # a repository's layout
    level.mkdir(parents=True)
    (level / "19_ReLU.py").write_text((DATA / "problems" / "relu_small.py").read_text())
    (level / "20_Broken.py").write_text("def get_inputs(): return []\n")
    out = run("problems", "--source", str(level), "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    # a level's folder is a folder of files, named as `record` names them (a change that
    # named them as the KernelBench dataset does was reverted: `record` disagreed)
    assert [(r["uri"], r["level"], r["tags"]) for r in rows] == [
        ("problem://local/level1/19_ReLU", 1, ["pointwise"])]
    assert "20_Broken.py" in out.stderr and "does not define Model" in out.stderr
    split = run("problems", "--source", str(level), "--split", "test")  # not every file
    assert split.returncode == 2 and split.stdout == ""
    assert split.stderr.strip().startswith("autoprofiler: error: --split test with --source: a "
                                           "folder's files have no split")
    # the checkout's root (the folder of the levels, or the repository's above it): its
    # levels, named as a KernelBench dataset names them
    for root in (level.parent, tmp_path):
        listed = run("problems", "--source", str(root), "--json")
        assert listed.returncode == 0, listed.stderr
        assert [r["uri"] for r in json.loads(listed.stdout)] == [
            "problem://kernelbench/level1/19_ReLU"]
    refused = run("problems", "--source", str(tmp_path), "--level", "2")
    assert refused.returncode == 2 and refused.stderr.strip() == (
        f"autoprofiler: error: --level 2: the KernelBench checkout {level.parent} has level 1")


def test_problems_source_tells_a_checkout_from_a_folder_of_files(tmp_path, capsys):
    """Reviewed: a folder holding both files and level folders lost its files, the suite's
    own folder was named as KernelBench's, and a checkout of level 4 alone listed nothing."""
    from autoprofiler_env.problems.loaders import SUITE_DIR
    from experiments.cli import main

    relu = (DATA / "problems" / "relu_small.py").read_text()
    (tmp_path / "mixed" / "level1").mkdir(parents=True)
    (tmp_path / "mixed" / "a.py").write_text(relu)
    (tmp_path / "mixed" / "level1" / "b.py").write_text(relu)
    assert main(["problems", "--source", str(tmp_path / "mixed"), "--json"]) == 0
    assert [r["uri"] for r in json.loads(capsys.readouterr().out)] == ["problem://local/mixed/a"]
    assert main(["problems", "--source", str(SUITE_DIR), "--level", "1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) > 20 and all(r["uri"].startswith("problem://autoprofiler/v1/level1/")
                                  for r in rows)
    # a folder of files has no level: --level is refused, not answered "0 problems"
    assert main(["problems", "--source", str(tmp_path / "mixed"), "--level", "1"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"autoprofiler: error: --level 1: the files of {tmp_path / 'mixed'} are of no level (a "
        "level is a KernelBench checkout's level folder's, levelN/); leave --level out, or give "
        "the folder of that level")
    assert main(["problems", "--source", str(tmp_path / "mixed" / "level1"), "--level", "3"]) == 2
    assert "--level 3: the files of " in capsys.readouterr().err
    (tmp_path / "l4" / "level4").mkdir(parents=True)
    (tmp_path / "l4" / "level4" / "1_Model.py").write_text(relu)
    assert main(["problems", "--source", str(tmp_path / "l4")]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"holds none of levels 1-3 (a dataset's); give a level's folder itself, e.g. --source "
        f"{tmp_path / 'l4' / 'level4'}")


def test_evaluate_prints_a_typed_result():
    out = run("evaluate", "--problem", PROBLEM, "--candidate",
              str(DATA / "candidates" / "relu_correct.py"), "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["correct"] is True and result["error_kind"] is None
    assert result["speedup"] > 0 and result["reference"]["method"] == "perf_counter"


def test_evaluate_judges_zeros_incorrect():
    out = run("evaluate", "--problem", PROBLEM, "--candidate",
              str(DATA / "candidates" / "relu_zeros.py"), "--json")
    assert out.returncode == 1
    assert json.loads(out.stdout)["error_kind"] == "degenerate"
    assert out.stderr.strip().count("\n") == 0 and "degenerate" in out.stderr


def test_evaluate_stops_an_endless_loop():
    out = run("evaluate", "--problem", PROBLEM, "--candidate",
              str(DATA / "candidates" / "hangs.py"), "--timeout", "3", "--json")
    assert out.returncode == 1
    assert json.loads(out.stdout)["error_kind"] == "timeout"


@pytest.mark.parametrize("problem, candidate, message", [
    ("problem://autoprofiler/v1/level1/nope", "relu_correct", "no problem of the suite"),
    (str(DATA / "problems" / "forward_raises.py"), "relu_correct", "the reference failed"),
    (PROBLEM, "does_not_exist", "cannot read the candidate"),
])
def test_evaluate_bad_input_exits_2_with_one_line(problem, candidate, message):
    out = run("evaluate", "--problem", problem, "--candidate",
              str(DATA / "candidates" / f"{candidate}.py"))
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]


BARE_TENSOR = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
               "    def forward(self, x):\n        return torch.relu(x)\n\n\n"
               "def get_inputs():\n    return torch.randn(64, 32)\n\n\n"
               "def get_init_inputs():\n    return []\n")


def test_get_inputs_returning_a_bare_tensor_is_said_so(tmp_path):
    """A tensor returned for the list of inputs was unpacked along its first dimension:
    'Model.forward() takes 2 positional arguments but 65 were given'."""
    (tmp_path / "bare.py").write_text(BARE_TENSOR)
    says = ("get_inputs() returned a Tensor, not a list of the forward's inputs (KernelBench's "
            "format: return [x] for one input)")
    listed = run("problems", "--source", str(tmp_path), "--features")
    assert says in listed.stderr
    out = run("evaluate", "--problem", str(tmp_path / "bare.py"), "--candidate",
              str(DATA / "candidates" / "relu_correct.py"))
    assert out.returncode == 2 and says in out.stderr.strip().splitlines()[-1]


def test_evaluate_cuda_without_a_gpu_says_so():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    out = run("evaluate", "--problem", PROBLEM, "--candidate",
              str(DATA / "candidates" / "relu_correct.py"), "--device", "cuda")
    assert out.returncode == 2 and "no CUDA device" in out.stderr


def test_the_main_job_runs_on_the_shipped_dataset(tmp_path):
    """The README's main job: every agent on the shipped dataset's test split."""
    out = subprocess.run([sys.executable, "-m", "experiments.cli", "benchmark", "--out",
                          str(tmp_path)], capture_output=True, text=True, check=False,
                         cwd=Path(__file__).parents[1])
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("oracle ") for line in lines)
    assert any(line.startswith("roofline-tree ") for line in lines)
    for name in ("benchmark.csv", "episodes.csv", "benchmark.png"):
        assert (tmp_path / name).stat().st_size > 0
    from autoprofiler_env.dataset import Dataset

    record = json.loads((tmp_path / "benchmark.json").read_text())  # what made the tables
    assert record["dataset_sha256"] == Dataset.load(None).metadata["sha256"]
    assert record["split"] == "test" and record["versions"]["autoprofiler-env"]
    assert set(record["policy_files"]) == {"autoprofiler-tree", "maskable-ppo"}


def test_dataset_info_describes_the_shipped_dataset():
    out = subprocess.run([sys.executable, "-m", "experiments.cli", "dataset", "info"],
                         capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parents[1])
    info = json.loads(out.stdout)
    assert info["metadata"]["gpu"] == "NVIDIA H200" and info["complete"]
    assert info["problems"] >= 32 and len(info["metadata"]["sha256"]) == 64


@pytest.mark.parametrize("flag, value, message", [
    ("--plan", None, "make one with"), ("--reuse", None, "no such file"),
    ("--candidate-timeout", "0", "> 0"), ("--candidate-timeout", "inf", "at most a day")])
def test_record_with_a_bad_plan_reuse_or_timeout_exits_2_with_one_line(tmp_path, flag, value,
                                                                      message):
    value = value or str(tmp_path / "missing.json")
    out = run("record", "--out", str(tmp_path / "rec"), "--parts", "candidates", flag,
              value, "relu_16384x16384")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and message in lines[0]
    assert not (tmp_path / "rec").exists()  # nothing started


@pytest.mark.parametrize("args, message", [
    (["benchmark", "--budgets", "abc"], "--budgets 'abc': give fractions of the full set's cost"),
    (["benchmark", "--budgets", "0.25,0"], "--budgets '0.25,0': each budget is a finite "
                                           "fraction > 0"),
    (["benchmark", "--budgets", "-1"], "each budget is a finite fraction > 0"),
    (["benchmark", "--seeds", "0"], "--seeds 0: how many seeds each stochastic agent runs "
                                    "(0..N-1), at least 1"),
    (["benchmark", "--seeds", "0,1,2"], "--seeds '0,1,2': give how many seeds, not which: N "
                                        "runs each stochastic agent with the seeds 0..N-1"),
    (["learn-tree", "--budget", "nan"], "--budget 'nan': each budget is a finite fraction"),
    (["benchmark", "--budgets", "0.25,0.5,0.250"], "budgets 0.25 given more than once: give "
                                                   "each budget once"),
    (["learn-tree", "--budget", "0.1,0.25,0.10"], "budgets 0.1 given more than once: give "
                                                  "each budget once"),
    (["benchmark", "--tolerance", "2e"], "--tolerance 2e: a preset (kernelbench-v0, "
                                         "kernelbench-v0.1, kernelbench), a number >= 0"),
    (["learn-tree", "--tolerance", "-1"], "--tolerance -1: a preset"),
])
def test_bad_budgets_and_seeds_exit_2_with_one_line(tmp_path, capsys, args, message):
    from experiments.cli import main

    assert main([*args, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, message", [
    (["--device", "tpu"], "--device tpu: cpu, cuda or cuda:N"),
    (["--timeout", "-5"], "--timeout -5: seconds > 0"),
    (["--correctness-trials", "0"], "--correctness-trials 0: at least 1"),
    (["--tolerance", "-1"], "--tolerance -1: a preset (kernelbench-v0, kernelbench-v0.1, "
                            "kernelbench), a number >= 0 (atol = rtol) or ATOL,RTOL, two "
                            "numbers >= 0"),
])
def test_evaluate_refuses_bad_arguments_before_blaming_the_problem(capsys, args, message):
    from experiments.cli import main

    assert main(["evaluate", "--problem", PROBLEM, "--candidate",
                 str(DATA / "candidates" / "relu_correct.py"), *args]) == 2
    assert capsys.readouterr().err.strip() == f"autoprofiler: error: {message}"


def test_files_that_are_not_utf8_or_hold_a_null_byte_are_named_not_a_traceback(tmp_path,
                                                                            capsys):
    from experiments.cli import main

    source = (DATA / "problems" / "relu_small.py").read_bytes()
    (tmp_path / "latin1.py").write_bytes(b'name = "caf\xe9"\n' + source)
    (tmp_path / "nul.py").write_bytes(source + b"\x00\n")
    (tmp_path / "ok.py").write_bytes(source)
    assert main(["problems", "--source", str(tmp_path)]) == 0  # the others are still listed
    captured = capsys.readouterr()
    assert "1 problem, 2 skipped" in captured.out
    assert "latin1.py: not Python source text" in captured.err
    assert "nul.py: syntax error" in captured.err
    assert main(["evaluate", "--problem", PROBLEM, "--candidate",
                 str(tmp_path / "latin1.py")]) == 2
    assert "not Python source text" in capsys.readouterr().err


def test_benchmark_help_says_seeds_is_a_count(capsys):
    from experiments.cli import main

    with pytest.raises(SystemExit):
        main(["benchmark", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--seeds N how many seeds each stochastic agent runs: the seeds 0..N-1" in help_text


def test_an_out_that_is_a_file_is_one_line(tmp_path, capsys):
    from experiments.cli import main

    (tmp_path / "f").write_text("")
    assert main(["benchmark", "--out", str(tmp_path / "f")]) == 2
    assert capsys.readouterr().err.strip().endswith("a file, not a folder")


def test_output_piped_into_a_reader_that_stops_early_is_no_traceback(monkeypatch):
    import contextlib
    import os

    from experiments.cli import main

    read, write = os.pipe()
    os.close(read)  # the reader has gone, as `| head` goes after its lines
    stdout = os.fdopen(write, "w", buffering=1)  # each line written at once, as to a tty
    monkeypatch.setattr("sys.stdout", stdout)
    assert main(["dataset", "info"]) == 0  # was a BrokenPipeError traceback
    with contextlib.suppress(OSError):  # the test's own buffer, left for the broken pipe
        stdout.close()


def test_with_json_an_error_is_json_on_stdout_too(capsys, tmp_path):
    """A program reading ``--json`` output gets the error where it reads (and the exit code
    and the stderr line stay)."""
    from experiments.cli import main

    assert main(["evaluate", "--problem", PROBLEM, "--candidate",
                 str(DATA / "candidates" / "relu_correct.py"), "--timeout", "-5",
                 "--json"]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"error": {"kind": "usage",
                                                  "message": "--timeout -5: seconds > 0"}}
    assert captured.err.strip() == "autoprofiler: error: --timeout -5: seconds > 0"
    assert main(["evaluate", "--problem", str(tmp_path / "nope.py"), "--candidate",
                 str(DATA / "candidates" / "relu_correct.py"), "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["kind"] == "ProblemNotFoundError" and "nope.py" in error["message"]
    # without --json, stdout stays empty
    assert main(["evaluate", "--problem", PROBLEM, "--candidate",
                 str(DATA / "candidates" / "relu_correct.py"), "--timeout", "-5"]) == 2
    assert capsys.readouterr().out == ""


def test_profile_without_a_gpu_says_so_in_one_line(capsys, tmp_path):
    import torch

    from experiments.cli import main

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    fake = tmp_path / "ncu"  # an ncu that exists: the missing GPU is what is said
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    assert main(["profile", "--problem", PROBLEM, "--sections", "LaunchStats",
                 "--ncu", str(fake), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().startswith(
        "autoprofiler: error: profile needs a CUDA GPU and Nsight Compute (ncu); this machine "
        "has no CUDA device")
    assert json.loads(captured.out)["error"]["kind"] == "MachineError"


@pytest.mark.parametrize("args, message", [
    (["--sections", "Bogus"], "--sections Bogus: unknown section 'Bogus'; ncu 2025.3.1 has: "),
    (["--sections", "SpeedOfLite"], "--sections SpeedOfLite: unknown section 'SpeedOfLite' "
                                    "(did you mean SpeedOfLight?); ncu 2025.3.1 has: "),
    (["--sections", "basic"], "--sections basic: unknown section 'basic' ('basic' is one of "
                              "ncu's sets, not a section: its sections are LaunchStats, "),
    (["--sections", ","], "--sections ',': give section ids, comma-separated"),
    (["--sections", "LaunchStats", "--timeout", "-1"], "--timeout -1: seconds > 0"),
])
def test_profile_checks_its_arguments_before_the_machine(capsys, args, message):
    """On a machine without a GPU, a bad argument is named, not the missing GPU."""
    from experiments.cli import main

    assert main(["profile", "--problem", PROBLEM, *args, "--ncu", "/nonexistent/ncu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"autoprofiler: error: {message}"), err


@pytest.mark.parametrize("extra, candidate, message", [
    (["--problem", "relu_16384x16384"], "relu_correct.py",
     "--candidate profiles one problem's inputs: give one --problem, not 2"),
    ([], "no_model_new.py", "the candidate defines no ModelNew (a KernelBench candidate's class"),
    ([], "syntax_error.py", "syntax error at line"),
])
def test_profile_checks_a_candidate_before_ncu_starts(capsys, extra, candidate, message):
    from experiments.cli import main

    assert main(["profile", "--problem", PROBLEM, *extra, "--sections", "LaunchStats",
                 "--candidate", str(DATA / "candidates" / candidate)]) == 2
    assert message in capsys.readouterr().err


def test_a_folder_where_a_dataset_file_belongs_is_said_of_the_path_given(tmp_path, capsys):
    from autoprofiler_env.atomic import write_atomic
    from autoprofiler_env.dataset import Dataset
    from autoprofiler_env.errors import DatasetError
    from experiments.cli import main

    (tmp_path / "out").mkdir()
    assert main(["dataset", "build", "--recording", str(tmp_path), "--out",
                 str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"autoprofiler: error: --out {tmp_path / 'out'} is a folder: give the dataset file to "
        "write (e.g. my-gpu.json.gz)")
    with pytest.raises(IsADirectoryError) as caught:  # not the temporary file's name
        write_atomic(tmp_path / "out", b"")
    assert caught.value.filename == str(tmp_path / "out")
    with pytest.raises(DatasetError, match="is a folder, not a dataset file .* dataset build"):
        Dataset.load(tmp_path)


def test_problems_features_in_text_shows_the_sizes(capsys):
    """Without --json, --features adds the sizes a reader compares problems by (it printed the
    same table as without it)."""
    from experiments.cli import main

    path = DATA / "problems" / "relu_small.py"  # 64 x 128 float32: 8192 ReLUs, 64 KiB moved
    assert main(["problems", "--source", str(path)]) == 0
    plain = capsys.readouterr().out.splitlines()
    assert main(["problems", "--source", str(path), "--features"]) == 0
    head, row, count = capsys.readouterr().out.splitlines()
    assert "flops" not in plain[0]
    assert row.split()[-5:] == ["8.2e+03", "6.55e+04", "0.125", "1", "pointwise"]

    def ends(line, tokens):  # where each token ends, found left to right
        at, found = 0, []
        for token in tokens:
            at = line.index(f" {token} ", at) + 1 + len(token)
            found.append(at)
        return found

    # each value right-aligned under its column's name, the URIs' column as wide as the
    # longest (a KernelBench file's runs past the suite's)
    assert ends(head, ["level", "flops", "bytes_min", "flop/B", "ops"]) == ends(
        row, ["-", "8.2e+03", "6.55e+04", "0.125", "1"])
    assert head.index(" level") == len("problem://local/problems/relu_small")
    assert count == plain[-1] == "1 problem"


def test_problems_features_json_shows_what_a_trees_feature_condition_reads(capsys):
    """--features --json gives the raw counts and, as the observation holds them, the
    log-scaled values a tree's `feature` condition compares (log_arithmetic_intensity, ...)."""
    import numpy as np

    from autoprofiler_env.features import FEATURE_NAMES, static_features
    from autoprofiler_env.problems import load_file
    from experiments.cli import main

    path = DATA / "problems" / "relu_small.py"
    assert main(["problems", "--source", str(path), "--features", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert list(row["observed"]) == list(FEATURE_NAMES)
    vector = static_features(load_file(path)).vector()
    assert np.allclose([row["observed"][n] for n in FEATURE_NAMES], vector, atol=1e-4)
    assert row["features"]["n_ops"] == 1 and row["observed"]["log_n_ops"] == round(
        float(np.log10(2)), 4)


def test_a_split_the_dataset_lacks_is_said_in_the_commands_terms(study_dataset, tmp_path,
                                                                  capsys):
    """Reviewed: a small dataset of your own without a val split was answered with gym.make's
    advice (split=None, problems=[...]), which a command cannot take."""
    from autoprofiler_env.dataset import Dataset
    from autoprofiler_env.dataset.format import DatasetFile
    from experiments.cli import main

    content = Dataset.load(study_dataset).content
    path = tmp_path / "no-val.json.gz"
    DatasetFile(content.metadata, content.sections, {
        uri: r for uri, r in content.problems.items() if r.split != "val"}).save(path)
    assert main(["benchmark", "--dataset", str(path), "--split", "val", "--out",
                 str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("autoprofiler: error: the dataset has no problem in split 'val' (its "
                          "splits: train, test): give --split one of those"), err
    assert "split=None" not in err
    assert main(["learn-tree", "--dataset", str(path), "--rounds", "1", "--out",
                 str(tmp_path / "tree")]) == 2
    assert "learn-tree, train and experiment learn on train and choose on val" in (
        capsys.readouterr().err)
    # train's and the experiment's environments pass it on as it is, not as a config error
    import gymnasium as gym

    from autoprofiler_env.errors import EmptySplitError
    from experiments.train import _checked

    with pytest.raises(EmptySplitError):
        _checked(lambda: gym.make("AutoProfiler-v0", dataset=str(path), split="val"),
                 "ppo.yaml")


def test_the_evaluate_defaults_are_the_harness_defaults():
    """`evaluate`'s --timeout, --correctness-trials and --seed restate the harness's defaults
    (the CLI's parser does not import the harness, which imports torch): they must agree."""
    from autoprofiler_env.harness import HarnessConfig
    from autoprofiler_env.harness.evaluator import TIMEOUT_S
    from experiments.cli import build_parser

    args = build_parser().parse_args(["evaluate", "--problem", "p", "--candidate", "c"])
    assert args.timeout == TIMEOUT_S
    assert args.correctness_trials == HarnessConfig.n_correctness
    assert args.seed == HarnessConfig.seed


def test_the_command_says_its_version(capsys):
    import autoprofiler_env
    from experiments.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"autoprofiler {autoprofiler_env.__version__}"


def test_the_benchmark_says_where_its_shipped_agents_five_seeds_are_for_each_dataset(
        tmp_path, monkeypatch):
    """A review: the note under the benchmark's tables pointed KernelBench's readers at an
    experiment that learns other agents than the shipped ones, and reference-v1's at the
    composed optimizer's. Per dataset (by name or by its file) and optimizer."""
    import shutil

    from autoprofiler_env.dataset.names import resolve_dataset
    from experiments.cli import _shipped_seed_note

    both = ["autoprofiler-tree", "maskable-ppo"]
    suite = _shipped_seed_note(both, None, "reference")
    assert suite.startswith("autoprofiler-tree and maskable-ppo: the shipped agents, one "
                            "trained seed each, without intervals; five seeds of each")
    assert suite.endswith("--config compare (docs/experiment/leaderboard.md)")
    assert _shipped_seed_note(both, str(resolve_dataset(None)), "reference") == suite
    assert _shipped_seed_note(both, "suite", "reference-v1").endswith(
        "--config compare_reference_v1")
    kernelbench = _shipped_seed_note(["maskable-ppo"], "kernelbench", "reference")
    assert kernelbench.startswith("maskable-ppo: the shipped agent, one trained seed, without "
                                  "intervals, learned on the suite's train split")
    assert kernelbench.endswith("--config compare_kernelbench "
                                "(docs/experiment/kernelbench/leaderboard.md)")
    copy = tmp_path / "mine.json.gz"  # another file, even of the same bytes: not shipped
    shutil.copy(resolve_dataset("kernelbench"), copy)
    assert "a config of your own" in _shipped_seed_note(both, str(copy), "reference")
    # an install that does not hold KernelBench's file yet: a file of one's own is still
    # told so (resolving the name raised)
    import dataclasses

    import autoprofiler_env.dataset.names as names

    monkeypatch.setitem(names.SHIPPED, "kernelbench", dataclasses.replace(
        names.SHIPPED["kernelbench"], file="absent.json.gz"))
    assert "a config of your own" in _shipped_seed_note(both, str(copy), "reference")


def test_a_benchmark_whose_policy_file_changes_while_it_runs_writes_nothing(tmp_path,
                                                                          monkeypatch, capsys):
    """Reviewed: the benchmark recorded the checksums of the policies' files after the run,
    so a model rewritten meanwhile was recorded as the one scored."""
    import shutil

    import gymnasium as gym

    import experiments.benchmark
    from agents.tree import shipped_tree
    from experiments.cli import main

    env = gym.make("AutoProfiler-v0")
    tree = tmp_path / "tree.json"
    shutil.copy(shipped_tree(env.unwrapped.optimizer), tree)
    run = experiments.benchmark.benchmark

    def rewriting(*args, **kwargs):  # another process rewrites it while the benchmark runs
        done = run(*args, **kwargs)
        tree.write_text(tree.read_text() + "\n")
        return done

    monkeypatch.setattr(experiments.benchmark, "benchmark", rewriting)
    assert main(["benchmark", "--budgets", "0.25", "--seeds", "1", "--policy", f"tree:{tree}",
                 "--out", str(tmp_path / "bench")]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"autoprofiler: error: {tree} changed while the benchmark ran (another process "
        "writes it): run it again once it no longer changes, or give a copy")
    assert not (tmp_path / "bench").exists()
