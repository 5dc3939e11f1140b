"""Resumable JSON-lines logs: a torn line is dropped, finished work is not redone. Atomic
writes: the old file or the new one, with ordinary permissions."""

import json
import os

from autoprofiler_env.atomic import write_atomic
from autoprofiler_env.dataset.record import record_reference
from autoprofiler_env.harness import HarnessConfig
from autoprofiler_env.jsonlines import read_jsonl
from autoprofiler_env.problems import load_file
from tests.conftest import DATA


def test_a_torn_last_line_is_dropped(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"a": 1}) + "\n" + '{"a": 2, "b"')
    assert read_jsonl(log) == [{"a": 1}]
    assert read_jsonl(tmp_path / "missing.jsonl") == []


def test_reference_timing_resumes_where_it_stopped(tmp_path):
    relu = load_file(DATA / "problems" / "relu_small.py")
    log = tmp_path / "reference.jsonl"
    done = {"uri": relu.uri, "median_ms": 123.0, "error": None}
    log.write_text(json.dumps(done) + "\n" + '{"uri": "torn')
    config = HarnessConfig(device="cpu", timing_budget_ms=1, min_trials=1,
                           max_trials=1, warmup_ms=0)
    broken = load_file(DATA / "problems" / "degenerate_mean.py")
    rows = record_reference([relu, broken], config, log)
    assert [r["uri"] for r in rows] == [relu.uri, broken.uri]
    assert rows[0]["median_ms"] == 123.0  # not timed again
    assert "matched by zeros" in rows[1]["error"]  # a broken problem is logged, not fatal


def test_an_atomic_write_replaces_the_file_with_the_umasks_permissions(tmp_path):
    target = tmp_path / "sub" / "data.json"
    old = os.umask(0o022)
    try:
        write_atomic(target, b"old")
        write_atomic(target, b"new")
    finally:
        os.umask(old)
    assert target.read_bytes() == b"new"
    assert target.stat().st_mode & 0o777 == 0o644  # not a temporary file's private 0o600
    assert [p.name for p in target.parent.iterdir()] == ["data.json"]  # no temporary left


def test_two_writers_of_one_path_in_one_process_never_mix_their_files(tmp_path):
    """Reviewed: the temporary file was named by the process id, so two writers of one id
    (threads here; processes of other PID namespaces on a shared volume) wrote into one
    temporary file: a file of one's head and the other's tail, the loser's rename a
    FileNotFoundError."""
    import threading

    target = tmp_path / "data.bin"
    payloads = [bytes([65 + i]) * (1 << 20) for i in range(2)]
    errors, seen = [], set()

    def write(data):
        try:
            for _ in range(40):
                write_atomic(target, data)
                seen.add(target.read_bytes()[::4096])
        except Exception as e:  # noqa: BLE001 (collected for the assertion)
            errors.append(e)

    threads = [threading.Thread(target=write, args=(data,)) for data in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert seen <= {data[::4096] for data in payloads}  # each read one whole file
    assert target.read_bytes() in payloads
    assert [p.name for p in tmp_path.iterdir()] == ["data.bin"]
