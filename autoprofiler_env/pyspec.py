"""``py:MODULE:ATTR``: an object of your own, named as entry points name one (``module:attr``).

One loader for every place that takes such a spec: a policy (``--policy``,
:mod:`experiments.policies`) and an optimizer (``optimizer=``, ``--optimizer``,
:mod:`autoprofiler_env.optimizers.custom`). Each passes the error class it raises and the
words that say what ATTR must be.
"""

from __future__ import annotations

import difflib
import importlib
import os
import pkgutil
import sys
import sysconfig
import traceback

PREFIX = "py:"


def parts(spec: str) -> tuple[str, str, str]:
    """``(MODULE, ":", ATTR)`` of ``py:MODULE:ATTR``, each without surrounding whitespace
    (``("", "", "")`` parts where the spec lacks them)."""
    module_name, sep, attribute = spec.strip().removeprefix(PREFIX).partition(":")
    return module_name.strip(), sep, attribute.strip()


def normalized(spec: str) -> str:
    """``spec`` without whitespace around it and its parts (``" py: pkg.mod:Cls"`` is
    ``"py:pkg.mod:Cls"``); a spec not of the form only stripped."""
    module_name, sep, attribute = parts(spec)
    if spec.strip().startswith(PREFIX) and sep:
        return f"{PREFIX}{module_name}:{attribute}"
    return spec.strip()


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
            is not installed); importing MODULE raised (a SyntaxError, an exception of its
            own: the message names it and where); MODULE has no ATTR (the message lists its
            classes and functions).
    """
    spec = normalized(spec)
    module_name, sep, attribute = parts(spec)
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
            # a file's path given as MODULE is told in dots; else a typo's name meant
            close = None if _is_path(module_name) else _close(e.name, here)
            advice = (f"did you mean {PREFIX}{close}{module_name[len(e.name):]}:{attribute}?"
                      if close else _where(module_name, here))
            raise error(f"{flag} {spec}: no module {module_name!r} is importable from the "
                        f"current directory ({here}) or PYTHONPATH: {advice}") from None
        raise error(f"{flag} {spec}: importing {module_name} failed: {e} (a module it "
                    "imports is not installed)") from e
    except Exception as e:  # its own failure at import (a SyntaxError, a missing setting)
        message = e.msg if isinstance(e, SyntaxError) else e  # its str repeats the line
        raise error(f"{flag} {spec}: importing {module_name} failed: {type(e).__name__}: "
                    f"{message} ({raised_at(e)})") from e
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


def _close(module_name: str, here: str) -> str | None:
    """The module whose name is closest to ``module_name``'s, if one is close (a typo): for a
    top-level name, among those of the current directory and of the ``PYTHONPATH`` folders on
    the import path; for a dotted one, among its package's (already imported: no code of
    the user's runs here)."""
    package, _, last = module_name.rpartition(".")
    if package:
        where = list(getattr(sys.modules.get(package), "__path__", ()))
    else:
        # as Python puts them on sys.path: absolute (a relative one, a trailing slash;
        # resolved here against today's directory, at start-up by Python: the same unless the
        # process changed directory since)
        given = {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                 if p}
        where = [here, *(p for p in sys.path if p and os.path.abspath(p) in given)]
    names = sorted({m.name for m in pkgutil.iter_modules(where)} - {last})
    match = difflib.get_close_matches(last, names, n=1)  # difflib's 0.6 cutoff
    if not match:
        return None
    return f"{package}.{match[0]}" if package else match[0]


def _is_path(module_name: str) -> bool:
    """Whether MODULE was given as a file's path (``pkg/mod``, ``mod.py``), not in dots."""
    return "/" in module_name or "\\" in module_name or module_name.endswith(".py")


def _where(module_name: str, here: str) -> str:
    """What to do about a module that is not importable: a path given as MODULE (``pkg/mod``,
    ``mod.py``) said in dots; a package of the current directory that an installed one of the
    same name shadows (this project installs ``agents``, ``baselines`` and ``experiments``)
    renamed."""
    top = module_name.split(".")[0]
    installed = getattr(sys.modules.get(top), "__path__", None)
    if (installed and "." in module_name and os.path.isdir(os.path.join(here, top))
            and all(os.path.abspath(p) != os.path.join(here, top) for p in installed)):
        return (f"the package {top!r} is the one installed at {list(installed)[0]}, which "
                f"hides your folder {top}/ here: rename your folder (e.g. my_{top}/) and give "
                f"py:my_{module_name}:ATTR")
    if _is_path(module_name):
        dotted = module_name.removesuffix(".py").replace("\\", "/").strip("/").replace("/", ".")
        return (f"MODULE is a module's dotted name, not its file: give py:{dotted}:ATTR, run "
                "from the folder that holds its top package or module")
    return (f"run from the folder that holds its file ({module_name.replace('.', '/')}.py), "
            "or add that folder to PYTHONPATH")


def raised_at(e: BaseException) -> str:
    """``file:line`` where ``e`` was raised (a SyntaxError: the line it points at)."""
    if isinstance(e, SyntaxError) and e.filename:
        return f"{os.path.basename(e.filename)}:{e.lineno}"
    frames = traceback.extract_tb(e.__traceback__)
    paths = sysconfig.get_paths()
    others = ("<", paths["stdlib"], paths["purelib"], paths["platlib"])
    # the deepest frame of a file of one's own (not importlib's, not the standard library's,
    # not an installed package's: json's decoder, a client library)
    own = [f for f in frames if not f.filename.startswith(others)] or frames
    return f"{os.path.basename(own[-1].filename)}:{own[-1].lineno}" if own else "?"
