"""``py:MODULE:ATTR``: an object of your own, named as entry points name one (``module:attr``).

One loader for every place that takes such a spec: a policy (``--policy``,
:mod:`experiments.policies`) and an optimizer (``optimizer=``, ``--optimizer``,
:mod:`autoprofiler_env.optimizers.custom`). Each passes the error class it raises and the
words that say what ATTR must be.
"""

from __future__ import annotations

import importlib
import os
import sys

PREFIX = "py:"


def imported(spec: str, error: type[Exception], flag: str, usage: str):
    """The object ``py:MODULE:ATTR`` names (ATTR dotted for a nested one), MODULE imported
    with the current directory on the import path (as ``python -m`` has it).

    Args:
        spec: ``py:MODULE:ATTR``.
        error: what to raise, with a message starting ``"{flag} {spec}: "``.
        flag: the argument the spec was given to (``--policy``, ``optimizer``).
        usage: what ATTR is, and an example, for a spec that is not of the form, e.g. "a
            class or function in it that is called with the environment (e.g. ...)".

    Raises:
        error: the spec is not of the form; MODULE is not importable (or a module it imports
            is not installed); MODULE has no ATTR (the message lists its classes and
            functions).
    """
    module_name, sep, attribute = spec.removeprefix(PREFIX).partition(":")
    if not (spec.startswith(PREFIX) and module_name and sep and attribute):
        raise error(f"{flag} {spec!r}: give py:MODULE:ATTR, MODULE a module importable from "
                    f"the current directory or PYTHONPATH and ATTR {usage}")
    here = os.getcwd()
    if not any(os.path.abspath(p or os.curdir) == here for p in sys.path):
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):
            raise error(
                f"{flag} {spec}: no module {module_name!r} is importable from the current "
                f"directory ({here}) or PYTHONPATH: run from the folder that holds its file "
                f"({module_name.replace('.', '/')}.py), or add that folder to PYTHONPATH"
                ) from None
        raise error(f"{flag} {spec}: importing {module_name} failed: {e} (a module it "
                    "imports is not installed)") from e
    found = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            own = sorted(n for n, v in vars(module).items()
                         if not n.startswith("_") and callable(v)
                         and getattr(v, "__module__", None) == module.__name__)
            raise error(f"{flag} {spec}: {module_name} ({getattr(module, '__file__', None)}) "
                        f"has no attribute {attribute!r}; its classes and functions: "
                        f"{', '.join(own) or 'none'}")
        found = getattr(found, part)
    return found
