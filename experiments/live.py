"""An experiment's agents on the live backend: the leaderboard measured on a GPU.

    autoprofiler experiment --config FILE [--workers N|ray] [--address ADDR] [--time-budget S]

with ``live:`` in the config::

    live:
      device: cuda            # where the candidates are judged
      evidence: ncu           # ncu profiles each section collected; "recorded": the
                              # dataset's profiles (no counters needed), only the judging live
      source: null            # a KernelBench dataset's checkout (AutoProfilerLive-v0's source)
      harness: {}             # HarnessConfig settings, e.g. {size: smoke} for a quick check
      problems: null          # a list of URIs: only these of the splits (default: all)

Everything that is learned or chosen stays on the replay, where it is cheap: the tree is
learned, the RL policies trained and the fixed configuration chosen on the train split of the
dataset, exactly as in the replay experiment (:func:`~experiments.experiment.run_experiment`
runs first). Then every run of the experiment -- each learned agent per seed, each baseline,
the train-chosen fixed configuration -- plays each problem of the splits at each budget on
``AutoProfilerLive-v0``, budgeted with the dataset's recorded costs, so that a policy meets
the costs, budgets and observation layout it met in the replay. The hindsight oracle is left
out: it needs answers no live episode has.

**One unit per problem.** A unit runs all of the problem's episodes in one process with one
live backend, which profiles each (problem, section) with ncu at most once and judges each
distinct candidate once (the agents mostly reach the same few): at most 15 ncu runs and a
handful of judgements per problem, whatever the number of agents, seeds and budgets. The units
go through the recorder's fan-out (:mod:`autoprofiler_env.dataset.record.fanout`): one at a
time per GPU with ``--workers N``, as Ray tasks of one GPU with ``--workers ray``, one at a
time in a process of its own without. A unit's episodes reach the driver whole, with their
sha256, and are appended to ``live/live.jsonl``; a unit whose process dies is retried, then
logged in ``live/failures.jsonl``; a killed driver resumes with the episodes not written.
With a time budget no unit starts after it, and a unit in flight stops between episodes
:data:`STOP_GRACE_S` later, handing over those it finished (a command's limit then kills
nothing that finished). A resumed problem's candidates are judged again where its episodes
need them (a unit keeps its judgements for its own episodes only).

The live rows are tied to the dataset (its sha256) and to the runs' artifacts (each tree's
file and model's zip, by sha256): another dataset or a run learned again is refused, not
mixed in. The problems are those the replay runs played, so that each live episode has its
replay twin.

Written to ``OUT/live/``: ``leaderboard.md`` / ``.csv`` and the plots, as the replay
experiment writes them but over the live outcomes of the problems finished so far, every run's
outcomes in ``runs/<agent>/seed-<n>.json``, and ``replay_vs_live.md`` / ``.csv``: per agent
and budget, the replay's and the live geometric means on the same problems, and how often the
episodes collected the same sections and shipped the same candidate.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from autoprofiler_env.atomic import write_atomic

LIVE_KEYS = ("device", "evidence", "source", "harness", "problems")
PART = "live"
"""The units' part: their episodes go to ``live/live.jsonl``, their device time to
``live/timings.jsonl``."""
NEEDS_HINDSIGHT = ("oracle",)
"""Agents that need the replay's analysis API: left out of a live evaluation."""


