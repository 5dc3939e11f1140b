"""KernelBench checkouts: each problem named by KernelBench's level and file name, with the
sha256 of the file's bytes and the checkout's git commit (its provenance), so that a dataset
recorded from a checkout needs no sources to replay, and a user's file can be checked against
the one recorded.

A checkout is the folder holding ``level1/``, ``level2/``, ... or the repository root above it
(``KernelBench/level1/``). Its problems get the URI ``problem://kernelbench/level<N>/<stem>``
(``problem://kernelbench/level1/19_ReLU``), whatever folder the checkout lies in.

>>> checkout = KernelBenchCheckout("path/to/KernelBench")
>>> problems, broken = checkout.problems(levels=(1, 2, 3))
>>> checkout.provenance(problems[0])  # level, file, sha256, commit
>>> checkout.problem(provenance)      # the file again, its sha256 checked

The commit comes from git where the checkout is a git repository that tracks its files;
a copy without ``.git`` (the device machine's) is given it explicitly (``commit=``).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from autoprofiler_env.checksum import file_sha256
from autoprofiler_env.errors import ProblemError, ProblemNotFoundError, SourceMismatchError
from autoprofiler_env.problems.loaders import load_file, scan_directory
from autoprofiler_env.problems.problem import Problem

URI_PREFIX = "problem://kernelbench/"
LEVELS = (1, 2, 3)
"""The levels a KernelBench dataset records: single operators, fused chains, small networks
(level 4, whole Hugging Face models, downloads weights and is not recorded)."""
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")
_LEVEL_DIR = re.compile(r"^level(\d+)$")


@dataclass(frozen=True)
class KernelBenchProvenance:
    """Where a problem comes from: KernelBench's level and file name (``"19_ReLU.py"``), the
    sha256 of the file's bytes, and the KernelBench commit (None where it is unknown)."""

    level: int
    file: str
    sha256: str
    commit: str | None = None

    @property
    def uri(self) -> str:
        return kernelbench_uri(self.level, self.file)

    @property
    def key(self) -> tuple[int, str]:
        """(level, file): what names the problem across commits."""
        return self.level, self.file

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> KernelBenchProvenance:
        return cls(level=d["level"], file=d["file"], sha256=d["sha256"],
                   commit=d.get("commit"))

    def invalid(self) -> str | None:
        """What is wrong with the record's values, said as ``field is value, not ...``; None
        when all are well formed."""
        if type(self.level) is not int or self.level < 1:
            return f"level is {self.level!r}, not an integer >= 1"
        if type(self.file) is not str or not self.file.endswith(".py") or "/" in self.file:
            return f"file is {self.file!r}, not a file name ending in .py"
        if type(self.sha256) is not str or not _SHA256.match(self.sha256):
            return f"sha256 is {self.sha256!r}, not 64 hexadecimal digits"
        if self.commit is not None and (type(self.commit) is not str
                                        or not _COMMIT.match(self.commit)):
            return f"commit is {self.commit!r}, not null or a git commit (hexadecimal)"
        return None


def kernelbench_uri(level: int, file: str) -> str:
    """``problem://kernelbench/level<level>/<file's stem>``."""
    return f"{URI_PREFIX}level{level}/{Path(file).stem}"


def levels_root(root: str | Path) -> Path:
    """The folder holding ``level1/`` ...: ``root`` itself, or its ``KernelBench/``.

    Raises:
        ProblemNotFoundError: neither holds a ``level<N>/`` folder.
    """
    root = Path(root).expanduser().resolve()
    for candidate in (root, root / "KernelBench"):
        if candidate.is_dir() and any(_LEVEL_DIR.match(p.name) and p.is_dir()
                                      for p in candidate.iterdir()):
            return candidate
    raise ProblemNotFoundError(root, "not a KernelBench checkout: no level1/ folder in it or "
                               "in its KernelBench/",
                               "give the folder holding level1/, or the repository's root")


