"""Problem files imported in a worker with a time limit (autoprofiler_env.problems.isolated):
a file that hangs, crashes, raises or prints when imported costs only itself."""

import json
import subprocess
import sys
import time

import pytest

from autoprofiler_env.errors import ProblemError
from autoprofiler_env.features import static_features
from autoprofiler_env.problems import load_file
from autoprofiler_env.problems.isolated import IsolatedFeatures
from tests.conftest import DATA

GOOD = (DATA / "problems" / "relu_small.py").read_text()
PRINTED = "PRINTED-AT-IMPORT-a7c3"

# name -> (code run before the good file's text, what stderr must say about it); None: listed
FILES = {
    "1_good.py": ("", None),
    "2_sleeps.py": ("import time\ntime.sleep(600)\n", "import took longer than 5 s"),
    "3_prints.py": (f"print({PRINTED!r})\n", None),
    "4_raises.py": ("raise RuntimeError('broken at import')\n",
                    "import failed: RuntimeError: broken at import"),
    "5_aborts.py": ("import os\nos.abort()\n", "the import crashed (signal 6, SIGABRT)"),
    "6_good.py": ("", None),  # after a crash, a fresh worker serves it
}


@pytest.fixture
def messy_dir(tmp_path):
    for name, (prefix, _) in FILES.items():
        (tmp_path / name).write_text(prefix + GOOD)
    return tmp_path


def test_problems_scan_survives_hanging_crashing_and_printing_files(messy_dir):
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "experiments.cli", "problems", "--source",
                          str(messy_dir), "--json", "--timeout", "5"],
                         capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - start
    assert out.returncode == 0, out.stderr
    # the hanging file sleeps 600 s: the scan's own start, three worker starts (5-10 s each
    # on a loaded machine, 13.5 s in all here) and the 5 s limit stay far below it
    assert elapsed < 110, f"the scan took {elapsed:.0f} s"
    rows = json.loads(out.stdout)  # nothing a file printed is in it
    assert [r["name"] for r in rows] == ["1_good", "3_prints", "6_good"], out.stderr
    assert all(r["tags"] == ["pointwise"] for r in rows)
    assert PRINTED not in out.stdout
    skipped = [line for line in out.stderr.splitlines() if line.startswith("autoprofiler: skip")]
    assert len(skipped) == 3, out.stderr
    for name, (_, reason) in FILES.items():
        if reason is not None:
            assert any(name in line and reason in line for line in skipped), (name, out.stderr)


def test_isolated_features_equal_in_process_features(data_dir):
    problem = load_file(data_dir / "problems" / "relu_small.py")
    with IsolatedFeatures(timeout_s=60) as isolated:
        assert isolated.static_features(problem) == static_features(problem)
        assert isolated.static_features(problem, "smoke") == static_features(problem, "smoke")


def test_one_worker_serves_good_files_and_a_slow_trace_is_named(tmp_path):
    slow = tmp_path / "slow_inputs.py"
    slow.write_text(GOOD.replace("def get_inputs():\n",
                                 "def get_inputs():\n    import time; time.sleep(600)\n"))
    exits = tmp_path / "exits.py"
    exits.write_text("import sys\nsys.exit(3)\n" + GOOD)
    good = DATA / "problems" / "relu_small.py"
    with IsolatedFeatures(timeout_s=5) as isolated:
        isolated.static_features(good)
        pid = isolated._worker.popen.pid
        with pytest.raises(ProblemError, match=r"sys\.exit\(3\)"):
            isolated.static_features(exits)
        isolated.static_features(good)
        assert isolated._worker.popen.pid == pid  # a file that raises keeps the worker
        with pytest.raises(ProblemError, match="tracing its forward on the meta device took "
                                               "longer than 5 s") as e:
            isolated.static_features(slow)
        assert e.value.path == str(slow)
        assert isolated._worker is None or not isolated._worker.alive()
        assert isolated.static_features(good).tags == ("pointwise",)


def test_timeout_must_be_positive():
    out = subprocess.run([sys.executable, "-m", "experiments.cli", "problems", "--timeout", "0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--timeout must be a positive" in out.stderr


def test_a_module_beside_the_problem_is_found_with_its_folder_on_pythonpath(tmp_path):
    """A problem importing a file next to it (``import helper``) is told to put its folder on
    PYTHONPATH, which the judge's processes keep; a module that is nowhere, to install it."""
    import os

    from autoprofiler_env.problems.problem import import_problem

    (tmp_path / "helper.py").write_text("import torch\n\n\ndef act(x):\n"
                                        "    return torch.relu(x)\n")
    problem = tmp_path / "relu_helper.py"
    problem.write_text("import helper\n" + GOOD.replace("torch.relu(x)", "helper.act(x)"))
    with pytest.raises(ProblemError, match=r"No module named 'helper' \(helper is beside the "
                       rf"problem, in {tmp_path}, which is not on the import path: put it "
                       rf"there, e.g. PYTHONPATH={tmp_path}\)"):
        import_problem(problem)
    (tmp_path / "elsewhere.py").write_text("import not_a_module_anywhere_x\n" + GOOD)
    with pytest.raises(ProblemError, match=r"\(install the package that provides it\)"):
        import_problem(tmp_path / "elsewhere.py")
    command = [sys.executable, "-m", "experiments.cli", "evaluate", "--problem", str(problem),
               "--candidate", str(DATA / "candidates" / "relu_correct.py")]
    here = os.environ.get("PYTHONPATH")
    told = subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env=os.environ | {"PYTHONPATH": os.pathsep.join(
                              p for p in (here, str(tmp_path)) if p)})
    assert told.returncode == 0, told.stderr  # the hint is the fix
