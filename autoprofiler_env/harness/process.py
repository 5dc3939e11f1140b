"""A worker process as the judge sees it: started, asked, timed out, killed.

Workers are plain subprocesses (running :func:`autoprofiler_env.harness.worker.main`), not
``multiprocessing`` children: a script without an ``if __name__ == "__main__":`` guard can use
the harness, and the judge controls exactly what a candidate's process inherits (its
environment, its folder, the one socket it talks over). Each runs in a session of its own and
dies with the judge (``PR_SET_PDEATHSIG``); :meth:`WorkerProcess.kill` kills its whole process
group.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

from autoprofiler_env.errors import MachineError
from autoprofiler_env.harness import wire
from autoprofiler_env.harness.sandbox import scrubbed_environment
from autoprofiler_env.processes import POSIX, STARTUP_TIMEOUT_S, kill_group


_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_ENTRY = "from autoprofiler_env.harness.worker import main; main()"
"""Run by import (not ``-m``), so the worker's module has its own name in ``sys.modules``."""


class WorkerTimeout(Exception):
    """No reply within the time limit (the worker has been killed)."""


class WorkerDied(Exception):
    """The worker's process ended (its exit code or signal is in the message)."""


def default_cache_dir() -> Path:
    """The compile caches (Inductor, Triton) that every candidate's process shares: like
    Inductor's own default, one folder per user in the temporary folder."""
    return Path(tempfile.gettempdir()) / f"autoprofiler-compile-cache-{os.getuid()}"


HOME_LOCK = ".judge.lock"
"""A file in each worker's folder on which the judge that made the folder holds an exclusive
``flock`` while the folder is in use: the kernel lets go of it when that judge dies, however
it dies, so a folder whose lock can be taken is a dead judge's (pids would not tell: another
container sharing the temporary folder has its own)."""

STALE_UNLOCKED_S = 3600.0
"""How old a worker's folder without a lock file must be to be taken as stale (one made by a
judge before locks were, or one whose candidate removed the file); a younger one may be one
being made right now."""


