"""JSON-lines files, the format of every resumable log in this project: one record a line,
appended and flushed as work finishes, so an interrupted run loses at most the line it was
writing."""

from __future__ import annotations

import json
from pathlib import Path


def read_jsonl(path: Path) -> list[dict]:
    """The complete records of a JSON-lines file; a line cut off by a kill is dropped."""
    rows = []
    if Path(path).exists():
        for line in Path(path).read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


class JsonlAppender:
    """Appends records to a JSON-lines file, one flushed line each.

    If the file ends in a line cut off by a kill, a newline first ends that line, so the
    torn record stays alone on its line (and is dropped by :func:`read_jsonl`) instead of
    swallowing the next one.

    >>> with JsonlAppender(path) as log:
    ...     log.write({"uri": "...", "median_ms": 1.2})
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        torn = self.path.exists() and self.path.stat().st_size > 0 and \
            not self.path.read_bytes().endswith(b"\n")
        self._file = self.path.open("a")
        if torn:
            self._file.write("\n")

    def write(self, record: dict) -> None:
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
