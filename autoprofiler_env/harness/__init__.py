"""The evaluation harness: is a candidate correct, and how fast is it? (docs/harness.md)

Candidates follow KernelBench's convention: source code defining ``class ModelNew``, built
with the problem's ``get_init_inputs()`` and called with its ``get_inputs()``. The judge
(:class:`Evaluator`) never imports a candidate: each runs in a sandboxed worker process of its
own, and the judge compares its raw outputs and checks its times against its own clock.
"""

from autoprofiler_env.harness.evaluator import Evaluator, evaluate, read_candidate
from autoprofiler_env.harness.records import (
    ErrorKind,
    EvalResult,
    HarnessConfig,
    ReferenceRun,
    Timing,
)
from autoprofiler_env.harness.static_check import Finding, check_source
from autoprofiler_env.harness.tolerance import PRESETS, Tolerance, passes, resolve

__all__ = ["ErrorKind", "EvalResult", "Evaluator", "Finding", "HarnessConfig", "PRESETS",
           "ReferenceRun", "Timing", "Tolerance", "check_source", "evaluate", "passes",
           "read_candidate", "resolve"]
