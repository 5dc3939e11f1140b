"""The Gymnasium environment: choose which Nsight Compute sections to collect for a kernel."""

from __future__ import annotations

import json
import math
import reprlib
import sys
from bisect import bisect_right
from dataclasses import asdict, dataclass

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from autoprofiler_env.envs.backends import Backend, EpisodeOutcome, LiveBackend, ReplayBackend
from autoprofiler_env.envs.observation import (
    COST_CLIP,
    Observation,
    budget_entries,
    observation_space,
)
from autoprofiler_env.errors import (
    AutoProfilerError,
    DatasetError,
    EmptySplitError,
    NotRecordedError,
    ProblemNotFoundError,
    RenderModeError,
    UnknownProblemError,
    UnknownSplitError,
)
from autoprofiler_env.numeric import is_finite_number, shown
from autoprofiler_env.scoring import log_score, shipped_speedup

BUDGET_UNITS = ("seconds", "passes", "sections")
REWARDS = ("log_speedup", "speedup")
COST_SLACK = 1e-12
"""How far a section's cost may exceed what is left of the budget and still fit: the action
mask's comparison, ``cost <= budget - spent + COST_SLACK`` (in the budget's unit), so that a
section costing exactly what is left fits though the float subtraction rounds. A policy or
tool that reproduces the mask (``TreePolicy.routes``, ``autoprofiler optimize``) uses it."""
RESET_OPTIONS = ("problem", "budget")
"""The keys ``reset(options=...)`` accepts; any other key is a ``ValueError``."""
_RESET_KEYS = frozenset(RESET_OPTIONS)
_RESET_MEANINGS = {"problem": "the episode's problem URI, one of env.unwrapped.problems",
                   "budget": "the episode's budget, in the budget kwarg's terms"}
_STARTS_KEPT = 4096
"""How many (problem, budget) starts an environment keeps (about 4 KB each)."""


@dataclass(frozen=True)
class EpisodeRecord:
    """A finished episode, small and serializable (one JSON line).

    ``env.apply(record)`` replays it; ``env.validate(record)`` checks that the environment
    still gives the same candidate, speedup and reward.
    """

    problem: str
    sections: tuple[str, ...]
    cost: float
    candidate: str
    correct: bool
    speedup: float | None
    reward: float  # the episode's return: the final reward plus any cost penalties
    budget: float | None = None  # the episode's budget, as the ``budget`` kwarg gives it
    invalid_action: bool = False  # it ended on an action the mask forbade (taken as STOP)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, line: str) -> EpisodeRecord:
        d = json.loads(line)
        d["sections"] = tuple(d["sections"])
        return cls(**d)


