"""Running Nsight Compute: one invocation profiles several problems with exactly the chosen
sections, and the report is exported to its raw and details pages (CSV text).

Choices, and why:

- ``--nvtx --nvtx-include regex:ap_[0-9]+/``: only the kernels of each problem's measured
  forward call (the driver wraps it in the NVTX range ``ap_<index>`` after warm-up calls).
- ``--clock-control none``: the GPU runs at the clocks it has, as the harness times it; ncu's
  default would lock base clocks, and on a shared machine nobody should change clocks.
- ``--cache-control all`` (ncu's default): caches are flushed before every replay pass, so
  every pass sees the same cold cache and the metrics of a pass do not depend on the last.
- ``--replay-mode kernel`` (ncu's default): each kernel is replayed alone, pass after pass.
- ``--metrics gpu__time_duration.sum`` is always added: the kernel durations weight a
  problem's aggregate and price the replay (passes x duration), whatever sections were asked.
- the problem's own errors (a crash, a hang) are caught per problem: a run keeps the results
  of the problems that succeeded and retries the rest without the one that failed.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from autoprofiler_env import gzipped
from autoprofiler_env.atomic import write_atomic
from autoprofiler_env.errors import (
    MachineError,
    NcuNotFoundError,
    NcuPermissionError,
    NcuUnsupportedError,
    ProfiledProgramError,
    ProfilingError,
    ReportReadError,
    UnknownSectionError,
)
from autoprofiler_env.jsonlines import read_jsonl
from autoprofiler_env.problems.problem import Problem
from autoprofiler_env.processes import POSIX

DURATION_METRIC = "gpu__time_duration.sum"
NVTX_FILTER = "regex:ap_[0-9]+/"


@dataclass
class NcuRun:
    """What one ncu invocation produced, kept as text so it can be saved and parsed later."""

    sections: tuple[str, ...]
    problems: list[dict]          # {"uri"} in the driver's order
    status: list[dict]            # the driver's status lines
    log: str                      # ncu's stdout and stderr
    raw_csv: str                  # --page raw --csv --print-units base
    details_csv: str              # --page details --csv (section headers and rule results)
    wall_s: float                 # the whole invocation, start-up included
    returncode: int
    ncu_version: str = ""
    command: list[str] = field(default_factory=list)  # ncu's options (no paths of the machine)

    def save(self, directory: Path) -> None:
        """Writes the run as gzipped files plus a JSON index, atomically per file."""
        directory.mkdir(parents=True, exist_ok=True)
        meta = {k: v for k, v in asdict(self).items() if k not in ("raw_csv", "details_csv",
                                                                    "log")}
        # tracebacks name files of the machine that ran; the one-line error stays
        meta["status"] = [{k: v for k, v in r.items() if k != "traceback"} for r in self.status]
        for name, text in (("raw.csv.gz", self.raw_csv), ("details.csv.gz", self.details_csv),
                           ("log.txt.gz", self.log)):
            write_atomic(directory / name, gzip.compress(text.encode(), mtime=0))
        write_atomic(directory / "run.json", json.dumps(meta, indent=1).encode())

    @classmethod
    def load(cls, directory: Path) -> NcuRun:
        try:
            meta = json.loads((directory / "run.json").read_text())
            texts = {name: gzipped.decompress((directory / f"{name}.gz").read_bytes()).decode()
                     for name in ("raw.csv", "details.csv", "log.txt")}
            known = {f.name for f in fields(cls)} - {"raw_csv", "details_csv", "log"}
            if not isinstance(meta, dict):
                raise ValueError("run.json is not an ncu run's record (a JSON object)")
            if set(meta) - known:
                raise ValueError(f"run.json holds {', '.join(sorted(set(meta) - known)[:3])}, "
                                 f"which an ncu run's record does not ({', '.join(sorted(known))})")
            meta["sections"] = tuple(meta["sections"])
            return cls(raw_csv=texts["raw.csv"], details_csv=texts["details.csv"],
                       log=texts["log.txt"], **meta)
        except (OSError, ValueError, EOFError, KeyError, TypeError, RecursionError) as e:
            raise ReportReadError(f"cannot read the saved ncu run in {directory}: {e}") from e


def find_ncu(ncu: str | None = None) -> str:
    """The ncu executable: ``ncu`` argument, else ``$NCU``, else the PATH."""
    candidate = ncu or os.environ.get("NCU") or "ncu"
    path = shutil.which(candidate)
    if path is None:
        raise NcuNotFoundError(
            f"Nsight Compute's `ncu` was not found ({candidate!r}); install Nsight Compute, put "
            "ncu on the PATH or set NCU=/path/to/ncu")
    return path


def without_machine_paths(text: str, workdir: Path) -> str:
    """ncu's log without the paths of the machine that ran it (a saved run is shipped): its
    working folder (``<workdir>``), then the working directory (what lies in it, such as a
    KernelBench checkout whose file a warning names, becomes relative) and the home folder
    (``~``), the longer of the two first. A path is replaced whole only: ``/var/tmp`` stays
    where the working directory is ``/tmp``, and so do ``/tmpfiles`` and ``/tmp~old``."""
    here = [(str(p), shown) for p, shown in ((_folder(Path.cwd), "."), (_folder(Path.home), "~"))
            if p is not None]
    for path, shown in [(str(workdir), "<workdir>"), *sorted(here, key=lambda f: -len(f[0]))]:
        prefix = path.rstrip(os.sep)
        if prefix:  # not the root folder
            text = re.sub(PATH_STARTS + re.escape(prefix) + PATH_ENDS, lambda _: shown, text)
    return text


# where a path in a log starts and ends: the text's start or end, a space, a quote or a
# separator (``/srv/ci~bak`` and ``/opt/c++/srv/ci`` are other folders than ``/srv/ci``)
PATH_STARTS = r"(?<![^\s'\"`:;,(\[<=])"
PATH_ENDS = r"(?=$|[/\s'\"`:;,)\]>])"


def _folder(get) -> Path | None:
    """The working directory or the home folder; None where there is none (removed, or no
    HOME and no user entry): the log is then kept with what it names."""
    try:
        return get()
    except (OSError, RuntimeError, KeyError):
        return None


def check_log(log: str) -> None:
    """Raises the typed error that ncu's output shows, if any."""
    if "ERR_NVGPUCTRPERM" in log:
        raise NcuPermissionError(
            "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): run as root or "
            "enable access for all users (NVreg_RestrictProfilingToAdminUsers=0), see "
            "https://developer.nvidia.com/ERR_NVGPUCTRPERM")
    if "LibraryNotLoaded" in log:
        raise NcuUnsupportedError(
            "ncu failed to initialise the profiler (LibraryNotLoaded): this machine's runtime "
            "does not expose the GPU counters (seen under gVisor); use a machine or VM with "
            "direct GPU access")
    match = re.search(r"Option '--section ([^']+)' did not match any section", log)
    if match:
        raise UnknownSectionError(f"ncu knows no section {match.group(1)!r}; "
                                  "`ncu --list-sections` lists them")


