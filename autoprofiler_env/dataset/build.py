"""Building a dataset file from what a GPU recorded: single-section ncu runs (saved
:class:`~autoprofiler_env.profiler.runner.NcuRun` folders), reference timings and candidate
outcomes (JSON lines), per optimizer: the recording's own ``candidates.jsonl`` are the first
reference optimizer's (``"reference-v1"``), and other optimizers' recordings come besides
(``optimizer_rows``, ``extra``).

A recording of a KernelBench checkout (one with a ``kernelbench.json`` manifest,
:mod:`.record.kernelbench`) is built by the same :func:`build_from_recording`, given the
checkout (``source``): its ``candidates.jsonl`` are the current reference optimizer's,
planned chunk by chunk (``plan.json``), and each record carries its provenance and the split
the manifest dealt (docs/kernelbench.md)."""

from __future__ import annotations

import datetime
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from autoprofiler_env.dataset.costs import CostModel, NoCostModelError
from autoprofiler_env.dataset.format import V1, DatasetFile, Outcome, ProblemRecord, compact
from autoprofiler_env.dataset.record.llm import unanswered
from autoprofiler_env.errors import DatasetError, warn
from autoprofiler_env.features import static_features
from autoprofiler_env.harness.tolerance import DEFAULT_ATOL, DEFAULT_RTOL
from autoprofiler_env.jsonlines import scan_jsonl
from autoprofiler_env.numeric import is_finite_number
from autoprofiler_env.optimizers.reference import EVIDENCE_METRICS
from autoprofiler_env.problems import Problem, load_problem
from autoprofiler_env.problems.kernelbench import KernelBenchProvenance
from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS, load_catalogue
from autoprofiler_env.profiler.parse import cut, profiles_from_run
from autoprofiler_env.profiler.records import Profile, ProfileCost
from autoprofiler_env.profiler.runner import DURATION_METRIC, NcuRun, first_unprimed


@dataclass(frozen=True)
class CostFallback:
    """Fractions of the full set's cost that a recording without single-section runs borrows
    (:meth:`CostModel.filled`), and the machine they were fitted on (:func:`build` warns
    where it lends them to a recording of another GPU or ncu version)."""

    model: CostModel
    gpu: str | None
    ncu: str | None
    source: str  # what it is, for metadata["cost_model_fallback"]


def suite_fallback() -> CostFallback:
    """The shipped suite dataset's cost model: fitted on its H200 runs of each section alone
    beside the full set (docs/profiler.md)."""
    from autoprofiler_env.dataset.replay import Dataset

    meta = Dataset.load("suite").metadata
    return CostFallback(CostModel.from_dict(meta["cost_model"]), meta.get("gpu"),
                        meta.get("ncu"), f"the suite dataset's (sha256 {meta['sha256']})")


MODELLED_SETS = ("set:basic", "set:detailed")
"""The sets whose cost a dataset records besides the full set's (measured or modelled)."""
REFUSED = "refused by the judge (reference.jsonl's error says why: ill-posed or broken)"
"""Why a problem whose reference the judge refused is left out (``left_out``)."""


def read_log(path: Path) -> list[dict]:
    """A recording's JSON-lines log's records (:func:`~autoprofiler_env.jsonlines.scan_jsonl`);
    a warning names the file and counts the lines dropped that no interrupted run explains
    (lines that are not JSON objects, and records cut off inside the file, where no kill
    leaves one), which a build would otherwise leave out unsaid."""
    scan = scan_jsonl(path)
    rows, unreadable = scan.rows, scan.damaged
    if unreadable:
        shown = ", ".join(map(str, unreadable[:5])) + (", ..." if len(unreadable) > 5 else "")
        warn(f"{path}: {len(unreadable)} line{'s' if len(unreadable) > 1 else ''} "
             f"that {'are' if len(unreadable) > 1 else 'is'} not a JSON record (line "
             f"{shown}) left out of the build, which read {len(rows)} records from "
             "it: check the file")
    kept = [r for r in rows if isinstance(r.get("uri"), str)]
    if len(kept) < len(rows):  # every log's record names its problem
        n = len(rows) - len(kept)
        warn(f"{path}: {n} record{'s' if n > 1 else ''} without a problem's URI (a string) "
             "left out of the build: check the file")
    return kept


def kept_metrics() -> frozenset[str]:
    """The metrics a dataset keeps per kernel: every action section's header metrics, the
    reference optimizer's evidence (which holds reference-v1's) and the kernel duration."""
    catalogue = load_catalogue()
    headers = {name for s in ACTION_SECTIONS for _, name in catalogue.section(s).header}
    return frozenset(headers | set(EVIDENCE_METRICS) | {DURATION_METRIC})


