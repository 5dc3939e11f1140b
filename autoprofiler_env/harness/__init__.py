"""The evaluation harness: is a candidate correct, and how fast is it?

Candidates follow KernelBench's convention: source code defining ``class ModelNew``, built
with the problem's ``get_init_inputs()`` and called with its ``get_inputs()``.
"""

from autoprofiler_env.harness.evaluator import Evaluator, evaluate, read_candidate
from autoprofiler_env.harness.records import ErrorKind, EvalResult, HarnessConfig, ReferenceRun, Timing

__all__ = ["ErrorKind", "EvalResult", "Evaluator", "HarnessConfig", "ReferenceRun", "Timing", "evaluate",
           "read_candidate"]
