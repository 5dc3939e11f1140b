"""One writer per output folder (autoprofiler_env.atomic.one_writer): a second process is
refused at once, a killed one leaves no stale lock, and every command that writes a run,
a tree, an experiment or a recording takes its folder first."""

import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autoprofiler_env.atomic import one_writer
from autoprofiler_env.errors import FolderBusyError

HOLD = """import sys, time
from pathlib import Path
from autoprofiler_env.atomic import one_writer
with one_writer(Path(sys.argv[1]), sys.argv[2]):
    print("held", flush=True)
    time.sleep(600)
"""


@contextlib.contextmanager
def holding(folder: Path, command: str):
    """Another process holding ``folder`` as ``command`` would, killed (SIGKILL) at the end."""
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), command],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "held"
        yield process
    finally:
        process.kill()
        process.wait(timeout=30)
        process.stdout.close()


def test_a_second_process_is_refused_naming_the_holder_and_a_killed_one_leaves_no_lock(
        tmp_path):
    out = tmp_path / "out"
    with holding(out, "autoprofiler train") as holder:
        with pytest.raises(FolderBusyError, match=rf"out is being written by another process "
                                                  rf"\(process {holder.pid}: autoprofiler "
                                                  r"train\): wait for it to end, or give "
                                                  r"another --out"):
            with one_writer(out, "autoprofiler train"):
                pytest.fail("held twice")
    # SIGKILLed: the system let go of its lock
    with one_writer(out, "autoprofiler experiment"):
        assert (out / ".lock").read_text() == (f"process {os.getpid()}: autoprofiler "
                                               "experiment\n")


def test_the_same_process_may_hold_a_folder_again_inside(tmp_path):
    out = tmp_path / "out"
    with one_writer(out, "autoprofiler experiment"), one_writer(out / ".", "inside"):
        (out / "file").write_text("x")
    with one_writer(out, "again"):  # let go of once the outermost ended
        pass


def test_a_folder_it_made_is_removed_if_nothing_but_the_lock_was_written(tmp_path):
    refused = tmp_path / "refused"
    with pytest.raises(ValueError), one_writer(refused, "a run"):
        raise ValueError("a bad argument, found before anything was written")
    assert not refused.exists()
    written = tmp_path / "written"
    with one_writer(written, "a run"):
        (written / "run.json").write_text("{}")
    assert sorted(p.name for p in written.iterdir()) == [".lock", "run.json"]
    there = tmp_path / "there"
    there.mkdir()
    with one_writer(there, "a run"):
        pass
    assert there.is_dir()  # not made by it: kept


def _experiment(tmp_path: Path) -> list[str]:
    config = tmp_path / "exp.yaml"
    config.write_text("name: held\nbudgets: [0.25]\nsplits: [test]\nseeds: 1\n"
                      "baselines: [no-profile]\n")
    return ["experiment", "--config", str(config)]


@pytest.mark.parametrize("command", [
    lambda tmp_path: ["learn-tree", "--budget", "0.25", "--rounds", "1"],
    _experiment,
    lambda tmp_path: ["record", "--device", "cpu", "--parts", "reference",
                      "relu_16384x16384"],
    lambda tmp_path: ["benchmark", "--budgets", "0.25"],
], ids=["learn-tree", "experiment", "record", "benchmark"])
def test_each_command_into_a_held_folder_is_refused_before_it_writes(tmp_path, capsys,
                                                                     command):
    from experiments.cli import main

    args = command(tmp_path)
    out = tmp_path / "out"
    with holding(out, f"autoprofiler {args[0]}"):
        assert main([*args, "--out", str(out)]) == 2
        assert [p.name for p in out.iterdir()] == [".lock"]
    assert re.fullmatch(rf"autoprofiler: error: {re.escape(str(out))} is being written by "
                        rf"another process \(process \d+: autoprofiler {args[0]}\): wait for "
                        r"it to end, or give another --out", capsys.readouterr().err.strip())


def test_another_thread_of_the_process_is_refused_too(tmp_path):
    import threading

    out, said = tmp_path / "out", []

    def second():
        try:
            with one_writer(out, "train() in a thread"):
                said.append("held")
        except FolderBusyError as e:
            said.append(str(e))

    with one_writer(out, "train()"):
        thread = threading.Thread(target=second)
        thread.start()
        thread.join()
    assert said == [f"{out} is being written by another thread of this process (train()): "
                    "wait for it to end, or give another --out"]  # the holder named


def test_the_folders_it_made_are_removed_up_to_the_first_that_was_there(tmp_path):
    deep = tmp_path / "a" / "b" / "out"
    with pytest.raises(ValueError), one_writer(deep, "a run"):
        raise ValueError("refused before it wrote anything")
    assert not (tmp_path / "a").exists() and tmp_path.is_dir()