def new_home(role: str) -> tuple[Path, int]:
    """A new folder for a ``role`` worker in the temporary folder, and the descriptor of its
    :data:`HOME_LOCK`, locked (close it after removing the folder)."""
    import fcntl  # POSIX: a worker is made only there (WorkerProcess)

    home = Path(tempfile.mkdtemp(prefix=f"autoprofiler-{role}-"))
    # locked under another name, then named: another process sweeping stale folders
    # (remove_stale_homes) sees no lock file (a young folder: kept) or a held one, never
    # one not locked yet (it took that one's lock and removed the new folder)
    making = home / (HOME_LOCK + ".new")
    fd = os.open(making, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: no one else holds it
    os.rename(making, home / HOME_LOCK)
    return home, fd


def remove_stale_homes(role: str) -> list[Path]:
    """Removes this user's folders of ``role``'s workers whose judge is gone (killed before it
    could remove them: SIGKILL, an out-of-memory kill), as their :data:`HOME_LOCK` says;
    returns them. A live judge's folders are kept, another user's are not touched."""
    import fcntl  # POSIX: a worker is made only there (WorkerProcess)

    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"autoprofiler-{role}-*"):
        try:
            info = path.lstat()
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
                continue
            fd = os.open(path / HOME_LOCK, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            if path.exists() and time.time() - info.st_mtime > STALE_UNLOCKED_S:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
            continue
        except OSError:  # gone meanwhile, not readable
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its judge is alive
            continue
        else:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        finally:
            os.close(fd)
    return removed


_swept: set[str] = set()
"""The roles whose stale folders this process has removed (once each)."""


class WorkerProcess:
    """One worker process and its socket.

    Args:
        role: ``"reference"`` or ``"candidate"``.
        sandbox: isolate it (only a candidate's: :mod:`.sandbox`).
        cache_dir: the shared compile caches (a candidate's process may write there).
        cpu_seconds, address_space: resource limits for a sandboxed process.
    """

    def __init__(self, role: str, sandbox: bool = False, cache_dir: Path | None = None,
                 cpu_seconds: float | None = None, address_space: int | None = None) -> None:
        if not POSIX:  # macOS: without the sandbox's isolation (sandbox.isolate)
            raise MachineError(
                f"the judge's {role} worker needs a POSIX system (Linux, or macOS), not "
                f"{sys.platform}: it is started in a session of its own and killed by process "
                "group. On Windows, judge in WSL; the replay of the shipped datasets "
                "(autoprofiler benchmark, train, experiment, learn-tree) needs no judge")
        self.role = role
        self.sandboxed = sandbox
        if role not in _swept:
            _swept.add(role)
            remove_stale_homes(role)
        self.home, self._home_lock = new_home(role)
        cache_dir = Path(cache_dir or default_cache_dir())
        cache_dir.mkdir(parents=True, exist_ok=True)
        parent_sock, child_sock = socket.socketpair()
        command = [sys.executable, "-c", _ENTRY, "--role", role,
                   "--fd", str(child_sock.fileno()), "--parent", str(os.getpid())]
        if sandbox:
            env = scrubbed_environment(os.environ, str(self.home), str(cache_dir))
            command += ["--sandbox", "--writable", str(self.home), "--writable", str(cache_dir)]
            if cpu_seconds:
                command += ["--cpu-seconds", str(int(cpu_seconds))]
            if address_space:
                command += ["--address-space", str(int(address_space))]
        else:
            env = dict(os.environ)
        # a candidate's worker writes its source there: never into the caller's folder
        cwd = str(self.home) if role == "candidate" else None
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH"))
                                            if p)
        try:
            self.popen = subprocess.Popen(command, pass_fds=(child_sock.fileno(),), env=env,
                                          cwd=cwd, stdin=subprocess.DEVNULL, stdout=2,
                                          start_new_session=True)
        finally:
            child_sock.close()
        self.conn = Connection(parent_sock.detach())
        self.hello: dict | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def wait_ready(self, timeout_s: float = STARTUP_TIMEOUT_S) -> dict:
        """The worker's first message (its pid, torch version and isolation report).

        Raises:
            WorkerTimeout, WorkerDied: it did not start.
        """
        if self.hello is None:
            header, _ = self.receive(timeout_s, max_bytes=0)
            self.hello = header
        return self.hello

    def send(self, message: dict) -> None:
        try:
            wire.send_json(self.conn, message)
        except (BrokenPipeError, ConnectionError, OSError) as e:
            raise self._died() from e

    def receive(self, timeout_s: float, max_bytes: int, device: str | None = None
                ) -> tuple[dict, list]:
        """One reply within ``timeout_s``, its tensors on ``device`` (default: the host).

        Raises:
            WorkerTimeout: none came (the worker is killed).
            WorkerDied: the worker is gone.
            wire.WireError: the reply is malformed.
        """
        deadline = time.monotonic() + max(timeout_s, 0.0)
        try:
            ready = self.conn.poll(max(timeout_s, 0.0))
        except (OSError, EOFError):
            ready = True
        if not ready:
            self.kill()
            raise WorkerTimeout(f"no answer within {timeout_s:g} s: the worker was killed")
        try:
            return wire.recv(self.conn, max_bytes, device, deadline)
        except TimeoutError as e:  # part of a reply, then nothing (an OSError: caught first)
            self.kill()
            raise WorkerTimeout(f"no whole answer within {timeout_s:g} s ({e}): the worker "
                                "was killed") from e
        except (EOFError, ConnectionError, OSError) as e:
            raise self._died() from e

    def request(self, message: dict, timeout_s: float, max_bytes: int = 1 << 20,
                device: str | None = None) -> tuple[dict, list]:
        self.send(message)
        return self.receive(timeout_s, max_bytes, device)

    def _died(self) -> WorkerDied:
        try:
            code = self.popen.wait(10)
        except subprocess.TimeoutExpired:
            code = None
        self.kill()
        if code is not None and code < 0:
            return WorkerDied(f"the worker process died, exit code {code} (signal {-code})")
        return WorkerDied(f"the worker process died, exit code {code}")

    def close(self, timeout_s: float = 5.0) -> None:
        """Asks it to exit, then kills what is left."""
        if self.alive():
            try:
                wire.send_json(self.conn, {"op": "exit"})
                self.popen.wait(timeout_s)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def kill(self) -> None:
        """Kills its process group now (safe from another thread, and twice)."""
        kill_group(self.popen)
        try:
            self.conn.close()
        except OSError:
            pass
        shutil.rmtree(self.home, ignore_errors=True)
        held, self._home_lock = self._home_lock, None  # the folder is gone: let go of it
        if held is not None:
            os.close(held)

    def __del__(self) -> None:
        try:
            kill_group(self.popen, wait_s=0)
        except Exception:
            pass
