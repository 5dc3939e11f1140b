"""Recording a KernelBench checkout's levels 1-3, chunk by chunk, so that every stop leaves
complete problems and the complete ones are a balanced sample.

Two steps (docs/kernelbench.md):

1. **Prepare** (CPU, once): :func:`prepare_manifest` reads the checkout, computes each
   problem's static features in an isolated worker (its stratum: level and primary op tag),
   deals the seeded stratified splits (:func:`~autoprofiler_env.dataset.splits.stratified_splits`)
   and the recording order (:func:`~autoprofiler_env.dataset.splits.balanced_order`: every
   prefix holds each level, op kind and split in proportion), and writes the recording's
   manifest, ``kernelbench.json``: the commit, each problem's provenance (level, file name,
   sha256), stratum and split, in recording order, and the files left out and why.

       autoprofiler record --source KERNELBENCH_DIR --out REC --prepare [--commit SHA]

2. **Record** (GPU, resumable): :func:`record_kernelbench` takes the manifest's problems in
   order, ``chunk`` at a time, and for each chunk records, before the next chunk starts: the
   eager reference timings, one ncu run of the full set, the plan (every candidate the
   current reference optimizer can reach from any section set, computed on the device from
   the chunk's recorded evidence: :mod:`.plan`, appended to ``plan.json``), and the planned
   candidates, problem by problem in order. A time budget stops it between units of work (a
   problem's timing, an ncu run, a candidate), so the problems complete at any stop are the
   order's first ones, bar those that failed; the next call goes on where it stopped. Each
   checkout file is checked against the manifest's sha256 first.

       autoprofiler record --source KERNELBENCH_DIR --out REC [--commit SHA] [--chunk 8]
                           [--time-budget 520] [--warm-workers 6] [--candidate-timeout 180]

``autoprofiler dataset build --recording REC --source KERNELBENCH_DIR --complete`` ships the
complete problems (:func:`~autoprofiler_env.dataset.build.build_kernelbench`).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path

from tqdm import tqdm

from autoprofiler_env.atomic import write_atomic
from autoprofiler_env.dataset.record.machine import _past
from autoprofiler_env.dataset.record.ncu import STEPPED_OPS
from autoprofiler_env.dataset.splits import PATTERN, balanced_order, stratified_splits
from autoprofiler_env.errors import DatasetError, ProblemError, SourceMismatchError
from autoprofiler_env.jsonlines import read_jsonl
from autoprofiler_env.problems import Problem
from autoprofiler_env.problems.kernelbench import (
    LEVELS,
    KernelBenchCheckout,
    KernelBenchProvenance,
    check_file,
)
from autoprofiler_env.profiler.runner import MAX_OPS

LEVEL_FOLDER = re.compile(r"level([0-9]+)")
"""A checkout's folder of one level's problems."""
MANIFEST = "kernelbench.json"
"""The manifest's file name in a recording folder."""
MANIFEST_SCHEMA = "autoprofiler-kernelbench-recording/1"
PLAN = "plan.json"
KERNELBENCH_PARTS = ("reference", "full", "plan", "candidates")
"""What each chunk records, in this order (``plan`` runs on the device's CPU)."""
CANDIDATE_TIMEOUT_S = 180.0
"""The judge's limit for one KernelBench candidate (compile, correctness runs, timing):
KernelBench's own evaluation gives a candidate 180 s (``scripts/eval_from_generations.py``).
One that outlasts it is recorded as failed (``timeout``). Without a limit shorter than a
device command, one compile that never ends stops the recording: EfficientNetB2's first
warm batch of compiles ran through five 5-9-minute commands on the H200."""


@dataclass(frozen=True)
class ManifestProblem:
    """One problem of the recording: its provenance, its stratum's op kind (the primary op
    tag) and its split."""

    provenance: KernelBenchProvenance
    op: str
    split: str

    @property
    def uri(self) -> str:
        return self.provenance.uri

    @property
    def stratum(self) -> tuple[int, str]:
        return self.provenance.level, self.op


