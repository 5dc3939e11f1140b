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


def test_the_fixed_inputs_variant_times_a_program_on_a_cpu(monkeypatch):
    """A review: the ``fixedinputs`` worker's replacement of ``Runner.inputs`` took no
    ``checked``, which the judge's timed batches pass: every timing of the variant raised."""
    import sys

    from autoprofiler_env.harness import worker

    for name in ("time", "load"):
        monkeypatch.setattr(worker.Runner, name, getattr(worker.Runner, name))
    monkeypatch.setattr(worker, "main", lambda *a, **k: None)  # the patches, no socket loop
    monkeypatch.setattr(sys, "addaudithook", sys.addaudithook)
    judge_overhead.worker_main("fixedinputs")
    runner = worker.Runner("reference", None)
    path = Path(__file__).parents[2] / "tests" / "data" / "problems" / "relu_small.py"
    runner.load(str(path), "smoke", "cpu", 0, None)
    reply = runner.time([1, 2, 3], False, [])
    assert reply["times_ms"] and all(t > 0 for t in reply["times_ms"])