def ncu_version(ncu: str) -> str:
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60,
                             check=False).stdout
    except subprocess.TimeoutExpired:
        raise ProfilingError(f"`{ncu} --version` did not answer within 60 s: this ncu does not "
                             "work here; check the Nsight Compute install (or NCU=)") from None
    match = re.search(r"Version (\S+)", out)
    return match.group(1) if match else out.strip().splitlines()[-1] if out.strip() else ""


def _export(ncu: str, report: Path, page: str, extra: list[str]) -> str:
    out = subprocess.run([ncu, "--import", str(report), "--page", page, "--csv", *extra],
                         capture_output=True, text=True, timeout=600, check=False)
    if out.returncode != 0 or "==ERROR==" in out.stdout[:2000]:
        lines = (out.stderr + out.stdout).strip().splitlines()
        errors = [ln.replace("==ERROR==", "").strip() for ln in lines if "==ERROR==" in ln]
        reason = " ".join(errors or lines[:1]) or f"exit code {out.returncode}"
        raise ReportReadError(f"ncu could not read the report {report.name}: {reason}")
    return out.stdout


PROBLEM_TIMEOUT_S = 300.0
"""The seconds a problem may take under ncu's replay before it counts as hung: the default of
:func:`run_ncu` and :func:`~autoprofiler_env.profiler.profile_problems`."""
MAX_OPS = 64
"""Operators of a problem's forward call that are profiled (the driver's ``max_ops``): a long
program (a Python loop over time steps or layers) is profiled on its first operators, whose
kernels repeat in the rest, so that one problem cannot take an invocation's whole time. Every
suite problem has fewer on the meta device but the LSTM (1,539, its cuDNN path on a GPU: one);
the status line of each profiled problem reports ``ops`` and ``ops_profiled``."""