def build(run_dirs: list[Path], reference_rows: list[dict], outcome_rows: list[dict],
          metadata: dict | None = None, llm_rows: list[dict] | None = None,
          sections: tuple[str, ...] = ACTION_SECTIONS, complete: bool = False,
          tolerance_rows: list[dict] | None = None,
          optimizer_rows: dict[str, list[dict]] | None = None,
          plans: dict[str, list] | None = None,
          problems: dict[str, Problem] | None = None,
          splits: dict[str, str] | None = None,
          provenance: dict[str, KernelBenchProvenance] | None = None,
          cost_model: CostFallback | None = None,
          complete_for: str = V1) -> DatasetFile:
    """A dataset of the problems that have a reference timing and the evidence of each of
    ``sections`` (the action set; problems with less are left out), and with ``complete``
    only those with reference-v1's outcome of every transformation that applies (what the
    replay environment needs) or with an LLM optimizer's outcomes. ``metadata["left_out"]``
    names each problem of the recording that was left out, and why. Each record's
    ``transformations`` are those that apply to it on the recording's device (the reference
    rows' ``device``), from its static features.

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
    ``modelled_costs`` names those. ``outcome_rows``: the first reference optimizer's
    (``"reference-v1"``) candidates' outcomes (``uri, transformation, correct, error_kind,
    candidate_ms, ... speedup``). ``tolerance_rows``: outcomes of the same candidates judged
    again by a judge that stores ``tolerance_needed`` (``experiments/studies/rejudge.py``); a
    row lends its ``tolerance_needed`` to a reference-v1 outcome without one when the two
    verdicts agree, nothing else. ``optimizer_rows``: other optimizers' candidates' outcomes,
    per optimizer name (rows of the same format; ``transformation`` names the candidate, a
    composition's name included: ``"compile+cuda_graph"``). ``complete`` does not look at
    them: a problem without an optimizer's rows has no outcomes of that optimizer. Of a
    candidate recorded twice (for any optimizer), the later row wins. ``plans``: per optimizer
    its recording plan (:mod:`.record.plan`); a problem gets that optimizer's outcomes (its
    planned candidates' only) once every planned candidate is recorded
    (``metadata["optimizers"][name]["incomplete"]`` lists what the others lack), so a replay
    never meets an unrecorded candidate; a problem whose plan is recorded and names no
    candidate (the optimizer leaves it alone whatever the profile) gets that optimizer's empty
    outcomes.

    ``problems``: the problems to build, by URI, in the order of the records (a KernelBench
    recording's, loaded from its checkout); None: every problem of the recording, loaded with
    :func:`~autoprofiler_env.problems.load_problem`, in URI order. ``splits`` and
    ``provenance``: each record's split (else the problem's) and KernelBench provenance. A
    record left without a split (a problem of your own files) is dealt one: seeded splits
    stratified by level and primary op tag over the records kept
    (:func:`~autoprofiler_env.dataset.splits.stratified_splits`, KernelBench's pattern, seed
    :data:`SPLIT_SEED`), said in ``metadata["splits_dealt"]``; the same records get the same
    splits, and a record added or left out can move others.
    ``cost_model``: the fractions for the names the runs cannot fit
    (:meth:`CostModel.filled`; ``metadata["cost_model_fallback"]`` then says whose they are,
    and a warning where they were fitted on another GPU or ncu version than the
    recording's). ``complete_for``: the optimizer whose outcomes ``complete``
    asks for: reference-v1's (every applicable transformation), or a planned optimizer's
    (every candidate of its plan, ``plans[complete_for]``).
    """
    machine = _one_machine(reference_rows)
    if V1 in (optimizer_rows or {}):
        raise DatasetError(f"optimizer_rows names {V1!r}: its rows are outcome_rows (the "
                           "recording's own candidates.jsonl)")
    keep = kept_metrics()
    catalogue = load_catalogue()
    sets = {tuple(sorted(v)): k for k, v in catalogue.sets.items()}
    alone: dict[str, dict[str, Profile]] = {}  # uri -> section or set -> profile of that run
    unprimed: set[tuple[str, str]] = set()  # (uri, key) whose cost holds ncu's start-up
    no_passes: dict[str, str] = {}  # uri -> why a run of it was not used: passes unknown
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
            why = unknown_passes(p, directory)
            if why is not None:  # its cost in passes would read 0: not used
                no_passes[p.problem_uri] = why
                warn(f"{p.problem_uri}: {why}; this run of it is not used")
                continue
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
    unfitted = [n for n in (*sections, *MODELLED_SETS) if n not in model.fractions]
    if unfitted and cost_model is not None:
        model = model.filled(cost_model.model)
    profiles: dict[str, dict] = {}
    set_costs: dict[str, dict] = {}
    modelled: dict[str, tuple[str, ...]] = {}
    for uri, runs in alone.items():
        if "set:full" in runs or all(s in runs for s in sections):
            try:
                profiles[uri], set_costs[uri], modelled[uri] = evidence_and_costs(
                    runs, sections, model, catalogue, keep,
                    unprimed=frozenset(k for u, k in unprimed if u == uri))
            except NoCostModelError as e:
                raise DatasetError(
                    f"no cost for {e.name} alone on {uri}: no run of it alone was recorded "
                    "beside a run of the full set, and no cost model was given to lend it; "
                    "record each section and set alone beside the full set on a few problems "
                    "of this GPU (`autoprofiler record --out DIR --parts profiles,sets URI "
                    "...`) and give those runs to the build (`--runs DIR`)") from None
    lent = (cost_model if cost_model is not None
            and any(set(m) & set(unfitted) for m in modelled.values()) else None)
    elsewhere = lent is not None and (lent.gpu, lent.ncu) != (machine["gpu"], ncu_version)
    if elsewhere:
        warn(f"the costs of sections alone are modelled with {lent.source}, fitted "
             f"on {lent.gpu} with ncu {lent.ncu}, for this recording of "
             f"{machine['gpu'] or machine['device']} with ncu "
             f"{ncu_version or 'unknown'}: its fractions of the full set's cost "
             "(each problem's full set is this recording's own); to fit them on "
             "this GPU, record each section and set alone beside the full set on a "
             "few problems (`autoprofiler record --out DIR --parts profiles,sets URI "
             "...`) and give those runs to the build (`--runs DIR`)")
    timed = [r for r in reference_rows if r.get("error") is not None
             or is_finite_number(r.get("median_ms"))]
    if len(timed) < len(reference_rows):  # neither a time nor an error: no verdict at all
        n = len(reference_rows) - len(timed)
        warn(f"{n} reference row{'s' if n > 1 else ''} with neither a time (median_ms) nor "
             "an error left out of the build: check reference.jsonl")
    eager = {r["uri"]: r for r in timed if r.get("error") is None}
    refused = {r["uri"] for r in timed if r.get("error") is not None}
    v1 = _outcomes(outcome_rows)
    for r in tolerance_rows or []:  # judged again (judge 2): only what it needs is taken
        old = v1.get(r["uri"], {}).get(r["transformation"])
        if old is not None and old.tolerance_needed is None and r.get("tolerance_needed") \
                is not None and bool(r["correct"]) == old.correct:
            v1[r["uri"]][r["transformation"]] = replace(
                old, tolerance_needed=r["tolerance_needed"])
    incomplete: dict[str, dict[str, list[str]]] = {}
    nothing_planned: dict[str, set[str]] = {}  # optimizer -> problems its plan leaves alone
    if complete and complete_for != V1 and complete_for not in (plans or {}):
        raise DatasetError(f"complete for the optimizer {complete_for!r} needs its recording "
                           "plan (plan.json beside its candidates.jsonl)")
    from autoprofiler_env.dataset.record.candidates import judged

    optimizer_rows = dict(optimizer_rows or {})
    for name, plan in (plans or {}).items():  # a problem's outcomes count once all are there
        rows = optimizer_rows.get(name, [])
        have = judged(rows)  # a verdict of too little memory beside other processes: not yet
        missing = {p.uri: [c.name for c in p.candidates if (p.uri, c.name) not in have]
                   for p in plan}
        incomplete[name] = {u: m for u, m in missing.items() if m}
        nothing_planned[name] = {p.uri for p in plan if not p.candidates}
        planned = {(p.uri, c.name) for p in plan for c in p.candidates}
        # a row the plan no longer lists (an older plan's) is not the optimizer's outcome
        optimizer_rows[name] = [r for r in rows if r["uri"] in missing
                                and not missing[r["uri"]]
                                and (r["uri"], r["transformation"]) in planned]
    by_optimizer = {V1: v1, **{name: _outcomes(rows)
                               for name, rows in sorted(optimizer_rows.items())}}
    outcomes: dict[str, dict[str, dict[str, Outcome]]] = {}  # uri -> optimizer -> candidate
    for name, keyed in by_optimizer.items():
        for uri, candidates in keyed.items():
            outcomes.setdefault(uri, {})[name] = candidates
    for name, uris in nothing_planned.items():  # recorded: there is nothing to record
        for uri in uris:
            outcomes.setdefault(uri, {}).setdefault(name, {})
    planned_for = ({p.uri for p in plans[complete_for]}
                   if complete_for != V1 and complete_for in (plans or {}) else set())
    llm: dict[str, dict] = {}
    # a request the endpoint never answered, as an older recorder wrote it, is no outcome of
    # the model's (recorded since, it is asked again: record/llm.py)
    unasked = [r for r in llm_rows or [] if unanswered(r)]
    if unasked:
        kinds = ", ".join(sorted({r["error_kind"] for r in unasked}))
        warn(f"{len(unasked)} LLM row{'s' if len(unasked) > 1 else ''} of a request "
             f"that got no reply (error_kind {kinds}): left out, not the model's outcome; "
             "record the llm part again to ask them")
    for r in sorted((r for r in llm_rows or [] if not unanswered(r)),
                    key=lambda r: (r["uri"], r["model"], r["sections"], r["repeat"])):
        llm.setdefault(r["uri"], {}).setdefault(r["model"], {}).setdefault(
            r["sections"], []).append(Outcome(
                transformation=r["model"], correct=bool(r["correct"]),
                error_kind=r.get("error_kind"), median_ms=r.get("candidate_ms"),
                speedup=r.get("speedup")))
    device = next(iter(eager.values()), {}).get("device", "cuda")
    records, left_out = {}, {}
    for uri in (list(problems) if problems is not None
                else sorted(set(alone) | set(eager) | set(outcomes))):
        why = ((REFUSED if uri in refused else "no reference timing") if uri not in eager
               else no_passes.get(uri, "not the evidence of every section")
               if uri not in profiles else None)
        if why is None:
            problem = problems[uri] if problems is not None else load_problem(uri)
            features = static_features(problem)
            transformations = _applicable(problem, features, device)
            if not complete or uri in llm:
                pass
            elif complete_for == V1 and set(transformations) - set(v1.get(uri, {})):
                why = "not every candidate's outcome"  # reference-v1's: it judged them all
            elif complete_for != V1 and (uri not in planned_for
                                         or uri in incomplete.get(complete_for, {})):
                why = (f"not every planned candidate's outcome of {complete_for}"
                       if uri in planned_for else f"not planned for {complete_for} yet")
        if why is not None:
            left_out[uri] = why
            continue
        row = eager[uri]
        records[uri] = ProblemRecord(
            uri=uri, level=problem.level, split=(splits or {}).get(uri, problem.split),
            tags=problem.tags or features.tags, features=features,
            eager={k: row.get(k) for k in ("median_ms", "p20_ms", "p80_ms", "n_trials",
                                           "peak_memory_mb", "constant_needed")
                   if k != "constant_needed" or row.get(k) is not None},
            profiles=dict(sorted(profiles[uri].items(),
                                 key=lambda kv: ACTION_SECTIONS.index(kv[0])
                                 if kv[0] in ACTION_SECTIONS else 99)),
            set_costs=set_costs.get(uri, {}), outcomes=outcomes.get(uri, {}),
            llm_outcomes=llm.get(uri, {}), modelled_costs=modelled.get(uri, ()),
            transformations=transformations, provenance=(provenance or {}).get(uri))
    dealt = {}
    unsplit = {uri: (r.level or 0, r.tags[0] if r.tags else "other")
               for uri, r in records.items() if r.split is None}
    if unsplit:  # problems of your own files: seeded splits, stratified by level and op
        from autoprofiler_env.dataset.splits import PATTERN, stratified_splits

        drawn = stratified_splits(unsplit, seed=SPLIT_SEED)
        records = {uri: replace(r, split=drawn[uri]) if uri in drawn else r
                   for uri, r in records.items()}
        dealt = {"splits_dealt": {"seed": SPLIT_SEED, "pattern": list(PATTERN),
                                  "stratified_by": "level, op", "problems": len(drawn)}}
    sections = sections if records else ()
    first = next(iter(eager.values()), {})
    meta = {"gpu": first.get("gpu"), "cuda": first.get("cuda"), "torch": first.get("torch"),
            **{k: first[k] for k in ("triton", "python") if first.get(k)},
            "ncu": ncu_version, "built": datetime.date.today().isoformat(),
            "tolerance": {"atol": DEFAULT_ATOL, "rtol": DEFAULT_RTOL},
            "timing": "median of CUDA-event trials, L2 flushed between trials",
            "optimizers": {name: {"judges": _judges(rows),
                                  "problems": len({r["uri"] for r in rows} & set(records)),
                                  **({"incomplete": {u: m for u, m in incomplete[name].items()
                                                     if u in records}}
                                     if name in incomplete else {})}
                           for name, rows in sorted({V1: outcome_rows, **optimizer_rows}.items())
                           if any(r["uri"] in records for r in rows)},
            "evidence": "each section cut out of one run of ncu's full set per problem "
                        "(docs/profiler.md: the same choices as runs of the sections)",
            "cost_model": model.to_dict(), **dealt,
            **({"cost_model_fallback": f"{lent.source}, fitted on {lent.gpu} with ncu "
                                       f"{lent.ncu}"
                                       + (f", lent to a recording of {machine['gpu']} with "
                                          f"ncu {ncu_version}" if elsewhere else "")
                                       + ": the recording ran no "
                                       + ("section or set" if len(unfitted) == len(
                                           (*sections, *MODELLED_SETS))
                                          else ", ".join(unfitted))
                                       + " alone beside the full set"}
               if lent is not None else {}),
            "left_out": left_out,
            "unprimed_costs": _unprimed_costs(unprimed, records, modelled),
            **(metadata or {})}
    return DatasetFile(meta, sections, records)


