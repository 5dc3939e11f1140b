"""Does the replay answer as the GPU does? Live runs on the H200 compared with the dataset.

    python3 -m experiments.studies.fidelity pairs    [--out DIR] [--deadline S] [--warm-workers N]
    python3 -m experiments.studies.fidelity episodes [--out DIR] [--episodes 5] [--deadline S]
    python -m experiments.studies.fidelity analyze   [--out DIR]
    (any of them: [--dataset NAME|FILE] [--optimizer NAME] [--pairs 36|24] [--source DIR])

(pairs and episodes need a GPU; analyze runs anywhere.)

``pairs`` (issue 5's fidelity): for (problem, section set) pairs drawn from the dataset --
section sets of 1, 2, 3, 5 and 8 sections, three problems each -- it runs ncu with exactly
those sections (one invocation per set), the reference optimizer on that live profile, and the
harness on the candidate, ``REPEATS`` times (the spread of the repeats is the run-to-run noise).
``episodes`` (issue 6): full episodes of ``AutoProfilerLive-v0`` with the roofline rule tree of
``baselines/``. ``analyze`` compares both with the replay of the dataset: the same candidate?
the speedup within the noise? the same reward? It also reruns the reference optimizer on the
saved live ncu profiles (on any machine: choosing needs no GPU), so the choices can be
compared as soon as ncu has run (``choices.csv``; the differing ones are printed).

Everything is resumable: ncu runs are saved per section set, live outcomes and episodes are
appended one JSON line at a time and skipped when found. A study's settings (the dataset, the
optimizer, the number of pairs) are saved with its plan (``study.json``); a later call that
gives another optimizer or number of pairs over the same folder is refused. The suite's study
(docs/data/fidelity_h200) replays reference-v1 on 36 pairs; KernelBench's (issue 18) replays
the dataset's ``reference`` on 24, its problems read from a checkout (``--source``):

    python3 -m experiments.studies.fidelity pairs --out docs/data/fidelity_kernelbench_h200 \
        --dataset kernelbench --optimizer reference --pairs 24 --source .kernelbench/KernelBench
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

DEFAULT_OUT = Path("docs/data/fidelity_h200")
OPTIMIZER = "reference-v1"
"""The optimizer the recorded fidelity runs judged (docs/data/fidelity_h200): the study
replays and reruns that one, whatever the environment's default."""
SIZES = (1, 1, 1, 2, 2, 2, 3, 3, 3, 5, 5, 8)
"""Sections per set: twelve sets, three problems each, 36 pairs."""
PER_SET = 3
PAIRS = {36: SIZES, 24: (1, 1, 2, 2, 3, 3, 5, 8)}
"""Sections per set, by the number of pairs (three problems a set)."""
STUDY = "study.json"
"""A study folder's settings, written with its plan."""
REPEATS = 3
MAX_FULL_SET_S = 60.0
"""Problems whose full set took longer to replay are not drawn (they would take a command's
time under a large set); the suite has a handful."""
EPISODE_BUDGET = {"budget": 0.25, "budget_unit": "sections"}


def plan(dataset, seed: int = 0, optimizer: str = OPTIMIZER,
         sizes: tuple[int, ...] = SIZES) -> list[dict]:
    """The pairs, grouped by section set: ``[{"key", "sections", "uris"}]``; deterministic for
    a dataset and a seed. Problems (those with ``optimizer``'s outcomes, and well-posed at the
    recorded tolerance, at which the live judge refuses the others) are drawn without
    replacement while they last."""
    from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS

    rng = random.Random(seed)
    ill_posed = dataset.ill_posed()
    uris = [u for u in dataset.uris()
            if u not in ill_posed
            and (full := dataset.record(u).set_costs.get("full")) is not None
            and full.replay_s <= MAX_FULL_SET_S and dataset.outcomes(u, optimizer)]
    pool: list[str] = []
    groups = []
    for size in sizes:
        sections = dataset.canonical(rng.sample(ACTION_SECTIONS, size))
        members = []
        while len(members) < PER_SET:
            if not pool:
                pool = rng.sample(uris, len(uris))
            uri = pool.pop()
            if uri not in members:
                members.append(uri)
        groups.append({"key": "+".join(sections), "sections": list(sections),
                       "uris": members})
    return groups


