"""What was measured on the H200 (docs/data/recording_h200/reference.jsonl, made by
experiments/device/verify_suite.sh): the suite's sizes meet the brief on the real GPU."""

import json
from pathlib import Path

from autoprofiler_env.problems import load_suite

RECORD = Path(__file__).parents[1] / "docs" / "data" / "recording_h200" / "reference.jsonl"


def _rows():
    return {row["uri"]: row for row in map(json.loads, RECORD.read_text().splitlines())}


def test_every_suite_problem_was_timed_on_an_h200():
    rows = _rows()
    missing = [p.uri for p in load_suite() if p.uri not in rows]
    assert not missing, f"not timed on the GPU yet: {missing}"
    assert all(r["gpu"] == "NVIDIA H200" and r["error"] is None for r in rows.values())


def test_eager_times_lie_between_0_02_and_30_ms():
    for uri, row in _rows().items():
        assert 0.02 <= row["median_ms"] <= 30.0, (uri, row["median_ms"])
        assert row["p20_ms"] <= row["median_ms"] <= row["p80_ms"]


def test_peak_device_memory_stays_under_8_gb():
    for uri, row in _rows().items():
        assert 0 < row["peak_memory_mb"] < 8 * 1024, (uri, row["peak_memory_mb"])
