"""Gzip read with a bound on what it may grow to: a few megabytes of gzip can hold many
gigabytes (a "gzip bomb"), and a dataset or a recording is read whole into memory."""

from __future__ import annotations

import gzip
import io

MAX_BYTES = 1 << 30
"""The most a gzipped file of this project may decompress to (1 GiB): the shipped datasets
are 6-18 MB unpacked, a recording's largest ncu export tens of MB."""


class TooLarge(ValueError):
    """Decompressed, the data would exceed its bound."""


def decompress(raw: bytes, limit: int | None = None) -> bytes:
    """``gzip.decompress(raw)`` (every member), or :class:`TooLarge` once the output passes
    ``limit`` bytes (None: :data:`MAX_BYTES`), having held no more than that."""
    limit = MAX_BYTES if limit is None else limit
    chunks, size = [], 0
    with gzip.GzipFile(fileobj=io.BytesIO(raw)) as f:
        while chunk := f.read(min(_CHUNK, limit + 1 - size)):  # a read(n) reserves n bytes
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"it decompresses to more than {limit / 2 ** 20:.0f} MiB (a gzip "
                               "bomb, or not this project's file)")
    return b"".join(chunks)


_CHUNK = 1 << 24
