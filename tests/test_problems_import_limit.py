"""The import's own time limit in the isolated worker (autoprofiler_env.problems.isolated): a
file that waits on the network when it is imported (KernelBench's level 4, offline) fails
in seconds, saying which host it was waiting on; a trace that moved to the CPU says so."""

import json
import socket
import subprocess
import sys

import pytest

from autoprofiler_env.errors import ProblemTimeoutError
from autoprofiler_env.problems.isolated import DEFAULT_IMPORT_TIMEOUT_S, IsolatedFeatures
from tests.conftest import DATA

GOOD = (DATA / "problems" / "relu_small.py").read_text()


@pytest.fixture
def silent_server():
    """A TCP port on this machine that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


def _waits_on(port: int) -> str:
    return (f"import socket\n_s = socket.create_connection(('127.0.0.1', {port}))\n"
            "_s.recv(1)\n" + GOOD)


def test_a_network_bound_import_fails_at_the_import_limit_naming_the_host(tmp_path,
                                                                        silent_server):
    path = tmp_path / "fetches_config.py"
    path.write_text(_waits_on(silent_server))
    with IsolatedFeatures(timeout_s=60, import_timeout_s=2) as isolated:
        with pytest.raises(ProblemTimeoutError) as e:
            isolated.static_features(path)
        assert isolated.static_features(DATA / "problems" / "relu_small.py").tags == (
            "pointwise",)  # a fresh worker serves the next file
    assert (e.value.phase, e.value.limit_s) == ("import", 2.0)  # not the file's 60 s
    assert e.value.network == f"127.0.0.1:{silent_server}"
    assert e.value.cause == ("import took longer than 2 s: a network-bound import, trying to "
                             f"reach 127.0.0.1:{silent_server}")
    assert "--import-timeout" in e.value.hint


def test_an_import_stopped_by_the_files_whole_limit_names_that_limits_option(tmp_path):
    path = tmp_path / "slow_import.py"
    path.write_text("import time\ntime.sleep(60)\n" + GOOD)
    with IsolatedFeatures(timeout_s=1, import_timeout_s=10) as isolated:
        with pytest.raises(ProblemTimeoutError) as e:
            isolated.static_features(path)
    assert (e.value.phase, e.value.limit_s) == ("import", 1.0)
    assert "autoprofiler problems --timeout S" in e.value.hint
    assert "--import-timeout" not in e.value.hint


def test_a_slow_cpu_trace_is_named_as_one(tmp_path):
    path = tmp_path / "slow_on_cpu.py"
    path.write_text(GOOD.replace("def forward(self, x):\n",
                                 "def forward(self, x):\n        import time\n"
                                 "        if x.sum().item() > -1e30:\n"
                                 "            time.sleep(600)\n"))
    assert "time.sleep(600)" in path.read_text()
    with IsolatedFeatures(timeout_s=4) as isolated:
        with pytest.raises(ProblemTimeoutError, match=r"running its forward on the CPU \(on the "
                                                      r"meta device it needs real values: "
                                                      r"RuntimeError: Tensor.item\(\)") as e:
            isolated.static_features(path)
    assert (e.value.phase, e.value.limit_s, e.value.network) == ("trace", 4.0, None)


def test_the_problems_command_skips_a_network_bound_file_and_lists_the_rest(tmp_path,
                                                                          silent_server):
    level = tmp_path / "level4"
    level.mkdir()
    (level / "1_fetches.py").write_text(_waits_on(silent_server))
    (level / "2_good.py").write_text(GOOD)
    out = subprocess.run([sys.executable, "-m", "experiments.cli", "problems", "--source",
                          str(level), "--json", "--import-timeout", "2"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert [r["name"] for r in json.loads(out.stdout)] == ["2_good"]
    assert (f"1_fetches.py: import took longer than 2 s: a network-bound import, trying to "
            f"reach 127.0.0.1:{silent_server}") in out.stderr


@pytest.mark.parametrize("flag", ["--timeout", "--import-timeout"])
def test_both_limits_must_be_positive(flag):
    out = subprocess.run([sys.executable, "-m", "experiments.cli", "problems", flag, "-1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and f"{flag} must be a positive" in out.stderr
    with pytest.raises(ValueError, match="import_timeout_s must be positive"):
        IsolatedFeatures(import_timeout_s=0)
    assert 0 < DEFAULT_IMPORT_TIMEOUT_S <= 10  # "a few seconds": the documented default



def test_the_live_env_stops_a_users_file_whose_import_hangs_at_its_import_limit(tmp_path):
    """AutoProfilerLive-v0's reset computes a user's file's static features as `problems
    --source` does (the same worker, the same error), not by importing it in the caller's
    process with no limit (where a hanging import hung reset)."""
    import time

    import gymnasium as gym

    import autoprofiler_env  # noqa: F401  (registers the environments)

    hangs = tmp_path / "hangs.py"
    hangs.write_text("import time\ntime.sleep(30)\n" + GOOD)  # a regression fails, not hangs
    env = gym.make("AutoProfilerLive-v0", device="cpu", budget_unit="passes",
                   problems=[str(hangs)], import_timeout_s=1)
    backend = env.unwrapped.backend
    began = time.monotonic()
    try:
        with pytest.raises(ProblemTimeoutError) as e:
            env.reset()
        assert time.monotonic() - began < 30  # stopped at the limit, not waited out
    finally:
        env.close()
    assert backend._isolated._worker is None  # close ends the worker
    assert (e.value.phase, e.value.limit_s, e.value.path) == ("import", 1.0,
                                                              str(hangs.resolve()))
    assert str(e.value).startswith(f"{hangs.resolve()}: import took longer than 1 s")
    assert "AutoProfilerLive-v0's import_timeout_s=S" in e.value.hint
    with pytest.raises(ValueError, match="import_timeout_s must be a finite number"):
        gym.make("AutoProfilerLive-v0", device="cpu", budget_unit="passes",
                 problems=[str(hangs)], import_timeout_s=0)


def test_the_live_env_traces_the_suite_here_and_a_users_file_in_the_worker(tmp_path):
    """The suite's files are traced in the caller's process, as before (no process started);
    a user's file in the worker, to the same features."""
    import gymnasium as gym
    import numpy as np

    import autoprofiler_env  # noqa: F401  (registers the environments)
    from autoprofiler_env.features import static_features
    from autoprofiler_env.problems import load_file

    suite = "problem://autoprofiler/v1/level1/relu_16384x16384"
    mine = tmp_path / "mine.py"
    mine.write_text(GOOD)
    env = gym.make("AutoProfilerLive-v0", device="cpu", budget_unit="passes",
                   problems=[suite, str(mine)]).unwrapped
    backend = env.backend
    try:
        env.reset(options={"problem": suite})
        assert backend._isolated._worker is None
        env.reset(options={"problem": env.problems[1]})
        assert backend._isolated._worker is not None
        assert np.array_equal(backend.features(env.problems[1]),
                              static_features(load_file(mine)).vector())
    finally:
        env.close()
