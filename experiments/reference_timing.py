"""Times the eager reference of many problems, resumably: one JSON line per problem.

    autoprofiler time-reference --device cuda --out docs/data/reference_h200.jsonl

A problem already in the output file is skipped, so an interrupted run continues where it
stopped; a line cut off by a kill is ignored and that problem is timed again.
"""

from __future__ import annotations

import platform
from pathlib import Path

from tqdm import tqdm

from autoprofiler_env.errors import ProblemError
from autoprofiler_env.harness import Evaluator, HarnessConfig
from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl
from autoprofiler_env.problems import Problem


def machine_info(device: str) -> dict:
    import torch

    info = {"torch": torch.__version__, "python": platform.python_version(), "device": device}
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(device)
        info.update(gpu=props.name, cuda=torch.version.cuda,
                    sm_count=props.multi_processor_count,
                    memory_gb=round(props.total_memory / 2**30, 1))
    return info


def time_references(problems: list[Problem], config: HarnessConfig, out: Path) -> list[dict]:
    """Times each problem not yet in ``out`` and appends its row; returns all rows."""
    done = {row["uri"] for row in read_jsonl(out)}
    todo = [p for p in problems if p.uri not in done]
    info = machine_info(config.device)
    with Evaluator(config) as evaluator, JsonlAppender(out) as log:
        for problem in tqdm(todo, desc="reference timing", unit="problem"):
            row = {"uri": problem.uri, "level": problem.level, **info}
            try:
                run = evaluator.reference(problem)
                row.update(median_ms=run.timing.median_ms, p20_ms=run.timing.p20_ms,
                           p80_ms=run.timing.p80_ms, n_trials=run.timing.n_trials,
                           peak_memory_mb=(run.peak_memory_bytes / 2**20
                                           if run.peak_memory_bytes is not None else None),
                           error=None)
            except ProblemError as e:
                row.update(error=str(e))
            log.write(row)
    return read_jsonl(out)
