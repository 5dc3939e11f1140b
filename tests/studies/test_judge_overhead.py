"""The judge-overhead study's analysis reproduces its committed summary from its committed
rows (docs/data/judge_overhead_h200: measured on the H200)."""

import json
import shutil
from pathlib import Path

from experiments.studies import judge_overhead

DATA = Path(__file__).parents[2] / "docs" / "data" / "judge_overhead_h200"


def test_the_analysis_reproduces_the_committed_summary(tmp_path):
    shutil.copy(DATA / "rows.jsonl", tmp_path / "rows.jsonl")
    judge_overhead.analyze(tmp_path)
    assert json.loads((tmp_path / "summary.json").read_text()) == json.loads(
        (DATA / "summary.json").read_text())
