"""Building a dataset file from what a GPU recorded: single-section ncu runs (saved
:class:`~autoprofiler_env.profiler.runner.NcuRun` folders), reference timings and candidate
outcomes (JSON lines)."""

from __future__ import annotations

import datetime
from pathlib import Path

from autoprofiler_env.dataset.format import DatasetFile, Outcome, ProblemRecord, compact
from autoprofiler_env.errors import DatasetError
from autoprofiler_env.features import static_features
from autoprofiler_env.jsonlines import read_jsonl
from autoprofiler_env.optimizers.reference import EVIDENCE_METRICS
from autoprofiler_env.problems import load_problem
from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS, load_catalogue
from autoprofiler_env.profiler.parse import profiles_from_run
from autoprofiler_env.profiler.runner import DURATION_METRIC, NcuRun


def kept_metrics() -> frozenset[str]:
    """The metrics a dataset keeps per kernel: every action section's header metrics, the
    reference optimizer's evidence and the kernel duration."""
    catalogue = load_catalogue()
    headers = {name for s in ACTION_SECTIONS for _, name in catalogue.section(s).header}
    return frozenset(headers | set(EVIDENCE_METRICS) | {DURATION_METRIC})


def build(run_dirs: list[Path], reference_rows: list[dict], outcome_rows: list[dict],
          metadata: dict | None = None, llm_rows: list[dict] | None = None,
          sections: tuple[str, ...] = ACTION_SECTIONS) -> DatasetFile:
    """A dataset of the problems that have a reference timing and a profile of each of
    ``sections`` (the action set; problems with fewer are left out).

    ``run_dirs``: saved ncu runs with one section each (the evidence) or with the sections of
    one of ncu's sets (their cost); a problem's later run of a section replaces an earlier one. ``outcome_rows``: the transformation study's rows
    (``uri, transformation, correct, error_kind, candidate_ms, ... speedup``).
    """
    keep = kept_metrics()
    sets = {tuple(sorted(v)): k for k, v in load_catalogue().sets.items()}
    profiles: dict[str, dict] = {}
    set_costs: dict[str, dict] = {}
    ncu_version = ""
    for directory in run_dirs:
        run = NcuRun.load(directory)
        set_name = sets.get(tuple(sorted(run.sections))) if len(run.sections) > 1 else None
        if len(run.sections) != 1 and set_name is None:
            continue
        ncu_version = run.ncu_version or ncu_version
        for p in profiles_from_run(run)[0]:
            if set_name:
                set_costs.setdefault(p.problem_uri, {})[set_name] = p.cost
            else:
                profiles.setdefault(p.problem_uri, {})[run.sections[0]] = compact(p, keep)
    eager = {r["uri"]: r for r in reference_rows if r.get("error") is None}
    outcomes: dict[str, dict] = {}
    for r in outcome_rows:
        outcomes.setdefault(r["uri"], {})[r["transformation"]] = Outcome(
            transformation=r["transformation"], correct=bool(r["correct"]),
            error_kind=r.get("error_kind"), median_ms=r.get("candidate_ms"),
            p20_ms=r.get("candidate_p20_ms"), p80_ms=r.get("candidate_p80_ms"),
            speedup=r.get("speedup"))
    llm: dict[str, dict] = {}
    for r in sorted(llm_rows or [], key=lambda r: (r["uri"], r["model"], r["sections"],
                                                   r["repeat"])):
        llm.setdefault(r["uri"], {}).setdefault(r["model"], {}).setdefault(
            r["sections"], []).append(Outcome(
                transformation=r["model"], correct=bool(r["correct"]),
                error_kind=r.get("error_kind"), median_ms=r.get("candidate_ms"),
                speedup=r.get("speedup")))
    # a problem is kept only with every action section recorded (a partial recording
    # leaves the rest out instead of shrinking the dataset's action set)
    complete = {uri for uri, by_section in profiles.items()
                if all(s in by_section for s in sections)}
    records = {}
    for uri in sorted(complete & set(eager)):
        problem = load_problem(uri)
        row = eager[uri]
        records[uri] = ProblemRecord(
            uri=uri, level=problem.level, split=problem.split, tags=problem.tags,
            features=static_features(problem),
            eager={k: row.get(k) for k in ("median_ms", "p20_ms", "p80_ms", "n_trials",
                                           "peak_memory_mb")},
            profiles=dict(sorted(profiles[uri].items(),
                                 key=lambda kv: ACTION_SECTIONS.index(kv[0])
                                 if kv[0] in ACTION_SECTIONS else 99)),
            set_costs=set_costs.get(uri, {}), outcomes=outcomes.get(uri, {}),
            llm_outcomes=llm.get(uri, {}))
    sections = sections if records else ()
    first = next(iter(eager.values()), {})
    meta = {"gpu": first.get("gpu"), "cuda": first.get("cuda"), "torch": first.get("torch"),
            "ncu": ncu_version, "built": datetime.date.today().isoformat(),
            "tolerance": {"atol": 1e-2, "rtol": 1e-2},
            "timing": "median of CUDA-event trials, L2 flushed between trials",
            "optimizer": "reference", **(metadata or {})}
    return DatasetFile(meta, sections, records)


def build_from_folders(run_root: Path, reference: Path, outcomes: Path | None = None,
                       metadata: dict | None = None, llm: Path | None = None) -> DatasetFile:
    """:func:`build` from a folder of saved ncu runs (any depth) and the logs."""
    run_dirs = sorted(p.parent for p in Path(run_root).rglob("run.json"))
    return build(run_dirs, read_jsonl(reference), read_jsonl(outcomes) if outcomes else [],
                 metadata, read_jsonl(llm) if llm else None)


def build_from_recording(recording: Path, metadata: dict | None = None) -> DatasetFile:
    """:func:`build` from a recording folder (see :mod:`.record`)."""
    recording = Path(recording)
    if not (recording / "reference.jsonl").exists():
        raise DatasetError(f"{recording} is not a recording: it has no reference.jsonl; make "
                           "one with `autoprofiler record --out DIR` on a GPU")
    candidates, llm = recording / "candidates.jsonl", recording / "llm.jsonl"
    return build_from_folders(recording, recording / "reference.jsonl",
                              candidates if candidates.exists() else None, metadata,
                              llm if llm.exists() else None)
