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

import threading
from collections import Counter
from functools import lru_cache
from pathlib import Path

from autoprofiler_env.dataset.format import DatasetFile, Outcome, ProblemRecord
from autoprofiler_env.dataset.names import DEFAULT_NAME, SHIPPED, resolve_dataset
from autoprofiler_env.errors import DatasetError, NotRecordedError
from autoprofiler_env.harness.tolerance import (
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    PRESETS,
    admits_constant,
)
from autoprofiler_env.optimizers import DEFAULT_OPTIMIZER
from autoprofiler_env.problems.loaders import SPLITS
from autoprofiler_env.profiler.merge import merge_profiles
from autoprofiler_env.profiler.records import Profile, ProfileCost

DEFAULT_DATASET = SHIPPED[DEFAULT_NAME].path
"""The default dataset's file: the suite's, shipped with the package (recorded on an H200;
:mod:`.names` lists the shipped datasets by name)."""
LLM_MISSING = ("raise", "largest_recorded_subset")
"""The policies for an LLM optimizer's (problem, section set) that was not recorded
(:meth:`Dataset.llm_outcome`)."""


_LOADED: dict[tuple, Dataset] = {}
_LOADED_LOCK = threading.Lock()
_LOADED_MAX = 4


def operator_cap(counts, where: str) -> int | None:
    """The operator cap that cut forwards, from their ``(ops, ops_profiled)`` counts (None
    where unknown): the ``ops_profiled`` of each forward that ran more; None where none was
    cut.

    Raises:
        DatasetError: forwards were cut at different caps (``where`` names them).
    """
    caps = {profiled for ops, profiled in counts
            if isinstance(ops, int) and isinstance(profiled, int) and profiled < ops}
    if len(caps) > 1:
        raise DatasetError(f"{where} cut forwards at different operator caps ({sorted(caps)}): "
                           "one recording takes one --max-ops")
    return caps.pop() if caps else None


REFERENCE_DRIFT = 1.2
"""``dataset info``'s ``reference_drift`` counts the problems whose eager reference's times, in
the judgements of their candidates, span more than this factor (:meth:`Dataset.
reference_drift`); a problem's own p20-p80 spread is a few percent."""


