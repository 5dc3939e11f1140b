"""Optimizers: turn a problem and a profile into a candidate ModelNew program.

- :class:`ReferenceOptimizer` (``"reference"``): deterministic, profile-guided, one decision
  per kind (precision, code generation, memory format, launch) composed into one candidate
  from the catalogue (:data:`TRANSFORMATIONS`, :mod:`.compose`).
- :class:`ReferenceOptimizerV1` (``"reference-v1"``): the first one, one transformation per
  candidate; kept for comparison, with the outcomes recorded for it.
- :class:`~autoprofiler_env.optimizers.llm.LLMOptimizer`: any OpenAI-compatible endpoint or a
  local transformers model writes the ModelNew source.

All have ``optimize(problem, profile, ...) -> Candidate``; ``profile`` may be None (no
sections). The live environment also takes one of your own, ``py:MODULE:ATTR``
(:mod:`.custom`).
"""

from autoprofiler_env.optimizers import triton  # noqa: F401  (registers triton_*)
from autoprofiler_env.optimizers.candidate import Candidate
from autoprofiler_env.optimizers.reference import ReferenceOptimizer
from autoprofiler_env.optimizers.reference_v1 import ReferenceOptimizerV1
from autoprofiler_env.optimizers.transforms import TRANSFORMATIONS, Transformation, applicable

REFERENCE_OPTIMIZERS = {"reference": ReferenceOptimizer, "reference-v1": ReferenceOptimizerV1}
"""The deterministic optimizers by name (what the replay reruns on recorded evidence)."""
DEFAULT_OPTIMIZER = "reference"
"""The environment's optimizer when none is named (a dataset that records only another one
replays that one: :meth:`~autoprofiler_env.dataset.Dataset.default_optimizer`)."""


def reference_optimizer(name: str, device: str = "cuda", tolerance=None):
    """The deterministic optimizer called ``name``.

    Raises:
        ValueError: not one of :data:`REFERENCE_OPTIMIZERS`.
    """
    try:
        cls = REFERENCE_OPTIMIZERS[name]
    except KeyError:
        raise ValueError(f"no reference optimizer {name!r}; choose from "
                         f"{', '.join(REFERENCE_OPTIMIZERS)} or 'llm:<model>'") from None
    return cls(device=device, tolerance=tolerance)


__all__ = ["Candidate", "DEFAULT_OPTIMIZER", "REFERENCE_OPTIMIZERS", "ReferenceOptimizer",
           "ReferenceOptimizerV1", "TRANSFORMATIONS", "Transformation", "applicable",
           "reference_optimizer"]
