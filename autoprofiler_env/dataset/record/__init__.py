"""Recording on a GPU: the eager references, ncu's full set on every problem (and, on a
sample, each action section alone and the basic and detailed sets), and every candidate the
optimizer can produce. Resumable and idempotent: each unit of work (a problem's reference, a
problem's ncu run of a configuration, a (problem, transformation) outcome) is written as soon
as it finishes and skipped when found; ``deadline`` stops ncu (keeping the problems it
finished) and starts nothing new, so a run fits a time-limited command and the next one
continues.

    autoprofiler record --out recordings/h200 [--parts reference,full,candidates]
                        [--chunk 12] [--time-budget 540]

Layout of a recording folder::

    kernelbench.json                 a KernelBench checkout's recording: its problems, their
                                     provenance, strata, splits and order (:mod:`.kernelbench`)
    plan.json                        with it: the candidates planned, chunk by chunk
    reference.jsonl                  one line per problem (eager time, spread, peak memory)
    sets/<set>/<run>/                saved ncu runs of ncu's full (and basic, detailed) set
    profiles/<section>/<run>/        saved ncu runs of one action section alone
    candidates.jsonl                 one line per (problem, candidate): a transformation, or
                                     with a plan (``--plan``) a composed name
    timings.jsonl                    one line per part per call: its wall time (device time)
    llm.jsonl                        one line per (problem, section set, repeat) of an LLM
                                     optimizer (``record_llm``; its endpoint needs no GPU, the
                                     harness does)

``autoprofiler dataset build`` turns it into a dataset file.

A KernelBench checkout is recorded chunk by chunk instead (:func:`.kernelbench.record_kernelbench`:
``autoprofiler record --source DIR``): each chunk's reference timings, its ncu run, its plan
and its candidates before the next chunk, so that a stop leaves complete problems.

On several GPUs (``autoprofiler record --workers N|ray``), :mod:`.fanout` runs one unit of
work per (problem, part) in a process of its own per GPU and writes the same files.

What each part records is in its own module: :mod:`.reference`, :mod:`.ncu` (``full``,
``sets``, ``profiles``), :mod:`.candidates` and :mod:`.llm`; :mod:`.machine` holds the machine
info stored with the rows and the deadline. This module runs the parts and logs their cost.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from contextlib import contextmanager
from pathlib import Path

from autoprofiler_env.dataset.record.candidates import (
    CANDIDATE_TIMEOUT_S,
    CandidateWarmer,
    outcome_row,
    record_candidates,
)
from autoprofiler_env.dataset.record.llm import LLMPart, parse_section_sets, record_llm
from autoprofiler_env.dataset.record.llm import require as require_llm
from autoprofiler_env.dataset.record.machine import _past, machine_info, preflight
from autoprofiler_env.dataset.record.ncu import (
    MIN_RUN_S,
    STEPPED_OPS,
    chunks,
    covered,
    ncu_may_start,
    ncu_pending,
    read_run,
    record_ncu,
)
from autoprofiler_env.dataset.record.reference import check_sources, record_reference
from autoprofiler_env.harness import HarnessConfig
from autoprofiler_env.harness.tolerance import STRICTEST
from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl
from autoprofiler_env.problems import Problem
from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS, load_catalogue
from autoprofiler_env.profiler.runner import MAX_OPS, terminate_becomes_exit

__all__ = [
    "DEFAULT_PARTS",
    "MIN_RUN_S",
    "PARTS",
    "TIMINGS",
    "CandidateWarmer",
    "LLMPart",
    "chunks",
    "covered",
    "machine_info",
    "outcome_row",
    "parse_section_sets",
    "record",
    "record_candidates",
    "record_llm",
    "record_ncu",
    "problem_costs",
    "record_reference",
    "recording_cost",
]

PARTS = ("reference", "full", "candidates", "sets", "profiles", "llm")
"""What a recording can hold, in the order they are recorded (``llm`` needs an
:class:`LLMPart`)."""
DEFAULT_PARTS = ("reference", "full", "candidates")
"""Enough for a dataset: the eager times, every problem's run of ncu's full set (the evidence of
every section, cut out of it, and the full set's cost) and the candidates' outcomes. ``sets``
(basic and detailed) and ``profiles`` (each action section alone) measure what those cost alone
and fit the cost model that predicts it elsewhere (:mod:`autoprofiler_env.dataset.costs`): a
sample of problems will do."""


def record(out: Path, problems: list[Problem], parts=DEFAULT_PARTS, chunk: int = 12,
           time_budget_s: float | None = None, device: str = "cuda",
           warm_workers: int = 6, llm: LLMPart | None = None,
           plan: Path | None = None, reuse: tuple[Path, ...] = (),
           candidate_timeout_s: float = CANDIDATE_TIMEOUT_S) -> dict:
    """Records the parts asked for, resuming what ``out`` already holds. Returns a summary:
    what each part holds now and whether the time budget cut it short (it ran out, or what was
    left of it was too little to start the reference, full or candidates work that remains).

    ``plan``: a recording plan (:mod:`.plan`): the candidates part records its candidates, in
    its order, for the problems it names (the other parts are not affected); ``reuse``: candidate
    rows of other recordings that it copies where judge and source are the same;
    ``candidate_timeout_s``: the judge's limit for one candidate (:func:`record_candidates`).
    ``time_budget_s``: None for none (0 stops at once).

    Before it records anything it checks what would refuse the recording (no CUDA device,
    no ncu for an ncu part with work to do, ``out``'s rows made on another machine:
    :func:`~.machine.preflight`), so that a refusal leaves ``out`` as it was.

    Raises:
        ValueError: unknown parts, a chunk under 1 problem, the llm part without ``llm``.
        ProblemError: two problems of one URI; a problem file edited since ``out`` recorded
            it (:class:`~autoprofiler_env.errors.SourceMismatchError`:
            :func:`~.reference.check_sources`).
        MachineError: this machine cannot record on ``device``, or ``out`` was recorded on
            another (:class:`~.machine.OtherMachineError`).
        NcuNotFoundError: an ncu part has work to do and there is no ncu.
    """
    deadline = time.monotonic() + time_budget_s if time_budget_s is not None else None
    out = Path(out)
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise ValueError(f"unknown parts {sorted(unknown)}; choose from {', '.join(PARTS)}")
    if chunk < 1:
        raise ValueError(f"a chunk holds at least 1 problem, not {chunk}")
    require_llm(parts, llm)
    planned = None
    if plan is not None:
        from autoprofiler_env.dataset.record.plan import candidate_names, load_plan

        planned = candidate_names(load_plan(plan))
    reused = [row for path in reuse for row in read_jsonl(Path(path))]
    problems = check_sources(out, problems)
    preflight(out, device, ncu=any(
        ncu_pending(problems, configs, out / root)
        for root, configs in (_ncu_configs(part) for part in NCU_PARTS if part in parts)))
    out.mkdir(parents=True, exist_ok=True)
    with terminate_becomes_exit():
        summary = {part: _record_part(part, out, problems, chunk, deadline, device,
                                      warm_workers, llm, planned, reused,
                                      candidate_timeout_s=candidate_timeout_s)
                   for part in PARTS if part in parts}  # in this order, whatever was asked
    if "llm" in summary:
        llm.summarize(summary, problems, out)
    # the budget stopped it where it ran out, and also where work is left with time still on
    # the clock (the ncu parts start nothing with less than MIN_RUN_S left); pending counts
    # the reference, full and candidates parts (a failure is recorded, so it is not left)
    from autoprofiler_env.dataset.record.fanout import pending

    summary["stopped_by_time_budget"] = deadline is not None and (
        _past(deadline) or bool(pending(out, problems, parts, device, planned)))
    return summary


def recording_config(device: str) -> HarnessConfig:
    """The judge of every recorded part: the harness's defaults (judged at KernelBench v0.1's
    tolerance, ``tolerance_needed`` stored for the stricter ones), each problem checked
    well-posed at the strictest regime the replay offers, with the tolerance at which a
    constant would pass kept (:attr:`~autoprofiler_env.harness.HarnessConfig.posed_at`)."""
    return HarnessConfig(device=device, posed_at=STRICTEST)


def _record_part(part: str, out: Path, problems: list[Problem], chunk: int,
                 deadline: float | None, device: str, warm_workers: int,
                 llm: LLMPart | None, plan: dict | None = None, reuse: list[dict] = (),
                 max_ops: int | None = MAX_OPS,
                 candidate_timeout_s: float = CANDIDATE_TIMEOUT_S, alone: Collection[str] = ()):
    """Records one part; logs its wall time to ``timings.jsonl`` even when it is stopped (an
    exception, SIGTERM), so that the device time it took is not lost to the recording cost;
    an ncu part that would start no run (:func:`~.ncu.ncu_may_start`) is not called.
    ``max_ops``: the operators of a problem's forward that the ncu parts profile;
    ``candidate_timeout_s``: the judge's limit for one candidate; ``alone``: the problems the
    ncu parts profile alone with the kernel cap from the start (:func:`record_ncu`; those
    tagged with a :data:`~.ncu.STEPPED_OPS` kind are added)."""
    catalogue = load_catalogue()
    if part in NCU_PARTS:
        root, configs = _ncu_configs(part, catalogue)
        alone = set(alone) | {p.uri for p in problems if STEPPED_OPS & set(p.tags)}
        if not ncu_may_start(problems, configs, out / root, chunk, deadline, alone=alone):
            # it would start no run: no line of no device time in timings.jsonl (2026-12-05
            # on the H200: nine lines of 0.02 s, for chunks with too little time left)
            return {name: len(covered(out / root / name)) for name in configs}
    with _timed(out, part, device) as holds:
        if part == "reference":
            holds.append(len(record_reference(problems, recording_config(device),
                                              out / "reference.jsonl", deadline)))
        elif part == "candidates":
            holds.append(len(record_candidates(problems, out / "candidates.jsonl",
                                               recording_config(device),
                                               warm_workers=warm_workers, deadline=deadline,
                                               plan=plan, reuse=reuse,
                                               timeout_s=candidate_timeout_s)))
        elif part == "llm":
            holds.append(len(record_llm(llm.shown(problems), llm.dataset, llm.optimizer,
                                        list(llm.section_sets), out / "llm.jsonl",
                                        recording_config(device), llm.repeats, deadline)))
        else:
            record_ncu(problems, configs, out / root, chunk, deadline, max_ops=max_ops,
                       alone=alone)
            holds.append({name: len(covered(out / root / name)) for name in configs})
    return holds[0]


NCU_PARTS = ("full", "sets", "profiles")
"""The parts that run ncu."""


def _ncu_configs(part: str, catalogue=None) -> tuple[str, dict[str, list[str]]]:
    """An ncu part's folder in the recording and its configurations (name -> sections)."""
    catalogue = catalogue or load_catalogue()
    configs = ({"full": list(catalogue.sets["full"])} if part == "full" else
               {n: list(catalogue.sets[n]) for n in ("basic", "detailed")}
               if part == "sets" else {s: [s] for s in ACTION_SECTIONS})
    return ("sets" if part in ("full", "sets") else "profiles"), configs


