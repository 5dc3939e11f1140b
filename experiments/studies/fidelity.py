"""Does the replay answer as the GPU does? Live runs on the H200 compared with the dataset.

    python3 -m experiments.studies.fidelity pairs    [--out DIR] [--deadline S] [--warm-workers N]  # GPU
    python3 -m experiments.studies.fidelity episodes [--out DIR] [--episodes 5] [--deadline S]      # GPU
    python -m experiments.studies.fidelity analyze   [--out DIR] [--dataset FILE]                  # CPU

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
appended one JSON line at a time and skipped when found.
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
REPEATS = 3
MAX_FULL_SET_S = 60.0
"""Problems whose full set took longer to replay are not drawn (they would take a command's
time under a large set); the suite has a handful."""
EPISODE_BUDGET = {"budget": 0.25, "budget_unit": "sections"}


def plan(dataset, seed: int = 0) -> list[dict]:
    """The pairs, grouped by section set: ``[{"key", "sections", "uris"}]``; deterministic for
    a dataset and a seed. Problems are drawn without replacement while they last."""
    from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS

    rng = random.Random(seed)
    uris = [u for u in dataset.uris()
            if (full := dataset.record(u).set_costs.get("full")) is not None
            and full.replay_s <= MAX_FULL_SET_S and dataset.outcomes(u, "reference-v1")]
    pool: list[str] = []
    groups = []
    for size in SIZES:
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


def _load_plan(out: Path, dataset_path: str | None) -> list[dict]:
    path = out / "plan.json"
    if path.exists():
        return json.loads(path.read_text())
    from autoprofiler_env.dataset import Dataset
    from autoprofiler_env.dataset.replay import DEFAULT_DATASET

    groups = plan(Dataset.load(dataset_path or DEFAULT_DATASET))
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(groups, indent=1) + "\n")
    return groups


def live_pairs(out: Path, dataset_path: str | None = None, deadline_s: float | None = None,
               warm_workers: int = 8, config=None) -> int:
    """ncu, the reference optimizer and the harness (``config``: the default on CUDA) on every
    planned pair (GPU)."""
    from autoprofiler_env.dataset.record import CandidateWarmer, record_ncu
    from autoprofiler_env.harness import Evaluator, HarnessConfig
    from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl
    from autoprofiler_env.optimizers import reference_optimizer
    from autoprofiler_env.problems import load_problem

    deadline = _deadline(deadline_s)
    groups = _load_plan(out, dataset_path)
    for g in groups:  # one invocation per section set
        record_ncu([load_problem(u) for u in g["uris"]], {g["key"]: g["sections"]},
                   out / "ncu", chunk=PER_SET, deadline=deadline, problem_timeout_s=240.0)
    live = live_profiles(out)
    config = config or HarnessConfig(device="cuda")
    optimizer = reference_optimizer(OPTIMIZER, device=config.device)  # the replay's
    todo = []
    for g in groups:
        for uri in g["uris"]:
            profile = live.get((uri, g["key"]))
            if profile is not None:
                problem = load_problem(uri)
                todo.append((g["key"], problem, optimizer.optimize(problem, profile)))
    rows_path = out / "live.jsonl"
    done = {(r["uri"], r["sections"], r["repeat"]) for r in read_jsonl(rows_path)}
    with CandidateWarmer(config, warm_workers) as warmer:
        warmer.warm([(p, c.producer, c.source) for key, p, c in todo
                     if any((p.uri, key, r) not in done for r in range(REPEATS))], deadline)
    with Evaluator(config) as evaluator, JsonlAppender(rows_path) as log:
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
                           "reference_ms": result.reference_ms,
                           "candidate_ms": result.candidate_ms, "speedup": result.speedup})
    return 0


def live_profiles(out: Path) -> dict:
    """(uri, section-set key) -> the live profile, from the saved ncu runs."""
    from autoprofiler_env.profiler import NcuRun, profiles_from_run

    found = {}
    for path in sorted((out / "ncu").rglob("run.json")):
        run = NcuRun.load(path.parent)
        for p in profiles_from_run(run)[0]:
            found[(p.problem_uri, path.parent.parent.name)] = p
    return found


def live_episodes(out: Path, dataset_path: str | None = None, episodes: int = 5,
                  deadline_s: float | None = None, device: str = "cuda") -> int:
    """Full episodes of the live environment with the roofline rule tree (GPU)."""
    import gymnasium as gym

    import autoprofiler_env  # noqa: F401  (registers the ids)
    from autoprofiler_env.envs import LIVE_ID
    from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl
    from baselines.agents import RooflineTree

    deadline = _deadline(deadline_s)
    groups = _load_plan(out, dataset_path)
    uris = list(dict.fromkeys(u for g in groups for u in g["uris"]))[:episodes]
    path = out / "episodes.jsonl"
    done = {r["problem"] for r in read_jsonl(path)}
    env = gym.make(LIVE_ID, problems=uris, device=device, optimizer=OPTIMIZER, **EPISODE_BUDGET)
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


def pair_rows(out: Path, dataset) -> list[dict]:
    """One row per live pair: the replay's choice and speedup against the live ones. The
    speedups agree within the noise when the live repeats' range meets the recording's own
    p20-p80 interval (:func:`recorded_interval`): both sides are measurements, each with its
    spread, and a launch-bound problem's eager time can vary by half within a session."""
    from autoprofiler_env.envs.backends import ReplayBackend
    from autoprofiler_env.jsonlines import read_jsonl

    replay = ReplayBackend(dataset, optimizer=OPTIMIZER)
    by_pair: dict[tuple[str, str], list[dict]] = {}
    for r in read_jsonl(out / "live.jsonl"):
        by_pair.setdefault((r["uri"], r["sections"]), []).append(r)
    rows = []
    for (uri, key), repeats in sorted(by_pair.items()):
        sections = tuple(key.split("+"))
        expected = replay.finish(uri, sections)
        record = dataset.record(uri)
        interval = recorded_interval(record, dataset.outcomes(uri, "reference-v1").get(
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


def choice_rows(out: Path, dataset) -> list[dict]:
    """One row per planned pair whose live ncu run is saved: the reference optimizer's choice
    on that live profile against the replay's. The optimizer is deterministic and needs no
    GPU to choose, so this half of the comparison runs anywhere once ncu has run."""
    from autoprofiler_env.envs.backends import ReplayBackend

    if not (out / "plan.json").exists():
        return []
    replay = ReplayBackend(dataset, optimizer=OPTIMIZER)
    live = live_profiles(out)
    rows = []
    for g in json.loads((out / "plan.json").read_text()):
        for uri in g["uris"]:
            profile = live.get((uri, g["key"]))
            if profile is None or uri not in dataset.uris():
                continue
            record = dataset.record(uri)
            choice, _, _ = replay.optimizer.choose(None, profile, record.features,
                                                   applicable=frozenset(
                                                       dataset.outcomes(uri, "reference-v1")))
            expected = replay.finish(uri, tuple(g["sections"])).transformation
            rows.append({"problem": uri.rsplit("/", 1)[1], "sections": g["key"],
                         "live_profile_choice": choice, "replay_choice": expected,
                         "same_choice": choice == expected})
    return rows


def episode_rows(out: Path, dataset) -> list[dict]:
    """One row per live episode: its reward against the replay of the same sections, and the
    sections the agent takes on the replay."""
    from autoprofiler_env.envs.profiling_env import EpisodeRecord, ProfilingEnv
    from autoprofiler_env.jsonlines import read_jsonl
    from autoprofiler_env.scoring import log_score
    from baselines.agents import RooflineTree

    rows = []
    env = ProfilingEnv(dataset=dataset, split=None, optimizer=OPTIMIZER, **EPISODE_BUDGET)
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


def analyze(out: Path, dataset_path: str | None = None) -> int:
    import csv

    from autoprofiler_env.dataset import Dataset
    from autoprofiler_env.dataset.replay import DEFAULT_DATASET

    dataset = Dataset.load(dataset_path or DEFAULT_DATASET)
    pairs = pair_rows(out, dataset) if (out / "live.jsonl").exists() else []
    episodes = episode_rows(out, dataset) if (out / "episodes.jsonl").exists() else []
    choices = choice_rows(out, dataset) if (out / "ncu").exists() else []
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
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.studies.fidelity", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("pairs", "episodes", "analyze"))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--dataset", help="a dataset file (default: the shipped one)")
    parser.add_argument("--deadline", type=float, metavar="SECONDS")
    parser.add_argument("--warm-workers", type=int, default=8)
    parser.add_argument("--episodes", type=int, default=5)
    args = parser.parse_args(argv)
    if args.what == "pairs":
        return live_pairs(args.out, args.dataset, args.deadline, args.warm_workers)
    if args.what == "episodes":
        return live_episodes(args.out, args.dataset, args.episodes, args.deadline)
    return analyze(args.out, args.dataset)


if __name__ == "__main__":
    sys.exit(main())
