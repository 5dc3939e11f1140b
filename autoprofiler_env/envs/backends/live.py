"""The live backend: an episode run for real on a GPU (ncu, the optimizer, the harness)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import numpy as np

from autoprofiler_env.envs.backends.base import EpisodeOutcome, llm_model, warn_ill_posed
from autoprofiler_env.envs.observation import SectionView, key_metrics, section_view
from autoprofiler_env.errors import AutoProfilerError, MachineError, ProfilingError
from autoprofiler_env.features import static_features
from autoprofiler_env.numeric import is_finite_number
from autoprofiler_env.optimizers import (
    DEFAULT_OPTIMIZER,
    REFERENCE_OPTIMIZERS,
    reference_optimizer,
)
from autoprofiler_env.optimizers.custom import is_custom, load_optimizer
from autoprofiler_env.problems.isolated import (
    DEFAULT_IMPORT_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    IsolatedFeatures,
)
from autoprofiler_env.problems.loaders import SUITE_DIR
from autoprofiler_env.profiler import MAX_KERNELS, MAX_OPS, profile_problems
from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS, load_catalogue
from autoprofiler_env.profiler.merge import merge_profiles
from autoprofiler_env.profiler.records import Profile
from autoprofiler_env.pyspec import normalized

TRANSIENT = ("crash", "timing_mismatch", "out_of_memory")
"""Verdicts that a second judgement may not repeat: the live backend judges once more. Not a
``timeout``: a candidate that outlasts the limit is nearly always the code's (a hang, an endless
loop, a compile longer than the limit), and judging it again would double the wait."""
TIMEOUT_S = 600.0
"""The seconds the live backend's judge allows one candidate by default (``timeout_s``): the
suite recording's limit (``autoprofiler record --candidate-timeout``, 600 s:
:data:`autoprofiler_env.dataset.record.candidates.CANDIDATE_TIMEOUT_S`), so that a slow
compile the dataset judged is judged live too. KernelBench's recording allowed 180 s
(:data:`autoprofiler_env.dataset.record.kernelbench.CANDIDATE_TIMEOUT_S`): ``timeout_s=180``
judges as it did."""
ERROR_CHARS = 1000
"""At most this many characters of the harness's reason are kept in an episode's ``error``."""
EVIDENCE = ("ncu", "recorded")
"""Where a live episode's profiles come from: ``ncu`` runs on this machine's GPU, or the
dataset's ``recorded`` ones (what the replay shows), with only the judging live."""
IMPORT_SETTING = ("AutoProfilerLive-v0's import_timeout_s=S (autoprofiler optimize "
                  "--import-timeout S)")
"""How a live user allows a problem file's import more time (named in the time-out's hint)."""


def candidate_path(value) -> Path:
    """A candidate file's path (``candidate_file``), made absolute: the process may change
    directory before ncu runs it.

    Raises:
        ValueError: ``value`` is not a path (a str or Path), or is blank.
    """
    if not isinstance(value, (str, Path)) or not str(value).strip():
        raise ValueError(f"candidate_file must be a file's path, got {value!r}")
    return Path(value).resolve()


def require_cuda(device: str, need: str, hint: str = "") -> None:
    """Returns where ``device`` is not a CUDA device (``cpu``) or torch sees a CUDA device on
    this machine; raises otherwise.

    Raises:
        MachineError: ``device`` is ``cuda`` or ``cuda:N`` and torch sees no CUDA device:
            "``need``; this machine has no CUDA device (...)", then ``hint`` (what to do).
    """
    if not str(device).startswith("cuda"):
        return
    import torch

    if not torch.cuda.is_available():
        raise MachineError(f"{need}; this machine has no CUDA device (torch "
                           f"{torch.__version__} sees none)" + (f": {hint}" if hint else ""))