@contextmanager
def _timed(out: Path, part: str, device: str):
    """Logs the wall time of the block to ``timings.jsonl`` as ``part``'s, even when it is
    stopped (an exception, SIGTERM), so that the device time it took is not lost to the
    recording cost. The block appends what the part holds now to the list it is given;
    where it did not (it was stopped), the line is marked ``interrupted``."""
    started = time.monotonic()
    holds: list = []
    try:
        yield holds
    finally:
        row = {"part": part, "wall_s": time.monotonic() - started,
               "at": time.strftime("%Y-%m-%dT%H:%M:%S"), "device": device,
               "holds": holds[0] if holds else None}
        if not holds:
            row["interrupted"] = True  # what it finished is in its files
        with JsonlAppender(out / TIMINGS) as log:
            log.write(row)


TIMINGS = "timings.jsonl"
"""One line per part per ``record`` call that ran it (an ncu part that would start no run is
not called): its wall time. The recording's device time."""


def recording_cost(out: Path) -> dict:
    """What the recording cost in device seconds: per part, as ``record`` logged it
    (``timings.jsonl``), and what the recording itself shows of its parts made before that
    log existed: the ncu runs' wall time and the candidates' judging and timing wall time
    (without their compile warm-up).

    Raises:
        ReportReadError: a saved ncu run's ``run.json`` cannot be read (truncated, damaged).
    """
    out = Path(out)
    logged: dict[str, float] = {}
    for row in read_jsonl(out / TIMINGS):
        logged[row["part"]] = logged.get(row["part"], 0.0) + row["wall_s"]
    # the ncu runs the recorder made (a candidates file may lie in a folder with others')
    runs = [read_run(p) for root in ("sets", "profiles") for p in (out / root).rglob("run.json")]
    return {"logged_s": logged,
            "ncu_runs_s": sum(m["wall_s"] for m in runs), "ncu_runs": len(runs),
            "candidates_judged_s": sum(r.get("wall_s") or 0.0
                                       for r in read_jsonl(out / "candidates.jsonl")),
            "candidates": len(read_jsonl(out / "candidates.jsonl"))}