def _one_machine(reference_rows: list[dict]) -> dict:
    """The machine the reference timings were made on (``device``, ``gpu``, ``torch`` of the
    rows the judge timed); a :class:`DatasetError` where they were made on several: a
    dataset's times, costs and outcomes are one machine's (a ``--device cpu`` pipeline check
    recorded into a GPU's recording would mix CPU times in)."""
    from autoprofiler_env.dataset.record.machine import SAME_MACHINE, machine_of

    machines: dict[tuple, str] = {}
    for r in reference_rows:
        if r.get("error") is None and machine_of(r) is not None:  # rows naming their machine
            machines.setdefault(machine_of(r), r["uri"])
    if len(machines) > 1:
        said = "; ".join(f"{uri} on device {d}, GPU {g}, torch {t}"
                         for (d, g, t), uri in machines.items())
        raise DatasetError(f"the reference timings were made on {len(machines)} machines "
                           f"({said}): a dataset's times are one machine's; record the others "
                           "again there, or build each machine's recording apart")
    (machine,) = machines or {(None, None, None): ""}
    return dict(zip(SAME_MACHINE, machine))


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


def _outcomes(rows: list[dict]) -> dict[str, dict[str, Outcome]]:
    """Candidates' rows as outcomes, per problem and candidate; of a candidate recorded
    twice, the later row wins."""
    outcomes: dict[str, dict[str, Outcome]] = {}
    for r in rows:
        outcomes.setdefault(r["uri"], {})[r["transformation"]] = Outcome(
            transformation=r["transformation"], correct=bool(r["correct"]),
            error_kind=r.get("error_kind"), median_ms=r.get("candidate_ms"),
            p20_ms=r.get("candidate_p20_ms"), p80_ms=r.get("candidate_p80_ms"),
            speedup=r.get("speedup"), max_abs_error=r.get("max_abs_error"),
            tolerance_needed=r.get("tolerance_needed"))
    return outcomes