def _deadline(seconds: float | None) -> float | None:
    return time.monotonic() + seconds if seconds else None


def settings(out: Path, dataset: str | None = None, optimizer: str | None = None,
             pairs: int | None = None) -> dict:
    """The study's settings: ``dataset`` (a shipped name or a file; None: the default one),
    ``optimizer`` and ``pairs``. Those saved in ``out/study.json`` hold; a given optimizer or
    number of pairs that differs from the saved one is refused (a dataset given wins over the
    saved one: a rebuilt file of the same recording is the same study). Unsaved ones are the
    given ones, else the suite study's (reference-v1, 36 pairs).

    Raises:
        ValueError: ``optimizer`` or ``pairs`` differs from the folder's, or ``pairs`` is
            neither 36 nor 24.
    """
    path = out / STUDY
    saved = json.loads(path.read_text()) if path.exists() else {}
    for name, given in (("optimizer", optimizer), ("pairs", pairs)):
        if given is not None and name in saved and saved[name] != given:
            raise ValueError(f"{out} holds a study with {name} {saved[name]!r}, not "
                             f"{given!r}: give another --out")
    chosen = {"dataset": dataset if dataset is not None else saved.get("dataset"),
              "optimizer": saved.get("optimizer", optimizer or OPTIMIZER),
              "pairs": saved.get("pairs", pairs or 36)}
    if chosen["pairs"] not in PAIRS:
        raise ValueError(f"pairs must be one of {sorted(PAIRS)}, got {chosen['pairs']!r}")
    return chosen


def _load_plan(out: Path, study: dict) -> list[dict]:
    """The study's plan, made and saved with its settings on the first call."""
    path = out / "plan.json"
    if path.exists():
        return json.loads(path.read_text())
    from autoprofiler_env.dataset import Dataset

    groups = plan(Dataset.load(study["dataset"]), optimizer=study["optimizer"],
                  sizes=PAIRS[study["pairs"]])
    out.mkdir(parents=True, exist_ok=True)
    (out / STUDY).write_text(json.dumps(study, indent=1) + "\n")
    path.write_text(json.dumps(groups, indent=1) + "\n")
    return groups


def held(groups: list[dict], dataset) -> list[dict]:
    """The plan's groups with only the pairs whose problem ``dataset`` holds: a problem it
    lacks (its recording not complete yet) waits for a later call."""
    uris = set(dataset.uris())
    return [{**g, "uris": [u for u in g["uris"] if u in uris]} for g in groups]


def _problems(study: dict, uris, source: str | Path | None) -> dict:
    """URI -> the problem, as the study's dataset recorded it (a KernelBench problem read from
    the checkout ``source``, its sha256 checked)."""
    from autoprofiler_env.dataset import Dataset

    uris = list(dict.fromkeys(uris))
    return {p.uri: p for p in Dataset.load(study["dataset"]).load_problems(uris, source)}


def _judge_limit(study: dict) -> float:
    """The judge's limit for one candidate, the recording's: KernelBench's 180 s for a
    KernelBench dataset; the harness's 300 s, which the suite's study ran with, else."""
    from autoprofiler_env.dataset import Dataset
    from autoprofiler_env.dataset.record.kernelbench import CANDIDATE_TIMEOUT_S
    from autoprofiler_env.harness.evaluator import TIMEOUT_S

    records = Dataset.load(study["dataset"]).content.problems.values()
    return CANDIDATE_TIMEOUT_S if any(r.provenance is not None for r in records) else TIMEOUT_S