@dataclass(frozen=True)
class LiveConfig:
    """The ``live:`` mapping of an experiment config (the module docstring)."""

    device: str = "cuda"
    evidence: str = "ncu"
    source: str | None = None
    harness: dict | None = None
    problems: tuple[str, ...] | None = None

    @classmethod
    def parse(cls, data, where: str) -> LiveConfig:
        """``data`` checked, or a :class:`~experiments.experiment.ConfigError` naming the
        key."""
        from autoprofiler_env.envs.backends.live import EVIDENCE
        from experiments.experiment import ConfigError

        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: 'live' must be a mapping of {', '.join(LIVE_KEYS)}, "
                              f"got {data!r}")
        unknown = set(data) - set(LIVE_KEYS)
        if unknown:
            raise ConfigError(f"{where}: unknown key live.{sorted(unknown)[0]}; it takes "
                              f"{', '.join(LIVE_KEYS)}")
        if data.get("evidence", "ncu") not in EVIDENCE:
            raise ConfigError(f"{where}: live.evidence must be one of {', '.join(EVIDENCE)}, "
                              f"got {data['evidence']!r}")
        if not isinstance(data.get("device", "cuda"), str):
            raise ConfigError(f"{where}: live.device must be a string (cuda, cuda:N, cpu), got "
                              f"{data['device']!r}")
        if data.get("source") is not None and not isinstance(data["source"], str):
            raise ConfigError(f"{where}: live.source must be a path, got {data['source']!r}")
        if data.get("harness") is not None and not isinstance(data["harness"], dict):
            raise ConfigError(f"{where}: live.harness must be a mapping of HarnessConfig "
                              f"settings, got {data['harness']!r}")
        problems = data.get("problems")
        if problems is not None and (not isinstance(problems, list) or not problems or any(
                not isinstance(p, str) for p in problems) or len(set(problems)) < len(problems)):
            raise ConfigError(f"{where}: live.problems must be a non-empty list of distinct "
                              f"problem URIs, got {problems!r}")
        return cls(data.get("device", "cuda"), data.get("evidence", "ncu"), data.get("source"),
                   data.get("harness"), None if problems is None else tuple(problems))

    def env(self, config) -> dict:
        """``AutoProfilerLive-v0``'s kwargs for ``config``'s experiment: its ``env`` (dataset,
        optimizer, tolerance...) with the budget in the replay's unit (seconds by default,
        the recorded costs) and the replay's dataset (the default one where ``env`` names
        none: the live backend has no default), and this config's own."""
        from autoprofiler_env.dataset.names import DEFAULT_NAME

        kwargs = {"budget_unit": "seconds", "dataset": DEFAULT_NAME} | dict(config.env)
        kwargs |= {"device": self.device, "evidence": self.evidence}
        if self.source is not None:
            kwargs["source"] = self.source
        if self.harness:
            kwargs["harness"] = dict(self.harness)
        return kwargs


# -- the driver -----------------------------------------------------------------------------

def run_live(config, out: Path, workers=None, time_budget_s: float | None = None,
             unit_timeout_s: float = 3600.0, progress: bool = True) -> dict:
    """Plays every run of ``config``'s experiment (its replay runs in ``out`` must be there:
    :func:`~experiments.experiment.run_experiment`) on the live backend, one unit per problem
    on ``workers`` (:class:`~autoprofiler_env.dataset.record.fanout.LocalWorkers`,
    :class:`~autoprofiler_env.dataset.record.fanout.RayWorkers`; None: one local process at
    a time), resuming what ``out/live`` holds; then aggregates what is finished. Returns the
    :func:`~experiments.experiment.aggregate` result (empty ``rows`` before any problem is
    finished) with ``problems`` (finished, of all), ``failed`` (units given up on in this
    run), ``stopped_by_time_budget`` and ``comparison`` (the replay against live rows).
    ``out`` is held while it runs (:func:`~autoprofiler_env.atomic.one_writer`)."""
    from autoprofiler_env.atomic import one_writer

    with one_writer(Path(out), "autoprofiler experiment (live)"):
        return _run_live(config, Path(out), workers, time_budget_s, unit_timeout_s, progress)