def test_where_the_file_system_cannot_lock_it_warns_and_a_running_run_is_not_resumed(
        tmp_path, monkeypatch):
    """Some network mounts refuse flock (ENOLCK): the run goes on unlocked, said once, and a
    run.json saying running cannot be told from a live run there, so it is not resumed."""
    import errno
    import fcntl
    import json

    from autoprofiler_env.atomic import holds
    from autoprofiler_env.errors import AutoProfilerError, AutoProfilerWarning
    from experiments.train import check_out

    def refused(fd, how):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", refused)
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"status": "running", "seed": 0}))
    with pytest.warns(AutoProfilerWarning, match=r"run: cannot lock it \(No locks available\): "
                                                 "two runs given this folder at once"):
        with one_writer(out, "autoprofiler train"):
            assert not holds(out)
            with pytest.raises(AutoProfilerError, match=r"is training in another process, or "
                                                        r"was killed, and the folder cannot "
                                                        r"be locked here to tell which"):
                check_out(out)


def test_writer_names_another_process_holding_a_folder_and_none_otherwise(tmp_path):
    from autoprofiler_env.atomic import writer

    out = tmp_path / "run"
    assert writer(out) is None  # never held
    with holding(out, "autoprofiler train") as holder:
        assert writer(out) == f"process {holder.pid}: autoprofiler train"
    assert writer(out) is None  # its process ended: the lock file stays, unheld
    with one_writer(out, "autoprofiler experiment"):
        assert writer(out) is None  # this process's own


@pytest.mark.parametrize("spec, command", [
    ("sb3:{out}", "autoprofiler train"), ("sb3:{out}/best_model.zip", "autoprofiler train"),
    ("tree:{out}/tree.json", "autoprofiler learn-tree"),
    ("sb3:{out}/trials/3", "autoprofiler tune"),
    ("sb3:{out}/trials/3/best_model.zip", "autoprofiler tune")])
def test_a_policy_of_a_folder_being_written_is_refused_before_it_is_read(tmp_path, spec,
                                                                         command):
    """Reviewed: an experiment given sb3:DIR of a training run still going scored the best
    model of one evaluation at one budget and of the next at the others, and recorded a
    third's checksum; a trial's model (sb3:OUT/trials/N) of a tuning run still going was not
    refused (the run holds OUT, not the trial's folder)."""
    import gymnasium as gym

    from experiments.policies import PolicySpecError, load

    out = tmp_path / "run"
    env = gym.make("AutoProfiler-v0", split="val")
    with holding(out, command) as holder:
        (out / "trials" / "3").mkdir(parents=True)
        with pytest.raises(PolicySpecError, match=rf"is being written \(process {holder.pid}: "
                                                  rf"{command}\): wait for it to end"):
            load(spec.format(out=out), env)


def test_a_parent_held_by_a_command_that_writes_no_policies_below_refuses_nothing(tmp_path):
    """Reviewed: the walk up the parents refused a model kept inside a recording's folder
    while the recording ran (its lock names the command: only tune's and experiment's count
    for what lies below them)."""
    import gymnasium as gym

    from autoprofiler_env.errors import AutoProfilerError
    from experiments.policies import load

    data = tmp_path / "data"
    env = gym.make("AutoProfiler-v0", split="val")
    with holding(data, "autoprofiler record"):
        (data / "models" / "ppo").mkdir(parents=True)
        with pytest.raises(AutoProfilerError, match="no run.json"):  # an empty folder: told
            load(f"sb3:{data}/models/ppo", env)                      # so, not "being written"


def test_learn_tree_refuses_to_start_from_the_tree_of_a_run_still_going(tmp_path):
    """``learn-tree --start FILE`` read a running learn-tree's tree.json (rewritten at each
    accepted edit) unasked, where ``--policy tree:FILE`` of it is refused; once that run has
    ended, the same file is a start."""
    import shutil

    from agents.tree import shipped_tree
    from experiments.learn_tree import start_tree
    from experiments.policies import PolicySpecError

    out = tmp_path / "tree-run"
    with holding(out, "autoprofiler learn-tree") as holder:
        tree = out / "tree.json"
        shutil.copy(shipped_tree("reference"), tree)
        with pytest.raises(PolicySpecError, match=rf"^--start {re.escape(str(tree))}: .* is "
                                                  rf"being written \(process {holder.pid}: "
                                                  r"autoprofiler learn-tree\): wait for it"):
            start_tree(str(tree))
    assert start_tree(str(tree)).root is not None


def test_a_dataset_build_from_a_recording_still_being_recorded_is_refused(tmp_path, capsys):
    """A build read the logs of a recording while the recorder appended to them (a mix of
    two moments, a half-written last line among them) unasked; now it is refused before it
    reads anything, naming the recorder, and nothing is written."""
    from experiments.cli import main

    recording, out = tmp_path / "rec", tmp_path / "my.json.gz"
    with holding(recording, "autoprofiler record") as holder:
        assert main(["dataset", "build", "--recording", str(recording), "--out",
                     str(out)]) == 2
        assert capsys.readouterr().err == (
            f"autoprofiler: error: --recording {recording} is being written (process "
            f"{holder.pid}: autoprofiler record): wait for it to end, or build from a copy "
            "of it\n")
    runs = tmp_path / "study"
    with holding(runs, "autoprofiler record") as holder:  # a profiler study's runs too
        assert main(["dataset", "build", "--recording", str(recording), "--runs", str(runs),
                     "--out", str(out)]) == 2
        assert f"error: --runs {runs} is being written (process {holder.pid}: " in \
            capsys.readouterr().err
    assert not out.exists()