def live_pairs(out: Path, study: dict | None = None, deadline_s: float | None = None,
               warm_workers: int = 8, config=None, source: str | Path | None = None) -> int:
    """ncu, the study's optimizer and the harness (``config``: the default on CUDA) on every
    planned pair (GPU); ``source``: the KernelBench checkout of a KernelBench dataset.

    The live side reads what the replay reads: ncu under the recording's operator cap
    (:attr:`Dataset.max_ops`), and the eager time, timed live once per problem
    (``eager.jsonl``), for the launch rule. Saved work that another setting made (a live run
    cut under another cap, a row judging another candidate than the one chosen now) is moved
    to ``stale/`` and done again (:func:`set_aside_runs`, :func:`set_aside_rows`). A planned
    problem the dataset lacks yet (its recording not complete) waits for a later call."""
    from autoprofiler_env.dataset import Dataset
    from autoprofiler_env.dataset.record import CandidateWarmer, record_ncu
    from autoprofiler_env.harness import Evaluator, HarnessConfig
    from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl
    from autoprofiler_env.optimizers import reference_optimizer
    from autoprofiler_env.profiler import MAX_OPS

    deadline = _deadline(deadline_s)
    study = study or settings(out)
    dataset = Dataset.load(study["dataset"])
    groups = held(_load_plan(out, study), dataset)
    problems = _problems(study, [u for g in groups for u in g["uris"]], source)
    max_ops = dataset.max_ops or MAX_OPS
    set_aside_runs(out, max_ops)
    for g in groups:  # one invocation per section set
        record_ncu([problems[u] for u in g["uris"]], {g["key"]: g["sections"]},
                   out / "ncu", chunk=PER_SET, deadline=deadline, problem_timeout_s=240.0,
                   max_ops=max_ops)
    live = live_profiles(out)
    config = config or HarnessConfig(device="cuda")
    timeout_s = _judge_limit(study)
    profiled = [(g["key"], problems[u], live[(u, g["key"])]) for g in groups for u in g["uris"]
                if (u, g["key"]) in live]
    eager = eager_times(out, [p for _, p, _ in profiled], config, timeout_s, deadline)
    optimizer = reference_optimizer(study["optimizer"], device=config.device)  # the replay's
    todo = [(key, problem, optimizer.optimize(problem, profile, eager_ms=eager[problem.uri]))
            for key, problem, profile in profiled if problem.uri in eager]
    set_aside_rows(out, {(p.uri, key): c.producer for key, p, c in todo})
    rows_path = out / "live.jsonl"
    done = {(r["uri"], r["sections"], r["repeat"]) for r in read_jsonl(rows_path)}
    with CandidateWarmer(config, warm_workers, timeout_s) as warmer:
        warmer.warm([(p, c.producer, c.source) for key, p, c in todo
                     if any((p.uri, key, r) not in done for r in range(REPEATS))], deadline,
                    limit_s=timeout_s)
    with Evaluator(config, timeout_s=timeout_s) as evaluator, \
            JsonlAppender(rows_path) as log:
        for repeat in range(REPEATS):  # all pairs once, then again: repeats minutes apart
            for key, problem, candidate in todo:
                if (problem.uri, key, repeat) in done:
                    continue
                if deadline is not None and time.monotonic() > deadline:
                    return 0
                result = evaluator.evaluate(problem, candidate.source)
                log.write({"uri": problem.uri, "sections": key, "repeat": repeat,
                           "transformation": candidate.producer, "reason": candidate.reason,
                           "correct": result.correct,
                           "error_kind": result.error_name,
                           "error": (result.error_message or "")[:300] or None,
                           "reference_ms": result.reference_ms,
                           "candidate_ms": result.candidate_ms, "speedup": result.speedup,
                           "chosen_with_eager_ms": eager[problem.uri]})
    return 0


def eager_times(out: Path, problems, config, timeout_s: float,
                deadline: float | None = None) -> dict[str, float]:
    """URI -> the eager program's median time, as the harness times the reference: timed
    once per problem and kept in ``out/eager.jsonl`` (a resumed call chooses with the same
    time, so a choice near the launch rule's threshold does not flip between calls). A problem
    whose reference fails is left out (its pairs are not judged); the deadline stops timing."""
    from autoprofiler_env.errors import ProblemError
    from autoprofiler_env.harness import Evaluator
    from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl

    path = out / "eager.jsonl"
    times = {r["uri"]: r["eager_ms"] for r in read_jsonl(path)}
    todo = list({p.uri: p for p in problems if p.uri not in times}.values())
    if todo:
        with Evaluator(config, timeout_s=timeout_s) as evaluator, JsonlAppender(path) as log:
            for problem in todo:
                if deadline is not None and time.monotonic() > deadline:
                    break
                try:
                    ms = evaluator.reference(problem).timing.median_ms
                except ProblemError as e:
                    print(f"{problem.uri}: the reference failed, its pairs are left out: {e}",
                          file=sys.stderr)
                    continue
                log.write({"uri": problem.uri, "eager_ms": ms})
                times[problem.uri] = ms
    return times