def _run_live(config, out: Path, workers, time_budget_s, unit_timeout_s, progress) -> dict:
    """:func:`run_live`'s work, ``out`` held."""
    from autoprofiler_env.dataset.record.fanout import LocalWorkers, Setup, drive
    from autoprofiler_env.harness import HarnessConfig
    from autoprofiler_env.jsonlines import read_jsonl
    from autoprofiler_env.profiler.runner import terminate_becomes_exit
    from experiments.experiment import ConfigError

    if config.live is None:
        raise ConfigError(f"{config.path}: no 'live' key: the experiment runs on the replay "
                          "only (add live: {device: cuda} to evaluate it on a GPU)")
    live_dir = Path(out) / "live"
    agents = _agents(config, Path(out))
    problems = _problems(config, Path(out))
    _check_env(config, [u for u, _ in problems])
    check_machine(config, workers)
    # what an episode's outcome depends on (not which problems: a sample played first is
    # part of the whole played later)
    dataset = _dataset_metadata(config)
    settings = {"env": config.live.env(config), "budgets": list(config.budgets),
                "dataset_sha256": dataset.get("sha256"),
                "agents": [{k: a[k] for k in ("name", "seed", "kind", "sha256")} for a in agents]}
    made_file = live_dir / "settings.json"
    if made_file.is_file():
        from autoprofiler_env.dataset.format import recorded_as_now
        from experiments.experiment import read_json

        made = recorded_as_now(read_json(made_file, "remove it (every live outcome is checked "
                                                    "against the config as well)"), dataset)
        if made != settings:
            raise ConfigError(f"{live_dir} was made with other settings or agents (a changed "
                              "config, or a run learned again): give another --out, or remove "
                              "it to evaluate again")
    else:
        write_atomic(made_file, (json.dumps(settings, indent=1) + "\n").encode())

    expected = {(a["name"], a["seed"], b) for a in agents for b in config.budgets}
    played = _played(read_jsonl(live_dir / f"{PART}.jsonl"))
    todo = [(uri, split) for uri, split in problems if not expected <= played.get(uri, set())]
    setup = Setup(HarnessConfig(device=config.live.device),
                  None if time_budget_s is None else time.time() + time_budget_s,
                  timeout_s=unit_timeout_s, module="experiments.live")
    work = [_unit(uri, split, agents, config, played.get(uri, set())) for uri, split in todo]
    with terminate_becomes_exit():  # SIGTERM: the units in flight are stopped, time logged
        failed = drive(live_dir, workers or LocalWorkers([None]), work, len(work), setup,
                       "problems", progress=progress) if work else 0
    rows = read_jsonl(live_dir / f"{PART}.jsonl")
    played = _played(rows)
    finished = [u for u, _ in problems if expected <= played.get(u, set())]
    result = _assemble(config, Path(out), live_dir, rows, finished)
    result |= {"problems": [len(finished), len(problems)], "failed": failed,
               "stopped_by_time_budget": len(finished) < len(problems)
               and setup.deadline_epoch is not None and time.time() > setup.deadline_epoch}
    return result


def check_machine(config, workers=None) -> None:
    """Checks that this machine has the config's live device where the units will run on it
    (not on a Ray cluster's workers, whose GPUs may be another machine's): one error before
    anything is learned or played, not a failed unit per problem.

    Raises:
        MachineError: ``live.device`` is a CUDA device and torch sees none here.
    """
    from autoprofiler_env.dataset.record.fanout import RayWorkers
    from autoprofiler_env.envs.backends.live import require_cuda

    if config.live is None or isinstance(workers, RayWorkers):
        return
    require_cuda(config.live.device, f"{config.path}: the live comparison on device "
                 f"{config.live.device!r} needs a CUDA GPU", hint=(
                     "run it on a GPU machine, or with --workers ray --address ADDR on a "
                     "cluster that has them; on a CPU, live: {device: cpu, evidence: "
                     "recorded} checks its pipeline"))


STOP_GRACE_S = 60.0
"""A unit in flight when the time budget runs out plays on for this long, then stops between
episodes and hands over those it finished (the next run plays the rest)."""


def _check_env(config, uris: list[str]) -> None:
    """The live environment of the config, made once here, so that a bad setting (a harness
    key, a KernelBench dataset without its checkout, an unrecorded problem under recorded
    evidence) is one error before any unit starts, not a failure in every unit."""
    import gymnasium as gym

    import autoprofiler_env  # noqa: F401
    from autoprofiler_env.errors import AutoProfilerError
    from experiments.experiment import ConfigError

    try:
        gym.make("AutoProfilerLive-v0", problems=uris, **config.live.env(config))
    except (ValueError, TypeError, AutoProfilerError) as e:
        raise ConfigError(f"{config.path}: the live environment cannot be made: {e}") from None


