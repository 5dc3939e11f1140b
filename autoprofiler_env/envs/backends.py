"""Where an episode's answers come from: the replay backend (a recorded dataset, on a CPU, in
microseconds) or the live backend (ncu, the optimizer and the harness, on a GPU)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from autoprofiler_env.dataset import Dataset
from autoprofiler_env.dataset.replay import DEFAULT_DATASET, LLM_MISSING, merge_profiles
from autoprofiler_env.errors import DatasetError, NotRecordedError, ProfilingError
from autoprofiler_env.features import static_features
from autoprofiler_env.optimizers.reference import CHOICES, EVIDENCE_METRICS, ReferenceOptimizer
from autoprofiler_env.profiler import profile_problems
from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS, load_catalogue
from autoprofiler_env.profiler.records import Profile
from autoprofiler_env.scoring import log_score

EVIDENCE = frozenset(EVIDENCE_METRICS)


def key_metrics(sections: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(section, metric) of every numeric header metric of the sections, each metric once, under
    the first section that shows it: the metrics an observation holds."""
    catalogue = load_catalogue()
    seen, out = set(), []
    for s in sections:
        for _, name in catalogue.section(s).header:
            if name not in seen and not name.startswith("profiler__") and name not in _STRINGS:
                seen.add(name)
                out.append((s, name))
    return tuple(out)


# header metrics whose values are words, not numbers (measured on the H200)
_STRINGS = frozenset({"launch__cluster_scheduling_policy", "launch__func_cache_config",
                      "launch__preferred_cluster_size", "launch__tpc_enabled",
                      "derived__local_spilling_requests_pct",
                      "lts__average_gcomp_output_sector_compression_achieved_rate.ratio"})


def squash(x: float) -> float:
    """sign(x) log10(1 + |x|): cycles (1e6) and percentages (0-100) on one scale."""
    return math.copysign(math.log10(1.0 + abs(x)), x)


@dataclass(frozen=True)
class SectionView:
    """What collecting one section adds to an observation, and what it costs."""

    metric_values: np.ndarray  # squashed values of the key metrics it shows (NaN: not numeric)
    finding_score: float       # its OPT findings' time-weighted estimated speedups, summed (%)
    seconds: float             # replay seconds of collecting it alone
    passes: int                # replay passes per kernel


def section_view(profile: Profile, section: str,
                 metrics: tuple[tuple[str, str], ...]) -> SectionView:
    """What the profile of ``section`` alone adds to an observation (``metrics`` as
    :func:`key_metrics` gives them), and its cost."""
    values = np.full(len(metrics), np.nan, dtype=np.float32)
    for i, (owner, name) in enumerate(metrics):
        v = profile.metric(name) if owner == section else None
        if v is not None:
            values[i] = squash(v)
    score = sum(w for f, w in profile.findings() if f.kind == "OPT")
    return SectionView(values, float(score), profile.cost.replay_s, profile.cost.passes)


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


OPTIMIZERS = ("reference", "llm:<model>")
"""What ``optimizer`` may name: the deterministic reference optimizer, or an LLM optimizer by
the model name its outcomes were recorded under (``llm:<model>``; live: the model on the
OpenAI-compatible endpoint of ``AUTOPROFILER_LLM_BASE_URL``)."""


def _llm_model(optimizer: str) -> str | None:
    """The model of ``"llm:<model>"``; None for ``"reference"``; ValueError otherwise."""
    if optimizer == "reference":
        return None
    if optimizer.startswith("llm:") and len(optimizer) > 4:
        return optimizer[4:]
    raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")


_SHARED_CACHES: dict[tuple, tuple] = {}
"""The replay's memos, per (dataset checksum, device, optimizer, tolerance): every backend of
one process with the same key answers the same, so they share one (the benchmark makes an
environment per budget; the oracle's search then pays once)."""