def _judges(rows: list[dict]) -> list[int]:
    """The judge versions of an optimizer's rows (a row without one: judge 1)."""
    return sorted({r.get("judge") or 1 for r in rows})


def _applicable(problem, features, device: str) -> tuple[str, ...]:
    """The transformations that apply to the problem on ``device``, in catalogue order."""
    from autoprofiler_env.optimizers import applicable

    return tuple(t.name for t in applicable(problem, features, device))


def unknown_passes(profile: Profile, run_dir: Path | str) -> str | None:
    """Why ``profile``'s cost in passes is unknown (None: it is known): a kernel that the
    report lists and ncu's log gives no replay passes for
    (:func:`~autoprofiler_env.profiler.parse.parse_passes` found no ``100% - N passes`` of
    it). Its cost would count that kernel's passes as 0 (the whole set's as 0 where it is
    the problem's only kernel), so a build does not use that run's profile of the problem."""
    missing = [k for k in profile.kernels if k.passes is None]
    if not missing:
        return None
    named = ", ".join(f"{k.id} ({k.name[:60]})" for k in missing[:3])
    return (f"ncu's log in {run_dir} gives no replay passes for {len(missing)} of its "
            f"{len(profile.kernels)} kernels ({named}{', ...' if len(missing) > 3 else ''}): "
            "its cost in passes is unknown")


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
                       tolerances: Path | None = None,
                       extra: dict[str, Path] | None = None,
                       problems: dict[str, Problem] | None = None) -> DatasetFile:
    """:func:`build` from a folder of saved ncu runs (any depth), and any in ``more_runs``,
    and the logs (``outcomes``: reference-v1's candidates; ``tolerances``: the rows of a
    judging again, see :func:`build`; ``extra``: other optimizers' ``candidates.jsonl``, by
    optimizer name; where a ``plan.json`` lies beside one, its plan, see :func:`build`;
    ``problems`` as :func:`build` takes them).

    Raises:
        DatasetError: a file of ``extra`` does not exist, or ``extra`` names reference-v1.
    """
    from autoprofiler_env.dataset.record.plan import load_plan

    plans = {}
    for name, path in (extra or {}).items():
        if not Path(path).is_file():
            raise DatasetError(f"the candidates of the optimizer {name!r}: no such file {path}")
        plan = Path(path).parent / "plan.json"
        if plan.is_file():  # a planned recording: a problem counts once its plan is recorded
            plans[name] = load_plan(plan)
    run_dirs = sorted(p.parent for root in (*more_runs, run_root)
                      for p in Path(root).rglob("run.json"))
    return build(run_dirs, read_log(reference), read_log(outcomes) if outcomes else [],
                 metadata, read_log(llm) if llm else None, complete=complete,
                 tolerance_rows=read_log(tolerances) if tolerances else None,
                 optimizer_rows={name: read_log(path) for name, path in extra.items()}
                 if extra else None, plans=plans, cost_model=suite_fallback(),
                 problems=problems)


