"""Optimizers: turn a problem and a profile into a candidate ModelNew program.

- :class:`ReferenceOptimizer`: deterministic, profile-guided, picks one transformation from
  the catalogue (:data:`TRANSFORMATIONS`); the environment's default.
- :class:`~autoprofiler_env.optimizers.llm.LLMOptimizer`: any OpenAI-compatible endpoint or a
  local transformers model writes the ModelNew source.

Both have ``optimize(problem, profile) -> Candidate``; ``profile`` may be None (no sections).
"""

from autoprofiler_env.optimizers import triton  # noqa: F401  (registers triton_*)
from autoprofiler_env.optimizers.candidate import Candidate
from autoprofiler_env.optimizers.reference import ReferenceOptimizer
from autoprofiler_env.optimizers.transforms import TRANSFORMATIONS, Transformation, applicable

__all__ = ["Candidate", "ReferenceOptimizer", "TRANSFORMATIONS", "Transformation", "applicable"]