class ReplayBackend:
    """Answers from a recorded dataset. The reference optimizer runs on the replayed evidence;
    an LLM optimizer's outcome is one of the repeats recorded for (problem, section set), drawn
    with the environment's seeded generator, and ``llm_missing`` names what a set that was not
    recorded gets.

    A candidate whose outcome was not recorded raises :class:`NotRecordedError` (the replay
    never invents an outcome); every transformation that applies to a problem is recorded, so
    with the reference optimizer this does not happen on a complete dataset.
    """

    def __init__(self, dataset: str | Path | Dataset | None = None, device: str = "cuda",
                 optimizer: str = "reference", llm_missing: str = "raise",
                 tolerance: str | float | None = None) -> None:
        from autoprofiler_env.harness.tolerance import resolve

        if tolerance is not None:
            resolve(tolerance)  # an unknown regime fails here, naming the known ones
        self.dataset = (dataset if isinstance(dataset, Dataset)
                        else Dataset.load(dataset or DEFAULT_DATASET))
        self.device, self.optimizer_name, self.llm_missing = device, optimizer, llm_missing
        self.tolerance = tolerance
        # the dataset keys an LLM's outcomes by its producer's name, "llm:<model>"
        self.llm_model = optimizer if _llm_model(optimizer) is not None else None
        if llm_missing not in LLM_MISSING:
            raise ValueError(f"llm_missing must be one of {LLM_MISSING}, got {llm_missing!r}")
        if self.llm_model is None:
            bare = [u for u in self.dataset.uris() if not self.dataset.record(u).outcomes]
            what = "candidate outcomes", "--parts candidates"
        else:
            bare = [u for u in self.dataset.uris()
                    if self.llm_model not in self.dataset.record(u).llm_outcomes]
            what = f"outcomes of {optimizer}", "--parts llm"
        if bare:
            raise DatasetError(
                f"{len(bare)} problems of the dataset have no recorded {what[0]} (e.g. "
                f"{bare[0]}): the replay cannot reward them; record them with `autoprofiler "
                f"record {what[1]}` and rebuild the dataset")
        self.sections = self.dataset.sections
        self.metrics = key_metrics(self.sections)
        self.optimizer = ReferenceOptimizer(device=device)
        key = (self.dataset.metadata.get("sha256"), device, optimizer, str(tolerance))
        shared = _SHARED_CACHES.get(key) if key[0] else None
        if shared is None:  # the replay is a pure function of these: backends share its memo
            shared = (lru_cache(maxsize=None)(self._compute_view),
                      lru_cache(maxsize=1 << 18)(self._compute_finish),
                      lru_cache(maxsize=None)(self._compute_features))
            if key[0]:
                _SHARED_CACHES[key] = shared
        self._view, self._finish, self._features = shared

    def __getstate__(self) -> dict:  # caches are rebuilt, not pickled
        return {"dataset": self.dataset, "device": self.device,
                "optimizer": self.optimizer_name, "llm_missing": self.llm_missing,
                "tolerance": self.tolerance}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)

    def problems(self, split: str | None) -> list[str]:
        return self.dataset.uris(split)

    def features(self, uri: str) -> np.ndarray:
        """The static feature vector (cached: do not modify it in place)."""
        return self._features(uri)

    def _compute_features(self, uri: str) -> np.ndarray:
        return self.dataset.record(uri).features.vector()

    def full_cost(self, uri: str) -> tuple[float | None, int]:
        """(seconds, passes) of ncu's full set for this problem; where it was not recorded, the
        sum over the action sections (seconds) and ncu's 38 passes."""
        full = self.dataset.record(uri).set_costs.get("full")
        if full is not None:
            return full.replay_s, full.passes
        views = [self.view(uri, s) for s in self.sections]
        return sum(v.seconds for v in views), load_catalogue().set_passes["full"]

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
        return self._finish(uri, self.dataset.canonical(sections))

    def profile(self, uri: str, sections) -> Profile:
        return self.dataset.profile(uri, sections)

    def best_score(self, uri: str) -> float:
        """The highest score (:func:`~autoprofiler_env.scoring.log_score`) an episode of this
        problem can reach: the best recorded outcome among the transformations the optimizer
        can choose (:data:`~autoprofiler_env.optimizers.reference.CHOICES`), or eager's (0).
        No profile can do better; an analysis API (the oracle's search stops there), not
        charged to any episode."""
        values = [0.0]
        choices = CHOICES if self.llm_model is None else None
        for name in self.dataset.record(uri).outcomes:
            if choices is not None and name not in choices:
                continue
            try:
                outcome = self.dataset.outcome(uri, name, self.tolerance)
            except NotRecordedError:
                continue
            values.append(log_score(outcome.correct, outcome.speedup))
        return max(values)

    def _compute_finish(self, uri: str, sections: tuple[str, ...]) -> EpisodeOutcome:
        record = self.dataset.record(uri)
        # the rules read a handful of metrics: merging only those gives the same choice
        profile = self.dataset.profile(uri, sections, EVIDENCE) if sections else None
        name, reason, _ = self.optimizer.choose(None, profile, record.features,
                                                applicable=frozenset(record.outcomes))
        if name == "identity":
            eager_ms = record.eager.get("median_ms")
            return EpisodeOutcome(name, reason, True, 1.0, None, eager_ms, eager_ms)
        return self._replayed(uri, name, reason,
                              self.dataset.outcome(uri, name, self.tolerance))

    def _replayed(self, uri: str, name: str, reason: str, outcome) -> EpisodeOutcome:
        """An episode's outcome from a recorded one (``Outcome``)."""
        eager_ms = self.dataset.record(uri).eager.get("median_ms")
        if outcome.correct and outcome.speedup and outcome.median_ms:
            # the eager time of the candidate's own timing session, behind its speedup
            eager_ms = outcome.median_ms * outcome.speedup
        return EpisodeOutcome(name, reason, outcome.correct,
                              outcome.speedup if outcome.correct else None, outcome.error_kind,
                              eager_ms, outcome.median_ms)