@dataclass(frozen=True)
class RecordingManifest:
    """What a KernelBench recording records: the checkout's commit, the levels (those the
    checkout has of the levels asked), the split seed, the problems in recording order, the
    files left out (``"level3/x.py"`` -> why), and the levels asked that the checkout did not
    have (``missing_levels``, written only where there are some)."""

    commit: str | None
    levels: tuple[int, ...]
    seed: int
    problems: tuple[ManifestProblem, ...]
    skipped: dict[str, str]
    missing_levels: tuple[int, ...] = ()

    def to_dict(self) -> dict:
        return {"schema": MANIFEST_SCHEMA, "commit": self.commit, "levels": list(self.levels),
                **({"missing_levels": list(self.missing_levels)} if self.missing_levels
                   else {}),
                "seed": self.seed, "split_pattern": list(PATTERN),
                "problems": [{"level": m.provenance.level, "file": m.provenance.file,
                              "sha256": m.provenance.sha256, "op": m.op, "split": m.split}
                             for m in self.problems],
                "skipped": self.skipped}

    def save(self, path: Path) -> None:
        """Writes atomically, as indented JSON (it is committed with the recording)."""
        write_atomic(Path(path), (json.dumps(self.to_dict(), indent=1) + "\n").encode())

    @classmethod
    def load(cls, path: Path) -> RecordingManifest:
        """Reads a manifest.

        Raises:
            DatasetError: missing, not JSON, of another schema, or without its fields.
        """
        path = Path(path)
        try:
            doc = json.loads(path.read_text())
            if doc.get("schema") != MANIFEST_SCHEMA:
                raise ValueError(f"schema {doc.get('schema')!r}, not {MANIFEST_SCHEMA!r}")
            commit = doc["commit"]
            problems = tuple(ManifestProblem(
                KernelBenchProvenance(d["level"], d["file"], d["sha256"], commit),
                d["op"], d["split"]) for d in doc["problems"])
            manifest = cls(commit, tuple(doc["levels"]), int(doc["seed"]), problems,
                           dict(doc["skipped"]),
                           tuple(int(level) for level in doc.get("missing_levels", ())))
        except FileNotFoundError:
            raise DatasetError(f"no KernelBench manifest at {path}: prepare the recording "
                               "first (`autoprofiler record --source DIR --out "
                               f"{path.parent} --prepare`)") from None
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise DatasetError(f"{path} is not a KernelBench recording's manifest "
                               f"({type(e).__name__}: {e}); prepare it again") from None
        bad = next(((m, why) for m in problems if (why := m.provenance.invalid())), None)
        if bad is not None:
            raise DatasetError(f"{path}: {bad[0].uri}: {bad[1]}; prepare it again")
        return manifest

    def problems_from(self, checkout: KernelBenchCheckout) -> list[Problem]:
        """The manifest's problems, in recording order, read from ``checkout`` (KernelBench
        URIs, levels and splits), each file's sha256 checked against the recorded one.

        Raises:
            SourceMismatchError: a file differs (the message names the first and how many
                differ) or is missing.
        """
        problems, wrong = [], []
        for m in self.problems:
            path = checkout.root / f"level{m.provenance.level}" / m.provenance.file
            try:
                check_file(path, m.provenance)
            except (SourceMismatchError, OSError) as e:
                wrong.append((m, e))
                continue
            problems.append(replace(checkout.problem(m.provenance, check=False),
                                    split=m.split))
        if wrong:
            first, error = wrong[0]
            detail = (error.cause if isinstance(error, ProblemError)
                      else f"cannot be read ({error})")
            raise SourceMismatchError(
                checkout.root, f"{len(wrong)} of the recording's {len(self.problems)} files "
                f"differ from the checkout's, the first level{first.provenance.level}/"
                f"{first.provenance.file}, which {detail}",
                f"give a checkout of KernelBench at commit {self.commit}" if self.commit else
                "give the checkout the recording was prepared from (its manifest records no "
                "commit)")
        return problems

    @property
    def splits(self) -> dict[str, str]:
        return {m.uri: m.split for m in self.problems}

    def unlisted(self, checkout: KernelBenchCheckout) -> list[str]:
        """The checkout's files of the manifest's levels (those it had, and those it lacked)
        that the manifest neither holds nor left out (``"level1/101_New.py"``): files added
        since it was prepared, which this recording does not record."""
        known = {f"level{m.provenance.level}/{m.provenance.file}" for m in self.problems}
        known |= set(self.skipped)
        return [f"level{level}/{path.name}" for level in (*self.levels, *self.missing_levels)
                for path in sorted((checkout.root / f"level{level}").glob("*.py"))
                if not path.name.startswith("_") and f"level{level}/{path.name}" not in known]


