"""Building a dataset file from what a GPU recorded: single-section ncu runs (saved
:class:`~autoprofiler_env.profiler.runner.NcuRun` folders), reference timings and candidate
outcomes (JSON lines)."""

from __future__ import annotations

import datetime
from dataclasses import replace
from pathlib import Path

from autoprofiler_env.dataset.costs import CostModel
from autoprofiler_env.dataset.format import DatasetFile, Outcome, ProblemRecord, compact
from autoprofiler_env.errors import DatasetError
from autoprofiler_env.features import static_features
from autoprofiler_env.jsonlines import read_jsonl
from autoprofiler_env.optimizers.reference import EVIDENCE_METRICS
from autoprofiler_env.problems import load_problem
from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS, load_catalogue
from autoprofiler_env.profiler.parse import cut, profiles_from_run
from autoprofiler_env.profiler.records import Profile, ProfileCost
from autoprofiler_env.profiler.runner import DURATION_METRIC, NcuRun, first_unprimed

MODELLED_SETS = ("set:basic", "set:detailed")
"""The sets whose cost a dataset records besides the full set's (measured or modelled)."""


def kept_metrics() -> frozenset[str]:
    """The metrics a dataset keeps per kernel: every action section's header metrics, the
    reference optimizer's evidence and the kernel duration."""
    catalogue = load_catalogue()
    headers = {name for s in ACTION_SECTIONS for _, name in catalogue.section(s).header}
    return frozenset(headers | set(EVIDENCE_METRICS) | {DURATION_METRIC})