class LiveBackend:
    """Runs the episode for real on a GPU: each collected section is an ncu run of the problem
    with that section alone (so its evidence and cost are what the replay records), then the
    reference optimizer writes the candidate from the merged profile and the harness judges and
    times it. Nondeterministic: timings and sampled counters vary between runs."""

    def __init__(self, problems: list[str] | None = None, device: str = "cuda",
                 ncu: str | None = None, timeout_s: float = 600.0,
                 optimizer: str = "reference", tolerance: str | float | None = None) -> None:
        from autoprofiler_env.harness import Evaluator, HarnessConfig
        from autoprofiler_env.problems import load_problem, load_suite

        loaded = [load_problem(u) for u in problems] if problems else load_suite()
        self._problems = {p.uri: p for p in loaded}
        # a user names a problem by a suite URI, a suite name or a file path; the episode
        # and every record name it by its URI
        self._uris = {str(ref): p.uri for ref, p in zip(problems or [], loaded)}
        self.sections = ACTION_SECTIONS
        self.metrics = key_metrics(self.sections)
        model = _llm_model(optimizer)
        if model is None:
            self.optimizer = ReferenceOptimizer(device=device)
        else:
            from autoprofiler_env.optimizers.llm import LLMOptimizer, OpenAIChatBackend

            self.optimizer = LLMOptimizer(OpenAIChatBackend(model=model))
        self.evaluator = Evaluator(HarnessConfig(device=device, tolerance=None if tolerance is None
                                                 else str(tolerance)), timeout_s=timeout_s)
        self.ncu = ncu
        self._profiles: dict[tuple[str, str], Profile] = {}

    def problems(self, split: str | None) -> list[str]:
        return [u for u, p in self._problems.items() if split is None or p.split == split]

    def uri_of(self, ref: str) -> str:
        """The URI of a problem given as it was given to the backend (a path, a name)."""
        return self._uris.get(str(ref), str(ref))

    def features(self, uri: str) -> np.ndarray:
        return static_features(self._problems[uri]).vector()

    def full_cost(self, uri: str) -> tuple[float | None, int]:
        """(None, passes): the full set's seconds are unknown before profiling it."""
        return None, load_catalogue().set_passes["full"]

    def _profile_alone(self, uri: str, section: str) -> Profile:
        key = (uri, section)
        if key not in self._profiles:
            profiles, failures = profile_problems([self._problems[uri]], [section], ncu=self.ncu)
            if failures:
                raise ProfilingError(f"{uri}: {failures[0].error}")
            self._profiles[key] = profiles[0]
        return self._profiles[key]

    def view(self, uri: str, section: str) -> SectionView:
        return section_view(self._profile_alone(uri, section), section, self.metrics)

    def profile(self, uri: str, sections) -> Profile:
        parts = [self._profile_alone(uri, s) for s in sections]
        return merge_profiles(uri, tuple(sections), parts)

    def finish(self, uri: str, sections: tuple[str, ...],
               rng: np.random.Generator | None = None) -> EpisodeOutcome:
        problem = self._problems[uri]
        profile = self.profile(uri, sections) if sections else None
        candidate = self.optimizer.optimize(problem, profile)
        if candidate.error:  # an LLM reply with no code: judged as incorrect, never run
            return EpisodeOutcome(candidate.producer, candidate.reason, False, None,
                                  candidate.error.split(":")[0])
        result = self.evaluator.evaluate(problem, candidate.source)
        return EpisodeOutcome(candidate.producer, candidate.reason, result.correct,
                              result.speedup, result.error_name, result.reference_ms,
                              result.candidate_ms)