def prepare_manifest(checkout: KernelBenchCheckout, levels: tuple[int, ...] = LEVELS,
                     seed: int = 0, timeout_s: float = 60.0,
                     features=None) -> RecordingManifest:
    """The manifest of a recording of ``checkout``'s ``levels``: each problem's stratum
    (level, primary op tag), its seeded stratified split, and the recording order. A file
    that is not a KernelBench-format problem, or whose features fail (its forward does not
    run on the meta device, it imports a package this machine lacks, it outlasts
    ``timeout_s``), is left out, with the reason in ``skipped``. ``features``: a function
    from a problem to its static features (default: an isolated worker per file,
    :class:`~autoprofiler_env.problems.isolated.IsolatedFeatures`). A level the checkout has
    no folder for is said on stderr and kept in ``missing_levels`` (not among the files
    left out).

    Raises:
        DatasetError: no problem to record (no folder of the levels asked, or every file of
            them left out): a manifest of none would be refused by nothing and block
            preparing again.
    """
    from contextlib import nullcontext

    from autoprofiler_env.dataset.record.machine import say
    from autoprofiler_env.problems.isolated import IsolatedFeatures

    levels = tuple(levels)
    present = tuple(level for level in levels if (checkout.root / f"level{level}").is_dir())
    missing = tuple(level for level in levels if level not in present)
    folders = sorted((p.name for p in checkout.root.iterdir()
                      if p.is_dir() and LEVEL_FOLDER.fullmatch(p.name)),
                     key=lambda name: int(name[5:]))
    problems, broken = checkout.problems(present)
    skipped = {_rel(checkout, e.path): e.cause for e in broken}
    asked = ", ".join(map(str, levels))
    found = ", ".join(f"{name}/" for name in folders) or "none"

    def none_to_record() -> DatasetError:
        first = next(iter(sorted(skipped.items())), None)
        return DatasetError(
            f"no problem to record in {checkout.root}: levels asked {asked}; level folders "
            f"found: {found}"
            + (f"; {len(skipped)} file{'s' if len(skipped) > 1 else ''} of "
               f"{', '.join(f'level{v}/' for v in present)} left out (e.g. {first[0]}: "
               f"{first[1]})" if first else "")
            + ": give --levels of the level folders it has; no manifest was written")
    if not problems:
        raise none_to_record()
    ops: dict[str, str] = {}
    by_uri = {p.uri: p for p in problems}
    with (IsolatedFeatures(timeout_s=timeout_s) if features is None
          else nullcontext()) as isolated:
        compute = features or isolated.static_features
        for problem in tqdm(problems, desc="static features", unit="problem"):
            try:
                tags = compute(problem).tags
            except ProblemError as e:
                skipped[_rel(checkout, problem.path)] = e.cause
                continue
            if not tags:
                skipped[_rel(checkout, problem.path)] = "its forward dispatches no operator"
                continue
            ops[problem.uri] = tags[0]
    if not ops:
        raise none_to_record()
    if missing:
        say(f"the checkout {checkout.root} has no folder for level "
            f"{', '.join(map(str, missing))} (levels asked {asked}; level folders found: "
            f"{found}): the manifest holds level {', '.join(map(str, present))}")
    strata = {uri: (by_uri[uri].level, op) for uri, op in ops.items()}
    splits = stratified_splits(strata, seed)
    order = balanced_order({uri: (*strata[uri], splits[uri]) for uri in strata}, seed)
    return RecordingManifest(
        checkout.commit, present, seed,
        tuple(ManifestProblem(checkout.provenance(by_uri[uri]), ops[uri], splits[uri])
              for uri in order),
        dict(sorted(skipped.items())), missing)


def _rel(checkout: KernelBenchCheckout, path) -> str:
    path = Path(path)
    try:
        return str(path.resolve().relative_to(checkout.root))
    except ValueError:
        return path.name


# -- the state of a recording ---------------------------------------------------------------