def git_commit(root: Path) -> str | None:
    """The commit of the git repository that tracks the checkout's files, or None: not a git
    repository (a copy), no git on the machine, or a repository that does not track them
    (a checkout inside another project's ignored folder names that project's commit, not
    KernelBench's)."""
    root = Path(root)
    for top in (root, root.parent):
        if not (top / ".git").exists():
            continue
        try:
            head = subprocess.run(["git", "-C", str(top), "rev-parse", "HEAD"],
                                  capture_output=True, text=True, timeout=30, check=False)
            level = next((p for p in sorted(root.glob("level*/*.py"))), None)
            if head.returncode != 0 or level is None:
                return None
            tracked = subprocess.run(["git", "-C", str(top), "ls-files", "--error-unmatch",
                                      str(level)], capture_output=True, text=True, timeout=30,
                                     check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return head.stdout.strip() if tracked.returncode == 0 else None
    return None


def identify(path: str | Path) -> tuple[int, str] | None:
    """(level, file name) of a file in a KernelBench layout (its folder ``level<N>``), or
    None."""
    path = Path(path)
    match = _LEVEL_DIR.match(path.parent.name)
    return (int(match.group(1)), path.name) if match and path.suffix == ".py" else None


def check_file(path: str | Path, provenance: KernelBenchProvenance) -> None:
    """Checks that ``path`` holds the bytes recorded as ``provenance``.

    Raises:
        SourceMismatchError: its sha256 is another (the message names both and the recorded
            commit).
    """
    actual = file_sha256(path)
    if actual != provenance.sha256:
        commit = provenance.commit or "unknown"
        raise SourceMismatchError(
            path, f"is not the file recorded as KernelBench level {provenance.level} "
            f"{provenance.file}: its sha256 is {actual[:12]}..., the recorded one "
            f"{provenance.sha256[:12]}... (KernelBench commit {commit})",
            f"check out KernelBench at commit {commit}, or record this file anew")


class KernelBenchCheckout:
    """A KernelBench checkout on disk, and its commit (git's, or the one given).

    Raises:
        ProblemNotFoundError: ``root`` holds no ``level<N>/`` folder.
        SourceMismatchError: ``commit`` is given and git names another one.
    """

    def __init__(self, root: str | Path, commit: str | None = None) -> None:
        self.root = levels_root(root)
        found = git_commit(self.root)
        if commit is not None and not _COMMIT.match(commit):
            raise ProblemError(self.root, f"{commit!r} is not a git commit",
                               "give the commit's hexadecimal id (git rev-parse HEAD)")
        if commit is not None and found is not None and not found.startswith(commit):
            raise SourceMismatchError(self.root, f"is a git checkout of commit {found[:12]}, "
                                      f"not of the commit given ({commit})",
                                      "check out that commit, or give none")
        self.commit = found or commit

    def problems(self, levels: tuple[int, ...] = LEVELS
                 ) -> tuple[list[Problem], list[ProblemError]]:
        """The problems of ``levels``, level by level in KernelBench's order (``2_`` before
        ``10_``), with KernelBench URIs; and the files that are not KernelBench-format
        problems, as errors."""
        problems, errors = [], []
        for level in levels:
            folder = self.root / f"level{level}"
            if not folder.is_dir():
                errors.append(ProblemNotFoundError(folder, "no such level in the checkout"))
                continue
            found, broken = scan_directory(folder)
            problems += [self._named(p, level) for p in found]
            errors += broken
        return problems, errors

    def provenance(self, problem: Problem) -> KernelBenchProvenance:
        """The problem's level, file name, sha256 and this checkout's commit."""
        level, file = identify(problem.path) or (problem.level, Path(problem.path).name)
        return KernelBenchProvenance(level, file, file_sha256(problem.path), self.commit)

    def problem(self, provenance: KernelBenchProvenance, check: bool = True) -> Problem:
        """The problem of the checkout that ``provenance`` names, with its KernelBench URI.

        Raises:
            ProblemNotFoundError: the checkout has no such file.
            ProblemError: the file is not a KernelBench-format problem.
            SourceMismatchError: with ``check``, the file's sha256 is not the recorded one.
        """
        path = self.root / f"level{provenance.level}" / provenance.file
        if not path.is_file():
            raise ProblemNotFoundError(path, f"KernelBench level {provenance.level} "
                                       f"{provenance.file} is not in this checkout",
                                       f"check out KernelBench at commit {provenance.commit}"
                                       if provenance.commit else "give the checkout the "
                                       "dataset was recorded from (it records no commit)")
        if check:
            check_file(path, provenance)
        return self._named(load_file(path), provenance.level)

    @staticmethod
    def _named(problem: Problem, level: int) -> Problem:
        return replace(problem, uri=kernelbench_uri(level, problem.path.name), level=level)
