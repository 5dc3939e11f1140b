"""The project's own lint: ``ruff check`` with pyproject.toml's ``[tool.ruff]`` passes on the
whole repository (CI runs only the tests, so this is where the lint is kept)."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
