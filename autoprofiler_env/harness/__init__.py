"""The evaluation harness: is a candidate correct, and how fast is it? (docs/harness.md)

Candidates follow KernelBench's convention: source code defining ``class ModelNew``, built
with the problem's ``get_init_inputs()`` and called with its ``get_inputs()``. The judge
(:class:`Evaluator`) never imports a candidate: each runs in a sandboxed worker process of its
own, and the judge compares its raw outputs and checks its times against its own clock.

The names below are imported when first used (PEP 562), so that a module that needs only the
tolerances or the records (the replay, reading a dataset) does not load torch.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "Evaluator": "evaluator", "evaluate": "evaluator", "read_candidate": "evaluator",
    "ErrorKind": "records", "EvalResult": "records", "HarnessConfig": "records",
    "ReferenceRun": "records", "Timing": "records",
    "Finding": "static_check", "check_source": "static_check",
    "PRESETS": "tolerance", "Tolerance": "tolerance", "passes": "tolerance",
    "resolve": "tolerance",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
