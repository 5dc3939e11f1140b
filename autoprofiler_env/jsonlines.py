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