def set_aside_runs(out: Path, max_ops: int) -> list[str]:
    """Moves to ``out/stale/`` each live ncu run that cut a forward otherwise than ``max_ops``
    does (an earlier call profiled under another cap), so that it is profiled again. Kept, not
    deleted: it is what the first runs measured. Returns the runs moved."""
    from autoprofiler_env.profiler import NcuRun, profiles_from_run

    moved = []
    for path in sorted((out / "ncu").rglob("run.json")):
        profiles, _ = profiles_from_run(NcuRun.load(path.parent))
        if any(p.ops is not None and p.ops_profiled != min(p.ops, max_ops) for p in profiles):
            target = out / "stale" / path.parent.relative_to(out)
            target.parent.mkdir(parents=True, exist_ok=True)
            path.parent.rename(target)
            moved.append(str(target.relative_to(out)))
    return moved


def set_aside_rows(out: Path, chosen: dict) -> int:
    """Moves to ``out/stale/live.jsonl`` each row of ``live.jsonl`` that judged another
    candidate than ``chosen`` ((uri, section-set key) -> the candidate chosen now) names
    (chosen without the eager time, or from a run set aside), so that it is judged again.
    Returns how many rows moved."""
    from autoprofiler_env.atomic import write_atomic
    from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl

    rows_path = out / "live.jsonl"
    rows = read_jsonl(rows_path)
    stale = [r for r in rows if chosen.get((r["uri"], r["sections"]),
                                           r["transformation"]) != r["transformation"]]
    if stale:
        with JsonlAppender(out / "stale" / "live.jsonl") as log:
            for r in stale:
                log.write(r)
        kept = [r for r in rows if r not in stale]
        write_atomic(rows_path, "".join(json.dumps(r) + "\n" for r in kept).encode())
    return len(stale)


def live_profiles(out: Path) -> dict:
    """(uri, section-set key) -> the live profile, from the saved ncu runs."""
    from autoprofiler_env.profiler import NcuRun, profiles_from_run

    found = {}
    for path in sorted((out / "ncu").rglob("run.json")):
        run = NcuRun.load(path.parent)
        for p in profiles_from_run(run)[0]:
            found[(p.problem_uri, path.parent.parent.name)] = p
    return found


def live_episodes(out: Path, study: dict | None = None, episodes: int = 5,
                  deadline_s: float | None = None, device: str = "cuda",
                  source: str | Path | None = None) -> int:
    """Full episodes of the live environment with the roofline rule tree (GPU); ``source``:
    the KernelBench checkout of a KernelBench dataset."""
    import gymnasium as gym

    import autoprofiler_env  # noqa: F401  (registers the ids)
    from autoprofiler_env.envs import LIVE_ID
    from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl
    from baselines.agents import RooflineTree

    deadline = _deadline(deadline_s)
    study = study or settings(out)
    groups = _load_plan(out, study)
    uris = list(dict.fromkeys(u for g in groups for u in g["uris"]))[:episodes]
    path = out / "episodes.jsonl"
    done = {r["problem"] for r in read_jsonl(path)}
    recorded = {} if source is None else {"dataset": study["dataset"], "source": source}
    env = gym.make(LIVE_ID, problems=uris, device=device, optimizer=study["optimizer"],
                   **recorded, **EPISODE_BUDGET)
    agent = RooflineTree(env)
    with JsonlAppender(path) as log:
        for uri in uris:
            if uri in done:
                continue
            if deadline is not None and time.monotonic() > deadline:
                break
            started = time.perf_counter()
            obs, _ = env.reset(options={"problem": uri})
            agent.reset()
            terminated = False
            while not terminated:
                action, _ = agent.predict(obs, action_masks=env.unwrapped.action_masks())
                obs, _, terminated, _, info = env.step(int(action))
            record = env.unwrapped.last_record
            log.write({**json.loads(record.to_json()), "eager_ms": info["eager_ms"],
                       "candidate_ms": info["candidate_ms"],
                       "wall_s": time.perf_counter() - started})
    env.close()
    return 0