@dataclass(frozen=True)
class _State:
    """What a KernelBench recording folder holds, per problem."""

    reference: dict[str, dict]     # uri -> its reference row
    full: set[str]                 # the problems the full set's runs are done with
    planned: dict[str, list[str]]  # uri -> its planned candidates
    unplanned: dict[str, str]      # uri -> why it has no plan (no evidence)
    recorded: set[tuple[str, str]]  # (uri, candidate) judged in candidates.jsonl

    def needs(self, uri: str) -> str | None:
        """The first part the problem still needs, or None when it is complete (or failed
        for good: its reference or ncu errored)."""
        row = self.reference.get(uri)
        if row is None:
            return "reference"
        if row.get("error") is not None:
            return None
        if uri not in self.full:
            return "full"
        if uri in self.unplanned:
            return None
        if uri not in self.planned:
            return "plan"
        if any((uri, c) not in self.recorded for c in self.planned[uri]):
            return "candidates"
        return None


def _state(out: Path) -> _State:
    from autoprofiler_env.dataset.record.candidates import judged
    from autoprofiler_env.dataset.record.ncu import covered

    plan = _read_plan(out / PLAN)
    return _State(reference={r["uri"]: r for r in read_jsonl(out / "reference.jsonl")},
                  full=covered(out / "sets" / "full"),
                  planned={p["uri"]: [c["name"] for c in p["candidates"]]
                           for p in plan["problems"]},
                  unplanned=dict(plan.get("left_out", {})),
                  recorded=judged(read_jsonl(out / "candidates.jsonl")))


def _read_plan(path: Path) -> dict:
    if not path.is_file():
        from autoprofiler_env.dataset.record.plan import planning_optimizers

        return {"optimizer": planning_optimizers()[0].name,
                "tolerances": ["kernelbench-v0.1", "kernelbench"],
                "made": "chunk by chunk, on the device, from each chunk's recorded evidence",
                "problems": [], "left_out": {}}
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        raise DatasetError(f"{path} is not a recording plan ({e}); remove it to plan the "
                           "recorded problems again") from None


def recording_status(out: Path, manifest: RecordingManifest) -> dict:
    """How far the recording is: per part, how many of the manifest's problems still need
    it, and how many are complete (every part recorded) or failed (their reference timing
    or ncu run errored, or their evidence was unusable)."""
    state = _state(Path(out))
    needs = [state.needs(m.uri) for m in manifest.problems]
    failed = sum(1 for m in manifest.problems if state.needs(m.uri) is None and (
        (state.reference[m.uri].get("error") is not None) or m.uri in state.unplanned))
    return {"problems": len(needs), "complete": needs.count(None) - failed, "failed": failed,
            "needs": {part: needs.count(part) for part in KERNELBENCH_PARTS}}


# -- recording ------------------------------------------------------------------------------

def plan_chunk(out: Path, problems: list[Problem], cost_model=None) -> dict[str, list[str]]:
    """Plans the candidates of ``problems`` (those with a reference timing and the full set's
    evidence): a dataset is built of their recorded runs, then every candidate the reference
    optimizer reaches from any section set is listed, cheapest first (:mod:`.plan`). The
    plans are appended to ``out/plan.json`` in the order given; a problem without usable
    evidence goes to its ``left_out``. Returns the new plans (URI -> candidate names)."""
    from autoprofiler_env.dataset.record.plan import candidate_names

    out = Path(out)
    if not problems:
        return {}
    made, left_out = _make_plans(out, problems, cost_model)
    doc = _read_plan(out / PLAN)
    doc["problems"] += [_plan_entry(p) for p in made]
    doc["left_out"].update(left_out)
    write_atomic(out / PLAN, (json.dumps(doc, indent=1) + "\n").encode())
    return candidate_names(made)


def replan(out: Path, checkout: KernelBenchCheckout, cost_model=None) -> dict[str, list[str]]:
    """Plans again, from their recorded evidence, the problems the recording has planned
    (CPU), after a change of the reference optimizer: each problem whose plan made now reaches
    candidates its saved plan lacks gets the new plan in ``out/plan.json``, and the recorder
    then judges those candidates (the ones judged already are kept). Returns URI -> the
    candidates added.

    Raises:
        DatasetError: no manifest, or a plan that is not one.
        SourceMismatchError: a checkout file is not the one the manifest recorded.
    """
    from autoprofiler_env.dataset.record.plan import candidate_names

    out = Path(out)
    manifest = RecordingManifest.load(out / MANIFEST)
    planned = _state(out).planned
    problems = [p for p in manifest.problems_from(checkout) if p.uri in planned]
    if not problems:
        return {}
    made = {p.uri: p for p in _make_plans(out, problems, cost_model)[0]}
    names = candidate_names(list(made.values()))
    doc = _read_plan(out / PLAN)
    added = {}
    for i, entry in enumerate(doc["problems"]):
        uri = entry["uri"]
        extra = [n for n in names.get(uri, []) if n not in planned[uri]]
        if extra:
            doc["problems"][i] = _plan_entry(made[uri])
            added[uri] = extra
    if added:
        write_atomic(out / PLAN, (json.dumps(doc, indent=1) + "\n").encode())
    return added


