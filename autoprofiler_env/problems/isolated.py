"""Static features of untrusted problem files, computed in a worker process with a time limit.

:func:`autoprofiler_env.features.static_features` imports the problem file in the caller's
process, and a KernelBench-format file is a Python script: it may download weights, sleep,
loop, print, or crash the interpreter when it is imported. For the project's own suite that is
fine; for a folder of someone else's files (``autoprofiler problems --source DIR``) one such
file would block the whole scan, kill it, or write into its JSON output. Here each file is
imported and traced in a worker process instead:

- a file gets ``timeout_s`` seconds (import and trace together), of which its import gets at
  most ``import_timeout_s`` (a few seconds: importing a KernelBench file takes milliseconds
  once torch is loaded, and a slow import is nearly always one waiting on the network, such
  as KernelBench's level 4, whose files fetch a model's config from the Hugging Face hub and,
  offline, retry for about 24 s); a slower or hanging file becomes a
  :class:`ProblemTimeoutError`, one that kills its process a :class:`ProblemError`, each
  naming the file and saying what happened, and the worker is killed (its whole process
  group) and replaced;
- the worker watches the file's network use (Python's ``socket.connect`` and
  ``socket.getaddrinfo`` audit events; nothing is blocked) so that the error of a slow file
  says which host it was waiting on;
- whatever the file prints goes to stderr, never to the caller's stdout;
- one worker serves file after file while they behave (starting Python and torch, and the
  first trace's imports, cost seconds, and that start-up is not charged to any file).

The worker is a plain ``python -c`` subprocess, not a ``multiprocessing`` child, so a script
without an ``if __name__ == "__main__":`` guard can use this. It runs in a session of its own
and dies with its parent (``PR_SET_PDEATHSIG`` on Linux). It is *not* a sandbox: a file runs
with the caller's rights, and state it changes (torch's defaults, say) stays in the worker for
the files after it.

>>> with IsolatedFeatures(timeout_s=60, import_timeout_s=5) as isolated:
...     features = isolated.static_features(load_file("KernelBench/level1/19_ReLU.py"))
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from autoprofiler_env.errors import ProblemError, ProblemTimeoutError, ProblemWorkerError
from autoprofiler_env.problems.problem import SIZES, Problem, Size
from autoprofiler_env.processes import POSIX, STARTUP_TIMEOUT_S, die_with_parent, kill_group

if TYPE_CHECKING:
    from autoprofiler_env.features import StaticFeatures

DEFAULT_TIMEOUT_S = 60.0
"""Seconds one file may take to import and trace. KernelBench's files take well under one."""

DEFAULT_IMPORT_TIMEOUT_S = 5.0
"""Seconds of those that its import may take (with torch already imported): KernelBench's
level 1-3 files take milliseconds, one importing transformers about 2 s."""

_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
"""Prepended to the worker's PYTHONPATH: it must import this package even when the caller runs
from a checkout without an install."""

_ENTRY = "from autoprofiler_env.problems.isolated import _worker_main; _worker_main()"
PROBLEMS_SETTINGS = ("autoprofiler problems --timeout S",
                     "autoprofiler problems --import-timeout S")
"""How ``autoprofiler problems`` allows a file more time: its whole limit's option and its
import's (what a time-out's hint names by default)."""
_HINT = "the file runs slow code when it is imported or traced: fix that"
_IMPORT_HINT = "the file runs slow code when it is imported: fix that"
_NETWORK_HINT = ("it downloads something when it is imported, from a host that does not answer "
                 "here: run it where the host answers, fill its cache first (a Hugging Face "
                 "model: then set HF_HUB_OFFLINE=1)")


@dataclass(frozen=True)
class _Phase:
    """What the worker is doing with a file, for the error that says where it failed."""

    what: str  # "the import" / "the meta trace"
    slow: str  # "import" / "building Model and tracing its forward on the meta device"
    name: str = "trace"  # ProblemTimeoutError.phase


_IMPORT = _Phase("the import", "import", "import")
_TRACE = _Phase("the meta trace", "building Model and tracing its forward on the meta device")


def _cpu_trace(reason: str) -> _Phase:
    """The phase after the meta trace gave up on a file that needs real values."""
    return _Phase("the CPU trace", "building Model and running its forward on the CPU (on the "
                  f"meta device it needs real values: {reason})")


