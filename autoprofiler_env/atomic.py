"""Atomic file writes: a reader sees the old file or the new one, never half of one; and one
writer per output folder (:func:`one_writer`)."""

from __future__ import annotations

import errno
import os
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = ".lock"
"""The file in an output folder that its writer holds locked (:func:`one_writer`)."""
_HELD: dict[str, tuple] = {}  # held folders by real path: (thread, locked, command)
_HELD_LOCK = threading.Lock()


def write_atomic(path: Path, data: bytes) -> None:
    """Writes ``data`` to a temporary file beside ``path``, flushed to disk, then renames it
    over ``path``. The temporary file is made exclusively under a random name, so two writers
    of one path (threads of a process, or processes of the same id in other PID namespaces
    on a shared volume) never write into each other's: the last rename wins, whole. The file
    gets the usual permissions (the umask's), not a temporary file's private ones."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():  # said of the path asked for, not of the temporary file renamed over it
        raise IsADirectoryError(errno.EISDIR, "a folder, not a file", str(path))
    while True:  # O_EXCL: a name no other writer holds; mode 0o666 less the umask
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_png(fig, path: Path, dpi: int = 110) -> Path:
    """A matplotlib figure rendered to PNG bytes, closed, and written atomically
    (:func:`write_atomic`); returns ``path``."""
    import io

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    write_atomic(Path(path), buffer.getvalue())
    return Path(path)


@contextmanager
def one_writer(folder: Path, command: str) -> Iterator[Path]:
    """Holds ``folder`` while the body runs (``folder`` is made where missing): another
    process asking for it, such as a second run given the same ``--out``, is refused at once
    with :class:`~autoprofiler_env.errors.FolderBusyError` naming the holder's process id and
    ``command``; so is another thread of this process. The lock is an ``flock`` on
    ``folder/.lock``: the system lets go of it when its process ends, however it ends (a
    SIGKILL, the OOM killer), so a killed run leaves no stale lock, and the run that finds a
    dead run's files knows it is dead (:func:`holds`). The same thread may hold a folder
    again inside (a command's function inside the command). Folders this call made that hold
    nothing but the lock (or nothing, where none is made) when the body ends (a run refused
    before it wrote anything) are removed. Where the system has no ``flock`` (Windows), or
    the file system refuses it (some network mounts: a warning says so), nothing is locked
    and :func:`holds` is false."""
    from autoprofiler_env.errors import FolderBusyError

    folder = Path(folder)
    key, me = os.path.realpath(folder), threading.get_ident()
    with _HELD_LOCK:
        held = _HELD.get(key)
    if held is not None:  # the outermost hold lets go of it
        if held[0] != me:
            raise FolderBusyError(f"{folder} is being written by another thread of this "
                                  f"process ({held[2]}): wait for it to end, or give another "
                                  "--out")
        yield folder
        return
    made = _missing_ancestors(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fd, locked = _locked(folder, command)
    with _HELD_LOCK:
        _HELD[key] = (me, locked, command)
    try:
        yield folder
    finally:
        with _HELD_LOCK:
            del _HELD[key]
        try:
            if made and {p.name for p in folder.iterdir()} <= {LOCK_FILE}:
                (folder / LOCK_FILE).unlink(missing_ok=True)  # refused before it wrote: no trace
                for made_folder in made:  # the deepest first
                    made_folder.rmdir()
        except OSError:  # written into meanwhile, or removed: left as it is
            pass
        if fd is not None:
            os.close(fd)  # lets go of the lock


def holds(folder: Path) -> bool:
    """Whether this thread holds ``folder`` with a lock (:func:`one_writer`): then a run that
    its files say is running is one whose process was killed."""
    held = _HELD.get(os.path.realpath(folder))
    return held is not None and held[0] == threading.get_ident() and held[1]


def _flock_soon(fcntl, fd: int, tries: int = 5, pause_s: float = 0.02) -> None:
    """``fd`` locked exclusively, tried ``tries`` times ``pause_s`` apart: :func:`writer`
    holds a folder's lock shared for an instant, which must not refuse a writer."""
    for left in range(tries - 1, -1, -1):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if not left:
                raise
            time.sleep(pause_s)


def writer(folder: Path) -> str | None:
    """Who writes ``folder`` now, where another process holds it (:func:`one_writer`): its
    lock file's words (the holder's process id and command); None where none does, where
    this process holds it, or where the system cannot lock. What reads a run's files while
    they may change (a model a training run rewrites at each evaluation) asks first. It
    takes the lock shared for an instant, which a writer starting then waits out
    (:func:`_flock_soon`)."""
    if os.path.realpath(folder) in _HELD:
        return None
    try:
        import fcntl
    except ImportError:  # no flock here (Windows)
        return None
    try:
        fd = os.open(Path(folder) / LOCK_FILE, os.O_RDONLY)
    except OSError:  # never held (or unreadable): nobody to name
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return (os.pread(fd, 400, 0).decode(errors="replace").strip()
                    or "a process that says nothing of itself")
        except OSError:  # a file system without flock
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _missing_ancestors(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist, the deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _locked(folder: Path, command: str) -> tuple[int | None, bool]:
    """The open ``folder/.lock`` held with an exclusive ``flock`` and stamped with this
    process, and whether it is locked (not where the system cannot lock it)."""
    from autoprofiler_env.errors import FolderBusyError, warn

    try:
        import fcntl
    except ImportError:  # no flock here (Windows): not locked
        return None, False
    path = folder / LOCK_FILE
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the folder removed meanwhile by a run refused in it
            folder.mkdir(parents=True, exist_ok=True)
            continue
        try:
            _flock_soon(fcntl, fd)
        except BlockingIOError:
            holder = os.pread(fd, 400, 0).decode(errors="replace").strip()
            os.close(fd)
            raise FolderBusyError(
                f"{folder} is being written by another process ("
                f"{holder or 'it says nothing of itself'}): wait for it to end, or give "
                "another --out") from None
        except OSError as e:  # a file system without flock (ENOLCK, ENOSYS, EOPNOTSUPP)
            os.close(fd)
            warn(f"{folder}: cannot lock it ({e.strerror or e}): two runs given this folder "
                 "at once would not be told apart; give each its own")
            return None, False
        try:  # the file locked is still the folder's (a holder that made the folder may
            same = os.fstat(fd).st_ino == os.stat(path).st_ino  # have removed it meanwhile)
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
        folder.mkdir(parents=True, exist_ok=True)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"process {os.getpid()}: {command}\n".encode(), 0)
    return fd, True
