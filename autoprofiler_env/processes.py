"""Child processes that never outlive what started them: the two calls every worker of the
package (the judge's, the isolated problem import's) makes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

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