class _WorkerGone(Exception):
    """The worker's process ended or its pipe broke (the worker has been killed).

    Attributes:
        verb: what the file did to it ("crashed", "ended its process").
        detail: how it ended ("signal 6, SIGABRT", "exit code 3").
    """

    def __init__(self, verb: str, detail: str) -> None:
        super().__init__(f"{verb} ({detail})")
        self.verb, self.detail = verb, detail


class _WorkerTimeout(Exception):
    """No message before the deadline (the worker has been killed)."""


class _Worker:
    """One worker process and its two pipes: JSON lines in, JSON lines out."""

    def __init__(self) -> None:
        if not POSIX:
            raise ProblemWorkerError(
                f"the problem import worker needs a POSIX system (Linux, or macOS), not "
                f"{sys.platform}: on Windows, load problems in WSL; the shipped datasets' replay "
                "needs no import worker")
        request_r, self._request_w = os.pipe()
        self._reply_r, reply_w = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
        try:
            self.popen = subprocess.Popen(
                [sys.executable, "-c", _ENTRY, str(request_r), str(reply_w), str(os.getpid())],
                pass_fds=(request_r, reply_w), env=env, stdin=subprocess.DEVNULL,
                stdout=2, start_new_session=True)
        except OSError as e:
            os.close(self._request_w)
            os.close(self._reply_r)
            raise ProblemWorkerError(f"cannot start the problem import worker: {e}") from e
        finally:
            os.close(request_r)
            os.close(reply_w)
        self._buffer = b""

    def wait_ready(self, timeout_s: float) -> None:
        """Waits for the worker's first message (it has imported torch).

        Raises:
            ProblemWorkerError: it did not start.
        """
        try:
            self.receive(time.monotonic() + timeout_s)
        except _WorkerTimeout:
            raise ProblemWorkerError(
                f"the problem import worker did not start within {timeout_s:g} s "
                "(importing torch on a loaded machine?)") from None
        except _WorkerGone as e:
            raise ProblemWorkerError(
                f"the problem import worker did not start ({e.detail}; its traceback, if any, "
                "is on stderr above: can this Python import torch and autoprofiler_env?)"
            ) from None

    def send(self, message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        try:
            while data:
                data = data[os.write(self._request_w, data):]
        except OSError:  # BrokenPipeError: it is gone
            raise self._gone() from None

    def receive(self, deadline: float) -> dict:
        """The worker's next message, before ``deadline`` (a ``time.monotonic()`` value).

        Raises:
            _WorkerTimeout, _WorkerGone: no message (the worker is killed either way).
        """
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            ready = remaining > 0 and select.select([self._reply_r], [], [], remaining)[0]
            if not ready:
                self.kill()
                raise _WorkerTimeout()
            chunk = os.read(self._reply_r, 1 << 16)
            if not chunk:  # end of file: the process is gone, or going
                raise self._gone()
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):  # something else wrote into our pipe
            self.kill()
            raise _WorkerGone("broke the worker's pipe", "something wrote into it")
        return message

    def _gone(self) -> _WorkerGone:
        """How the process ended, read before it is killed: a process that aborts may still
        be writing its core dump when its pipe closes, and killing it then would hide the
        signal that ended it."""
        try:
            code = self.popen.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        self.kill()
        if code is None:
            return _WorkerGone("broke the worker's pipe", "it closed it")
        if code < 0:
            try:
                return _WorkerGone("crashed", f"signal {-code}, {signal.Signals(-code).name}")
            except ValueError:
                return _WorkerGone("crashed", f"signal {-code}")
        return _WorkerGone("ended its process", f"exit code {code}")

    def alive(self) -> bool:
        return self.popen.poll() is None and self._request_w >= 0

    def kill(self) -> None:
        """Kills its whole process group (children a file started too), safe to call twice."""
        kill_group(self.popen)
        for fd in (self._request_w, self._reply_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._request_w = self._reply_r = -1

    def close(self) -> None:
        """Asks it to exit (closing its request pipe), then kills what is left."""
        if self.popen.poll() is None and self._request_w >= 0:
            try:
                os.close(self._request_w)
                self._request_w = -1
                self.popen.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()


class IsolatedFeatures:
    """:func:`~autoprofiler_env.features.static_features`, one file at a time in a worker
    process with a time limit per file (see the module's docstring for why).

    Use it as a context manager, or call :meth:`close`, so that the worker ends with you. Use
    it from one thread: on Linux the worker dies when the thread that started it ends.

    Args:
        timeout_s: seconds one file may take to import and trace.
        import_timeout_s: seconds of those that its import may take.
        startup_timeout_s: seconds a fresh worker may take to start (not charged to a file).
        settings: how the caller's user allows more time, named in a time-out's hint: the
            setting of ``timeout_s`` and that of ``import_timeout_s`` (None: there is none),
            e.g. ``"autoprofiler problems --import-timeout S"`` (the default's).
    """

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S,
                 import_timeout_s: float = DEFAULT_IMPORT_TIMEOUT_S,
                 startup_timeout_s: float = STARTUP_TIMEOUT_S,
                 settings: tuple[str | None, str | None] = PROBLEMS_SETTINGS) -> None:
        for name, value in (("timeout_s", timeout_s), ("import_timeout_s", import_timeout_s)):
            if not value > 0:
                raise ValueError(f"{name} must be positive, got {value!r}")
        self.timeout_s = float(timeout_s)
        self.import_timeout_s = float(import_timeout_s)
        self.startup_timeout_s = float(startup_timeout_s)
        self.settings = tuple(settings)
        self._worker: _Worker | None = None

    def static_features(self, problem: Problem | str | Path, size: Size = "full"
                        ) -> StaticFeatures:
        """The file's static features, as :func:`~autoprofiler_env.features.static_features`
        computes them, but imported and traced in the worker.

        Raises:
            ProblemTimeoutError: the import took longer than ``import_timeout_s``, or the
                import and trace longer than ``timeout_s`` (the worker is replaced).
            ProblemError: the file does not import or trace, or kills its process (the worker
                is replaced for the next file).
            ProblemWorkerError: no worker could be started.
        """
        from autoprofiler_env.features import StaticFeatures

        if size not in SIZES:
            raise ValueError(f"size must be one of {SIZES}, got {size!r}")
        path = Path(problem.path if isinstance(problem, Problem) else problem).resolve()
        worker = self._ready_worker()
        start = time.monotonic()
        phase, limit = _IMPORT, min(self.import_timeout_s, self.timeout_s)
        network: str | None = None
        try:
            worker.send({"path": str(path), "size": size})
            while True:
                message = worker.receive(start + limit)
                if "network" in message:  # (a late one of the file before is not this one's)
                    if message.get("path") == str(path):
                        network = network or str(message["network"])
                elif message.get("phase") == "imported":
                    phase, limit = _TRACE, self.timeout_s
                elif message.get("phase") == "fallback":
                    phase = _cpu_trace(str(message.get("reason", "")))
                else:
                    break
        except _WorkerTimeout:
            raise self._timeout(path, phase, limit, network,
                                limit < self.import_timeout_s) from None
        except _WorkerGone as e:
            raise ProblemError(path, f"{phase.what} {e}",
                               "the file, or a library it calls, ends its Python process"
                               ) from None
        if "features" in message:
            return StaticFeatures.from_dict(message["features"])
        cause = str(message.get("cause") or "failed, for no stated reason")
        if network is not None:
            cause += f" (it tried to reach {network})"
        raise ProblemError(path, cause, str(message.get("hint") or ""))

    def _timeout(self, path: Path, phase: _Phase, limit: float, network: str | None,
                 by_total: bool = False) -> ProblemTimeoutError:
        """``by_total``: the import was stopped by the file's whole limit (``--timeout``,
        below ``--import-timeout``), whose setting the hint then names."""
        total_setting, import_setting = self.settings
        cause = f"{phase.slow} took longer than {limit:g} s"
        if phase is _IMPORT:
            hint, setting = (_HINT, total_setting) if by_total else (_IMPORT_HINT,
                                                                     import_setting)
            if network is not None:
                cause += f": a network-bound import, trying to reach {network}"
                hint = _NETWORK_HINT
        else:
            hint, setting = _HINT, total_setting
            if network is not None:
                cause += f", having tried to reach {network}"
        if setting:
            hint += f", or allow more time: {setting}"
        return ProblemTimeoutError(path, cause, hint, phase=phase.name, limit_s=limit,
                                   network=network)

    def _ready_worker(self) -> _Worker:
        if self._worker is None or not self._worker.alive():
            if self._worker is not None:
                self._worker.kill()
            self._worker = None
            worker = _Worker()
            try:
                worker.wait_ready(self.startup_timeout_s)
            except BaseException:
                worker.kill()
                raise
            self._worker = worker
        return self._worker

    def __getstate__(self) -> dict:
        """A copy (pickled, deep-copied) keeps the settings, not the process: it starts its
        own worker when it is first asked."""
        return {**self.__dict__, "_worker": None}

    def close(self) -> None:
        """Ends the worker, if one runs (a later call starts a fresh one)."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def __enter__(self) -> IsolatedFeatures:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        elif self._worker is not None:  # Ctrl-C, say: no waiting for a busy worker to finish
            self._worker.kill()
            self._worker = None

    def __del__(self) -> None:
        try:
            if self._worker is not None:
                self._worker.kill()
        except Exception:
            pass


# -- the worker's side ----------------------------------------------------------------------

def _failure(e: BaseException, phase: _Phase) -> dict:
    if isinstance(e, ProblemError):
        return {"cause": e.cause, "hint": e.hint}
    if isinstance(e, SystemExit):
        return {"cause": f"{phase.what} called sys.exit({e.code!r})"}
    return {"cause": f"{phase.what} failed: {type(e).__name__}: {e}"}


_NETWORK_EVENTS = frozenset({"socket.connect", "socket.getaddrinfo"})


def _warm_up(import_problem, module_features) -> None:
    """One trace of the suite's own ReLU before the worker says it is ready: a process's
    first trace imports what tracing needs (2.9 s against 0.01 s for the next file, more on a
    loaded machine), which is start-up, not the first file's time. Best effort: a failure
    here is left for the files to meet."""
    from autoprofiler_env.problems import load_problem

    try:
        path = load_problem("relu_16384x16384").path
        module = import_problem(path, "full")
        try:
            module_features(path, module, lambda reason: None)
        finally:
            sys.modules.pop(module.__name__, None)
    except Exception:  # noqa: BLE001 -- the files' own errors say what is wrong
        pass


def _worker_main() -> None:
    """The worker: ``python -c _ENTRY REQUEST_FD REPLY_FD PARENT_PID``. Reads one JSON request
    a line (``{"path", "size"}``), answers ``{"phase": "imported"}`` once the file imported,
    ``{"phase": "fallback", "reason"}`` if its trace moves to the CPU, then ``{"features":
    {...}}`` or ``{"cause", "hint"}``; in between, ``{"network": "host:port", "path"}`` the
    first time the file reaches for the network. Ends when its requests end."""
    request_fd, reply_fd, parent_pid = (int(a) for a in sys.argv[1:4])
    die_with_parent(parent_pid)
    os.dup2(2, 1)  # a problem's prints must never reach the caller's stdout
    lock = threading.Lock()  # the network note comes from whichever thread connects
    watching = {"on": False, "seen": False, "path": ""}

    def reply(message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        with lock:
            while data:
                data = data[os.write(reply_fd, data):]

    def watch_network(event: str, args: tuple) -> None:
        if event not in _NETWORK_EVENTS or not watching["on"] or watching["seen"]:
            return
        try:
            if event == "socket.connect":
                address = args[1]
                if not (isinstance(address, tuple) and len(address) >= 2):
                    return  # a Unix socket: not the network
                host, port = address[0], address[1]
            else:
                host, port = args[0], args[1]
            host = host.decode() if isinstance(host, bytes) else host
            watching["seen"] = True
            reply({"network": f"{host}:{port}", "path": watching["path"]})
        except Exception:  # an audit hook must never fail the file's own call
            pass

    sys.addaudithook(watch_network)

    import torch  # noqa: F401  (paid once, at start-up, not by the first file)

    from autoprofiler_env.features import module_features
    from autoprofiler_env.problems.problem import import_problem

    _warm_up(import_problem, module_features)
    reply({"ready": True, "pid": os.getpid()})
    with os.fdopen(request_fd, "rb") as requests:
        for line in requests:
            request = json.loads(line)
            path = Path(request["path"])
            watching.update(on=True, seen=False, path=request["path"])
            try:
                module = import_problem(path, request["size"])
            except BaseException as e:  # the file's own code: anything, sys.exit included
                watching["on"] = False
                reply(_failure(e, _IMPORT))
                continue
            reply({"phase": "imported"})
            try:
                features = module_features(
                    path, module, lambda reason: reply({"phase": "fallback", "reason": reason}))
            except BaseException as e:
                watching["on"] = False
                reply(_failure(e, _TRACE))
                continue
            finally:
                sys.modules.pop(module.__name__, None)
            watching["on"] = False
            reply({"features": features.to_dict()})
