"""Reading an offline wandb run back, without a server: what a test or a script on the
training machine needs to check what a run logged.

>>> run = read_offline_run(next(Path("wandb").glob("offline-run-*")))
>>> [row["eval/geomean_speedup"] for row in run.history if "eval/geomean_speedup" in row]

wandb keeps everything a run logs in one file, ``run-<id>.wandb``, and since its Python
reader left the SDK (it had been ``wandb.sdk.internal.datastore``; wandb-core, in Go, writes
and syncs the file now) it offers no public call that reads it offline. The format is stable
and documented in wandb's source: a 7-byte header (``:W&B``, magic ``0xBEE1``, version 0),
then LevelDB's log format (32 KiB blocks; each record a CRC-32, a length, a type FULL / FIRST
/ MIDDLE / LAST and the data; a block's last bytes padded with zeros), each assembled record
one ``wandb.proto.wandb_internal_pb2.Record`` protobuf, which wandb ships. So this module
reads the framing (about thirty lines) and leaves the content to wandb's own protobuf
classes: a history row is a ``Record`` whose ``history`` holds items of a key (or a nested
key) and a JSON value. A file of another version, or a torn record, is a clear error.
"""

from __future__ import annotations

import json
import struct
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

_HEADER = struct.Struct("<4sHB")    # ident, magic, version
_RECORD = struct.Struct("<IHB")     # crc32, length, type
_BLOCK = 32768
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


@dataclass
class OfflineRun:
    """What an offline run logged: its history rows (each a dict with ``_step``), its config,
    its summary, its project, name, group and job type, the step metric of each metric it
    defined (``metrics``: a name or glob to its ``step_metric``, "" for none), the names of
    the artifacts it logged, and whether its exit record is there (``finished``: wandb wrote
    the whole run) with the exit code it gives (``exit_code``: 0 a run finished, else
    failed; None before the record)."""

    path: Path
    run_id: str = ""
    project: str = ""
    name: str = ""
    group: str = ""
    job_type: str = ""
    config: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    artifacts: list[str] = field(default_factory=list)
    finished: bool = False
    exit_code: int | None = None

    def curve(self, key: str) -> list[tuple[int, float]]:
        """``(step, value)`` of every history row that holds ``key``."""
        return [(row["_step"], row[key]) for row in self.history if key in row]


def read_offline_run(run_dir: str | Path, wait_s: float = 0.0) -> OfflineRun:
    """The run in an offline run directory (``wandb/offline-run-...``) or its ``.wandb``
    file. ``wait_s``: how long to wait for the run's exit record, re-reading the file (wandb
    writes it from its own service process, which can still be flushing the file after
    ``run.finish()`` has returned); the run as far as written after that."""
    path = Path(run_dir)
    files = [path] if path.is_file() else sorted(path.glob("*.wandb"))
    if len(files) != 1:
        raise FileNotFoundError(f"{path}: expected one run-<id>.wandb file, found "
                                f"{len(files)}")
    deadline = time.monotonic() + wait_s
    while True:
        late = time.monotonic() >= deadline  # read before the file: its last read is whole
        try:
            run = _read(files[0])
        except _Unwritten:  # wandb < 0.22.1 may not have written its header yet
            if late:
                raise
            run = None
        if run is not None and (run.finished or late):
            return run
        time.sleep(0.2)


class _Unwritten(ValueError):
    """A log file shorter than its header: not written yet, or not a wandb log."""


def _read(path: Path) -> OfflineRun:
    from wandb.proto import wandb_internal_pb2

    run = OfflineRun(path)
    for data in _records(path):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(data)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run.run_id, run.group = record.run.run_id, record.run.run_group
            run.project, run.name = record.run.project, record.run.display_name
            run.job_type = record.run.job_type
            run.config.update(_items(record.run.config.update, config=True))
        elif kind == "config":
            run.config.update(_items(record.config.update, config=True))
        elif kind == "history":
            run.history.append(_items(record.history.item))
        elif kind == "metric":
            metric = record.metric
            run.metrics[metric.name or metric.glob_name] = metric.step_metric
        elif kind == "summary":
            run.summary.update(_items(record.summary.update))
        elif kind == "artifact":
            run.artifacts.append(record.artifact.name)
        elif kind == "exit":
            run.finished, run.exit_code = True, record.exit.exit_code
    return run


def _items(items, config: bool = False) -> dict:
    """A record's (nested) keys and JSON values as a dict; a config's values are wandb's
    ``{"value": ...}`` wrappers, unwrapped."""
    out = {}
    for item in items:
        key = item.key or "/".join(item.nested_key)
        value = json.loads(item.value_json)
        if config and isinstance(value, dict) and "value" in value \
                and set(value) <= {"value", "desc"}:
            value = value["value"]
        out[key] = value
    return out


def _records(path: Path):
    """The data of each record of a wandb log file, in order."""
    data = path.read_bytes()
    if len(data) < _HEADER.size:
        raise _Unwritten(f"{path}: too short for a wandb log ({len(data)} bytes)")
    ident, magic, version = _HEADER.unpack_from(data)
    if ident != b":W&B" or magic != 0xBEE1 or version != 0:
        raise ValueError(f"{path}: not a wandb log of the version this reader knows "
                         f"(header {ident!r}, magic {magic:#x}, version {version})")
    position, pending = _HEADER.size, b""
    while position + _RECORD.size <= len(data):
        left = _BLOCK - position % _BLOCK
        if left < _RECORD.size:  # a block's trailer: zeros
            position += left
            continue
        crc, length, kind = _RECORD.unpack_from(data, position)
        if crc == 0 and length == 0 and kind == 0:  # the rest of a block never written
            position += left
            continue
        start = position + _RECORD.size
        chunk = data[start:start + length]
        if len(chunk) < length:  # a record torn by a kill: the run stopped here
            break
        if zlib.crc32(chunk, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != crc:
            raise ValueError(f"{path}: a record at byte {position} fails its checksum")
        position = start + length
        if kind == _FULL:
            yield chunk
        elif kind == _FIRST:
            pending = chunk
        elif kind == _MIDDLE:
            pending += chunk
        elif kind == _LAST:
            yield pending + chunk
            pending = b""
