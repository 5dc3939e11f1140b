"""Loading problems: the project's suite, any KernelBench-format directory, or one file.

>>> from autoprofiler_env.problems import load_suite, load_problem
>>> test = load_suite(split="test")
>>> p = load_problem("problem://autoprofiler/v1/level1/softmax_16384x4096")
>>> q = load_problem("path/to/KernelBench/level1/19_ReLU.py")
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from autoprofiler_env.errors import ProblemError, ProblemNotFoundError, warn
from autoprofiler_env.problems.problem import Problem, check_problem_file

SUITE_DIR = Path(__file__).parent / "suite"
MANIFEST_PATH = SUITE_DIR / "manifest.json"
SUITE_URI_PREFIX = "problem://autoprofiler/v1/"
LOCAL_URI_PREFIX = "problem://local/"
SPLITS = ("train", "val", "test")
"""The splits, the project's one list of them: its suite's, a dataset's, an experiment's."""
LEVELS = (1, 2, 3)
"""The levels of the project's suite (``suite/level1`` ...). A KernelBench dataset's are
:data:`autoprofiler_env.problems.kernelbench.LEVELS` (what it records: equal, not the same
statement)."""

_LEVEL_DIR = re.compile(r"^level_?(\d+)$", re.IGNORECASE)


def _natural_key(path: Path) -> tuple:
    # KernelBench names files "19_ReLU.py": sort 2 before 10.
    return tuple(int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", path.stem))


def _level_of(directory: Path) -> int | None:
    match = _LEVEL_DIR.match(directory.name)
    return int(match.group(1)) if match else None


def read_manifest() -> dict:
    """The suite manifest: per problem (``"level1/softmax_16384x4096"``) its split and tags."""
    try:
        manifest = json.loads(MANIFEST_PATH.read_text())
    except FileNotFoundError:
        return {"version": 1, "problems": {}}
    except json.JSONDecodeError as e:
        raise ProblemError(MANIFEST_PATH, f"corrupt suite manifest: {e}",
                           "restore it from git or rebuild it: "
                           "python -m autoprofiler_env.problems.manifest") from e
    return manifest


def suite_files() -> list[Path]:
    """Every problem file of the project's suite, level by level, in name order."""
    return [p for level in LEVELS
            for p in sorted((SUITE_DIR / f"level{level}").glob("*.py"), key=_natural_key)
            if not p.name.startswith("_")]


def load_suite(split: str | None = None, level: int | None = None) -> list[Problem]:
    """The project's own problems, optionally one split and/or one level."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    entries = read_manifest()["problems"]
    problems, unlisted = [], []
    for path in suite_files():
        key = f"{path.parent.name}/{path.stem}"
        entry = entries.get(key, {})
        if not entry:
            unlisted.append(key)
        problem = Problem(
            uri=SUITE_URI_PREFIX + key,
            name=path.stem,
            path=path,
            level=_level_of(path.parent),
            split=entry.get("split"),
            tags=tuple(entry.get("tags", ())),
        )
        if (split is None or problem.split == split) and (level is None or problem.level == level):
            problems.append(problem)
    if unlisted:
        warn(f"suite problems missing from the manifest (no split, no tags; no split leaves "
             f"them out): {', '.join(unlisted[:5])}{' ...' if len(unlisted) > 5 else ''}; "
             "run `python -m autoprofiler_env.problems.manifest` to add them")
    return problems


def load_file(path: str | Path) -> Problem:
    """One KernelBench-format file (checked without running it).

    Its URI is ``problem://local/<folder>/<stem>``; its level is read from a folder named
    ``level1`` (KernelBench's layout) and is None otherwise.

    Raises:
        ProblemError: the file does not exist, does not parse or lacks a required name.
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise ProblemNotFoundError(path, "no such file")
    for problem in load_suite():
        if problem.path == path:
            return problem
    check_problem_file(path)
    return Problem(
        uri=f"{LOCAL_URI_PREFIX}{path.parent.name}/{path.stem}",
        name=path.stem,
        path=path,
        level=_level_of(path.parent),
    )


def load_directory(directory: str | Path, strict: bool = False) -> list[Problem]:
    """Every KernelBench-format ``*.py`` file of a directory, in natural name order.

    Files that are not valid problems are skipped with their error available through
    :func:`scan_directory`; with ``strict=True`` the first one raises.
    """
    problems, errors = scan_directory(directory)
    if strict and errors:
        raise errors[0]
    return problems


def scan_directory(directory: str | Path) -> tuple[list[Problem], list[ProblemError]]:
    """Like :func:`load_directory`, but returns the broken files' errors too."""
    directory = Path(directory).resolve()
    if not directory.is_dir():
        raise ProblemNotFoundError(directory, "no such directory")
    problems, errors = [], []
    for path in sorted(directory.glob("*.py"), key=_natural_key):
        if path.name.startswith("_"):
            continue
        try:
            problems.append(load_file(path))
        except ProblemError as e:
            errors.append(e)
    return problems, errors


def load_problem(ref: str | Path) -> Problem:
    """A problem by suite URI, by suite name (``softmax_16384x4096``) or by file path.

    Raises:
        ProblemNotFoundError: nothing matches ``ref``.
        ProblemError: the file matched but is broken.
    """
    ref_str = str(ref)
    if ref_str.startswith("problem://"):
        for problem in load_suite():
            if problem.uri == ref_str:
                return problem
        raise ProblemNotFoundError(
            ref_str, "no problem of the suite has this URI",
            "list them with `autoprofiler problems`; a local file is named by its path")
    path = Path(ref_str)
    if path.suffix == ".py" or path.exists():
        return load_file(path)
    matches = [p for p in load_suite() if p.name == ref_str]
    if len(matches) == 1:
        return matches[0]
    raise ProblemNotFoundError(ref_str, "neither a suite URI, a suite name nor a file")
