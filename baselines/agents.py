"""Fixed and reference profiling policies, each with stable-baselines3's ``predict`` signature
so that ``evaluate_policy`` and the benchmark serve all of them.

- :class:`NoProfile`: STOP at once (the optimizer's prior).
- :class:`FixedSections`: a fixed list of sections, in order: ncu's basic, detailed and full
  sets (the action sections they contain), each single section, and a curated list in the
  spirit of CudaForge's 24 metrics. If the next section of its list is not affordable it
  stops; :meth:`Agent.fits_budget` then says False for the episode's sections (the
  benchmark's ``fits_budget`` column, empty for the agents that are not fixed
  configurations): a fixed configuration that does not fit the budget is reported, never
  silently shortened.
- :class:`RooflineTree`: in the spirit of KernelAgent: SpeedOfLight first, then the memory
  branch (MemoryWorkloadAnalysis, its chart) or the compute branch (ComputeWorkloadAnalysis,
  WarpStateStats) by which throughput is higher.
- :class:`RandomAgent`: a uniformly random valid action.
- :class:`HindsightOracle`: per problem, the section set within the budget whose outcome
  scores best, found by searching the replay with hindsight (it reads the episode's problem
  from ``env.problem``: the upper bound, not a policy).
"""

from __future__ import annotations

import numpy as np

from autoprofiler_env.errors import AutoProfilerError, PolicyError
from autoprofiler_env.oracle import best_affordable
from autoprofiler_env.profiler.catalogue import load_catalogue
from autoprofiler_env.profiler.metrics import MEM_PCT, SM_PCT

CUDAFORGE_LIKE = ("SpeedOfLight", "LaunchStats", "Occupancy", "MemoryWorkloadAnalysis",
                  "ComputeWorkloadAnalysis", "WarpStateStats", "SourceCounters")
"""Sections carrying CudaForge-style metrics: throughputs, occupancy and its limiters, launch
configuration, cache hit rates, pipe use, stall reasons, branch efficiency."""

FIXED_PREFIXES = ("set:", "section:", "curated:", "no-profile")
"""The fixed configurations among the baselines, by the start of their names (as
:func:`all_agents` names them): ncu's sets, single sections, the curated list, no profile."""


def is_fixed(name: str) -> bool:
    """Whether the agent called ``name`` is a fixed configuration (:data:`FIXED_PREFIXES`)."""
    return name.startswith(FIXED_PREFIXES)


class Agent:
    """Base: ``predict`` returns ``(action, state)`` like an SB3 policy; ``reset`` is called at
    each episode start (``episode_start``)."""

    name = "agent"
    stochastic = False

    def __init__(self, env) -> None:
        self.env = env.unwrapped
        self.sections = tuple(self.env.sections)
        self.stop = len(self.sections)

    def reset(self) -> None:
        pass

    def fits_budget(self, collected) -> bool | None:
        """Whether an episode that ended with the sections ``collected`` ran this agent's
        fixed configuration whole; None for an agent without one (the rule tree, random, the
        oracle: the question does not apply)."""
        return None

    def act(self, observation: dict, mask: np.ndarray) -> int:
        raise NotImplementedError

    def predict(self, observation, state=None, episode_start=None, deterministic=True,
                action_masks=None):
        """SB3's signature. A batched observation (from a VecEnv, e.g. ``evaluate_policy``)
        gives a batch of actions; the valid actions are ``action_masks`` when given, else the
        observation's own ``action_mask`` (each sub-environment's)."""
        if episode_start is not None and np.any(episode_start):
            self.reset()
        batched = np.ndim(observation["collected"]) == 2
        if not batched:
            mask = np.asarray(action_masks if action_masks is not None
                              else observation["action_mask"], dtype=bool)
            return np.array(self.act(observation, mask)), state
        n = len(observation["collected"])
        masks = np.asarray(action_masks if action_masks is not None
                           else observation["action_mask"], dtype=bool).reshape(n, -1)
        actions = [self.act({k: v[i] for k, v in observation.items()}, masks[i])
                   for i in range(n)]
        return np.array(actions), state


