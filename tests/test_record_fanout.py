"""Recording on several GPUs (autoprofiler_env/dataset/record/fanout.py), on a CPU: units in
local processes and in Ray tasks with fake GPUs, each pinned to its GPU; a unit's process
killed mid-task, and the driver killed and restarted, lose nothing finished."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autoprofiler_env.dataset.record import record_candidates, record_reference
from autoprofiler_env.dataset.record.fanout import (
    FAILURES,
    LocalWorkers,
    UnitFailed,
    pending,
    record_fanout,
    verify,
)
from autoprofiler_env.harness import HarnessConfig
from autoprofiler_env.jsonlines import read_jsonl
from autoprofiler_env.problems import load_problem
from experiments.studies.fanout_check import compare

ROOT = Path(__file__).parents[1]
SMOKE = HarnessConfig(device="cpu", size="smoke", timing_budget_ms=2, min_trials=1,
                      max_trials=2, warmup_ms=0)
PARTS = ("reference", "candidates")


RELU = ROOT / "tests" / "data" / "problems" / "relu_small.py"


def _unit_processes(driver: int | None = None) -> list[int]:
    """The pids of this test's units running now: those whose ``--parent`` is ``driver``
    (default: this process) or a process under it (a Ray worker), so that a suite running
    beside this one on the machine keeps its units (two suites' fan-out tests killed and
    counted each other's)."""
    root = os.getpid() if driver is None else driver
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"autoprofiler_env.dataset.record.fanout" in cmd and b"--parent" in cmd:
                parent = int(cmd[cmd.index(b"--parent") + 1])
                if parent == root or root in _ancestors(parent):
                    pids.append(int(entry.name))
    return pids


def _ancestors(pid: int) -> list[int]:
    """``pid``'s parent, its parent's, ... (/proc/PID/stat's fourth field)."""
    found = []
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        found.append(pid)
    return found


def _kill_first_unit(stop: threading.Event, killed: list) -> None:
    while not stop.is_set() and not killed:
        for pid in _unit_processes():
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                continue
            break
        time.sleep(0.05)


def test_local_workers_pin_each_unit_to_its_gpu_and_write_the_plain_paths_rows(tmp_path):
    problems = [load_problem("conv2d_1x1_32x256x56x56")]
    # fp32 in another layout: a verdict that does not depend on the inputs drawn (bf16's
    # can, at the smoke size), and no minute of compiling
    plan = {p.uri: ["channels_last"] for p in problems}
    out = tmp_path / "fanned"
    summary = record_fanout(out, problems, LocalWorkers(["0", "1"]), PARTS, config=SMOKE,
                            plan=plan)
    assert summary == {"reference": 1, "candidates": 1, "failed": 0,
                       "stopped_by_time_budget": False}
    timings = read_jsonl(out / "timings.jsonl")
    assert sorted((t["part"], t["uri"]) for t in timings) == sorted(
        (part, p.uri) for part in PARTS for p in problems)
    assert {t["gpu"] for t in timings} <= {"0", "1"} and all(t["wall_s"] > 0 for t in timings)

    plain = tmp_path / "plain"
    record_reference(problems, SMOKE, plain / "reference.jsonl")
    record_candidates(problems, plain / "candidates.jsonl", SMOKE, warm_workers=1, plan=plan)
    same = compare(plain, out)  # the same units, keys, verdicts and judged sources
    assert same["same"], same
    assert same["reference"]["units"] == 1 and same["candidates"]["units"] == 1

    before = {p: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert pending(out, problems, PARTS, "cpu", plan) == []
    again = record_fanout(out, problems, LocalWorkers(["0", "1"]), PARTS, config=SMOKE,
                          plan=plan)
    assert again == summary and {p: p.read_bytes() for p in before} == before


def test_a_unit_whose_process_is_killed_is_run_again_or_logged_and_left_undone(tmp_path):
    problem = load_problem("matmul_4096x4096x4096")
    for retries, out in ((1, tmp_path / "retried"), (0, tmp_path / "given-up")):
        stop, killed = threading.Event(), []
        killer = threading.Thread(target=_kill_first_unit, args=(stop, killed))
        killer.start()
        try:
            summary = record_fanout(out, [problem], LocalWorkers([None], retries=retries),
                                    ("reference",), config=SMOKE)
        finally:
            stop.set()
            killer.join()
        assert killed, "no unit process was seen"
        rows, failures = read_jsonl(out / "reference.jsonl"), read_jsonl(out / FAILURES)
        if retries:
            assert summary["failed"] == 0 and [r["uri"] for r in rows] == [problem.uri]
            assert failures == []
        else:
            assert summary["failed"] == 1 and rows == []
            assert failures[0]["uri"] == problem.uri and "signal 9" in failures[0]["error"]
            # left undone: the next run records it
            assert record_fanout(out, [problem], LocalWorkers([None]), ("reference",),
                                 config=SMOKE)["reference"] == 1


class _DecliningWorkers:
    """Workers whose units come back having recorded nothing, as a full unit does that starts
    no ncu run for want of time (``declined``), or fail (the others)."""

    def __init__(self, declined: set[str]):
        self.declined = declined

    def run(self, work, setup, interrupted):
        from autoprofiler_env.dataset.record.fanout import _digests

        for unit, _ in work:
            if unit.uri in self.declined:
                yield unit, {"rows": [], "files": {}, "sha256": _digests([], {}), "wall_s": 0.1,
                             "idle": True}
            else:
                yield unit, UnitFailed("the unit's process died")


def test_work_a_unit_left_for_want_of_time_is_a_stop_by_the_time_budget(tmp_path):
    """A full unit starts no ncu run with under MIN_RUN_S left, though the deadline has not
    passed: the summary must say the budget stopped the recording, so that it is run again.
    A unit given up on is a failure, not a stop by the budget; without a budget, no stop."""
    relu = load_problem(str(RELU))
    out = tmp_path / "rec"
    declined = record_fanout(out, [relu], _DecliningWorkers({relu.uri}), ("full",),
                             config=SMOKE, time_budget_s=600)
    assert declined["full"] == 0 and declined["failed"] == 0
    assert not (out / "timings.jsonl").exists()  # it started no device work
    assert declined["stopped_by_time_budget"]
    failing = record_fanout(out, [relu], _DecliningWorkers(set()), ("full",), config=SMOKE,
                            time_budget_s=600)
    assert failing["failed"] == 1 and not failing["stopped_by_time_budget"]
    assert not record_fanout(out, [relu], _DecliningWorkers({relu.uri}), ("full",),
                             config=SMOKE)["stopped_by_time_budget"]


def test_a_result_that_does_not_match_its_checksums_is_refused():
    good = {"rows": [{"uri": "u"}], "files": {}, "sha256": {}}
    with pytest.raises(UnitFailed, match="checksums: rows"):
        verify(good, "reference of u")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_driver_resumes_where_it_stopped(tmp_path, sig):
    """The command line's driver, killed once one unit is written, then run again: every
    problem once, what the first run wrote kept as it was. Stopped by SIGTERM (timeout's
    signal) it stops its units itself and logs the device time they had taken."""
    files = [str(ROOT / "tests" / "data" / "problems" / f"{n}.py")
             for n in ("relu_small", "matmul_cpu", "mse_scalar")]
    out = tmp_path / "recording"
    command = [sys.executable, "-m", "experiments.cli", "record", "--out", str(out),
               "--parts", "reference", "--device", "cpu", "--workers", "1", *files]
    driver = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while not read_jsonl(out / "reference.jsonl") and time.monotonic() < deadline:
        assert driver.poll() is None, "the driver ended before it was killed"
        time.sleep(0.1)
    while not _unit_processes(driver.pid) and time.monotonic() < deadline:  # the next unit:
        time.sleep(0.05)
    # and the driver holds it: it does once Popen returns, a moment after the process shows
    # in /proc (a unit imports torch for seconds: it is still in flight after 0.5 s)
    time.sleep(0.5)
    driver.send_signal(sig)
    assert driver.wait(30) == (-sig if sig == signal.SIGKILL else 128 + sig)
    first = read_jsonl(out / "reference.jsonl")
    assert 1 <= len(first) < 3
    if sig == signal.SIGTERM:  # the unit in flight: stopped, its time logged
        stopped = [t for t in read_jsonl(out / "timings.jsonl") if t.get("interrupted")]
        assert len(stopped) == 1 and stopped[0]["wall_s"] > 0
        assert stopped[0]["uri"] not in {r["uri"] for r in first}
        assert _unit_processes(driver.pid) == []  # at once, not when they see it gone
    # a unit dies with the driver (one still importing, once it reaches its first line)
    gone = time.monotonic() + 60
    while _unit_processes(driver.pid) and time.monotonic() < gone:
        time.sleep(0.2)
    assert _unit_processes(driver.pid) == []
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = read_jsonl(out / "reference.jsonl")
    assert rows[:len(first)] == first and sorted(r["uri"] for r in rows) == sorted(
        load_problem(f).uri for f in files)
    assert json.loads(done.stdout.splitlines()[-1])["reference"] == 3


def test_ray_tasks_each_see_their_own_gpu_and_a_killed_unit_is_retried(tmp_path, monkeypatch):
    import ray  # the dev extra installs it: this test runs in CI

    # Ray keeps an OMP_NUM_THREADS it inherits (conftest sets 1 under xdist), else gives a
    # task's processes its CPUs
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)

    from autoprofiler_env.dataset.record.fanout import RayWorkers

    problems = [load_problem("matmul_4096x4096x4096"), load_problem(RELU)]
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        workers = RayWorkers(init_kwargs={"num_cpus": 4, "num_gpus": 2,
                                          "include_dashboard": False})
        assert workers.cpus_per_task() == 2.0  # each GPU's share of the CPUs
        stop, killed = threading.Event(), []
        killer = threading.Thread(target=_kill_first_unit, args=(stop, killed))
        killer.start()
        try:
            summary = record_fanout(tmp_path, problems, workers, ("reference",), config=SMOKE)
        finally:
            stop.set()
            killer.join()
        # the llm part's units, which come as the replies do, are tasks too
        from autoprofiler_env.dataset import Dataset
        from autoprofiler_env.dataset.record import LLMPart
        from autoprofiler_env.optimizers.llm import LLMOptimizer

        endpoint = _SlowScripted()
        replied = record_fanout(tmp_path, problems[1:], workers, ("llm",), config=SMOKE,
                                llm=LLMPart(LLMOptimizer(endpoint, seed=0), Dataset.load(),
                                            ((),), repeats=2))
    finally:
        ray.shutdown()
        for sig, handler in handlers.items():  # ray.init's handlers outlive its shutdown
            signal.signal(sig, handler)
    assert killed and summary["failed"] == 0 and summary["reference"] == 2
    assert sorted(r["uri"] for r in read_jsonl(tmp_path / "reference.jsonl")) == sorted(
        p.uri for p in problems)
    timings = read_jsonl(tmp_path / "timings.jsonl")
    gpus = [t["gpu"] for t in timings]
    assert len(gpus) == 3 and set(gpus) <= {"0", "1"}  # one GPU each, Ray's
    assert {t["omp_threads"] for t in timings} == {"2"}  # and its share of the CPUs
    assert replied["llm"] == 2 and endpoint.asked == 2 and replied["failed"] == 0
    assert [r["correct"] for r in sorted(read_jsonl(tmp_path / "llm.jsonl"),
                                         key=lambda r: r["repeat"])] == [True, False]


def test_a_ray_cluster_without_gpus_is_refused_at_once():
    import ray

    from autoprofiler_env.dataset.record.fanout import RayWorkers
    from autoprofiler_env.errors import AutoProfilerError

    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        with pytest.raises(AutoProfilerError, match="has no GPU"):
            RayWorkers(init_kwargs={"num_cpus": 1, "num_gpus": 0, "include_dashboard": False})
    finally:
        ray.shutdown()
        for sig, handler in handlers.items():  # ray.init's handlers outlive its shutdown
            signal.signal(sig, handler)


class _SlowScripted:
    """A chat endpoint that takes a while: a correct ReLU for even seeds, prose for odd ones;
    it counts the requests and the most in flight at once."""

    model_name = "scripted"

    def __init__(self) -> None:
        self.asked, self.in_flight, self.most = 0, 0, 0
        self.lock = threading.Lock()

    def __copy__(self):  # one endpoint, whatever the copies the requests are made through
        return self

    def complete(self, messages, *, max_tokens, temperature, seed, timeout_s):
        with self.lock:
            self.asked += 1
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        time.sleep(0.4)
        with self.lock:
            self.in_flight -= 1
        code = (ROOT / "tests" / "data" / "candidates" / "relu_correct.py").read_text()
        return f"```python\n{code}```" if seed % 2 == 0 else "I would fuse it."


def test_the_llm_part_keeps_requests_in_flight_while_units_judge_and_asks_nothing_twice(
        tmp_path):
    from autoprofiler_env.dataset import Dataset
    from autoprofiler_env.dataset.record import LLMPart, record_llm
    from autoprofiler_env.dataset.record.fanout import REPLIES
    from autoprofiler_env.optimizers.llm import LLMOptimizer

    dataset = Dataset.load()
    problems = [load_problem("relu_16384x16384"), load_problem("leaky_relu_8192x32768")]
    sets = ((), ("SpeedOfLight",))
    endpoint = _SlowScripted()
    part = LLMPart(LLMOptimizer(endpoint, seed=0), dataset, sets, repeats=2)
    out = tmp_path / "fanned"
    summary = record_fanout(out, problems, LocalWorkers(["0", "1"]), ("llm",), config=SMOKE,
                            llm=part, llm_concurrency=4)
    assert summary == {"llm": 8, "llm_left": 0, "failed": 0, "stopped_by_time_budget": False}
    assert endpoint.asked == 8 and endpoint.most == 4  # four requests in flight at once
    timings = read_jsonl(out / "timings.jsonl")
    assert sorted(t["uri"] for t in timings) == sorted(p.uri for p in problems)
    assert {t["part"] for t in timings} == {"llm"} and {t["gpu"] for t in timings} <= {"0", "1"}

    # the rows the single-GPU path writes (the verdicts; the times are measured again)
    plain = record_llm(problems, dataset, LLMOptimizer(_SlowScripted(), seed=0), list(sets),
                       tmp_path / "plain.jsonl", SMOKE, repeats=2)

    def verdicts(rows):
        return sorted((r["uri"], r["model"], r["sections"], r["repeat"], r["seed"], r["correct"],
                       r["error_kind"]) for r in rows)

    fanned = read_jsonl(out / "llm.jsonl")
    assert verdicts(fanned) == verdicts(plain)
    # a ReLU is right for the ReLU and wrong for the leaky one; prose is no code
    assert sum(r["correct"] for r in fanned) == 2 and {r["error_kind"] for r in fanned} == {
        None, "no_code", "mismatch"}

    # a driver killed after the replies came and before they were judged: run again, it
    # judges them and asks the endpoint nothing
    (out / "llm.jsonl").unlink()
    again = record_fanout(out, problems, LocalWorkers(["0"]), ("llm",), config=SMOKE,
                          llm=part, llm_concurrency=4)
    assert again["llm"] == 8 and endpoint.asked == 8
    assert verdicts(read_jsonl(out / "llm.jsonl")) == verdicts(plain)
    assert len(read_jsonl(out / REPLIES)) == 8
    # done: nothing asked, nothing judged
    before = (out / "llm.jsonl").read_bytes()
    assert record_fanout(out, problems, LocalWorkers(["0"]), ("llm",), config=SMOKE,
                         llm=part)["llm"] == 8
    assert endpoint.asked == 8 and (out / "llm.jsonl").read_bytes() == before


def test_the_llm_parts_requests_without_a_reply_are_not_written_and_asked_again(tmp_path, capsys):
    """An endpoint down for the first requests: they are not replies (reviewed: they were
    written and judged as the model's incorrect outcomes); their problems wait, the others'
    replies are kept, and the next run asks only what got no reply."""
    from autoprofiler_env.dataset import Dataset
    from autoprofiler_env.dataset.record import LLMPart
    from autoprofiler_env.dataset.record.fanout import REPLIES
    from autoprofiler_env.errors import LLMError
    from autoprofiler_env.optimizers.llm import LLMOptimizer

    class Down(_SlowScripted):
        def __init__(self, failing: int) -> None:
            super().__init__()
            self.failing = failing

        def complete(self, messages, **kwargs):
            with self.lock:
                self.failing -= 1
                down = self.failing >= 0
            if down:
                raise LLMError("http", "HTTP 503 from http://127.0.0.1:9/v1/...", status=503)
            return super().complete(messages, **kwargs)

    dataset = Dataset.load()
    problems = [load_problem("relu_16384x16384"), load_problem("leaky_relu_8192x32768")]
    out = tmp_path / "fanned"
    part = LLMPart(LLMOptimizer(Down(failing=1), seed=0), dataset, ((),), repeats=2)
    with pytest.warns(UserWarning, match=r"1 LLM request\(s\) got no reply .*HTTP 503"):
        summary = record_fanout(out, problems, LocalWorkers(["0"]), ("llm",), config=SMOKE,
                                llm=part, llm_concurrency=1)
    assert summary["llm"] == 2 and len(read_jsonl(out / REPLIES)) == 3  # one problem judged
    # the summary counts what is left, and the command's last words say to run it again
    assert summary["llm_left"] == 2 and not summary["stopped_by_time_budget"]
    from experiments.cli import _recorded

    _recorded(summary)
    assert "2 LLM outcome(s) not recorded" in capsys.readouterr().err
    assert all(r["error_kind"] != "http" for r in read_jsonl(out / "llm.jsonl"))
    endpoint = Down(failing=0)
    again = record_fanout(out, problems, LocalWorkers(["0"]), ("llm",), config=SMOKE,
                          llm=LLMPart(LLMOptimizer(endpoint, seed=0), dataset, ((),),
                                      repeats=2), llm_concurrency=1)
    assert again["llm"] == 4 and again["llm_left"] == 0 and endpoint.asked == 1


def test_a_full_unit_that_could_start_no_ncu_run_is_not_started(tmp_path):
    """With under MIN_RUN_S left (or, for a problem profiled alone and capped, under
    CAPPED_RUN_S) a full unit's ncu run would not start: the unit is not started at all (its
    process, and a timings.jsonl line of no device time, per problem and chunk), and the
    summary says the budget stopped the recording; the time for a run starts it."""
    from autoprofiler_env.dataset.record.fanout import START_UP_S
    from autoprofiler_env.dataset.record.ncu import CAPPED_RUN_S, MIN_RUN_S

    relu = load_problem(str(RELU))
    out = tmp_path / "rec"
    workers = _DecliningWorkers({relu.uri})
    given = []
    run = workers.run
    workers.run = lambda work, setup, interrupted: run(
        [given.append(unit.part) or (unit, seed) for unit, seed in work], setup, interrupted)
    summary = record_fanout(out, [relu], workers, ("full",), config=SMOKE,
                            time_budget_s=MIN_RUN_S / 2)
    assert given == [] and summary["stopped_by_time_budget"]
    assert not (out / "timings.jsonl").exists()
    record_fanout(out, [relu], workers, ("full",), config=SMOKE,  # its process starts first
                  time_budget_s=MIN_RUN_S + START_UP_S / 2)
    assert given == []
    record_fanout(out, [relu], workers, ("full",), config=SMOKE,
                  time_budget_s=(MIN_RUN_S + CAPPED_RUN_S) / 2, alone={relu.uri})
    assert given == []  # capped: too little time for such a run
    record_fanout(out, [relu], workers, ("full",), config=SMOKE, time_budget_s=MIN_RUN_S * 2)
    assert given == ["full"]


def test_a_full_unit_whose_turn_comes_too_late_for_an_ncu_run_is_not_started(monkeypatch):
    """The units are listed when the budget is whole; a full unit queued behind others may get
    its GPU with under its start_s left (on the H100 on 2026-12-06, the third of three
    problems' full units started with 15 s left and logged a line of 0.002 s). Its worker
    leaves it for the next run, as it does one past the deadline: on local GPUs and in a Ray
    task."""
    from autoprofiler_env.dataset.record import fanout

    relu = load_problem(str(RELU)).to_dict()
    setup = fanout.Setup(SMOKE, deadline_epoch=time.time() + 60)
    started = []

    def run_unit(unit, setup, seed, gpu, started_hook=None):
        started.append(unit.part)
        setup.deadline_epoch -= 40  # the unit took 40 s: 20 s are left
        return {"rows": []}

    monkeypatch.setattr(fanout, "run_unit", run_unit)
    work = [(fanout.Unit("reference", relu), {}), (fanout.Unit("full", relu, start_s=30.0), {})]
    results = list(LocalWorkers(["0"]).run(work, setup))
    assert started == ["reference"] and [r for _, r in results] == [{"rows": []}, None]
    assert fanout._ray_unit(fanout.Unit("full", relu, start_s=30.0), setup, {}) is None
    assert started == ["reference"]


def test_a_full_unit_that_started_no_ncu_run_logs_no_device_time(tmp_path, monkeypatch):
    """The time left can still fall under an ncu run's start between the unit's turn and its
    process reaching ncu (a few seconds of start-up): the unit says it was idle, and the
    driver writes no line of device time for it; a unit that made a run writes one."""
    import autoprofiler_env.dataset.record.ncu as ncu
    from autoprofiler_env.dataset.record import fanout

    problem = load_problem(str(RELU))
    unit = fanout.Unit("full", problem.to_dict())
    out = tmp_path / "rec"
    for made in (0, 1):
        monkeypatch.setattr(ncu, "record_ncu", lambda *a, **kw: made)
        scratch = tmp_path / f"unit{made}"
        scratch.mkdir()
        fanout.write_spec(scratch, unit, fanout.Setup(SMOKE), {})
        assert fanout._unit_main(scratch) == 0
        result = json.loads((scratch / fanout._RESULT).read_text())
        assert result["idle"] is (made == 0)
        fanout.commit(out, unit, result, "cuda")
        assert len(read_jsonl(out / "timings.jsonl")) == made


@pytest.mark.parametrize("alone", [True, False])
def test_a_full_unit_caps_ncu_from_the_start_for_a_problem_the_driver_names(tmp_path,
                                                                            monkeypatch, alone):
    """A KernelBench problem carries no op tags: the driver names the stepped ones
    (``record_fanout(alone=...)``), and their unit profiles them capped, as one GPU would."""
    import autoprofiler_env.dataset.record.ncu as ncu
    from autoprofiler_env.dataset.record import fanout

    seen = []
    monkeypatch.setattr(ncu, "record_ncu", lambda problems, configs, root, chunk, deadline=None,
                        alone=(), **kw: seen.append(set(alone)) or 0)
    problem = load_problem(str(RELU))
    unit = fanout.Unit("full", problem.to_dict())
    setup = fanout.Setup(SMOKE, alone=frozenset({problem.uri} if alone else ()))
    fanout.write_spec(tmp_path, unit, setup, {})  # as run_unit hands it to the unit's process
    assert fanout._unit_main(tmp_path) == 0
    assert seen == [{problem.uri} if alone else set()]


@pytest.mark.parametrize("path", ["../escaped/x.txt", "/tmp/escaped/y.txt", "z.txt"])
def test_a_units_file_outside_the_recordings_run_folders_is_refused(tmp_path, path):
    """A worker's result named files that commit wrote as given: ``..`` or an absolute path
    landed outside the recording."""
    import base64

    from autoprofiler_env.dataset.record import fanout

    files = {path: base64.b64encode(b"data").decode()}
    result = {"rows": [], "files": files, "sha256": fanout._digests([], files), "idle": True}
    out = tmp_path / "rec"
    out.mkdir()
    unit = fanout.Unit("full", load_problem(str(RELU)).to_dict())
    with pytest.raises(fanout.UnitFailed, match="is not in a run folder of the recording"):
        fanout.commit(out, unit, result, "cuda")
    assert not (tmp_path / "escaped").exists() and list(out.iterdir()) == []
