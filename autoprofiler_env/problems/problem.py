"""The :class:`Problem` record and the import of a KernelBench-format file.

A problem file defines ``class Model(nn.Module)``, ``get_inputs()`` and ``get_init_inputs()``
(KernelBench's convention) and may define ``SMOKE_SIZES``, a dict of module-level size
constants to use instead of the real ones for CPU smoke tests (docs/problems.md).
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Literal

from autoprofiler_env.errors import ProblemError, install_hint
from autoprofiler_env.pyast import parse

Size = Literal["full", "smoke"]
SIZES: tuple[str, ...] = ("full", "smoke")
REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")

_module_ids = itertools.count()

_EXTRAS = {"einops": "kernelbench"}
"""Modules that problem files outside the suite import, and the extra of setup.cfg that
installs each (KernelBench's level 3 Mamba2 files import einops)."""


@dataclass(frozen=True)
class Problem:
    """One kernel problem.

    Attributes:
        uri: stable identifier, e.g. ``problem://autoprofiler/v1/level1/softmax_16384x4096``.
        name: the file's stem.
        path: the KernelBench-format file.
        level: 1 (one operator), 2 (fused chain), 3 (small network), or None if unknown.
        split: ``"train"``, ``"val"`` or ``"test"`` for the project's suite; None elsewhere.
        tags: op categories the reference forward dispatches (see ``features.OP_CATEGORIES``);
            for the project's suite they are stored in the suite manifest, for other files
            computed on demand by :func:`autoprofiler_env.features.static_features`.
        candidate: a candidate file whose ``ModelNew`` the profiler runs in place of
            ``Model``, on the problem's inputs (:meth:`with_candidate`); None: the problem's
            own ``Model``.
    """

    uri: str
    name: str
    path: Path
    level: int | None = None
    split: str | None = None
    tags: tuple[str, ...] = field(default=())
    candidate: Path | None = None

    def with_candidate(self, path: str | Path) -> Problem:
        """This problem with ``path``'s ``ModelNew`` in place of its ``Model`` (what
        ``autoprofiler profile --candidate`` and ``optimize --candidate`` profile), named
        ``<uri>#ModelNew``. The file is read here, not run (its import runs under ncu).

        Raises:
            ProblemError: the file is missing, is not Python source, or defines no
                ``ModelNew`` (a KernelBench candidate's class).
        """
        if "ModelNew" not in defined_names(Path(path), "candidate"):
            raise ProblemError(path, "the candidate defines no ModelNew (a KernelBench "
                               "candidate's class: your kernel, run on the problem's inputs)")
        return replace(self, uri=f"{self.uri}#ModelNew", candidate=Path(path))

    @property
    def source(self) -> str:
        """The file's text."""
        return read_source(self.path)

    def to_dict(self) -> dict:
        return {
            "uri": self.uri,
            "name": self.name,
            "path": str(self.path),
            "level": self.level,
            "split": self.split,
            "tags": list(self.tags),
        }


def read_source(path: str | Path) -> str:
    """A Python file's text, decoded as Python decodes it (UTF-8 unless it declares another
    encoding); a ``ValueError`` saying so for bytes that are not; ``OSError`` as it comes."""
    data = Path(path).read_bytes()
    try:
        return importlib.util.decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as e:
        raise ValueError(f"not Python source text: {getattr(e, 'msg', None) or e} (a Python "
                         "file is UTF-8 unless it declares its encoding)") from None


def defined_names(path: Path, kind: str = "problem") -> set[str]:
    """The names a Python file defines at its top level (classes, functions, assignments,
    imports), read without running it.

    Raises:
        ProblemError: the ``kind`` file (``"problem"``, ``"candidate"``) is missing or is not
            Python source.
    """
    try:
        text = read_source(path)
    except OSError as e:
        raise ProblemError(path, f"cannot read the {kind} file: {e.strerror}") from e
    except ValueError as e:
        raise ProblemError(path, str(e)) from None
    try:
        tree = parse(text, filename=str(path))
    except (SyntaxError, ValueError) as e:  # ValueError: a null byte (Python 3.10, 3.11)
        where = f" at line {e.lineno}" if getattr(e, "lineno", None) else ""
        raise ProblemError(path, f"syntax error{where}: {getattr(e, 'msg', None) or e}"
                           ) from e
    except (RecursionError, MemoryError) as e:  # the parser's limits: a chain 1e5 deep
        raise ProblemError(path, f"it does not parse: nested too deeply ({type(e).__name__})"
                           ) from e
    defined = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
    return defined


def input_list(value, name: str = "get_inputs"):
    """``value`` (what ``name()`` returned) as the list of positional inputs it must be
    (KernelBench's format: a list or a tuple). A bare tensor was unpacked along its first
    dimension: ``Model.forward() takes 2 positional arguments but 65 were given``.

    Raises:
        TypeError: it is not a list or a tuple (the message says what to return).
    """
    if isinstance(value, (list, tuple)):
        return list(value)
    raise TypeError(f"{name}() returned a {type(value).__name__}, not a list of the forward's "
                    f"inputs (KernelBench's format: return [x] for one input)")


def check_problem_file(path: Path) -> None:
    """Checks without running it that ``path`` parses and defines the KernelBench names.

    Raises:
        ProblemError: the file is missing, is not Python, or lacks a required name.
    """
    defined = defined_names(path)
    missing = [n for n in REQUIRED_NAMES if n not in defined]
    if missing:
        raise ProblemError(
            path,
            f"does not define {', '.join(missing)}",
            "a KernelBench-format problem defines class Model, get_inputs() and get_init_inputs()",
        )


def _missing_module_hint(path: Path, module: str) -> str:
    """What to do about a problem file's import of ``module`` that was not found: a module
    beside the file (``module.py`` or a package folder) is found once the file's folder is on
    the import path, which a problem's import does not put there; one of :data:`_EXTRAS` is an
    extra of this package; anything else, a package to install."""
    folder = path.resolve().parent
    if (folder / f"{module}.py").is_file() or (folder / module / "__init__.py").is_file():
        return (f"{module} is beside the problem, in {folder}, which is not on the import "
                f"path: put it there, e.g. PYTHONPATH={folder}")
    extra = _EXTRAS.get(module)
    return (f"{install_hint(extra)} installs it" if extra
            else "install the package that provides it")


def import_problem(path: Path, size: Size = "full") -> ModuleType:
    """Imports a problem file as a fresh module, with its real or its smoke sizes.

    Each call gives a new module object, so changing sizes never leaks between callers.

    Raises:
        ProblemError: the file does not import, lacks a required name, or its ``SMOKE_SIZES``
            is malformed or missing when ``size="smoke"`` is asked for.
    """
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, got {size!r}")
    path = Path(path)
    check_problem_file(path)
    module_name = f"_autoprofiler_problem_{next(_module_ids)}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ProblemError(path, "is not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the problem's own code: anything can happen
        del sys.modules[module_name]
        hint = ""
        if isinstance(e, ModuleNotFoundError) and e.name:
            hint = _missing_module_hint(path, e.name.split(".")[0])
        raise ProblemError(path, f"import failed: {type(e).__name__}: {e}", hint) from e
    for name in REQUIRED_NAMES:
        if not callable(getattr(module, name, None)):
            raise ProblemError(path, f"{name} is not callable")
    smoke = getattr(module, "SMOKE_SIZES", None)  # checked at every size: a file's error,
    # found when it is first listed, not when a smoke run first asks for it
    if smoke is not None and not isinstance(smoke, dict):
        raise ProblemError(path, f"SMOKE_SIZES is a {type(smoke).__name__}",
                           "it must be a dict of module constants and their smoke values")
    for key in smoke or {}:
        if not isinstance(key, str) or not hasattr(module, key):
            raise ProblemError(path, f"SMOKE_SIZES names {key!r}, which the module lacks")
    if size == "smoke":
        if not smoke:
            raise ProblemError(
                path, "has no SMOKE_SIZES", "smoke size needs a dict of module constants"
            )
        for key, value in smoke.items():
            setattr(module, key, value)
    return module
