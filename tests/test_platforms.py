"""Systems other than Linux, simulated here (CI is Linux): the replay of the shipped datasets
needs none of Linux's or POSIX's own modules, and what does need them (the judge's and the
problem import's worker processes, profiling, the sandbox's isolation) says so clearly rather than
failing on an import or a missing libc symbol. macOS has POSIX but not Linux's namespaces;
Windows has neither ``fcntl`` nor ``resource``."""

import json
import subprocess
import sys

import pytest

from autoprofiler_env.errors import MachineError, ProblemWorkerError
from tests.conftest import DATA, ROOT

WITHOUT_POSIX_MODULES = "import sys; sys.modules['fcntl'] = sys.modules['resource'] = None; "
"""Run first by a child Python: ``import fcntl`` and ``import resource`` then fail, as on
Windows."""


def _main_without_posix_modules(*args: str, cwd) -> str:
    code = (WITHOUT_POSIX_MODULES
            + "import agents.tree, agents.rl, baselines, experiments.experiment; "
            + "import autoprofiler_env.harness.evaluator, autoprofiler_env.optimizers.llm.cache; "
            + f"from experiments.cli import main; sys.exit(main({list(args)!r}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_replay_runs_where_fcntl_and_resource_are_missing(tmp_path):
    """Reviewed: ``autoprofiler dataset info`` (and every dataset command) died of
    ``ImportError: fcntl`` on Windows, through the recorder's import of the judge."""
    assert json.loads(_main_without_posix_modules("dataset", "info", cwd=ROOT))["problems"] == 96
    _main_without_posix_modules("benchmark", "--out", str(tmp_path / "job"), cwd=ROOT)
    assert (tmp_path / "job" / "benchmark.csv").is_file()


def test_the_judge_says_it_needs_a_posix_system(monkeypatch):
    from autoprofiler_env.harness import process
    from autoprofiler_env.harness.evaluator import evaluate
    from autoprofiler_env.problems.loaders import load_file

    monkeypatch.setattr(process, "POSIX", False)
    problem = load_file(DATA / "problems" / "relu_small.py")
    with pytest.raises(MachineError, match=r"the judge's \w+ worker needs a POSIX system "
                                           r"\(Linux, or macOS\).*judge in WSL"):
        evaluate(problem, problem.source)


def test_the_problem_import_worker_says_it_needs_a_posix_system(monkeypatch):
    from autoprofiler_env.problems import isolated

    monkeypatch.setattr(isolated, "POSIX", False)
    with isolated.IsolatedFeatures(timeout_s=60) as features:
        with pytest.raises(ProblemWorkerError, match=r"needs a POSIX system \(Linux, or "
                                                     r"macOS\).*in WSL"):
            features.static_features(DATA / "problems" / "relu_small.py")


def test_profiling_says_it_needs_a_posix_system(monkeypatch):
    """Reviewed: on Windows, stopping ncu would have died of AttributeError (os.killpg)."""
    from autoprofiler_env.problems.loaders import load_file
    from autoprofiler_env.profiler import runner

    monkeypatch.setattr(runner, "POSIX", False)
    with pytest.raises(MachineError, match=r"profiling here needs a POSIX system \(Linux\).*"
                                           r"profile in WSL"):
        runner.run_ncu([load_file(DATA / "problems" / "relu_small.py")], ["SpeedOfLight"])


def test_the_sandbox_reports_what_it_cannot_do_off_linux():
    """Reviewed: on macOS every candidate was judged a crash, the worker dying of
    ``AttributeError: dlsym(RTLD_DEFAULT, unshare)``; off Linux it now isolates what it can
    (the resource limits) and reports the rest as not isolated."""
    code = ("import json, os, sys; from autoprofiler_env.harness.sandbox import isolate; "
            "sys.platform = 'darwin'; "  # read when isolate is called, not at its import
            "print(json.dumps(isolate(os.getppid(), [], cpu_seconds=60)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["network"] == report["filesystem"] == (
        "not isolated: namespaces are Linux's, not darwin's")
    assert report["processes"].startswith("a process group of its own; not isolated")
    assert report["capabilities"].startswith("not dropped")
    assert report["parent_death"].startswith("not tied")
    assert report["limits"]["core"] == 0 and report["limits"]["cpu_s"] == 60


def test_the_limits_are_left_out_where_resource_is_missing(monkeypatch):
    from autoprofiler_env.harness.sandbox import _limits

    monkeypatch.setitem(sys.modules, "resource", None)
    assert _limits(60, 1 << 30) == {}


def test_the_reply_cache_appends_where_flock_is_missing(tmp_path, monkeypatch):
    from autoprofiler_env.optimizers.llm.cache import ReplyCache

    monkeypatch.setitem(sys.modules, "fcntl", None)
    ReplyCache(tmp_path / "replies.jsonl").put("k1", "reply one", {"tokens": 3})
    ReplyCache(tmp_path / "replies.jsonl").put("k2", "reply two", {})
    again = ReplyCache(tmp_path / "replies.jsonl")
    assert again.get("k1") == ("reply one", {"tokens": 3}) and again.get("k2")[0] == "reply two"


def test_a_folder_refused_before_anything_is_written_is_removed_where_flock_is_missing(
        tmp_path, monkeypatch):
    """Reviewed: without ``flock`` no lock file is made, and the folder a refused command had
    made was left behind, empty."""
    from autoprofiler_env.atomic import one_writer

    monkeypatch.setitem(sys.modules, "fcntl", None)
    with pytest.raises(ValueError, match="refused"):
        with one_writer(tmp_path / "runs" / "mine", "autoprofiler train"):
            raise ValueError("refused")
    assert list(tmp_path.iterdir()) == []


def test_files_are_checked_out_byte_for_byte():
    """Git for Windows converts line ends by default; the checksummed data and the tests'
    byte comparisons need every file as committed (.gitattributes: ``* -text``; source and
    text files ``eol=lf``)."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    files = ["docs/experiment/algorithms/leaderboard.csv",
             "autoprofiler_env/dataset/data/h200-reference.json.gz"]
    done = subprocess.run(["git", "check-attr", "text", "--", *files], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == [f"{f}: text: unset" for f in files]
    done = subprocess.run(["git", "check-attr", "eol", "--", "README.md", "agents/__init__.py"],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["README.md: eol: lf", "agents/__init__.py: eol: lf"]