# -- analysis (CPU) -----------------------------------------------------------------------------

def recorded_interval(record, outcome) -> tuple[float, float] | None:
    """The recording's own noise around a candidate's speedup: the speedup with the eager time
    at its p20 and p80 and the candidate's at its p80 and p20 (both measured in the recording
    session, the eager's spread relative to its median). None without those quantiles."""
    eager = record.eager
    if not (outcome and outcome.speedup and outcome.median_ms and outcome.p20_ms
            and outcome.p80_ms and eager.get("median_ms") and eager.get("p20_ms")
            and eager.get("p80_ms")):
        return None
    low = eager["p20_ms"] / eager["median_ms"] * outcome.median_ms / outcome.p80_ms
    high = eager["p80_ms"] / eager["median_ms"] * outcome.median_ms / outcome.p20_ms
    return outcome.speedup * low, outcome.speedup * high


def pair_rows(out: Path, dataset, optimizer: str = OPTIMIZER) -> list[dict]:
    """One row per live pair: the replay's choice and speedup against the live ones. The
    speedups agree within the noise when the live repeats' range meets the recording's own
    p20-p80 interval (:func:`recorded_interval`): both sides are measurements, each with its
    spread, and a launch-bound problem's eager time can vary by half within a session."""
    from autoprofiler_env.envs.backends import ReplayBackend
    from autoprofiler_env.jsonlines import read_jsonl

    replay = ReplayBackend(dataset, optimizer=optimizer)
    uris = set(dataset.uris())
    by_pair: dict[tuple[str, str], list[dict]] = {}
    for r in read_jsonl(out / "live.jsonl"):
        if r["uri"] in uris:  # one the dataset lacks (yet: its candidates unrecorded) waits
            by_pair.setdefault((r["uri"], r["sections"]), []).append(r)
    rows = []
    for (uri, key), repeats in sorted(by_pair.items()):
        sections = tuple(key.split("+"))
        expected = replay.finish(uri, sections)
        record = dataset.record(uri)
        interval = recorded_interval(record, dataset.outcomes(uri, optimizer).get(
            expected.transformation))
        speedups = [r["speedup"] for r in repeats if r["correct"] and r["speedup"]]
        live_median = statistics.median(speedups) if speedups else None
        eager = [r["reference_ms"] for r in repeats if r.get("reference_ms")]
        rows.append({
            "problem": uri.rsplit("/", 1)[1], "n_sections": len(sections), "sections": key,
            "replay_choice": expected.transformation, "live_choice": repeats[0]["transformation"],
            "same_choice": expected.transformation == repeats[0]["transformation"],
            "replay_speedup": expected.speedup, "live_speedup": live_median,
            "live_repeats": len(speedups),
            "live_min": min(speedups) if speedups else None,
            "live_max": max(speedups) if speedups else None,
            "live_spread": (max(speedups) / min(speedups) - 1) if len(speedups) > 1 else None,
            "replay_p20": interval[0] if interval else None,
            "replay_p80": interval[1] if interval else None,
            "within_noise": (interval[0] <= max(speedups) and min(speedups) <= interval[1])
            if interval and speedups else None,
            "live_correct": all(r["correct"] for r in repeats),
            "replay_correct": expected.correct,
            # the eager reference timed live against the recording's: drift between sessions
            "eager_ratio": (statistics.median(eager) / record.eager["median_ms"]
                            if eager and record.eager.get("median_ms") else None)})
    return rows