def _make_plans(out: Path, problems: list[Problem], cost_model=None) -> tuple[list, dict]:
    """The plans of ``problems`` made from the recording's evidence (:mod:`.plan`), and the
    problems without usable evidence (URI -> why)."""
    from autoprofiler_env.dataset.build import build
    from autoprofiler_env.dataset.record.ncu import read_run
    from autoprofiler_env.dataset.record.plan import make_plan, planning_optimizers
    from autoprofiler_env.dataset.replay import Dataset

    uris = {p.uri for p in problems}
    runs = [path.parent for path in sorted((out / "sets" / "full").rglob("run.json"))
            if uris & {p["uri"] for p in read_run(path)["problems"]}]
    reference = [r for r in read_jsonl(out / "reference.jsonl") if r["uri"] in uris]
    if cost_model is None:
        from autoprofiler_env.dataset.build import suite_fallback

        cost_model = suite_fallback()
    content = build(runs, reference, [], problems={p.uri: p for p in problems},
                    cost_model=cost_model)
    made = make_plan(Dataset(content), planning_optimizers(),
                     order=[p.uri for p in problems if p.uri in content.problems])
    return made, dict(content.metadata["left_out"])


def _plan_entry(plan) -> dict:
    return {"uri": plan.uri, "split": plan.split,
            "candidates": [{"name": c.name, "sections": list(c.sections),
                            "cost_share": c.cost_share} for c in plan.candidates]}