MAX_KERNELS = 64
"""Kernels profiled in a run of one problem (ncu's ``--launch-count``). ``MAX_OPS`` cannot cut
inside one operator: the suite's ``lstm_sequence_64x128x512`` is one cuDNN call of 260 kernels
(two per time step), 150 s of replay under SpeedOfLight alone and past the 300 s timeout under
the full set. ncu counts launches over its whole invocation, so the cap applies only to a run of
one problem; the recorder profiles a problem that timed out in a batched run again alone with
it. Every other suite problem launches at most 48 kernels in its profiled call."""


RANGE_BASE_S, RANGE_PER_OP_S = 40.0, 5.0
"""The limit of a batched problem's profiled call, given the operators in its range:
``RANGE_BASE_S + RANGE_PER_OP_S * ops`` (at most the run's ``problem_timeout_s``), so that a
problem whose few operators launch hundreds of kernels is stopped, and profiled alone and
capped, after 45 s rather than 150 s. Of the 463 problem runs with operator counts in docs/data
(both datasets, the H200), each that finished uncapped took at most 69% of its limit
(KernelBench's ``level2/18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp``: 51.8 s of 75 for 7
operators; with the base of 30 s it had when it ran, 2026-12-05, that was 80% of its 65 s,
and the base went up by 10 s so that an uncapped problem keeps a quarter of its limit
spare). Only those that need the kernel cap go over: the cuDNN FFT transposed convolutions
(one operator, about 150 kernels; 125 s capped) and the LSTMs (5-6 operators, 111-151 s)."""


def range_timeout_s(ops: int) -> float:
    """A batched problem's limit for its profiled call of ``ops`` operators
    (:data:`RANGE_BASE_S`): for ``run_ncu(range_timeout_s=)`` where a timeout leads to a run
    of the problem alone and capped."""
    return RANGE_BASE_S + RANGE_PER_OP_S * ops


def visible_devices(device: str) -> dict[str, str]:
    """The environment that makes ``device`` the profiled program's ``cuda`` (ncu profiles
    on the default device): ``{}`` for ``cuda``; for ``cuda:N``, ``CUDA_VISIBLE_DEVICES`` the
    N-th of the GPUs this process sees (its own ``CUDA_VISIBLE_DEVICES``, where set, counts
    from them, as torch does).

    Raises:
        ValueError: not ``cuda`` or ``cuda:N``, or N beyond the visible GPUs' list.
    """
    if device == "cuda":
        return {}
    if not re.fullmatch(r"cuda:\d+", device):
        raise ValueError(f"device {device!r}: ncu profiles a CUDA GPU, 'cuda' or 'cuda:N'")
    index = int(device.split(":")[1])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return {"CUDA_VISIBLE_DEVICES": str(index)}
    listed = [d.strip() for d in visible.split(",") if d.strip()]
    if index >= len(listed):
        raise ValueError(f"device {device!r}: CUDA_VISIBLE_DEVICES={visible!r} shows "
                         f"{len(listed)} GPU(s)")
    return {"CUDA_VISIBLE_DEVICES": listed[index]}


