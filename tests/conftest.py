import contextlib
import json
import os
import sys
from pathlib import Path

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    # one thread per test worker (and per process it starts: the harness keeps OMP_*), as
    # many workers as cores: without it, two workers' thread pools fight over the cores and
    # a CPU timing skews (the judge's honest matmul measured 0.24x)
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).parents[1]

# The packages whose modules the suite's processes import (measured: the harness's workers,
# Inductor, the command line, Ray's and wandb's processes), compiled to bytecode once.
_BYTECODE_PACKAGES = ("torch", "sympy", "mpmath", "networkx", "numpy", "jinja2", "filelock",
                      "gymnasium", "stable_baselines3", "sb3_contrib", "matplotlib", "PIL",
                      "ray", "wandb", "pydantic", "google", "rich", "urllib3", "requests",
                      "yaml", "tqdm", "click", "jsonschema", "dateutil", "pyparsing")
_BYTECODE_OWN = ("autoprofiler_env", "agents", "baselines", "experiments", "tests")


def pytest_sessionstart(session):
    """Compiles the imported packages' bytecode before the first test (once; a no-op where
    it is up to date). The suite starts hundreds of Python processes (the harness's sandboxed
    workers, commands, Ray's workers), each importing torch: from source that takes 3.9 s on
    a 2-core machine, from bytecode 1.9 s. Without this step, nothing writes the bytecode
    where pip installed with ``--no-compile`` (the README's command) and the environment sets
    PYTHONDONTWRITEBYTECODE (as this project's machines do), or where the only importers are
    the sandboxed workers (read-only file systems): the suite took 17 min there, 10 with it."""
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller did it
        return
    import compileall
    import importlib.util

    folders = [ROOT / name for name in _BYTECODE_OWN]
    for name in _BYTECODE_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            folders += [Path(p) for p in spec.submodule_search_locations]
    for folder in folders:  # a read-only install is left alone: nothing could be kept
        if folder.is_dir() and os.access(folder, os.W_OK):
            compileall.compile_dir(folder, quiet=2, workers=0)


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def sb3_logs_in_pytests_folder(tmp_path_factory):
    """SB3's ``learn`` without a logger set makes a ``SB3-<date-time>`` folder in the system's
    temporary folder each time (hundreds per run of the suite, never removed): here they go
    to one folder of pytest's, which pytest prunes."""
    before = os.environ.get("SB3_LOGDIR")
    os.environ["SB3_LOGDIR"] = str(tmp_path_factory.mktemp("sb3"))
    yield
    if before is None:
        os.environ.pop("SB3_LOGDIR")
    else:
        os.environ["SB3_LOGDIR"] = before


@contextlib.contextmanager
def one_torch_thread_here():
    """torch on one thread for the block (then as it was): the machine's other work makes
    torch's threads spin, and one thread is faster for the tiny trainings of the tests."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture
def one_torch_thread():
    """:func:`one_torch_thread_here` for a test (a module's ``pytestmark`` asks for it)."""
    with one_torch_thread_here():
        yield


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@contextlib.contextmanager
def users_module(tmp_path: Path, monkeypatch, name: str, source: str):
    """``tmp_path`` as the current directory holding ``name``.py (``source``), not on the
    import path (as for the ``autoprofiler`` console script): what a ``py:MODULE:ATTR`` spec
    of a user's imports; its modules are forgotten afterwards."""
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path
                                      if p not in ("", ".", str(tmp_path))])
    sys.modules.pop(name, None)
    try:
        yield tmp_path
    finally:
        for loaded, module in list(sys.modules.items()):
            if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
                sys.modules.pop(loaded)


def candidate(name: str) -> str:
    return (DATA / "candidates" / f"{name}.py").read_text()


@pytest.fixture(scope="session")
def study_dataset(tmp_path_factory) -> Path:
    """A small real dataset for the environment's tests: the 12 problems profiled on the H200
    (every action section alone, ncu's sets) with every applicable transformation's outcome
    measured there (docs/data/recording_h200/candidates.jsonl)."""
    from autoprofiler_env.dataset.build import build
    from autoprofiler_env.jsonlines import read_jsonl

    root = ROOT / "docs" / "data"
    run_dirs = sorted(p.parent for p in (root / "profile_study_h200").rglob("run.json"))
    # the problems are those the study's per-section runs profiled (read from the runs, so
    # that the tests import nothing of the study's code)
    study = {p["uri"] for d in run_dirs if d.name.startswith("section-")
             for p in json.loads((d / "run.json").read_text())["problems"]}
    rows = [r for r in read_jsonl(root / "recording_h200" / "candidates.jsonl")
            if r["uri"] in study]
    content = build(run_dirs, read_jsonl(root / "recording_h200" / "reference.jsonl"), rows,
                    {"note": "the profiler study's 12 problems"})
    path = tmp_path_factory.mktemp("study_dataset") / "study.json.gz"
    content.save(path)
    return path


@pytest.fixture
def fresh_wandb():
    """wandb keeps its settings for the whole process (read at its first run): a test that
    checks what one run wrote starts and ends with none of another test's state
    (tests/test_tracking.py checks what two runs of one process do)."""
    import wandb

    wandb.teardown()
    yield
    wandb.teardown()


@pytest.fixture
def no_key(tmp_path, monkeypatch, fresh_wandb):
    """wandb as on a machine where it was never set up: no key in the environment, no
    ``~/.netrc`` (``NETRC`` names a file not there), no settings (``WANDB_CONFIG_DIR``
    empty); runs under ``tmp_path``. A test that clears ``WANDB_API_KEY`` alone goes online on a
    machine whose ``~/.netrc`` or wandb settings hold a key."""
    for name in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_PROJECT", "WANDB_IDENTITY_TOKEN_FILE",
                 "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    (tmp_path / "wandb-config").mkdir()
    return tmp_path
