"""Tolerance regimes: when is a candidate's output close enough to the reference's?

The check is ``torch.allclose``'s: ``|c - r| <= atol + rtol * |r|`` for every value. The presets
are KernelBench's, with the numbers read from its evaluation code
(ScalingIntelligence/KernelBench, ``src/kernelbench/eval.py``):

| preset | fp32 (and fp64) | fp16, bf16 | source |
|---|---|---|---|
| ``kernelbench-v0`` | 1e-2 | 1e-2 | the comment in ``run_and_check_correctness``: "kernelbench v0 and v0.1 uses fp32, atol = rtol = 1e-02" |
| ``kernelbench-v0.1`` | 1e-2 | 1e-2 | the same |
| ``kernelbench`` | 1e-4 | 1e-2 | ``get_tolerance_for_precision`` at commit 423217d (torchbench's values) |

A result records ``tolerance_needed``: per output dtype, the smallest ``t`` that passes with
``atol = rtol = t``, that is ``max |c - r| / (1 + |r|)``. Every preset has ``atol = rtol``, so
any of them (or any stricter ``t``) can be judged from a recording made once
(:func:`passes`); a regime with ``atol != rtol`` cannot, and says so.

>>> resolve("kernelbench").for_dtype("float32")
(0.0001, 0.0001)
>>> passes({"float32": 3e-5}, "kernelbench")
True
"""  # noqa: E501 (a markdown table's rows are one line each)

from __future__ import annotations

import math
from dataclasses import dataclass, field

from autoprofiler_env.errors import EvaluationError, ToleranceError

_HALF = ("float16", "bfloat16")


@dataclass(frozen=True)
class Tolerance:
    """A regime: (atol, rtol) per output dtype, with a default for the others."""

    name: str
    atol: float
    rtol: float
    per_dtype: dict = field(default_factory=dict)  # dtype name -> (atol, rtol)
    source: str = ""

    def for_dtype(self, dtype: str) -> tuple[float, float]:
        return tuple(self.per_dtype.get(dtype.removeprefix("torch."), (self.atol, self.rtol)))

    @property
    def symmetric(self) -> bool:
        """atol == rtol for every dtype: a recorded ``tolerance_needed`` decides it."""
        return self.atol == self.rtol and all(a == r for a, r in self.per_dtype.values())


_V01 = "KernelBench eval.py: 'kernelbench v0 and v0.1 uses fp32, atol = rtol = 1e-02'"
PRESETS: dict[str, Tolerance] = {t.name: t for t in (
    Tolerance("kernelbench-v0", 1e-2, 1e-2, source=_V01),
    Tolerance("kernelbench-v0.1", 1e-2, 1e-2, source=_V01),
    Tolerance("kernelbench", 1e-4, 1e-4, {d: (1e-2, 1e-2) for d in _HALF},
              source="KernelBench eval.py get_tolerance_for_precision (commit 423217d): "
                     "fp32 1e-4, fp16/bf16 1e-2"),
)}
STRICTEST = "kernelbench"
"""The strictest preset (no looser than any other for any dtype): a recording that replays
every preset checks that its problems are well-posed there (``HarnessConfig.posed_at``)."""
DEFAULT = "kernelbench-v0.1"
"""The harness's default regime, and the one every shipped recording was judged under
(atol = rtol = 1e-2)."""
DEFAULT_ATOL, DEFAULT_RTOL = PRESETS[DEFAULT].atol, PRESETS[DEFAULT].rtol
"""The default regime's (atol, rtol), 1e-2 each: a ``HarnessConfig``'s without a named
``tolerance``, the one the LLM optimizer's prompt states unless told the judge's, and a
recording's where it states none."""


def resolve(spec: str | float | Tolerance) -> Tolerance:
    """A preset by name, or ``"ATOL"`` / ``"ATOL,RTOL"`` (a number: atol = rtol).

    Raises:
        ToleranceError: an unknown name or a malformed number (an ``EvaluationError`` and a
            ``ValueError``).
    """
    if isinstance(spec, Tolerance):
        return spec
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        spec = str(spec)
    if not isinstance(spec, str):
        raise ToleranceError(f"a tolerance is a preset name or a number, got {spec!r}")
    if spec in PRESETS:
        return PRESETS[spec]
    try:
        values = [float(v) for v in spec.split(",")]
    except ValueError:
        values = []
    if len(values) not in (1, 2):
        raise ToleranceError(f"unknown tolerance {spec!r}: use one of {', '.join(PRESETS)}, "
                             "a number >= 0 (atol = rtol) or 'ATOL,RTOL'")
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise ToleranceError(f"tolerance {spec!r}: a number must be finite and >= 0 (atol "
                             "= rtol; 'ATOL,RTOL' for two), or use a preset: "
                             f"{', '.join(PRESETS)}")
    atol, rtol = values[0], values[-1]
    return Tolerance(spec, atol, rtol)


def passes(tolerance_needed: dict | None, regime: str | float | Tolerance) -> bool:
    """Whether a recorded result passes ``regime``, from its ``tolerance_needed`` alone.

    Raises:
        EvaluationError: the regime has ``atol != rtol`` (the record cannot decide it), or the
            record has no ``tolerance_needed``.
    """
    regime = resolve(regime)
    if not regime.symmetric:
        raise EvaluationError(f"the regime {regime.name!r} has atol != rtol: a recording's "
                              "tolerance_needed decides only regimes with atol = rtol")
    if tolerance_needed is None:
        raise EvaluationError("this result has no tolerance_needed (recorded before the judge "
                              "stored it): judge it again")
    return all(needed <= regime.for_dtype(dtype)[0] for dtype, needed in tolerance_needed.items())


def admits_constant(constant_needed: dict | None, regime: str | float | Tolerance) -> bool:
    """Whether ``regime`` may pass a constant candidate on a problem whose reference outputs
    have this ``constant_needed`` (per dtype, the smallest ``t`` at which a constant matches
    one of its outputs with ``atol = rtol = t``:
    :func:`~autoprofiler_env.harness.correctness.constant_fits`). Such a problem is ill-posed
    under the regime. Exact where ``atol = rtol``; otherwise the larger of the two decides
    (a regime that might admit a constant does). None (recorded before the harness measured
    it, and checked well-posed at the recording's tolerance): False.

    >>> admits_constant({"float32": 3e-3}, "kernelbench-v0.1"), admits_constant(
    ...     {"float32": 3e-3}, "kernelbench")
    (True, False)
    """
    if not constant_needed:
        return False
    regime = resolve(regime)
    return any(needed <= max(regime.for_dtype(dtype)) for dtype, needed in
               constant_needed.items())