def choice_rows(out: Path, dataset, optimizer: str = OPTIMIZER) -> list[dict]:
    """One row per planned pair whose live ncu run is saved: the reference optimizer's choice
    on that live profile (with the eager time the pairs step chose with) against the
    replay's. The optimizer is deterministic and needs no GPU to choose, so this half of the
    comparison runs anywhere once ncu has run."""
    from autoprofiler_env.envs.backends import ReplayBackend
    from autoprofiler_env.jsonlines import read_jsonl

    if not (out / "plan.json").exists():
        return []
    replay = ReplayBackend(dataset, optimizer=optimizer)
    live = live_profiles(out)
    eager = {r["uri"]: r["eager_ms"] for r in read_jsonl(out / "eager.jsonl")}
    rows = []
    for g in held(json.loads((out / "plan.json").read_text()), dataset):
        for uri in g["uris"]:
            profile = live.get((uri, g["key"]))
            if profile is None:
                continue
            record = dataset.record(uri)
            choice, _, _ = replay.optimizer.choose(
                None, profile, record.features,
                applicable=frozenset(dataset.outcomes(uri, optimizer)),
                # the live eager time where the pairs step timed it, else the recorded one
                eager_ms=eager.get(uri, record.eager.get("median_ms")))
            expected = replay.finish(uri, tuple(g["sections"])).transformation
            rows.append({"problem": uri.rsplit("/", 1)[1], "sections": g["key"],
                         "live_profile_choice": choice, "replay_choice": expected,
                         "same_choice": choice == expected})
    return rows


def episode_rows(out: Path, dataset, optimizer: str = OPTIMIZER) -> list[dict]:
    """One row per live episode: its reward against the replay of the same sections, and the
    sections the agent takes on the replay."""
    from autoprofiler_env.envs.profiling_env import EpisodeRecord, ProfilingEnv
    from autoprofiler_env.jsonlines import read_jsonl
    from autoprofiler_env.scoring import log_score
    from baselines.agents import RooflineTree

    rows = []
    env = ProfilingEnv(dataset=dataset, split=None, optimizer=optimizer, **EPISODE_BUDGET)
    agent = RooflineTree(env)
    for r in read_jsonl(out / "episodes.jsonl"):
        r = dict(r)
        wall = r.pop("wall_s", None)
        live_eager = r.pop("eager_ms", None)  # logged from this stop on
        r.pop("candidate_ms", None)
        record = EpisodeRecord.from_json(json.dumps(r))
        total, info = env.apply(record)
        obs, _ = env.reset(options={"problem": record.problem})
        agent.reset()
        terminated = False
        while not terminated:
            action, _ = agent.predict(obs, action_masks=env.action_masks())
            obs, _, terminated, _, replay_info = env.step(int(action))
        rows.append({
            "problem": record.problem.rsplit("/", 1)[1], "live_sections": "+".join(
                record.sections), "replay_agent_sections": "+".join(replay_info["sections"]),
            "live_candidate": record.candidate, "replay_candidate": info["candidate"],
            # the live outcome's reward by today's rule (an incorrect candidate counts as
            # eager, 0), as the replay's is: episodes logged before that rule carry another
            "live_reward": log_score(record.correct, record.speedup),
            "live_reward_logged": record.reward, "replay_reward": total,
            "live_speedup": record.speedup, "replay_speedup": info["speedup"],
            # the eager reference timed live against the recording's: drift between sessions
            "eager_ratio": live_eager / info["eager_ms"]
            if live_eager and info["eager_ms"] else None,
            "wall_s": wall})
    return rows


