"""The live backend: an episode run for real on a GPU (ncu, the optimizer, the harness)."""

from __future__ import annotations

import numpy as np

from autoprofiler_env.envs.backends.base import EpisodeOutcome, llm_model
from autoprofiler_env.envs.observation import SectionView, key_metrics, section_view
from autoprofiler_env.errors import ProfilingError
from autoprofiler_env.features import static_features
from autoprofiler_env.optimizers import DEFAULT_OPTIMIZER, reference_optimizer
from autoprofiler_env.profiler import profile_problems
from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS, load_catalogue
from autoprofiler_env.profiler.merge import merge_profiles
from autoprofiler_env.profiler.records import Profile


class LiveBackend:
    """Runs the episode for real on a GPU: each collected section is an ncu run of the problem
    with that section alone (so its evidence and cost are what the replay records), then the
    reference optimizer writes the candidate from the merged profile and the harness judges and
    times it. Nondeterministic: timings and sampled counters vary between runs."""

    def __init__(self, problems: list[str] | None = None, device: str = "cuda",
                 ncu: str | None = None, timeout_s: float = 600.0,
                 optimizer: str = DEFAULT_OPTIMIZER, tolerance: str | float | None = None) -> None:
        from autoprofiler_env.harness import Evaluator, HarnessConfig
        from autoprofiler_env.problems import load_problem, load_suite

        loaded = [load_problem(u) for u in problems] if problems else load_suite()
        self._problems = {p.uri: p for p in loaded}
        # a user names a problem by a suite URI, a suite name or a file path; the episode
        # and every record name it by its URI
        self._uris = {str(ref): p.uri for ref, p in zip(problems or [], loaded)}
        self.sections = ACTION_SECTIONS
        self.metrics = key_metrics(self.sections)
        model = llm_model(optimizer)
        self._llm = model is not None
        if model is None:
            self.optimizer = reference_optimizer(optimizer, device=device, tolerance=tolerance)
        else:
            from autoprofiler_env.optimizers.llm import LLMOptimizer, OpenAIChatBackend

            self.optimizer = LLMOptimizer(OpenAIChatBackend(model=model))
        self.evaluator = Evaluator(HarnessConfig(device=device, tolerance=None if tolerance is None
                                                 else str(tolerance)), timeout_s=timeout_s)
        self.ncu = ncu
        self._profiles: dict[tuple[str, str], Profile] = {}
        self._eager: dict[str, float] = {}

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

    def cost(self, uri: str, section: str) -> tuple[float | None, int]:
        """(None, passes): the passes the catalogue measured for the section alone (ncu
        replays each kernel that many times); its seconds are unknown before profiling."""
        passes = load_catalogue().section(section).passes
        if passes is None:
            raise ProfilingError(f"the section catalogue has no measured passes for {section}: "
                                 "rebuild it (python -m experiments.studies.build_catalogue)")
        return None, passes

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

    def _eager_ms(self, uri: str) -> float:
        """The eager program's median time, timed once per problem by the harness (free: no
        profiling), as the recording timed it."""
        if uri not in self._eager:
            self._eager[uri] = self.evaluator.reference(self._problems[uri]).timing.median_ms
        return self._eager[uri]

    def finish(self, uri: str, sections: tuple[str, ...],
               rng: np.random.Generator | None = None) -> EpisodeOutcome:
        problem = self._problems[uri]
        profile = self.profile(uri, sections) if sections else None
        if not self._llm:  # the reference optimizers read the eager time (launch overhead)
            candidate = self.optimizer.optimize(problem, profile, eager_ms=self._eager_ms(uri))
        else:
            candidate = self.optimizer.optimize(problem, profile)
        if candidate.error:  # an LLM reply with no code: judged as incorrect, never run
            return EpisodeOutcome(candidate.producer, candidate.reason, False, None,
                                  candidate.error.split(":")[0])
        result = self.evaluator.evaluate(problem, candidate.source)
        return EpisodeOutcome(candidate.producer, candidate.reason, result.correct,
                              result.speedup, result.error_name, result.reference_ms,
                              result.candidate_ms)
