"""JSON-lines files, the format of every resumable log in this project: one record a line,
appended and flushed as work finishes, so an interrupted run loses at most the line it was
writing."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path


def read_jsonl(path: Path) -> list[dict]:
    """The complete records of a JSON-lines file; a line cut off by a kill is dropped (and
    any other line that is not a record: :func:`read_jsonl_checked` counts those, and
    :func:`scan_jsonl` tells torn lines inside the file apart)."""
    return scan_jsonl(path).rows


def read_jsonl_checked(path: Path) -> tuple[list[dict], list[int]]:
    """:func:`read_jsonl`'s records (JSON objects), and the numbers (from 1) of the other lines
    it drops that are not a record cut off by a kill: lines that are not JSON, or JSON but not
    an object. A torn record (an object's beginning, at the file's end or ended by an
    appender that resumed after it) and a blank line are dropped without being counted; so is
    a torn record inside the file, which no kill leaves: :func:`scan_jsonl` gives those
    (``torn``), for a caller to warn about or refuse."""
    scan = scan_jsonl(path)
    return scan.rows, scan.unreadable


@dataclass
class JsonlScan:
    """What :func:`scan_jsonl` found in a JSON-lines file: its records, and the numbers
    (from 1) of the lines dropped that no kill explains: ``unreadable`` (not JSON, or JSON
    but not an object) and ``torn`` (an object's beginning inside the file: neither its last
    line nor one that an appender ended when it resumed, so the file was damaged there, or
    written by something else)."""

    rows: list[dict] = field(default_factory=list)
    unreadable: list[int] = field(default_factory=list)
    torn: list[int] = field(default_factory=list)

    @property
    def damaged(self) -> list[int]:
        """The lines dropped that no kill explains, in order."""
        return sorted(self.unreadable + self.torn)


def scan_jsonl(path: Path) -> JsonlScan:
    """Reads a JSON-lines file (:class:`JsonlScan`; a missing file holds nothing). What a kill
    leaves, a torn last line, and what an appender leaves after it (that line ended with
    :data:`RESUMED`), are dropped without being counted, as blank lines are."""
    scan = JsonlScan()
    if not Path(path).exists():
        return scan
    lines = Path(path).read_text().splitlines()
    last = max((n for n, line in enumerate(lines, 1) if line.strip()), default=0)
    for number, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
        except RecursionError:  # nested deeper than Python parses: no record of ours
            scan.unreadable.append(number)
            continue
        except json.JSONDecodeError as e:
            if not line.strip():
                continue
            if line.endswith(RESUMED) and _torn(line[:-len(RESUMED)]):
                continue  # a kill's, ended by the appender that resumed after it
            if not _torn(line, e):
                scan.unreadable.append(number)
            elif number != last:
                scan.torn.append(number)
            continue
        if type(row) is dict:
            scan.rows.append(row)
        else:
            scan.unreadable.append(number)
    return scan


RESUMED = " <cut off by an interrupted write>"
"""What :class:`JsonlAppender` appends to a torn last line before it ends it: the mark that a
torn line inside the file is a kill's (read without a word), not damage (:func:`scan_jsonl`).
A record's line never ends with it (it ends with ``}``)."""

_TOKEN_PREFIX = re.compile(r"-?[0-9.eE+-]*|\\?u[0-9a-fA-F]{0,4}")
_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")


def _torn(line: str, error: json.JSONDecodeError | None = None) -> bool:
    """Whether an undecodable line is the beginning of a JSON object cut off: it fails only
    where its text ends (in a string, or in a last number, literal or escape)."""
    if not line.lstrip().startswith("{"):
        return False
    if error is None:
        try:
            json.loads(line)
            return False
        except RecursionError:
            return False
        except json.JSONDecodeError as e:
            error = e
    if error.msg.startswith("Unterminated string"):
        return True
    rest = line[error.pos:].strip()
    return (not rest or any(word.startswith(rest) for word in _LITERALS)
            or _TOKEN_PREFIX.fullmatch(rest) is not None)


class JsonlAppender:
    """Appends records to a JSON-lines file, one flushed line each.

    If the file ends in a line cut off by a kill, that line is first ended, marked as a
    kill's (:data:`RESUMED`), so the torn record stays alone on its line (and is dropped by
    :func:`read_jsonl` without a word) instead of swallowing the next one. A last line that
    is a whole record without its newline is just ended; any other is ended as it is (and
    counted by :func:`read_jsonl_checked`).

    >>> with JsonlAppender(path) as log:
    ...     log.write({"uri": "...", "median_ms": 1.2})
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        ending = None
        if self.path.exists() and self.path.stat().st_size > 0:
            data = self.path.read_bytes()
            if not data.endswith(b"\n"):
                last = data.rsplit(b"\n", 1)[-1].decode(errors="replace")
                ending = (RESUMED + "\n") if _torn(last) else "\n"
        self._file = self.path.open("a")
        if ending is not None:
            self._file.write(ending)

    def write(self, record: dict) -> None:
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