def build(run_dirs: list[Path], reference_rows: list[dict], outcome_rows: list[dict],
          metadata: dict | None = None, llm_rows: list[dict] | None = None,
          sections: tuple[str, ...] = ACTION_SECTIONS, complete: bool = False,
          tolerance_rows: list[dict] | None = None) -> DatasetFile:
    """A dataset of the problems that have a reference timing and the evidence of each of
    ``sections`` (the action set; problems with less are left out), and with ``complete``
    only those with the outcome of every transformation that applies (what the replay
    environment needs) or with an LLM optimizer's outcomes. ``metadata["left_out"]``
    names each problem of the recording that was left out, and why.

    ``run_dirs``: saved ncu runs, each with one section or with the sections of one of ncu's
    sets. The first problem of a run without the driver's primer paid ncu's start-up in its
    cost: a primed run of the same configuration replaces it; where there is none, its cost
    is modelled if the full set's run exists, else kept (``metadata["unprimed_costs"]`` lists
    the costs that still hold ncu's start-up: the full set's, or a section's without one).
    A section's evidence on a problem is cut out of the problem's run of the full set
    (:func:`~autoprofiler_env.profiler.parse.cut`), or, where the problem has none, taken from
    its run of that section alone. What collecting a section (or the basic or detailed set)
    alone costs is the measured cost where that run exists, else the :class:`CostModel`'s
    prediction from the full set's cost, fitted on the problems that have both; the record's
    ``modelled_costs`` names those. ``outcome_rows``: the candidates' outcomes
    (``uri, transformation, correct, error_kind, candidate_ms, ... speedup``).
    ``tolerance_rows``: outcomes of the same candidates judged again by a judge that stores
    ``tolerance_needed`` (``experiments/studies/rejudge.py``); a row lends its ``tolerance_needed``
    to a recorded outcome without one when the two verdicts agree, nothing else.
    """
    keep = kept_metrics()
    catalogue = load_catalogue()
    sets = {tuple(sorted(v)): k for k, v in catalogue.sets.items()}
    alone: dict[str, dict[str, Profile]] = {}  # uri -> section or set -> profile of that run
    unprimed: set[tuple[str, str]] = set()  # (uri, key) whose cost holds ncu's start-up
    ncu_version = ""
    for directory in run_dirs:  # a problem's later run of the same configuration wins
        run = NcuRun.load(directory)
        set_name = sets.get(tuple(sorted(run.sections))) if len(run.sections) > 1 else None
        if len(run.sections) != 1 and set_name is None:
            continue
        ncu_version = run.ncu_version or ncu_version
        key = f"set:{set_name}" if set_name else run.sections[0]
        first = first_unprimed(run.status)
        for p in profiles_from_run(run)[0]:
            runs = alone.setdefault(p.problem_uri, {})
            if p.problem_uri == first:  # the first problem of a run without the primer
                if key in runs and (p.problem_uri, key) not in unprimed:
                    continue  # a primed run's cost is kept
                unprimed.add((p.problem_uri, key))
            else:
                unprimed.discard((p.problem_uri, key))
            runs[key] = p
    model = CostModel.fit({name: [(runs[name].cost, runs["set:full"].cost)
                                  for uri, runs in alone.items() if name in runs
                                  and "set:full" in runs
                                  and _same_kernels(runs[name], runs["set:full"])
                                  and not {(uri, name), (uri, "set:full")} & unprimed]
                           for name in (*sections, *MODELLED_SETS)})
    profiles: dict[str, dict] = {}
    set_costs: dict[str, dict] = {}
    modelled: dict[str, tuple[str, ...]] = {}
    for uri, runs in alone.items():
        if "set:full" in runs or all(s in runs for s in sections):
            profiles[uri], set_costs[uri], modelled[uri] = evidence_and_costs(
                runs, sections, model, catalogue, keep,
                unprimed=frozenset(k for u, k in unprimed if u == uri))
    eager = {r["uri"]: r for r in reference_rows if r.get("error") is None}
    outcomes: dict[str, dict] = {}
    for r in outcome_rows:
        outcomes.setdefault(r["uri"], {})[r["transformation"]] = Outcome(
            transformation=r["transformation"], correct=bool(r["correct"]),
            error_kind=r.get("error_kind"), median_ms=r.get("candidate_ms"),
            p20_ms=r.get("candidate_p20_ms"), p80_ms=r.get("candidate_p80_ms"),
            speedup=r.get("speedup"), max_abs_error=r.get("max_abs_error"),
            tolerance_needed=r.get("tolerance_needed"))
    for r in tolerance_rows or []:  # judged again (judge 2): only what it needs is taken
        old = outcomes.get(r["uri"], {}).get(r["transformation"])
        if old is not None and old.tolerance_needed is None and r.get("tolerance_needed") \
                is not None and bool(r["correct"]) == old.correct:
            outcomes[r["uri"]][r["transformation"]] = replace(
                old, tolerance_needed=r["tolerance_needed"])
    llm: dict[str, dict] = {}
    for r in sorted(llm_rows or [], key=lambda r: (r["uri"], r["model"], r["sections"],
                                                   r["repeat"])):
        llm.setdefault(r["uri"], {}).setdefault(r["model"], {}).setdefault(
            r["sections"], []).append(Outcome(
                transformation=r["model"], correct=bool(r["correct"]),
                error_kind=r.get("error_kind"), median_ms=r.get("candidate_ms"),
                speedup=r.get("speedup")))
    device = next(iter(eager.values()), {}).get("device", "cuda")
    records, left_out = {}, {}
    for uri in sorted(set(alone) | set(eager) | set(outcomes)):
        why = ("no reference timing" if uri not in eager
               else "not the evidence of every section" if uri not in profiles
               else "not every candidate's outcome" if complete and uri not in llm
               and _unrecorded(uri, outcomes.get(uri, {}), device) else None)
        if why is not None:
            left_out[uri] = why
            continue
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
            llm_outcomes=llm.get(uri, {}), modelled_costs=modelled.get(uri, ()))
    sections = sections if records else ()
    first = next(iter(eager.values()), {})
    meta = {"gpu": first.get("gpu"), "cuda": first.get("cuda"), "torch": first.get("torch"),
            "ncu": ncu_version, "built": datetime.date.today().isoformat(),
            "tolerance": {"atol": 1e-2, "rtol": 1e-2},
            "timing": "median of CUDA-event trials, L2 flushed between trials",
            "optimizer": "reference",
            "evidence": "each section cut out of one run of ncu's full set per problem "
                        "(docs/profiler.md: the same choices as runs of the sections)",
            "cost_model": model.to_dict(), "left_out": left_out,
            "unprimed_costs": _unprimed_costs(unprimed, records, modelled),
            **(metadata or {})}
    return DatasetFile(meta, sections, records)


def _unprimed_costs(unprimed: set[tuple[str, str]], records: dict,
                    modelled: dict[str, tuple[str, ...]]) -> dict[str, list[str]]:
    """Per kept problem, the costs in its record that hold ncu's start-up: the full set's,
    or a section's or set's that could not be modelled."""
    out: dict[str, list[str]] = {}
    for uri, key in sorted(unprimed):
        if uri in records and (key == "set:full" or key not in modelled[uri]):
            out.setdefault(uri, []).append(key)
    return out