def _dataset_metadata(config) -> dict:
    """The metadata of the dataset the config's environment names (its ``sha256``, its
    ``same_content_as``)."""
    from autoprofiler_env.dataset import Dataset

    return Dataset.load(config.env.get("dataset")).metadata


def _problems(config, out: Path) -> list[tuple[str, str]]:
    """(URI, split) of the problems the live runs play: those the experiment's replay runs
    played, per split (so that each live outcome has its replay twin), or those of
    ``live.problems``."""
    from experiments.experiment import (
        TRAIN_CHOSEN,
        ConfigError,
        _run_file,
        read_json,
        run_outcomes,
    )

    path = _run_file(out, TRAIN_CHOSEN, 0)
    run = read_json(path)
    found = []
    for split in config.splits:
        key = f"{split}/{config.budgets[0]:g}"
        found += [(uri, split) for uri in run_outcomes(path, run, key)]
    if config.live.problems is None:
        return found
    by_uri = dict(found)
    missing = [u for u in config.live.problems if u not in by_uri]
    if missing:
        raise ConfigError(f"{config.path}: live.problems: {missing[0]} is not a problem of the "
                          f"splits {', '.join(config.splits)}")
    return [(u, by_uri[u]) for u in config.live.problems]


def _agents(config, out: Path) -> list[dict]:
    """Every run the live units play, with what it needs to act in another process (a
    learned tree's file, an RL model's zip) and that artifact's sha256."""
    from agents.rl import BEST_MODEL
    from experiments.experiment import TRAIN_CHOSEN, ConfigError, _chosen, _run_file
    from experiments.train import read_run

    agents = []

    def add(name: str, seed: int, kind: str, payload: dict) -> None:
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        agents.append({"name": name, "seed": seed, "kind": kind, "sha256": digest, **payload})

    for spec in config.agents:
        for seed in config.seeds:
            run_dir = out / "agents" / spec.name / f"seed-{seed}"
            if spec.kind == "tree":
                path = run_dir / "tree.json"
                if not path.is_file():
                    raise ConfigError(f"{path}: no learned tree; run the replay experiment "
                                      "first (autoprofiler experiment does)")
                add(spec.name, seed, "tree", {"tree": path.read_text()})
            else:
                model = run_dir / BEST_MODEL
                if not model.is_file():
                    raise ConfigError(f"{model}: no trained model; run the replay experiment "
                                      "first (autoprofiler experiment does)")
                run = read_run(run_dir) or {}
                add(spec.name, seed, "rl", {"algorithm": run.get("algorithm"),
                                            "model": base64.b64encode(model.read_bytes()).decode()})
    for name in config.baselines:
        if name not in NEEDS_HINDSIGHT:
            add(name, 0, "baseline", {})
    chosen = _chosen(_run_file(out, TRAIN_CHOSEN, 0))
    add(TRAIN_CHOSEN, 0, "chosen", {"chosen": chosen})
    return agents


def _unit(uri: str, split: str, agents: list[dict], config, played: set):
    """The problem's unit: every run's episodes that ``played`` does not hold yet."""
    from autoprofiler_env.dataset.record.fanout import Unit

    unit = Unit(PART, {"uri": uri, "name": uri.rsplit("/", 1)[-1], "path": "", "split": split})
    return unit, {"agents": agents, "budgets": list(config.budgets),
                  "env": config.live.env(config), "played": sorted(played)}


def _played(rows: list[dict]) -> dict[str, set]:
    """Per problem, the (agent, seed, budget) episodes written."""
    seen: dict[str, set] = {}
    for r in rows:
        seen.setdefault(r["uri"], set()).add((r["agent"], r["seed"], r["budget"]))
    return seen


# -- one unit, in its own process -----------------------------------------------------------

