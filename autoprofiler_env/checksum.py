"""A file's sha256: the one reader of a file's checksum (a KernelBench problem's provenance, a
reference row's ``problem_sha256``, the files an experiment's or a benchmark's policies were
read from)."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: str | Path) -> str:
    """The sha256 of the file's bytes, in hexadecimal.

    Raises:
        OSError: the file cannot be read.
    """
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