class NoProfile(Agent):
    name = "no-profile"

    def fits_budget(self, collected) -> bool:
        return True  # its configuration, no section, fits every budget

    def act(self, observation, mask):
        return self.stop


class FixedSections(Agent):
    """Collects ``sections`` in order, then stops; it stops too at the first that the budget
    does not afford, never skipping to a cheaper one after it (a fixed configuration is its
    list, cut by the budget: at a low budget the curated list, SpeedOfLight first, collects
    nothing). Skipping variants would not strengthen the fixed configuration chosen on train
    (``python -m experiments.studies.fixed_fit``)."""

    def __init__(self, env, sections, name: str) -> None:
        super().__init__(env)
        self.name = name
        missing = [s for s in sections if s not in self.sections]
        if missing:
            raise ValueError(f"{name}: sections not in this environment: {missing}")
        self.plan = [self.sections.index(s) for s in sections]

    def fits_budget(self, collected) -> bool:
        # judged from the episode's end, not from the masks this agent saw: the environment
        # also ends an episode by itself when no section is affordable any more
        return {self.sections[i] for i in self.plan} <= set(collected)

    def act(self, observation, mask):
        for index in self.plan:
            if observation["collected"][index]:
                continue
            return index if mask[index] else self.stop
        return self.stop


class RooflineTree(Agent):
    name = "roofline-tree"

    SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Chart",
                "ComputeWorkloadAnalysis", "WarpStateStats")
    METRICS = (SM_PCT, MEM_PCT)

    def __init__(self, env) -> None:
        super().__init__(env)
        missing = self.missing(env)
        if missing:
            raise ValueError(f"roofline-tree reads {', '.join(missing)}, which this "
                             "environment's dataset lacks")
        metrics = self.env.metric_names
        self._sm, self._mem = metrics.index(SM_PCT), metrics.index(MEM_PCT)
        self._i = {s: self.sections.index(s) for s in self.SECTIONS}

    @classmethod
    def missing(cls, env) -> list[str]:
        """The sections and metrics the rules read that ``env`` lacks."""
        have = set(env.unwrapped.sections) | set(env.unwrapped.metric_names)
        return [name for name in (*cls.SECTIONS, *cls.METRICS) if name not in have]

    def act(self, observation, mask):
        i = self._i
        if not observation["collected"][i["SpeedOfLight"]]:
            return i["SpeedOfLight"] if mask[i["SpeedOfLight"]] else self.stop
        memory_bound = observation["metrics"][self._mem] >= observation["metrics"][self._sm]
        branch = (("MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Chart") if memory_bound
                  else ("ComputeWorkloadAnalysis", "WarpStateStats"))
        for s in branch:
            if not observation["collected"][i[s]] and mask[i[s]]:
                return i[s]
        return self.stop


class RandomAgent(Agent):
    name = "random"
    stochastic = True

    def __init__(self, env, seed: int = 0) -> None:
        super().__init__(env)
        self.seed(seed)

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def act(self, observation, mask):
        return int(self.rng.choice(np.flatnonzero(mask)))


class OracleUseError(AutoProfilerError, ValueError):
    """The hindsight oracle was asked to act on an observation that is not of its own
    environment's current episode: a vector env's batch of observations, an environment
    not reset yet, or another environment's observation. It reads the episode's problem
    from the one environment it was made with: evaluate it there, with
    :func:`~autoprofiler_env.evaluation.rollout` or ``autoprofiler benchmark``."""


