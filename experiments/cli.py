"""The ``autoprofiler`` command.

    autoprofiler benchmark [--dataset NAME|FILE] [--budgets 0.1,0.25,0.5,1.0] [--policy SPEC ...]
                           [--wandb]
    autoprofiler problems [--source DIR_OR_FILE] [--split S] [--level N] [--features] [--json]
                          [--timeout 60] [--import-timeout 5]
    autoprofiler evaluate --problem URI_OR_FILE --candidate FILE [--device cpu|cuda]
                          [--tolerance kernelbench-v0.1] [--json]
    autoprofiler profile --problem URI_OR_FILE --sections A,B [--json|--markdown]
    autoprofiler optimize FILE [--tree TREE]
                          [--optimizer reference|reference-v1|llm:MODEL|py:MODULE:ATTR]
                          [--plan | --profile-only [--candidate MINE]] [--budget 0.3]
                          [--budget-unit passes|sections]
                          [--device cuda] [--timeout 600] [--import-timeout 5] [--json]
    autoprofiler learn-tree [--budget 0.1,0.25] [--proposer search|llm] [--rounds 200]
                            [--seed 0] [--out runs/tree] [--wandb]
    autoprofiler train [--config maskable_ppo|ppo|a2c|dqn|qrdqn|recurrent_ppo|trpo|FILE]
                       [--seed 0] [--out DIR] [--steps N] [--num-threads -1] [--wandb]
                       [--wandb-group NAME]
    autoprofiler tune [--config maskable_ppo|ppo|a2c|dqn|qrdqn|recurrent_ppo|trpo|FILE]
                      [--trials 20] [--steps N] [--sampler tpe|random] [--pruner median|none]
                      [--n-startup-trials 10] [--n-evaluations N] [--seed 0]
                      [--out runs/tune/<config>] [--wandb] [--wandb-group NAME]
    autoprofiler experiment [--config compare|FILE] [--out DIR] [--wandb]
    autoprofiler record --out DIR [--parts reference,full,candidates] [URI ...]
    autoprofiler record --source KERNELBENCH_DIR --out DIR [--prepare | --replan] [--commit SHA]
                        [--parts reference]
    autoprofiler dataset build --recording DIR [--source KERNELBENCH_DIR]
                               [--candidates NAME=FILE ...] --out FILE
    autoprofiler dataset info [FILE | --dataset NAME] [--problems]

Exit codes: 0 success; 1 the candidate was judged incorrect; 2 bad input (a usage error, a
broken problem file, a harness failure), with a one-line reason on stderr (and, where the
command was given ``--json``, ``{"error": {"kind": ..., "message": ...}}`` on stdout: the kind
is the error's class, ``MachineError``, ``ProblemError``, ..., or ``usage``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import warnings
from pathlib import Path

from agents.rl.config import DEFAULT_CONFIG
from agents.tree.config import LearnConfig
from autoprofiler_env.atomic import one_writer, write_atomic
from autoprofiler_env.errors import (
    AutoProfilerError,
    AutoProfilerWarning,
    EmptySplitError,
    install_hint,
)
from autoprofiler_env.problems.isolated import DEFAULT_IMPORT_TIMEOUT_S, DEFAULT_TIMEOUT_S
from autoprofiler_env.problems.loaders import LEVELS, SPLITS
from autoprofiler_env.profiler.runner import PROBLEM_TIMEOUT_S
from experiments.optimize import BUDGET_UNITS, DEFAULT_BUDGET, DEFAULT_BUDGET_UNIT

EXIT_OK, EXIT_INCORRECT, EXIT_ERROR = 0, 1, 2


_JSON_ERRORS = False
"""Whether the running command was given ``--json``: its errors are then JSON on stdout too."""


def _fail(message: str, kind: str = "usage") -> int:
    print(f"autoprofiler: error: {message}", file=sys.stderr)
    if _JSON_ERRORS:  # a program reading the JSON gets the error where it reads
        print(json.dumps({"error": {"kind": kind, "message": message}}))
    return EXIT_ERROR


# -- problems -------------------------------------------------------------------------------

def _sizes(features: dict) -> str:
    """A problem's static sizes in ``problems --features``'s text: FLOPs (pointwise work
    included), the minimal bytes moved, their ratio (the arithmetic intensity) and the
    operators dispatched (all of them, with every feature, in ``--json``)."""
    from autoprofiler_env.features import StaticFeatures

    f = StaticFeatures.from_dict(features)
    return (f" {f.flops + f.pointwise_flops:>8.2g} {f.bytes_min:>10.3g} "
            f"{f.arithmetic_intensity:>8.3g} {f.n_ops:>5d}")


def _checkout_levels(source: Path) -> tuple[Path, tuple[int, ...]] | None:
    """Where ``source`` is a KernelBench checkout (the folder holding ``level1/`` ..., or the
    repository's root holding it in ``KernelBench/``): the folder of the levels and those of
    levels 1-3 it holds (a dataset's; level 4's files, which reach the Hugging Face hub when
    imported, are listed by giving their folder); None otherwise (a folder of problem
    files, a file)."""
    from autoprofiler_env.errors import ProblemNotFoundError
    from autoprofiler_env.problems.kernelbench import LEVELS as RECORDED, levels_root

    if not source.is_dir() or any(p.suffix == ".py" for p in source.iterdir()):
        return None  # a folder of problem files (its own level folders aside)
    try:
        root = levels_root(source)
    except ProblemNotFoundError:
        return None
    return root, tuple(level for level in RECORDED if (root / f"level{level}").is_dir())


def cmd_problems(args: argparse.Namespace) -> int:
    from autoprofiler_env.errors import ProblemError
    from autoprofiler_env.features import FEATURE_NAMES
    from autoprofiler_env.problems import load_file, load_suite, scan_directory
    from autoprofiler_env.problems.isolated import IsolatedFeatures
    from autoprofiler_env.problems.kernelbench import KernelBenchCheckout
    from autoprofiler_env.problems.loaders import SUITE_DIR

    for flag, value in (("--timeout", args.timeout), ("--import-timeout", args.import_timeout)):
        if not value > 0:
            return _fail(f"{flag} must be a positive number of seconds, got {value:g}")
    errors = []
    if args.source is not None and args.split is not None:
        return _fail(f"--split {args.split} with --source: a folder's files have no split (the "
                     "suite's problems have theirs, and a KernelBench dataset's recorded ones: "
                     "`autoprofiler dataset info --dataset kernelbench --problems`); leave "
                     "--split out")
    if args.source is None:
        problems = load_suite(split=args.split, level=args.level)
    else:
        source = Path(args.source)
        checkout = _checkout_levels(source)
        if checkout is not None and checkout[0] == SUITE_DIR.resolve():  # the suite's folder
            problems = load_suite(level=args.level)
        elif checkout is not None:  # its levels (--level's), named as a KernelBench dataset is
            root, levels = checkout
            if not levels:
                return _fail(f"--source {source}: the KernelBench checkout {root} holds none "
                             "of levels 1-3 (a dataset's); give a level's folder itself, e.g. "
                             f"--source {next(root.glob('level*'))}")
            if args.level is not None and args.level not in levels:
                return _fail(f"--level {args.level}: the KernelBench checkout {root} has "
                             f"level{'s' if len(levels) > 1 else ''} "
                             f"{', '.join(map(str, levels))}")
            problems, errors = KernelBenchCheckout(root).problems(
                levels if args.level is None else (args.level,))
        elif source.is_dir():
            problems, errors = scan_directory(source)
        else:
            problems = [load_file(source)]
        held = sorted({p.level for p in problems if p.level is not None})
        if args.level is not None and problems and args.level not in held:
            return _fail(f"--level {args.level}: "
                         + (f"the files of {source} are " if source.is_dir() else
                            f"the file {source} is ")
                         + (f"of level{'s' if len(held) > 1 else ''} "
                            f"{', '.join(map(str, held))}" if held else
                            "of no level (a level is a KernelBench checkout's level folder's, "
                            "levelN/)")
                         + "; leave --level out, or give the folder of that level")
        problems = [p for p in problems if args.level is None or p.level == args.level]
    rows = []
    # each file is imported in a worker process with a time limit: a file that hangs, crashes
    # or prints when imported must not stop the scan or write into its output
    with IsolatedFeatures(timeout_s=args.timeout, import_timeout_s=args.import_timeout) as isolated:
        for problem in problems:
            row = problem.to_dict()
            if args.features or (args.source is not None and not problem.tags):
                try:
                    features = isolated.static_features(problem)
                except ProblemError as e:
                    errors.append(e)
                    continue
                row["tags"] = list(features.tags)
                if features.trace != "meta":  # built or run on the CPU: it needs real values
                    row["trace"] = features.trace
                if args.features:
                    row["features"] = features.to_dict()
                    # as the observation holds them: what a tree's feature condition reads
                    row["observed"] = {name: round(float(v), 4) for name, v in
                                       zip(FEATURE_NAMES, features.vector())}
            rows.append(row)
    for e in errors:
        print(f"autoprofiler: skipped {e}", file=sys.stderr)
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    else:
        sizes = (f" {'flops':>8s} {'bytes_min':>10s} {'flop/B':>8s} {'ops':>5s}"
                 if args.features else "")
        width = max((len(row["uri"]) for row in rows), default=3)  # the longest URI's
        print(f"{'uri':{width}s} {'level':>5s} {'split':>5s}{sizes}  tags")
        for row in rows:
            trace = f"  (traced: {row['trace']})" if "trace" in row else ""
            print(f"{row['uri']:{width}s} {row['level'] or '-':>5} {row['split'] or '-':>5s}"
                  f"{_sizes(row['features']) if args.features else ''}  "
                  f"{','.join(row['tags'])}{trace}")
        print(f"{len(rows)} problem{'s' * (len(rows) != 1)}"
              + (f", {len(errors)} skipped" if errors else ""))
    return EXIT_OK if rows or not errors else EXIT_ERROR


# -- evaluate -------------------------------------------------------------------------------

def cmd_evaluate(args: argparse.Namespace) -> int:
    from autoprofiler_env.envs.backends.live import require_cuda
    from autoprofiler_env.harness import Evaluator, HarnessConfig, read_candidate
    from autoprofiler_env.problems import load_problem

    if not re.fullmatch(r"cpu|cuda(:\d+)?", args.device):
        return _fail(f"--device {args.device}: cpu, cuda or cuda:N")
    if not 0 < args.timeout < math.inf:
        return _fail(f"--timeout {args.timeout:g}: seconds > 0")
    if args.correctness_trials < 1:
        return _fail(f"--correctness-trials {args.correctness_trials}: at least 1")
    _tolerance(args.tolerance)
    require_cuda(args.device, f"evaluate --device {args.device} needs a CUDA GPU",
                 "use --device cpu")
    problem = load_problem(args.problem)
    source = read_candidate(args.candidate)
    config = HarnessConfig(device=args.device, size=args.size, tolerance=args.tolerance,
                           n_correctness=args.correctness_trials, seed=args.seed,
                           static_check=args.static_check)
    with Evaluator(config, timeout_s=args.timeout, prepare_timeout_s=args.timeout) as evaluator:
        result = evaluator.evaluate(problem, source)
    if args.json:
        print(json.dumps(result.to_dict(), indent=1))
    else:
        print(f"{problem.uri}: {result.summary}")
    if not result.correct:
        print(f"autoprofiler: candidate incorrect ({result.error_kind.value}): "
              f"{result.error_message}", file=sys.stderr)
        return EXIT_INCORRECT
    return EXIT_OK


# -- profile --------------------------------------------------------------------------------

def cmd_profile(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from autoprofiler_env.errors import UnknownSectionError
    from autoprofiler_env.problems import load_problem
    from autoprofiler_env.profiler import profile_problems, render_markdown
    from autoprofiler_env.profiler.catalogue import load_catalogue

    from experiments.optimize import check_machine

    problems = [load_problem(ref) for ref in args.problem]
    if args.candidate is not None:
        if len(problems) != 1:
            return _fail(f"--candidate profiles one problem's inputs: give one --problem, not "
                         f"{len(problems)}")
        problems = [problems[0].with_candidate(args.candidate)]
    # what a CPU can check is checked before the machine is (a GPU and ncu)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    if not sections:
        return _fail(f"--sections {args.sections!r}: give section ids, comma-separated "
                     "(e.g. SpeedOfLight,WarpStateStats)")
    try:
        load_catalogue().validate(sections)
    except UnknownSectionError as e:
        return _fail(f"--sections {args.sections}: {e}", type(e).__name__)
    if not 0 < args.timeout < math.inf:
        return _fail(f"--timeout {args.timeout:g}: seconds > 0")
    ncu = check_machine(command="profile", ncu=args.ncu)
    profiles, failures = profile_problems(problems, sections, ncu=ncu,
                                          problem_timeout_s=args.timeout)
    if args.json:
        json.dump({"profiles": [p.to_dict() for p in profiles],
                   "failures": [asdict(f) for f in failures]}, sys.stdout, indent=1)
        print()
    else:
        for p in profiles:
            print(f"<!-- {p.problem_uri} -->")
            print(render_markdown(p))
            c = p.cost
            print(f"_cost: {c.replay_s:.2f} s of replay, {c.passes} passes x {c.n_kernels} "
                  f"kernels, {c.gpu_replay_s * 1e3:.1f} ms of GPU replay time_\n")
    for f in failures:
        print(f"autoprofiler: could not profile {f.problem_uri}: {f.error}", file=sys.stderr)
    return EXIT_OK if not failures else EXIT_ERROR


# -- optimize -------------------------------------------------------------------------------

def cmd_optimize(args: argparse.Namespace) -> int:
    from experiments.optimize import format_json, format_plan, format_text, optimize, plan

    if args.plan and (args.timeout is not None or args.candidate is not None):
        flag = "--timeout" if args.timeout is not None else "--candidate"
        return _fail(f"{flag} with --plan: the plan reads the file's static features and the "
                     "budget alone, before anything is profiled or judged: leave it out")
    if args.plan:
        try:
            planned = plan(args.file, args.tree, optimizer=args.optimizer, budget=args.budget,
                           budget_unit=args.budget_unit, import_timeout_s=args.import_timeout)
        except ValueError as e:
            return _fail(str(e).splitlines()[0], type(e).__name__)
        print(json.dumps(planned.to_dict(), indent=1) if args.json
              else format_plan(planned).rstrip("\n"))
        return EXIT_OK
    try:
        result = optimize(args.file, args.tree, optimizer=args.optimizer, budget=args.budget,
                          budget_unit=args.budget_unit, device=args.device,
                          profile_only=args.profile_only, import_timeout_s=args.import_timeout,
                          timeout_s=args.timeout, candidate_file=args.candidate)
    except ValueError as e:
        return _fail(str(e).splitlines()[0], type(e).__name__)
    print(format_json(result) if args.json else format_text(result).rstrip("\n"))
    verdict = result.verdict
    if verdict is not None and not verdict.correct:
        print(f"autoprofiler: candidate {verdict.candidate} incorrect "
              f"({verdict.error_kind or 'unknown'})", file=sys.stderr)
        return EXIT_INCORRECT
    return EXIT_OK


# -- record and dataset ---------------------------------------------------------------------

def _llm_part(args: argparse.Namespace):
    """The LLM part of a recording, from the command line (raises the optimizer's
    OptimizationError when no endpoint or model is given)."""
    from autoprofiler_env.dataset import Dataset
    from autoprofiler_env.dataset.record import LLMPart, parse_section_sets
    from autoprofiler_env.optimizers.llm import LLMOptimizer, OpenAIChatBackend

    backend = OpenAIChatBackend(args.llm_base_url, args.llm_model)
    dataset = Dataset.load(args.dataset)  # a shipped one's name or a file; None: the default
    # each (problem, section set, repeat) is asked once and recorded: nothing to keep
    return LLMPart(LLMOptimizer(backend, temperature=args.temperature, cache=False), dataset,
                   parse_section_sets(args.section_sets, dataset.sections), args.repeats,
                   frozenset(dataset.uris()))


def cmd_record(args: argparse.Namespace) -> int:
    with one_writer(Path(args.out), "autoprofiler record"):  # a second recorder: refused
        return _cmd_record(args)


def _cmd_record(args: argparse.Namespace) -> int:
    """:func:`cmd_record`'s work, ``--out`` held."""
    from autoprofiler_env.dataset.record import PARTS, record
    from autoprofiler_env.problems import load_suite

    if args.candidate_timeout is not None and not 0 < args.candidate_timeout <= 86400:
        return _fail(f"--candidate-timeout must be a number of seconds > 0 and at most a day "
                     f"(86400), got {args.candidate_timeout:g}")
    if args.address is not None and args.workers != "ray":
        return _fail("--address is the Ray cluster of --workers ray")
    if args.time_budget is not None and not 0 < args.time_budget < math.inf:
        return _fail(f"--time-budget must be a number of seconds > 0 (leave it out for no "
                     f"budget), got {args.time_budget:g}")
    if args.chunk < 1:
        return _fail(f"--chunk must be a whole number of problems >= 1, got {args.chunk}")
    if args.source is not None:
        if not Path(args.source).exists():
            return _fail(f"--source {args.source}: no such directory (give the KernelBench "
                         "checkout: the folder holding level1/, or the repository's root)")
        if not Path(args.source).is_dir():
            return _fail(f"--source {args.source}: not a directory (give the KernelBench "
                         "checkout: the folder holding level1/, or the repository's root)")
        return _record_kernelbench(args)
    if args.prepare or args.commit:
        return _fail("--prepare and --commit are for a KernelBench checkout: give --source DIR")

    problems = (_named_problems(args.problems) if args.problems
                else load_suite(split=args.split, level=args.level))
    if not problems:
        return _fail(f"no problem files in {', '.join(args.problems)}")
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if set(parts) - set(PARTS):
        return _fail(f"unknown parts {sorted(set(parts) - set(PARTS))}; choose from "
                     f"{', '.join(PARTS)}")
    try:
        llm = _llm_part(args) if "llm" in parts else None
    except ValueError as e:
        return _fail(str(e))
    if args.plan and not Path(args.plan).is_file():
        return _fail(f"--plan {args.plan}: no such file (make one with `python -m "
                     "autoprofiler_env.dataset.record.plan --out FILE`)")
    if (missing := _missing_reuse(args)) is not None:
        return _fail(f"--reuse {missing}: no such file")
    if args.workers is not None:
        return _record_fanout(args, problems, parts, llm)
    summary = record(Path(args.out), problems, parts, chunk=args.chunk,
                     time_budget_s=args.time_budget, device=args.device,
                     warm_workers=args.warm_workers, llm=llm,
                     plan=Path(args.plan) if args.plan else None,
                     reuse=tuple(Path(f) for f in args.reuse),
                     **_candidate_timeout(args))
    return _recorded(summary, Path(args.out), problems)


def _named_problems(refs: list[str]) -> list:
    """``record``'s problems: each a suite URI, a problem file, or a folder of them (each of
    its files that is no problem is said on stderr and left out, as ``problems --source``
    does)."""
    from autoprofiler_env.problems import load_problem, scan_directory

    problems = []
    for ref in refs:
        if Path(ref).is_dir():
            found, errors = scan_directory(Path(ref))
            for e in errors:
                print(f"autoprofiler: skipped {e}", file=sys.stderr)
            problems += found
        else:
            problems.append(load_problem(ref))
    return problems


def _record_fanout(args: argparse.Namespace, problems, parts, llm) -> int:
    """``record --workers N|ray``: one unit per (problem, part), each on its own GPU (the llm
    part's requests ``--llm-concurrency`` at a time meanwhile)."""
    from autoprofiler_env.dataset.record.fanout import FANOUT_PARTS, record_fanout
    from autoprofiler_env.harness import HarnessConfig
    from autoprofiler_env.jsonlines import read_jsonl

    if args.llm_concurrency < 1:
        return _fail(f"--llm-concurrency {args.llm_concurrency}: give at least 1")
    if set(parts) - set(FANOUT_PARTS):
        return _fail(f"--workers records {', '.join(FANOUT_PARTS)}; record "
                     f"{', '.join(sorted(set(parts) - set(FANOUT_PARTS)))} without --workers")
    workers = _workers(args.workers, args.address, args.device)
    if isinstance(workers, str):
        return _fail(workers)
    plan = None
    if args.plan:
        from autoprofiler_env.dataset.record.plan import candidate_names, load_plan

        plan = candidate_names(load_plan(Path(args.plan)))
    summary = record_fanout(Path(args.out), problems, workers, parts,
                            config=HarnessConfig(device=args.device),
                            time_budget_s=args.time_budget, warm_workers=args.warm_workers,
                            plan=plan, reuse=[r for f in args.reuse for r in read_jsonl(Path(f))],
                            max_ops=args.max_ops, llm=llm,
                            llm_concurrency=args.llm_concurrency, **_candidate_timeout(args))
    return _recorded(summary, Path(args.out), problems)


def _workers(workers: str, address: str | None, device: str):
    """Where a fan-out's units run: ``workers`` local GPUs (on a CPU, that many processes
    with no GPU to pin), or ``'ray'``, the Ray cluster at ``address``; a message saying
    what is wrong otherwise."""
    from autoprofiler_env.dataset.record.fanout import LocalWorkers, RayWorkers

    if workers == "ray":
        return RayWorkers(address)
    try:
        n = int(workers)
        if n < 1:
            raise ValueError
    except ValueError:
        return f"--workers {workers!r}: give a number of GPUs or 'ray'"
    try:
        return LocalWorkers([None] * n) if device == "cpu" else LocalWorkers.visible(n)
    except ValueError as e:
        return str(e)


def _candidate_timeout(args: argparse.Namespace) -> dict:
    """``--candidate-timeout``, where given, as the recorders' keyword (each has its
    default)."""
    return ({} if args.candidate_timeout is None
            else {"candidate_timeout_s": args.candidate_timeout})


def _missing_reuse(args: argparse.Namespace) -> str | None:
    """The first ``--reuse`` file that does not exist, if any."""
    return next((f for f in args.reuse if not Path(f).is_file()), None)


def _recorded(summary: dict, out: Path | None = None, problems=()) -> int:
    """Prints a recording's summary, the problems of this call whose reference failed (their
    rows in ``out`` say why: a dataset leaves them out), and how to go on where its time
    budget ran out."""
    from autoprofiler_env.jsonlines import read_jsonl

    print(json.dumps(summary))
    asked = {p.uri for p in problems}
    failed = [r for r in (read_jsonl(out / "reference.jsonl") if out is not None else ())
              if r["uri"] in asked and r.get("error") is not None]
    if failed:
        print(f"autoprofiler: {len(failed)} of {len(asked)} problems failed their reference "
              "and are recorded so (a dataset built from the recording leaves them out):",
              file=sys.stderr)
        for row in failed:
            print(f"  {row['error']}", file=sys.stderr)
    if summary.get("llm_left") and not summary["stopped_by_time_budget"]:
        print(f"autoprofiler: {summary['llm_left']} LLM outcome(s) not recorded (requests "
              "that got no reply from the model, or replies not judged yet); run the same "
              "command again to go on", file=sys.stderr)
    if summary["stopped_by_time_budget"]:
        print("autoprofiler: the time budget ran out; run the same command again to go on",
              file=sys.stderr)
    return EXIT_OK


def _record_kernelbench(args: argparse.Namespace) -> int:
    """``record --source DIR``: prepare a KernelBench checkout's recording (``--prepare``,
    CPU), or record it chunk by chunk (GPU)."""
    from collections import Counter

    from autoprofiler_env.dataset.record import DEFAULT_PARTS
    from autoprofiler_env.dataset.record.kernelbench import (
        MANIFEST,
        RecordingManifest,
        prepare_manifest,
        record_kernelbench,
    )
    from autoprofiler_env.problems.kernelbench import KernelBenchCheckout

    if args.problems or args.split or args.level:
        return _fail("--source records the checkout's levels (--levels): give no problems, "
                     "--split or --level")
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if parts not in (list(DEFAULT_PARTS), ["reference"]):
        return _fail("--source records every part of each chunk together (reference, full, "
                     "the plan, candidates): give no --parts, or --parts reference for the "
                     "reference timings of every problem first")
    try:
        levels = tuple(sorted({int(v) for v in args.levels.split(",") if v.strip()}))
    except ValueError:
        return _fail(f"--levels {args.levels!r}: give KernelBench levels, e.g. 1,2,3")
    if not levels or min(levels) < 1:
        return _fail(f"--levels {args.levels!r}: give KernelBench levels, e.g. 1,2,3")
    checkout = KernelBenchCheckout(args.source, commit=args.commit)
    out = Path(args.out)
    path = out / MANIFEST
    if args.prepare:
        if path.exists():
            RecordingManifest.load(path)  # a broken one says so; a good one is kept
            return _fail(f"{path} exists: the recording is prepared (its splits and order "
                         "are fixed); remove it to prepare again")
        if checkout.commit is None:  # refused before a manifest naming no commit is written
            return _fail(f"--source {args.source}: not a git checkout that tracks its files, "
                         "so its commit is unknown: give --commit SHA, the KernelBench commit "
                         "its files are from (the recording names it, and the dataset built "
                         "from it)")
        manifest = prepare_manifest(checkout, levels, seed=args.seed)
        lacking = {f: why for f, why in manifest.skipped.items()
                   if "ModuleNotFoundError" in why}
        if lacking:  # the splits and the order would be another manifest's than a full one's
            first = next(iter(lacking))
            return _fail(f"{len(lacking)} files import a package this machine lacks (e.g. "
                         f"{first}: {lacking[first]}): install it (KernelBench's level 3 "
                         f"needs einops: {install_hint('kernelbench')}) and prepare again; "
                         "a manifest without them deals other splits and another order")
        out.mkdir(parents=True, exist_ok=True)
        manifest.save(path)
        strata = Counter((m.provenance.level, m.op) for m in manifest.problems)
        splits = Counter(m.split for m in manifest.problems)
        print(f"{len(manifest.problems)} problems in {len(strata)} strata (level, op), "
              f"{len(manifest.skipped)} skipped: {path}")
        print("splits: " + ", ".join(f"{s} {splits[s]}" for s in SPLITS))
        for (level, op), n in sorted(strata.items()):
            print(f"  level {level} {op:14s} {n}")
        for file, why in manifest.skipped.items():
            print(f"autoprofiler: skipped {file}: {why}", file=sys.stderr)
        return EXIT_OK
    if args.replan:
        from autoprofiler_env.dataset.record.kernelbench import replan

        added = replan(out, checkout)
        for uri, names in added.items():
            print(f"{uri}: {', '.join(names)}")
        print(f"{len(added)} problems' plans reach new candidates: {out / 'plan.json'}")
        return EXIT_OK
    if (missing := _missing_reuse(args)) is not None:
        return _fail(f"--reuse {missing}: no such file")
    if args.max_ops is not None and args.max_ops < 1:
        return _fail(f"--max-ops must be a whole number >= 1, got {args.max_ops}")
    from autoprofiler_env.profiler.runner import MAX_OPS

    workers = None  # each part of a chunk spread over GPUs, a unit per problem
    if args.workers is not None:
        workers = _workers(args.workers, args.address, args.device)
        if isinstance(workers, str):
            return _fail(workers)
    if args.device == "cpu" and args.time_budget is None:
        from autoprofiler_env.errors import warn

        warn("recording KernelBench on the CPU: its problems are sized for a GPU (one "
             "reference can take minutes here, the levels many hours); a CPU recording checks "
             "the pipeline: bound it with --time-budget SECONDS")
    summary = record_kernelbench(out, checkout, chunk=args.chunk,
                                 time_budget_s=args.time_budget, device=args.device,
                                 warm_workers=args.warm_workers,
                                 max_ops=MAX_OPS if args.max_ops is None else args.max_ops,
                                 reuse=tuple(Path(f) for f in args.reuse),
                                 reference_only=parts == ["reference"], workers=workers,
                                 **_candidate_timeout(args))
    return _recorded(summary)


def parse_candidates(values: list[str]) -> dict[str, Path]:
    """``--candidates NAME=FILE`` values: an optimizer's name -> its ``candidates.jsonl``.

    Raises:
        ValueError: a value that is not ``NAME=FILE``, a name given twice, ``reference-v1``
            (its candidates are the recording's own), or a file that does not exist; the
            message names the value.
    """
    from autoprofiler_env.dataset.format import V1

    extra: dict[str, Path] = {}
    for value in values:
        name, sep, file = value.partition("=")
        name, file = name.strip(), file.strip()
        if not sep or not name or not file:
            raise ValueError(f"--candidates {value!r}: not NAME=FILE (an optimizer's name and "
                             "its candidates.jsonl, e.g. "
                             "reference=docs/data/recording_h200_v2/candidates.jsonl)")
        if name == V1:
            raise ValueError(f"--candidates {value!r}: {V1}'s candidates are the recording's "
                             "own candidates.jsonl (--recording)")
        if name in extra:
            raise ValueError(f"--candidates {value!r}: the optimizer {name!r} is given twice")
        if not Path(file).is_file():
            raise ValueError(f"--candidates {value!r}: no such file {file}")
        extra[name] = Path(file)
    return extra


def cmd_dataset(args: argparse.Namespace) -> int:
    from collections import Counter

    from autoprofiler_env.dataset import Dataset, resolve_dataset
    from autoprofiler_env.dataset.build import build_from_recording

    if args.action == "build":
        if args.tolerances and not Path(args.tolerances).is_file():
            return _fail(f"--tolerances {args.tolerances}: no such file")
        if Path(args.out).is_dir():  # said before the build, not after it
            return _fail(f"--out {args.out} is a folder: give the dataset file to write "
                         "(e.g. my-gpu.json.gz)")
        from autoprofiler_env.atomic import writer

        for option, folder in [("--recording", args.recording),
                               *(("--runs", r) for r in args.runs)]:
            holder = writer(Path(folder))
            if holder is not None:  # its logs grow as the build reads them: two moments mixed
                return _fail(f"{option} {folder} is being written ({holder}): wait for it to "
                             "end, or build from a copy of it")
        try:
            extra = parse_candidates(args.candidates)
        except ValueError as e:
            return _fail(str(e))
        content = build_from_recording(Path(args.recording),
                                       more_runs=tuple(Path(r) for r in args.runs),
                                       complete=args.complete,
                                       tolerances=Path(args.tolerances) if args.tolerances
                                       else None, extra=extra,
                                       source=Path(args.source) if args.source else None)
        checksum = content.save(Path(args.out))
        print(f"{len(content.problems)} problems, {len(content.sections)} sections: {args.out} "
              f"(sha256 {checksum})")
        pairs = Dataset(content).info()["outcomes"]
        print("outcomes: " + (", ".join(f"{n} pairs of {m}" for m, n in pairs.items())
                              or "none"))
        reasons = Counter(content.metadata["left_out"].values())
        if reasons:
            print("left out: " + "; ".join(f"{n} with {why}" for why, n in reasons.items()))
        return EXIT_OK
    if args.action == "upgrade":
        from autoprofiler_env.dataset.format import SCHEMA, upgrade_file

        if Path(args.out).is_dir():
            return _fail(f"--out {args.out} is a folder: give the dataset file to write")
        source = resolve_dataset(args.file)  # a shipped one's name too
        checksum = upgrade_file(source, Path(args.out))
        if checksum is None:
            same = Path(args.out).resolve() == source.resolve()
            print(f"{args.file} is {SCHEMA} already: "
                  + ("nothing written" if same else f"copied to {args.out} as it is"))
        else:
            print(f"{args.out}: {SCHEMA} (sha256 {checksum}), the content of {args.file}; "
                  "what was learned on it stays learned on this (same_content_as)")
        return EXIT_OK
    if args.file and args.dataset:
        return _fail("give a dataset file or --dataset NAME, not both")
    info = Dataset.load(args.file or args.dataset).info(problems=args.problems)
    print(json.dumps(info, indent=1))
    return EXIT_OK


# -- benchmark ------------------------------------------------------------------------------

def _tolerance(text: str | None) -> str | None:
    """``--tolerance`` as given (None: the default), or the command's one-line error saying
    what is accepted."""
    from autoprofiler_env.errors import EvaluationError
    from autoprofiler_env.harness.tolerance import PRESETS, resolve

    if text is not None:
        try:
            resolve(text)
        except EvaluationError:
            raise AutoProfilerError(f"--tolerance {text}: a preset ({', '.join(PRESETS)}), a "
                                    "number >= 0 (atol = rtol) or ATOL,RTOL, two numbers "
                                    ">= 0") from None
    return text


def _budgets(text: str, option: str) -> list[float]:
    """The budgets of ``--budget(s) 0.1,0.25``; an error naming the option otherwise."""
    try:
        budgets = [float(b) for b in text.split(",")]
    except ValueError:
        raise AutoProfilerError(f"{option} {text!r}: give fractions of the full set's cost, "
                                "comma-separated (e.g. 0.1,0.25)") from None
    if not budgets or any(not (0 < b < math.inf) for b in budgets):
        raise AutoProfilerError(f"{option} {text!r}: each budget is a finite fraction > 0")
    return budgets


def _seed_count(text: str) -> int:
    """The count of ``--seeds N`` (a stochastic agent runs with the seeds 0..N-1); an error
    saying so otherwise, a list of seeds included."""
    try:
        count = int(text)
    except ValueError:
        raise AutoProfilerError(f"--seeds {text!r}: give how many seeds, not which: N runs each "
                                "stochastic agent with the seeds 0..N-1 (e.g. --seeds 3 for "
                                "0,1,2)") from None
    if count < 1:
        raise AutoProfilerError(f"--seeds {count}: how many seeds each stochastic agent runs "
                                "(0..N-1), at least 1")
    return count


def cmd_benchmark(args: argparse.Namespace) -> int:
    from experiments.benchmark import (
        COLUMNS,
        benchmark,
        dataset_gpu,
        log_wandb,
        plot,
        policy_files,
        print_table,
        write_csv,
    )
    from experiments.policies import SHIPPED_RL, SHIPPED_TREE, changed
    from experiments.tracking import check_wandb, dataset_sha256, versions

    budgets = _budgets(args.budgets, "--budgets")
    tolerance = _tolerance(args.tolerance)
    if Path(args.out).exists() and not Path(args.out).is_dir():
        return _fail(f"--out {args.out}: a file, not a folder")
    seeds = _seed_count(args.seeds)
    if args.wandb:
        check_wandb()
    out = Path(args.out)
    with one_writer(out, "autoprofiler benchmark"):  # its three files are one run's
        read = [SHIPPED_TREE, SHIPPED_RL, *args.policy]  # the files as they are loaded
        loaded_files = _checked_input(policy_files, read, dataset=args.dataset,
                                      split=args.split, optimizer=args.optimizer,
                                      tolerance=tolerance, llm_missing=args.llm_missing)
        summary, episodes = _checked_input(benchmark, args.dataset, budgets, seeds=seeds,
                                           split=args.split, policies=args.policy,
                                           optimizer=args.optimizer, tolerance=tolerance,
                                           llm_missing=args.llm_missing)
        from autoprofiler_env.dataset import Dataset
        from autoprofiler_env.dataset.names import DEFAULT_NAME

        ran = list(dict.fromkeys(r["agent"] for r in summary))  # the shipped ones too
        now = policy_files(read, dataset=args.dataset, split=args.split,
                           optimizer=args.optimizer, tolerance=tolerance,
                           llm_missing=args.llm_missing)
        if now != loaded_files:  # rewritten meanwhile: the figures may be of another file
            paths = changed(*({p: h for f in d.values() for p, h in f.items()}
                              for d in (loaded_files, now)))
            return _fail(f"{', '.join(paths)} changed while the benchmark ran (another "
                         "process writes it): run it again once it no longer changes, or "
                         "give a copy")
        files = {name: now[name] for name in read if name in now
                 and (name in args.policy or name in ran)}
        record = {  # what the tables were made from, beside them (and in wandb's config)
            "command": "benchmark", "argv": ["autoprofiler", *sys.argv[1:]],
            "dataset": args.dataset or DEFAULT_NAME,
            "dataset_sha256": dataset_sha256(args.dataset), "split": args.split,
            "optimizer": args.optimizer or Dataset.load(args.dataset).default_optimizer(),
            "tolerance": tolerance or "default", "llm_missing": args.llm_missing,
            "budgets": budgets, "seeds": seeds, "policies": args.policy,
            "policy_files": files,
            "versions": versions()}
        write_csv(summary, out / "benchmark.csv", COLUMNS)
        write_csv(episodes, out / "episodes.csv")
        figure = plot(summary, out / "benchmark.png", dataset_gpu(args.dataset))
        write_atomic(out / "benchmark.json", (json.dumps(record, indent=1) + "\n").encode())
    print_table(summary)
    shipped = [name for name in (SHIPPED_TREE, SHIPPED_RL) if name in ran]
    if shipped:  # a reader would otherwise take one seed's figures for the method's
        print("\n" + _shipped_seed_note(shipped, args.dataset, record["optimizer"]))
    print(f"saved {out / 'benchmark.csv'}, {out / 'episodes.csv'}, {figure}, "
          f"{out / 'benchmark.json'}")
    if args.wandb:
        log_wandb(record, summary, episodes, figure)
    return EXIT_OK


# -- learn-tree -----------------------------------------------------------------------------

def _checked_input(function, *args, **kwargs):
    """``function(*args, **kwargs)``, a ValueError (a make kwarg the environment refused)
    turned into the command's one-line error."""
    try:
        return function(*args, **kwargs)
    except AutoProfilerError:  # typed already (some are ValueErrors too): as it is
        raise
    except ValueError as e:
        raise AutoProfilerError(str(e)) from None


def cmd_learn_tree(args: argparse.Namespace) -> int:
    from autoprofiler_env.numeric import budgets_once
    from experiments.learn_tree import goes_on, learn_tree, make_proposer
    from experiments.tracking import check_wandb, finishing, versions, wandb_run

    budgets = _budgets(args.budget, "--budget")
    _checked_input(budgets_once, budgets)  # now, not after the wandb run has started
    tolerance = _tolerance(args.tolerance)
    for option, value, least in (("--rounds", args.rounds, 1), ("--proposals", args.proposals, 1),
                                 ("--patience", args.patience, 0)):
        if value < least:
            return _fail(f"{option} {value}: a whole number >= {least}")
    if not 0 <= args.margin < math.inf:
        return _fail(f"--margin {args.margin}: the mean log score an edit must add, a finite "
                     "number >= 0")
    if args.wandb:
        check_wandb()
    from experiments.learn_tree import refuse_another_run

    refuse_another_run(Path(args.out), sorted(budgets))  # before a wandb run writes there
    proposer = make_proposer(args.proposer, args.seed, args.llm_base_url, args.llm_model,
                             args.llm_timeout, args.llm_temperature,
                             None if args.llm_structured == "none" else args.llm_structured,
                             args.llm_fold_system, args.llm_schema_depth)
    with one_writer(Path(args.out), "autoprofiler learn-tree"):  # a second one: refused
        # the settings as the command took them; learn_tree adds its resolved ones (run.json's)
        run = wandb_run("learn-tree", {
            "command": "learn-tree", "budgets": sorted(budgets), "proposer": args.proposer,
            "seed": args.seed, "rounds": args.rounds, "dataset": args.dataset,
            "optimizer": args.optimizer, "tolerance": tolerance, "start": args.start,
            "proposals": args.proposals, "margin": args.margin, "patience": args.patience,
            "cost_penalty": args.cost_penalty,
            "versions": versions()}, name=f"{args.proposer}-seed{args.seed}",
            folder=Path(args.out),  # its logged rounds, where it goes on from them
            resuming=goes_on(Path(args.out), sorted(budgets), args.rounds)) \
            if args.wandb else None
        with finishing(run):
            tree, results = _checked_input(
                learn_tree, sorted(budgets), proposer, Path(args.out), rounds=args.rounds,
                dataset=args.dataset, optimizer=args.optimizer, tolerance=tolerance,
                start=args.start, proposals=args.proposals, margin=args.margin,
                patience=args.patience, cost_penalty=args.cost_penalty, wandb_run=run,
                command=["autoprofiler", *sys.argv[1:]], llm_missing=args.llm_missing)
    from agents.tree.render import export_text

    print(export_text(tree))
    useless = []  # the budgets where no round got a usable reply
    for budget, r in sorted(results.items()):
        failed = sum(r.failed.values())
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(r.failed.items()))
        kept = f"round {r.best_round}" if r.best_round else "the start"
        print(f"budget {budget:g}: the tree of {kept} (the best validation): "
              f"train {r.train:.4f}, validation {r.validation:.4f} "
              f"({r.accepted} edits kept in {r.rounds} rounds, {r.tree.size()} nodes)"
              + (f"; {failed} rounds without a usable reply ({kinds})" if failed else ""))
        if r.rounds and failed >= r.rounds:
            useless.append(budget)
    out = Path(args.out)
    print(f"saved {out / 'tree.json'}, {out / 'tree.txt'}, {out / 'tree.png'}, "
          f"{out / 'curve.png'} and the logs log-<budget>.jsonl")
    if useless:
        return _fail(f"no round at budget {', '.join(f'{b:g}' for b in useless)} got a usable "
                     f"reply from the proposer {proposer.name}: the tree saved there is its "
                     "start; the logs log-<budget>.jsonl say why each round failed")
    return EXIT_OK


