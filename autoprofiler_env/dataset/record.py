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

    reference.jsonl                  one line per problem (eager time, spread, peak memory)
    sets/<set>/<run>/                saved ncu runs of ncu's full (and basic, detailed) set
    profiles/<section>/<run>/        saved ncu runs of one action section alone
    candidates.jsonl                 one line per (problem, transformation)
    timings.jsonl                    one line per part per call: its wall time (device time)
    llm.jsonl                        one line per (problem, section set, repeat) of an LLM
                                     optimizer (``record_llm``; its endpoint needs no GPU, the
                                     harness does)

``autoprofiler dataset build`` turns it into a dataset file.
"""

from __future__ import annotations

import hashlib
import json
import platform
import queue
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from autoprofiler_env.errors import ProblemError
from autoprofiler_env.harness import Evaluator, HarnessConfig
from autoprofiler_env.harness.records import JUDGE_VERSION
from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl
from autoprofiler_env.problems import Problem
from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS, load_catalogue
from autoprofiler_env.profiler.runner import (
    MAX_KERNELS,
    failed_problem,
    first_unprimed,
    run_ncu,
    terminate_becomes_exit,
    timed_out,
)

PARTS = ("reference", "full", "candidates", "sets", "profiles", "llm")
"""What a recording can hold, in the order they are recorded (``llm`` needs an
:class:`LLMPart`)."""
DEFAULT_PARTS = ("reference", "full", "candidates")
"""Enough for a dataset: the eager times, every problem's run of ncu's full set (the evidence of
every section, cut out of it, and the full set's cost) and the candidates' outcomes. ``sets``
(basic and detailed) and ``profiles`` (each action section alone) measure what those cost alone
and fit the cost model that predicts it elsewhere (:mod:`.costs`): a sample of problems will
do."""


def machine_info(device: str) -> dict:
    """The versions and the device a recording was made with."""
    import torch

    info = {"torch": torch.__version__, "python": platform.python_version(), "device": device}
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(device)
        info.update(gpu=props.name, cuda=torch.version.cuda,
                    sm_count=props.multi_processor_count,
                    memory_gb=round(props.total_memory / 2**30, 1))
        try:
            import triton

            info["triton"] = triton.__version__
        except ImportError:
            pass
    return info


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() > deadline


def record_reference(problems: list[Problem], config: HarnessConfig, out: Path,
                     deadline: float | None = None) -> list[dict]:
    """Times each problem's eager reference not yet in ``out``; returns all rows."""
    done = {row["uri"] for row in read_jsonl(out)}
    todo = [p for p in problems if p.uri not in done]
    info = machine_info(config.device)
    with Evaluator(config) as evaluator, JsonlAppender(out) as log:
        for problem in tqdm(todo, desc="reference timing", unit="problem"):
            if _past(deadline):
                break
            row = {"uri": problem.uri, "level": problem.level, **info}
            try:
                run = evaluator.reference(problem)
                row.update(median_ms=run.timing.median_ms, p20_ms=run.timing.p20_ms,
                           p80_ms=run.timing.p80_ms, n_trials=run.timing.n_trials,
                           peak_memory_mb=(run.peak_memory_bytes / 2**20
                                           if run.peak_memory_bytes is not None else None),
                           error=None)
            except ProblemError as e:
                row.update(error=str(e))
            log.write(row)
    return read_jsonl(out)


def chunks(problems: list[Problem], size: int) -> list[tuple[str, list[Problem]]]:
    """Problems in chunks of ``size``, each named by a hash of its URIs (so that a chunk's
    saved run is never confused with another one's)."""
    out = []
    for start in range(0, len(problems), size):
        members = problems[start:start + size]
        digest = hashlib.sha256("\n".join(p.uri for p in members).encode()).hexdigest()[:10]
        out.append((f"{start // size:03d}-{digest}", members))
    return out


def _runs(root: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(root.rglob("run.json"))]


def _timed_out_batched(meta: dict) -> str | None:
    """The problem that outlasted its timeout in a run without a kernel cap, which the
    recorder profiles again alone with one (``MAX_KERNELS``); else None."""
    failed = failed_problem(meta["status"])
    if failed is None or not timed_out(meta["status"]) or "--launch-count" in meta["command"]:
        return None
    return meta["problems"][failed]["uri"]


def covered(root: Path) -> set[str]:
    """The problems the saved runs under ``root`` are done with: profiled, or failed (a crash,
    or a hang with the kernel cap on, is not retried); not those a deadline stopped before or
    during, nor one that timed out in a batched run (it is profiled again alone, capped), nor
    the first problem of a run without the primer (its cost holds ncu's start-up)."""
    done = set()
    for meta in _runs(root):
        first = first_unprimed(meta["status"])
        done |= {r["uri"] for r in meta["status"]
                 if r.get("event") == "problem" and r["uri"] != first}
        failed = failed_problem(meta["status"])
        if failed is not None and _timed_out_batched(meta) is None:
            done.add(meta["problems"][failed]["uri"])
    return done


MIN_RUN_S = 30.0
"""An ncu run is not started with less time left: ncu's start-up and the primer take about
4 s on the H200, and a problem under the full set takes 10-40 s."""


def record_ncu(problems: list[Problem], configs: dict[str, list[str]], root: Path, chunk: int,
               deadline: float | None = None, problem_timeout_s: float = 300.0) -> int:
    """ncu runs, in chunks of ``chunk`` problems, of each config's problems that no run saved
    under ``root/<config>/`` is done with. A run the deadline stops keeps the problems it
    finished; the next call profiles the rest. A problem that timed out in a batched run is
    profiled alone, on its first ``MAX_KERNELS`` kernels. Returns how many runs it made."""
    made = 0
    for name, sections in configs.items():
        done = covered(root / name)
        capped = {uri for meta in _runs(root / name)
                  if (uri := _timed_out_batched(meta)) is not None} - done
        todo = [p for p in problems if p.uri not in done and p.uri not in capped]
        work = [(chunk_id, members, None) for chunk_id, members in chunks(todo, chunk)]
        work += [(f"capped-{chunks([p], 1)[0][0]}", [p], MAX_KERNELS)
                 for p in problems if p.uri in capped]
        for chunk_id, members, max_kernels in tqdm(work, desc=f"ncu {name}", unit="run"):
            left = deadline - time.monotonic() if deadline is not None else None
            if left is not None and left < MIN_RUN_S:
                return made
            run = run_ncu(members, sections, workdir=root / "_work", max_kernels=max_kernels,
                          problem_timeout_s=problem_timeout_s, deadline_s=left)
            run.save(root / name / f"{time.strftime('%Y%m%d-%H%M%S')}-{chunk_id}")
            made += 1
    return made


class CandidateWarmer:
    """Compiles candidates in ``workers`` worker processes at once, filling Inductor's on-disk
    cache, so that judging and timing them one at a time afterwards spends its time on the
    GPU. Errors are left for that pass to judge and record. A context manager: the workers
    live until it closes, across calls of :meth:`warm`."""

    def __init__(self, config: HarnessConfig, workers: int, timeout_s: float = 600.0) -> None:
        from dataclasses import replace

        self.workers = workers
        warm_config = replace(config, n_correctness=1, timing_budget_ms=1, min_trials=1,
                              max_trials=1, warmup_ms=0, flush_l2=False)
        self._all = [Evaluator(warm_config, timeout_s=timeout_s, spare=False)
                     for _ in range(workers if workers > 1 else 0)]
        self._stopping = False
        self._free: queue.Queue = queue.Queue()
        for evaluator in self._all:
            self._free.put(evaluator)

    def warm(self, items: list[tuple[Problem, str]], deadline: float | None = None) -> None:
        """Compiles ``(problem, source)`` items, each in whichever worker is free. At the
        deadline (or on an exception, SIGTERM's SystemExit included) the compiles in flight
        are killed and the rest dropped: warming saves nothing that a later call needs."""
        if self.workers <= 1 or not items or _past(deadline):
            return
        self._stopping = False  # set when this call is stopped, until its threads are done

        def one(item):
            problem, source = item
            if _past(deadline) or self._stopping:
                return
            evaluator = self._free.get()  # one item at a time per worker process
            try:
                if not self._stopping:
                    evaluator.evaluate(problem, source)
            except Exception:  # a broken candidate is judged, and recorded, in the timed pass
                pass
            finally:
                self._free.put(evaluator)

        with ThreadPoolExecutor(self.workers) as pool:
            futures = [pool.submit(one, item) for item in items]
            timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                for _ in tqdm(as_completed(futures, timeout=timeout), total=len(items),
                              desc="compile", leave=False):
                    pass
            except BaseException as e:  # the deadline, or the process is being stopped
                self._stopping = True
                for future in futures:
                    future.cancel()
                for evaluator in self._all:
                    evaluator.interrupt()
                if not isinstance(e, TimeoutError):
                    raise

    def close(self) -> None:
        for evaluator in self._all:
            evaluator.close()

    def __enter__(self) -> CandidateWarmer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def record_candidates(problems: list[Problem], out: Path, config: HarnessConfig,
                      warm_workers: int = 6, timeout_s: float = 600.0,
                      deadline: float | None = None) -> list[dict]:
    """Judges and times every applicable transformation of every problem not yet in ``out``.

    In batches of ``4 * warm_workers`` candidates: each batch is first compiled in
    ``warm_workers`` processes at once (filling Inductor's on-disk cache), then judged and
    timed one candidate at a time, so that no two timings share the GPU and a time budget
    that runs out stops soon after compiling started, with every judged candidate recorded.
    """
    from autoprofiler_env.features import static_features
    from autoprofiler_env.optimizers import applicable

    done = {(r["uri"], r["transformation"]) for r in read_jsonl(out)}
    todo = []
    for problem in problems:
        features = static_features(problem)
        for t in applicable(problem, features, config.device):
            if (problem.uri, t.name) not in done:
                todo.append((problem, t.name, t.rewrite(problem, features)))
    if not todo:
        return read_jsonl(out)
    info = machine_info(config.device)
    batch = 4 * max(warm_workers, 1)
    with CandidateWarmer(config, warm_workers, timeout_s) as warmer, \
            Evaluator(config, timeout_s=timeout_s) as evaluator, JsonlAppender(out) as log, \
            tqdm(total=len(todo), desc="judge and time") as bar:
        for start in range(0, len(todo), batch):
            members = todo[start:start + batch]
            warmer.warm([(problem, source) for problem, _, source in members], deadline)
            for problem, name, source in members:
                if _past(deadline):
                    return read_jsonl(out)
                log.write(outcome_row(problem, name, evaluator.evaluate(problem, source),
                                      info, source))
                bar.update()
    return read_jsonl(out)


def outcome_row(problem: Problem, name: str, result, info: dict, source: str) -> dict:
    """One line of ``candidates.jsonl``: a candidate's judgement and timing, with the judge's
    version, the source's sha256 and the smallest tolerance it passes at (so that a stricter
    regime replays from it)."""
    return {"uri": problem.uri, "level": problem.level, "transformation": name,
            "correct": result.correct,
            "error_kind": result.error_name, "error_message": result.error_message[:300],
            "reference_ms": result.reference_ms, "candidate_ms": result.candidate_ms,
            "candidate_p20_ms": result.candidate.p20_ms if result.candidate else None,
            "candidate_p80_ms": result.candidate.p80_ms if result.candidate else None,
            "speedup": result.speedup, "max_abs_error": result.max_abs_error,
            "tolerance_needed": result.tolerance_needed,
            "timing_unexplained": result.timing_unexplained, "rechecked": result.rechecked,
            "judge": JUDGE_VERSION, "source_sha256": hashlib.sha256(source.encode()).hexdigest(),
            "wall_s": result.wall_s, **info}


def record_llm(problems: list[Problem], dataset, optimizer, section_sets: list[tuple[str, ...]],
               out: Path, config: HarnessConfig, repeats: int = 1,
               deadline: float | None = None) -> list[dict]:
    """Outcomes of an LLM optimizer per (problem, section set), ``repeats`` times each (the
    seed changes per repeat), with the profiles the dataset replays. A key already in ``out``
    is skipped. A reply the harness cannot run (no code, a time-out) is recorded as an
    incorrect outcome with its LLM error kind."""
    done = {(r["uri"], r["sections"], r["repeat"]) for r in read_jsonl(out)}
    base_seed = optimizer.seed
    with Evaluator(config) as evaluator, JsonlAppender(out) as log:
        for problem in problems:
            for sections in section_sets:
                key = "+".join(dataset.canonical(sections))
                for repeat in range(repeats):
                    if (problem.uri, key, repeat) in done:
                        continue
                    if _past(deadline):
                        return read_jsonl(out)
                    optimizer.seed = base_seed + repeat
                    profile = dataset.profile(problem.uri, sections) if sections else None
                    candidate = optimizer.optimize(problem, profile)
                    row = {"uri": problem.uri, "model": optimizer.producer, "sections": key,
                           "repeat": repeat, "seed": optimizer.seed}
                    if candidate.error:
                        row.update(correct=False, error_kind=candidate.error.split(":")[0],
                                   candidate_ms=None, speedup=None)
                    else:
                        result = evaluator.evaluate(problem, candidate.source)
                        row.update(correct=result.correct, error_kind=result.error_name,
                                   candidate_ms=result.candidate_ms, speedup=result.speedup)
                    log.write(row)
    optimizer.seed = base_seed
    return read_jsonl(out)


@dataclass(frozen=True)
class LLMPart:
    """What the ``llm`` part records: ``optimizer``'s outcomes (an :class:`~autoprofiler_env.
    optimizers.llm.LLMOptimizer`) with the profiles ``dataset`` replays for each of
    ``section_sets``, ``repeats`` times each."""

    optimizer: object
    dataset: object
    section_sets: tuple[tuple[str, ...], ...]
    repeats: int = 1
    uris: frozenset[str] | None = None  # the dataset's problems: the others are skipped


def parse_section_sets(text: str, sections: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """``"none;SpeedOfLight;SpeedOfLight+WarpStateStats;basic;full"`` -> section sets: ``none``
    is no profile; ``basic``, ``detailed`` and ``full`` are ncu's sets (their sections among
    ``sections``, the dataset's); anything else is sections joined by ``+``."""
    catalogue = load_catalogue()
    out = []
    for item in (t.strip() for t in text.split(";")):
        if item in ("", "none"):
            out.append(())
        elif item in catalogue.sets:
            out.append(tuple(s for s in sections if s in catalogue.sets[item]))
        else:
            names = tuple(x.strip() for x in item.split("+"))
            unknown = [x for x in names if x not in sections]
            if unknown:
                raise ValueError(f"unknown sections {unknown} in {item!r}: the dataset has "
                                 f"{', '.join(sections)}, and the sets none, "
                                 f"{', '.join(catalogue.sets)}")
            out.append(names)
    return tuple(dict.fromkeys(out))


def record(out: Path, problems: list[Problem], parts=DEFAULT_PARTS, chunk: int = 12,
           time_budget_s: float | None = None, device: str = "cuda",
           warm_workers: int = 6, llm: LLMPart | None = None) -> dict:
    """Records the parts asked for, resuming what ``out`` already holds. Returns a summary:
    what each part holds now and whether the time budget cut it short."""
    deadline = time.monotonic() + time_budget_s if time_budget_s else None
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise ValueError(f"unknown parts {sorted(unknown)}; choose from {', '.join(PARTS)}")
    if "llm" in parts and llm is None:
        raise ValueError("the llm part needs an LLMPart: the optimizer, the dataset whose "
                         "profiles it is shown, and the section sets")
    with terminate_becomes_exit():
        summary = {part: _record_part(part, out, problems, chunk, deadline, device,
                                      warm_workers, llm)
                   for part in PARTS if part in parts}  # in this order, whatever was asked
    if "llm" in summary and llm.uris is not None:
        missing = sum(p.uri not in llm.uris for p in problems)
        if missing:
            summary["llm_not_in_dataset"] = missing
    summary["stopped_by_time_budget"] = _past(deadline)
    return summary


def _record_part(part: str, out: Path, problems: list[Problem], chunk: int,
                 deadline: float | None, device: str, warm_workers: int,
                 llm: LLMPart | None):
    """Records one part; logs its wall time to ``timings.jsonl`` even when it is stopped (an
    exception, SIGTERM), so that the device time it took is not lost to the recording cost."""
    catalogue = load_catalogue()
    started = time.monotonic()
    holds = None
    try:
        if part == "reference":
            holds = len(record_reference(problems, HarnessConfig(device=device),
                                         out / "reference.jsonl", deadline))
        elif part == "candidates":
            holds = len(record_candidates(problems, out / "candidates.jsonl",
                                          HarnessConfig(device=device),
                                          warm_workers=warm_workers, deadline=deadline))
        elif part == "llm":
            shown = [p for p in problems if llm.uris is None or p.uri in llm.uris]
            holds = len(record_llm(shown, llm.dataset, llm.optimizer, list(llm.section_sets),
                                   out / "llm.jsonl", HarnessConfig(device=device),
                                   llm.repeats, deadline))
        else:
            configs = ({"full": list(catalogue.sets["full"])} if part == "full" else
                       {n: list(catalogue.sets[n]) for n in ("basic", "detailed")}
                       if part == "sets" else {s: [s] for s in ACTION_SECTIONS})
            root = out / ("sets" if part in ("full", "sets") else "profiles")
            record_ncu(problems, configs, root, chunk, deadline)
            holds = {name: len(covered(root / name)) for name in configs}
        return holds
    finally:
        row = {"part": part, "wall_s": time.monotonic() - started,
               "at": time.strftime("%Y-%m-%dT%H:%M:%S"), "device": device, "holds": holds}
        if holds is None:
            row["interrupted"] = True  # what it finished is in its files
        with JsonlAppender(out / TIMINGS) as log:
            log.write(row)


TIMINGS = "timings.jsonl"
"""One line per part per ``record`` call: its wall time. The recording's device time."""


def recording_cost(out: Path) -> dict:
    """What the recording cost in device seconds: per part, as ``record`` logged it
    (``timings.jsonl``), and what the recording itself shows of its parts made before that
    log existed: the ncu runs' wall time and the candidates' judging and timing wall time
    (without their compile warm-up)."""
    out = Path(out)
    logged: dict[str, float] = {}
    for row in read_jsonl(out / TIMINGS):
        logged[row["part"]] = logged.get(row["part"], 0.0) + row["wall_s"]
    runs = [json.loads(p.read_text()) for p in out.rglob("run.json")]
    return {"logged_s": logged,
            "ncu_runs_s": sum(m["wall_s"] for m in runs), "ncu_runs": len(runs),
            "candidates_judged_s": sum(r.get("wall_s") or 0.0
                                       for r in read_jsonl(out / "candidates.jsonl")),
            "candidates": len(read_jsonl(out / "candidates.jsonl"))}
