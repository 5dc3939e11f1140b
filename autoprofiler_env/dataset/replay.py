"""Answering from the recorded dataset, on a CPU: the profile a set of sections gives, what
it costs, and the outcome of a candidate.

A profile of sections S is the merge of the recorded single-section profiles: kernel by kernel
(the same program launches the same kernels whatever is collected), the metrics, the header
lines and the findings of each section of S. docs/profiler.md measures how close that is to a
run with S: metrics within 5% for 93-98% of values, the same OPT findings for 97-100% of
kernels. Its cost is the sum of the sections' costs (each section's cost is that of
collecting it alone; ncu shares some passes between sections, so this is an upper bound).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from autoprofiler_env.dataset.format import DatasetFile, Outcome, ProblemRecord
from autoprofiler_env.errors import NotRecordedError
from autoprofiler_env.optimizers import DEFAULT_OPTIMIZER
from autoprofiler_env.profiler.merge import merge_profiles
from autoprofiler_env.profiler.records import Profile, ProfileCost

DEFAULT_DATASET = Path(__file__).parent / "data" / "h200-reference.json.gz"
"""The dataset shipped with the package (recorded on an H200 with the first reference
optimizer, ``"reference-v1"``)."""
LLM_MISSING = ("raise", "largest_recorded_subset")
"""The policies for an LLM optimizer's (problem, section set) that was not recorded
(:meth:`Dataset.llm_outcome`)."""


class Dataset:
    """A loaded, checked dataset."""

    def __init__(self, content: DatasetFile) -> None:
        self.content = content
        self._order = {s: i for i, s in enumerate(content.sections)}
        self._profile = lru_cache(maxsize=65536)(self._merge)

    def __getstate__(self) -> dict:  # the cache is rebuilt, not pickled
        return {"content": self.content}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["content"])

    @classmethod
    def load(cls, path: str | Path) -> Dataset:
        return cls(DatasetFile.load(Path(path)))

    @property
    def metadata(self) -> dict:
        return self.content.metadata

    @property
    def sections(self) -> tuple[str, ...]:
        return self.content.sections

    def uris(self, split: str | None = None) -> list[str]:
        return [u for u, r in self.content.problems.items() if split is None or r.split == split]

    def record(self, uri: str) -> ProblemRecord:
        try:
            return self.content.problems[uri]
        except KeyError:
            raise NotRecordedError(f"the dataset holds no problem {uri!r}") from None

    def canonical(self, sections) -> tuple[str, ...]:
        """The sections in the dataset's order, without repeats.

        Raises:
            NotRecordedError: a section the dataset did not record.
        """
        unknown = [s for s in sections if s not in self._order]
        if unknown:
            raise NotRecordedError(f"sections not recorded in this dataset: {unknown}; it has "
                                   f"{', '.join(self.sections)}")
        return tuple(sorted(set(sections), key=self._order.__getitem__))

    def bearing(self, uri: str, optimizer) -> tuple[str, ...]:
        """The sections whose recorded evidence an optimizer's rules read on ``uri``, in the
        dataset's order: those with a metric of ``optimizer.evidence_metrics`` or a finding
        of a rule in ``optimizer.evidence_findings`` (None: any finding)."""
        record = self.record(uri)
        metrics, findings = frozenset(optimizer.evidence_metrics), optimizer.evidence_findings
        return tuple(s for s in self.sections if any(
            not metrics.isdisjoint(k.metrics) or any(
                findings is None or f.rule in findings for f in k.findings)
            for k in record.profiles[s].kernels))

    def profile(self, uri: str, sections, keep: frozenset[str] | None = None) -> Profile:
        """The profile that collecting ``sections`` gives for ``uri``; with ``keep``, its
        kernels carry only those metrics (what an optimizer reads: quicker to merge)."""
        return self._profile(uri, self.canonical(sections), keep)

    def cost(self, uri: str, sections) -> ProfileCost:
        return self.profile(uri, sections).cost

    def outcome(self, uri: str, candidate: str, tolerance=None,
                optimizer: str = DEFAULT_OPTIMIZER) -> Outcome:
        """The recorded outcome of ``optimizer``'s candidate (a transformation's name, or a
        composition's: ``"compile+cuda_graph"``), under ``tolerance`` (a regime of
        :mod:`autoprofiler_env.harness.tolerance`; None: as recorded).

        Raises:
            NotRecordedError: the optimizer has no outcomes for this problem, or not this
                candidate's, or its record cannot decide ``tolerance`` (the replay never
                invents an outcome).
        """
        outcomes = self.record(uri).outcomes.get(optimizer)
        if not outcomes:
            recorded = ", ".join(sorted(self.record(uri).outcomes)) or "none"
            raise NotRecordedError(f"no recorded outcomes of the optimizer {optimizer!r} for "
                                   f"{uri}; optimizers recorded for it: {recorded}")
        if candidate not in outcomes:
            raise NotRecordedError(f"no recorded outcome of {candidate!r} by the optimizer "
                                   f"{optimizer!r} for {uri}; recorded: "
                                   f"{', '.join(sorted(outcomes))}")
        outcome = outcomes[candidate]
        return outcome if tolerance is None else outcome.judged(tolerance)

    def outcomes(self, uri: str, optimizer: str) -> dict[str, Outcome]:
        """``optimizer``'s recorded outcomes for ``uri``, by candidate (as recorded, in the
        order stored); empty where it has none.

        Raises:
            NotRecordedError: the dataset holds no such problem.
        """
        return self.record(uri).outcomes.get(optimizer, {})

    def optimizers(self) -> tuple[str, ...]:
        """The optimizers with any recorded outcome (not the LLM ones), sorted."""
        return tuple(sorted({m for r in self.content.problems.values()
                             for m, keyed in r.outcomes.items() if keyed}))

    def llm_outcome(self, uri: str, model: str, sections, rng=None,
                    missing: str = "raise") -> Outcome:
        """A recorded outcome of an LLM optimizer for (problem, section set).

        With several repeats, one is drawn with ``rng`` (the environment's seeded generator),
        or the first without one. A key that was not recorded follows ``missing``:

        - ``"raise"`` (default): :class:`NotRecordedError`;
        - ``"largest_recorded_subset"``: the recorded key with the most sections that are all
          in the asked set (the profile the model saw was a part of this one), the empty set
          included if recorded; still NotRecordedError if none is.

        Never a silent default: the fallback is named by the caller.
        """
        if missing not in LLM_MISSING:
            raise ValueError(f"missing must be one of {LLM_MISSING}, got {missing!r}")
        keyed = self.record(uri).llm_outcomes.get(model)
        if not keyed:
            raise NotRecordedError(f"no outcomes of the LLM optimizer {model!r} for {uri}")
        key = "+".join(self.canonical(sections))
        if key not in keyed and missing == "largest_recorded_subset":
            asked = set(self.canonical(sections))
            subsets = [k for k in keyed if set(filter(None, k.split("+"))) <= asked]
            if subsets:
                key = max(subsets, key=lambda k: (len(list(filter(None, k.split("+")))), k))
        if key not in keyed:
            raise NotRecordedError(f"{model!r} on {uri} was not recorded with sections "
                                   f"{key or '(none)'}; recorded: {sorted(keyed)}")
        repeats = keyed[key]
        return repeats[int(rng.integers(len(repeats)))] if rng is not None else repeats[0]

    def _merge(self, uri: str, sections: tuple[str, ...],
               keep: frozenset[str] | None = None) -> Profile:
        record = self.record(uri)
        return merge_profiles(uri, sections, [record.profiles[s] for s in sections], keep)

    def info(self) -> dict:
        """Metadata, counts and checksum, as ``autoprofiler dataset info`` prints them
        (``outcomes``: the (problem, candidate) pairs recorded per optimizer)."""
        problems = self.content.problems.values()
        return {
            "metadata": self.metadata,
            "problems": len(self.content.problems),
            "splits": {s: sum(r.split == s for r in problems) for s in ("train", "val", "test")},
            "sections": list(self.sections),
            "profiles": sum(len(r.profiles) for r in problems),
            "outcomes": {m: sum(len(r.outcomes.get(m, {})) for r in problems)
                         for m in self.optimizers()},
            "llm_outcomes": sum(len(reps) for r in problems for keyed in r.llm_outcomes.values()
                                for reps in keyed.values()),
            "complete": all(set(r.profiles) == set(self.sections) for r in problems),
        }
