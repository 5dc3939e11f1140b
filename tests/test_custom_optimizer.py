"""An optimizer of your own, ``py:MODULE:ATTR``: in the live environment and in ``autoprofiler
optimize`` on this CPU (no sections collected, so no ncu: the candidate is judged on the CPU),
refused by the replay, and each way it can be wrong named."""

import json
import re
import sys

import gymnasium as gym
import pytest

import autoprofiler_env  # noqa: F401  (registers the environments)
from autoprofiler_env.errors import OptimizerSpecError
from autoprofiler_env.optimizers import Candidate
from autoprofiler_env.optimizers.custom import load_optimizer
from autoprofiler_env.problems import load_problem
from experiments import optimize as command
from experiments.cli import main
from tests.conftest import DATA, ROOT, users_module

PROBLEM = str(DATA / "problems" / "relu_small.py")

MINE = '''
from pathlib import Path

from autoprofiler_env.optimizers import Candidate


def same(problem):
    """The problem's own program, its Model as ModelNew: correct, about 1x."""
    return Path(problem.path).read_text() + "\\nModelNew = Model\\n"


class Same:
    def optimize(self, problem, profile):
        return same(problem)


class AsCandidate:
    def __init__(self, device="cuda"):
        self.device = device

    def optimize(self, problem, profile):
        return Candidate(problem.uri, same(problem), "mine", reason="my reason")


def make():
    return AsCandidate(device="cpu")


instance = Same()


class Broken:
    def optimize(self, problem, profile):
        raise RuntimeError("my bug")


built = []


class Counted:
    """Counts its instances (a constructor that loads a model is built once a command)."""

    def __init__(self):
        built.append(self)

    def optimize(self, problem, profile):
        return same(problem)


class BrokenInALibrary:
    def optimize(self, problem, profile):
        import json

        return json.loads("{bad")  # raised in json's decoder: named at this line


class ReturnsNone:
    def optimize(self, problem, profile):
        return None


class ReturnsBytes:
    def optimize(self, problem, profile):
        return same(problem).encode()


class NoOptimize:
    pass


class NeedsArguments:
    def __init__(self, model):
        pass

    def optimize(self, problem, profile):
        return ""


answer = 42

seen = []


class Recording:
    """Keeps each profile it is given."""

    def optimize(self, problem, profile):
        seen.append(profile)
        return same(problem)
'''


@pytest.fixture()
def here(tmp_path, monkeypatch):
    """``tmp_path`` as the current directory holding ``mine.py`` (``users_module``)."""
    with users_module(tmp_path, monkeypatch, "mine", MINE) as folder:
        yield folder


def live(optimizer):
    return gym.make("AutoProfilerLive-v0", problems=[PROBLEM], device="cpu",
                    budget_unit="passes", optimizer=optimizer)


def stop(env) -> dict:
    """The episode's end with no section collected (no ncu): the optimizer's outcome."""
    env.reset(seed=0)
    *_, terminated, _, info = env.step(env.unwrapped.STOP)
    assert terminated
    return info


def test_a_live_episode_judges_the_candidate_of_your_optimizer(here):
    """docs/tree.md's example, saved as my_optimizer.py in the current directory."""
    blocks = re.findall(r"^```python\n(.*?)^```", (ROOT / "docs" / "tree.md").read_text(),
                        re.S | re.M)
    (here / "my_optimizer.py").write_text(next(b for b in blocks if "class MyOptimizer" in b))
    spec = "py:my_optimizer:MyOptimizer"
    env = live(spec)
    assert env.unwrapped.optimizer == spec
    info = stop(env)
    assert info["candidate"] == spec  # a source string: named by the spec
    assert info["reason"] == f"{spec} wrote the program"
    assert info["correct"] is True and info["error_kind"] is None
    # its own program: about 1x; a band, not a timing goal (a loaded CPU's timing is noisy)
    assert 0.1 < info["speedup"] < 10
    assert info["eager_ms"] > 0 and info["candidate_ms"] > 0
    env.close()