def _same_kernels(run: Profile, full: Profile) -> bool:
    """Whether a run alone profiled as many kernels as the problem's full-set run: a run
    without the kernel cap (a batched one) of a problem that has more than ``MAX_KERNELS``
    measured another amount of work, and its cost is modelled instead."""
    return run.cost.n_kernels == full.cost.n_kernels


def _unrecorded(uri: str, outcomes: dict, device: str) -> set[str]:
    """The transformations that apply to the problem on ``device`` without an outcome."""
    from autoprofiler_env.optimizers import applicable

    problem = load_problem(uri)
    return {t.name for t in applicable(problem, static_features(problem), device)} - set(outcomes)


def evidence_and_costs(runs: dict[str, Profile], sections: tuple[str, ...], model: CostModel,
                       catalogue=None, keep: frozenset[str] | None = None,
                       unprimed: frozenset[str] = frozenset()
                       ) -> tuple[dict[str, Profile], dict[str, ProfileCost], tuple[str, ...]]:
    """One problem's evidence per section, its set costs and the names whose cost is modelled,
    from its runs (``runs``: section or ``"set:NAME"`` -> the profile of that run). A basic or
    detailed set that was neither measured nor can be modelled is left out; a section raises
    DatasetError. A measured cost is used where its run profiled the kernels the full set's
    run did (:func:`_same_kernels`) and, when the full set's run exists, where its run was
    primed (``unprimed``: the names whose run was not)."""
    catalogue = catalogue or load_catalogue()
    full = runs.get("set:full")
    profiles, set_costs, modelled = {}, {}, []
    for name in (*sections, *MODELLED_SETS):
        if name in runs and (full is None or (_same_kernels(runs[name], full)
                                              and name not in unprimed)):
            cost = runs[name].cost
        elif full is not None and (name in model.fractions or not name.startswith("set:")):
            passes = (catalogue.set_passes[name[4:]] if name.startswith("set:")
                      else catalogue.section(name).passes)
            cost = model.predict(name, full.cost, passes)
            modelled.append(name)
        else:
            continue
        if name.startswith("set:"):
            set_costs[name[4:]] = cost
        else:
            evidence = cut(full, (name,), cost, catalogue) if full is not None else runs[name]
            profiles[name] = compact(evidence, keep) if keep is not None else evidence
    if full is not None:
        set_costs["full"] = full.cost
    return profiles, set_costs, tuple(modelled)


def build_from_folders(run_root: Path, reference: Path, outcomes: Path | None = None,
                       metadata: dict | None = None, llm: Path | None = None,
                       more_runs: tuple[Path, ...] = (), complete: bool = False,
                       tolerances: Path | None = None) -> DatasetFile:
    """:func:`build` from a folder of saved ncu runs (any depth), and any in ``more_runs``,
    and the logs (``tolerances``: the rows of a judging again, see :func:`build`)."""
    run_dirs = sorted(p.parent for root in (*more_runs, run_root)
                      for p in Path(root).rglob("run.json"))
    return build(run_dirs, read_jsonl(reference), read_jsonl(outcomes) if outcomes else [],
                 metadata, read_jsonl(llm) if llm else None, complete=complete,
                 tolerance_rows=read_jsonl(tolerances) if tolerances else None)


def build_from_recording(recording: Path, metadata: dict | None = None,
                         more_runs: tuple[Path, ...] = (), complete: bool = False,
                         tolerances: Path | None = None) -> DatasetFile:
    """:func:`build` from a recording folder (see :mod:`.record`), with the saved ncu runs in
    ``more_runs`` (a profiler study's sections and sets alone: measured costs) besides."""
    recording = Path(recording)
    if not (recording / "reference.jsonl").exists():
        raise DatasetError(f"{recording} is not a recording: it has no reference.jsonl; make "
                           "one with `autoprofiler record --out DIR` on a GPU")
    from autoprofiler_env.dataset.record import recording_cost

    candidates, llm = recording / "candidates.jsonl", recording / "llm.jsonl"
    metadata = {"recording_cost": recording_cost(recording), **(metadata or {})}
    return build_from_folders(recording, recording / "reference.jsonl",
                              candidates if candidates.exists() else None, metadata,
                              llm if llm.exists() else None, more_runs, complete, tolerances)
