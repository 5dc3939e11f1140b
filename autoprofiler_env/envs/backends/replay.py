"""The replay backend: an episode's answers from a recorded dataset, on a CPU, in
microseconds."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from autoprofiler_env.dataset import Dataset
from autoprofiler_env.dataset.replay import LLM_MISSING
from autoprofiler_env.envs.backends.base import EpisodeOutcome, llm_model, warn_ill_posed
from autoprofiler_env.envs.observation import SectionView, key_metrics, section_view
from autoprofiler_env.errors import DatasetError, NotRecordedError, OptimizerSpecError
from autoprofiler_env.optimizers import reference_optimizer
from autoprofiler_env.optimizers.custom import is_custom
from autoprofiler_env.optimizers.reference_v1 import CHOICES as V1_CHOICES
from autoprofiler_env.profiler.records import Profile
from autoprofiler_env.scoring import log_score

_SHARED_CACHES: dict[tuple, tuple] = {}
"""The replay's memos, per (dataset checksum, device, optimizer, tolerance): every backend of
one process with the same key answers the same, so they share one (the benchmark makes an
environment per budget; the oracle's search then pays once). The :data:`_SHARED_MAX` used
last are kept (a process that tries many tolerances, or rebuilt datasets, kept each one's
memos and its dataset for good)."""
_SHARED_MAX = 8
_EXACT_MAX, _SIGNED_MAX = 1 << 16, 1 << 18
"""Outcomes kept by exact section set and by signature (:meth:`ReplayBackend._compute_finish`
): a miss of the first that the second holds costs 2.6 us against 0.7 us for a hit, and the
signatures of every affordable set of a split number 140-262 thousand (1 KB each), where
the exact sets are 0.9-1.7 million (1.2 KB each: 1.2 GB per process under
``budget_range``)."""


def _full_precision(name: str) -> bool:
    """Whether a (composed) candidate keeps fp32 (no TF32 or autocast part)."""
    return not any(p == "tf32" or p.startswith("autocast_") for p in name.split("+"))


class ReplayBackend:
    """Answers from a recorded dataset. The reference optimizer runs on the replayed evidence;
    an LLM optimizer's outcome is one of the repeats recorded for (problem, section set), drawn
    with the environment's seeded generator, and ``llm_missing`` names what a set that was not
    recorded gets.

    ``dataset``: a shipped dataset's name (``"suite"``, the default, or ``"kernelbench"``), a
    file, or a loaded :class:`Dataset`; ``optimizer``: None replays the dataset's own
    (:meth:`Dataset.default_optimizer`: ``"reference"`` on the shipped ones).

    A candidate whose outcome was not recorded raises :class:`NotRecordedError` (the replay
    never invents an outcome). A reference optimizer serves the problems for which its
    candidates were recorded (every candidate it can reach from any section set,
    :mod:`~autoprofiler_env.dataset.record.plan`), and warns when that is not all of them.
    """

    def __init__(self, dataset: str | Path | Dataset | None = None, device: str = "cuda",
                 optimizer: str | None = None, llm_missing: str = "raise",
                 tolerance: str | float | None = None) -> None:
        from autoprofiler_env.errors import warn
        from autoprofiler_env.harness.tolerance import resolve

        if optimizer is not None and is_custom(optimizer):
            raise OptimizerSpecError(
                f"optimizer {optimizer}: the replay (AutoProfiler-v0) answers with recorded "
                "outcomes, and none are recorded for an optimizer of your own: run it in the "
                f"live environment, gym.make('AutoProfilerLive-v0', optimizer={optimizer!r}, "
                f"problems=[...]), or `autoprofiler optimize FILE --optimizer {optimizer} "
                "--tree agents/tree/data/reference.json`")
        if tolerance is not None:
            resolve(tolerance)  # an unknown regime fails here, naming the known ones
        self.dataset = dataset if isinstance(dataset, Dataset) else Dataset.load(dataset)
        if optimizer is None:
            optimizer = self.dataset.default_optimizer()
        self.device, self.optimizer_name, self.llm_missing = device, optimizer, llm_missing
        self.tolerance = tolerance
        # the dataset keys an LLM's outcomes by its producer's name, "llm:<model>"
        self.llm_model = optimizer if llm_model(optimizer) is not None else None
        if llm_missing not in LLM_MISSING:
            raise ValueError(f"llm_missing must be one of {LLM_MISSING}, got {llm_missing!r}")
        uris = self.dataset.uris()
        if self.llm_model is None:
            self.optimizer = reference_optimizer(optimizer, device=device, tolerance=tolerance)
            # an optimizer's empty outcomes: its plan was recorded and reaches no candidate
            served = [u for u in uris if optimizer in self.dataset.record(u).outcomes]
            if not served:
                recorded = ", ".join(self.dataset.optimizers()) or "none"
                raise DatasetError(
                    f"the dataset holds no recorded candidates of the optimizer {optimizer!r} "
                    f"(it has those of: {recorded}): record them with `autoprofiler record "
                    "--parts candidates --plan FILE` and rebuild the dataset, or name one of "
                    "those")
            if len(served) < len(uris):
                warn(f"the optimizer {optimizer!r} has recorded candidates for "
                     f"{len(served)} of the dataset's {len(uris)} problems: the "
                     "replay serves those (docs/optimizers.md)")
            self._served = frozenset(served)
        else:
            self.optimizer = None
            bare = [u for u in uris if self.llm_model not in self.dataset.record(u).llm_outcomes]
            if bare:
                raise DatasetError(
                    f"{len(bare)} problems of the dataset have no recorded outcomes of "
                    f"{optimizer} (e.g. {bare[0]}): the replay cannot reward them; record them "
                    "with `autoprofiler record --parts llm` and rebuild the dataset")
            self._served = frozenset(uris)
        self.ill_posed = {u: why for u, why in self.dataset.ill_posed(tolerance).items()
                          if u in self._served}
        if self.ill_posed:
            warn_ill_posed(self.ill_posed)
            self._served -= frozenset(self.ill_posed)
        self.sections = self.dataset.sections
        self.metrics = key_metrics(self.sections)
        self._evidence = frozenset(self.optimizer.evidence_metrics) if self.optimizer else None
        key = (self.dataset.metadata.get("sha256"), device, optimizer, str(tolerance))
        shared = _SHARED_CACHES.pop(key, None) if key[0] else None
        if shared is None:  # the replay is a pure function of these: backends share its memo
            shared = (lru_cache(maxsize=None)(self._compute_view),
                      lru_cache(maxsize=_EXACT_MAX)(self._signed_finish),
                      lru_cache(maxsize=None)(self._compute_features),
                      lru_cache(maxsize=_SIGNED_MAX)(self._compute_finish),
                      lru_cache(maxsize=None)(self._compute_bearing))
        if key[0]:
            _SHARED_CACHES[key] = shared  # the most recently used last
            while len(_SHARED_CACHES) > _SHARED_MAX:
                _SHARED_CACHES.pop(next(iter(_SHARED_CACHES)))
        (self._view, self._finish, self._features, self._finish_signed,
         self._bearing) = shared

    def __getstate__(self) -> dict:  # caches are rebuilt, not pickled
        return {"dataset": self.dataset, "device": self.device,
                "optimizer": self.optimizer_name, "llm_missing": self.llm_missing,
                "tolerance": self.tolerance}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)

    def close(self) -> None:
        """Nothing to release: the replay holds no process."""

    def problems(self, split: str | None) -> list[str]:
        return [u for u in self.dataset.uris(split) if u in self._served]

    def features(self, uri: str) -> np.ndarray:
        """The static feature vector (cached: do not modify it in place)."""
        return self._features(uri)

    def _compute_features(self, uri: str) -> np.ndarray:
        return self.dataset.record(uri).features.vector()

    def full_cost(self, uri: str) -> tuple[float | None, int]:
        """(seconds, passes) of ncu's full set for this problem
        (:meth:`~autoprofiler_env.dataset.Dataset.full_cost`)."""
        return self.dataset.full_cost(uri)

    def cost(self, uri: str, section: str) -> tuple[float | None, int]:
        view = self._view(uri, section)
        return view.seconds, view.passes

    def view(self, uri: str, section: str) -> SectionView:
        return self._view(uri, section)

    def _compute_view(self, uri: str, section: str) -> SectionView:
        return section_view(self.dataset.profile(uri, [section]), section, self.metrics)

    def finish(self, uri: str, sections: tuple[str, ...],
               rng: np.random.Generator | None = None) -> EpisodeOutcome:
        """The optimizer's outcome with the profile of ``sections``; ``rng`` draws among an
        LLM optimizer's recorded repeats (the first without one)."""
        if self.llm_model is not None:
            outcome = self.dataset.llm_outcome(uri, self.llm_model, sections, rng=rng,
                                               missing=self.llm_missing)
            if self.tolerance is not None:
                outcome = outcome.judged(self.tolerance)
            return self._replayed(uri, self.optimizer_name, "a recorded reply of the model",
                                  outcome)
        # memoized per (problem, section set): the order of collection does not matter
        return self._finish(uri, frozenset(sections))

    def profile(self, uri: str, sections) -> Profile:
        return self.dataset.profile(uri, sections)

    def best_score(self, uri: str) -> float:
        """The highest score (:func:`~autoprofiler_env.scoring.log_score`) an episode of this
        problem can reach: the best recorded outcome among the candidates the optimizer can
        choose (reference-v1: :data:`~autoprofiler_env.optimizers.reference_v1.CHOICES`; the
        reference optimizer: every one recorded, its plan's, less those with TF32 or FP16
        under a tolerance that forbids them: an upper bound there, since the plan's other
        candidates are not all reachable under every tolerance), or eager's (0). No profile can
        do better; an analysis API (the oracle's search stops there), not charged to any
        episode. For an LLM optimizer, the best of its recorded replies."""
        values = [0.0]
        if self.llm_model is not None:
            outcomes = [o for reps in self.dataset.record(uri).llm_outcomes.get(
                self.llm_model, {}).values() for o in reps]
        else:
            choices = V1_CHOICES if self.optimizer_name == "reference-v1" else None
            outcomes = []
            for name in self.dataset.outcomes(uri, self.optimizer_name):
                if choices is not None and name not in choices:
                    continue
                if not (choices or self.optimizer.reduced) and not _full_precision(name):
                    continue  # the tolerance forbids TF32 / FP16: not a candidate here
                try:
                    outcomes.append(self.dataset.outcome(uri, name, self.tolerance,
                                                         optimizer=self.optimizer_name))
                except NotRecordedError:
                    continue
        for outcome in outcomes:
            if self.tolerance is not None and self.llm_model is not None:
                try:
                    outcome = outcome.judged(self.tolerance)
                except NotRecordedError:
                    continue
            values.append(log_score(outcome.correct, outcome.speedup))
        return max(values)

    def _compute_bearing(self, uri: str) -> frozenset[str]:
        """The sections whose evidence can bear on the optimizer's choice for this problem:
        those that show any metric its rules read, or a finding of a rule they read (any
        finding, for an optimizer that reads them all)."""
        record = self.dataset.record(uri)
        counts = {s: len(record.profiles[s].kernels) for s in self.sections}
        if len(set(counts.values())) > 1:  # what merging a set whole would raise
            raise DatasetError(f"{uri}: the sections' runs profiled different numbers of "
                               f"kernels ({counts}); re-record it")
        return frozenset(self.dataset.bearing(uri, self.optimizer))

    def _signed_finish(self, uri: str, sections: frozenset[str]) -> EpisodeOutcome:
        """The outcome of ``sections``, through the set's signature: the sections that bear on
        the choice, and the first section in the dataset's order (its run gives the merged
        profile's kernels and durations). Every set with one signature merges to the same
        evidence the rules read, so it has the same outcome: the oracle's search over the
        affordable sets computes each signature once."""
        if not sections:
            return self._finish_signed(uri, sections)
        first = self.dataset.canonical(sections)[0]
        return self._finish_signed(uri, (sections & self._bearing(uri)) | {first})

    def _compute_finish(self, uri: str, sections: frozenset[str]) -> EpisodeOutcome:
        sections = self.dataset.canonical(sections)
        record = self.dataset.record(uri)
        # the rules read a handful of metrics: merging only those gives the same choice
        profile = (self.dataset.profile(uri, sections, self._evidence, cache=False)
                   if sections else None)  # the outcome is kept (by signature), not this
        eager_ms = record.eager.get("median_ms")
        # reference-v1 chooses among its recorded outcomes, as it did before schema 3
        applicable = (frozenset(self.dataset.outcomes(uri, self.optimizer_name))
                      if self.optimizer_name == "reference-v1"
                      else frozenset(record.transformations))
        name, reason, _ = self.optimizer.choose(None, profile, record.features,
                                                applicable=applicable, eager_ms=eager_ms)
        if name == "identity":
            return EpisodeOutcome(name, reason, True, 1.0, None, eager_ms, eager_ms)
        return self._replayed(uri, name, reason, self.dataset.outcome(
            uri, name, self.tolerance, optimizer=self.optimizer_name))

    def _replayed(self, uri: str, name: str, reason: str, outcome) -> EpisodeOutcome:
        """An episode's outcome from a recorded one (``Outcome``)."""
        eager_ms = self.dataset.record(uri).eager.get("median_ms")
        if outcome.correct and outcome.speedup and outcome.median_ms:
            # the eager time of the candidate's own timing session, behind its speedup
            eager_ms = outcome.median_ms * outcome.speedup
        return EpisodeOutcome(name, reason, outcome.correct,
                              outcome.speedup if outcome.correct else None, outcome.error_kind,
                              eager_ms, outcome.median_ms)
