"""Errors, typed by domain. Each says what went wrong and what to do about it.

Catch :class:`AutoProfilerError` to handle any of them; catch a subclass to handle one domain.
"""

from __future__ import annotations

import functools
import os


class AutoProfilerError(Exception):
    """Base class of every error this package raises on purpose."""


class ProblemError(AutoProfilerError):
    """A problem file is broken: it does not import, lacks ``Model`` / ``get_inputs`` /
    ``get_init_inputs``, or its reference forward raises or gives a degenerate output.

    Attributes:
        path: the problem file (or URI) at fault.
        cause: one line saying what is wrong.
        hint: what to do about it, or "".
    """

    def __init__(self, path: str, cause: str, hint: str = "") -> None:
        self.path = str(path)
        self.cause = cause
        self.hint = hint
        message = f"{self.path}: {cause}"
        if hint:
            message += f" ({hint})"
        super().__init__(message)


class ReferenceOutOfMemoryError(ProblemError):
    """A problem's reference ran out of GPU memory. Its own fault where it had the GPU to
    itself; on a GPU shared with other processes (a recorder's warm workers) maybe theirs:
    :meth:`~autoprofiler_env.harness.Evaluator.evaluate` gives it as an ``out_of_memory``
    verdict, which a recorder does not keep while other processes hold the GPU."""


class ProblemNotFoundError(ProblemError):
    """A URI or path names no known problem."""


class ProblemTimeoutError(ProblemError):
    """A problem file took longer than its time limit to import, or to build and trace, in the
    worker that imports files in isolation (``autoprofiler problems --source``).

    Attributes:
        phase: ``"import"`` or ``"trace"``.
        limit_s: the limit it exceeded, in seconds.
        network: the first ``host:port`` it tried to reach while it ran, or None: an import
            that waits on the network (a model hub, offline) is the usual slow import.
    """

    def __init__(self, path: str, cause: str, hint: str = "", *, phase: str, limit_s: float,
                 network: str | None = None) -> None:
        super().__init__(path, cause, hint)
        self.phase, self.limit_s, self.network = phase, limit_s, network


class ProblemWorkerError(AutoProfilerError):
    """The worker process that imports problem files in isolation could not start or answer.

    Not the fault of any one file (those are :class:`ProblemError`): every file would fail the
    same way, so a scan stops. The worker's traceback, if any, is on stderr.
    """


class EvaluationError(AutoProfilerError):
    """The harness itself could not evaluate (bad arguments, no such device, the worker could
    not start). A faulty *candidate* is not an error: it is a result with ``error_kind`` set."""


class ProfilingError(AutoProfilerError):
    """Nsight Compute could not profile (base class of the profiler's errors)."""


class NcuNotFoundError(ProfilingError):
    """There is no ``ncu`` on the PATH (nor where ``--ncu`` / ``NCU`` points)."""


class NcuPermissionError(ProfilingError):
    """ncu may not read the GPU's performance counters (``ERR_NVGPUCTRPERM``)."""


class NcuUnsupportedError(ProfilingError):
    """ncu cannot profile on this machine (``LibraryNotLoaded``: a runtime or sandbox, such as
    gVisor, that does not expose the counters)."""


class UnknownSectionError(ProfilingError):
    """A section name that this ncu version does not know."""


class ProfiledProgramError(ProfilingError):
    """The profiled program crashed or hung under ncu's replay."""


class ReportReadError(ProfilingError):
    """An ncu report or its exported pages could not be read."""


class UnknownProblemError(AutoProfilerError, ValueError):
    """A problem asked of an environment that is not one of its problems
    (``reset(options={"problem": ...})`` names one of ``env.unwrapped.problems``: its split's,
    or the ``problems`` kwarg's). A ``ValueError`` too, as every bad argument of the
    environment is."""


class EmptySplitError(AutoProfilerError, ValueError):
    """An environment asked for a split (train, val or test) its dataset holds no problem of
    (a dataset of a few problems of your own: the build deals their splits). ``split``: the
    one asked; ``held``:
    the splits the dataset has. A ``ValueError`` too, as every bad argument of the
    environment is."""

    def __init__(self, message: str, split: str | None, held: tuple[str, ...]) -> None:
        super().__init__(message)
        self.split, self.held = split, held