def record_kernelbench(out: Path, checkout: KernelBenchCheckout, chunk: int = 8,
                       time_budget_s: float | None = None, device: str = "cuda",
                       warm_workers: int = 6, max_ops: int | None = MAX_OPS,
                       reuse: tuple[Path, ...] = (),
                       candidate_timeout_s: float = CANDIDATE_TIMEOUT_S,
                       reference_only: bool = False, workers=None) -> dict:
    """Records the manifest's problems (``out/kernelbench.json``) chunk by chunk, resuming
    what ``out`` holds: each chunk's reference timings, its ncu run of the full set (one
    invocation for the chunk), its plan and its planned candidates, before the next chunk.
    Each part's wall time goes to ``timings.jsonl`` (one line per part that ran in a chunk),
    a stopped one's too. Returns how far the recording is (:func:`recording_status`) and
    whether the time budget stopped it (it ran out, or what was left of it was too little to
    start what remains). A candidate not judged within ``candidate_timeout_s`` is
    recorded as failed (``timeout``). ``reference_only``: only the reference timings, of
    every chunk (under a second a problem on the H200), so that the problems the judge
    refuses (broken, or matched by a constant) are known before the costly parts; the chunks
    then go on from their ncu runs. ``workers`` (:class:`~.fanout.LocalWorkers`,
    :class:`~.fanout.RayWorkers`): each part of a chunk is spread over their GPUs, one unit
    per problem (:func:`~.fanout.record_fanout`; its rows are the single-GPU path's), so a
    chunk of at least as many problems as GPUs keeps them all busy; the plan is made on the
    driver, between the ncu runs and the candidates, as without.

    ``time_budget_s``: None for none (0 stops at once). Files of the checkout that the
    manifest does not hold (added since it was prepared) are not recorded, and said so.
    Before it records anything it checks what would refuse the recording
    (:func:`~.machine.preflight`: no CUDA device, no ncu while a problem needs its ncu run,
    the recording's rows made on another machine), so that a refusal leaves ``out`` as it
    was; on a Ray cluster (``workers``) the rows are checked as they come instead.

    Raises:
        DatasetError: no manifest (prepare it first), or ``max_ops`` is not the cap the
            recording's ncu runs cut forwards at (one recording, one cap: the replay and the
            live backend profile under it).
        SourceMismatchError: a checkout file is not the one the manifest recorded.
        MachineError: no CUDA device for ``device``, or the recording was made on another
            machine (:class:`~.machine.OtherMachineError`).
        NcuNotFoundError: no ncu, and a problem needs its ncu run.
        ValueError: ``chunk`` under 1.
    """
    from autoprofiler_env.dataset.record import _record_part, _timed
    from autoprofiler_env.dataset.record.fanout import LocalWorkers
    from autoprofiler_env.dataset.record.machine import preflight, say
    from autoprofiler_env.dataset.record.ncu import recorded_cap
    from autoprofiler_env.profiler.runner import terminate_becomes_exit

    if chunk < 1:
        raise ValueError(f"a chunk holds at least 1 problem, not {chunk}")
    out = Path(out)
    manifest = RecordingManifest.load(out / MANIFEST)
    cap = recorded_cap(out / "sets" / "full")
    if cap is not None and max_ops != cap:
        raise DatasetError(f"{out}'s ncu runs cut forwards at {cap} operators: record it on "
                           f"with --max-ops {cap} (MAX_OPS={cap} in the device script), not "
                           f"{max_ops}")
    problems = manifest.problems_from(checkout)
    state = _state(out)
    here = workers is None or isinstance(workers, LocalWorkers)  # else Ray's nodes record
    preflight(out, device if here else None, ncu=here and not reference_only and any(
        state.needs(p.uri) in ("reference", "full") for p in problems))
    unlisted = manifest.unlisted(checkout)
    if unlisted:
        say(f"the checkout holds {len(unlisted)} file{'s' if len(unlisted) > 1 else ''} "
            f"that {out / MANIFEST} does not (e.g. {unlisted[0]}), added since it was "
            "prepared: this recording records its manifest's problems only; a new --out "
            "with --prepare records them")
    deadline = time.monotonic() + time_budget_s if time_budget_s is not None else None
    reused = [row for path in reuse for row in read_jsonl(Path(path))]
    stepped = {m.uri for m in manifest.problems if m.op in STEPPED_OPS}  # ncu: alone, capped
    cost_model = None
    with terminate_becomes_exit():
        for start in tqdm(range(0, len(problems), chunk), desc="kernelbench chunks",
                          unit="chunk"):
            members = problems[start:start + chunk]
            state = _state(out)
            if all(state.needs(p.uri) in (None, *(("full", "plan", "candidates")
                                                  if reference_only else ())) for p in members):
                continue
            if _past(deadline):
                break
            common = dict(chunk=len(members), deadline=deadline, device=device,
                          warm_workers=warm_workers, llm=None, max_ops=max_ops,
                          candidate_timeout_s=candidate_timeout_s, alone=stepped)

            def record_part(part: str, todo: list[Problem], **extra) -> None:
                if workers is None:
                    _record_part(part, out, todo, **common, **extra)
                    return
                from autoprofiler_env.dataset.record import fanout, recording_config

                left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                fanout.record_fanout(out, todo, workers, (part,), recording_config(device),
                                     time_budget_s=left, warm_workers=warm_workers,
                                     max_ops=max_ops, candidate_timeout_s=candidate_timeout_s,
                                     alone=stepped, preflight=False, **extra)

            todo = [p for p in members if state.needs(p.uri) == "reference"]
            if todo:
                record_part("reference", todo)
            if reference_only:
                continue
            state = _state(out)
            todo = [p for p in members if state.needs(p.uri) == "full"]
            if todo:
                record_part("full", todo)
            state = _state(out)
            todo = [p for p in members if state.needs(p.uri) == "plan"]
            if todo and not _past(deadline):
                if cost_model is None:
                    from autoprofiler_env.dataset.build import suite_fallback

                    cost_model = suite_fallback()
                with _timed(out, "plan", device) as holds:
                    holds.append(len(plan_chunk(out, todo, cost_model)))
            state = _state(out)
            todo = [p for p in members if state.needs(p.uri) == "candidates"]
            if todo and not _past(deadline):
                record_part("candidates", todo,
                            plan={p.uri: state.planned[p.uri] for p in todo}, reuse=reused)
    status = recording_status(out, manifest)
    # the budget stopped it where it ran out, and also where work is left with time still on
    # the clock: the ncu part starts nothing with less than MIN_RUN_S left, nor a run alone
    # that a deadline stopped with more (2026-12-04: 17 s before the deadline, 21 chunks were
    # passed over and the recorder said it had not been stopped)
    left = status["needs"]["reference"] if reference_only else sum(status["needs"].values())
    return {**status, "stopped_by_time_budget": deadline is not None and (
        _past(deadline) or left > 0)}