def build_from_recording(recording: Path, metadata: dict | None = None,
                         more_runs: tuple[Path, ...] = (), complete: bool = False,
                         tolerances: Path | None = None,
                         extra: dict[str, Path] | None = None,
                         source: Path | None = None) -> DatasetFile:
    """:func:`build` from a recording folder (see :mod:`.record`), with the saved ncu runs in
    ``more_runs`` (a profiler study's sections and sets alone: measured costs) besides. Its
    ``candidates.jsonl`` are reference-v1's outcomes; ``extra`` maps another optimizer's name
    to its ``candidates.jsonl`` (e.g. ``{"reference": Path(".../candidates.jsonl")}``).

    A recording of a KernelBench checkout (it holds ``kernelbench.json``) is built from that
    checkout, ``source``: :func:`build_kernelbench`.

    A log's lines that are not records are left out with a warning (:func:`read_log`).

    Raises:
        DatasetError: not a recording; a KernelBench recording without ``source``, or
            ``source`` for a recording of the suite; a build that keeps no problem (its
            message counts the problems left out, by why).
    """
    content = _build_recording(recording, metadata, more_runs, complete, tolerances, extra,
                               source)
    if not content.problems:
        left_out = content.metadata.get("left_out", {})
        reasons = Counter(left_out.values())
        why = ("; ".join(f"{n} with {reason}" for reason, n in reasons.most_common())
               if reasons else "reference.jsonl holds no problem's record")
        from autoprofiler_env.dataset.record.kernelbench import MANIFEST

        kernelbench = (Path(recording) / MANIFEST).exists()
        record = ("autoprofiler record --source CHECKOUT --out DIR" if kernelbench
                  else "autoprofiler record --out DIR")
        what = ("record ncu's full set of them on a GPU (the `full` part: "
                f"`{record} --parts full`)" if not kernelbench
                and "not the evidence of every section" in reasons
                else f"record them (`{record}`)")
        raise DatasetError(f"{recording}: the build keeps no problem ({why}): nothing saved; "
                           f"{what}, or check the recording's logs")
    return content