def _live_unit(scratch: Path) -> int:
    """In a unit's process: every run's episodes on the one problem, on one live backend."""
    import gymnasium as gym

    import autoprofiler_env  # noqa: F401
    from autoprofiler_env.dataset.record.fanout import read_spec, write_result
    from autoprofiler_env.evaluation import rollout
    from autoprofiler_env.scoring import shipped_speedup

    spec, unit = read_spec(scratch)
    seed = spec["seed"]
    started = time.monotonic()
    stop = (None if spec["deadline_epoch"] is None else
            spec["deadline_epoch"] + STOP_GRACE_S)
    played = {tuple(k) for k in seed["played"]}
    env = gym.make("AutoProfilerLive-v0", problems=[unit.uri], **seed["env"])
    rows = []
    for agent in seed["agents"]:
        policy = None  # loaded once per run (a chosen configuration: per budget)
        for b in seed["budgets"]:
            if (agent["name"], agent["seed"], b) in played:
                continue
            if stop is not None and time.time() > stop:
                break  # the rest is the next run's
            if policy is None or agent["kind"] == "chosen":
                policy = _policy(agent, env, b, scratch)
            record, = rollout(env, policy, budget=b)
            rows.append({"uri": unit.uri, "split": unit.problem.get("split"),
                         "agent": agent["name"], "seed": agent["seed"], "budget": b,
                         "sections": list(record.sections), "cost": record.cost,
                         "candidate": record.candidate, "correct": record.correct,
                         "speedup": record.speedup,
                         "shipped": shipped_speedup(record.correct, record.speedup)})
    backend = env.unwrapped.backend
    return write_result(scratch, rows, {}, started, log={
        "episodes": len(rows), "ncu_runs": len(backend.profiled),
        "judged": [name for _, name in backend.judged]})


def _policy(agent: dict, env, budget: float, scratch: Path):
    """The run's policy for ``env`` (a tree's file and a model's zip written into
    ``scratch`` once)."""
    from baselines import baseline

    kind = agent["kind"]
    if kind == "baseline":
        return baseline(env, agent["name"])
    if kind == "chosen":
        return baseline(env, agent["chosen"][f"{budget:g}"])
    path = scratch / "agents" / f"{agent['sha256']}.{'json' if kind == 'tree' else 'zip'}"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "tree":
            path.write_text(agent["tree"])
        else:
            path.write_bytes(base64.b64decode(agent["model"]))
    if kind == "tree":
        from agents.tree import TreePolicy

        return TreePolicy(path, env, agent["name"])
    from agents.rl import load_model

    return load_model(path, agent["algorithm"])


# -- what is finished, as the replay experiment's runs --------------------------------------

def _assemble(config, out: Path, live_dir: Path, rows: list[dict], problems: list[str]) -> dict:
    """Writes the run files of the finished ``problems`` (the replay experiment's format)
    and aggregates them; with no problem finished, no rows."""
    from experiments.experiment import TRAIN_CHOSEN, _chosen, _run_file, aggregate

    latest = {(r["agent"], r["seed"], r["budget"], r["uri"]): r for r in rows}
    finished = set(problems)
    runs: dict[tuple[str, int], dict] = {}
    for (agent, seed, b, uri), r in latest.items():
        if uri not in finished:
            continue
        run = runs.setdefault((agent, seed), {"agent": agent, "seed": seed, "outcomes": {}})
        run["outcomes"].setdefault(f"{r['split']}/{b:g}", {})[uri] = {
            "speedup": r["shipped"], "cost": r["cost"], "sections": r["sections"],
            "candidate": r["candidate"]}
    if (TRAIN_CHOSEN, 0) in runs:  # what it chose, per budget, as the replay's file says
        runs[TRAIN_CHOSEN, 0]["chosen"] = _chosen(_run_file(out, TRAIN_CHOSEN, 0))
    for (agent, seed), run in runs.items():
        write_atomic(_run_file(live_dir, agent, seed), (json.dumps(run) + "\n").encode())
    if not problems:
        return {"rows": [], "data": {}, "chosen": {}, "comparison": []}
    covered = {split for split in config.splits
               if any(k.startswith(f"{split}/") for run in runs.values() for k in run["outcomes"])}
    result = aggregate(config, live_dir, oracle=False, splits=covered)
    result["comparison"] = compare(config, out, runs, covered)
    return result


