"""``autoprofiler optimize``: its one-line errors on this CPU machine, and the profile, cost
and verdict it prints, run through the replay environment on the shipped dataset (the live
environment's stand-in: same ``ProfilingEnv``, same ``TreePolicy``, a backend answering from
the H200's recording)."""

import itertools
import json
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import autoprofiler_env  # noqa: F401  (registers the environments)
from agents.tree.nodes import Branch, from_dict, load, vocabulary
from agents.tree.policy import TreePolicy
from agents.tree.reading import locate, threshold
from autoprofiler_env.envs.profiling_env import COST_SLACK
from autoprofiler_env.errors import AutoProfilerError
from autoprofiler_env.evaluation import rollout
from autoprofiler_env.profiler import render_markdown
from experiments import optimize as command
from experiments.cli import main
from tests.conftest import DATA

PROBLEM = str(DATA / "problems" / "relu_small.py")
POOL = "problem://autoprofiler/v1/level1/adaptive_avg_pool2d_128x256x56x56"  # compile: 1.93x
RELU = "autoprofiler_env/problems/suite/level1/relu_16384x16384.py"  # traced in-process
MATMUL = "problem://autoprofiler/v1/level1/matmul_4096x4096x4096"  # tf32: fails 1e-2


def tree_file(tmp_path, root, name="tree.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"format": "autoprofiler-tree", "version": 1, "meta": {},
                                "root": root}))
    return path


def collect(*sections):
    node = {"stop": True}
    for section in reversed(sections):
        node = {"collect": section, "next": node}
    return node