# -- train ----------------------------------------------------------------------------------

def cmd_train(args: argparse.Namespace) -> int:
    from agents.rl.config import read_config
    from experiments.tracking import check_wandb, finishing, wandb_run
    from experiments.train import (
        check_out,
        config_path,
        default_out,
        interrupted_run,
        portable,
        print_summary,
        saved_steps,
        stopped_run,
        train,
    )

    if args.seed < 0:
        return _fail(f"--seed {args.seed}: a whole number >= 0 (Gymnasium's seeds)")
    if args.num_threads == 0 or args.num_threads < -1:
        return _fail(f"--num-threads {args.num_threads}: a count of threads >= 1, or -1 for "
                     "torch's default")
    if args.wandb:
        check_wandb()
    if args.num_threads > 0:  # as rl-baselines3-zoo's train sets it
        import torch

        torch.set_num_threads(args.num_threads)
    path = config_path(args.config)
    config, given = read_config(path)
    if args.steps is not None:
        if args.steps < 1:
            return _fail(f"--steps must be a whole number of steps >= 1, got {args.steps}")
        config = config.replace(total_timesteps=args.steps)
    out = Path(args.out or default_out(path, args.seed))
    with one_writer(out, "autoprofiler train"):  # a second run into --out is refused at once
        # an interrupted or killed run in --out resumes: refused now, before wandb, if its
        # config differs
        check_out(out, config, args.seed)
        stopped = interrupted_run(out)
        if stopped is not None:  # the model's own steps: its run.json is written after it
            print(f"resuming {stopped_run(stopped)} in {out} at step "
                  f"{saved_steps(out / 'model.zip')} of {config.total_timesteps}", flush=True)
        run = wandb_run("train", {"config_file": portable(path), "seed": args.seed},
                        group=args.wandb_group, default_group=f"train-{path.stem}",
                        name=f"{path.stem}-seed{args.seed}", folder=out,
                        resuming=stopped is not None) if args.wandb else None
        with finishing(run):
            result = train(config, out, seed=args.seed, given=given, source=str(path),
                           wandb_run=run, command=["autoprofiler", *sys.argv[1:]])
    print_summary(result)
    return EXIT_OK


