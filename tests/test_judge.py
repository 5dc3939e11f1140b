"""The judge against candidates that cheat (KernelBench's unit_tests/ as first-class cases).

Each cheat in tests/data/candidates/cheats/ is judged twice: with the static check enforced
(the default), and with it off, so that the run-time defences are shown to hold alone.
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from autoprofiler_env.harness import ErrorKind, Evaluator, HarnessConfig, check_source, passes
from autoprofiler_env.problems import load_file
from tests.conftest import DATA, candidate

CHEATS = DATA / "candidates" / "cheats"
JUDGE = HarnessConfig(device="cpu", timing_budget_ms=60, min_trials=3, max_trials=30,
                      warmup_ms=50, rounds=3)
RUNTIME_ONLY = replace(JUDGE, static_check="off")


def cheat(name: str, **fill) -> str:
    source = (CHEATS / f"{name}.py").read_text()
    for key, value in fill.items():
        source = source.replace(f"__{key}__", str(value)).replace(f"{key} = 0  # __{key}__",
                                                                  f"{key} = {value}")
    return source


def problem(name: str):
    return load_file(DATA / "problems" / f"{name}.py")


@pytest.fixture(scope="module")
def judge():
    with Evaluator(JUDGE, timeout_s=120) as ev:
        yield ev


@pytest.fixture(scope="module")
def runtime_judge():
    with Evaluator(RUNTIME_ONLY, timeout_s=120) as ev:
        yield ev


@pytest.mark.parametrize("name, rule", [
    ("op_patch", "patch"), ("reference_swap", "introspection"), ("comparison_patch", "patch"),
    ("forged_reply", "patch"), ("clock_patch", "patch"), ("timer_patch", "introspection"),
    ("background_thread", "concurrency"), ("secret_read", "environment"),
    ("file_write", "filesystem"), ("file_delete", "filesystem"), ("socket_send", "network"),
    ("spawns_and_hangs", "concurrency"), ("input_hijack", "introspection"),
    ("randn_patch", "patch"), ("profile_hook", "introspection"), ("to_patch", "patch"),
    ("detach_patch", "patch"), ("thread_grab", "concurrency"), ("thread_restore", "concurrency"),
    ("reply_patch", "patch"), ("reply_patch", "introspection"), ("zero_times", "introspection"),
    ("guard_code", "introspection"), ("encoder_patch", "patch"), ("wire_json", "introspection"),
])
def test_the_static_check_rejects_each_cheat(judge, name, rule):
    findings = [f for f in check_source(cheat(name)) if f.rejects]
    assert rule in {f.rule for f in findings}, findings
    result = judge.evaluate(problem("relu_small"), cheat(name))
    assert result.error_kind is ErrorKind.STATIC and rule in result.error_message


@pytest.mark.parametrize("name, kind", [
    ("op_patch", ErrorKind.MISMATCH),
    ("reference_swap", ErrorKind.MISMATCH),
    ("comparison_patch", ErrorKind.MISMATCH),
    # wire.send replaced: the worker replies with the one it held before the candidate ran,
    # and the guard sees the module's changed
    ("forged_reply", ErrorKind.SANDBOX),
    ("garbage_reply", ErrorKind.PROTOCOL),
])
def test_correctness_cheats_fail_without_the_static_check(runtime_judge, name, kind):
    result = runtime_judge.evaluate(problem("relu_small"), cheat(name))
    assert not result.correct
    assert result.error_kind is kind, result.error_message


def test_a_background_thread_is_caught(runtime_judge):
    result = runtime_judge.evaluate(problem("relu_small"), cheat("background_thread"))
    assert not result.correct
    assert result.error_kind in (ErrorKind.MISMATCH, ErrorKind.NONFINITE, ErrorKind.ASYNC_WORK,
                                 ErrorKind.DEGENERATE), result.error_message


def test_a_constant_scalar_is_degenerate(judge):
    result = judge.evaluate(problem("mse_scalar"), cheat("constant_scalar"))
    assert result.error_kind is ErrorKind.DEGENERATE, result.error_message
    assert "same on every input set" in result.error_message


@pytest.fixture(scope="module")
def honest(runtime_judge):
    result = runtime_judge.evaluate(problem("matmul_cpu"), cheat("honest_linear"))
    assert result.correct, result.error_message
    # the reference's own matmul: about 1x, but a loaded 2-core machine (the full suite on
    # two workers) measured 0.62x and 0.49x; a band, not a timing goal
    # (its clock agrees with the judge's: correct says so; a share of unexplained time over
    # UNEXPLAINED_MAX passes where it is within UNEXPLAINED_SLACK_MS a batch: scheduler noise)
    assert 0.1 < result.speedup < 10.0
    return result


@pytest.mark.parametrize("name, kind", [
    ("clock_patch", ErrorKind.TIMING_MISMATCH),
    # the worker's own timing function, replaced: the input guard sees it before the clock
    ("timer_patch", ErrorKind.SANDBOX),
])
def test_a_patched_clock_disagrees_with_the_judges(runtime_judge, honest, name, kind):
    result = runtime_judge.evaluate(problem("matmul_cpu"), cheat(name))
    assert result.error_kind is kind, (result.error_message, result.speedup)


def test_a_candidate_that_reports_calls_of_no_time_is_a_verdict(runtime_judge):
    """The reported times come from the candidate's process: all of them 0 ms (its clock
    patched) on a problem whose calls take microseconds is within the judge's clock's slack,
    and the speedup divided by zero (evaluate raised ZeroDivisionError)."""
    result = runtime_judge.evaluate(problem("relu_small"), cheat("zero_times"))
    assert result.error_kind is ErrorKind.TIMING_MISMATCH, result.error_message
    assert "median of 0 ms" in result.error_message


def test_the_judge_walks_an_output_without_running_its_containers_code():
    """A namedtuple's (or a dict subclass's) own __iter__ / items is the candidate's code:
    walking the output with them (pytree's tree_flatten did) ran it after the timer."""
    import collections

    import torch

    from autoprofiler_env.harness.worker import flatten, nesting

    class Loud(collections.namedtuple("Loud", "a b")):
        def __iter__(self):
            raise AssertionError("the candidate's __iter__ ran")

        def __len__(self):
            raise AssertionError("the candidate's __len__ ran")

    class LoudDict(dict):
        def items(self):
            raise AssertionError("the candidate's items ran")

        def values(self):
            raise AssertionError("the candidate's values ran")

    t = torch.ones(2)
    output = Loud(t, LoudDict(h=t, c=[t, 1.5], d=collections.deque([t]), n={1: t}))
    assert [type(x).__name__ for x in flatten(output)] == ["Tensor", "Tensor", "Tensor",
                                                           "float", "Tensor", "Tensor"]
    assert nesting(output) == "(*, {'h': *, 'c': (*, *), 'd': (*,), 'n': {1: *}})"


def test_an_output_whose_container_does_the_work_when_walked_is_refused(runtime_judge):
    """A namedtuple whose __iter__ computed the answer when the judge walked the output."""
    result = runtime_judge.evaluate(problem("matmul_tuple"), cheat("namedtuple_iter"))
    assert not result.correct  # its empty tensor, never filled: garbage, or zeros
    assert result.error_kind in (ErrorKind.MISMATCH, ErrorKind.DEGENERATE), (
        result.error_message, result.speedup)


def test_an_output_that_puts_its_work_off_until_read_is_refused(runtime_judge):
    """A tensor subclass computes its values when the snapshot reads them (after the timer)
    and the unsampled calls' never: judged as it came, correct at hundreds of times the
    reference's speed. Every call's outputs must be plain tensors."""
    result = runtime_judge.evaluate(problem("matmul_cpu"), cheat("lazy_output"))
    assert result.error_kind is ErrorKind.STRUCTURE, (result.error_message, result.speedup)
    assert "output 0 is a Deferred, a subclass of torch.Tensor" in result.error_message


@pytest.mark.parametrize("name, fill, changed", [
    ("input_hijack", {}, "problem.get_inputs"),   # the problem's own function replaced
    ("randn_patch", {}, "torch.randn"),           # a torch function the problem calls
    ("randn_patch", {"LATE": True}, "torch.randn"),  # the same, from the first forward
    ("profile_hook", {}, "hooks"),                # a profile function that sees every call
    ("to_patch", {}, "torch.Tensor.to"),          # what the worker calls on every input
    ("detach_patch", {}, "torch.Tensor.detach"),  # what a snapshot calls, after the timer
    ("thread_grab", {}, "torch threads"),         # every core where the reference had one
    ("parameter_detach", {}, "torch.nn.Parameter.detach"),  # an output type's own method
    ("guard_off", {}, "Guard.check"),             # the guard's own check, replaced
    ("guard_blind", {}, "builtins.sorted"),       # a builtin the guard calls, replaced
    ("reply_patch", {}, "wire.send"),             # the replies' times rewritten on the way
    ("late_reply_patch", {}, "json.dumps"),       # the same, from inside a call
    ("guard_code", {}, "Guard.check"),            # the check's code replaced in place
    ("encoder_patch", {}, "json._default_encoder"),  # json.dumps's encoder replaced
    ("wire_json", {}, "wire.json"),               # the wire module's json replaced
])
def test_a_candidate_that_changes_how_the_inputs_are_made_is_refused(runtime_judge, name, fill,
                                                                    changed):
    """The judge's inputs are made in the candidate's process, untimed: a candidate that
    computes its answers there (each cheat here looks them up in forward, at hundreds of
    times the reference's speed when judged as it came) is refused before the next input
    set is made."""
    result = runtime_judge.evaluate(problem("matmul_cpu"), cheat(name, **fill))
    assert result.error_kind is ErrorKind.SANDBOX, (result.error_message, result.speedup)
    assert "changed code that its process runs for the judge" in result.error_message
    assert changed in result.error_message


@pytest.mark.parametrize("fill", [{}, {"AUDITOR_OFF": 1}])
def test_a_search_of_the_workers_objects_is_refused(judge, fill):
    """``gc`` imported by a built name passes the static check; its search found the guard
    and blinded it, and the detach cheat behind it was judged correct at about 600x on
    ``matmul_cpu`` (before the worker's audit hook refused gc's searches); with the hook's
    class's ``__call__`` replaced first (the worker module imported by a built name), at
    1,011x (before the hook ran private copies of its methods)."""
    assert not [f for f in check_source(cheat("gc_search", **fill)) if f.rejects]
    result = judge.evaluate(problem("matmul_cpu"), cheat("gc_search", **fill))
    assert result.error_kind is ErrorKind.SANDBOX, (result.error_message, result.speedup)
    assert "called gc.get_objects" in result.error_message


def test_the_audit_hook_refuses_searches_of_live_objects_only_while_a_candidate_runs():
    from autoprofiler_env.harness.worker import Auditor

    auditor = Auditor([])
    auditor("gc.get_objects", (None,))  # not active: the worker's own code may search
    assert auditor.violations == []
    auditor.active = True
    for event in ("gc.get_referrers", "sys._current_frames"):
        with pytest.raises(PermissionError, match="not the candidate's to search"):
            auditor(event, ((),))
    auditor("sys._getframe", (None,))  # logging and torch.compile read frames: allowed
    assert auditor.violations == [
        "called gc.get_referrers (a search of the worker's objects)",
        "called sys._current_frames (a search of the worker's objects)"]


def test_an_honest_candidate_passes_the_input_guard_where_torch_and_python_change_things(
        runtime_judge):
    """The problem's code warns (Python adds __warningregistry__ to its module) and names
    torch.manual_seed, which the candidate's torch.compile rewraps on import: neither is the
    candidate's doing."""
    result = runtime_judge.evaluate(problem("softmax_warns"), candidate("softmax_compiled"))
    assert result.correct, (result.error_kind, result.error_message)


def test_the_input_guard_reads_only_what_the_problems_code_names(tmp_path):
    """What torch.compile rewraps when it is first imported (torch.manual_seed,
    nn.Module.__init__) is not watched unless the problem's own code names it; a value the
    problem reads and a closure's contents are."""
    import types

    import torch

    from autoprofiler_env.harness.worker import Guard, StageError

    module = types.ModuleType("_problem")
    exec("import torch\nN = 4\ndef get_inputs():\n    return [torch.randn(N, N).to('cpu')]\n",
         module.__dict__)
    guard = Guard(module)
    assert {"randn", "to", "N", "torch"} <= guard.names and "manual_seed" not in guard.names
    seed = torch.manual_seed
    try:
        torch.manual_seed = lambda s: seed(s)
        guard.check()  # not named: not watched
        torch.Tensor.to = lambda self, *a, **k: self
        with pytest.raises(StageError, match=r"torch\.Tensor\.to"):
            guard.check()
    finally:
        torch.manual_seed = seed
        del torch.Tensor.to  # torch.Tensor's own is its C base's
    guard.check()
    module.N = 5
    with pytest.raises(StageError, match=r"problem\.N"):
        guard.check()


def test_a_stateful_cache_is_caught_on_the_timed_calls(runtime_judge):
    result = runtime_judge.evaluate(problem("matmul_cpu"), cheat("stateful_cache"))
    assert result.error_kind is ErrorKind.MISMATCH, result.error_message
    assert "timed call" in result.error_message


def test_an_identity_cache_is_not_faster_than_honest_work(runtime_judge, honest):
    """Either the cache is caught returning a stale output where an input's address was
    reused (by the input sets or the sampled timed calls' outputs: a mismatch, not some other
    failure of the file), or no address was reused and it did honest work, at honest speed."""
    result = runtime_judge.evaluate(problem("matmul_cpu"), cheat("identity_cache"))
    assert result.correct or result.error_kind is ErrorKind.MISMATCH, (result.error_kind,
                                                                       result.error_message)
    # honest work is the reference's own matmul (about 1x; 0.62x measured once on 2 loaded
    # cores): a cache the judge missed returns the stored output at many times that
    bound = 1.5 * max(honest.speedup, 1.0)
    assert not result.correct or result.speedup < bound, (result.speedup, honest.speedup)


def test_the_callers_secrets_are_not_in_the_candidates_environment(monkeypatch):
    monkeypatch.setenv("AUTOPROFILER_TEST_API_KEY", "sk-not-a-real-key")
    with Evaluator(RUNTIME_ONLY, timeout_s=120) as ev:
        result = ev.evaluate(problem("relu_small"), cheat("secret_read"))
    assert result.correct, result.error_message  # it would add 1.0 had it seen the key
    assert result.isolation["environment"].startswith("scrubbed")


@pytest.fixture
def namespaces():
    """The OS isolation the sandbox gets here; the file and network tests need it."""
    with Evaluator(RUNTIME_ONLY, timeout_s=120) as ev:
        isolation = ev.evaluate(problem("relu_small"),
                                (DATA / "candidates" / "relu_correct.py").read_text()).isolation
    if os.geteuid() == 0:  # root: every namespace must have been made
        assert "namespace" in isolation["network"], isolation
        assert isolation["filesystem"].startswith("read-only"), isolation
        assert "namespace" in isolation["processes"], isolation
        assert isolation["capabilities"].startswith("none"), isolation
    return isolation


def test_a_write_outside_is_stopped_and_judged(runtime_judge, namespaces, tmp_path):
    target = tmp_path / "pwned.txt"
    result = runtime_judge.evaluate(problem("relu_small"), cheat("file_write", TARGET=target))
    assert result.error_kind is ErrorKind.SANDBOX and "for writing" in result.error_message
    if namespaces["filesystem"].startswith("read-only"):
        assert not target.exists()


def test_a_delete_in_the_callers_folder_is_stopped_and_judged(namespaces, tmp_path,
                                                               monkeypatch):
    victim = tmp_path / "results.csv"
    victim.write_text("precious")
    monkeypatch.chdir(tmp_path)
    with Evaluator(RUNTIME_ONLY, timeout_s=120) as ev:
        result = ev.evaluate(problem("relu_small"), cheat("file_delete", TARGET=victim))
    assert result.error_kind is ErrorKind.SANDBOX and "os.remove" in result.error_message
    if namespaces["filesystem"].startswith("read-only"):
        assert victim.read_text() == "precious"


def test_a_socket_is_stopped_and_judged(runtime_judge, namespaces):
    received = []
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.5)
    port = server.getsockname()[1]

    def accept():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not stop.is_set():
            try:
                conn, _ = server.accept()
                received.append(conn.recv(100))
                conn.close()
            except OSError:
                continue

    stop = threading.Event()
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        result = runtime_judge.evaluate(problem("relu_small"), cheat("socket_send", PORT=port))
    finally:
        stop.set()
        thread.join(5)
        server.close()
    assert result.error_kind is ErrorKind.SANDBOX and "socket.connect" in result.error_message
    if "namespace" in namespaces["network"]:
        assert received == []