def _build_recording(recording: Path, metadata: dict | None, more_runs: tuple[Path, ...],
                     complete: bool, tolerances: Path | None, extra: dict[str, Path] | None,
                     source: Path | None) -> DatasetFile:
    """:func:`build_from_recording`'s build, kept problems or none."""
    from autoprofiler_env.dataset.record.kernelbench import MANIFEST

    recording = Path(recording)
    if not (recording / "reference.jsonl").exists() and not (recording / MANIFEST).exists():
        raise DatasetError(f"{recording} is not a recording: it has no reference.jsonl; make "
                           "one with `autoprofiler record --out DIR` on a GPU")
    if (recording / MANIFEST).exists():
        if tolerances is not None:
            raise DatasetError("--tolerances lends tolerance_needed to reference-v1's outcomes; "
                               f"the KernelBench recording {recording} has none (its judge "
                               "stores tolerance_needed)")
        return build_kernelbench(recording, source, metadata, more_runs, complete, extra)
    problems = _own_problems(recording, source)
    from autoprofiler_env.dataset.record import recording_cost

    candidates, llm = recording / "candidates.jsonl", recording / "llm.jsonl"
    metadata = {"recording_cost": recording_cost(recording),
                **({"recording_cost_by_optimizer": {
                    name: recording_cost(Path(path).parent) for name, path in extra.items()
                    if Path(path).is_file()}} if extra else {}),
                **(metadata or {})}
    return build_from_folders(recording, recording / "reference.jsonl",
                              candidates if candidates.exists() else None, metadata,
                              llm if llm.exists() else None, more_runs, complete, tolerances,
                              extra, problems)


def _problem_folders(root: Path) -> list[Path]:
    """``root`` and the folders in it that hold Python files, but for hidden ones, ``_*``
    (``__pycache__``) and installed packages (``site-packages``, ``node_modules``): a
    ``.venv`` inside a folder of problems is not searched."""
    import os

    folders = []
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_"))
                         and d not in ("site-packages", "node_modules"))
        if Path(here) == root or any(f.endswith(".py") for f in files):
            folders.append(Path(here))
    return folders


SPLIT_SEED = 0
"""The seed of the splits a build deals to a recording's problems of your own files."""


