"""Atomic file writes: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import errno
import os
from pathlib import Path


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