def problem_costs(out: Path) -> dict[str, dict]:
    """Per problem, the device seconds the recording spent on it directly: its reference
    timing (``reference_s``, where the row logged it), its ncu runs (``ncu_s``: each run's
    seconds for it, setting up and profiling, re-runs included) and its candidates' judging
    and timing (``candidates_s``, and how many: ``candidates``), and their sum (``total_s``).
    Not in them: ncu's start-up, the compile warm-up and the plan, which serve a chunk."""
    out = Path(out)
    costs: dict[str, dict] = {}

    def cost(uri: str) -> dict:
        return costs.setdefault(uri, {"reference_s": 0.0, "ncu_s": 0.0, "candidates_s": 0.0,
                                      "candidates": 0})
    for row in read_jsonl(out / "reference.jsonl"):
        cost(row["uri"])["reference_s"] += row.get("wall_s") or 0.0
    for path in sorted(out.rglob("run.json")):
        for r in read_run(path)["status"]:
            if r.get("event") == "problem":
                cost(r["uri"])["ncu_s"] += (r.get("profiled_s") or 0.0) + (r.get("setup_s")
                                                                          or 0.0)
    for row in read_jsonl(out / "candidates.jsonl"):
        c = cost(row["uri"])
        c["candidates_s"] += row.get("wall_s") or 0.0
        c["candidates"] += 1
    for c in costs.values():
        c["total_s"] = c["reference_s"] + c["ncu_s"] + c["candidates_s"]
    return {uri: {k: round(v, 3) if isinstance(v, float) else v for k, v in c.items()}
            for uri, c in costs.items()}
