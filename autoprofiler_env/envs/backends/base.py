"""The interface both backends implement (:class:`Backend`), what an episode's end gives
(:class:`EpisodeOutcome`), and the optimizer names they accept."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from autoprofiler_env.envs.observation import SectionView
from autoprofiler_env.optimizers.custom import is_custom
from autoprofiler_env.profiler.records import Profile


@dataclass(frozen=True)
class EpisodeOutcome:
    """What the optimizer achieved with the profile an episode collected."""

    transformation: str
    reason: str
    correct: bool
    speedup: float | None
    error_kind: str | None
    eager_ms: float | None = None      # the eager reference's median time, recorded or live
    candidate_ms: float | None = None  # the candidate's, when it ran
    error: str | None = None
    """Why it was judged incorrect, in words (None when correct): live, the harness's reason
    (which output differed and by how much, the SyntaxError's line, ...) or the optimizer's
    failure; the replay records none (None)."""


@runtime_checkable
class Backend(Protocol):
    """Where an episode's answers come from. ``ProfilingEnv`` uses nothing else of a backend;
    the replay (:class:`~autoprofiler_env.envs.backends.ReplayBackend`, a recorded dataset)
    and the live backend (:class:`~autoprofiler_env.envs.backends.LiveBackend`: ncu, the
    optimizer and the harness on a GPU) implement it."""

    sections: tuple[str, ...]
    """The action sections, in action order."""
    metrics: tuple[tuple[str, str], ...]
    """(section, metric) of the observation's key metrics, in its order (``key_metrics``)."""

    def problems(self, split: str | None) -> list[str]:
        """The problem URIs of a split (None: all)."""

    def features(self, uri: str) -> np.ndarray:
        """The problem's static feature vector (``FEATURE_NAMES``' order)."""

    def full_cost(self, uri: str) -> tuple[float | None, int]:
        """(seconds, passes) of ncu's full set on the problem; seconds None where unknown."""

    def cost(self, uri: str, section: str) -> tuple[float | None, int]:
        """(seconds, passes) of collecting ``section`` alone, known before collecting it:
        the replay's as recorded; the live backend's passes from the catalogue, its seconds
        None (unknown before profiling)."""

    def view(self, uri: str, section: str) -> SectionView:
        """What collecting ``section`` alone adds to the observation, and its cost."""

    def profile(self, uri: str, sections) -> Profile:
        """The merged profile of ``sections`` (what the optimizer is shown)."""

    def finish(self, uri: str, sections: tuple[str, ...],
               rng: np.random.Generator | None = None) -> EpisodeOutcome:
        """The optimizer's outcome with the profile of ``sections``."""

    def close(self) -> None:
        """Releases what the backend holds (the live backend's judging processes); the
        environment's ``close()`` calls it. The backend can still be used afterwards."""


@runtime_checkable
class Hindsight(Backend, Protocol):
    """A backend that can answer without charging an episode: the analysis API the hindsight
    oracle and the data report use (the replay implements it)."""

    def best_score(self, uri: str) -> float:
        """The highest score (:func:`~autoprofiler_env.scoring.log_score`) any episode of the
        problem can reach."""


OPTIMIZERS = ("reference", "reference-v1", "llm:<model>", "py:MODULE:ATTR")
"""What ``optimizer`` may name: a deterministic reference optimizer (``reference``, composed
decisions; ``reference-v1``, the first, one transformation), an LLM optimizer by the model
name its outcomes were recorded under (``llm:<model>``; live: the model on the
OpenAI-compatible endpoint of ``AUTOPROFILER_LLM_BASE_URL``), or, live only, an optimizer of
your own (``py:MODULE:ATTR``: :mod:`autoprofiler_env.optimizers.custom`)."""


def llm_model(optimizer: str) -> str | None:
    """The model of ``"llm:<model>"``; None for a reference optimizer or one of your own
    (``py:``); ValueError otherwise."""
    if optimizer in ("reference", "reference-v1") or is_custom(optimizer):
        return None
    if optimizer.startswith("llm:") and len(optimizer) > 4:
        return optimizer[4:]
    raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")


def warn_ill_posed(ill_posed: dict[str, str]) -> None:
    """Says which of a dataset's problems a backend leaves out as ill-posed at its tolerance
    (:meth:`~autoprofiler_env.dataset.Dataset.ill_posed`)."""
    from autoprofiler_env.errors import warn

    first = next(iter(ill_posed))
    warn(f"{len(ill_posed)} of the dataset's problems are left out: a constant output "
         f"passes at this tolerance, so they are ill-posed here (e.g. {first}: "
         f"{ill_posed[first]}); a stricter tolerance serves them: "
         f"tolerance=\"kernelbench\" (fp32 1e-4; docs/harness.md)")