def compare(config, out: Path, runs: dict[tuple[str, int], dict], splits) -> list[dict]:
    """Per (split, budget, agent): the replay's and the live geometric-mean speedups over the
    same runs and problems (``runs``: the live runs by (agent, seed)), their ratio, and the
    share of episodes that collected the same sections and shipped the same candidate (None
    where the replay's run file predates storing candidates)."""
    from autoprofiler_env.scoring import geomean
    from experiments.experiment import _run_file, read_json

    replayed = {key: read_json(_run_file(out, *key)).get("outcomes") or {} for key in runs}
    names = list(dict.fromkeys(agent for agent, _ in runs))
    rows = []
    for split in (s for s in config.splits if s in splits):
        for b in config.budgets:
            key = f"{split}/{b:g}"
            for name in names:
                pairs = [(replayed[run][key][u], o) for run, live in runs.items()
                         if run[0] == name for u, o in live["outcomes"].get(key, {}).items()]
                if not pairs:
                    continue
                replay_gm, live_gm = (geomean(p[i]["speedup"] for p in pairs) for i in (0, 1))
                known = [p for p in pairs if "candidate" in p[0]]
                rows.append({
                    "split": split, "budget": b, "agent": name, "episodes": len(pairs),
                    "replay_geomean": replay_gm, "live_geomean": live_gm,
                    "live_over_replay": live_gm / replay_gm,
                    "same_sections": sum(r["sections"] == o["sections"] for r, o in pairs)
                    / len(pairs),
                    "same_candidate": (sum(r["candidate"] == o["candidate"] for r, o in known)
                                       / len(known)) if known else None})
    return rows


COMPARISON = ("split", "budget", "agent", "episodes", "replay_geomean", "live_geomean",
              "live_over_replay", "same_sections", "same_candidate")


def write(config, result: dict, out: Path, command: str) -> list[Path]:
    """``live/leaderboard.*``, its plots and ``live/replay_vs_live.*``; nothing before a
    problem is finished."""
    from experiments import experiment
    from experiments.benchmark import write_csv

    live_dir = Path(out) / "live"
    if not result["rows"]:
        return []
    done, total = result["problems"]
    harness = f", harness {json.dumps(config.live.harness)}" if config.live.harness else ""
    header = (f"Live: every episode played on `AutoProfilerLive-v0` ({config.live.device}, "
              f"{config.live.evidence} evidence{harness}), "
              f"budgeted with the dataset's recorded costs; {done} of {total} problems "
              "finished. What is learned or chosen was learned or chosen on the replay; the "
              "hindsight oracle and the best fixed configuration in hindsight are left out "
              "(they need answers no live episode has).")
    paths = experiment.write(config, result, live_dir, command, header=header)
    write_csv(result["comparison"], live_dir / "replay_vs_live.csv", COMPARISON)
    lines = [f"# Replay against live: `{config.name}`", "", f"`{command}`", "", header, "",
             "Per run, over the same problems: the geometric-mean shipped speedup in the "
             "replay and live, and the share of episodes that collected the same sections "
             "and shipped the same candidate.", "",
             ("| split | budget | agent | episodes | replay | live | live / replay "
              "| same sections | same candidate |"), "|---|---|---|---|---|---|---|---|---|"]
    for r in result["comparison"]:
        same = "n/a" if r["same_candidate"] is None else f"{r['same_candidate']:.0%}"
        lines.append(f"| {r['split']} | {r['budget']:.0%} | {r['agent']} | {r['episodes']} | "
                     f"{r['replay_geomean']:.3f} | {r['live_geomean']:.3f} | "
                     f"{r['live_over_replay']:.3f} | {r['same_sections']:.0%} | {same} |")
    write_atomic(live_dir / "replay_vs_live.md", ("\n".join(lines) + "\n").encode())
    return [*paths, live_dir / "replay_vs_live.md", live_dir / "replay_vs_live.csv"]


def main(argv: list[str] | None = None) -> int:
    from autoprofiler_env.dataset.record.fanout import unit_main

    return unit_main(_live_unit, argv)


if __name__ == "__main__":
    sys.exit(main())