def run_ncu(problems: list[Problem], sections: list[str], *, ncu: str | None = None,
            size: str = "full", problem_timeout_s: float = PROBLEM_TIMEOUT_S, start: int = 0,
            workdir: Path | None = None, deadline_s: float | None = None,
            max_ops: int | None = MAX_OPS, max_kernels: int | None = None,
            range_timeout_s: Callable[[int], float] | None = None,
            device: str = "cuda") -> NcuRun:
    """One ncu invocation over ``problems`` (from index ``start``) with ``sections``, on
    ``device`` (``cuda:N``: that GPU alone is visible to the profiled program,
    :func:`visible_devices`).

    A problem that does not finish within ``problem_timeout_s`` (no status line from the
    driver), or an invocation that outlasts ``deadline_s``, gets ncu stopped; ncu then writes
    what it profiled so far, and the returned run keeps the problems that finished (its status
    names the problem in flight, and ends with ``{"event": "timeout"}`` or ``{"event":
    "deadline"}``). ``max_kernels`` (a run of one problem only) profiles its first kernels.
    ``range_timeout_s``: the limit (at most ``problem_timeout_s``) of a problem's profiled
    call, given the operators in its range (the driver's ``range`` line); a problem that
    launches far more kernels than its operators let expect is stopped sooner.

    Raises:
        NcuNotFoundError, NcuPermissionError, NcuUnsupportedError, UnknownSectionError: ncu
            cannot profile at all.
        MachineError: not a POSIX system (Windows).
    """
    if not POSIX:
        raise MachineError(f"profiling here needs a POSIX system (Linux), not {sys.platform}: "
                           "ncu is started in a session of its own and stopped by process "
                           "group. On Windows, profile in WSL")
    exe = find_ncu(ncu)
    if not sections:
        raise ProfilingError("no sections to collect: pass at least one")
    if max_kernels is not None and len(problems) - start != 1:
        raise ProfilingError("max_kernels caps the kernels of a whole ncu invocation: pass it "
                             "only for a run of one problem")
    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
    # a folder of its own: no two invocations ever share a report or a status file
    workdir = Path(tempfile.mkdtemp(prefix="ncu-", dir=workdir)).resolve()  # as logs name it
    status_path, report = workdir / "status.jsonl", workdir / "report.ncu-rep"
    status_path.unlink(missing_ok=True)
    report.unlink(missing_ok=True)
    spec = {"problems": [{"uri": p.uri, "path": str(p.path)}
                         | ({"candidate": str(p.candidate)} if p.candidate else {})
                         for p in problems],
            "size": size, "warmup": 3, "status": str(status_path), "start": start,
            "max_ops": max_ops, "primer": True,
            "parent_pid": os.getpid()}  # the profiled program ends with this process
    spec_path = workdir / "spec.json"
    spec_path.write_text(json.dumps(spec))
    command = [exe, "--config-file", "off", "--clock-control", "none", "--cache-control", "all",
               "--replay-mode", "kernel", "--nvtx", "--nvtx-include", NVTX_FILTER,
               *[a for s in sections for a in ("--section", s)],
               "--metrics", DURATION_METRIC,
               # the primer's kernel counts as a launch too
               *(("--launch-count", str(max_kernels + 1)) if max_kernels is not None else ()),
               "-f", "-o", str(report.with_suffix("")),
               sys.executable, "-m", "autoprofiler_env.profiler.driver", str(spec_path)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.update(visible_devices(device))
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    started = time.perf_counter()
    log_path = workdir / "ncu.log"
    with log_path.open("w") as log_file, terminate_becomes_exit(), sigint_reaches_children():
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
        try:
            last_change, seen, stopped = time.perf_counter(), -1, None
            while process.poll() is None:
                time.sleep(0.5)
                size_now = status_path.stat().st_size if status_path.exists() else 0
                if size_now != seen:  # always at the first poll (seen: -1)
                    seen, last_change = size_now, time.perf_counter()
                    limit = problem_timeout_s
                    if range_timeout_s is not None:
                        last = _last_line(status_path)
                        if last.get("event") == "range":
                            limit = min(problem_timeout_s,
                                        range_timeout_s(last.get("ops_profiled", 0)))
                elif time.perf_counter() - last_change > limit:
                    stopped = {"event": "timeout", "problem_timeout_s": limit}
                    break
                if deadline_s is not None and time.perf_counter() - started > deadline_s:
                    stopped = {"event": "deadline", "deadline_s": deadline_s}
                    break
        finally:
            # ncu runs in a process group of its own: a hang, an interrupt or a kill of this
            # process must not leave it profiling (and writing files) behind us. SIGINT first:
            # ncu then ends the program and still writes what it profiled so far.
            _stop(process)
    wall = time.perf_counter() - started
    log = without_machine_paths(log_path.read_text(errors="replace"), workdir)
    check_log(log)
    status = read_jsonl(status_path)
    if stopped is not None:
        status.append(stopped)
    raw = details = ""
    if report.exists():
        raw = _export(exe, report, "raw", ["--print-units", "base"])
        details = _export(exe, report, "details", [])
    options = command[1:command.index(sys.executable)]
    options = options[:options.index("-o")]  # the report's path is the machine's
    return NcuRun(sections=tuple(sections), problems=[{"uri": p.uri} for p in problems],
                  status=status, log=log, raw_csv=raw, details_csv=details, wall_s=wall,
                  returncode=process.returncode, ncu_version=ncu_version(exe), command=options)


def _last_line(path: Path) -> dict:
    """The status file's last complete line; {} when there is none yet."""
    try:
        with path.open("rb") as f:
            f.seek(max(f.seek(0, os.SEEK_END) - 4096, 0))
            lines = f.read().split(b"\n")
        return json.loads(lines[-2]) if len(lines) > 1 else {}
    except (OSError, ValueError):
        return {}


def _stop(process: subprocess.Popen, grace_s: float = 30.0) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextmanager
def terminate_becomes_exit(raised=lambda: SystemExit(128 + signal.SIGTERM)):
    """Turns SIGTERM (``timeout``, a job scheduler) into the exception ``raised()`` makes
    (SystemExit by default) inside the block, so that ``finally`` clauses run (ncu is killed,
    the recorder logs its time) and handlers may save what is done; Python's default would
    exit without cleaning up. A no-op off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(*_):
        raise raised()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def sigint_reaches_children():
    """Where this process was started with SIGINT ignored (a background job of a script,
    ``cmd &``, gets it so), ignores it with a handler instead inside the block: a child
    inherits an ignored signal across ``exec`` but not a handled one, so ncu, which the runner
    stops with SIGINT so that it writes what it profiled, starts with SIGINT's default and is
    not left to the SIGKILL after the grace period (30 s a stop). A no-op off the main thread
    and where SIGINT is not ignored."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.SIG_IGN):
        yield
        return
    signal.signal(signal.SIGINT, lambda *_: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def primed(status: list[dict]) -> bool:
    """Whether the run began with the driver's primer: without it, the first problem's
    ``profiled_s`` holds ncu's one-time start-up of profiling as well."""
    return any(r.get("event") == "primer" for r in status)


def first_unprimed(status: list[dict]) -> str | None:
    """The URI of the first problem profiled by a run without the primer (its cost holds
    ncu's start-up); None for a primed run."""
    if primed(status):
        return None
    return next((r["uri"] for r in status if r.get("event") == "problem"), None)


def timed_out(status: list[dict]) -> bool:
    """Whether the runner stopped the run because a problem outlasted its timeout."""
    return any(r.get("event") == "timeout" for r in status)


def failed_problem(status: list[dict]) -> int | None:
    """The index of the problem that crashed or hung a run, from the run's status lines; none
    when the run finished or its deadline stopped it (the problem in flight did not fail)."""
    begun = [r["index"] for r in status if r.get("event") == "begin"]
    ended = {r["index"] for r in status if r.get("event") == "problem"}
    if any(r.get("event") in ("finished", "deadline") for r in status):
        return None
    open_ = [i for i in begun if i not in ended]
    if open_:
        return open_[-1]
    return None


def raise_for_run(run: NcuRun) -> None:
    """Raises ProfiledProgramError when the run failed before any problem began."""
    if run.raw_csv or any(r.get("event") == "begin" for r in run.status):
        return
    lines = [ln.strip() for ln in run.log.strip().splitlines() if ln.strip()]
    code = run.returncode
    how = (f"was stopped by signal {-code} (the runner stops a run that outlasts its time "
           "limit: a hang?)" if code is not None and code < 0 else f"exited with code {code}")
    started = any(r.get("event") == "started" for r in run.status)  # ncu ran the driver
    who = "the profiled program" if started else "ncu or the profiled program"
    last = f"; its last output: {lines[-1][:300]!r}" if lines else "; it printed nothing"
    check = "" if started else " (check ncu alone: `ncu --version`)"
    tail = "\n".join(lines[-5:])
    raise ProfiledProgramError(f"{who} {how} before the first problem began{last}{check}"
                               + (f"\n{tail}" if tail else ""))