def summarize(pairs: list[dict], episodes: list[dict], choices: list[dict] = ()) -> dict:
    out: dict = {}
    if choices:
        out.update(profiled_pairs=len(choices),
                   same_choice_on_live_profiles=sum(r["same_choice"] for r in choices))
    if pairs:
        spreads = [r["live_spread"] for r in pairs if r["live_spread"] is not None]
        both = [r for r in pairs if r["same_choice"] and r["live_speedup"]
                and r["replay_speedup"]]
        gaps = [abs(math.log(r["live_speedup"] / r["replay_speedup"])) for r in both]
        median_spread = statistics.median(spreads) if spreads else None
        by_size = {}
        for r in pairs:
            same, total = by_size.get(r["n_sections"], (0, 0))
            by_size[r["n_sections"]] = (same + r["same_choice"], total + 1)
        out.update(
            pairs=len(pairs), same_choice=sum(r["same_choice"] for r in pairs),
            same_choice_by_size={n: f"{same}/{total}"
                                 for n, (same, total) in sorted(by_size.items())},
            median_spread=median_spread,
            noise_p95=statistics.quantiles(spreads, n=20)[-1] if len(spreads) >= 2 else None,
            speedup_gap_median=statistics.median(gaps) if gaps else None,
            speedup_gap_max=max(gaps) if gaps else None,
            compared=len(gaps),
            # the replay's speedup inside the live repeats' range, widened by the median spread
            in_live_range=sum(r["live_min"] / (1 + median_spread) <= r["replay_speedup"]
                              <= r["live_max"] * (1 + median_spread) for r in both)
            if median_spread is not None else None,
            within_noise=sum(bool(r["within_noise"]) for r in both),
            within_noise_judged=sum(r["within_noise"] is not None for r in both),
            eager_drift_median=statistics.median(
                abs(math.log(r["eager_ratio"])) for r in pairs if r["eager_ratio"])
            if any(r["eager_ratio"] for r in pairs) else None)
    if episodes:
        out.update(episodes=len(episodes),
                   same_candidate=sum(e["live_candidate"] == e["replay_candidate"]
                                      for e in episodes),
                   same_sections=sum(e["live_sections"] == e["replay_agent_sections"]
                                     for e in episodes),
                   reward_gap_max=max(abs(e["live_reward"] - e["replay_reward"])
                                      for e in episodes))
    return out


def _table(rows: list[dict]) -> str:
    if not rows:
        return ""
    cols = list(rows[0])

    def cell(v):
        return f"{v:.3g}" if isinstance(v, float) else str(v)

    return "\n".join(["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols),
                      *("| " + " | ".join(cell(r[c]) for c in cols) + " |" for r in rows)])


def analyze(out: Path, study: dict | None = None) -> int:
    import csv

    from autoprofiler_env.dataset import Dataset

    study = study or settings(out)
    dataset, optimizer = Dataset.load(study["dataset"]), study["optimizer"]
    pairs = pair_rows(out, dataset, optimizer) if (out / "live.jsonl").exists() else []
    episodes = (episode_rows(out, dataset, optimizer) if (out / "episodes.jsonl").exists()
                else [])
    choices = choice_rows(out, dataset, optimizer) if (out / "ncu").exists() else []
    for rows, name in ((pairs, "pairs.csv"), (episodes, "episodes.csv"),
                       (choices, "choices.csv")):
        if rows:
            with (out / name).open("w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)
    print(_table(pairs), end="\n\n")
    print(_table(episodes), end="\n\n")
    print(_table([r for r in choices if not r["same_choice"]]), end="\n\n")
    summary = summarize(pairs, episodes, choices)
    groups = _load_plan(out, study)
    if waiting := sum(len(g["uris"]) for g in groups) - sum(
            len(g["uris"]) for g in held(groups, dataset)):
        summary["pairs_not_in_dataset"] = waiting
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.studies.fidelity",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("pairs", "episodes", "analyze"))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--dataset", help="a shipped dataset's name or a file (default: the "
                        "study's, else the default one)")
    parser.add_argument("--optimizer", help=f"the optimizer replayed and run live (default: "
                        f"the study's, else {OPTIMIZER})")
    parser.add_argument("--pairs", type=int, choices=sorted(PAIRS),
                        help="(problem, section set) pairs, three problems a set (default: "
                        "the study's, else 36)")
    parser.add_argument("--source", metavar="DIR",
                        help="the KernelBench checkout a KernelBench dataset's problems are "
                        "read from (pairs, episodes)")
    parser.add_argument("--deadline", type=float, metavar="SECONDS")
    parser.add_argument("--warm-workers", type=int, default=8)
    parser.add_argument("--episodes", type=int, default=5)
    args = parser.parse_args(argv)
    try:
        study = settings(args.out, args.dataset, args.optimizer, args.pairs)
    except ValueError as e:
        print(f"fidelity: error: {e}", file=sys.stderr)
        return 2
    if args.what == "pairs":
        return live_pairs(args.out, study, args.deadline, args.warm_workers,
                          source=args.source)
    if args.what == "episodes":
        return live_episodes(args.out, study, args.episodes, args.deadline,
                             source=args.source)
    return analyze(args.out, study)


if __name__ == "__main__":
    sys.exit(main())