class UnknownSplitError(AutoProfilerError, ValueError):
    """An environment asked for a split that is none of train, val and test (a misspelt
    one); the message names the dataset's splits. A ``ValueError`` too, as every bad argument
    of the environment is."""


class RenderModeError(AutoProfilerError, ValueError, TypeError):
    """An environment was made with a ``render_mode`` that is not one of its
    ``metadata["render_modes"]``; the message names them. A ``ValueError`` (a bad argument of
    the environment), and a ``TypeError`` for stable-baselines3: its ``make_vec_env`` asks
    every environment for ``render_mode="rgb_array"`` and, on a ``TypeError``, makes it
    again without a render mode."""


class PolicyError(AutoProfilerError, TypeError, ValueError):
    """A policy that does not keep the one policy interface (:mod:`autoprofiler_env.policy`:
    ``predict`` returns ``(action, state)``), or two policies given one name. A
    ``TypeError`` or a ``ValueError`` too, as a bad argument of Python's own is."""


class ConfigError(AutoProfilerError):
    """A config file (a training config, an experiment config) that cannot be used: not
    readable, not YAML, a key given twice, an unknown key or a bad value. The message names
    the file and the key, and says what is accepted."""


class FolderBusyError(AutoProfilerError):
    """Another process is writing the folder a command writes (a training run's, a learned
    tree's, an experiment's, a recording's): two runs given one ``--out`` would interleave
    their files. The message names the process; wait for it, or give another ``--out``."""


class MachineError(AutoProfilerError):
    """This machine cannot run a GPU path (profiling, recording, optimizing live): no CUDA
    device, or no Nsight Compute; or not a POSIX system (Windows), which the judge's worker
    processes and profiling need."""


class OptimizationError(AutoProfilerError):
    """An optimizer could not produce a candidate (a transformation that does not apply to
    the problem, a program it cannot rewrite)."""


class OptimizerSpecError(AutoProfilerError, ValueError):
    """An optimizer of your own, ``py:MODULE:ATTR``, that cannot be used: its module does not
    import (not found, or its import raised), it has no ATTR, ATTR cannot be called with no
    arguments or gives no object with ``optimize``, or it was given to the replay, which has
    no outcomes recorded for it. The message says what is accepted. What ``optimize`` does in
    an episode is not this error: raising, or returning neither a
    :class:`~autoprofiler_env.optimizers.Candidate` nor a source string, is that episode's
    incorrect candidate. A ``ValueError`` too, as every bad argument of the environment is."""


UNREACHED_KINDS = ("connection", "http")
"""The kinds of :class:`LLMError` that are never the model's outcome: no reply came (a
``timeout`` is one where a server's, not a local generation's: its raiser says)."""


class LLMError(OptimizationError):
    """The language model gave no usable candidate: a time-out, a refused or failed request,
    an empty reply, a reply without code, or code that does not parse.

    Attributes:
        kind: ``timeout``, ``http``, ``connection``, ``empty``, ``no_code``, ``syntax``,
            ``truncated`` (the reply was cut off inside its code) or ``context`` (the prompt
            does not fit the model's context: a local model's, or an endpoint's HTTP 400
            saying so).
        status: the HTTP status of an error the server answered (an ``http`` error; None
            for a reply that is not JSON, and for every other kind).
        unreached: no reply came from the model: the endpoint could not be reached, failed
            or refused (``connection``, ``http``), or did not answer in time (a server's
            ``timeout``; a local generation cut by its time is the model's own, not this).
            Such an error says nothing of the model's work: the optimizer raises it, where it
            returns the others as an incorrect candidate, and a recording asks again.
    """

    def __init__(self, kind: str, message: str, status: int | None = None,
                 unreached: bool | None = None) -> None:
        self.kind = kind
        self.status = status
        self.unreached = kind in UNREACHED_KINDS if unreached is None else unreached
        super().__init__(f"{kind}: {message}")

    @property
    def refused(self) -> bool:
        """The server refused the request itself: an HTTP 4xx other than 408 (request
        timeout) and 429 (too many requests), such as a bad key (401), a model it does not
        serve (404) or a request it cannot take (400, 422), or a redirect (3xx, never
        followed). Asked again the same way, it answers the same."""
        return self.status is not None and 300 <= self.status < 500 and self.status not in (
            408, 429)