class LiveBackend:
    """Runs the episode for real on a GPU: each collected section is an ncu run of the problem
    with that section alone (so its evidence and cost are what the replay records), then the
    reference optimizer writes the candidate from the merged profile and the harness judges and
    times it. Nondeterministic: timings and sampled counters vary between runs.

    Each (problem, section) is profiled once per backend, and each distinct candidate (its
    source) judged once per problem (twice where the first verdict was a crash, an unexplained
    timing or the judge out of memory; a timeout is kept at once: :meth:`_judge`), each
    candidate allowed ``timeout_s`` seconds (None: :data:`TIMEOUT_S`): an episode that
    collects what another did, or leads the optimizer to the same code, gets the same
    outcome, as in the replay (one recorded outcome per candidate), and costs no GPU time;
    ``identity`` (the program unchanged) is 1.0x without a judgement, as in the replay.
    ``profiled`` and ``judged`` list what this backend ran.

    ``candidate_file``: a file whose ``ModelNew`` (your kernel) ncu profiles in place of the
    one problem's ``Model``, on the problem's inputs (``autoprofiler optimize --profile-only
    --candidate``): the policy walks on the problem's static features, costs and budget and
    reads your kernel's metrics. Such a backend collects profiles only: no optimizer is run
    on them, as they are not of the program an optimizer rewrites, so :meth:`finish` refuses,
    and with it any step that ends an episode (STOP, or a collect that leaves nothing
    affordable, after collecting it); what was collected stays readable (:meth:`profile`).

    ``evidence="recorded"`` (with a ``dataset``): the profiles are the ones the dataset
    recorded for the problem, so that no ncu runs (a machine whose counters are not
    readable, ERR_NVGPUCTRPERM) and the observation is the replay's: what differs from the
    replay is the judging alone. ``harness``: :class:`~autoprofiler_env.harness.HarnessConfig`
    fields over the defaults (e.g. ``{"size": "smoke"}`` for a quick check of the pipeline;
    ``device`` and ``tolerance`` come from their own arguments).

    A problem file that is not the project's suite's is someone else's code: its static
    features (at ``reset``) are computed as ``autoprofiler problems --source`` computes them,
    in a worker process (:class:`~autoprofiler_env.problems.isolated.IsolatedFeatures`, one
    per backend, started at the first such file and ended by :meth:`close`), its import
    allowed ``import_timeout_s`` seconds (None: 5, as ``autoprofiler problems``) and its trace
    55 more, so that a file that hangs or
    waits on the network when imported is a
    :class:`~autoprofiler_env.errors.ProblemTimeoutError` naming it, not a stall. The suite's
    files are traced in this process, as its manifest was built.

    With a ``dataset`` (a shipped one's name or a file), its records name the problems: a URI
    of the dataset, or all of its problems when ``problems`` is None (less those ill-posed at
    ``tolerance``, which the replay leaves out too:
    :meth:`~autoprofiler_env.dataset.Dataset.ill_posed`), each with the record's URI, level
    and split, so that live episodes compare with the replay's. A KernelBench
    problem of the dataset is read from the checkout ``source``; a file given by its path
    whose KernelBench level and name the dataset recorded keeps the record's URI too. Either
    way the file is checked against the recorded sha256 (a
    :class:`~autoprofiler_env.errors.SourceMismatchError` says which commit was recorded).
    ``optimizer`` None: the dataset's own
    (:meth:`~autoprofiler_env.dataset.Dataset.default_optimizer`), else
    :data:`~autoprofiler_env.optimizers.DEFAULT_OPTIMIZER`; ``py:MODULE:ATTR``: an optimizer of
    your own (:mod:`autoprofiler_env.optimizers.custom`), loaded here (an
    :class:`~autoprofiler_env.errors.OptimizerSpecError` says what is wrong with it)."""

    def __init__(self, problems: list[str] | None = None, device: str = "cuda",
                 ncu: str | None = None, timeout_s: float | None = None,
                 optimizer: str | None = None, tolerance: str | float | None = None,
                 dataset=None, source: str | Path | None = None, evidence: str = "ncu",
                 harness: dict | None = None,
                 import_timeout_s: float | None = None,
                 candidate_file: str | Path | None = None) -> None:
        from dataclasses import fields

        from autoprofiler_env.harness import Evaluator, HarnessConfig, records
        from autoprofiler_env.problems import load_problem, load_suite

        if evidence not in EVIDENCE:
            raise ValueError(f"evidence must be one of {EVIDENCE}, got {evidence!r}")
        if evidence == "recorded" and dataset is None:
            raise ValueError("evidence='recorded' shows the profiles a dataset recorded: give "
                             "dataset= too (e.g. 'suite')")
        if import_timeout_s is None:
            import_timeout_s = DEFAULT_IMPORT_TIMEOUT_S
        if not is_finite_number(import_timeout_s) or import_timeout_s <= 0:
            raise ValueError(f"import_timeout_s must be a finite number of seconds > 0, got "
                             f"{import_timeout_s!r}")
        if timeout_s is None:
            timeout_s = TIMEOUT_S
        if not is_finite_number(timeout_s) or timeout_s <= 0:
            raise ValueError(f"timeout_s must be a finite number of seconds > 0 (what the "
                             f"judge allows one candidate), got {timeout_s!r}")
        harness = dict(harness or {})
        settable = {f.name for f in fields(records.HarnessConfig)} - {"device", "tolerance"}
        if set(harness) - settable:
            raise ValueError(f"harness: unknown setting {sorted(set(harness) - settable)[0]!r}; "
                             f"it takes {', '.join(sorted(settable))} (device and tolerance "
                             "are arguments of their own)")
        self.evidence = evidence
        self.device = device
        self.dataset = None
        if dataset is not None:
            from autoprofiler_env.dataset import Dataset

            self.dataset = dataset if isinstance(dataset, Dataset) else Dataset.load(dataset)
        elif source is not None:
            raise ValueError("source names the KernelBench checkout a KernelBench dataset's "
                             "problems are read from: give dataset= too (e.g. 'kernelbench'), "
                             "or name the files in problems=")
        if self.dataset is None:
            loaded = [load_problem(u) for u in problems] if problems else load_suite()
        else:
            loaded = self.dataset.load_problems(problems or None, source)
            ill_posed = {} if problems else self.dataset.ill_posed(tolerance)
            if ill_posed:  # as the replay does; one named in problems is refused by the judge
                warn_ill_posed(ill_posed)
                loaded = [p for p in loaded if p.uri not in ill_posed]
        if optimizer is None:
            optimizer = (self.dataset.default_optimizer() if self.dataset is not None
                         else DEFAULT_OPTIMIZER)
        elif is_custom(optimizer):  # named as its candidates are (" py: m:C" is py:m:C)
            optimizer = normalized(optimizer)
        self.optimizer_name = optimizer
        self._problems = {}
        for p in loaded:
            other = self._problems.setdefault(p.uri, p)
            if other.path != p.path:  # the episode, the caches and the records go by URI
                raise ValueError(
                    f"problems: {other.path} and {p.path} are both {p.uri} (a file of your "
                    "own is named by its folder's name and its own): rename one, or run "
                    "them in separate environments")
        self._candidate = None
        if candidate_file is not None:  # your kernel, profiled in place of the one Model
            candidate_file = candidate_path(candidate_file)
            if len(loaded) != 1:
                raise ValueError(f"candidate_file: a candidate is profiled on one problem's "
                                 f"inputs; this backend holds {len(loaded)}: give "
                                 "problems=[one]")
            if evidence == "recorded":
                raise ValueError("candidate_file: evidence='recorded' shows the problem's "
                                 "recorded profiles; a candidate is profiled with ncu "
                                 "(evidence='ncu')")
            self._candidate = loaded[0].with_candidate(candidate_file)
        # a user names a problem by a suite URI, a suite name or a file path; the episode
        # and every record name it by its URI
        self._uris = {str(ref): p.uri for ref, p in zip(problems or [], loaded)}
        self.sections = ACTION_SECTIONS
        self.metrics = key_metrics(self.sections)
        model = llm_model(optimizer)
        # the reference optimizers read the eager time (launch overhead), and their identity
        # is the program unchanged; an LLM's or your own's is whatever its code is
        self._reference = optimizer in REFERENCE_OPTIMIZERS
        config = HarnessConfig(device=device,
                               tolerance=None if tolerance is None else str(tolerance), **harness)
        if is_custom(optimizer):
            self.optimizer = load_optimizer(optimizer)
        elif model is None:
            self.optimizer = reference_optimizer(optimizer, device=device, tolerance=tolerance)
        else:
            import os

            from autoprofiler_env.optimizers.llm import LLMOptimizer, OpenAIChatBackend
            from autoprofiler_env.optimizers.llm.cache import ENV_CACHE

            # the prompt states the tolerance the candidate is judged at; each request is
            # asked once (in memory, and in $AUTOPROFILER_LLM_CACHE's file where set)
            self.optimizer = LLMOptimizer(OpenAIChatBackend(model=model),
                                          tolerance=config.tolerance_for("float32"),
                                          cache=os.environ.get(ENV_CACHE) or True)
        self.evaluator = Evaluator(config, timeout_s=timeout_s)
        self.ncu = ncu
        if evidence == "recorded":
            unrecorded = [u for u in self._problems if not self._recorded_costs(u)]
            if unrecorded:
                raise ProfilingError(f"evidence='recorded': the dataset did not record "
                                     f"{unrecorded[0]}; profile it with ncu (evidence='ncu')")
        # the trace keeps the time the problems command's defaults leave it (55 s)
        self._isolated = IsolatedFeatures(
            timeout_s=import_timeout_s + DEFAULT_TIMEOUT_S - DEFAULT_IMPORT_TIMEOUT_S,
            import_timeout_s=import_timeout_s, settings=(None, IMPORT_SETTING))
        self._features: dict[str, np.ndarray] = {}
        self._profiles: dict[tuple[str, str], Profile] = {}
        self._eager: dict[str, float] = {}
        self._outcomes: dict[tuple[str, str], EpisodeOutcome] = {}
        self.profiled: list[tuple[str, str]] = []
        """(problem, section) of each ncu run this backend made, in order (a candidate's
        problem named ``<uri>#ModelNew``)."""
        self.judged: list[tuple[str, str]] = []
        """(problem, candidate) of each judgement this backend made, in order."""

    @property
    def candidate_file(self) -> Path | None:
        """The file whose ``ModelNew`` ncu profiles in place of the problem's ``Model``
        (``candidate_file``, made absolute); None: the problem's own."""
        return None if self._candidate is None else self._candidate.candidate

    def check_machine(self) -> None:
        """Checks that this machine has the backend's device, before any work (the live
        environment's ``reset`` calls it; :meth:`finish` too).

        Raises:
            MachineError: the device is a CUDA one and torch sees no CUDA device here.
        """
        hint = ("on a CPU, use the replay environment, gym.make('AutoProfiler-v0'), "
                "whose episodes were recorded on a GPU (device='cpu' runs the live "
                "environment's judging on the CPU, a check of its pipeline)")
        if is_custom(self.optimizer_name) or llm_model(self.optimizer_name) is not None:
            # the replay serves only the outcomes it recorded: the recorded profiles
            hint = (f"on a CPU, hand the optimizer a suite problem's profiles recorded on a "
                    f"GPU and judge it on the CPU at smoke size: gym.make('AutoProfilerLive-v0', "
                    f"dataset='suite', evidence='recorded', optimizer="
                    f"{self.optimizer_name!r}, problems=['relu_16384x16384'], device='cpu', "
                    f"budget_unit='passes', budget=1.0, harness={{'size': 'smoke'}})")
        require_cuda(self.device, f"the live environment (AutoProfilerLive-v0) on device "
                     f"{self.device!r} needs a CUDA GPU", hint)

    def close(self) -> None:
        """Stops the harness's judging processes (the next judgement starts new ones) and the
        feature worker; what was profiled and judged stays cached."""
        self.evaluator.close()
        self._isolated.close()

    def problems(self, split: str | None) -> list[str]:
        return [u for u, p in self._problems.items() if split is None or p.split == split]

    def uri_of(self, ref: str) -> str:
        """The URI of a problem given as it was given to the backend (a path, a name)."""
        return self._uris.get(str(ref), str(ref))

    def features(self, uri: str) -> np.ndarray:
        """The static feature vector (cached: do not modify it in place).

        Raises:
            ProblemTimeoutError: a file outside the suite took longer to import than
                ``import_timeout_s`` (or to trace than its limit).
            ProblemError: the file does not import or trace, or kills its process.
        """
        if uri not in self._features:
            problem = self._problems[uri]
            if problem.path.resolve().is_relative_to(SUITE_DIR.resolve()):
                features = static_features(problem)
            else:  # someone else's code: it may hang, crash or wait on the network
                features = self._isolated.static_features(problem)
            self._features[uri] = features.vector()
        return self._features[uri]

    def _recorded_costs(self, uri: str) -> bool:
        return self.dataset is not None and uri in self.dataset.content.problems

    def full_cost(self, uri: str) -> tuple[float | None, int]:
        """(seconds, passes) of the full set as the dataset recorded it on this problem (the
        replay's, so that a budget means what it means there); (None, passes) without a
        record: its seconds are unknown before profiling it."""
        if self._recorded_costs(uri):
            return self.dataset.full_cost(uri)
        return None, load_catalogue().set_passes["full"]

    def cost(self, uri: str, section: str) -> tuple[float | None, int]:
        """(seconds, passes) of collecting the section alone, as the dataset recorded it on
        this problem (the costs a policy saw in the replay); (None, passes) without a record:
        the passes the catalogue measured for the section alone (ncu replays each kernel that
        many times), its seconds unknown before profiling."""
        if self._recorded_costs(uri):
            cost = self.dataset.cost(uri, [section])
            return cost.replay_s, cost.passes
        passes = load_catalogue().section(section).passes
        if passes is None:
            raise ProfilingError(f"the section catalogue has no measured passes for {section}: "
                                 "rebuild it (python -m experiments.studies.build_catalogue)")
        return None, passes

    def _profile_alone(self, uri: str, section: str) -> Profile:
        key = (uri, section)
        if key not in self._profiles:
            if self.evidence == "recorded":
                self._profiles[key] = self.dataset.profile(uri, [section])
            else:
                recorded = self.dataset and self.dataset.launch_capped(uri)
                problem = self._candidate or self._problems[uri]
                profiles, failures = profile_problems(  # the recording's caps
                    [problem], [section], ncu=self.ncu,
                    max_ops=(self.dataset and self.dataset.max_ops) or MAX_OPS,
                    max_kernels=None if recorded is False else MAX_KERNELS,
                    device=self.device)  # where the candidate is judged too
                if failures:
                    raise ProfilingError(f"{uri}: {failures[0].error}")
                self._profiles[key] = profiles[0]
                self.profiled.append((problem.uri, section))
        return self._profiles[key]

    def view(self, uri: str, section: str) -> SectionView:
        return section_view(self._profile_alone(uri, section), section, self.metrics)

    def profile(self, uri: str, sections) -> Profile:
        if self.evidence == "recorded":  # merged as the replay merges them
            return self.dataset.profile(uri, sections)
        parts = [self._profile_alone(uri, s) for s in sections]
        return merge_profiles(uri, tuple(sections), parts)

    def _eager_ms(self, uri: str) -> float:
        """The eager program's median time, timed once per problem by the harness (free: no
        profiling), as the recording timed it; with recorded evidence, the recorded one (the
        optimizer then reads exactly what it reads in the replay)."""
        if uri not in self._eager:
            recorded = (self.dataset.record(uri).eager.get("median_ms")
                        if self.evidence == "recorded" else None)
            self._eager[uri] = (recorded if recorded is not None else
                                self.evaluator.reference(self._problems[uri]).timing.median_ms)
        return self._eager[uri]

    def finish(self, uri: str, sections: tuple[str, ...],
               rng: np.random.Generator | None = None) -> EpisodeOutcome:
        if self._candidate is not None:
            raise AutoProfilerError(
                f"this environment profiles the candidate {self.candidate_file} in place of "
                f"{uri}'s Model, which an optimizer rewrites: it collects profiles only, and "
                f"an episode cannot end in an optimization; the sections collected stay "
                f"readable: env.unwrapped.backend.profile({uri!r}, {tuple(sections)!r}) "
                "(`autoprofiler optimize FILE --profile-only --candidate MINE` stops before "
                "the step that would end the episode)")
        self.check_machine()  # not deep in the harness's worker
        problem = self._problems[uri]
        profile = self.profile(uri, sections) if sections else None
        if self._reference:  # the reference optimizers read the eager time (launch overhead)
            candidate = self.optimizer.optimize(problem, profile, eager_ms=self._eager_ms(uri))
        else:
            candidate = self.optimizer.optimize(problem, profile)
        if candidate.error:  # an LLM reply with no code, an optimizer that raised: judged as
            # incorrect, never run ("<kind>: <message>")
            kind, _, message = candidate.error.partition(":")
            return EpisodeOutcome(candidate.producer, candidate.reason, False, None, kind,
                                  error=_trimmed(message.strip() or candidate.error))
        if candidate.producer == "identity" and self._reference:
            # the program unchanged: eager's own time, 1.0x by definition (as in the replay)
            eager_ms = self._eager_ms(uri)
            return EpisodeOutcome("identity", candidate.reason, True, 1.0, None, eager_ms,
                                  eager_ms)
        key = (uri, hashlib.sha256(candidate.source.encode()).hexdigest())
        if key not in self._outcomes:
            result = self._judge(problem, candidate)
            self._outcomes[key] = EpisodeOutcome(
                candidate.producer, candidate.reason, result.correct, result.speedup,
                result.error_name, result.reference_ms, result.candidate_ms,
                None if result.correct else _trimmed(result.error_message))
        # the same code, reached by another profile: its outcome, this episode's reason
        return replace(self._outcomes[key], transformation=candidate.producer,
                       reason=candidate.reason)

    def _judge(self, problem, candidate):
        """The harness's verdict on ``candidate``, judged again once where the first verdict
        may be the machine's hiccup rather than the code's (:data:`TRANSIENT`: a crashed
        worker, a timing its clock does not explain, the judge out of memory): kept for every
        episode that reaches the code, it must not be a fluke.

        A ``timeout`` is kept at once: a candidate that outlasts ``timeout_s`` is nearly always
        the code's (its forward hangs, loops, or compiles for longer than the limit), and a
        second judgement would only double the wait (2 x ``timeout_s``). Where a slow but
        finite candidate is what outlasts it, give a larger ``timeout_s``."""
        for _ in range(2):
            result = self.evaluator.evaluate(problem, candidate.source)
            self.judged.append((problem.uri, candidate.producer))
            if result.error_name not in TRANSIENT:
                break
        return result


def _trimmed(message: str | None) -> str | None:
    """The harness's reason, at most :data:`ERROR_CHARS` characters (None where empty)."""
    if not message:
        return None
    return message if len(message) <= ERROR_CHARS else message[:ERROR_CHARS - 3] + "..."