class ProfilingEnv(gym.Env):
    """
    ## Description

    An episode is one kernel problem (KernelBench format). The agent sees the problem's static
    features, then collects Nsight Compute sections one at a time, each at a cost, within a
    budget. When it stops (or nothing affordable is left) the optimizer is invoked once with
    exactly the profile collected, and the reward is the speedup its candidate achieves.

    ## Action Space

    ``Discrete(n_sections + 1)``: action ``i < n_sections`` collects ``env.unwrapped.sections[i]``
    (the 15 action sections of ``autoprofiler_env.profiler.catalogue.ACTION_SECTIONS``); action
    ``n_sections`` is STOP. ``action_masks()`` (what sb3-contrib's ``MaskablePPO`` calls: a
    bool array) and ``info["action_mask"]`` (an ``int8`` array, as Gymnasium's own Taxi gives
    it, so that ``env.action_space.sample(mask=info["action_mask"])`` draws a valid action)
    mark the valid ones: sections not yet collected whose cost fits the remaining budget, and
    STOP (always valid). A masked action (a section already collected,
    or one the remaining budget cannot pay) is treated as STOP and ``info["invalid_action"]``
    is True: the episode ends, with the reward of the profile collected so far.

    An action is an integer of ``0..n_sections``: an ``int``, a numpy integer (what
    ``action_space.sample()`` and stable-baselines3 give) or an integer array of one element
    (0-d or ``(1,)``, a policy's output for one observation). Anything else (``None``, a
    float, even ``2.0`` or NaN, a string, an array of several elements, an integer out of
    range such as ``-1``) raises ``ValueError`` saying what is accepted. This follows
    Gymnasium: its own environments refuse an action that is not a member of the action space
    (``assert action_space.contains(action)``), because such a value is a bug in the caller,
    not a policy's choice; ending the episode on it (and paying a reward) would hide the bug
    in the training data, and truncating ``2.7`` to section 2 would collect a section nobody
    chose. An action of the space that the mask forbids is a policy's choice, and is answered
    inside the episode as above.

    ``step`` before the first ``reset``, or after the episode has terminated, raises
    ``gymnasium.error.ResetNeeded`` (as Gymnasium's ``OrderEnforcing`` does before a first
    reset): an episode pays its terminal reward once. Vector environments and
    stable-baselines3 reset a terminated sub-environment before stepping it again.

    ## Observation

    A flat ``Dict`` (stable-baselines3's ``MultiInputPolicy`` takes it):

    - ``features``: ``Box(len(FEATURE_NAMES))``, the static features (log-scaled FLOPs, bytes,
      op counts, ...), known before any profiling;
    - ``collected``: ``MultiBinary(n_sections)``, the sections collected so far;
    - ``metrics``: ``Box(n_metrics)``, the key metrics gathered so far (every numeric header
      metric of the action sections, duration-weighted over the kernels, as
      ``sign(x) log10(1 + |x|)``), 0 where unknown;
    - ``metrics_known``: ``MultiBinary(n_metrics)``, which of them are known;
    - ``findings``: ``Box(n_sections)``, per collected section the sum of its OPT findings'
      time-weighted estimated speedups (percent / 100);
    - ``budget``: ``Box(1)``, the remaining budget as a fraction of the episode's budget;
    - ``budget_total``: ``Box(2)``, the episode's budget as a fraction of ncu's full set's cost
      (0 where that is unknown) and as ``log10(1 + budget)`` in ``budget_unit``, so that one
      policy can serve several budgets;
    - ``costs``: ``Box(n_sections)``, what each section costs on this problem as a fraction of
      the episode's budget, as it is known before collecting it (the replay: as recorded;
      live: the catalogue's passes, or 1 per section; clipped at 1000). In seconds, the
      replay's ``costs``, ``budget_total[1]`` and the action mask (what the budget left
      affords) come from the problem's recorded ncu runs, which a profiler meeting a new
      kernel has only after a full-set run of it: every policy here, the tree and the fixed
      configurations included, acts on more than that profiler would know
      (``budget_unit="passes"`` or ``"sections"`` shows only what is known before);
    - ``action_mask``: ``MultiBinary(n_sections + 1)``, the valid actions (as
      ``action_masks()``), so that a policy called on a batch of observations (a vector env)
      reads each sub-environment's own.

    Gymnasium's ``Dict`` keeps its keys sorted, so flattened (``FlattenObservation``,
    ``spaces.flatten``) the vector is ``action_mask``, ``budget``, ``budget_total``,
    ``collected``, ``costs``, ``features``, ``findings``, ``metrics``, ``metrics_known``: its
    first ``n_sections + 1`` entries are the mask (``info["action_mask"]`` holds it too).

    ## Rewards

    0 for every step, minus ``cost_penalty`` x (the step's cost / the budget) when that is set.
    At the end, the project's one score (:mod:`autoprofiler_env.scoring`): the speedup of the
    program one would ship, the candidate's when it is correct, eager's (1.0) otherwise;
    ``log_speedup`` (default) gives its ``ln`` (0 for an incorrect candidate), ``speedup`` the
    speedup itself. ``incorrect_reward``, when set, replaces an incorrect candidate's reward
    (a training shaping choice, e.g. ``ln(0.5)``: as bad as running twice as slow); the
    benchmark and the oracle never use it.

    ## Termination

    The episode terminates on STOP, on an invalid action, or when no uncollected section fits
    the remaining budget. It is never truncated by the environment (wrap it in ``TimeLimit`` if
    you like; an episode has at most ``n_sections`` steps: each collects a section, or the last
    stops, and collecting the last section ends it; a wrapper that reads the horizon from the
    spec, as ``TimeAwareObservation`` does, takes ``gym.make(..., max_episode_steps=16)``, one
    more than that, which never cuts an episode). The last step's ``info`` holds the episode:
    ``problem``, ``sections`` (in order), ``cost``, ``candidate``, ``reason`` (the optimizer's),
    ``correct``, ``speedup``, ``error_kind``, ``error`` (why the candidate was judged incorrect,
    in words: live, the harness's reason, e.g. which output differed and by how much, or the
    SyntaxError's line, at most 1000 characters, what a repair loop hands back to its optimizer;
    None when correct, and on the replay, which records none), ``eager_ms`` and ``candidate_ms``
    (the median times behind the speedup), ``invalid_action`` and ``record`` (an
    :class:`EpisodeRecord`). Every step's ``info`` (``reset``'s too) has ``action_mask``,
    ``problem``, and ``sections`` and ``cost`` so far; the outcome's keys are the last step's
    alone, as Gymnasium has it (a vector environment's ``info["_speedup"]`` marks the
    sub-environments whose episode ended). So SB3's ``Monitor(info_keywords=...)`` under a
    ``TimeLimit`` that cuts episodes may name ``problem``, ``sections`` and ``cost``; an
    outcome's key needs episodes that end in the environment (within ``n_sections`` steps). A
    vector environment gathers each outcome key into one array typed by the first value it
    meets: ``speedup`` and ``candidate_ms`` are None for an incorrect candidate (as in the
    record; on the replay ``eager_ms``, the reference's, is known either way; live, it is None
    where the reference was not timed), so take them as
    ``np.asarray(info["speedup"], dtype=float)`` (NaN there) before averaging.

    ``reset(options={"problem": uri})`` starts an episode on that problem (one of
    ``env.unwrapped.problems``); without it the problem is drawn with the seeded generator.
    ``reset(options={"budget": b})`` gives this episode the budget ``b`` instead of the
    ``budget`` kwarg or one drawn from ``budget_range`` (in the same terms: a fraction of the
    full set's cost, or an absolute amount with ``budget_is_fraction=False``), so that one
    environment serves an evaluation at several budgets. These are the only options: any
    other key is a ``ValueError``, so that a misspelt option does not silently give a random
    problem; a ``problem`` that is not one of ``env.unwrapped.problems`` is an
    :class:`~autoprofiler_env.errors.UnknownProblemError` (a ``ValueError`` too).

    The live environment's ``reset`` on a CUDA ``device`` (the default) raises
    :class:`~autoprofiler_env.errors.MachineError` on a machine where torch sees no CUDA
    device: on a CPU, use the replay environment ``AutoProfiler-v0``. (``device="cpu"``
    judges the candidates on the CPU, a check of the pipeline; ncu profiles on a GPU only,
    so without one such an episode collects sections only from the dataset's recorded
    profiles, ``evidence="recorded"``.)

    ``render_mode``: None (default), ``"ansi"`` (``render()`` gives a line of text: the
    problem, the sections collected, the budget spent) or ``"rgb_array"`` (a picture of the
    same: the budget's bar, blue as far as it is spent, over one bar per section in the
    action space's order, as long as its cost against the whole budget, green where
    collected, grey where it fits what is left, red where it does not; what SB3's
    ``make_vec_env`` asks for and video recorders take); any other mode is a
    :class:`~autoprofiler_env.errors.RenderModeError` (a ``ValueError``) naming them, but for
    ``"human"`` through ``gym.make``, which Gymnasium itself answers with its
    ``HumanRendering`` wrapper over ``rgb_array`` (with a warning; a window drawn with pygame,
    whose absence its first ``reset`` or ``render`` says).

    ## Registered Configurations

    - ``AutoProfiler-v0``: the replay backend on a shipped dataset (recorded on an H200):
      the suite's by default, ``dataset="kernelbench"`` for KernelBench levels 1-3
      (docs/kernelbench.md); train split; budget 25% of the full set's cost in seconds.
    - ``AutoProfilerLive-v0``: the live backend (ncu, the optimizer and the harness on a GPU);
      ``nondeterministic=True``; budget 25% of the sections (the live backend cannot know the
      full set's cost in seconds before profiling). Given a ``dataset`` and
      ``budget_unit="seconds"``, a problem the dataset recorded is budgeted with its recorded
      costs instead: the costs and budget its replay episode shows, so that a policy learned
      there meets the same numbers.

    ``make`` kwargs (all JSON-serializable): ``dataset`` (a shipped dataset's name,
    ``"suite"`` (default) or ``"kernelbench"``, or a file's path:
    :mod:`autoprofiler_env.dataset.names`;
    live, it is optional: its records name the problems, and a user's KernelBench file is
    checked against the recorded sha256), ``source`` (live only: the KernelBench checkout
    that a KernelBench dataset's problems are read from), ``split`` or ``problems``
    (a list of URIs), ``backend`` (``"replay"`` / ``"live"``), ``optimizer`` (None, default:
    the dataset's own, ``"reference"`` on the shipped ones and live without a dataset;
    ``"reference"``: composed decisions, served on the problems whose candidates are
    recorded; ``"reference-v1"``: the first reference optimizer, one transformation per
    candidate, kept for comparison with its recorded outcomes (docs/optimizers.md); or
    ``"llm:<model>"``: on the replay one of the model's recorded replies for the problem and
    the collected section set, drawn with the environment's seeded generator, and
    ``llm_missing`` for a set that was not recorded: ``"raise"``, default, or
    ``"largest_recorded_subset"``; live, a request to the endpoint of
    ``$AUTOPROFILER_LLM_BASE_URL`` (docs/optimizers.md), told the tolerance it is judged at,
    whose failure to answer at all (down, an HTTP error, too slow) raises
    :class:`~autoprofiler_env.errors.LLMError` from ``step`` rather than pay the model a
    reward for the endpoint's failure; or, live only, ``"py:MODULE:ATTR"``: an optimizer of your
    own, MODULE imported from the current directory or ``PYTHONPATH``, ATTR an object with
    ``optimize(problem, profile)`` returning the ``ModelNew`` source or a
    :class:`~autoprofiler_env.optimizers.Candidate`, or a class or function called with no
    arguments that returns one (:mod:`autoprofiler_env.optimizers.custom`; an exception of
    its ``optimize`` is the episode's incorrect candidate, ``error_kind`` ``optimizer_raised``,
    and so is a return of neither, ``optimizer_returned``;
    the replay, which has nothing recorded for it, refuses it), ``budget`` and
    ``budget_unit`` (``seconds``, ``passes`` or ``sections``) and ``budget_is_fraction`` (a
    fraction of the full set's cost, default, or an absolute amount), ``budget_range``
    (``[low, high]``, in the same terms as ``budget``: when set, each episode whose ``reset``
    gives no budget draws one log-uniformly between them with the seeded generator, in place
    of ``budget``, so that one policy trains for every budget; the observation's
    ``budget_total`` tells it which; default None),
    ``reward``, ``incorrect_reward``, ``cost_penalty``, ``device``, live only ``evidence``
    (``"ncu"``, default: ncu profiles each collected section; ``"recorded"``: the dataset's
    recorded profiles, only the judging live), ``harness`` (HarnessConfig settings, e.g.
    ``{"size": "smoke"}``), ``timeout_s`` (the seconds the judge allows one candidate: its
    import, build, correctness runs and timing; default 600, the suite recording's limit;
    KernelBench's recording allowed 180; a candidate that outlasts it is incorrect,
    ``error_kind`` ``timeout``, judged once, while a crash, an unexplained timing or the judge
    out of memory is judged a second time, lest a machine's hiccup be kept as the code's
    verdict; ``autoprofiler optimize --timeout``),
    ``import_timeout_s`` (the seconds a problem file outside the suite may take to import, in
    a worker process, when ``reset`` computes its static features: default 5, as
    ``autoprofiler problems --import-timeout``; a slower or hanging import is a
    :class:`~autoprofiler_env.errors.ProblemTimeoutError`) and ``candidate_file`` (a file's
    path, a str, whose ``ModelNew``, your kernel, ncu profiles in place of the one problem's
    ``Model``, on its inputs, while the policy walks on the problem's static features and
    budget: ``autoprofiler optimize --profile-only --candidate``; such an environment collects
    profiles only: a step that ends an episode raises (STOP, or a collect that leaves nothing
    affordable, after collecting it), no optimizer being shown another program's profile, and
    the sections collected stay readable with ``env.unwrapped.backend.profile(uri,
    sections)``; Gymnasium's ``check_env`` and rollouts do not apply to it); and, both
    backends,
    ``tolerance``: the correctness regime (None, default: as recorded, KernelBench v0.1's
    atol = rtol = 1e-2; ``"kernelbench"``: its current fp32 1e-4; or a number, atol = rtol).
    The replay judges a recorded outcome under it from the record's ``tolerance_needed``
    (docs/harness.md) and raises :class:`~autoprofiler_env.errors.NotRecordedError` where the
    record cannot decide; the live backend judges the candidate under it.

    The kwargs are checked at construction, each failure a ``ValueError`` (or an
    :class:`~autoprofiler_env.errors.AutoProfilerError` subclass) saying what is accepted:
    ``budget`` a number between 1e-300 and 1e300 (:data:`BUDGET_BOUNDS`); ``budget_range``
    None or two such numbers with low <= high and high / low finite (a refused reset leaves
    the environment's episode as it was; a wrapper that counts steps, ``TimeLimit``, has
    reset its count first); ``cost_penalty`` a finite number >= 0 (0 turns it off; a
    negative one would pay for profiling); ``incorrect_reward`` None or a finite number;
    ``problems`` None (the split) or a non-empty list of URI strings, each one the backend
    holds (the replay raises :class:`~autoprofiler_env.errors.NotRecordedError` naming the
    first problems it does hold; the live backend loads each, raising
    :class:`~autoprofiler_env.errors.ProblemNotFoundError`).
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(self, dataset: str | None = None, split: str | None = "train",
                 problems: list[str] | None = None, backend: str = "replay",
                 budget: float = 0.25, budget_range: list[float] | None = None,
                 budget_unit: str = "seconds",
                 budget_is_fraction: bool = True, reward: str = "log_speedup",
                 incorrect_reward: float | None = None, cost_penalty: float = 0.0,
                 optimizer: str | None = None, llm_missing: str = "raise",
                 device: str = "cuda", tolerance: str | float | None = None,
                 render_mode: str | None = None, source: str | None = None,
                 evidence: str | None = None, harness: dict | None = None,
                 import_timeout_s: float | None = None,
                 timeout_s: float | None = None,
                 candidate_file: str | None = None) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise RenderModeError(  # as Gymnasium's environment template asserts
                f"render_mode must be None or one of {self.metadata['render_modes']} (this "
                f"environment renders a line of text or a picture), got {render_mode!r}")
        if budget_unit not in BUDGET_UNITS:
            raise ValueError(f"budget_unit must be one of {BUDGET_UNITS}, got {budget_unit!r}")
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
        if not isinstance(budget_is_fraction, (bool, np.bool_)):  # "false" would be true
            raise ValueError(f"budget_is_fraction must be True or False, got "
                             f"{shown(budget_is_fraction)}")
        budget_is_fraction = bool(budget_is_fraction)
        budget = _finite("budget", budget, "a finite number > 0 (a fraction of the full set's "
                         "cost, or an absolute amount with budget_is_fraction=False)")
        if budget <= 0:
            raise ValueError(f"budget must be a finite number > 0, got {shown(budget)}")
        if not BUDGET_BOUNDS[0] <= budget <= BUDGET_BOUNDS[1]:
            raise ValueError(f"budget must be between {BUDGET_BOUNDS[0]:g} and "
                             f"{BUDGET_BOUNDS[1]:g} (times a problem's full-set cost, or divided "
                             f"into its sections' costs, a float overflows past them), got "
                             f"{shown(budget)}")
        if budget_range is not None:
            budget_range = _budget_range(budget_range)
        cost_penalty = _finite("cost_penalty", cost_penalty, "a finite number >= 0 (0: none)")
        if cost_penalty < 0:
            raise ValueError(f"cost_penalty must be a finite number >= 0 (0: none; a negative "
                             f"one would reward profiling), got {shown(cost_penalty)}")
        if incorrect_reward is not None:
            incorrect_reward = _finite("incorrect_reward", incorrect_reward,
                                       "None or a finite number, e.g. math.log(0.5)")
        if problems is not None:
            problems = _problem_list(problems)
        if candidate_file is not None and not (isinstance(candidate_file, str)
                                               and candidate_file.strip()):
            raise ValueError(f"candidate_file must be a file's path as a str (the make kwargs "
                             f"are JSON-serializable), got {candidate_file!r}")
        self.backend: Backend
        if backend == "replay":
            if source is not None:
                raise ValueError("source names the KernelBench checkout the live backend reads "
                                 "its problems from; the replay needs no sources: leave it out")
            if (evidence is not None or harness is not None or import_timeout_s is not None
                    or timeout_s is not None or candidate_file is not None):
                raise ValueError("evidence, harness, timeout_s, import_timeout_s and "
                                 "candidate_file are the live backend's (where its profiles "
                                 "come from, how it judges, how long a candidate may run, how "
                                 "long a file's import may take, which program ncu profiles); "
                                 "the replay's are recorded: leave them out")
            self.backend = ReplayBackend(dataset, device=device, optimizer=optimizer,
                                         llm_missing=llm_missing, tolerance=tolerance)
        elif backend == "live":
            if budget_unit == "seconds" and dataset is None:  # reset would fail at once
                raise AutoProfilerError(
                    "the live backend cannot know a section's cost in seconds before "
                    "profiling it: give budget_unit='passes' (the catalogue's passes) or "
                    "'sections', or a dataset whose recorded costs it then uses")
            self.backend = LiveBackend(problems, device=device, optimizer=optimizer,
                                       tolerance=tolerance, dataset=dataset, source=source,
                                       evidence=evidence or "ncu", harness=harness,
                                       import_timeout_s=import_timeout_s,
                                       timeout_s=timeout_s,
                                       candidate_file=candidate_file)
        else:
            raise ValueError(f"backend must be 'replay' or 'live', got {backend!r}")
        if problems is not None and backend == "live":  # file paths and names become URIs
            problems = [self.backend.uri_of(ref) for ref in problems]
        if problems is not None:
            known = self.backend.problems(None)
            holds = set(known)
            missing = [u for u in problems if u not in holds]
            if missing:
                more = (f" ({len(missing)} of the {len(problems)} given are unknown)"
                        if len(missing) > 1 else "")
                if backend == "replay":
                    if missing[0] in self.backend.ill_posed:
                        raise NotRecordedError(
                            f"problems: {missing[0]!r} is ill-posed at this tolerance "
                            f"({self.backend.ill_posed[missing[0]]}){more}: a stricter "
                            "tolerance serves it (tolerance='kernelbench')")
                    if missing[0] in self.backend.dataset.uris():
                        raise NotRecordedError(
                            f"problems: the candidates of the optimizer "
                            f"{self.backend.optimizer_name!r} are not "
                            f"recorded for {missing[0]!r}{more}; it is served on "
                            f"{_some(known)} (docs/optimizers.md)")
                    left_out = self.backend.dataset.metadata.get("left_out") or {}
                    why = (f" (left out of this build: {left_out[missing[0]]})"
                           if missing[0] in left_out else "")
                    raise NotRecordedError(f"problems: the dataset holds no problem "
                                           f"{missing[0]!r}{why}{more}; it holds "
                                           f"{_some(known)}")
                raise ProblemNotFoundError(missing[0], f"not a problem URI of the live "
                                           f"backend{more}", f"give URIs: {_some(known)}")
        self.problems = list(problems) if problems is not None else self.backend.problems(split)
        self._named = problems is not None  # the problems= list, not a split
        if not self.problems:
            from autoprofiler_env.problems.loaders import SPLITS

            held = tuple(s for s in SPLITS if self.backend.problems(s))
            message = (f"no problems in split {split!r} of this backend: its splits are "
                       f"{', '.join(held) or 'none'} (or split=None for all of its problems, "
                       "or problems=[...])")
            if split in SPLITS:  # a split this dataset lacks (not a misspelt one)
                raise EmptySplitError(message, split, held)
            raise UnknownSplitError(message)
        self._problem_set = frozenset(self.problems)
        self._live = backend == "live"
        self.optimizer = self.backend.optimizer_name
        self.sections = tuple(self.backend.sections)
        self.budget, self.budget_unit = float(budget), budget_unit
        self.budget_range = budget_range
        self.budget_is_fraction = budget_is_fraction
        self.reward_kind = reward
        self.incorrect_reward = incorrect_reward
        self.cost_penalty = cost_penalty
        self.render_mode = render_mode
        n, m = len(self.sections), len(self.backend.metrics)
        self.STOP = n
        self.action_space = spaces.Discrete(n + 1)
        self.observation_space = observation_space(n, m)
        self._obs = Observation(n, m)
        self._uri: str | None = None
        self._budget_total = 0.0
        self._costs = np.zeros(n)
        self._mask = self._obs.mask   # the observation's action_mask, as booleans
        self._mask_int8 = self._mask.view(np.int8)  # ... and as it is (info's, Gymnasium's)
        self._bits = 0          # the valid sections, bit i for section i
        self._uncollected = 0   # the sections not collected yet, as bits
        self._starts: dict[tuple, tuple] = {}   # per (problem, budget): an episode's start
        self._problem_starts: dict[str, tuple] = {}  # per problem: what no budget changes
        self._entries: dict[tuple[str, int], object] = {}  # per (problem, action)
        self.last_record: EpisodeRecord | None = None
        self._needs_reset = "before the first reset()"  # why step() must wait (None: it need not)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_problem_starts", {})  # pickled before it was kept
        self._mask = self._obs.mask  # a view: pickling copies it apart from the observation
        self._mask_int8 = self._mask.view(np.int8)

    # -- costs ------------------------------------------------------------------------------

    def _cost(self, uri: str, section: str) -> float:
        if self.budget_unit == "sections":
            return 1.0
        seconds, passes = self.backend.cost(uri, section)  # known before collecting it
        if self.budget_unit == "passes":
            return float(passes)
        if seconds is None:
            raise AutoProfilerError(f"this backend cannot know what {section} costs in seconds "
                                    "before collecting it: give budget_unit='passes' or "
                                    "'sections'")
        return seconds

    def _episode_budget(self, budget: float, full: float | None) -> float:
        """``budget`` in ``budget_unit`` on a problem whose full set costs ``full``."""
        if not self.budget_is_fraction:
            return budget
        if self.budget_unit == "sections":
            return budget * len(self.sections)
        if full is None:
            raise AutoProfilerError(
                "this backend does not know the full set's cost in seconds before profiling: "
                "give an absolute budget (budget_is_fraction=False) or budget_unit='passes' "
                "or 'sections'")
        return budget * full

    # -- the Gymnasium API ------------------------------------------------------------------

    def _not_served(self, uri) -> str | None:
        """Why the problem ``uri`` is not among this environment's, where the dataset says:
        another split, ill-posed at this tolerance, left out of the dataset's build, or not
        in the dataset at all; None where it cannot tell (the live backend)."""
        dataset = getattr(self.backend, "dataset", None)
        if not isinstance(uri, str) or self._live or dataset is None:
            return None
        ill = getattr(self.backend, "ill_posed", {})
        if uri in ill:
            return (f"ill-posed at this tolerance, {ill[uri]}: a stricter tolerance serves "
                    "it, tolerance='kernelbench'")
        record = dataset.content.problems.get(uri)
        if record is not None:
            if self._named:
                return "not in the problems= list this environment was made with"
            if uri not in self.backend.problems(None):
                return (f"the candidates of the optimizer {self.optimizer!r} are not "
                        "recorded for it")
            return (f"it is in the {record.split} split: make the environment with "
                    f"split={record.split!r}, or split=None for every split")
        left_out = dataset.metadata.get("left_out") or {}
        if uri in left_out:
            return f"left out of this build of the dataset: {left_out[uri]}"
        return "the dataset holds no such problem"

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if options is None:
            options = {}
        if not isinstance(options, dict):  # every bad argument of the env is a ValueError
            raise ValueError(  # noqa: TRY004
                f"reset options must be a dict (keys: {', '.join(RESET_OPTIONS)}) or None, got "
                f"{type(options).__name__}")
        unknown = sorted(map(str, options.keys() - _RESET_KEYS)) if options else ()
        if unknown:
            raise ValueError(f"unknown reset option(s) {', '.join(map(repr, unknown))}: the "
                             "options are " + "; ".join(f"{k!r} ({_RESET_MEANINGS[k]})"
                                                          for k in RESET_OPTIONS))
        if "problem" in options and (not isinstance(options["problem"], str)
                                     or options["problem"] not in self._problem_set):
            why = self._not_served(options["problem"])
            raise UnknownProblemError(
                f"reset option 'problem': {options['problem']!r} is not among this "
                f"environment's problems{f' ({why})' if why else ''}: it has "
                f"{_some(self.problems)} (env.unwrapped.problems lists them)")
        budget = None
        if "budget" in options:
            budget = _finite("the budget option", options["budget"], "a finite number > 0")
            if budget <= 0:
                raise ValueError(f"the budget option must be a finite number > 0, "
                                 f"got {shown(budget)}")
        if self._live:  # before any work: the live backend's device must be on this machine
            self.backend.check_machine()
        super().reset(seed=seed)
        if "problem" in options:
            uri = options["problem"]
        else:
            # uniform over the problems (random() is a third of integers()' cost)
            uri = self.problems[int(self.np_random.random() * len(self.problems))]
        if budget is None:
            if self.budget_range is None:
                budget = self.budget
            else:  # log-uniform: 5% to 10% is as likely as 50% to 100%
                low, high = self.budget_range
                budget = low * (high / low) ** self.np_random.random()
        start = self._starts.get((uri, budget))
        if start is None:  # a budget it refuses leaves the episode running as it was
            if len(self._starts) >= _STARTS_KEPT:  # budgets drawn from a range: keep it bounded
                self._starts.clear()
            start = self._starts[(uri, budget)] = self._start(uri, budget)
        self._uri, self._episode_budget_given = uri, budget
        (self._budget_total, self._costs, self._cost_list, template, self._sorted_costs,
         self._cheapest) = start
        self._collected: list[str] = []
        self._spent = 0.0
        self._return = 0.0
        self._obs.start(template)
        self._uncollected = (1 << len(self.sections)) - 1
        self._update_mask()
        self._needs_reset = None
        return self._obs.copy(), self._info()

    def _start(self, uri: str, budget: float) -> tuple:
        """What every episode of ``uri`` at ``budget`` starts from: the budget in
        ``budget_unit``, the sections' costs (an array and a list), the observation's first
        buffers, the costs in increasing order and, for each k, the bits of the k cheapest
        sections (what a remaining budget affords is one of these)."""
        costs, cost_list, features, full, sorted_costs, cheapest = self._problem_start(uri)
        given, budget = budget, self._episode_budget(budget, full)
        if not math.isfinite(budget) or budget < sys.float_info.min:  # a reset's budget option
            raise ValueError(f"the budget {given!r} gives {uri} an episode budget of {budget!r} "
                             f"{self.budget_unit}, not a normal finite number (the costs "
                             f"divided by it would overflow): give budgets between about "
                             f"{BUDGET_BOUNDS[0]:g} and {BUDGET_BOUNDS[1]:g}")
        with np.errstate(over="ignore"):  # a tiny budget: inf, clipped at COST_CLIP
            shares = costs / budget
        template = self._obs.template(features, budget_entries(budget, full),
                                      np.minimum(shares, COST_CLIP))
        return budget, costs, cost_list, template, sorted_costs, cheapest

    def _problem_start(self, uri: str) -> tuple:
        """What no budget changes in :meth:`_start` (kept per problem: budgets drawn from a
        range make a new start every episode): the sections' costs (an array and a list),
        the static features, the full set's cost, the costs in increasing order and the
        bits of the k cheapest sections."""
        known = self._problem_starts.get(uri)
        if known is None:
            costs = np.array([self._cost(uri, s) for s in self.sections])
            order = sorted(range(len(costs)), key=lambda i: costs[i])
            cheapest = [0]
            for i in order:
                cheapest.append(cheapest[-1] | (1 << i))
            known = self._problem_starts[uri] = (
                costs, costs.tolist(), np.asarray(self.backend.features(uri), dtype=np.float32),
                self._full_cost(uri), [float(costs[i]) for i in order], cheapest)
        return known

    def _full_cost(self, uri: str) -> float | None:
        """ncu's full set's cost on this problem, in ``budget_unit`` (None where unknown).

        Raises:
            DatasetError: the cost is known and not a positive number (a record whose full
                set costs 0 passes, a dataset built before ncu's log was read across its
                warnings): a budget in that unit would be 0 or undefined, every section
                unaffordable, silently.
        """
        if self.budget_unit == "sections":
            return float(len(self.sections))
        seconds, passes = self.backend.full_cost(uri)
        cost = float(passes) if self.budget_unit == "passes" else seconds
        if cost is not None and not (math.isfinite(cost) and cost > 0):
            raise DatasetError(
                f"{uri}: ncu's full set costs {cost:g} {self.budget_unit} in its record, not a "
                f"positive number: a budget in {self.budget_unit} cannot be set on this "
                "problem (its record is damaged; rebuild the dataset with this version, or "
                "give another budget_unit)")
        return cost

    def close(self) -> None:
        """Releases the backend's processes (the live backend's judge); safe to call twice."""
        self.backend.close()
        super().close()

    def action_masks(self) -> np.ndarray:
        """The valid actions: affordable sections not yet collected, and STOP."""
        return self._mask.copy()

    def _update_mask(self) -> None:
        """The valid sections: not collected, and costing at most what is left."""
        affordable = bisect_right(self._sorted_costs,
                                  self._budget_total - self._spent + COST_SLACK)
        self._bits = self._uncollected & self._cheapest[affordable]
        self._obs.set_mask(self._bits)

    def _entry(self, action: int):
        """What collecting ``action`` adds to the observation on the current problem."""
        key = (self._uri, action)
        found = self._entries.get(key)
        if found is None:
            found = self._entries[key] = self.backend.view(self._uri, self.sections[action]).entry()
        return found

    def step(self, action):
        if self._needs_reset:
            raise gym.error.ResetNeeded(f"step() called {self._needs_reset}: call reset() to "
                                        "start an episode")
        if type(action) is not int or not 0 <= action <= self.STOP:
            action = self._action_index(action)
        if action == self.STOP or not (self._bits >> action) & 1:
            return self._finish(invalid=action != self.STOP)
        entry = self._entry(action)
        cost = self._cost_list[action]
        self._collected.append(self.sections[action])
        self._spent += cost
        self._uncollected &= ~(1 << action)
        self._obs.collect(action, entry, max(0.0, 1.0 - self._spent / self._budget_total))
        self._update_mask()
        reward = -self.cost_penalty * cost / self._budget_total if self.cost_penalty else 0.0
        self._return += reward
        if not self._bits:  # nothing affordable is left: the end
            obs, final, terminated, truncated, info = self._finish(False)
            return obs, reward + final, terminated, truncated, info
        return self._obs.copy(), reward, False, False, self._info()

    def _action_index(self, action) -> int:
        """The action as a Python int; a ``ValueError`` for anything that is not an integer."""
        value = action
        if not isinstance(value, (int, np.integer)) and hasattr(value, "__array__"):
            try:
                array = np.asarray(value)
            except Exception:  # noqa: BLE001  (an object that fails to convert: not an integer)
                array = None
            if array is not None and array.dtype.kind in "iu" and array.shape in ((), (1,)):
                value = array.reshape(())[()]
        if isinstance(value, (int, np.integer)) and 0 <= value <= self.STOP:
            return int(value)
        raise ValueError(
            f"action must be an integer of Discrete({self.STOP + 1}) (0..{self.STOP - 1} "
            f"collect a section, {self.STOP} is STOP): an int, a numpy integer or an integer "
            f"array of shape () or (1,); got {reprlib.repr(action)} ({type(action).__name__})")

    def _finish(self, invalid: bool):
        # the episode is over from here, even if the backend raises below
        self._needs_reset = "after the episode terminated"
        outcome: EpisodeOutcome = self.backend.finish(self._uri, tuple(self._collected),
                                                      rng=self.np_random)
        if not (outcome.correct and outcome.speedup) and self.incorrect_reward is not None:
            reward = self.incorrect_reward
        elif self.reward_kind == "log_speedup":
            reward = log_score(outcome.correct, outcome.speedup)
        else:
            reward = shipped_speedup(outcome.correct, outcome.speedup)
        self.last_record = EpisodeRecord(self._uri, tuple(self._collected), self._spent,
                                         outcome.transformation, outcome.correct,
                                         outcome.speedup, self._return + float(reward),
                                         self._episode_budget_given, invalid)
        info = self._info()
        info.update(candidate=outcome.transformation, reason=outcome.reason,
                    correct=outcome.correct, speedup=outcome.speedup,
                    error_kind=outcome.error_kind, error=outcome.error,
                    eager_ms=outcome.eager_ms,
                    candidate_ms=outcome.candidate_ms, invalid_action=invalid,
                    record=self.last_record)
        return self._obs.copy(), float(reward), True, False, info

    # -- what a policy may read besides the observation (documented, public) ----------------

    @property
    def problem(self) -> str | None:
        """The current episode's problem URI (None before the first ``reset``). A policy that
        uses it is not a profiling policy but an analysis tool (the hindsight oracle)."""
        return self._uri

    optimizer: str
    """The optimizer's name (the ``optimizer`` kwarg, or the dataset's own where it was None):
    what a policy learned for one optimizer checks before it acts for another."""

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The ncu metric of each entry of the observation's ``metrics`` (and
        ``metrics_known``), in order."""
        return tuple(name for _, name in self.backend.metrics)

    @property
    def episode_budget(self) -> float:
        """The current episode's budget, in ``budget_unit``."""
        return self._budget_total

    @property
    def section_costs(self) -> np.ndarray:
        """What collecting each section costs on the current problem, in ``budget_unit``
        (a copy)."""
        return self._costs.copy()

    def _info(self) -> dict:
        """A step's info: the episode so far (``_finish`` adds the outcome)."""
        return {"action_mask": self._mask_int8.copy(), "problem": self._uri,
                "sections": tuple(self._collected), "cost": self._spent}

    def render(self):
        if self.render_mode is None:
            return None
        if self._uri is None:
            raise gym.error.ResetNeeded("render() called before the first reset(): call "
                                        "reset() to start an episode")
        if self.render_mode == "rgb_array":
            return self._picture()
        return (f"{self._uri}: collected {', '.join(self._collected) or 'nothing'}; spent "
                f"{self._spent:.3g} of {self._budget_total:.3g} {self.budget_unit}")

    PICTURE_COLORS = {"spent": (31, 119, 180), "collected": (44, 160, 44),
                      "fits": (150, 150, 150), "out of reach": (214, 39, 40),
                      "track": (235, 235, 235)}

    def _picture(self, row: int = 10, width: int = 240, pad: int = 4) -> np.ndarray:
        """``render()``'s picture (``rgb_array``): (height, width, 3) uint8, a bar ``row``
        pixels high for the budget, then one per section (the class docstring)."""
        colors = {k: np.array(v, np.uint8) for k, v in self.PICTURE_COLORS.items()}
        image = np.full(((len(self.sections) + 1) * row + 2 * pad, width + 2 * pad, 3), 255,
                        np.uint8)
        total = self._budget_total

        def bar(i: int, share: float, color: np.ndarray) -> None:
            top = pad + i * row
            length = int(round(min(max(share, 0.0), 1.0) * width))
            image[top + 1:top + row - 1, pad:pad + width] = colors["track"]
            image[top + 1:top + row - 1, pad:pad + length] = color

        bar(0, self._spent / total, colors["spent"])
        collected = set(self._collected)
        for i, (name, cost) in enumerate(zip(self.sections, self._costs)):
            state = ("collected" if name in collected else
                     "fits" if self._mask[i] else "out of reach")
            bar(i + 1, cost / total, colors[state])
        return image

    # -- episode records --------------------------------------------------------------------

    def apply(self, record: EpisodeRecord) -> tuple[float, dict]:
        """Replays a recorded episode's actions (at its budget, where it has one); returns
        (total reward, final info)."""
        options = {"problem": record.problem}
        if record.budget is not None:
            options["budget"] = record.budget
        self.reset(options=options)
        total = 0.0
        for section in record.sections:
            _, r, terminated, _, info = self.step(self.sections.index(section))
            total += r
            if terminated:
                return total, info
        _, r, _, _, info = self.step(self.STOP)
        return total + r, info

    def validate(self, record: EpisodeRecord, rel_tol: float = 1e-9) -> bool:
        """Whether replaying the record gives the same candidate, speedup and reward."""
        total, info = self.apply(record)
        same_speedup = (record.speedup is None and info["speedup"] is None) or (
            record.speedup is not None and info["speedup"] is not None
            and math.isclose(record.speedup, info["speedup"], rel_tol=rel_tol))
        return (info["candidate"] == record.candidate and info["correct"] == record.correct
                and same_speedup and math.isclose(total, record.reward, rel_tol=rel_tol,
                                                  abs_tol=1e-12))


