"""An optimizer of your own, ``py:MODULE:ATTR`` (the live environment's ``optimizer``,
``autoprofiler optimize --optimizer``).

ATTR (dotted for a nested one) is an optimizer -- an object with ``optimize(problem,
profile)`` -- or a class or function called with no arguments that returns one (a function
reads its own settings: the environment passes none). ``optimize`` is called once per
episode, as every optimizer is, with the :class:`~autoprofiler_env.problems.Problem` and the
merged :class:`~autoprofiler_env.profiler.records.Profile` of the sections collected (None
with none), and returns the ``ModelNew`` source as a string (its candidate is then named by
the spec), or a :class:`~autoprofiler_env.optimizers.Candidate` (its own ``producer``,
``reason``; ``error`` set: no program, judged incorrect unrun). Where ``optimize`` raises,
the episode's candidate is incorrect with ``error_kind`` ``optimizer_raised`` and a reason
naming the exception, as an LLM's reply without a program is (an ``LLMError`` of no reply,
``unreached``, is raised as it is); where it returns anything else (None,
bytes, ...), with ``error_kind`` ``optimizer_returned`` and a reason naming the type, as an
LLM's reply without code is (:class:`CustomOptimizer`). ``optimize`` itself is not timed: one
that never returns blocks the episode.

>>> optimizer = load_optimizer("py:my_optimizer:MyOptimizer")  # my_optimizer.py here
"""

from __future__ import annotations

import inspect
import traceback

from autoprofiler_env.errors import LLMError, OptimizerSpecError
from autoprofiler_env.optimizers.candidate import Candidate
from autoprofiler_env.pyspec import PREFIX, imported, normalized, raised_at

CONTRACT = ("an object with optimize(problem, profile) returning the ModelNew source (a str) "
            "or a Candidate (autoprofiler_env/optimizers/candidate.py)")
RAISED = "optimizer_raised"
"""The ``error_kind`` of an episode whose optimizer raised."""
RETURNED = "optimizer_returned"
"""The ``error_kind`` of an episode whose optimizer returned neither a str nor a Candidate."""


def is_custom(optimizer: str) -> bool:
    """Whether ``optimizer`` names an optimizer of your own (``py:...``)."""
    return optimizer.strip().startswith(PREFIX)


def load_optimizer(spec: str) -> CustomOptimizer:
    """The optimizer ``py:MODULE:ATTR`` names, ready for an episode.

    Raises:
        OptimizerSpecError: the module does not import, it has no ATTR, ATTR is a class or
            function that cannot be called with no arguments, or what it is (or returns)
            has no ``optimize`` method.
    """
    spec, found, name = _found(spec)
    optimizer = found() if _made(found) else found  # an error of its own body is its own
    if not callable(getattr(optimizer, "optimize", None)):
        made_by = f"{name}() returned " if optimizer is not found else ""
        raise OptimizerSpecError(f"optimizer {spec}: {made_by}{type(optimizer).__name__} "
                                 f"{optimizer!r:.60}, which has no optimize method: an "
                                 f"optimizer is {CONTRACT}")
    return CustomOptimizer(spec, optimizer)


def checked_spec(spec: str) -> str:
    """``spec`` normalized, once :func:`load_optimizer`'s checks that need no instance pass
    (the module imports, ATTR is there, can be called with no arguments, and a class of it has
    ``optimize``): what a command checks before anything costly, without building the
    optimizer (its constructor may load a model or open a client).

    Raises:
        OptimizerSpecError: as :func:`load_optimizer`, but for what only an instance tells.
    """
    spec, found, name = _found(spec)
    if isinstance(found, type) and not callable(getattr(found, "optimize", None)):
        raise OptimizerSpecError(f"optimizer {spec}: the class {name} has no optimize method: "
                                 f"an optimizer is {CONTRACT}")
    if not _made(found) and not callable(getattr(found, "optimize", None)):
        raise OptimizerSpecError(f"optimizer {spec}: {type(found).__name__} {found!r:.60}, "
                                 f"which has no optimize method: an optimizer is {CONTRACT}")
    return spec


def _made(found) -> bool:
    """Whether ATTR makes the optimizer (a class, or a function without ``optimize``)."""
    return isinstance(found, type) or (callable(found) and not hasattr(found, "optimize"))


def _found(spec: str) -> tuple[str, object, str]:
    """(the spec normalized, the object it names, that object's name), ATTR checked to be
    callable with no arguments where it makes the optimizer."""
    spec = normalized(spec)
    found = imported(spec, OptimizerSpecError, "optimizer",
                     f"a class or function in it called with no arguments that returns {CONTRACT}"
                     ", or such an object (e.g. py:my_optimizer:MyOptimizer for "
                     "my_optimizer.py here)")
    name = getattr(found, "__qualname__", None) or type(found).__name__
    if _made(found):
        try:
            signature = inspect.signature(found)
        except (TypeError, ValueError):  # no signature to read (some built-ins): just called
            signature = None
        if signature is not None:
            try:
                signature.bind()
            except TypeError as e:
                raise OptimizerSpecError(
                    f"optimizer {spec}: {name}{signature} cannot be called with no arguments "
                    f"({e}): give a class whose __init__ takes none, or a function that "
                    f"takes none, returning {CONTRACT}; or such an object itself") from None
    return spec, found, name


class CustomOptimizer:
    """Your optimizer (``wrapped``) behind the interface every optimizer of the environment
    has: ``optimize(problem, profile) -> Candidate``, a source string made a candidate named
    by ``spec``, and an exception of ``wrapped.optimize`` a candidate with ``error`` set
    (``"optimizer_raised: <exception>"``; the reason names the line of your own file it was
    raised at, not a library's), and anything else it returns (None, bytes, ...) one too
    (``"optimizer_returned: optimize returned <type>, ..."``), so that the episode ends
    incorrect, as an LLM's reply without a program does, rather than the run. An
    :class:`~autoprofiler_env.errors.LLMError` that got no reply from a model (``unreached``:
    your optimizer asking an endpoint that is down) is raised as it is: it is no outcome of
    the optimizer's, as the LLM optimizer's own is not."""

    def __init__(self, spec: str, wrapped) -> None:
        self.spec = spec
        self.wrapped = wrapped

    def optimize(self, problem, profile=None) -> Candidate:
        """The candidate ``wrapped`` writes for ``problem`` from ``profile`` (``error`` set
        where it raised, or returned neither a str nor a Candidate)."""
        try:
            made = self.wrapped.optimize(problem, profile)
        except LLMError as e:
            if e.unreached:  # the endpoint's failure, not the optimizer's outcome
                raise
            return self._raised(problem, e)
        except Exception as e:  # its own failure: the episode's, not the run's
            return self._raised(problem, e)
        if isinstance(made, str):

            return Candidate(problem.uri, made, self.spec,
                             reason=f"{self.spec} wrote the program")
        if isinstance(made, Candidate):
            return made
        what = type(made).__name__
        return Candidate(problem.uri, "", self.spec,
                         reason=f"{self.spec}: optimize returned {what} {made!r:.60}, not the "
                                "ModelNew source (a str) or a Candidate "
                                "(autoprofiler_env/optimizers/candidate.py)",
                         error=f"{RETURNED}: optimize returned {what}, not the ModelNew "
                               "source (a str) or a Candidate")

    def _raised(self, problem, e: Exception) -> Candidate:
        what = f"{type(e).__name__}: {e}"
        return Candidate(problem.uri, "", self.spec,
                         reason=f"{self.spec}: optimize raised {what} ({raised_at(e)})",
                         evidence={"traceback": traceback.format_exc()},
                         error=f"{RAISED}: {what}")