# -- tune -----------------------------------------------------------------------------------

def cmd_tune(args: argparse.Namespace) -> int:
    from experiments.tracking import check_wandb
    from experiments.tune import _optuna, print_summary, tune

    _optuna()  # without Optuna: the install hint, before anything else
    if args.wandb:
        check_wandb()
    result = tune(args.config, args.out, trials=args.trials, steps=args.steps,
                  sampler=args.sampler, pruner=args.pruner, seed=args.seed,
                  n_startup_trials=args.n_startup_trials, n_evaluations=args.n_evaluations,
                  command=["autoprofiler", *sys.argv[1:]], wandb=args.wandb,
                  wandb_group=args.wandb_group)
    print_summary(result)
    return EXIT_OK


# -- experiment -----------------------------------------------------------------------------

def cmd_experiment(args: argparse.Namespace) -> int:
    from experiments.experiment import (
        config_path,
        experiment_wandb_config,
        goes_on_experiment,
        load_config,
        log_experiment,
        run_experiment,
        write,
    )
    from experiments.tracking import check_wandb, finishing, wandb_run

    if args.wandb:
        check_wandb()
    config = load_config(config_path(args.config))
    if config.live is None and (args.workers or args.address or args.time_budget):
        return _fail("--workers, --address and --time-budget spread a live evaluation: the "
                     "config has no 'live' key (experiments/live.py)")
    if args.address is not None and args.workers != "ray":
        return _fail("--address is the Ray cluster of --workers ray")
    workers = None  # checked before hours of learning on the replay, not after
    if config.live is not None and args.workers is not None:
        workers = _workers(args.workers, args.address, config.live.device)
        if isinstance(workers, str):
            return _fail(workers)
    if config.live is not None:
        from experiments.live import check_machine

        check_machine(config, workers)
    out = Path(args.out or Path("runs") / "experiment" / config.name)
    command = f"autoprofiler experiment --config {args.config}" + (
        f" --out {args.out}" if args.out else "")
    with one_writer(out, "autoprofiler experiment"):  # a second one into --out: refused
        # started before the experiment: one that fails or is interrupted hours in has its run,
        # marked failed
        run = wandb_run("experiment", experiment_wandb_config(config),
                        default_group=config.name, name=config.name, folder=out,
                        resuming=goes_on_experiment(config, out)) if args.wandb else None
        with finishing(run):
            result = run_experiment(config, out, wandb_group=(run.group or config.name)
                                    if run is not None else None)
            paths = write(config, result, out, command)
            print((out / "leaderboard.md").read_text())
            print("saved " + ", ".join(str(p) for p in paths))
            live_result, live_paths = None, []
            if config.live is not None:
                from experiments import live

                live_result = live.run_live(config, out, workers, time_budget_s=args.time_budget)
                done, total = live_result["problems"]
                live_paths = live.write(config, live_result, out, command)
                if live_paths:
                    print((out / "live" / "replay_vs_live.md").read_text())
                    print("saved " + ", ".join(str(p) for p in live_paths))
                print(f"live: {done} of {total} problems finished"
                      + (f", {live_result['failed']} failed (live/failures.jsonl)"
                         if live_result["failed"] else "")
                      + ("; the time budget ran out: run the same command again to go on"
                         if live_result["stopped_by_time_budget"] else ""), file=sys.stderr)
            if run is not None:
                log_experiment(run, result, paths, live_result, live_paths)
    return EXIT_OK


