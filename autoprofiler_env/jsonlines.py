"""JSON-lines files, the format of every resumable log in this project: one record a line,
appended and flushed as work finishes, so an interrupted run loses at most the line it was
writing."""

from __future__ import annotations

import json
import re
from pathlib import Path


def read_jsonl(path: Path) -> list[dict]:
    """The complete records of a JSON-lines file; a line cut off by a kill is dropped (and
    any other line that is not a record: :func:`read_jsonl_checked` counts those)."""
    return read_jsonl_checked(path)[0]


def read_jsonl_checked(path: Path) -> tuple[list[dict], list[int]]:
    """:func:`read_jsonl`'s records (JSON objects), and the numbers (from 1) of the other lines
    it drops that are not a record cut off by a kill: lines that are not JSON, or JSON but not
    an object. A torn record (an object's beginning, wherever it lies: an appender that resumes
    after it ends its line) and a blank line are dropped without being counted."""
    rows, unreadable = [], []
    if Path(path).exists():
        for number, line in enumerate(Path(path).read_text().splitlines(), 1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                if line.strip() and not _torn(line, e):
                    unreadable.append(number)
                continue
            if type(row) is dict:
                rows.append(row)
            else:
                unreadable.append(number)
    return rows, unreadable


_TOKEN_PREFIX = re.compile(r"-?[0-9.eE+-]*|\\?u[0-9a-fA-F]{0,4}")
_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")


def _torn(line: str, error: json.JSONDecodeError) -> bool:
    """Whether an undecodable line is the beginning of a JSON object cut off: it fails only
    where its text ends (in a string, or in a last number, literal or escape)."""
    if not line.lstrip().startswith("{"):
        return False
    if error.msg.startswith("Unterminated string"):
        return True
    rest = line[error.pos:].strip()
    return (not rest or any(word.startswith(rest) for word in _LITERALS)
            or _TOKEN_PREFIX.fullmatch(rest) is not None)


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