class HindsightOracle(Agent):
    """The upper bound under the benchmark's own measure: for the episode's problem
    (``env.problem``, a documented analysis hook), the affordable section set whose outcome
    has the highest score (:mod:`autoprofiler_env.scoring`), found by searching every
    affordable set through the backend's ``finish`` with hindsight, smallest sets first (the
    first of equals is kept); the search stops early once it reaches the best outcome the
    problem has at all. Then it collects that set. It needs a backend with hindsight (the
    :class:`~autoprofiler_env.envs.backends.Hindsight` protocol: the replay's), and one
    environment of its own (``env``: it reads the episode's problem there, so it cannot act
    for the sub-environments of a vector env): ``predict`` raises :class:`OracleUseError` on
    a batch of several observations, before ``env`` is reset, or on an observation of
    another problem than ``env``'s episode."""

    name = "oracle"

    def __init__(self, env) -> None:
        super().__init__(env)
        self._plans: dict[tuple[str, float], list[int]] = {}
        self._plan: list[int] = []
        self._features: dict[str, np.ndarray] = {}

    def predict(self, observation, state=None, episode_start=None, deterministic=True,
                action_masks=None):
        """SB3's signature, on observations of its own environment's episode only (one, or
        a batch of one: ``evaluate_policy`` on that environment)."""
        self._check(observation)
        return super().predict(observation, state, episode_start, deterministic, action_masks)

    def _check(self, observation) -> None:
        """An :class:`OracleUseError` where ``observation`` is not its environment's."""
        use = ("it acts for the one environment it was made with, HindsightOracle(env), whose "
               "episode's problem it reads: evaluate it there, with rollout(env, oracle) or "
               "`autoprofiler benchmark --policy oracle`")
        features = np.asarray(observation["features"])
        if features.ndim == 2 and len(features) > 1:
            raise OracleUseError(f"the hindsight oracle cannot act for the {len(features)} "
                                 f"sub-environments of a vector env: {use}")
        uri = self.env.problem
        if uri is None:
            raise OracleUseError(f"the hindsight oracle's environment has not been reset (no "
                                 f"episode's problem to read): {use}")
        if uri not in self._features:
            self._features[uri] = np.asarray(self.env.backend.features(uri), dtype=np.float32)
        if not np.array_equal(features.reshape(-1), self._features[uri], equal_nan=True):
            raise OracleUseError(f"the hindsight oracle was given an observation of another "
                                 f"problem than its environment's episode ({uri}): {use}")

    def reset(self) -> None:
        env = self.env
        key = (env.problem, env.episode_budget)
        if key not in self._plans:
            self._plans[key] = self._search(env.problem, env.section_costs, env.episode_budget)
        self._plan = list(self._plans[key])

    def _search(self, uri, costs, budget) -> list[int]:
        return list(best_affordable(self.env.backend, uri, self.sections, costs, budget))

    def act(self, observation, mask):
        while self._plan:
            index = self._plan.pop(0)
            if not observation["collected"][index] and mask[index]:
                return index
        return self.stop


def baseline(env, name: str, seed: int = 0) -> Agent:
    """The baseline called ``name`` (as :func:`all_agents` names them) for ``env``; a
    ``ValueError`` naming them all for an unknown one."""
    for agent in all_agents(env, seed):
        if agent.name == name:
            return agent
    if name == RooflineTree.name:  # left out of all_agents: says what it lacks
        RooflineTree(env)
    names = ", ".join(a.name for a in all_agents(env, seed))
    raise PolicyError(f"no baseline {name!r}: the baselines are {names}")


def all_agents(env, seed: int = 0) -> list[Agent]:
    """Every baseline for ``env``: the fixed configurations (of the sections it has), the
    rule tree (where it has the sections and metrics the rules read), random, oracle."""
    catalogue = load_catalogue()
    sections = tuple(env.unwrapped.sections)

    def within(names):  # of ncu's sections (a misspelt one is an error), those env has
        return [s for s in catalogue.validate(names) if s in sections]

    agents: list[Agent] = [NoProfile(env)]
    for set_name in ("basic", "detailed", "full"):
        agents.append(FixedSections(env, within(catalogue.sets[set_name]), f"set:{set_name}"))
    agents += [FixedSections(env, [s], f"section:{s}") for s in sections]
    agents.append(FixedSections(env, within(CUDAFORGE_LIKE), "curated:cudaforge-like"))
    if not RooflineTree.missing(env):  # its rules read sections a dataset may lack
        agents.append(RooflineTree(env))
    agents += [RandomAgent(env, seed), HindsightOracle(env)]
    names = [a.name for a in agents]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise PolicyError(f"baselines named twice: {', '.join(twice)} (each baseline "
                          "all_agents makes needs a name of its own)")
    return agents