# -- the parser -----------------------------------------------------------------------------

WANDB_HELP = ("log to wandb (experiments/tracking.py): in WANDB_MODE if set, else as wandb's "
              "settings say where wandb finds an API key (`wandb login`), else offline; to "
              "the project WANDB_PROJECT (default: autoprofiler-env)")
"""The one help of every command's ``--wandb``."""

TOLERANCE_HELP = ("a KernelBench regime (kernelbench-v0, kernelbench-v0.1: atol = rtol = "
                  "1e-2; kernelbench: fp32 1e-4), a number (atol = rtol) or ATOL,RTOL "
                  "(default: atol = rtol = 1e-2, kernelbench-v0.1's; docs/harness.md)")

LLM_MISSING_HELP = ("an LLM optimizer's dataset: what a section set it did not record gives; "
                    "raise (the default) or largest_recorded_subset (the outcome of the "
                    "largest recorded set within it, the empty set included: record --parts "
                    "llm records a few sets, --section-sets)")


def _version() -> str:
    """This install's version (its metadata: no import of the package, which loads
    Gymnasium)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("autoprofiler-env")
    except PackageNotFoundError:  # a checkout run without an install
        return "(not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autoprofiler",
        description="Learning what to profile when optimizing GPU kernels.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("problems", help="list the problem suite or a KernelBench-format folder")
    p.add_argument("--source", help="a folder or file of KernelBench-format problems, or "
                   "a KernelBench checkout (the folder holding level1/, or the repository's "
                   "root: its levels 1-3) (default: the project's suite)")
    p.add_argument("--split", choices=SPLITS,
                   help="only this split (the suite's; not with --source)")
    p.add_argument("--level", type=int, choices=LEVELS, help="only this level")
    p.add_argument("--features", action="store_true",
                   help="add the static features: FLOPs, the minimal bytes moved, their ratio "
                   "(flop/B) and the operators dispatched in the text; every feature, as "
                   "computed and as the observation holds it, with --json")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                   help="seconds a file may take to import and trace before it is skipped "
                   f"(default: {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--import-timeout", type=float, default=DEFAULT_IMPORT_TIMEOUT_S,
                   help=f"seconds of those that its import may take (default: "
                   f"{DEFAULT_IMPORT_TIMEOUT_S:g}; a slower import is nearly always one waiting "
                   "on the network)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_problems)

    p = sub.add_parser("evaluate", help="check and time a candidate ModelNew against a problem")
    p.add_argument("--problem", required=True, help="a suite URI or name, or a problem file")
    p.add_argument("--candidate", required=True, help="a file defining class ModelNew")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    p.add_argument("--size", choices=("full", "smoke"), default="full",
                   help="the problem's real sizes, or its small CPU smoke-test sizes")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds before a candidate is stopped, and before preparing the "
                   "reference is (default: 300)")
    p.add_argument("--tolerance", help=TOLERANCE_HELP)
    p.add_argument("--static-check", choices=("enforce", "warn", "off"), default="enforce",
                   help="reject candidates whose source patches torch, reads the environment, "
                   "writes files, opens sockets, ... (default: enforce; docs/harness.md)")
    p.add_argument("--correctness-trials", type=int, default=3,
                   help="fresh random input sets the candidate must match (default: 3)")
    p.add_argument("--seed", type=int, default=42,
                   help="seeds the weights (the same for Model and ModelNew) and the input "
                   "sets (default: 42)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("profile", help="profile problems with chosen ncu sections (GPU)")
    p.add_argument("--problem", required=True, action="append",
                   help="a suite URI or name, or a problem file (repeat for several: one "
                   "ncu invocation profiles them all)")
    p.add_argument("--sections", required=True,
                   help="comma-separated section ids, e.g. SpeedOfLight,WarpStateStats")
    p.add_argument("--candidate", metavar="FILE",
                   help="profile this file's ModelNew (your kernel) on the one --problem's "
                   "inputs, in place of its Model")
    p.add_argument("--ncu", help="the ncu executable (default: $NCU, else ncu on the PATH)")
    p.add_argument("--timeout", type=float, default=PROBLEM_TIMEOUT_S,
                   help="seconds a problem may take under replay before it counts as hung "
                   f"(default: {PROBLEM_TIMEOUT_S:g})")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true", help="print the profiles as JSON")
    group.add_argument("--markdown", action="store_true",
                       help="print the rendered profiles (the default)")
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("optimize", help="profile a kernel with a tree, optimize it once, judge "
                       "it (GPU)")
    p.add_argument("file", help="a KernelBench-format file (Model, get_inputs, "
                   "get_init_inputs), or a suite URI or name")
    p.add_argument("--tree", help="a profiling tree file (default: the one the project ships "
                   "for the optimizer, agents/tree/data/<optimizer>.json)")
    p.add_argument("--optimizer",
                   help="reference, reference-v1, llm:<model> (the OpenAI-compatible "
                   "endpoint of $AUTOPROFILER_LLM_BASE_URL) or py:MODULE:ATTR (your own: in a "
                   "module importable from the current directory or PYTHONPATH, an object "
                   "with optimize(problem, profile) returning the ModelNew source or a "
                   "Candidate, or a class or function called with no arguments that returns "
                   "one; give --tree too); default: the environment's "
                   "(autoprofiler_env.optimizers.DEFAULT_OPTIMIZER)")
    p.add_argument("--plan", action="store_true",
                   help="on any machine (no GPU, no ncu): the tree's walk on the file to its "
                        "first section, from its static features and the budget, then every "
                        "path it can take after it on the measured metrics, with its cost")
    p.add_argument("--profile-only", action="store_true",
                   help="print the profile and its cost; do not invoke the optimizer")
    p.add_argument("--candidate", metavar="MINE",
                   help="with --profile-only: profile this file's ModelNew (your kernel) on "
                   "the file's inputs, in place of its Model; the tree walks on the file's "
                   "static features and budget and reads your kernel's metrics")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET,
                   help=f"a fraction of ncu's full set's cost (default: {DEFAULT_BUDGET:g}; "
                   "live, costs are the catalogue's passes: SpeedOfLight is 26%% of the full "
                   "set's)")
    p.add_argument("--budget-unit", choices=BUDGET_UNITS, default=DEFAULT_BUDGET_UNIT,
                   help="what the budget counts: the catalogue's replay passes or sections "
                   f"(default: {DEFAULT_BUDGET_UNIT})")
    p.add_argument("--device", default="cuda", help="the CUDA device (default: cuda)")
    p.add_argument("--timeout", type=float, metavar="S",
                   help="seconds the judge allows the optimizer's candidate (not --candidate's "
                   "file, which is only profiled) before it is stopped, judged incorrect "
                   "(timeout) once (default: 600, the live environment's); not with --plan "
                   "or --profile-only, which judge nothing")
    p.add_argument("--import-timeout", type=float, default=DEFAULT_IMPORT_TIMEOUT_S,
                   help="seconds the file's import may take (in a worker process, for its "
                   f"static features; default: {DEFAULT_IMPORT_TIMEOUT_S:g}, as for `problems`)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_optimize)

    p = sub.add_parser("train", help="train an RL policy (stable-baselines3 / sb3-contrib) "
                       "from a config; the same command on an interrupted run resumes it",
                       description="Train an RL policy from a config into --out. Ctrl-C "
                       "(or SIGTERM) saves the run (status interrupted); the same command "
                       "again resumes it to its total steps (the config, --steps and --seed "
                       "must be the run's, and the dataset too). A run killed outright "
                       "resumes the same way from its last evaluation's checkpoint. A "
                       "finished run is never overwritten; a second command into the same "
                       "--out is refused while the first runs.")
    p.add_argument("--config", default=DEFAULT_CONFIG,
                   help="a YAML config in rl-baselines3-zoo's format, or the name of one in "
                   f"experiments/configs: {DEFAULT_CONFIG} (default), ppo, a2c, dqn, qrdqn, "
                   "recurrent_ppo, trpo")
    p.add_argument("--seed", type=int, default=0, help="the seed (default: 0)")
    p.add_argument("--out", help="the run directory (default: runs/train/<config>-seed<N>); "
                   "one holding an interrupted or killed run resumes it")
    p.add_argument("--steps", type=int,
                   help="environment steps to train for (default: the config's "
                   "n_timesteps); SB3 rounds it up to whole rollouts (n_steps x n_envs "
                   "on-policy); to resume a run, give the same as it was started with")
    p.add_argument("--wandb", action="store_true", help=WANDB_HELP)
    p.add_argument("--num-threads", type=int, default=-1,
                   help="torch's threads for training, as rl-baselines3-zoo's --num-threads "
                   "(default: -1, torch's own: one per core); run.json records them")
    p.add_argument("--wandb-group", help="the wandb group (default: train-<config>)")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("tune", help="tune a config's hyperparameters with Optuna (as "
                       "rl-baselines3-zoo's -optimize; MaskablePPO too); resumable",
                       description="Tune a training config's hyperparameters with Optuna, "
                       "as rl-baselines3-zoo's -optimize does: each trial samples the zoo's "
                       "ranges for the algorithm, trains with autoprofiler train's training "
                       "into --out/trials/<number> and scores its best evaluation (the "
                       "config's eval split and budgets, masks used). --out gets the study "
                       "(study.db), trials.csv and best.yml (the best trial's config, which "
                       "autoprofiler train --config trains from). The same command again "
                       "continues the study until --trials trials are finished; one with "
                       "other settings into the same --out is refused. Needs Optuna: "
                       "pip install -e '.[tune]'.")
    p.add_argument("--config", default=DEFAULT_CONFIG,
                   help="a YAML config in rl-baselines3-zoo's format, or the name of one in "
                   f"experiments/configs: {DEFAULT_CONFIG} (default), ppo, a2c, dqn, qrdqn, "
                   "recurrent_ppo, trpo")
    p.add_argument("--trials", type=int, default=20,
                   help="finished trials (complete or pruned) the study goes on to, in "
                   "all: the same command again runs none once they are (the zoo's "
                   "--max-total-trials, not its --n-trials, which runs N more; default: 20)")
    p.add_argument("--steps", type=int,
                   help="environment steps each trial trains (the zoo's --n-timesteps; "
                   "default: the config's n_timesteps)")
    p.add_argument("--sampler", choices=("tpe", "random"), default="tpe",
                   help="Optuna's sampler (default: tpe, multivariate, random for the first "
                   "--n-startup-trials)")
    p.add_argument("--pruner", choices=("median", "none"), default="median",
                   help="Optuna's pruner (default: median, which waits for "
                   "--n-startup-trials complete trials and a third of the evaluations)")
    p.add_argument("--n-startup-trials", type=int, default=10,
                   help="trials before the sampler and the pruner go to work (default: 10, "
                   "the zoo's)")
    p.add_argument("--n-evaluations", type=int,
                   help="evaluations per trial, every steps/N steps (default: the config's "
                   "eval.frequency)")
    p.add_argument("--seed", type=int, default=0,
                   help="the seed of every trial's training and of the sampler (default: 0)")
    p.add_argument("--out", help="the study's folder (default: runs/tune/<config>); one "
                   "holding a study continues it")
    p.add_argument("--wandb", action="store_true", help=WANDB_HELP + " The study is one "
                   "run: a row per finished trial; a continued study goes on in it.")
    p.add_argument("--wandb-group", help="the wandb group (default: tune-<config>)")
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("benchmark", help="every agent on the test split, at several budgets")
    p.add_argument("--dataset", help="a shipped dataset's name (suite, kernelbench) or a "
                   "dataset file (default: suite)")
    p.add_argument("--budgets", default="0.1,0.25,0.5,1.0",
                   help="fractions of the full set's cost (default: 0.1,0.25,0.5,1.0)")
    p.add_argument("--seeds", default="3", metavar="N",
                   help="how many seeds each stochastic agent runs: the seeds 0..N-1 "
                   "(default: 3, the seeds 0, 1, 2)")
    p.add_argument("--split", default="test", choices=SPLITS,
                   help="the split the agents are scored on (default: test)")
    p.add_argument("--optimizer", help="the optimizer the replay reruns: reference, "
                   "reference-v1 or llm:<model>; default: the dataset's own "
                   "(reference on the shipped ones)")
    p.add_argument("--tolerance", help="the environment's: " + TOLERANCE_HELP)
    p.add_argument("--llm-missing", help=LLM_MISSING_HELP)
    p.add_argument("--policy", action="append", default=[], metavar="SPEC",
                   help="add a policy beside the baselines (repeatable): sb3:FILE or "
                   "sb3:ALGO:FILE (a saved stable-baselines3 / sb3-contrib model, "
                   "RecurrentPPO and TRPO included), sb3:DIR (a run of `autoprofiler "
                   "train` or rl-baselines3-zoo: its best model), tree:FILE, "
                   "py:MODULE:ATTR (your own: a class or function of a module importable "
                   "from here, called with the environment, returning an object with "
                   "SB3's predict), or a baseline's name")
    p.add_argument("--out", default="runs/benchmark",
                   help="where the CSVs and plot go (default: runs/benchmark, overwritten)")
    p.add_argument("--wandb", action="store_true", help=WANDB_HELP)
    p.set_defaults(func=cmd_benchmark)

    p = sub.add_parser("learn-tree", help="learn an AutoProfiler tree on the train split "
                       "(resumable)")
    p.add_argument("--budget", default=f"{LearnConfig.budget:g}",
                   help="a fraction of the full set's cost, or several comma-separated (one "
                   "tree per budget, joined under budget branches); default: "
                   f"{LearnConfig.budget:g}")
    p.add_argument("--proposer", choices=("search", "llm"), default="search",
                   help="search: seeded random edits (no model); llm: an OpenAI-compatible "
                   "endpoint (--llm-base-url / $AUTOPROFILER_LLM_BASE_URL)")
    p.add_argument("--rounds", type=int, default=LearnConfig.rounds)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/tree", help="the run's folder (default: runs/tree); "
                   "a run started again with the same settings resumes there")
    p.add_argument("--dataset", help="a shipped dataset's name (suite, kernelbench) or a "
                   "dataset file (default: suite)")
    p.add_argument("--optimizer", help="the optimizer whose outcomes score the tree "
                   "(default: the environment's)")
    p.add_argument("--tolerance", help="the environment's: " + TOLERANCE_HELP)
    p.add_argument("--llm-missing", default="raise", help=LLM_MISSING_HELP)
    p.add_argument("--start", default="stop",
                   help="the starting tree: stop (no profile), roofline, or a tree file")
    p.add_argument("--proposals", type=int, default=LearnConfig.proposals,
                   help="edits asked per round")
    p.add_argument("--margin", type=float, default=LearnConfig.margin,
                   help="the mean log score an edit must add to be kept (default: "
                   f"{LearnConfig.margin:g}, {LearnConfig.margin * 100:g}%% of geometric mean)")
    p.add_argument("--patience", type=int, default=LearnConfig.patience,
                   help="stop after this many rounds without a better validation tree (0: "
                   "run every round)")
    p.add_argument("--cost-penalty", type=float, default=0.0,
                   help="the environment's cost term: each section costs this x its share "
                   "of the budget, in log score")
    p.add_argument("--llm-base-url", help="the llm proposer's endpoint")
    p.add_argument("--llm-model", help="the model's name on that server")
    p.add_argument("--llm-timeout", type=float, help="seconds per proposal request")
    p.add_argument("--llm-temperature", type=float,
                   help="sampling temperature (default: 0, the request seeded per round)")
    p.add_argument("--llm-structured", choices=("json_schema", "json_object", "none"),
                   default="json_schema",
                   help="the response_format asked for: json_schema (OpenAI, vLLM, SGLang, "
                   "llama-server), json_object (llama-cpp-python's server) or none")
    p.add_argument("--llm-fold-system", action="store_true",
                   help="put the system prompt in the user message (chat formats that drop "
                   "system messages, e.g. llama-cpp-python's gemma)")
    p.add_argument("--llm-schema-depth", type=int,
                   help="unroll the reply schema's nodes to this depth (small models nest "
                   "without end under a recursive one)")
    p.add_argument("--wandb", action="store_true", help=WANDB_HELP)
    p.set_defaults(func=cmd_learn_tree)

    p = sub.add_parser("experiment", help="the learned agents against the baselines across "
                       "seeds and budgets, with rliable's statistics (resumable)")
    p.add_argument("--config", default="compare",
                   help="an experiment config: a file, or a shipped one's name (default: "
                   "compare, experiments/configs/compare.yaml)")
    p.add_argument("--out", help="the experiment's folder (default: runs/experiment/<name>); "
                   "a run whose file is there is not run again")
    p.add_argument("--wandb", action="store_true", help=WANDB_HELP)
    w = p.add_argument_group("a live evaluation (a config with 'live:', experiments/live.py)")
    w.add_argument("--workers", metavar="N|ray",
                   help="one problem's episodes at a time per GPU: N local GPUs, or 'ray' (one "
                   "GPU a task); without it, one problem at a time")
    w.add_argument("--address", metavar="ADDR",
                   help="the Ray cluster to join (ray.init's address; default: a local one)")
    w.add_argument("--time-budget", type=float, metavar="S",
                   help="seconds after which no problem's episodes start (run again to go on)")
    p.set_defaults(func=cmd_experiment)

    p = sub.add_parser("record", help="record profiles and outcomes on a GPU (resumable)")
    p.add_argument("--out", required=True, help="the recording folder (created or resumed)")
    p.add_argument("--parts", default="reference,full,candidates",
                   help="what to record, of reference,full,candidates,sets,profiles,llm "
                   "(default: reference,full,candidates; sets and profiles measure the basic "
                   "and detailed sets and each section alone, for the cost model; llm needs "
                   "the options below)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--chunk", type=int, default=12, help="problems per ncu invocation, >= 1 "
                   "(with --source: per chunk, each recorded whole before the next)")
    p.add_argument("--time-budget", type=float,
                   help="seconds (> 0) after which ncu is stopped (keeping the problems it "
                   "finished) and no new unit of work starts (for limited commands; leave it "
                   "out for no budget)")
    p.add_argument("--warm-workers", type=int, default=6,
                   help="processes compiling candidates in parallel before timing")
    p.add_argument("--candidate-timeout", type=float, metavar="S",
                   help="the judge's limit for one candidate (compile, correctness, timing); "
                   "one that outlasts it is recorded as failed, 'timeout' (default: 600, or "
                   "KernelBench's 180 with --source)")
    p.add_argument("--split", choices=SPLITS)
    p.add_argument("--level", type=int, choices=LEVELS)
    p.add_argument("--plan", metavar="FILE",
                   help="a recording plan: the candidates part records its candidates (composed "
                        "names), in its order (python -m autoprofiler_env.dataset.record.plan)")
    p.add_argument("--reuse", action="append", default=[], metavar="FILE",
                   help="candidate rows to copy where the judge and the source are the same "
                        "(repeatable)")
    w = p.add_argument_group("several GPUs (docs/dataset.md, \"Several GPUs\")")
    w.add_argument("--workers", metavar="N|ray",
                   help="record reference, full, candidates and llm one unit (problem, part) "
                   "at a time per GPU: N local GPUs, or 'ray' (one GPU a task; needs Ray: "
                   "pip install 'ray>=2.9'); with --source, each part of a chunk so; without "
                   "it, one GPU in this process")
    w.add_argument("--address", metavar="ADDR",
                   help="the Ray cluster to join (ray.init's address; default: a local one)")
    k = p.add_argument_group("a KernelBench checkout (docs/kernelbench.md)")
    k.add_argument("--source", metavar="DIR",
                   help="record a KernelBench checkout's levels (the folder holding level1/, "
                        "or the repository's root), chunk by chunk: each chunk's reference, "
                        "full set, plan and candidates before the next")
    k.add_argument("--prepare", action="store_true",
                   help="write the recording's manifest (strata, seeded splits, order) on a "
                        "CPU and stop; needed once before recording")
    k.add_argument("--replan", action="store_true",
                   help="plan the recorded problems again from their evidence on a CPU (after "
                        "the reference optimizer changed): the candidates their plans now "
                        "reach are judged by the next recording call; then stop")
    k.add_argument("--commit", metavar="SHA",
                   help="the checkout's KernelBench commit, where it is not a git checkout "
                        "(a copy on the device machine)")
    k.add_argument("--levels", default="1,2,3", help="the levels (default: 1,2,3)")
    k.add_argument("--seed", type=int, default=0, help="the splits' and order's seed "
                   "(default: 0)")
    k.add_argument("--max-ops", type=int, default=None, metavar="N",
                   help="operators of each forward that ncu profiles (default: the "
                        "driver's 64)")
    g = p.add_argument_group("the llm part (--parts llm): an LLM optimizer's outcomes")
    g.add_argument("--llm-base-url", help="an OpenAI-compatible API's base URL (default: "
                   "$AUTOPROFILER_LLM_BASE_URL)")
    g.add_argument("--llm-model", help="the model's name on that server (default: "
                   "$AUTOPROFILER_LLM_MODEL)")
    g.add_argument("--dataset", help="the dataset whose profiles the model is shown "
                   "(default: the shipped one)")
    g.add_argument("--section-sets", default="none;SpeedOfLight;basic;full",
                   help="';'-separated: none, basic, detailed, full, or sections joined by '+' "
                        "(default: none;SpeedOfLight;basic;full)")
    g.add_argument("--repeats", type=int, default=3, help="replies per (problem, section set)")
    g.add_argument("--temperature", type=float, default=0.7,
                   help="sampling temperature of the repeats (default: 0.7)")
    g.add_argument("--llm-concurrency", type=int, default=8, metavar="K",
                   help="with --workers: requests in flight at once, while the GPUs judge the "
                   "replies in (default: 8)")
    p.add_argument("problems", nargs="*", help="the suite's URIs, problem files or folders of "
                   "them (default: the suite)")
    p.set_defaults(func=cmd_record)

    p = sub.add_parser("dataset", help="build a dataset from a recording, or describe one")
    dsub = p.add_subparsers(dest="action", required=True)
    q = dsub.add_parser("build", help="a recording folder -> a dataset file")
    q.add_argument("--recording", required=True)
    q.add_argument("--out", required=True)
    q.add_argument("--source", metavar="DIR",
                   help="where a recording's problem files are: the KernelBench checkout of a "
                        "KernelBench recording, or the folder (or file) of your own that "
                        "`record` was given; each file is checked against the recorded sha256, "
                        "and your files are dealt seeded splits")
    q.add_argument("--complete", action="store_true",
                   help="keep only the problems with every candidate's outcome that the "
                        "replay needs: reference-v1's applicable transformations, or every "
                        "candidate of the plan of a planned recording (a KernelBench "
                        "checkout's; --candidates NAME=FILE with a plan.json beside it)")
    q.add_argument("--candidates", action="append", default=[], metavar="NAME=FILE",
                   help="another optimizer's candidates.jsonl, e.g. "
                        "reference=docs/data/recording_h200_v2/candidates.jsonl (the "
                        "recording's own are reference-v1's); repeatable")
    q.add_argument("--tolerances", metavar="FILE",
                   help="rows of the same candidates judged again by judge 2 "
                   "(experiments/studies/rejudge.py): their tolerance_needed, where the "
                   "verdicts agree")
    q.add_argument("--runs", action="append", default=[], metavar="DIR",
                   help="more saved ncu runs, e.g. a profiler study's sections and sets alone "
                        "(their measured costs replace modelled ones); repeatable")
    q = dsub.add_parser("upgrade", help="an older schema's dataset file -> this version's (the "
                        "same content, read faster)")
    q.add_argument("file", help="the dataset file (or a shipped one's name)")
    q.add_argument("--out", required=True, help="the file to write (the same file: replaced)")
    q = dsub.add_parser("info", help="metadata, counts and checksum")
    q.add_argument("file", nargs="?", help="a dataset file or a shipped one's name (default: "
                   "suite)")
    q.add_argument("--dataset", help="a shipped dataset's name (suite, kernelbench) or a file")
    q.add_argument("--problems", action="store_true",
                   help="list every problem (level, split, op, KernelBench file and sha256, "
                        "recording seconds where the file holds them: KernelBench's)")
    p.set_defaults(func=cmd_dataset)
    return parser


def _formatting_warnings(otherwise):
    """``warnings.formatwarning`` for the command: the package's own warnings as a line like
    its errors' (the line of code that raised one means nothing to the command's user), any
    other as ``otherwise`` formats it. Each of the package's warnings is said once a command:
    an experiment makes its environments again for each training and evaluation, and
    Python's own once-a-place registry is reset by every ``catch_warnings`` in between (a
    KernelBench experiment said its ill-posed problems six times). (Processes a command
    starts format them as Python does; a SubprocVecEnv's do not repeat what making the
    environment warned of.)"""
    said: set[str] = set()

    def formatted(message, category, filename, lineno, line=None) -> str:
        if issubclass(category, AutoProfilerWarning):
            text = str(message)
            if text in said:
                return ""  # written as nothing
            said.add(text)
            return f"autoprofiler: warning: {text}\n"
        return otherwise(message, category, filename, lineno, line)
    return formatted


_AFTER_INTERRUPT = {
    command: ": run the same command again to resume it (what was done is kept)"
    for command in ("train", "experiment", "record")} | {
    "tune": ": run the same command again to continue the study (its finished trials are "
            "kept; the one stopped is not counted, a new trial takes its place)",
    "dataset": ": nothing was written (a dataset file is written whole, at its end)"}
"""What a command interrupted (Ctrl-C, a ``KeyboardInterrupt`` that nothing else reported)
leaves and how to go on; learn-tree says it in its own error."""


def _shipped_seed_note(shipped: list[str], dataset: str | None, optimizer: str) -> str:
    """What the benchmark says under its tables of the shipped learned agents' rows: one
    seed each, learned on the suite (on another dataset, how they transfer), and which
    experiment has five seeds of each with intervals."""
    from autoprofiler_env.dataset.names import resolve_dataset

    each = "s, one trained seed each" if len(shipped) > 1 else ", one trained seed"
    said = f"{' and '.join(shipped)}: the shipped agent{each}, without intervals"
    tested = ("with bootstrap intervals and paired tests against the fixed configuration "
              "chosen on train")

    def same(a, b) -> bool:  # a shipped file named by its path is that dataset
        try:
            return resolve_dataset(a).resolve() == resolve_dataset(b).resolve()
        except AutoProfilerError:  # a shipped dataset this install does not hold yet
            return False

    if same(dataset, None):
        config = "compare_reference_v1" if optimizer == "reference-v1" else (
            "compare (docs/experiment/leaderboard.md)")
        return f"{said}; five seeds of each, {tested}: autoprofiler experiment --config {config}"
    where = ("--config compare_kernelbench (docs/experiment/kernelbench/leaderboard.md)"
             if same(dataset, "kernelbench") else
             "with `env: {dataset: ...}` in a config of your own (docs/benchmark.md)")
    return (f"{said}, learned on the suite's train split (here: how they transfer); agents "
            f"learned on this dataset's train split, five seeds each, {tested}: autoprofiler "
            f"experiment {where}")


def main(argv: list[str] | None = None) -> int:
    global _JSON_ERRORS
    args = build_parser().parse_args(argv)
    _JSON_ERRORS = bool(getattr(args, "json", False))
    shown = warnings.formatwarning
    warnings.formatwarning = _formatting_warnings(shown)
    try:
        return args.func(args)
    except EmptySplitError as e:  # said in the command's terms, not gym.make's
        return _fail(f"the dataset has no problem in split {e.split!r} (its splits: "
                     f"{', '.join(e.held) or 'none'}): give --split one of those where the "
                     "command takes it; learn-tree, train and experiment learn on train and "
                     "choose on val (a dataset of your own files is dealt its splits by its "
                     "build, docs/dataset.md: record more problems)", type(e).__name__)
    except AutoProfilerError as e:
        return _fail(str(e).splitlines()[0], type(e).__name__)
    except (FileExistsError, NotADirectoryError, IsADirectoryError, PermissionError) as e:
        # an --out that is a file, a folder that cannot be written: the user's to change
        return _fail(f"cannot write {e.filename}: {e.strerror}")
    except KeyboardInterrupt:
        return _fail(f"interrupted{_AFTER_INTERRUPT.get(args.command, '')}")
    except BrokenPipeError:  # `autoprofiler dataset info | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    finally:
        warnings.formatwarning = shown


if __name__ == "__main__":
    sys.exit(main())