def _finite(name: str, value, accepted: str) -> float:
    """``value`` as a float, or a ``ValueError`` saying what ``name`` accepts."""
    if not is_finite_number(value):
        raise ValueError(f"{name} must be {accepted}, got {shown(value)}")
    return float(value)


def _budget_range(value) -> list[float]:
    """The ``budget_range`` kwarg as ``[low, high]``, or a ``ValueError`` saying what it
    accepts."""
    accepted = ("a list [low, high] of two finite numbers with 0 < low <= high (each "
                "episode's budget is drawn log-uniformly between them), or None")
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__") \
            or len(value) != 2:
        raise ValueError(f"budget_range must be {accepted}, got {shown(value)}")
    low, high = (_finite("budget_range", v, accepted) for v in value)
    if not 0 < low <= high:
        raise ValueError(f"budget_range must be {accepted}, got {shown(value)}")
    if not math.isfinite(high / low):  # the draw, low * (high / low) ** u, would be inf
        raise ValueError(f"budget_range must be {accepted} and high / low a finite number "
                         f"(at most about 1.8e308), got {shown(value)}")
    if not BUDGET_BOUNDS[0] <= low <= high <= BUDGET_BOUNDS[1]:
        raise ValueError(f"budget_range must be {accepted}, each between {BUDGET_BOUNDS[0]:g} "
                         f"and {BUDGET_BOUNDS[1]:g} (past them a float overflows), got "
                         f"{shown(value)}")
    return [low, high]