def run_main(capsys, *argv):
    code = main(["optimize", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("autoprofiler: error: ")
    return lines[0]


def replay_env(uri, **kwargs):
    """The replay of ``uri``; these tests check reference-v1's recorded outcomes."""
    kwargs.setdefault("budget_unit", "passes")
    kwargs.setdefault("optimizer", "reference-v1")
    return gym.make("AutoProfiler-v0", problems=[uri], **kwargs)


# -- the errors, each one line on stderr and exit code 2 --------------------------------------

def test_without_a_gpu_it_says_so_in_one_line(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code, out, err = run_main(capsys, PROBLEM, "--tree",
                              tree_file(tmp_path, collect("LaunchStats")))
    assert code == 2 and out == ""
    line = one_line(err)
    assert "optimize needs a CUDA GPU and Nsight Compute (ncu)" in line
    assert "no CUDA device" in line
    assert "on this one, `autoprofiler optimize FILE --plan` shows what the tree" in line


def test_without_ncu_it_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("NCU", str(tmp_path / "no-ncu-here"))
    code, out, err = run_main(capsys, PROBLEM, "--tree",
                              tree_file(tmp_path, collect("LaunchStats")))
    assert code == 2 and out == ""
    line = one_line(err)
    assert "optimize needs a CUDA GPU and Nsight Compute (ncu)" in line
    assert "`ncu` was not found" in line and "NCU=" in line


@pytest.mark.parametrize("text, message", [
    ("{not json", "not JSON"),
    (json.dumps({"format": "something-else", "root": {"stop": True}}), "not an AutoProfiler tree"),
    (json.dumps({"format": "autoprofiler-tree", "version": 1,
                 "root": collect("SpeedOfLigth")}), "did you mean SpeedOfLight?"),
    (json.dumps({"format": "autoprofiler-tree", "version": 1,
                 "root": {"if": {"metric": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                                 "at_least": 60}, "then": {"stop": True},
                          "else": {"stop": True}}}), "not collected above this node"),
])
def test_a_bad_tree_file_is_one_line_and_exit_2(tmp_path, capsys, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    code, out, err = run_main(capsys, PROBLEM, "--tree", path)
    assert code == 2 and out == ""
    line = one_line(err)
    assert str(path) in line and message in line


def test_a_missing_tree_file_is_one_line_and_exit_2(tmp_path, capsys):
    code, _, err = run_main(capsys, PROBLEM, "--tree", tmp_path / "nope.json")
    assert code == 2
    assert "cannot read the tree file" in one_line(err)


@pytest.mark.parametrize("problem, message", [
    (DATA / "problems" / "does_not_exist.py", "no such file"),
    (DATA / "problems" / "lacks_get_inputs.py", "does not define get_inputs"),
    ("problem://autoprofiler/v1/level1/nope", "no problem of the suite"),
])
def test_a_missing_or_broken_problem_is_one_line_and_exit_2(tmp_path, capsys, problem, message):
    code, out, err = run_main(capsys, problem, "--tree",
                              tree_file(tmp_path, collect("LaunchStats")))
    assert code == 2 and out == ""
    assert message in one_line(err)


@pytest.mark.parametrize("args, message", [
    (["--budget", "0"], "the budget must be a number > 0"),
    (["--budget", "nan"], "the budget must be a number > 0"),
    (["--optimizer", "gpt"], "optimizer must be one of"),
    (["--device", "cpu"], "--device must be cuda or cuda:N"),
    (["--import-timeout", "0"], "the import timeout must be a number of seconds > 0"),
])
def test_bad_options_are_one_line_and_exit_2(tmp_path, capsys, args, message):
    code, _, err = run_main(capsys, PROBLEM, "--tree", tree_file(tmp_path, collect("LaunchStats")),
                            *args)
    assert code == 2
    assert message in one_line(err)


def test_a_file_whose_import_hangs_is_one_line_at_the_import_limit(tmp_path, capsys,
                                                                  monkeypatch):
    """The file is imported first for its static features, in a worker process under
    --import-timeout (as `problems --source` imports it), not in the command's own process
    with no limit (the machine check is this CPU's seam; the live environment is real)."""
    import time

    monkeypatch.setattr(command, "check_machine", lambda device="cuda": "ncu")
    path = tmp_path / "hangs.py"
    path.write_text("import time\ntime.sleep(30)\n" + Path(PROBLEM).read_text())
    began = time.monotonic()
    code, out, err = run_main(capsys, path, "--tree", tree_file(tmp_path, collect("LaunchStats")),
                              "--device", "cpu", "--import-timeout", "1")
    assert time.monotonic() - began < 30  # stopped, not waited out
    assert code == 2 and out == ""
    line = one_line(err)
    assert f"{path}: import took longer than 1 s" in line
    assert "autoprofiler optimize --import-timeout S" in line


def test_without_tree_it_takes_the_shipped_one_or_asks_for_one(tmp_path, capsys, monkeypatch):
    import agents.tree

    monkeypatch.setattr(agents.tree, "DATA", tmp_path)
    code, _, err = run_main(capsys, PROBLEM, "--optimizer", "reference")
    assert code == 2
    line = one_line(err)
    assert "no tree ships for the optimizer 'reference'" in line and "--tree FILE" in line
    shipped = tree_file(tmp_path, collect("LaunchStats"), name="reference.json")
    assert command.shipped_tree("reference") == shipped
    tree_file(tmp_path, collect("LaunchStats"), name="llm-org-model-7b.json")
    assert command.shipped_tree("llm:org/model:7b") == tmp_path / "llm-org-model-7b.json"


# -- the run, through the replay environment ---------------------------------------------------

def test_the_profile_is_the_optimizers_and_the_verdict_the_episodes(tmp_path):
    tree = tree_file(tmp_path, collect("LaunchStats", "InstructionStats", "SourceCounters"))
    env = replay_env(POOL)
    result = command.optimize(POOL, tree, env=env)
    base = env.unwrapped
    # the same episode as the one evaluation gives, with the same outcome
    (record,) = rollout(replay_env(POOL), TreePolicy(from_dict(json.loads(tree.read_text())),
                                                     env))
    assert result.sections == record.sections == ("LaunchStats", "InstructionStats",
                                                  "SourceCounters")
    assert result.verdict.candidate == record.candidate == "compile"
    assert result.verdict.correct and result.verdict.speedup == pytest.approx(record.speedup)
    assert result.verdict.speedup == pytest.approx(1.931, abs=1e-3)
    assert result.verdict.eager_ms > result.verdict.candidate_ms > 0
    # exactly the markdown the optimizer's prompt holds
    profile = base.backend.profile(POOL, result.sections)
    assert result.profile_markdown == render_markdown(profile)
    assert result.profile_markdown.startswith(
        "# Nsight Compute profile (LaunchStats, InstructionStats, SourceCounters)")
    # each section's cost, as recorded, and what the budget was charged
    assert [c.passes for c in result.costs] == [
        base.backend.profile(POOL, (s,)).cost.passes for s in result.sections]
    assert result.passes == profile.cost.passes
    assert result.replay_s == pytest.approx(profile.cost.replay_s)
    assert result.spent == pytest.approx(record.cost) and result.spent <= result.budget_total
    assert (result.budget, result.budget_unit, result.budget_total) == (0.25, "passes", 9.5)
    assert result.path == (0, 1, 2, 3)
    assert result.explanation == ("[0] collect LaunchStats: collected",
                                  "[1] collect InstructionStats: collected",
                                  "[2] collect SourceCounters: collected", "[3] stop: the action")

    text = command.format_text(result)
    assert "## Why these sections\n\n    [0] collect LaunchStats: collected\n" in text
    assert result.profile_markdown.rstrip() in text
    assert "| **total** | " in text and f"of {result.budget_total:g} |" in text
    assert "- candidate: `compile`" in text and "- correct; speedup 1.93x" in text
    d = json.loads(command.format_json(result))
    assert d["schema"] == command.SCHEMA and d["sections"] == list(result.sections)
    assert d["verdict"]["candidate"] == "compile" and d["verdict"]["correct"] is True
    assert d["total"]["passes"] == result.passes and d["profile_markdown"] == text.split(
        "<!-- profile -->\n")[1].split("<!-- /profile -->")[0]
    # and the profile as data, which reads back as the profile the markdown renders
    from autoprofiler_env.profiler.records import Profile

    assert render_markdown(Profile.from_dict(d["profile"])) == result.profile_markdown


@pytest.mark.parametrize("root, unit, sections", [
    # the budget runs out on the third section (3.75 of 15 sections): the step that
    # collects it would call the optimizer
    (collect("LaunchStats", "Occupancy", "SchedulerStats", "WorkloadDistribution"), "sections",
     ("LaunchStats", "Occupancy", "SchedulerStats")),
    # 9 of 9.5 passes: nothing else fits after it, and the next Collect is passed over
    (collect("MemoryWorkloadAnalysis", "LaunchStats"), "passes", ("MemoryWorkloadAnalysis",)),
    # the tree stops with budget left; SpeedOfLight (10 passes) does not fit and is passed over
    (collect("SpeedOfLight", "LaunchStats"), "passes", ("LaunchStats",)),
    ({"stop": True}, "passes", ()),
])
def test_profile_only_collects_what_a_full_run_does_and_never_optimizes(tmp_path, root, unit,
                                                                        sections):
    tree = tree_file(tmp_path, root)
    full = command.optimize(POOL, tree, env=replay_env(POOL, budget_unit=unit))
    env = replay_env(POOL, budget_unit=unit)
    only = command.optimize(POOL, tree, env=env, profile_only=True)
    assert full.sections == only.sections == sections
    assert only.profile_markdown == full.profile_markdown
    def charged(r):  # the wall seconds are measured, the rest recorded
        return [(c.section, c.passes, c.replay_s, c.charged) for c in r.costs]

    assert charged(only) == charged(full)
    assert only.verdict is None and full.verdict is not None
    assert env.unwrapped.last_record is None  # the optimizer was never asked
    text = command.format_text(only)
    assert "not optimized (--profile-only)" in text
    if not sections:
        assert "No profile was collected for this program" in only.profile_markdown
        assert "nothing collected (0 of 9.5 passes)" in text


MINE = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.nn.functional.adaptive_avg_pool2d(x, 1)
'''


def candidate_walk(tmp_path, monkeypatch):
    """A tree that branches on a metric SpeedOfLight measures, run live on a CPU (ncu's seam
    replaced by recorded profiles: the Model's are the pool's, the candidate's the matmul's,
    whose memory throughput is above the branch's 57% where the pool's is below it)."""
    import autoprofiler_env.envs.backends.live as live
    from autoprofiler_env.dataset import Dataset

    recorded = Dataset.load("suite")
    calls = []

    def fake_ncu(problems, sections, **kwargs):
        [problem] = problems
        calls.append(problem)
        return [recorded.profile(MATMUL if problem.candidate else POOL, sections)], []

    monkeypatch.setattr(live, "profile_problems", fake_ncu)
    tree = tree_file(tmp_path, {"collect": "SpeedOfLight", "next": {
        "if": {"metric": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
               "at_least": 57},
        "then": collect("LaunchStats"), "else": collect("Occupancy")}})
    mine = tmp_path / "mine.py"
    mine.write_text(MINE)
    return tree, mine, calls


def test_a_candidate_is_profiled_in_place_of_the_model_on_the_problems_walk(tmp_path,
                                                                             monkeypatch):
    """optimize --candidate --profile-only: every ncu run is of the candidate's ModelNew on
    the problem's inputs; the tree walks on the problem's static features and budget and
    reads the candidate's metrics, so its path can differ from the Model's."""
    tree, mine, calls = candidate_walk(tmp_path, monkeypatch)

    def live(**kwargs):
        return gym.make("AutoProfilerLive-v0", problems=[POOL], device="cpu",
                        budget_unit="passes", budget=0.3, **kwargs)

    model = command.optimize(POOL, tree, env=live(), profile_only=True)
    assert model.sections == ("SpeedOfLight", "Occupancy") and model.candidate_file is None
    assert all(p.candidate is None for p in calls)
    calls.clear()
    monkeypatch.chdir(tmp_path)  # a relative path, as a user gives it
    env = live(candidate_file="mine.py")
    backend = env.unwrapped.backend
    assert backend.candidate_file == mine.resolve()  # absolute: the process may change dirs
    with pytest.raises(AttributeError):
        backend.candidate_file = None  # what it profiles is fixed when it is made
    result = command.optimize(POOL, tree, env=env, profile_only=True)
    assert result.sections == ("SpeedOfLight", "LaunchStats")  # the candidate's metric
    assert [(p.uri, p.candidate) for p in calls] == [(POOL + "#ModelNew", mine.resolve())] * 2
    assert backend.profiled == [(POOL + "#ModelNew", s) for s in result.sections]
    assert result.problem == POOL and result.candidate_file == str(mine.resolve())
    assert result.verdict is None and result.budget_total == model.budget_total
    assert result.profile["kernels"][0]["name"].startswith("sm80_xmma_gemm")  # the matmul's
    assert "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed >= 57: 59.3" in \
        "\n".join(result.explanation)
    text = command.format_text(result)
    assert text.startswith(f"<!-- {POOL} (profiled: {mine.resolve()}'s ModelNew): tree ")
    assert json.loads(command.format_json(result))["candidate_file"] == str(mine.resolve())
    # the episode's end would hand the optimizer another program's profile: refused, saying
    # how to read the profile instead, also where a collect ends it (nothing else affordable)
    sections = env.unwrapped.sections
    env.reset()
    env.step(sections.index("SpeedOfLight"))
    with pytest.raises(AutoProfilerError, match=re.escape(
            f"collects profiles only, and an episode cannot end in an optimization; the "
            f"sections collected stay readable: env.unwrapped.backend.profile({POOL!r}, "
            f"('SpeedOfLight', 'LaunchStats'))")):
        env.step(sections.index("LaunchStats"))  # 11 of 11.4 passes: the episode's last
    collected = backend.profile(POOL, ("SpeedOfLight", "LaunchStats"))
    assert collected.kernels[0].name.startswith("sm80_xmma_gemm")
    env.reset()
    with pytest.raises(AutoProfilerError, match=re.escape(f"profile({POOL!r}, ())")):
        env.step(env.unwrapped.STOP)
    with pytest.raises(ValueError, match="collected alone \\(--profile-only"):
        command.optimize(POOL, tree, env=env)
    with pytest.raises(ValueError, match="profiles the candidate it was made with"):
        command.optimize(POOL, tree, env=live(), profile_only=True, candidate_file=mine)


def test_a_candidate_is_checked_before_the_machine_and_needs_profile_only(tmp_path, capsys):
    tree = tree_file(tmp_path, collect("LaunchStats"))
    (tmp_path / "none.py").write_text("x = 1\n")
    (tmp_path / "broken.py").write_text("class ModelNew(:\n")
    for args, message in (
            ([tmp_path / "none.py", "--profile-only"], "the candidate defines no ModelNew"),
            ([tmp_path / "broken.py", "--profile-only"], "syntax error at line 1"),
            ([tmp_path / "nope.py", "--profile-only"], "cannot read the candidate file"),
            ([tmp_path / "none.py"], "a candidate's profile is collected alone "
                                     "(--profile-only, profile_only=True)"),
            ([tmp_path / "none.py", "--plan"], "--candidate with --plan: the plan reads the "
                                               "file's static features and the budget alone")):
        code, out, err = run_main(capsys, PROBLEM, "--tree", tree, "--candidate", *args)
        assert code == 2 and out == ""
        assert message in one_line(err), args


def test_a_candidate_is_profiled_on_one_problem_with_ncu(tmp_path):
    from autoprofiler_env.envs.backends import LiveBackend

    mine = tmp_path / "mine.py"
    mine.write_text(MINE)
    with pytest.raises(ValueError, match="holds 2: give problems=\\[one\\]"):
        LiveBackend([POOL, MATMUL], device="cpu", candidate_file=mine)
    with pytest.raises(ValueError, match="a candidate is profiled with ncu"):
        LiveBackend([POOL], device="cpu", dataset="suite", evidence="recorded",
                    candidate_file=mine)
    with pytest.raises(ValueError, match="candidate_file are the live backend's"):
        gym.make("AutoProfiler-v0", problems=[POOL], candidate_file=str(mine))
    with pytest.raises(AutoProfilerError, match="defines no ModelNew"):
        LiveBackend([POOL], device="cpu", candidate_file=PROBLEM)
    for bad in (mine, "", "  "):  # a make kwarg is JSON: a str; and a path, not nothing
        with pytest.raises(ValueError, match="candidate_file must be a file's path"):
            gym.make("AutoProfilerLive-v0", problems=[POOL], device="cpu",
                     budget_unit="passes", candidate_file=bad)
    for bad in ("", "  ", 3):  # optimize() says so too, not ".: cannot read the candidate file"
        with pytest.raises(ValueError, match="candidate_file must be a file's path"):
            command.optimize(POOL, profile_only=True, candidate_file=bad)


@pytest.mark.parametrize("flag, message", [
    ("--plan", "--timeout with --plan: the plan reads the file's static features"),
    ("--profile-only", "the timeout (--timeout) is the judge's limit on the optimizer's "
                       "candidate; --profile-only judges nothing")])
def test_the_judges_timeout_is_refused_where_nothing_is_judged(tmp_path, capsys, flag,
                                                               message):
    tree = tree_file(tmp_path, collect("LaunchStats"))
    code, out, err = run_main(capsys, PROBLEM, "--tree", tree, flag, "--timeout", "60")
    assert code == 2 and out == ""
    assert message in one_line(err)


def test_the_command_prints_json_and_exits_1_for_an_incorrect_candidate(tmp_path, capsys,
                                                                        monkeypatch):
    """The CLI's wiring, with the live environment replaced by the replay one (the two seams
    are this command's own: the machine check and the environment it builds)."""
    monkeypatch.setattr(command, "check_machine", lambda device="cuda": "ncu")
    monkeypatch.setattr(command, "live_env", lambda problem, optimizer, budget, unit, device,
                        **live_only: replay_env(
                            problem, optimizer=optimizer, budget=budget, budget_unit=unit))
    tree = tree_file(tmp_path, collect("MemoryWorkloadAnalysis"))
    code, out, err = run_main(capsys, MATMUL, "--tree", tree, "--optimizer", "reference-v1",
                              "--json")
    assert code == 1
    d = json.loads(out)
    assert d["problem"] == MATMUL and d["sections"] == ["MemoryWorkloadAnalysis"]
    assert d["verdict"]["candidate"] == "tf32" and d["verdict"]["correct"] is False
    assert err.strip() == "autoprofiler: candidate tf32 incorrect (" + \
        f"{d['verdict']['error_kind']})"

    code, out, err = run_main(capsys, POOL, "--tree", tree, "--budget-unit", "sections",
                              "--profile-only")
    assert code == 0 and err == ""
    assert "# Nsight Compute profile (MemoryWorkloadAnalysis)" in out
    assert "(--profile-only)" in out
    assert "budget 0.3 of the full set = 4.5 sections" in out


def test_plan_walks_the_first_step_on_a_machine_without_a_gpu(tmp_path, capsys):
    """--plan needs no GPU and no ncu: the tree's walk up to its first action, from the file's
    static features (imported in a worker, as every file of the user's) and the budget."""
    tree = tree_file(tmp_path, {"if": {"feature": "log_n_ops", "at_least": 0.1},
                                "then": collect("LaunchStats"), "else": {"stop": True}})
    code, out, err = run_main(capsys, PROBLEM, "--tree", tree, "--plan")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert re.fullmatch(r"\[0\] if log_n_ops >= 0\.1 \(n_ops >= 1\): [0-9.]+ "
                        r"\([0-9.e+]+\), yes", lines[0]), lines
    assert lines[1] == "[1] collect LaunchStats: the action"
    assert "on a GPU with ncu" in lines[-1]
    code, out, _ = run_main(capsys, PROBLEM, "--tree", tree, "--plan", "--json")
    assert code == 0 and json.loads(out)["explanation"] == lines[:2]
    # the shipped tree on a suite file, as the docs show it
    code, out, _ = run_main(capsys, "autoprofiler_env/problems/suite/level2/"
                                    "linear_gelu_layernorm_4096x4096.py", "--plan")
    assert code == 0 and "[41] collect InstructionStats: the action" in out
    # its arguments are checked as optimize's are, in one line
    code, out, err = run_main(capsys, PROBLEM, "--tree", tree, "--plan", "--budget", "-1")
    assert code == 2 and out == "" and "the budget must be a number > 0" in one_line(err)


def walks(tree_path, problem, budget):
    """What the tree's own walk (``TreePolicy.predict``, then ``path`` on the last
    observation) gives on ``problem`` for every assignment of the values its branches on
    sections read: each value below all of its thresholds, at each of them, or not reported;
    the observation of each step built as the environment's would be (a section's values known
    once it is collected, the action mask from what is left), the costs the live ones."""
    env = command.live_env(problem, "reference", budget, "passes", "cpu")
    obs0, _ = env.reset()
    base, tree = env.unwrapped, load(tree_path)
    policy, vocab = TreePolicy(tree, env), vocabulary(tuple(base.sections))
    costs, budget_total = base.section_costs, base.episode_budget
    env.close()
    read = {}  # where the observation holds a value -> (its section, the thresholds read)
    for node in tree.nodes():
        if isinstance(node, Branch) and vocab.source(node.condition) is not None:
            c = node.condition
            where = locate(c.kind, c.name, vocab, policy.metric_names)
            read.setdefault(where, (vocab.source(c), set()))[1].add(threshold(c))
    found = set()
    for values in itertools.product(*[[min(t) - 1, *sorted(t), None] for _, t in read.values()]):
        obs = {k: np.array(v, copy=True) for k, v in obs0.items()}
        collected, spent = [], 0.0
        while True:
            for (entry, known, j), (section, _), value in zip(read, read.values(), values):
                if section in collected and value is not None:
                    obs[entry][j] = value
                    obs[known][j] = 1
            fits = (obs["collected"] == 0) & (costs <= budget_total - spent + COST_SLACK)
            mask = np.append(fits, True)
            action = int(policy.predict(obs, action_masks=mask)[0])
            if action == policy.stop:
                break
            collected.append(base.sections[action])
            obs["collected"][action] = 1
            spent += costs[action]
        found.add((tuple(policy.path(obs, mask)), tuple(collected)))
    return found, dict(zip(base.sections, costs.tolist())), budget_total


@pytest.mark.parametrize("budget", [0.05, 0.3, 0.5, 0.8])
def test_plan_gives_every_path_the_walk_can_take_below_its_first_section(budget):
    """The paths of the shipped tree on a suite file are what its own walk gives with the
    metrics set to take each way, each with the live costs (the catalogue's passes) summed."""
    planned = command.plan(RELU, budget=budget)
    tree = command.shipped_tree("reference")
    found, costs, total = walks(tree, RELU, budget)
    assert {(p.nodes, p.sections) for p in planned.paths} == found
    assert len(planned.paths) == 2  # one metric branch below Occupancy, both ways
    assert planned.budget_total == pytest.approx(total)
    for p in planned.paths:
        assert p.sections[0] == "Occupancy" and p.nodes[:p.nodes.index(planned.first) + 1] == \
            tuple(int(line[1:line.index("]")]) for line in planned.explanation)
        assert p.costs == tuple(costs[s] for s in p.sections) and p.cost == sum(p.costs)
        assert p.cost <= total and [n for n, _ in p.measured] == [planned.first + 1]
    # a log_ feature reads also in plain numbers, in the walk up to the first section (explain)
    # as in the paths' lines (explain_route): one formatter
    read = [line for line in planned.explanation + sum((p.explanation for p in planned.paths), ())
            if " if log_" in line]
    assert len(read) >= 2 - (budget < 0.158)  # log_input_bytes below Occupancy, and above it
    # log_arithmetic_intensity where the budget is 0.158 of the full set or more
    assert all(re.fullmatch(r"\[\d+\] if log_(\w+) >= [\d.]+ \(\1 >= [^)]+\): "
                            r"[-\d.e+]+ \([-\d.e+]+\), (yes|no)", line) for line in read), read
    # the subtree below the first section is the tree's own node
    assert planned.below == load(tree).nodes()[planned.first].next
    if budget == 0.3:  # docs/tree.md shows its text as it is
        docs = (Path(__file__).parents[1] / "docs" / "tree.md").read_text()
        assert "```\n" + command.format_plan(planned) + "```\n" in docs
    if budget == 0.05:  # 1.9 passes: the roofline chart (3) never fits after Occupancy (1)
        assert {p.sections for p in planned.paths} == {("Occupancy",)}
        assert all("collect SpeedOfLight_RooflineChart: does not fit the budget left (3 "
                   "passes, 0.9 left)" in p.explanation[-1] for p in planned.paths)


def test_plan_decides_what_it_can_and_leaves_the_rest_to_the_measured_values(tmp_path, capsys):
    """Below the first section: a metric read twice goes only the ways one value can take, a
    section that does not fit is passed over (and a branch on it takes else), a branch on a
    section collected on the way goes both ways; the JSON has it all, the text says it."""
    metric = "launch__waves_per_multiprocessor"
    tree = tree_file(tmp_path, collect("LaunchStats") | {"next": {
        "if": {"metric": metric, "at_least": 2.0},
        "then": {"if": {"metric": metric, "at_least": 8.0},
                 "then": collect("Occupancy"), "else": collect("SpeedOfLight")},
        "else": {"if": {"metric": metric, "at_least": 4.0},  # never: < 2 or unknown
                 "then": collect("WarpStateStats"),
                 "else": {"collect": "MemoryWorkloadAnalysis_Tables",  # 30 passes: no room
                          "next": {"if": {"finding": "MemoryWorkloadAnalysis_Tables",
                                          "at_least": 5.0},
                                   "then": {"stop": True},
                                   "else": {"collect": "Occupancy", "next": {
                                       "if": {"finding": "Occupancy", "at_least": 1.0},
                                       "then": {"stop": True}, "else": {"stop": True}}}}}}}})
    planned = command.plan(RELU, tree)
    found, _, _ = walks(tree, RELU, 0.3)
    assert {(p.nodes, p.sections) for p in planned.paths} == found
    assert [(p.sections, p.cost, p.measured) for p in planned.paths] == [
        (("LaunchStats", "Occupancy"), 2.0, ((1, True), (2, True))),
        (("LaunchStats", "SpeedOfLight"), 11.0, ((1, True), (2, False))),
        (("LaunchStats", "Occupancy"), 2.0, ((1, False), (7, False), (14, True))),
        (("LaunchStats", "Occupancy"), 2.0, ((1, False), (7, False), (14, False)))]
    assert planned.paths[2].explanation == (
        f"[1] if {metric} >= 2: measured, no (or unknown)",
        f"[7] if {metric} >= 4: measured, no (or unknown)",  # the 'yes' side cannot be
        "[10] collect MemoryWorkloadAnalysis_Tables: does not fit the budget left (30 passes, "
        "10.4 left)",
        "[11] if finding(MemoryWorkloadAnalysis_Tables) >= 5%: unknown (its section is not "
        "collected), no",
        "[14] if finding(Occupancy) >= 1%: measured, yes")
    code, out, err = run_main(capsys, RELU, "--tree", tree, "--plan", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["schema"] == "autoprofiler-plan/1" and data["first"] == 0
    assert data["below"] == json.loads(tree.read_text())["root"]["next"]
    assert (data["budget"], data["budget_unit"], data["budget_total"]) == (0.3, "passes", 11.4)
    assert data["paths"][1] == {
        "nodes": [0, 1, 2, 5, 6], "sections": ["LaunchStats", "SpeedOfLight"],
        "costs": [1.0, 10.0], "cost": 11.0,
        "measured": [{"node": 1, "holds": True}, {"node": 2, "holds": False}],
        "explanation": [f"[1] if {metric} >= 2: measured, yes",
                        f"[2] if {metric} >= 8: measured, no (or unknown)"]}
    code, out, _ = run_main(capsys, RELU, "--tree", tree, "--plan")
    lines = out.splitlines()
    assert lines[:3] == ["[0] collect LaunchStats: the action",
                         "below it (a branch on a section's metric reads what ncu measures on "
                         "a GPU):", f"    [1] if {metric} >= 2"]
    # paths that collect the same sections are one profile, reached either way
    assert "4 paths to 2 profiles, at 0.3 of the full set = 11.4 passes:" in lines
    at = lines.index("    LaunchStats + Occupancy: 1 + 1 = 2 of 11.4 passes, either of 3 ways:")
    assert lines[at + 1:at + 4] == [f"        [1] if {metric} >= 2: measured, yes",
                                    f"        [2] if {metric} >= 8: measured, yes", "      or"]
    assert "    LaunchStats + SpeedOfLight: 1 + 10 = 11 of 11.4 passes" in lines


def test_plan_says_plainly_where_the_walk_ends_at_its_first_step(tmp_path, capsys):
    tree = tree_file(tmp_path, collect("SpeedOfLight"))  # 10 of the full set's 38 passes
    code, out, _ = run_main(capsys, RELU, "--tree", tree, "--plan", "--budget", "0.2")
    assert code == 0 and out.splitlines() == [
        "[0] collect SpeedOfLight: does not fit the budget left", "[1] stop: the action",
        "the walk stops before collecting any section at 0.2 of the full set = 7.6 passes: the "
        "optimizer is given no profile"]
    code, out, _ = run_main(capsys, RELU, "--tree", tree, "--plan", "--budget", "0.2",
                            "--json")
    data = json.loads(out)
    assert data["first"] is None and data["below"] is None
    assert data["paths"] == [{"nodes": [0, 1], "sections": [], "costs": [], "cost": 0.0,
                              "measured": [], "explanation": []}]
    assert '"cost": 0.0' in out  # a float, as every other path's cost, not the int 0
    code, out, _ = run_main(capsys, RELU, "--tree", tree, "--plan")
    assert out.splitlines()[1:] == [
        "below it, nothing reads a measured metric:", "    [1] stop",
        "1 path, at 0.3 of the full set = 11.4 passes:", "    SpeedOfLight: 10 of 11.4 passes",
        "the walk collects nothing after SpeedOfLight",
        "on a GPU with ncu, `autoprofiler optimize FILE --profile-only` collects the profile"]
    # 10.64 passes: Occupancy's 1 pass does not fit after SpeedOfLight's 10
    tree = tree_file(tmp_path, collect("SpeedOfLight", "Occupancy"))
    code, out, _ = run_main(capsys, RELU, "--tree", tree, "--plan", "--budget", "0.28")
    assert code == 0 and out.splitlines()[4:7] == [
        "1 path, at 0.28 of the full set = 10.64 passes:", "    SpeedOfLight: 10 of 10.64 passes",
        "        [1] collect Occupancy: does not fit the budget left (1 pass, 0.64 left)"]


@pytest.mark.gpu
def test_on_a_gpu_a_candidates_own_kernels_are_profiled(tmp_path):
    """ncu runs the candidate's ModelNew (three kernels) on the problem's inputs, not the
    problem's Model (one)."""
    mine = tmp_path / "mine.py"
    mine.write_text("import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                    "    def forward(self, x):\n        return torch.relu(x).mul(2.0).add(1.0)\n")
    tree = tree_file(tmp_path, collect("LaunchStats"))
    model = command.optimize(PROBLEM, tree, budget_unit="sections", profile_only=True)
    result = command.optimize(PROBLEM, tree, budget_unit="sections", profile_only=True,
                              candidate_file=mine)
    assert model.sections == result.sections == ("LaunchStats",)
    assert len(model.profile["kernels"]) == 1 and len(result.profile["kernels"]) == 3
    assert result.candidate_file == str(mine) and result.costs[0].passes >= 1
