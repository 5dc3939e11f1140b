"""``autoprofiler optimize``: profile one kernel with a profiling tree, optimize it once, judge it.

What a kernel-agent builder runs on a GPU: the tree walks the user's KernelBench-format file
(each collected section is one ncu run of the program with that section alone), the profile is
printed as the optimizer sees it (the markdown an LLM's prompt holds) with what it cost, then
the optimizer is invoked once with exactly that profile and the harness judges and times the
candidate.

It goes through the project's machinery, not around it: the live environment
(``AutoProfilerLive-v0`` on the one file: its budget, its masks, its termination), the
:class:`~agents.tree.policy.TreePolicy`, the backend's ``profile`` (the merged profile the
optimizer was given; the live backend keeps each section's run, so reading it runs nothing
again) and the episode's final ``info`` (candidate, verdict, times).

The episode loop is :func:`~autoprofiler_env.evaluation.rollout`'s (reset on the problem,
``predict`` with the episode's action mask, step until the environment ends the episode) with
two differences: each section is collected through the backend's ``view`` just before its step,
so that its ncu wall time is measured apart from the optimizer's, and the final ``info`` is
kept (a rollout keeps only the :class:`~autoprofiler_env.envs.profiling_env.EpisodeRecord`,
which has no eager or candidate times).

``profile_only`` stops before the optimizer: the loop ends when the tree says STOP, or, for the
section whose step would end the episode (the environment's documented termination: no
uncollected section fits the remaining budget, which also calls the optimizer), after
collecting it through the backend without stepping. The sections, their order and the profile
are the same as a full run's (a test checks that on the replay); the tree path shown then ends
at that section's Collect (the nodes after it, passed over for the spent budget, are not
walked).

>>> result = optimize("KernelBench/level1/19_ReLU.py", "tree.json", optimizer="reference")
>>> print(format_text(result))
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from autoprofiler_env.errors import AutoProfilerError, MachineError
from autoprofiler_env.numeric import is_finite_number
from autoprofiler_env.optimizers import DEFAULT_OPTIMIZER

if TYPE_CHECKING:
    from agents.tree.nodes import Node

BUDGET_UNITS = ("passes", "sections")
"""The budget units the live backend knows before profiling (a section's seconds it cannot)."""
DEFAULT_BUDGET_UNIT = BUDGET_UNITS[0]
"""Passes (the catalogue's replay passes)."""
DEFAULT_BUDGET = 0.3
"""30% of ncu's full set's passes. Live, a section costs the catalogue's passes (the seconds
are not known before profiling it): SpeedOfLight's 10 passes are 26% of the full set's, while
the replay's seconds, which the shipped trees were learned on, put it at a median 21%; at 25%
of the passes the trees' first sections would not fit."""


@dataclass(frozen=True)
class SectionCost:
    """What collecting one section cost.

    Attributes:
        section: the ncu section.
        passes: ncu's replay passes of the run (the largest over its kernels).
        replay_s: ncu's replay seconds of the profiled call (start-up excluded).
        wall_s: wall seconds of collecting it (the whole ncu run of the program, start-up
            included; about 0 on the replay, which answers from a recording).
        charged: what the budget was charged, in the budget's unit.
    """

    section: str
    passes: int
    replay_s: float
    wall_s: float
    charged: float


@dataclass(frozen=True)
class Verdict:
    """The harness's verdict on the optimizer's candidate.

    Attributes:
        candidate: what produced it (a transformation or a composition, ``llm:<model>``).
        reason: the optimizer's reason for it.
        correct: whether its outputs matched the reference's within the tolerance.
        speedup: eager time / candidate time (None when it did not run to the end).
        eager_ms, candidate_ms: the median times behind the speedup.
        error_kind: why it was judged incorrect (None when correct).
        error: the same in words: the harness's reason (which output differed and by how
            much, the SyntaxError's line, ...), or the optimizer's failure (None when
            correct).
    """

    candidate: str
    reason: str
    correct: bool
    speedup: float | None
    eager_ms: float | None
    candidate_ms: float | None
    error_kind: str | None
    error: str | None = None


@dataclass(frozen=True)
class OptimizeResult:
    """One run of the command (schema :data:`SCHEMA`): the profile the tree collected, its
    cost, and the verdict (None with ``profile_only``)."""

    problem: str
    tree: str
    optimizer: str
    budget: float
    budget_unit: str
    budget_total: float
    path: tuple[int, ...]
    sections: tuple[str, ...]
    costs: tuple[SectionCost, ...]
    profile_markdown: str
    verdict: Verdict | None
    explanation: tuple[str, ...] = ()
    """Why the tree took its path: a line per node (:meth:`agents.tree.TreePolicy.explain`)."""
    profile: dict | None = None
    """The same profile as data (:meth:`Profile.to_dict`: each kernel's metrics and the
    findings; ``Profile.from_dict`` reads it back); None where nothing was collected."""
    candidate_file: str | None = None
    """The file whose ``ModelNew`` was profiled in place of the problem's ``Model``
    (``--candidate``, made absolute); None: the problem's own. (``verdict.candidate`` is
    the optimizer's candidate, named by what made it.)"""

    @property
    def spent(self) -> float:
        """What the profile cost, in the budget's unit."""
        return sum(c.charged for c in self.costs)

    @property
    def passes(self) -> int:
        return sum(c.passes for c in self.costs)

    @property
    def replay_s(self) -> float:
        return sum(c.replay_s for c in self.costs)

    @property
    def wall_s(self) -> float:
        return sum(c.wall_s for c in self.costs)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["schema"] = SCHEMA
        d["total"] = {"charged": self.spent, "passes": self.passes, "replay_s": self.replay_s,
                      "wall_s": self.wall_s}
        return d


SCHEMA = "autoprofiler-optimize/1"


@dataclass(frozen=True)
class PlannedPath:
    """One way the tree's walk can go on a file (:func:`plan`), to a stop.

    Attributes:
        nodes: the numbers of the nodes it visits, from the root (the rendering's numbers).
        sections: the sections it collects, in order.
        costs: what each costs, in the budget's unit (live: the catalogue's passes).
        measured: each branch on the way that reads a collected section's metric or findings,
            (its number, whether its condition holds): the value is measured by ncu.
        explanation: why it goes its way after the first section: a line per branch and per
            Collect passed over (:meth:`agents.tree.TreePolicy.explain_route`).
    """

    nodes: tuple[int, ...]
    sections: tuple[str, ...]
    costs: tuple[float, ...]
    measured: tuple[tuple[int, bool], ...]
    explanation: tuple[str, ...]

    @property
    def cost(self) -> float:
        """What its sections cost together, in the budget's unit (0.0 for none)."""
        return sum(self.costs, 0.0)


@dataclass(frozen=True)
class Plan:
    """What a tree would collect on a file and what it would cost, known before profiling it
    (:func:`plan`; schema :data:`PLAN_SCHEMA`)."""

    problem: str
    """Its URI (``problem://autoprofiler/v1/...``, ``problem://local/...``), not the path
    given."""
    tree: str
    optimizer: str
    budget: float
    budget_unit: str
    budget_total: float
    explanation: tuple[str, ...]
    """The walk up to its first section (or its stop): :meth:`agents.tree.TreePolicy.explain`."""
    first: int | None
    """The number of the first section's Collect (None: the walk stops before any)."""
    below: Node | None
    """The subtree below it (its ``next``), numbered from ``first + 1``."""
    paths: tuple[PlannedPath, ...]
    """Every way the walk can go from the root to a stop on this file at this budget."""

    def to_dict(self) -> dict:
        d = asdict(replace(self, below=None))
        d["schema"] = PLAN_SCHEMA
        d["below"] = None if self.below is None else self.below.to_dict()
        for path, out in zip(self.paths, d["paths"]):
            out["cost"] = path.cost
            out["measured"] = [{"node": n, "holds": holds} for n, holds in path.measured]
        return d


PLAN_SCHEMA = "autoprofiler-plan/1"


# -- what it needs ----------------------------------------------------------------------------

def shipped_tree(optimizer: str) -> Path:
    """The tree the project ships for ``optimizer`` (:func:`agents.tree.shipped_tree`).

    Raises:
        TreeFormatError: no tree ships for it (give one with ``--tree``).
    """
    from agents.tree import DATA, TreeFormatError
    from agents.tree import shipped_tree as shipped

    path = shipped(optimizer)
    if path is None:
        raise TreeFormatError(f"no tree ships for the optimizer {optimizer!r} (in "
                              f"{_shown(DATA)}): give one with --tree FILE (e.g. "
                              f"{_shown(DATA / 'reference.json')}, learned for the reference "
                              "optimizer)")
    return path


def check_machine(device: str = "cuda", command: str = "optimize",
                  ncu: str | None = None) -> str:
    """The ncu executable, once this machine is seen to have what the live path needs: a CUDA
    device torch can use and Nsight Compute (``ncu``, else ``$NCU``, else ``ncu`` on the PATH);
    the error names ``command``.

    Raises:
        MachineError: ``device`` is not a CUDA device, torch sees none, or there is no ncu.
    """
    need = f"{command} needs a CUDA GPU and Nsight Compute (ncu)"
    if not re.fullmatch(r"cuda(:\d+)?", device):
        raise MachineError(f"{need}: --device must be cuda or cuda:N, got {device!r}")
    from autoprofiler_env.envs.backends.live import require_cuda  # the live env's own check

    require_cuda(device, need, hint=(
        "run it on a GPU machine; on this one, `autoprofiler optimize FILE --plan` shows what "
        "the tree would collect on the file and what it would cost")
        if command == "optimize" else "")
    from autoprofiler_env.errors import NcuNotFoundError
    from autoprofiler_env.profiler.runner import find_ncu

    try:
        return find_ncu(ncu)
    except NcuNotFoundError as e:
        raise MachineError(f"{need}; {e}") from None


def live_env(problem: str, optimizer: str = DEFAULT_OPTIMIZER, budget: float = DEFAULT_BUDGET,
             budget_unit: str = DEFAULT_BUDGET_UNIT, device: str = "cuda",
             import_timeout_s: float | None = None, timeout_s: float | None = None,
             candidate_file: str | None = None):
    """``AutoProfilerLive-v0`` on the one problem (a file path, a suite URI or name);
    ``import_timeout_s``: the seconds a file outside the suite may take to import (None: the
    environment's default, 5); ``timeout_s``: the seconds the judge allows the candidate
    (None: the environment's default, 600); ``candidate_file``: a file whose ``ModelNew``
    ncu profiles in place of the problem's ``Model``.

    Raises:
        ProblemError: the problem file is missing or broken.
        OptimizationError: an LLM optimizer without an endpoint
            (``AUTOPROFILER_LLM_BASE_URL``).
    """
    import gymnasium as gym

    import autoprofiler_env  # noqa: F401  (registers the environments)

    return gym.make("AutoProfilerLive-v0", problems=[str(problem)], optimizer=optimizer,
                    budget=budget, budget_unit=budget_unit, device=device,
                    import_timeout_s=import_timeout_s, timeout_s=timeout_s,
                    candidate_file=candidate_file)


# -- the command ------------------------------------------------------------------------------

def optimize(problem: str | Path, tree: str | Path | None = None, *,
             optimizer: str | None = None, budget: float = DEFAULT_BUDGET,
             budget_unit: str = DEFAULT_BUDGET_UNIT, device: str = "cuda",
             profile_only: bool = False,
             import_timeout_s: float | None = None, timeout_s: float | None = None,
             candidate_file: str | Path | None = None, env=None) -> OptimizeResult:
    """Walks ``tree`` on ``problem``, then (unless ``profile_only``) optimizes it once with
    exactly the profile collected and judges the candidate.

    Args:
        problem: a KernelBench-format file (or a suite URI or name); with ``env``, one of that
            environment's problem URIs.
        tree: a tree file (None: :func:`shipped_tree` of ``optimizer``).
        optimizer: ``reference``, ``reference-v1``, ``llm:<model>`` (the live backend asks
            the OpenAI-compatible endpoint of ``$AUTOPROFILER_LLM_BASE_URL``) or
            ``py:MODULE:ATTR``, your own (:mod:`autoprofiler_env.optimizers.custom`; no tree
            ships for it: give ``tree``); None: the environment's default
            (:data:`~autoprofiler_env.optimizers.DEFAULT_OPTIMIZER`).
        budget: a fraction of ncu's full set's cost in ``budget_unit``.
        budget_unit: ``passes`` (the catalogue's replay passes) or ``sections``.
        device: the CUDA device.
        profile_only: stop before the optimizer (the verdict is None).
        import_timeout_s: the seconds the file's import may take (in a worker process, for
            its static features, before anything else runs it); a slower or hanging import is
            a ProblemTimeoutError. None: the live environment's default, 5 s.
        timeout_s: the seconds the judge allows the candidate (its import, build,
            correctness runs and timing); one that outlasts it is incorrect, ``timeout``,
            judged once. None: the live environment's default, 600 s; anything but a number
            of seconds > 0 is a ValueError.
        candidate_file: a file whose ``ModelNew`` (your kernel) ncu profiles in place of the
            problem's ``Model``, on the problem's inputs, with ``profile_only``: the tree
            walks on the problem's static features and budget and reads your kernel's
            metrics (AutoProfilerLive-v0's ``candidate_file``; with ``env``, the one it was
            made with, and this argument is refused).
        env: an environment to run in instead of the live one (built with its own problems,
            optimizer and budget, which then win over the arguments): a replay environment
            serves tests and dry runs on a CPU. Without it, the machine is checked first.

    Raises:
        ValueError: a budget that is not a number > 0, an unknown budget unit or optimizer,
            an import timeout that is not a number of seconds > 0, a candidate without
            ``profile_only`` (OptimizerSpecError: a ``py:`` optimizer that cannot be loaded,
            checked before the tree and the machine).
        TreeFormatError: the tree file is missing, unreadable or not a valid tree.
        ProblemError: the problem file is missing or broken (ProblemTimeoutError: its
            import outlasts ``import_timeout_s``), or the candidate file is missing, not
            Python or defines no ``ModelNew``.
        MachineError: no CUDA device or no ncu here.
        ProfilingError: ncu could not profile the program (no permission to read the
            counters, the program crashed under replay, ...).
    """
    from agents.tree.policy import TreePolicy

    from autoprofiler_env.envs.backends.live import candidate_path

    if candidate_file is not None:
        if env is not None:
            raise ValueError("candidate_file: an environment given profiles the candidate it "
                             "was made with (AutoProfilerLive-v0's candidate_file): leave it "
                             "out")
        candidate_file = candidate_path(candidate_file)  # absolute, as the backend keeps it
    elif env is not None:
        candidate_file = getattr(env.unwrapped.backend, "candidate_file", None)
    if candidate_file is not None and not profile_only:
        raise ValueError("a candidate's profile is collected alone (--profile-only, "
                         "profile_only=True): the optimizer rewrites the problem's Model, and "
                         "would be shown another program's profile")
    optimizer, tree_path, loaded = _checked(tree, optimizer, budget, budget_unit,
                                            import_timeout_s, timeout_s, profile_only)
    if env is None:
        from autoprofiler_env.problems import load_problem

        loaded_problem = load_problem(problem)
        if candidate_file is not None:  # checked before the machine: a typo costs no GPU
            loaded_problem.with_candidate(candidate_file)
        check_machine(device)
        env = live_env(str(problem), optimizer, budget, budget_unit, device,
                       import_timeout_s=import_timeout_s, timeout_s=timeout_s,
                       candidate_file=None if candidate_file is None else str(candidate_file))
        uri = env.unwrapped.problems[0]
    else:
        uri = str(problem)
    policy = TreePolicy(loaded, env)
    result = _episode(env, policy, uri, str(tree_path), optimizer, profile_only)
    if candidate_file is not None:
        result = replace(result, candidate_file=str(candidate_file))
    return result


def plan(problem: str | Path, tree: str | Path | None = None, *, optimizer: str | None = None,
         budget: float = DEFAULT_BUDGET, budget_unit: str = DEFAULT_BUDGET_UNIT,
         import_timeout_s: float | None = None) -> Plan:
    """What ``tree`` would collect on ``problem`` and what it would cost, on any machine (no
    GPU, no ncu: ``optimize --plan``): its walk up to its first section, from the problem's
    static features and the budget (:meth:`agents.tree.TreePolicy.explain`, numbered as the
    tree's rendering numbers the nodes), the subtree below that section, and every path the
    walk can take through it (:meth:`agents.tree.TreePolicy.routes`): a branch on a static
    feature or the budget, or a section whose cost does not fit what is left, is decided here;
    a branch on a collected section's metric or findings goes either way, on what ncu
    measures. The arguments and errors are :func:`optimize`'s (but for the machine's)."""
    from agents.tree.nodes import Collect
    from agents.tree.policy import TreePolicy
    from autoprofiler_env.problems import load_problem

    optimizer, tree_path, loaded = _checked(tree, optimizer, budget, budget_unit,
                                            import_timeout_s)
    load_problem(problem)
    env = live_env(str(problem), optimizer, budget, budget_unit, "cpu",
                   import_timeout_s=import_timeout_s)
    try:
        obs, _ = env.reset()
        base = env.unwrapped
        policy = TreePolicy(loaded, env)
        costs, total = base.section_costs, float(base.episode_budget)
        walk = policy.path(obs)
        nodes = loaded.nodes()
        first = walk[-1] if isinstance(nodes[walk[-1]], Collect) else None
        paths = tuple(PlannedPath(
            route.nodes, tuple(base.sections[a] for a in route.actions),
            tuple(float(costs[a]) for a in route.actions), route.measured,
            tuple(policy.explain_route(obs, route, costs, total, base.budget_unit,
                                       start=len(walk))))
            for route in policy.routes(obs, costs, total))
        return Plan(base.problems[0], str(tree_path), optimizer, float(base.budget),
                    base.budget_unit, total, tuple(policy.explain(obs)), first,
                    nodes[first].next if first is not None else None, paths)
    finally:
        env.close()


def _checked(tree, optimizer, budget, budget_unit, import_timeout_s, timeout_s=None,
             profile_only=False):
    """:func:`optimize`'s cheap checks of its arguments, before any GPU or ncu run (a typo
    costs neither): the optimizer (its default given), the tree's path and the tree."""
    from agents.tree.nodes import load
    from autoprofiler_env.envs.backends.base import llm_model
    from autoprofiler_env.optimizers.custom import checked_spec, is_custom

    if not is_finite_number(budget) or budget <= 0:
        raise ValueError(f"the budget must be a number > 0 (a fraction of the full set's cost), "
                         f"got {budget!r}")
    for what, seconds in (("import timeout", import_timeout_s), ("timeout", timeout_s)):
        if seconds is not None and not (is_finite_number(seconds) and seconds > 0):
            raise ValueError(f"the {what} must be a number of seconds > 0, got {seconds!r}")
    if profile_only and timeout_s is not None:
        raise ValueError("the timeout (--timeout) is the judge's limit on the optimizer's "
                         "candidate; --profile-only judges nothing: leave it out")
    if budget_unit not in BUDGET_UNITS:
        raise ValueError(f"the budget unit must be one of {', '.join(BUDGET_UNITS)} (the live "
                         f"backend cannot know a section's seconds before profiling it), got "
                         f"{budget_unit!r}")
    optimizer = DEFAULT_OPTIMIZER if optimizer is None else optimizer
    llm_model(optimizer)  # a ValueError naming the accepted optimizers
    if is_custom(optimizer):  # a typo in its spec named first, on any machine (the
        optimizer = checked_spec(optimizer)  # optimizer itself built once, by the live env)
    # the cheap checks first, so that a typo costs no GPU and no ncu run
    tree_path = Path(tree) if tree is not None else shipped_tree(optimizer)
    loaded = load(tree_path)
    return optimizer, tree_path, loaded


def _episode(env, policy, uri: str, tree: str, optimizer: str,
             profile_only: bool) -> OptimizeResult:
    from autoprofiler_env.optimizers.llm.prompt import render_profile
    from autoprofiler_env.policy import predict

    base = env.unwrapped
    backend = base.backend
    obs, info = env.reset(options={"problem": uri})
    costs = base.section_costs
    collected: list[int] = []
    walls: dict[str, float] = {}
    spent = 0.0
    start = np.ones(1, dtype=bool)
    state = None  # a recurrent policy's, carried through the episode as rollout carries it
    final = None
    while True:
        action, state = predict(policy, obs, state=state, episode_start=start,
                                deterministic=True, action_masks=info["action_mask"])
        start = np.zeros(1, dtype=bool)
        action = int(np.asarray(action).reshape(()))
        if action == base.STOP:
            if not profile_only:
                obs, _, _, _, final = env.step(action)
            break
        section = base.sections[action]
        began = time.perf_counter()
        backend.view(uri, section)  # the ncu run (the step below reads it back)
        walls[section] = time.perf_counter() - began
        spent += float(costs[action])
        collected.append(action)
        if profile_only and _ends_episode(costs, base.episode_budget, spent, collected):
            break  # collected already; its step would call the optimizer
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            final = info
            break
    sections = tuple(base.sections[a] for a in collected)
    profile = backend.profile(uri, sections) if sections else None
    section_costs = []
    for a in collected:
        alone = backend.profile(uri, (base.sections[a],)).cost
        section_costs.append(SectionCost(base.sections[a], int(alone.passes),
                                         float(alone.replay_s),
                                         walls[base.sections[a]], float(costs[a])))
    verdict = None
    if final is not None:
        if "record" not in final:
            raise AutoProfilerError(f"the episode on {uri} was cut before the optimizer ran (a "
                                    "TimeLimit wrapper?)")
        verdict = Verdict(final["candidate"], final["reason"], bool(final["correct"]),
                          _number(final["speedup"]), _number(final["eager_ms"]),
                          _number(final["candidate_ms"]), final["error_kind"],
                          final["error"])
    return OptimizeResult(uri, tree, optimizer, float(base.budget), base.budget_unit,
                          float(base.episode_budget), tuple(policy.path(obs)), sections,
                          tuple(section_costs), render_profile(profile), verdict,
                          tuple(policy.explain(obs)),
                          profile.to_dict() if profile is not None else None)


def _ends_episode(costs: np.ndarray, budget: float, spent: float, collected: list[int]) -> bool:
    """Whether, with ``collected`` (the last one included) and ``spent`` (in the order the
    environment adds it up), no other section fits what is left: the environment's step of the
    last one then ends the episode (its documented termination), calling the optimizer."""
    from autoprofiler_env.envs.profiling_env import COST_SLACK

    left = budget - spent + COST_SLACK
    done = set(collected)
    return not any(costs[i] <= left for i in range(len(costs)) if i not in done)


def _number(value) -> float | None:
    return None if value is None else float(value)


# -- printing ---------------------------------------------------------------------------------

def format_text(result: OptimizeResult) -> str:
    """The result for a person, in markdown: the profile exactly as the optimizer is shown it
    (between ``<!-- profile -->`` markers, ready to paste into a prompt), its cost, then the
    verdict."""
    from agents.tree.policy import amount

    total = amount(result.budget_total, result.budget_unit)
    mine = f" (profiled: {result.candidate_file}'s ModelNew)" if result.candidate_file else ""
    head = (f"<!-- {result.problem}{mine}: tree {result.tree}, optimizer {result.optimizer}, "
            f"budget {result.budget:g} of the full set = {total}; "
            f"tree path {' -> '.join(map(str, result.path))} -->")
    lines = [head, "<!-- profile -->",
             result.profile_markdown.rstrip(),
             "<!-- /profile -->", "", "## Why these sections", ""]
    lines += [f"    {line}" for line in result.explanation] or ["(no tree walk)"]
    lines += ["", "## What the profile cost", ""]
    if result.costs:
        header = (f"| section | ncu passes | ncu replay (s) | wall (s) | charged "
                  f"({result.budget_unit}) |")
        lines += [header, "|---|---|---|---|---|"]
        lines += [f"| {c.section} | {c.passes} | {c.replay_s:.2f} | {c.wall_s:.1f} | "
                  f"{c.charged:g} |" for c in result.costs]
        lines.append(f"| **total** | {result.passes} | {result.replay_s:.2f} | "
                     f"{result.wall_s:.1f} | {result.spent:g} of {result.budget_total:g} |")
    else:
        lines.append(f"nothing collected (0 of {total})")
    lines += ["", "## Verdict", ""]
    v = result.verdict
    if v is None:
        lines.append("not optimized (--profile-only)")
    else:
        lines.append(f"- candidate: `{v.candidate}` ({v.reason})")
        if v.correct:
            lines.append(f"- correct; speedup {_fmt(v.speedup, 'x', 3)} (eager "
                         f"{_fmt(v.eager_ms, ' ms', 4)}, candidate "
                         f"{_fmt(v.candidate_ms, ' ms', 4)})")
        else:
            lines.append(f"- incorrect ({v.error_kind or 'unknown'}); eager "
                         f"{_fmt(v.eager_ms, ' ms', 4)}")
            if v.error:
                lines.append(f"- why: {v.error}")
    return "\n".join(lines) + "\n"


def format_plan(plan: Plan) -> str:
    """The plan for a person: the walk up to its first section, the subtree below it as the
    tree's rendering shows it (:func:`agents.tree.export_text`), then each path: its sections'
    costs against the budget and why it goes its way."""
    from agents.tree.policy import amount
    from agents.tree.render import export_text

    lines = list(plan.explanation)
    total = amount(plan.budget_total, plan.budget_unit)  # "4 of 11.4 passes": its unit
    budget = f"{plan.budget:g} of the full set = {total}"
    if plan.first is None:
        lines.append(f"the walk stops before collecting any section at {budget}: the "
                     "optimizer is given no profile")
        return "\n".join(lines) + "\n"
    measured = any(path.measured for path in plan.paths)
    lines.append("below it" + (" (a branch on a section's metric reads what ncu measures on a "
                               "GPU):" if measured else ", nothing reads a measured metric:"))
    lines += [f"    {line}" for line in
              export_text(plan.below, start=plan.first + 1).splitlines()]
    ways: dict[tuple[str, ...], list[PlannedPath]] = {}  # paths that collect the same
    for path in plan.paths:  # sections, grouped: one profile, reached either way
        ways.setdefault(path.sections, []).append(path)
    lines.append(f"{len(plan.paths)} path{'s' if len(plan.paths) > 1 else ''}"
                 + (f" to {len(ways)} profile{'s' if len(ways) > 1 else ''}"
                    if len(ways) < len(plan.paths) else "")
                 + f", at {budget}:")
    for sections, paths in ways.items():
        path = paths[0]
        costs = " + ".join(f"{c:g}" for c in path.costs)
        lines.append(f"    {' + '.join(sections)}: "
                     f"{costs + ' = ' if len(path.costs) > 1 else ''}{path.cost:g} of {total}"
                     + (f", either of {len(paths)} ways:" if len(paths) > 1 else ""))
        for k, way in enumerate(paths):
            if k:
                lines.append("      or")
            lines += [f"        {line}" for line in way.explanation]
    first = plan.paths[0].sections[0]
    if all(path.sections == (first,) for path in plan.paths):
        lines.append(f"the walk collects nothing after {first}"
                     + (", whatever its metrics show" if measured else ""))
    lines.append("on a GPU with ncu, `autoprofiler optimize FILE --profile-only` collects the "
                 "profile")
    return "\n".join(lines) + "\n"


def format_json(result: OptimizeResult) -> str:
    """The result as one JSON object (:meth:`OptimizeResult.to_dict`)."""
    return json.dumps(result.to_dict(), indent=1)


def _fmt(value: float | None, unit: str, digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}g}{unit}"


def _shown(path: Path) -> str:
    """``path`` relative to the working directory where it is under it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