BUDGET_BOUNDS = (1e-300, 1e300)
"""The budgets ``make`` accepts (and ``budget_range``'s ends): times a problem's full-set
cost, or divided into its sections' costs, a float overflows far past them."""


def _problem_list(problems) -> list[str]:
    """The ``problems`` kwarg as a list of URIs, or a ``ValueError`` saying what it accepts."""
    if isinstance(problems, (str, bytes)):  # every bad argument of the env is a ValueError
        raise ValueError(  # noqa: TRY004
            f"problems must be a list of problem URIs, not a string: give problems=[{problems!r}]")
    try:
        problems = list(problems)
    except TypeError:
        raise ValueError(f"problems must be a list of problem URIs (or None: the split's), "
                         f"got {type(problems).__name__}") from None
    if not problems:
        raise ValueError("problems must name at least one problem URI; give problems=None "
                         "(the default) for the split's problems")
    bad = [p for p in problems if not isinstance(p, str)]
    if bad:
        raise ValueError(f"problems must be problem URI strings, got {bad[0]!r} "
                         f"({type(bad[0]).__name__})")
    return problems


def _some(names: list[str], n: int = 5) -> str:
    """The first ``n`` names, and how many more."""
    shown = ", ".join(names[:n])
    return f"{len(names)} problems: {shown}" + (", ..." if len(names) > n else "")