def _own_problems(recording: Path, source: Path | None):
    """A recording of problem files of your own (``autoprofiler record --out DIR FILE|FOLDER``,
    named ``problem://local/<folder>/<stem>``), read from ``source`` (their folder, or one
    file), with the suite's for the suite's URIs: the problems by URI, in the recording's
    order (None where the recording holds the suite's alone). Your files have no split:
    :func:`build` deals them one.

    Raises:
        DatasetError: the recording holds files of your own and no ``source`` is given, or
            ``source`` lacks one of them, or holds none of them.
        SourceMismatchError: a file of ``source`` is not the one recorded (the reference row's
            ``problem_sha256``).

    ``source``'s folders are searched too (a recording of ``mine/level1`` and
    ``mine/level2`` builds from ``mine``).
    """
    from autoprofiler_env.dataset.record.reference import problem_sha256
    from autoprofiler_env.errors import ProblemError, SourceMismatchError
    from autoprofiler_env.problems import load_file, load_suite, scan_directory

    # its damaged lines are said once, when the build reads it
    rows = {r["uri"]: r for r in scan_jsonl(recording / "reference.jsonl").rows
            if isinstance(r.get("uri"), str)}
    suite = {p.uri for p in load_suite()}
    own = [uri for uri in rows if uri not in suite]
    if source is None:
        if own:
            raise DatasetError(
                f"{recording} holds problems of your own files ({own[0]}"
                f"{f' and {len(own) - 1} more' if len(own) > 1 else ''}): give the folder "
                "they were recorded from, --source DIR (a file's URI is its folder's name and "
                "its own)")
        return None
    found, broken = [], {}
    try:
        if Path(source).is_dir():  # the folder, and the folders in it (level1/, level2/ ...)
            for folder in _problem_folders(Path(source)):
                problems_here, errors = scan_directory(folder)
                found += problems_here
                broken |= {f"problem://local/{folder.name}/{Path(e.path).stem}": e
                           for e in errors}
        else:
            found = [load_file(source)]
    except ProblemError as e:
        raise DatasetError(f"--source {source}: {e.cause}") from None
    by_uri = {}
    for problem in found:
        if problem.uri in by_uri and problem.uri in own:  # which of them was recorded?
            raise DatasetError(f"--source {source}: {by_uri[problem.uri].path} and "
                               f"{problem.path} are both {problem.uri}: give the folder of "
                               "the one recorded")
        by_uri.setdefault(problem.uri, problem)
    if not own:
        raise DatasetError(f"{recording} holds the suite's problems alone: build it without "
                           "--source (it is the folder of your own problem files, or a "
                           "KernelBench checkout for a recording of one)")
    missing = [uri for uri in own if uri not in by_uri]
    now_broken = [uri for uri in missing if uri in broken]  # there, but no problem any more
    if now_broken:
        raise DatasetError(f"--source {source}: the recorded {now_broken[0]} is broken now: "
                           f"{broken[now_broken[0]]}")
    if missing:
        raise DatasetError(
            f"{recording} holds {missing[0]}"
            f"{f' and {len(missing) - 1} more' if len(missing) > 1 else ''}, which --source "
            f"{source} does not ("
            + (f"its files are named as {found[0].uri} is" if found else "it holds no problem "
               "file") + "): give the folder the recording was made from")
    problems = {}
    for uri in rows:
        problem = by_uri[uri] if uri in own else load_problem(uri)
        recorded = rows[uri].get("problem_sha256")
        if recorded is not None and recorded != problem_sha256(problem):
            raise SourceMismatchError(problem.path, f"is not the file {recording} recorded as "
                                      f"{uri} (sha256 {recorded[:12]}... then, "
                                      f"{(problem_sha256(problem) or 'unreadable')[:12]}... "
                                      "now)",
                                      "restore the recorded file, or record this one anew")
        problems[uri] = problem
    return problems


KERNELBENCH_OPTIMIZER = "reference"
"""The optimizer whose candidates a KernelBench recording holds: the current reference
optimizer, every candidate its plan reaches (:mod:`.record.plan`)."""