class Dataset:
    """A loaded, checked dataset (read-only: :meth:`load` hands one object to every caller
    that loads the same file)."""

    def __init__(self, content: DatasetFile) -> None:
        self.content = content
        self._order = {s: i for i, s in enumerate(content.sections)}
        self._profile = lru_cache(maxsize=65536)(self._merge)
        self._default_optimizer: str | None = None  # read-only content: chosen once

    def __getstate__(self) -> dict:  # the cache is rebuilt, not pickled
        return {"content": self.content}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["content"])

    @classmethod
    def load(cls, name_or_path: str | Path | None = None) -> Dataset:
        """Loads a shipped dataset by name (``"suite"``, ``"kernelbench"``), or a file; None:
        the default (:func:`~autoprofiler_env.dataset.names.resolve_dataset`). A file this
        process loaded before, unchanged since, is not read again: the same object is
        returned.

        Raises:
            DatasetError: an unknown name, a shipped one not built yet, or a file that is
                missing or damaged (:meth:`DatasetFile.load`).
        """
        path = Path(resolve_dataset(name_or_path))
        try:
            stat = path.stat()
        except OSError:  # DatasetFile.load says what is wrong with it
            return cls(DatasetFile.load(path))
        # one load per file and process (an environment made per worker or per evaluation
        # otherwise reads and checks the same file each time): the key changes when the file
        # does, and nothing writes to a loaded dataset
        key = (cls, str(path.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns)
        with _LOADED_LOCK:
            loaded = _LOADED.pop(key, None)
            if loaded is None:
                loaded = cls(DatasetFile.load(path))
            _LOADED[key] = loaded  # the most recently used last
            while len(_LOADED) > _LOADED_MAX:
                _LOADED.pop(next(iter(_LOADED)))
        return loaded

    def default_optimizer(self) -> str:
        """The optimizer an environment on this dataset replays unless told: the dataset's
        own (``metadata["default_optimizer"]``: a KernelBench dataset holds the current
        reference optimizer's candidates only); else the package's
        (:data:`~autoprofiler_env.optimizers.DEFAULT_OPTIMIZER`) where the dataset records it
        for every problem; else a reference optimizer it records for every problem (a
        study's dataset of ``reference-v1`` alone, or one whose re-recording is partial,
        replays ``reference-v1``); else the package's where recorded at all; else the first
        optimizer it records.

        Where the package's is recorded for some problems but another is chosen (a partial
        re-recording, or a problem's outcomes lost), a warning says so once, naming a problem
        without it: the replay then answers with another optimizer for every problem."""
        if self._default_optimizer is None:
            self._default_optimizer = self._choose_default_optimizer()
        return self._default_optimizer

    def _choose_default_optimizer(self) -> str:
        from autoprofiler_env.optimizers import REFERENCE_OPTIMIZERS

        named = self.metadata.get("default_optimizer")
        if named:
            return named
        recorded = self.optimizers()
        problems = self.content.problems.values()
        complete = [m for m in recorded if all(m in r.outcomes for r in problems)]
        for name in (DEFAULT_OPTIMIZER, *REFERENCE_OPTIMIZERS):
            if name in complete:
                if name != DEFAULT_OPTIMIZER and DEFAULT_OPTIMIZER in recorded:
                    self._warn_fallback(name)
                return name
        if DEFAULT_OPTIMIZER in recorded or not recorded:
            return DEFAULT_OPTIMIZER
        return recorded[0]

    def _warn_fallback(self, chosen: str) -> None:
        """Says that the package's optimizer, recorded for only some problems, is not the one
        replayed by default."""
        from autoprofiler_env.errors import warn

        records = self.content.problems.values()
        lacking = [r.uri for r in records if DEFAULT_OPTIMIZER not in r.outcomes]
        warn(
            f"the dataset records the optimizer {DEFAULT_OPTIMIZER!r} for "
            f"{len(records) - len(lacking)} of its {len(records)} problems (not for "
            f"{lacking[0]}{f' and {len(lacking) - 1} more' if len(lacking) > 1 else ''}): it "
            f"replays {chosen!r}, recorded for every problem, unless told; name "
            f"optimizer={DEFAULT_OPTIMIZER!r} to replay that one on its problems, or restore "
            "the dataset if it lost outcomes")

    @property
    def metadata(self) -> dict:
        return self.content.metadata

    @property
    def sections(self) -> tuple[str, ...]:
        return self.content.sections

    @property
    def max_ops(self) -> int | None:
        """The operator cap to profile its problems under as they were recorded (the
        recorder's ``--max-ops``), as the profiles show it: the ``ops_profiled`` of the
        forwards it cut; where it cut none, the longest forward's count if the profiler's
        default (``MAX_OPS``) would cut it; else None (the default profiles them as recorded;
        so for files built before the counts were kept). A live profile meant to match the
        replay's is taken under it.

        Raises:
            DatasetError: the profiles were cut under different caps.
        """
        from autoprofiler_env.profiler.runner import MAX_OPS

        counts = [(p.ops, p.ops_profiled) for r in self.content.problems.values()
                  for p in r.profiles.values()]
        cap = operator_cap(counts, "the dataset's profiles")
        if cap is not None:
            return cap
        longest = max((ops for ops, _ in counts if ops is not None), default=0)
        return longest if longest > MAX_OPS else None

    def launch_capped(self, uri: str) -> bool | None:
        """Whether ncu's launch cap (``MAX_KERNELS``) cut the recorded profile of ``uri``;
        None where it is not known (a file built before the counts were kept, or a problem
        the dataset lacks). A live profile meant to match the replay's is capped only where
        the recording's was (a batched run caps nothing; the recorder profiles a problem
        alone and capped only where it timed out batched)."""
        record = self.content.problems.get(uri)
        profiles = list(record.profiles.values()) if record is not None else []
        if not profiles or any(p.ops is None for p in profiles):
            return None
        return any(p.kernels_capped for p in profiles)

    def uris(self, split: str | None = None) -> list[str]:
        return [u for u, r in self.content.problems.items() if split is None or r.split == split]

    def reference_drift(self, optimizer: str | None = None) -> dict[str, float]:
        """Per problem with two or more timed candidates (of ``optimizer``, default the
        dataset's), how far apart the eager reference's times were in their judgements: the
        largest over the smallest of ``speedup x candidate time``, each the reference timed
        beside that candidate. The judge times them interleaved so that drift cancels in
        the speedup; where the reference's own time moved this much between judgements
        (level-3 networks on the H200: up to 2x), the problem's candidates are ranked by
        speedups measured in different conditions (docs/dataset.md, "Known problems")."""
        optimizer = optimizer or self.default_optimizer()
        drift = {}
        for uri, record in self.content.problems.items():
            times = [o.speedup * o.median_ms for o in record.outcomes.get(optimizer, {}).values()
                     if o.speedup and o.median_ms]
            if len(times) > 1:
                drift[uri] = max(times) / min(times)
        return drift

    def near_train(self, split: str = "test", train=None, within: float | None = None
                   ) -> dict[str, str]:
        """The problems of ``split`` with a near twin in the train split, each with it
        (:func:`~autoprofiler_env.dataset.splits.near_train`: the same op histogram, every
        other static feature within ``within``, by default a factor of about 2.2); ``train``:
        the train problems to look among (default: the split's every problem; an
        environment's, where a tolerance leaves some out)."""
        from autoprofiler_env.dataset.splits import NEAR_LOG10, near_train
        from autoprofiler_env.features import FEATURE_NAMES

        among = None if train is None else set(train)
        return near_train({u: (r.split, r.features.vector())
                           for u, r in self.content.problems.items()
                           if among is None or r.split != "train" or u in among},
                          FEATURE_NAMES, split, NEAR_LOG10 if within is None else within)

    def ill_posed(self, tolerance: str | float | None = None) -> dict[str, str]:
        """The problems on which a constant output passes ``tolerance`` (None: the
        recording's), each with the tolerance at which one does (its recorded
        ``constant_needed``): the backends leave them out under that tolerance."""
        if tolerance is None:
            recorded = self.metadata.get("tolerance") or {}
            tolerance = (f"{recorded.get('atol', DEFAULT_ATOL)},"
                         f"{recorded.get('rtol', DEFAULT_RTOL)}")
        ill = {}
        for uri, record in self.content.problems.items():
            needed = record.eager.get("constant_needed")
            if admits_constant(needed, tolerance):
                ill[uri] = "a constant matches at " + ", ".join(
                    f"{dtype} {t:.2g}" for dtype, t in sorted(needed.items()))
        return ill

    def record(self, uri: str) -> ProblemRecord:
        try:
            return self.content.problems[uri]
        except KeyError:
            raise NotRecordedError(f"the dataset holds no problem {uri!r}") from None

    def load_problems(self, refs=None, source: str | Path | None = None) -> list:
        """The problems ``refs`` names (default: all of the dataset's), as the dataset
        recorded them: URI, level, split and tags. A KernelBench problem's file is read from
        the checkout ``source`` and checked against its recorded sha256; a suite URI or name,
        or a file's path, is loaded as :func:`~autoprofiler_env.problems.load_problem` does,
        and a user's copy of a recorded KernelBench file takes that record (its sha256
        checked).

        Raises:
            ProblemNotFoundError: a KernelBench problem without ``source``, or one the
                checkout lacks.
            SourceMismatchError: a file that is not the recorded one.
        """
        from dataclasses import replace

        from autoprofiler_env.errors import ProblemNotFoundError
        from autoprofiler_env.problems import load_problem
        from autoprofiler_env.problems.kernelbench import (
            KernelBenchCheckout,
            check_file,
            identify,
        )

        records = self.content.problems
        by_file = {r.provenance.key: r for r in records.values() if r.provenance is not None}
        checkout = KernelBenchCheckout(source) if source is not None else None
        loaded = []
        for ref in map(str, self.uris() if refs is None else refs):
            record = records.get(ref)
            if record is not None and record.provenance is not None:
                if checkout is None:
                    raise ProblemNotFoundError(
                        ref, "is a KernelBench problem of the dataset: its file is read from "
                        "a KernelBench checkout",
                        f"give source='path/to/KernelBench' (commit "
                        f"{record.provenance.commit or 'unknown'}), or the file's path")
                problem = checkout.problem(record.provenance)  # its sha256 checked
            else:
                problem = load_problem(ref)
                key = identify(problem.path)
                if record is None and key in by_file:  # the user's copy of a recorded file
                    record = by_file[key]
                    check_file(problem.path, record.provenance)
                elif record is None:
                    record = records.get(problem.uri)
            if record is not None:
                problem = replace(problem, uri=record.uri, level=record.level,
                                  split=record.split, tags=record.tags)
            loaded.append(problem)
        return loaded

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

    def profile(self, uri: str, sections, keep: frozenset[str] | None = None,
                cache: bool = True) -> Profile:
        """The profile that collecting ``sections`` gives for ``uri``; with ``keep``, its
        kernels carry only those metrics (what an optimizer reads: quicker to merge).
        ``cache``: kept for the next call with the same arguments (65,536 of them, 4-7 KB
        each); False where the caller keeps what it makes of it (the replay backend's
        outcomes: kept here too, they were 300-460 MB never read again)."""
        return (self._profile if cache else self._merge)(uri, self.canonical(sections), keep)

    def cost(self, uri: str, sections) -> ProfileCost:
        return self.profile(uri, sections).cost

    def full_cost(self, uri: str) -> tuple[float, int]:
        """(seconds, passes) of ncu's full set on ``uri``, as recorded; where it was not, the
        sum of the action sections' seconds and the catalogue's passes of the full set."""
        full = self.record(uri).set_costs.get("full")
        if full is not None:
            return full.replay_s, full.passes
        from autoprofiler_env.profiler.catalogue import load_catalogue

        return (sum(self.cost(uri, [s]).replay_s for s in self.sections),
                load_catalogue().set_passes["full"])

    def outcome(self, uri: str, candidate: str, tolerance=None,
                optimizer: str | None = None) -> Outcome:
        """The recorded outcome of ``optimizer``'s candidate (None: the dataset's
        :meth:`default_optimizer`; a transformation's name, or a
        composition's: ``"compile+cuda_graph"``), under ``tolerance`` (a regime of
        :mod:`autoprofiler_env.harness.tolerance`; None: as recorded).

        Raises:
            NotRecordedError: the optimizer has no outcomes for this problem, or not this
                candidate's, or its record cannot decide ``tolerance`` (the replay never
                invents an outcome).
        """
        if optimizer is None:
            optimizer = self.default_optimizer()
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
            hint = ("" if missing != "raise" else
                    "; record that set (record --parts llm --section-sets), or take the "
                    "largest recorded set within it: the environment's "
                    "llm_missing='largest_recorded_subset' (--llm-missing "
                    "largest_recorded_subset)")
            raise NotRecordedError(f"{model!r} on {uri} was not recorded with sections "
                                   f"{key or '(none)'}; recorded: {sorted(keyed)}{hint}")
        repeats = keyed[key]
        return repeats[int(rng.integers(len(repeats)))] if rng is not None else repeats[0]

    def _merge(self, uri: str, sections: tuple[str, ...],
               keep: frozenset[str] | None = None) -> Profile:
        record = self.record(uri)
        return merge_profiles(uri, sections, [record.profiles[s] for s in sections], keep)

    def info(self, problems: bool = False) -> dict:
        """Metadata, counts and checksum, as ``autoprofiler dataset info`` prints them
        (``outcomes``: the (problem, candidate) pairs recorded per optimizer; ``ill_posed``:
        per tolerance preset, the problems a constant output passes there, which the replay
        leaves out under it: docs/harness.md). A dataset
        with KernelBench problems adds ``kernelbench``: how many per level and split, the
        commits, the device seconds per problem its recording log shows (all its
        ``timings.jsonl``, over the problems recorded), and the problems of its recording
        that the build left out, counted by why (not recorded yet, refused). With
        ``problems``, ``records`` lists each problem: URI, level, split, primary op tag,
        KernelBench file, sha256 and its direct recording seconds
        (``metadata["recording_cost"]["problems"]``; None where the file holds none: the
        suite's, built before they were kept, whose figures docs/dataset.md computes from its
        recording's logs)."""
        records = self.content.problems.values()
        info = self._counts(records)
        recorded = [r for r in records if r.provenance is not None]
        if recorded:
            cost = self.metadata.get("recording_cost", {})
            logged = sum((cost.get("logged_s") or {}).values())
            info["kernelbench"] = {
                "problems": len(recorded),
                "levels": {str(lv): sum(r.level == lv for r in recorded)
                           for lv in sorted({r.level for r in recorded})},
                "commits": sorted({r.provenance.commit or "unknown" for r in recorded}),
                "recording_device_s": round(logged, 1),
                "recording_device_s_per_problem": round(logged / len(recorded), 1),
                "left_out": dict(Counter(self.metadata.get("left_out", {}).values())),
            }
        if problems:
            costs = self.metadata.get("recording_cost", {}).get("problems", {})
            info["records"] = [{
                "uri": r.uri, "level": r.level, "split": r.split,
                "op": r.tags[0] if r.tags else None,
                **({"file": r.provenance.file, "sha256": r.provenance.sha256}
                   if r.provenance is not None else {}),
                "recording_s": costs.get(r.uri, {}).get("total_s")} for r in records]
        return info

    def _counts(self, problems) -> dict:
        cost = self.metadata.get("recording_cost")
        shown = (self.metadata if not isinstance(cost, dict) or "problems" not in cost else
                 {**self.metadata, "recording_cost": {
                     **{k: v for k, v in cost.items() if k != "problems"},
                     "problems": f"{len(cost['problems'])} problems' seconds (--problems)"}})
        return {
            "metadata": shown,
            "problems": len(self.content.problems),
            "splits": {s: sum(r.split == s for r in problems) for s in SPLITS},
            "sections": list(self.sections),
            "profiles": sum(len(r.profiles) for r in problems),
            "outcomes": {m: sum(len(r.outcomes.get(m, {})) for r in problems)
                         for m in self.optimizers()},
            "llm_outcomes": sum(len(reps) for r in problems for keyed in r.llm_outcomes.values()
                                for reps in keyed.values()),
            "complete": all(set(r.profiles) == set(self.sections) for r in problems),
            "ill_posed": {name: len(self.ill_posed(name)) for name in PRESETS},
            # the deal within strata puts near twins on both sides of the splits
            "near_train": {s: len(self.near_train(s)) for s in ("val", "test")},
            # the problems whose reference moved more than REFERENCE_DRIFT between judgements
            "reference_drift": sum(d > REFERENCE_DRIFT for d in self.reference_drift().values()
                                   ) if self.optimizers() else 0,
        }