class ToleranceError(EvaluationError, ValueError):
    """A tolerance that is no preset's name and no number >= 0 (or "ATOL,RTOL"). A
    ``ValueError`` too, as every bad argument of the environment is."""


class DatasetError(AutoProfilerError):
    """A dataset file is missing, corrupted (bad checksum, bad JSON) or of another schema, or
    a query asks for something it does not hold."""


class NotRecordedError(DatasetError):
    """The dataset holds no outcome for this key (a problem, section set or candidate that was
    not recorded). The replay never invents one: record it, or choose a named fallback."""


class UnknownDatasetError(DatasetError, ValueError):
    """A dataset was named by a name that no shipped dataset has, and no file has that path.
    The message lists the shipped names (:data:`autoprofiler_env.dataset.names.SHIPPED`). A
    ``ValueError`` too, as every bad argument of the environment is."""


class DatasetNotShippedError(DatasetError):
    """A shipped dataset's name whose file this install does not hold yet (it is recorded on a
    GPU and built first). The message says how to record and build it, and where it goes."""


class SourceMismatchError(ProblemError):
    """A problem file is not the one a recording or a dataset names: its sha256 differs from
    the recorded one (another KernelBench commit, or an edited file). Check out the recorded
    commit, or record the file anew."""


class AutoProfilerWarning(UserWarning):
    """What this package warns of (a problem left out, a run resumed without something):
    ``warnings.simplefilter("ignore", AutoProfilerWarning)`` silences them all."""


def warn(message: str, category: type[Warning] = AutoProfilerWarning) -> None:
    """``warnings.warn`` attributed to the user's line: the first caller outside this
    project's packages and the libraries that call into them (Gymnasium's ``make``,
    stable-baselines3's vector environments), however deep the warning is raised, as
    pandas' ``find_stack_level`` does. A fixed ``stacklevel`` named a line of ``gym.make`` or
    of the command line's own code. Filter them by their category (``AutoProfilerWarning``),
    not by module: the module a warning is attributed to is the caller's."""
    import sys
    import warnings

    inside = _called_through()
    level, frame = 2, sys._getframe(1)  # 2: the caller of warn()
    ours = level  # the outermost frame of this project's seen so far
    while True:
        name = frame.f_code.co_filename
        if name.startswith(inside):
            ours = level
        elif not name.startswith("<frozen ") and name != _runpy_file():  # Python's own
            break  # the user's line (runpy and importlib, frozen since 3.11, are passed)
        if frame.f_back is None:  # no user's line above: a script of the project's own
            level = ours  # (python experiments/x.py, python -m experiments.x) names its line
            break
        level, frame = level + 1, frame.f_back
    warnings.warn(message, category, stacklevel=level)


@functools.cache
def _runpy_file() -> str:
    """runpy's file, where it is one (Python 3.10; frozen, ``<frozen runpy>``, since 3.11)."""
    import runpy

    return getattr(runpy, "__file__", None) or "<frozen runpy>"


@functools.cache
def _called_through() -> tuple[str, ...]:
    """The folders of this project's packages and of the libraries above, as imports name
    their files (absolute, links not resolved)."""
    from importlib.util import find_spec

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    folders = [os.path.join(root, p) for p in ("autoprofiler_env", "agents", "baselines",
                                               "experiments")]
    for library in ("gymnasium", "stable_baselines3", "sb3_contrib"):
        spec = find_spec(library)  # found, not imported
        if spec is not None and spec.submodule_search_locations:
            folders += list(spec.submodule_search_locations)
    return tuple(os.path.join(f, "") for f in folders)


def install_hint(extra: str) -> str:
    """How to install an extra of this package (setup.cfg's ``extras_require``): its packages
    by name, as this install's metadata lists them (a wheel's user has no ``.`` to install
    ``.[extra]`` from), and the extra itself in a clone of the repository."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        listed = requires("autoprofiler-env") or []
    except PackageNotFoundError:  # run from a checkout without an install
        listed = []
    marker = f'extra == "{extra}"'
    packages = [r.split(";")[0].strip() for r in listed if marker in r.replace("'", '"')]
    named = " ".join(f"'{p}'" for p in packages) or f"the packages of its {extra!r} extra"
    return f"pip install {named} (in a clone of the repository: pip install -e '.[{extra}]')"