def build_kernelbench(recording: Path, source: Path | None, metadata: dict | None = None,
                      more_runs: tuple[Path, ...] = (), complete: bool = False,
                      extra: dict[str, Path] | None = None) -> DatasetFile:
    """:func:`build` from a recording of a KernelBench checkout (:mod:`.record.kernelbench`):
    the problems its manifest names, read from ``source`` (a checkout whose files must be the
    recorded ones, sha256 for sha256), in KernelBench's order (level, then number); each
    record with its provenance and the manifest's split. The recording's ``candidates.jsonl``
    are the reference optimizer's outcomes, planned (``plan.json``); ``complete`` keeps the
    problems with every planned candidate recorded, and plans each of them again here on the
    evidence built: a problem whose plan here reaches a candidate the recording lacks (its
    static features differ between the machines' torch versions, say) is left out, naming it,
    so the replay never meets an unrecorded candidate. Costs of sections alone are modelled
    with the suite dataset's cost model where the runs fit none (the recording runs only the
    full set). ``metadata["kernelbench"]`` holds the commit, levels, split seed and pattern and
    the files the manifest skipped; ``metadata["recording_cost"]["problems"]`` each problem's
    direct device seconds.

    Raises:
        DatasetError: no ``source``, or a file of ``extra`` is missing or names this
            optimizer.
        SourceMismatchError: a file of ``source`` is not the recorded one.
    """
    from autoprofiler_env.dataset.record import problem_costs, recording_cost
    from autoprofiler_env.dataset.record.kernelbench import MANIFEST, RecordingManifest
    from autoprofiler_env.dataset.record.plan import load_plan
    from autoprofiler_env.dataset.splits import PATTERN
    from autoprofiler_env.problems.kernelbench import KernelBenchCheckout

    recording = Path(recording)
    manifest = RecordingManifest.load(recording / MANIFEST)
    if source is None:
        raise DatasetError(f"{recording} is a recording of a KernelBench checkout (commit "
                           f"{manifest.commit or 'unknown'}): give that checkout (--source "
                           "DIR); the build reads each problem's source, checked against its "
                           "recorded sha256")
    extra = dict(extra or {})
    if KERNELBENCH_OPTIMIZER in extra:
        raise DatasetError(f"--candidates {KERNELBENCH_OPTIMIZER}=...: a KernelBench "
                           "recording's own candidates.jsonl are that optimizer's")
    for name, path in extra.items():
        if not Path(path).is_file():
            raise DatasetError(f"the candidates of the optimizer {name!r}: no such file {path}")
    problems = manifest.problems_from(KernelBenchCheckout(source))
    problems.sort(key=lambda p: (p.level, _natural(p.path.name)))
    plan_path = recording / "plan.json"
    plans = {KERNELBENCH_OPTIMIZER: load_plan(plan_path)} if plan_path.is_file() else {}
    rows = {KERNELBENCH_OPTIMIZER: read_log(recording / "candidates.jsonl"),
            **{name: read_log(path) for name, path in extra.items()}}
    run_dirs = sorted(p.parent for root in (*more_runs, recording)
                      for p in Path(root).rglob("run.json"))
    costs = recording_cost(recording)
    by_problem = problem_costs(recording)
    meta = {"kernelbench": {"commit": manifest.commit, "levels": list(manifest.levels),
                            "split_seed": manifest.seed, "split_pattern": list(PATTERN),
                            "problems": len(manifest.problems), "skipped": manifest.skipped},
            "default_optimizer": KERNELBENCH_OPTIMIZER,
            "recording_cost": {**costs, "problems": {p.uri: by_problem[p.uri]
                                                    for p in problems if p.uri in by_problem}},
            **(metadata or {})}
    content = build(run_dirs, read_log(recording / "reference.jsonl"), [], meta,
                    complete=complete, optimizer_rows=rows, plans=plans,
                    problems={p.uri: p for p in problems},
                    splits={m.uri: m.split for m in manifest.problems},
                    provenance={m.uri: m.provenance for m in manifest.problems},
                    cost_model=suite_fallback(), complete_for=KERNELBENCH_OPTIMIZER)
    costs_kept = {u: c for u, c in content.metadata["recording_cost"]["problems"].items()
                  if u in content.problems}
    content = replace(content, metadata={**content.metadata, "recording_cost": {
        **content.metadata["recording_cost"], "problems": costs_kept}})
    return _replanned(content) if complete else content


def _replanned(content: DatasetFile) -> DatasetFile:
    """``content`` without the problems whose plan, made again on this evidence, reaches a
    candidate the recording lacks (each named in ``metadata["left_out"]``)."""
    from tqdm import tqdm

    from autoprofiler_env.dataset.record.plan import planning_optimizers, reachable
    from autoprofiler_env.dataset.replay import Dataset

    dataset, optimizers = Dataset(content), planning_optimizers()
    left_out = dict(content.metadata["left_out"])
    kept = {}
    for uri, record in tqdm(content.problems.items(), desc="plan again", unit="problem"):
        found = reachable(dataset, uri, optimizers, frozenset(record.transformations))
        missing = sorted(set(found) - set(record.outcomes.get(KERNELBENCH_OPTIMIZER, {})))
        if missing:
            left_out[uri] = (f"its plan made here reaches {', '.join(missing)}, which the "
                             "recording's plan did not: record them")
        else:
            kept[uri] = record
    meta = dict(content.metadata, left_out=left_out)
    meta["optimizers"] = {name: {**m, "problems": sum(name in r.outcomes for r in kept.values())}
                          for name, m in meta.get("optimizers", {}).items()}
    meta["recording_cost"] = {**meta["recording_cost"], "problems": {
        u: c for u, c in meta["recording_cost"].get("problems", {}).items() if u in kept}}
    return DatasetFile(meta, content.sections if kept else (), kept)


def _natural(name: str) -> tuple:
    """KernelBench's order of file names: ``2_`` before ``10_``."""
    import re

    return tuple(int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", name))
