"""Atomic file writes: a reader sees the old file or the new one, never half of one; and one
writer per output folder (:func:`one_writer`)."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = ".lock"
"""The file in an output folder that its writer holds locked (:func:`one_writer`)."""
_HELD: dict[str, int] = {}  # the folders this process holds, by real path: how many times
_HELD_LOCK = threading.Lock()


def write_atomic(path: Path, data: bytes) -> None:
    """Writes ``data`` to a temporary file beside ``path``, flushed to disk, then renames it
    over ``path``. The file gets the usual permissions (the umask's), not a temporary file's
    private ones."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():  # said of the path asked for, not of the temporary file renamed over it
        raise IsADirectoryError(errno.EISDIR, "a folder, not a file", str(path))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as f:
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
    """Holds ``folder`` for this process while the body runs (``folder`` is made where
    missing): another process asking for it, such as a second run given the same ``--out``,
    is refused at once with :class:`~autoprofiler_env.errors.FolderBusyError` naming the
    holder's process id and ``command``. The lock is an ``flock`` on ``folder/.lock``: the
    system lets go of it when its process ends, however it ends (a SIGKILL, the OOM killer),
    so a killed run leaves no stale lock, and the next run knows that the run whose files it
    finds is dead. The same process may hold a folder again inside (a command's function
    inside the command). A folder this call made that holds nothing but the lock when the
    body ends (a run refused before it wrote anything) is removed. Where the system has no
    ``flock`` (Windows), nothing is locked."""
    from autoprofiler_env.errors import FolderBusyError

    folder = Path(folder)
    key = os.path.realpath(folder)
    with _HELD_LOCK:
        if key in _HELD:
            _HELD[key] += 1
            held = True
        else:
            held = False
    if held:
        try:
            yield folder
        finally:
            with _HELD_LOCK:
                _HELD[key] -= 1
        return
    try:
        import fcntl
    except ImportError:  # no flock here: the folder is not locked
        fcntl = None
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 400, 0).decode(errors="replace").strip()
                raise FolderBusyError(
                    f"{folder} is being written by another process ("
                    f"{holder or 'it says nothing of itself'}): wait for it to end, or give "
                    "another --out") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"process {os.getpid()}: {command}\n".encode(), 0)
        with _HELD_LOCK:
            _HELD[key] = 1
        try:
            yield folder
        finally:
            with _HELD_LOCK:
                del _HELD[key]
            if made and [p.name for p in folder.iterdir()] == [LOCK_FILE]:
                path.unlink(missing_ok=True)  # refused before it wrote anything: no trace
                folder.rmdir()
    finally:
        os.close(fd)  # lets go of the lock
