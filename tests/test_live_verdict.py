"""The live backend's verdict on a candidate, on this CPU (no section collected, so no ncu):
the judge's time limit (``timeout_s``, ``autoprofiler optimize --timeout``), a timeout kept at
once while a crash is judged again, and the harness's reason for an incorrect candidate in
the last step's ``info["error"]`` and the command's verdict."""

import json
import re
import time

import gymnasium as gym
import pytest

import autoprofiler_env  # noqa: F401  (registers the environments)
from autoprofiler_env.envs.backends.live import ERROR_CHARS, TRANSIENT
from autoprofiler_env.harness import ErrorKind, EvalResult
from experiments import optimize as command
from experiments.cli import main
from tests.conftest import DATA, users_module

PROBLEM = str(DATA / "problems" / "relu_small.py")

WRITERS = f'''
from pathlib import Path

CANDIDATES = Path({str(DATA / "candidates")!r})


class Writes:
    """Writes the test candidate ``name`` (tests/data/candidates), whatever the profile."""

    name = "relu_correct"

    def optimize(self, problem, profile):
        return (CANDIDATES / (self.name + ".py")).read_text()


class Hangs(Writes):
    name = "hangs"


class OffByALittle(Writes):
    name = "relu_off_by_a_little"


class SyntaxWrong(Writes):
    name = "syntax_error"


class Raises:
    def optimize(self, problem, profile):
        raise RuntimeError("my bug")
'''


@pytest.fixture()
def here(tmp_path, monkeypatch):
    """``tmp_path`` as the current directory holding ``writers.py`` (``users_module``)."""
    with users_module(tmp_path, monkeypatch, "writers", WRITERS) as folder:
        yield folder


def live(optimizer, **kwargs):
    return gym.make("AutoProfilerLive-v0", problems=[PROBLEM], device="cpu",
                    budget_unit="passes", optimizer=optimizer, **kwargs)


def stop(env) -> dict:
    """The episode's end with no section collected (no ncu): the optimizer's outcome."""
    env.reset(seed=0)
    *_, terminated, _, info = env.step(env.unwrapped.STOP)
    assert terminated
    return info


def test_a_hanging_candidate_is_stopped_at_timeout_s_and_judged_once(here):
    """A forward that never returns costs ``timeout_s`` once, not twice (a hang is the
    code's, not a machine's hiccup): 3 s here, where the default would be 2 x 600 s."""
    env = live("py:writers:Hangs", timeout_s=3)
    backend = env.unwrapped.backend
    assert backend.evaluator.timeout_s == 3
    began = time.monotonic()
    info = stop(env)
    took = time.monotonic() - began
    assert info["correct"] is False and info["error_kind"] == "timeout"
    assert info["speedup"] is None
    # the harness's words: the limit less the candidate's load (about 0.1 s here)
    left = re.match(r"no answer within (\d+(?:\.\d+)?) s", info["error"])
    assert left and 0 < float(left[1]) <= 3, info["error"]
    assert backend.judged == [(backend.uri_of(PROBLEM), "py:writers:Hangs")]
    assert took < 60
    env.close()


def test_a_crash_is_still_judged_a_second_time(here, monkeypatch):
    """A crashed worker may be the machine's: the second judgement's verdict is kept."""
    assert "timeout" not in TRANSIENT and "crash" in TRANSIENT
    env = live("py:writers:Writes")
    backend = env.unwrapped.backend
    real = backend.evaluator.evaluate
    verdicts = iter([lambda problem, source: EvalResult(
        problem.uri, "cpu", False, ErrorKind.CRASH, "the worker died: signal 9"), real])
    monkeypatch.setattr(backend.evaluator, "evaluate",
                        lambda problem, source: next(verdicts)(problem, source))
    info = stop(env)
    assert info["correct"] is True and info["error_kind"] is None and info["error"] is None
    assert len(backend.judged) == 2
    env.close()


@pytest.mark.parametrize("kwargs, message", [
    ({"timeout_s": 0}, "timeout_s must be a finite number of seconds > 0"),
    ({"timeout_s": float("inf")}, "timeout_s must be a finite number of seconds > 0"),
    ({"timeout_s": "60"}, "timeout_s must be a finite number of seconds > 0"),
])
def test_a_bad_timeout_is_refused_at_make(here, kwargs, message):
    with pytest.raises(ValueError, match=message):
        live("py:writers:Writes", **kwargs)


def test_the_replay_refuses_a_timeout():
    with pytest.raises(ValueError, match="timeout_s .* the live backend's"):
        gym.make("AutoProfiler-v0", timeout_s=60)


@pytest.mark.parametrize("spec, kind, words", [
    ("py:writers:OffByALittle", "mismatch", "values outside atol=0.01, rtol=0.01"),
    ("py:writers:SyntaxWrong", "import", "SyntaxError"),
    ("py:writers:Raises", "optimizer_raised", "RuntimeError: my bug"),
])
def test_the_harness_reason_reaches_the_last_steps_info(here, spec, kind, words):
    """What a repair loop hands back to its optimizer: which output differed and by how much,
    the SyntaxError's line; the optimizer's own failure, where it raised."""
    env = live(spec)
    info = stop(env)
    assert info["correct"] is False and info["error_kind"] == kind
    assert words in info["error"], info["error"]
    assert info["error"] != info["reason"]
    assert len(info["error"]) <= ERROR_CHARS
    if kind == "mismatch":
        assert "max abs error 0.05" in info["error"]  # by how much
    if kind == "import":
        assert "line" in info["error"]
    env.close()


def test_optimize_prints_the_harness_reason_and_takes_a_timeout(here, capsys, monkeypatch):
    """``autoprofiler optimize --timeout S``: the live environment's ``timeout_s`` (default:
    the environment's); an incorrect verdict says why (``verdict.error``, ``- why:``)."""
    monkeypatch.setattr(command, "check_machine", lambda device="cuda": "ncu")
    made = []
    live_env = command.live_env

    def spying(*args, **kwargs):
        env = live_env(*args, **kwargs)
        made.append(env.unwrapped.backend.evaluator.timeout_s)
        if len(made) > 1:
            env.close()
            raise ValueError("seen")  # what it was made with is all this run checks
        return env

    monkeypatch.setattr(command, "live_env", spying)
    tree = here / "stop.json"
    tree.write_text(json.dumps({"format": "autoprofiler-tree", "version": 1, "meta": {},
                                "root": {"stop": True}}))
    args = ["optimize", PROBLEM, "--tree", str(tree), "--optimizer", "py:writers:OffByALittle",
            "--device", "cpu", "--json"]
    code = main(args + ["--timeout", "30"])
    out, err = capsys.readouterr()
    assert code == 1, err
    verdict = json.loads(out)["verdict"]
    assert verdict["error_kind"] == "mismatch" and "max abs error 0.05" in verdict["error"]
    assert made == [30]
    code = main(args)
    assert code == 2 and made[-1] == 600  # the environment's default
    code = main(args + ["--timeout", "0"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and "the timeout must be a number of seconds > 0, got 0.0" in err
    assert len(made) == 2  # refused before any environment is made

    result = command.OptimizeResult(PROBLEM, str(tree), "py:writers:OffByALittle", 0.3,
                                    "passes", 11.4, (0,), (), (), "", command.Verdict(
                                        **{k: verdict[k] for k in (
                                            "candidate", "reason", "correct", "speedup",
                                            "eager_ms", "candidate_ms", "error_kind",
                                            "error")}))
    lines = command.format_text(result).splitlines()
    assert lines[-2].startswith("- incorrect (mismatch)")
    assert lines[-1] == f"- why: {verdict['error']}"