def test_honest_candidates_pass_and_record_the_tolerance_they_need(judge):
    relu = problem("relu_small")
    exact = judge.evaluate(relu, (DATA / "candidates" / "relu_correct.py").read_text())
    assert exact.correct and exact.tolerance_needed == {"float32": 0.0}
    assert exact.findings == [] and exact.isolation
    off = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n" \
          "    def forward(self, x):\n        return torch.relu(x) + 1e-3\n"
    loose = judge.evaluate(relu, off)
    assert loose.correct, loose.error_message
    assert 0.5e-3 < loose.tolerance_needed["float32"] <= 1.001e-3  # float32 rounding
    assert passes(loose.tolerance_needed, "kernelbench-v0.1")
    assert not passes(loose.tolerance_needed, "kernelbench")
    with Evaluator(replace(JUDGE, tolerance="kernelbench"), timeout_s=120) as strict:
        again = strict.evaluate(relu, off)
    assert again.error_kind is ErrorKind.MISMATCH and "atol=0.0001" in again.error_message


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_evaluate_leaves_no_process_behind(tmp_path, sig):
    marker = f"autoprofiler-test-{uuid.uuid4().hex}"
    candidate = tmp_path / "spawns.py"
    candidate.write_text(cheat("spawns_and_hangs", MARKER=marker))
    cli = subprocess.Popen([sys.executable, "-m", "experiments.cli", "evaluate", "--problem",
                            str(DATA / "problems" / "relu_small.py"), "--candidate",
                            str(candidate), "--static-check", "off", "--timeout", "300"],
                           cwd=Path(__file__).parents[1], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not _processes_with(marker) and time.monotonic() < deadline:
            assert cli.poll() is None, "the CLI ended before its candidate started"
            time.sleep(0.5)
        assert _processes_with(marker), "the candidate's process never started"
        workers = _processes_with(f"--parent\x00{cli.pid}\x00")
        assert workers, "no worker process names the CLI as its parent"
        cli.send_signal(sig)
        cli.wait(30)
        deadline = time.monotonic() + 30
        while (_processes_with(marker) or _processes_with(f"--parent\x00{cli.pid}\x00")) \
                and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _processes_with(marker) == []
        assert _processes_with(f"--parent\x00{cli.pid}\x00") == []
    finally:
        if cli.poll() is None:
            cli.kill()
        for pid in _processes_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_a_forward_that_draws_random_numbers_draws_the_references_draws():
    """The timed calls' inputs are made ahead of them (in chunks whose size differs between
    the reference's and the candidate's batches): each call still runs with the generators as
    they were right after its own input set was made, so dropout in a correct candidate draws
    what the reference drew. (Without the restore, 3 of 3 such evaluations failed.)"""
    p = problem("dropout_train")
    source = p.source + (
        "\n\nclass ModelNew(Model):\n"
        "    def forward(self, x):\n"
        "        for _ in range(200):  # slower than the reference: fewer calls per batch\n"
        "            y = x * 1.0\n"
        "        return super().forward(x)\n")
    config = HarnessConfig(device="cpu", timing_budget_ms=20, min_trials=3, max_trials=40)
    with Evaluator(config, timeout_s=120) as ev:
        for _ in range(2):
            result = ev.evaluate(p, source)
            assert result.correct, result.error_message


def test_a_judgement_says_where_its_time_went(judge):
    """A diagnostic beside the verdict: each phase's wall time, which add up to no more than
    the whole (recording cost is spent there: docs/optimizers.md)."""
    honest = judge.evaluate(problem("relu_small"),
                            (DATA / "candidates" / "relu_correct.py").read_text())
    assert honest.correct, honest.error_message
    phases = honest.phases_s
    assert {"prepare", "start", "load", "correctness", "spare", "warmup", "timing"} <= set(phases)
    assert all(v >= 0 for v in phases.values())
    assert sum(phases.values()) <= honest.wall_s + 1e-3
    assert ("recheck" in phases) == honest.rechecked


def test_a_timed_call_is_checked_at_positions_drawn_after_it(runtime_judge, monkeypatch):
    """Outputs larger than SAMPLE_VALUES are compared at that many positions, which the judge
    draws after the batch: the stateful cache is caught there too."""
    from autoprofiler_env.harness import evaluator

    monkeypatch.setattr(evaluator, "SAMPLE_VALUES", 64)
    honest = runtime_judge.evaluate(problem("matmul_cpu"), cheat("honest_linear"))
    assert honest.correct, honest.error_message  # both workers draw the same positions
    result = runtime_judge.evaluate(problem("matmul_cpu"), cheat("stateful_cache"))
    assert result.error_kind is ErrorKind.MISMATCH, result.error_message
    assert "timed call" in result.error_message


FLATTENS_WHEN_TIMED = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        y = torch.relu(x)
        return y if self.calls <= 3 else y.reshape(-1)
'''


@pytest.mark.parametrize("values", [64, 1 << 20])  # positions drawn, and every value
def test_a_timed_calls_shape_is_checked(runtime_judge, monkeypatch, values):
    from autoprofiler_env.harness import evaluator

    monkeypatch.setattr(evaluator, "SAMPLE_VALUES", values)
    result = runtime_judge.evaluate(problem("relu_small"), FLATTENS_WHEN_TIMED)
    assert result.error_kind is ErrorKind.SHAPE, result.error_message
    assert "timed call" in result.error_message


PARTIAL_REPLY = '''
import json
import sys
import time

import torch.nn as nn


def _stall():  # on the worker's pipe, found in its loop's frame: a header, half a frame
    frame = sys._getframe(1)
    while "conn" not in frame.f_locals:
        frame = frame.f_back
    conn = frame.f_locals["conn"]
    conn.send_bytes(json.dumps({"ok": True, "changed": False, "nesting": "*",
                                "tensors": [{"dtype": "float32", "shape": [4]}]}).encode())
    conn._send(b"\\0\\0\\0\\x10" + b"\\0" * 8)
    time.sleep(3600)


class ModelNew(nn.Module):
    def forward(self, x):
        _stall()
        return x.relu()
'''


def test_a_reply_that_stops_halfway_is_a_timeout_not_a_hung_judge():
    started = time.monotonic()
    with Evaluator(RUNTIME_ONLY, timeout_s=10) as ev:
        result = ev.evaluate(problem("relu_small"), PARTIAL_REPLY)
    assert result.error_kind is ErrorKind.TIMEOUT, result.error_message
    assert "no whole answer" in result.error_message
    assert time.monotonic() - started < 60
