"""Child processes that never outlive what started them: the two calls every worker of the
package (the judge's, the isolated problem import's) makes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

POSIX = os.name == "posix"
"""Whether this system can run the project's worker processes (the judge's, the problem
import worker's): they are handed descriptors (``pass_fds``), waited on with ``select`` on
pipes and sockets, started in sessions of their own and killed by process group (ncu too,
for the profiler). Linux and macOS; not Windows, whose users run the replay, which starts
none."""

STARTUP_TIMEOUT_S = 180.0
"""Seconds a fresh worker process (the judge's, a problem file's import) may take to start:
importing torch and initialising CUDA take several on a loaded machine."""

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """In a child: SIGKILL it when its parent dies (Linux ``PR_SET_PDEATHSIG``), and exit now if
    the parent is already gone (it may have died between the fork and the ``prctl``)."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:
        os._exit(1)


def exit_with(pid: int) -> None:
    """Exits this process (``os._exit``) as soon as process ``pid`` ends, watched from a
    daemon thread: for a process that is not ``pid``'s child, such as the program ncu
    profiles for the profiler (ncu is the child, in a session of its own, and its target
    would go on profiling under a recorder killed with SIGKILL and started again). A pidfd
    (Linux 5.3) cannot be fooled by the pid's reuse; elsewhere the pid is polled each second.
    Exits at once where ``pid`` is gone already."""
    import threading

    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(1)
    except (AttributeError, OSError):  # no pidfd: polled
        handle = None

    def watch() -> None:
        if handle is not None:
            import select

            select.select([handle], [], [])  # readable once the process has ended
        else:
            while True:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                except PermissionError:  # alive, another user's: not ours to watch
                    pass
                threading.Event().wait(1.0)
        os._exit(1)

    threading.Thread(target=watch, name=f"exit-with-{pid}", daemon=True).start()


def kill_group(popen: subprocess.Popen, wait_s: float = 10.0) -> None:
    """Kills a child started with ``start_new_session=True`` and everything in its process
    group, then reaps it; safe to call twice and from another thread."""
    if popen.poll() is None:
        try:
            os.killpg(popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        popen.wait(wait_s)
    except subprocess.TimeoutExpired:
        pass
