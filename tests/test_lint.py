"""The project's own lint: ``ruff check`` with pyproject.toml's ``[tool.ruff]`` passes on the
whole repository (CI runs only the tests, so this is where the lint is kept), and no tracked
file names a path of the machine that made it."""

import gzip
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autoprofiler_env.profiler.runner import PATH_ENDS, PATH_STARTS

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_passes_with_the_projects_config(tmp_path):
    if importlib.util.find_spec("ruff") is None:
        pytest.fail("ruff is not installed: it is in the dev extra, which CI installs "
                    "(pip install -e \".[dev]\")")
    # the project's config only: no user-level ruff config (XDG_CONFIG_HOME), no cache written
    # into the checkout. Run from the root: ruff resolves the relative paths of a --config file
    # (extend-exclude) against the working directory, not the file's.
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--config", "pyproject.toml",
                          "--no-cache", "--output-format", "concise", "."],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"ruff check failed:\n{out.stdout}{out.stderr}"


MACHINE_PATH = re.compile(rb"(?<![\w.~-])/(?:work|home|Users|root)/[\w.-]")
# this checkout's own folder, whole, bounded as a saved ncu log's folders are (a checkout at
# /src must not match /srcs, /src~old or /a/src)
HERE = re.compile(PATH_STARTS.encode() + re.escape(str(ROOT).encode()) + PATH_ENDS.encode())


def test_no_tracked_file_names_a_path_of_the_machine_that_made_it():
    """The tree is shipped: a log, a report or a run file that names where it was made (a home
    folder, the checkout's folder: a warning of ncu's profiled program once did) is a leak and
    does not hold elsewhere. Gzipped files are read unpacked; other binaries are skipped."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    found = []
    for name in filter(None, names):
        path = ROOT / name
        if not path.is_file():  # deleted in the working tree
            continue
        data = path.read_bytes()
        if name.endswith(".gz"):
            data = gzip.decompress(data)
        elif b"\0" in data[:8192]:
            continue
        for pattern in (MACHINE_PATH, HERE):
            if (m := pattern.search(data)) is not None:
                found.append(f"{name}: {data[max(m.start() - 40, 0):m.end() + 40]!r}")
                break
    assert not found, "\n".join(found)