@pytest.mark.parametrize("spec", ["py:mine:Same", "py:mine:AsCandidate", "py:mine:make",
                                  "py:mine:instance"])
def test_attr_is_a_class_a_function_or_an_optimizer(here, spec):
    """A class or function is called with no arguments; an object with optimize is the
    optimizer itself; a Candidate comes back as it is, a source string as one named by the
    spec."""
    problem = load_problem(PROBLEM)
    candidate = load_optimizer(spec).optimize(problem, None)
    assert isinstance(candidate, Candidate)
    assert candidate.problem_uri == problem.uri and candidate.error is None
    assert candidate.source.endswith("ModelNew = Model\n")
    mine = spec in ("py:mine:AsCandidate", "py:mine:make")
    assert candidate.producer == ("mine" if mine else spec)


def test_optimize_runs_your_optimizer(here, capsys, monkeypatch):
    """``autoprofiler optimize FILE --optimizer py:...``: the machine check is this CPU's seam
    (a tree that stops at once collects no section, so no ncu runs)."""
    monkeypatch.setattr(command, "check_machine", lambda device="cuda": "ncu")
    tree = here / "stop.json"
    tree.write_text(json.dumps({"format": "autoprofiler-tree", "version": 1, "meta": {},
                                "root": {"stop": True}}))
    code = main(["optimize", PROBLEM, "--tree", str(tree), "--optimizer", "py:mine:Same",
                 "--device", "cpu", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    d = json.loads(out)
    assert d["optimizer"] == "py:mine:Same" and d["sections"] == []
    assert d["verdict"]["candidate"] == "py:mine:Same" and d["verdict"]["correct"] is True
    # its optimize raising: the candidate is incorrect (exit 1), not the command's failure
    code = main(["optimize", PROBLEM, "--tree", str(tree), "--optimizer", "py:mine:Broken",
                 "--device", "cpu"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "py:mine:Broken: optimize raised RuntimeError: my bug (mine.py:" in out
    assert err.strip() == "autoprofiler: candidate py:mine:Broken incorrect (optimizer_raised)"
    # no tree ships for it: one line saying to give one
    code = main(["optimize", PROBLEM, "--optimizer", "py:mine:Same"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "no tree ships for the optimizer 'py:mine:Same'" in err and "--tree FILE" in err
    assert "reference.json" in err
    # a spec naming nothing: one line, exit 2
    code = main(["optimize", PROBLEM, "--tree", str(tree), "--optimizer", "py:mine:Nope",
                 "--device", "cpu"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "has no attribute 'Nope'" in err


def test_the_replay_refuses_it_saying_to_run_it_live(here):
    with pytest.raises(OptimizerSpecError, match=r"optimizer py:mine:Same: the replay "
                       r"\(AutoProfiler-v0\) answers with recorded outcomes, and none are "
                       r"recorded for an optimizer of your own: run it in the live "
                       r"environment, gym.make\('AutoProfilerLive-v0'") as info:
        gym.make("AutoProfiler-v0", optimizer="py:mine:Same")
    # the command it suggests is not itself refused (no tree ships for the optimizer)
    suggested = re.search(r"`autoprofiler (optimize FILE [^`]*)`", str(info.value)).group(1)
    assert "--tree agents/tree/data/reference.json" in suggested
    args = suggested.replace("FILE", PROBLEM).split()
    args[args.index("--tree") + 1] = str(ROOT / args[args.index("--tree") + 1])
    assert main([*args, "--plan"]) == 0
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert ("--optimizer py:my_optimizer:MyOptimizer --tree agents/tree/data/reference.json"
            in readme)


@pytest.mark.parametrize("spec, message", [
    ("py:nowhere_module:X", r"^optimizer py:nowhere_module:X: no module 'nowhere_module' is "
                            r"importable from the current directory \(.*\) or PYTHONPATH"),
    ("py:mine:Nope", r"^optimizer py:mine:Nope: mine \(.*mine.py\) has no attribute 'Nope'; "
                     r"its classes and functions: AsCandidate, Broken, BrokenInALibrary, "
                     r"Counted, NeedsArguments, "
                     r"NoOptimize, Recording, ReturnsBytes, ReturnsNone, Same, make, "
                     r"same"),
    ("py:mine:NoOptimize", r"NoOptimize\(\) returned NoOptimize .*which has no optimize "
                           r"method: an optimizer is an object with optimize\(problem, "
                           r"profile\)"),
    ("py:mine:answer", r"int 42, which has no optimize method"),
    ("py:mine:NeedsArguments", r"NeedsArguments\(model\) cannot be called with no arguments"),
    ("py:mine", r"^optimizer 'py:mine': give py:MODULE:ATTR"),
])
def test_a_spec_that_gives_no_optimizer_says_what(here, spec, message):
    with pytest.raises(OptimizerSpecError, match=message):
        live(spec)


def test_a_module_that_does_not_import_says_what_it_lacks(here):
    (here / "mine_broken.py").write_text("import not_installed_anywhere\n")
    with pytest.raises(OptimizerSpecError, match=r"importing mine_broken failed: No module "
                                                 r"named 'not_installed_anywhere'"):
        live("py:mine_broken:X")


def test_optimize_raising_is_the_episodes_incorrect_candidate(here):
    """As an LLM's reply without a program is: judged incorrect without running anything,
    the reason naming the exception and where it was raised."""
    env = live("py:mine:Broken")
    info = stop(env)
    assert info["candidate"] == "py:mine:Broken" and info["correct"] is False
    assert info["error_kind"] == "optimizer_raised" and info["speedup"] is None
    assert info["reason"].startswith("py:mine:Broken: optimize raised RuntimeError: my bug "
                                     "(mine.py:")
    assert env.unwrapped.backend.judged == []
    info = stop(live("py:mine:BrokenInALibrary"))
    line = MINE.splitlines().index('        return json.loads("{bad")  # raised in json\'s '
                                   'decoder: named at this line') + 1
    assert info["reason"].endswith(f"(mine.py:{line})")  # the user's line, not decoder.py's
    assert info["error"].startswith("JSONDecodeError: ")


@pytest.mark.parametrize("spec, returned", [("py:mine:ReturnsNone", "NoneType None"),
                                             ("py:mine:ReturnsBytes", "bytes b'")])
def test_optimize_returning_neither_source_nor_candidate_is_the_episodes_incorrect_candidate(
        here, spec, returned):
    """As an LLM's reply without code is ("no code" is an agent's most common failure): the
    episode's, not the run's; bytes are not decoded, as any other type."""
    env = live(spec)
    info = stop(env)
    assert info["candidate"] == spec and info["correct"] is False
    assert info["error_kind"] == "optimizer_returned" and info["speedup"] is None
    assert info["reason"].startswith(f"{spec}: optimize returned {returned}")
    assert "not the ModelNew source (a str) or a Candidate" in info["reason"]
    assert env.unwrapped.backend.judged == []
    info = stop(env)  # the next episode runs as any other
    assert info["error_kind"] == "optimizer_returned"


BROKEN_IMPORTS = [
    ("mine_syntax", "def optimize(:\n", r"SyntaxError: .* \(mine_syntax.py:1\)"),
    ("mine_relative", "from . import sibling\n",
     r"ImportError: attempted relative import with no known parent package "
     r"\(mine_relative.py:1\)"),
    ("mine_key", "import os\n\nKEY = os.environ['NO_SUCH_API_KEY_ANYWHERE']\n",
     r"KeyError: 'NO_SUCH_API_KEY_ANYWHERE' \(mine_key.py:3\)"),
]


@pytest.mark.parametrize("module, source, message", BROKEN_IMPORTS)
def test_a_module_whose_import_raises_is_a_spec_error_naming_where(here, module, source,
                                                                    message):
    (here / f"{module}.py").write_text(source)
    with pytest.raises(OptimizerSpecError, match=rf"^optimizer py:{module}:X: importing "
                                                 rf"{module} failed: {message}$"):
        load_optimizer(f"py:{module}:X")
    # the command: one line (exit 2), and --json gets it as JSON, not a traceback
    code = main(["optimize", PROBLEM, "--optimizer", f"py:{module}:X", "--json"])
    assert code == 2
    from experiments.policies import PolicySpecError, load

    env = gym.make("AutoProfiler-v0", split="test")
    with pytest.raises(PolicySpecError, match=rf"^--policy py:{module}:X: importing {module} "
                                              rf"failed: {message}$"):
        load(f"py:{module}:X", env)


def test_a_module_whose_import_raises_is_json_from_the_command(here, capsys):
    (here / "mine_key.py").write_text(BROKEN_IMPORTS[2][1])
    code = main(["optimize", PROBLEM, "--optimizer", "py:mine_key:X", "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    error = json.loads(out)["error"]
    assert error["kind"] == "OptimizerSpecError"
    assert error["message"].startswith("optimizer py:mine_key:X: importing mine_key failed: "
                                       "KeyError: 'NO_SUCH_API_KEY_ANYWHERE' (mine_key.py:3)")


@pytest.mark.parametrize("spec, dotted", [("py:pkg/mine:Same", "py:pkg.mine:ATTR"),
                                          ("py:mine.py:Same", "py:mine:ATTR"),
                                          ("py:pkg/mine.py:Same", "py:pkg.mine:ATTR")])
def test_a_file_path_as_module_is_told_in_dots(here, spec, dotted):
    with pytest.raises(OptimizerSpecError, match=rf"MODULE is a module's dotted name, not its "
                                                 rf"file: give {re.escape(dotted)}"):
        load_optimizer(spec)


def test_whitespace_around_the_spec_and_its_parts_is_left_out(here, capsys):
    assert load_optimizer(" py: mine : Same ").spec == "py:mine:Same"
    candidate = load_optimizer("py: mine:Same").optimize(load_problem(PROBLEM), None)
    assert candidate.producer == "py:mine:Same" and candidate.error is None
    env = live(" py: mine : Same")  # the environment's and the command's entry points too
    assert env.unwrapped.optimizer == "py:mine:Same" and stop(env)["candidate"] == "py:mine:Same"
    env.close()
    tree = str(ROOT / "agents" / "tree" / "data" / "reference.json")
    assert main(["optimize", PROBLEM, "--optimizer", " py:mine:Same", "--tree", tree,
                 "--plan", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["optimizer"] == "py:mine:Same"


def test_a_command_builds_your_optimizer_once(here, capsys):
    """Its spec is checked before the tree and the machine without building it (a
    constructor may load a model); the live environment builds it, once."""
    tree = str(ROOT / "agents" / "tree" / "data" / "reference.json")
    assert main(["optimize", PROBLEM, "--optimizer", "py:mine:Counted", "--tree", tree,
                 "--plan"]) == 0
    assert len(sys.modules["mine"].built) == 1


def test_a_spec_typo_is_named_before_the_tree_and_the_machine(here, capsys):
    """On this CPU, without --tree too: the typo first, not "needs a CUDA GPU" nor "no tree
    ships"."""
    tree = str(ROOT / "agents" / "tree" / "data" / "reference.json")
    for args in (["--tree", tree], []):
        code = main(["optimize", PROBLEM, "--optimizer", "py:my_optimzer:MyOptimizer", *args])
        err = capsys.readouterr().err
        assert code == 2 and "no module 'my_optimzer' is importable" in err, err
        code = main(["optimize", PROBLEM, "--optimizer", "py:mine:Nope", *args])
        err = capsys.readouterr().err
        assert code == 2 and "has no attribute 'Nope'" in err, err


@pytest.mark.skipif(__import__("torch").cuda.is_available(),
                    reason="needs a machine without CUDA")
def test_without_a_gpu_the_live_env_points_a_py_optimizer_to_recorded_profiles(here):
    """Not to the replay, which refuses it."""
    from autoprofiler_env.errors import MachineError

    env = gym.make("AutoProfilerLive-v0", problems=[PROBLEM], optimizer="py:mine:Same")
    with pytest.raises(MachineError) as info:
        env.reset(seed=0)
    message = str(info.value)
    assert "AutoProfiler-v0" not in message.replace("AutoProfilerLive-v0", "")
    assert ("gym.make('AutoProfilerLive-v0', dataset='suite', evidence='recorded', "
            "optimizer='py:mine:Same', problems=['relu_16384x16384'], device='cpu', "
            "budget_unit='passes', budget=1.0, harness={'size': 'smoke'})") in message


def test_the_docs_cpu_route_hands_your_optimizer_recorded_profiles(here, capsys):
    """docs/tree.md's snippet, beside its my_optimizer.py: a suite problem's recorded
    SpeedOfLight handed to the optimizer, its program judged on the CPU at smoke size."""
    blocks = re.findall(r"^```python\n(.*?)^```", (ROOT / "docs" / "tree.md").read_text(),
                        re.S | re.M)
    (here / "my_optimizer.py").write_text(next(b for b in blocks if "class MyOptimizer" in b))
    snippet = next(b for b in blocks if '"py:my_optimizer:' in b and "evidence=" in b)
    seen = {}
    exec(compile(snippet, "<docs>", "exec"), seen)
    info = seen["info"]
    assert info["sections"] == ("SpeedOfLight",)
    assert info["candidate"] == "py:my_optimizer:MyOptimizer" and info["correct"] is True
    assert capsys.readouterr().out.startswith("True ")


@pytest.mark.gpu
def test_on_a_gpu_your_optimizer_is_given_the_sections_collected_and_judged(here):
    """Live on CUDA: the section collected is profiled by ncu and handed to your optimizer as
    a Profile; its program is judged on the GPU."""
    env = gym.make("AutoProfilerLive-v0", problems=[PROBLEM], device="cuda",
                   budget_unit="passes", budget=1.0, optimizer="py:mine:Recording")
    env.reset(seed=0)
    env.step(env.unwrapped.sections.index("SpeedOfLight"))
    *_, terminated, _, info = env.step(env.unwrapped.STOP)
    assert terminated and info["sections"] == ("SpeedOfLight",)
    assert info["correct"] is True and 0.5 < info["speedup"] < 2  # its own program: about 1x
    (profile,) = sys.modules["mine"].seen
    assert "SpeedOfLight" in profile.sections and profile.kernels
    assert all(k.metrics for k in profile.kernels)
    env.close()


def test_an_optimizer_whose_model_gave_no_reply_raises_that_not_an_outcome():
    """A py: optimizer asking an endpoint that is down (reviewed: its LLMError became the
    episode's incorrect candidate, though the LLM optimizer's own is raised): raised as it
    is; an LLMError of a reply that gave no program stays the episode's outcome."""
    from autoprofiler_env.errors import LLMError
    from autoprofiler_env.optimizers.custom import CustomOptimizer

    class Asking:
        def __init__(self, error):
            self.error = error

        def optimize(self, problem, profile):
            raise self.error

    relu = load_problem("relu_16384x16384")
    down = LLMError("connection", "cannot reach http://127.0.0.1:9/v1/chat/completions")
    with pytest.raises(LLMError, match="^connection: "):
        CustomOptimizer("py:my_llm:Asking", Asking(down)).optimize(relu, None)
    prose = LLMError("no_code", "the reply (40 chars) has no ```python code block")
    candidate = CustomOptimizer("py:my_llm:Asking", Asking(prose)).optimize(relu, None)
    assert candidate.error.startswith("optimizer_raised: LLMError: no_code: ")
