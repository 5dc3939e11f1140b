"""The AutoProfiler tree: its file, its walk as a policy, its edits, the search proposer, the
learner (deterministic, resumable) and the learn-tree command."""

import json
import math
import re

import gymnasium as gym
import numpy as np
import pytest

import autoprofiler_env  # noqa: F401
from agents.tree import (
    Branch,
    Collect,
    Condition,
    Rewrite,
    Split,
    Stop,
    Tree,
    TreeFormatError,
    TreePolicy,
    by_budget,
    edit_from_dict,
    export_text,
    from_dict,
    load,
    plot,
    roofline_tree,
    shipped_tree,
    vocabulary,
)
from agents.tree.learner import LearnConfig, learn
from agents.tree.policy import amount
from agents.tree.proposers.search import SearchProposer
from autoprofiler_env.envs.observation import squash
from autoprofiler_env.errors import AutoProfilerError
from autoprofiler_env.evaluation import rollout, score

SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEM = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"


def _tree() -> Tree:
    return Tree(Collect("SpeedOfLight", Branch(Condition("metric", SM, 60.0),
                                               Collect("ComputeWorkloadAnalysis"), Stop())),
                {"note": "a test"})


@pytest.fixture(scope="module")
def train():
    return gym.make("AutoProfiler-v0", split="train")


@pytest.fixture(scope="module")
def small():
    """12 train problems and 6 validation problems: enough for the learner to move."""
    env = gym.make("AutoProfiler-v0", split="train")
    val = gym.make("AutoProfiler-v0", split="val")
    return (gym.make("AutoProfiler-v0", problems=env.unwrapped.problems[:12]),
            gym.make("AutoProfiler-v0", problems=val.unwrapped.problems[:6]))


# -- the file -------------------------------------------------------------------------------

def test_a_tree_round_trips_through_its_file(tmp_path):
    tree = _tree()
    tree.save(tmp_path / "t.json")
    back = load(tmp_path / "t.json")
    assert back == tree and back.meta == {"note": "a test"}
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["format"] == "autoprofiler-tree" and data["version"] == 1
    assert data["root"]["next"]["if"] == {"metric": SM, "at_least": 60.0}
    assert data["root"]["next"]["else"] == {"stop": True}


@pytest.mark.parametrize("root, message", [
    ({"collect": "SpeedOfLigth", "next": {"stop": True}}, "did you mean SpeedOfLight"),
    ({"if": {"metric": SM, "at_least": 60}, "then": {"stop": True}, "else": {"stop": True}},
     "not collected above this node"),
    ({"collect": "Occupancy", "next": {"if": {"finding": "SpeedOfLight", "at_least": 5},
                                       "then": {"stop": True}, "else": {"stop": True}}},
     "reads SpeedOfLight, which is not collected above"),
    ({"collect": "Occupancy", "next": {"collect": "Occupancy", "next": {"stop": True}}},
     "already collected above"),
    ({"if": {"feature": "log_flop", "at_least": 1}, "then": {"stop": True},
      "else": {"stop": True}}, "did you mean log_flops"),
    ({"if": {"feature": "log_flops", "at_least": "big"}, "then": {"stop": True},
      "else": {"stop": True}}, "at_least must be a finite number"),
    ({"if": {"feature": "log_flops", "at_least": 10**400}, "then": {"stop": True},
      "else": {"stop": True}}, "at_least must be a finite number"),  # no float holds it
    ({"if": {"colour": "red", "at_least": 1}, "then": {"stop": True}, "else": {"stop": True}},
     "a condition reads one of metric, finding, feature, budget"),
    ({"collect": "Occupancy"}, "a node has the keys"),
    ({"stop": False}, "a stop node is"),
    ([1, 2], "a node is an object"),
])
def test_a_broken_tree_is_refused_saying_where_and_what(root, message):
    with pytest.raises(TreeFormatError, match=message):
        from_dict({"format": "autoprofiler-tree", "version": 1, "root": root})


def test_a_file_that_is_not_a_tree_is_refused(tmp_path):
    (tmp_path / "a.json").write_text("{not json")
    with pytest.raises(TreeFormatError, match="not JSON"):
        load(tmp_path / "a.json")
    (tmp_path / "b.json").write_text(json.dumps({"format": "autoprofiler-tree", "version": 9,
                                                 "root": {"stop": True}}))
    with pytest.raises(TreeFormatError, match="version 9 is not readable"):
        load(tmp_path / "b.json")
    with pytest.raises(TreeFormatError, match="cannot read"):
        load(tmp_path / "missing.json")
    deep = {"stop": True}
    for i in range(70):
        deep = {"if": {"feature": "log_flops", "at_least": i}, "then": deep,
                "else": {"stop": True}}
    with pytest.raises(TreeFormatError, match="deeper than 64"):
        from_dict({"format": "autoprofiler-tree", "version": 1, "root": deep})
    n = 5000  # deeper than Python's recursion: refused as the 70 levels are, not a crash
    # (3.13's json reads it, 3.11's and 3.12's do not: either refusal is one the test takes)
    (tmp_path / "deep.json").write_text(
        '{"format": "autoprofiler-tree", "version": 1, "root": '
        + '{"if": {"feature": "log_flops", "at_least": 1}, "then": ' * n + '{"stop": true}'
        + ', "else": {"stop": true}}' * n + "}")
    with pytest.raises(TreeFormatError, match=r"deep.json: .*(deeper than Python's recursion "
                                              r"limit|deeper than 64)"):
        load(tmp_path / "deep.json")


def test_the_rendering_numbers_the_nodes_as_edits_do(tmp_path):
    text = export_text(_tree(), {0: 5, 1: 5, 2: 2})
    assert text.splitlines() == [
        "[0] collect SpeedOfLight  (5 problems)",
        f"[1] if {SM} >= 60  (5 problems)",
        "    [2] collect ComputeWorkloadAnalysis  (2 problems)",
        "    [3] stop  (0 problems)",
        "[1] else",
        "    [4] stop  (0 problems)"]
    assert [type(n).__name__ for n in _tree().nodes()] == ["Collect", "Branch", "Collect",
                                                           "Stop", "Stop"]
    path = plot(_tree(), tmp_path / "t.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- the walk -------------------------------------------------------------------------------

def _obs(env, collected=(), metrics=None, findings=None, features=None, budget=0.25):
    base = env.unwrapped
    n, m = len(base.sections), len(base.metric_names)
    obs = {"collected": np.zeros(n, np.int8), "metrics": np.zeros(m, np.float32),
           "metrics_known": np.zeros(m, np.int8), "findings": np.zeros(n, np.float32),
           "features": np.zeros(len(vocabulary().features), np.float32),
           "budget_total": np.array([budget, 0.0], np.float32),
           "action_mask": np.ones(n + 1, np.int8)}
    for s in collected:
        obs["collected"][base.sections.index(s)] = 1
    for name, value in (metrics or {}).items():
        j = base.metric_names.index(name)
        obs["metrics"][j], obs["metrics_known"][j] = squash(value), 1
    for s, value in (findings or {}).items():
        obs["findings"][base.sections.index(s)] = value / 100.0
    for name, value in (features or {}).items():
        obs["features"][vocabulary().features.index(name)] = value
    return obs


def test_the_walk_collects_branches_on_raw_units_and_stops(train):
    policy, sections = TreePolicy(_tree(), train), train.unwrapped.sections
    stop = len(sections)
    assert policy.predict(_obs(train))[0] == sections.index("SpeedOfLight")
    hot = _obs(train, ["SpeedOfLight"], {SM: 70.0})
    assert policy.predict(hot)[0] == sections.index("ComputeWorkloadAnalysis")
    assert policy.path(hot) == [0, 1, 2]
    assert policy.predict(_obs(train, ["SpeedOfLight"], {SM: 50.0}))[0] == stop
    assert policy.predict(_obs(train, ["SpeedOfLight", "ComputeWorkloadAnalysis"],
                               {SM: 70.0}))[0] == stop


def test_a_section_that_does_not_fit_is_passed_over_and_its_values_are_unknown(train):
    sections = train.unwrapped.sections
    tree = Tree(Collect("SpeedOfLight", Branch(Condition("metric", SM, 60.0), Stop(),
                                               Collect("Occupancy"))))
    policy = TreePolicy(tree, train)
    obs = _obs(train)
    obs["action_mask"][sections.index("SpeedOfLight")] = 0
    # SpeedOfLight does not fit: the walk goes on, the branch's value is unknown -> else
    assert policy.predict(obs)[0] == sections.index("Occupancy")
    assert policy.path(obs) == [0, 1, 3]
    # the action_masks argument wins over the observation's own mask, as SB3 passes it
    mask = np.ones(len(sections) + 1, bool)
    assert policy.predict(_obs(train), action_masks=mask)[0] == sections.index("SpeedOfLight")
    # the explanation: each visited node, the value it read and the side taken
    assert policy.explain(obs) == [
        "[0] collect SpeedOfLight: does not fit the budget left",
        f"[1] if {SM} >= 60: unknown (its section is not collected), no",
        "[3] collect Occupancy: the action"]
    high = _obs(train, ["SpeedOfLight"], metrics={SM: 75.0})
    assert policy.explain(high) == ["[0] collect SpeedOfLight: collected",
                                    f"[1] if {SM} >= 60: 75, yes", "[2] stop: the action"]
    feature = TreePolicy(Tree(Branch(Condition("feature", "log_flops", 9.0),
                                     Collect("Occupancy"), Stop())), train)
    # a log_ feature's threshold and value also in plain numbers (log10(1 + x) undone)
    assert feature.explain(_obs(train, features={"log_flops": 8.5})) == [
        "[0] if log_flops >= 9 (flops >= 1e+09): 8.5 (3.16e+08), no", "[3] stop: the action"]


def test_a_routes_explanation_reads_as_explain_and_says_why_a_collect_is_passed_over(train):
    """explain_route: its branches in explain's words (the same lines); a Collect passed over
    reads "collected" where its section already is, else "does not fit" with its cost (the
    unit singular for 1) and what is left; the Collects taken have no line."""
    sections = train.unwrapped.sections
    tree = Tree(Collect("SpeedOfLight", Branch(Condition("feature", "log_flops", 9.0),
                                               Collect("Occupancy", Collect("LaunchStats")),
                                               Stop())))
    policy = TreePolicy(tree, train)
    obs = _obs(train, ["SpeedOfLight"], features={"log_flops": 9.5})
    costs = np.full(len(sections), 5.0)
    costs[sections.index("Occupancy")] = costs[sections.index("LaunchStats")] = 1.0
    [route] = policy.routes(obs, costs, 1.5)
    assert route.nodes == (0, 1, 2, 3, 4)
    assert route.actions == (sections.index("Occupancy"),) and route.measured == ()
    lines = policy.explain_route(obs, route, costs, 1.5, "passes")
    assert lines == ["[0] collect SpeedOfLight: collected",
                     "[1] if log_flops >= 9 (flops >= 1e+09): 9.5 (3.16e+09), yes",
                     "[3] collect LaunchStats: does not fit the budget left (1 pass, 0.5 left)"]
    assert policy.explain(obs)[:2] == lines[:2]  # the walk's own lines
    assert policy.explain_route(obs, route, costs, 1.5, "passes", start=2) == lines[2:]
    assert amount(1.0, "passes") == "1 pass" and amount(2.0, "sections") == "2 sections"
    assert amount(0.5, "seconds") == "0.5 seconds" and amount(1.0, "seconds") == "1 second"


def test_the_shipped_trees_explanation_follows_its_path_on_every_test_problem():
    env = gym.make("AutoProfiler-v0", split="test")
    policy = TreePolicy(shipped_tree("reference"), env)
    for budget in (0.05, 0.3, 1.0):
        for problem in env.unwrapped.problems:
            obs, _ = env.reset(options={"problem": problem, "budget": budget})
            while True:
                action, _ = policy.predict(obs)
                path, lines = policy.path(obs), policy.explain(obs)
                assert [int(line[1:line.index("]")]) for line in lines] == path
                for number, following, line in zip(path, path[1:], lines):
                    if " if " in f" {line}":  # a branch: yes goes to the node after it
                        assert line.endswith(", yes") == (following == number + 1), line
                assert lines[-1].endswith(": the action")
                obs, _, terminated, truncated, _ = env.step(int(action))
                if terminated or truncated:
                    break


def test_findings_features_and_the_budget_are_read_in_their_units(train):
    sections = train.unwrapped.sections
    occupancy, stop = sections.index("Occupancy"), len(sections)
    finding = TreePolicy(Tree(Collect("SpeedOfLight", Branch(
        Condition("finding", "SpeedOfLight", 20.0), Collect("Occupancy"), Stop()))), train)
    assert finding.predict(_obs(train, ["SpeedOfLight"],
                                findings={"SpeedOfLight": 25.0}))[0] == occupancy
    assert finding.predict(_obs(train, ["SpeedOfLight"],
                                findings={"SpeedOfLight": 15.0}))[0] == stop
    feature = TreePolicy(Tree(Branch(Condition("feature", "log_flops", 9.0),
                                     Collect("Occupancy"), Stop())), train)
    assert feature.predict(_obs(train, features={"log_flops": 9.5}))[0] == occupancy
    assert feature.predict(_obs(train, features={"log_flops": 8.5}))[0] == stop
    budget = TreePolicy(Tree(Branch(Condition("budget", "fraction", 0.3),
                                    Collect("Occupancy"), Stop())), train)
    assert budget.predict(_obs(train, budget=0.5))[0] == occupancy
    assert budget.predict(_obs(train, budget=0.1))[0] == stop
    assert budget.predict(_obs(train, budget=0.0))[0] == stop  # unknown full set: else


def test_a_batch_of_observations_gets_each_its_own_action(train):
    policy = TreePolicy(_tree(), train)
    singles = [_obs(train), _obs(train, ["SpeedOfLight"], {SM: 70.0}),
               _obs(train, ["SpeedOfLight"], {SM: 10.0})]
    batch = {k: np.stack([o[k] for o in singles]) for k in singles[0]}
    actions, _ = policy.predict(batch)
    assert list(actions) == [int(policy.predict(o)[0]) for o in singles]


def test_sb3_evaluates_the_tree_like_any_policy(train):
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    vec = make_vec_env("AutoProfiler-v0", n_envs=2, seed=0)
    mean, _ = evaluate_policy(TreePolicy(_tree(), vec.envs[0]), vec, n_eval_episodes=4)
    assert math.isfinite(mean)


def test_the_tree_on_the_replay_collects_what_it_says(train):
    records = rollout(train, TreePolicy(Tree(Collect("Occupancy", Collect("LaunchStats"))),
                                        train), budget=1.0)
    assert {r.sections for r in records} == {("Occupancy", "LaunchStats")}
    # by_budget: each budget gets its own tree
    joined = by_budget({0.1: Tree(Collect("Occupancy")), 1.0: Tree(Collect("LaunchStats"))})
    policy = TreePolicy(joined, train)
    assert {r.sections for r in rollout(train, policy, budget=1.0)} == {("LaunchStats",)}
    low = {r.sections for r in rollout(train, policy, budget=0.1)}
    assert low <= {("Occupancy",), ()} and ("Occupancy",) in low


def test_a_tree_naming_what_the_environment_lacks_is_refused(train):
    with pytest.raises(TreeFormatError, match="not a section of this environment"):
        TreePolicy(Tree(Collect("NvlinkTopology")), train)


def test_the_roofline_start_is_a_valid_tree(train):
    records = rollout(train, TreePolicy(roofline_tree(), train), budget=1.0)
    assert all(r.sections[0] == "SpeedOfLight" and len(r.sections) == 3 for r in records)
    assert {r.sections[1] for r in records} == {"MemoryWorkloadAnalysis",
                                                 "ComputeWorkloadAnalysis"}


# -- edits ----------------------------------------------------------------------------------

def test_rewrite_and_split_edit_the_numbered_node():
    tree = _tree()
    swapped = Rewrite(2, Collect("Occupancy")).apply(tree)
    assert swapped.root.next.then == Collect("Occupancy")
    split = Split(4, Condition("feature", "log_flops", 9.0), Collect("LaunchStats")).apply(tree)
    assert split.root.next.otherwise == Branch(Condition("feature", "log_flops", 9.0),
                                               Collect("LaunchStats"), Stop())
    for edit in (Rewrite(2, Collect("Occupancy")),
                 Split(4, Condition("feature", "log_flops", 9.0), Collect("LaunchStats"))):
        assert edit_from_dict(json.loads(json.dumps(edit.to_dict()))) == edit


@pytest.mark.parametrize("edit, message", [
    (Rewrite(9, Stop()), "no node 9"),
    (Split(7, Condition("feature", "log_flops", 1.0), Stop()), "no node 7"),
    (Rewrite(0, Branch(Condition("metric", SM, 1.0), Stop(), Stop())),
     "not collected above"),
    (Rewrite(2, Collect("SpeedOfLight")), "already collected above"),
])
def test_an_edit_that_breaks_the_tree_is_refused(edit, message):
    with pytest.raises(TreeFormatError, match=message):
        edit.apply(_tree())


@pytest.mark.parametrize("data, message", [
    ({"op": "grow"}, "an edit is"),
    ({"op": "rewrite", "node": "2", "with": {"stop": True}}, "node number"),
    ({"op": "rewrite", "node": 2}, "the keys op, node, with"),
    ({"op": "split", "node": 2, "then": {"stop": True}}, "the keys op, node, if, then"),
])
def test_a_malformed_edit_is_refused(data, message):
    with pytest.raises(TreeFormatError, match=message):
        edit_from_dict(data)


# -- the search proposer and the learner ----------------------------------------------------

def test_the_search_proposer_is_deterministic_and_offers_valid_edits(small):
    tr, va = small
    lines = []
    learn(tr, va, SearchProposer(3), LearnConfig(rounds=3), progress=False,
          on_round=lines.append)
    again = []
    learn(tr, va, SearchProposer(3), LearnConfig(rounds=3), progress=False,
          on_round=again.append)
    other = []
    learn(tr, va, SearchProposer(4), LearnConfig(rounds=3), progress=False,
          on_round=other.append)
    edits = [[p["edit"] for p in line["proposals"]] for line in lines]
    assert edits == [[p["edit"] for p in line["proposals"]] for line in again]
    assert edits != [[p["edit"] for p in line["proposals"]] for line in other]
    assert all(len(e) == 8 for e in edits)
    assert all(p["error"] is None for line in lines for p in line["proposals"])


def test_the_learner_keeps_only_edits_that_improve_and_picks_on_validation(train):
    # the whole train split: on a few problems no profile may already be as good as any
    tr, va = train, gym.make("AutoProfiler-v0", split="val")
    lines = []
    result = learn(tr, va, SearchProposer(0), LearnConfig(rounds=25, margin=0.002),
                   progress=False, on_round=lines.append)
    previous = None
    for line in lines:
        if previous is not None:
            assert line["train_objective"] >= previous - 1e-12
            if line["accepted"] is not None:
                kept = line["proposals"][line["accepted"]]["train_objective"]
                assert kept == line["train_objective"]
                assert all(p["train_objective"] is None or p["train_objective"] <= kept
                           for p in line["proposals"])
        previous = line["train_objective"]
    assert result.accepted >= 1 and result.train > 1.0
    assert sum(line["accepted"] is not None for line in lines) == result.accepted
    # the tree returned is the best on validation, and its scores are what it scores
    best = max(lines, key=lambda line: line["validation_objective"])
    assert math.log(result.validation) >= best["validation_objective"] - 1e-12
    # the round that made it: the first of the best (validation, then train), or the start
    top = max((line["validation_objective"], line["train_objective"]) for line in lines)
    if math.log(result.validation) > top[0] + 1e-12:
        assert result.best_round == 0
    else:
        assert result.best_round == next(
            line["round"] for line in lines if line["accepted"] is not None
            and (line["validation_objective"], line["train_objective"]) == top)
    assert result.validation == pytest.approx(score(rollout(va, TreePolicy(result.tree, va),
                                                            budget=0.25)))
    assert result.train == pytest.approx(score(rollout(tr, TreePolicy(result.tree, tr),
                                                       budget=0.25)))


def test_an_interrupted_run_resumes_to_the_same_tree(small, tmp_path):
    tr, va = small
    config = LearnConfig(rounds=12)
    whole = learn(tr, va, SearchProposer(1), config, log=tmp_path / "whole.jsonl",
                  progress=False)
    learn(tr, va, SearchProposer(1), LearnConfig(rounds=5), log=tmp_path / "cut.jsonl",
          progress=False)
    # an interruption mid-write leaves half a line: it is dropped and the round run again
    with open(tmp_path / "cut.jsonl", "a") as f:
        f.write('{"kind": "round", "round": 6, "propo')
    with pytest.raises(AutoProfilerError, match="other settings"):
        learn(tr, va, SearchProposer(2), config, log=tmp_path / "cut.jsonl", progress=False)
    resumed = learn(tr, va, SearchProposer(1), config, log=tmp_path / "cut.jsonl",
                    progress=False)
    assert resumed.tree == whole.tree and resumed.accepted == whole.accepted
    assert resumed.rounds == whole.rounds == 12

    def decisions(path):
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        return [(r.get("round"), r.get("accepted"), r.get("train_objective"),
                 [p["edit"] for p in r.get("proposals", [])]) for r in rows]

    assert decisions(tmp_path / "cut.jsonl") == decisions(tmp_path / "whole.jsonl")


def test_a_log_whose_first_line_was_cut_starts_afresh(small, tmp_path):
    """An interruption while the settings line was written left half of it alone in the log:
    refused as 'not a learn-tree log', where an empty log starts afresh."""
    tr, va = small
    whole = learn(tr, va, SearchProposer(1), LearnConfig(rounds=3), log=tmp_path / "whole.jsonl",
                  progress=False)
    first = (tmp_path / "whole.jsonl").read_text().splitlines()[0]
    (tmp_path / "cut.jsonl").write_text(first[:len(first) // 2])
    again = learn(tr, va, SearchProposer(1), LearnConfig(rounds=3), log=tmp_path / "cut.jsonl",
                  progress=False)
    assert again.tree == whole.tree
    assert [json.loads(x)["kind"] for x in (tmp_path / "cut.jsonl").read_text().splitlines()] \
        == ["start", "round", "round", "round"]
    (tmp_path / "other.jsonl").write_text("not a log at all")  # another file: refused
    with pytest.raises(AutoProfilerError, match="not a learn-tree log"):
        learn(tr, va, SearchProposer(1), LearnConfig(rounds=3), log=tmp_path / "other.jsonl",
              progress=False)


def test_a_corrupted_log_is_an_error_not_a_fresh_start(small, tmp_path):
    tr, va = small
    log = tmp_path / "log.jsonl"
    learn(tr, va, SearchProposer(0), LearnConfig(rounds=3), log=log, progress=False)
    lines = log.read_text().splitlines()
    log.write_text("\n".join([lines[0], "garbage", *lines[1:]]) + "\n")
    with pytest.raises(AutoProfilerError, match="line 2 is not JSON"):
        learn(tr, va, SearchProposer(0), LearnConfig(rounds=3), log=log, progress=False)


def _bogus(line: dict) -> dict:
    kept = {"op": "rewrite", "node": 0, "with": {"collect": "Bogus", "next": {"stop": True}}}
    line["proposals"][line["accepted"]]["edit"] = kept
    return line


@pytest.mark.parametrize("change, message", [
    (lambda line: [], r"line \d+ is corrupted \(a log line is a JSON object, not list\)"),
    (lambda line: line | {"accepted": 99}, r"line \d+ is corrupted \(its accepted is not the "
                                           r"index of one of its \d+ proposals\)"),
    (lambda line: {k: v for k, v in line.items() if k != "train_objective"},
     r"line \d+ is corrupted \(its train_objective is not a finite number\)"),
    (lambda line: line | {"validation_objective": "high"},
     r"line \d+ is corrupted \(its validation_objective is not a finite number\)"),
    (_bogus, r"round \d+ is corrupted \(the edit it kept does not apply to the tree of the "
             r"rounds before it: .*'Bogus'"),
], ids=["not-an-object", "accepted-out-of-range", "no-train-objective", "objective-a-string",
        "kept-edit-unknown-section"])
def test_a_log_line_of_json_but_not_a_round_is_an_error_naming_it(small, tmp_path, change,
                                                                  message):
    tr, va = small
    log = tmp_path / "log.jsonl"
    learn(tr, va, SearchProposer(1), LearnConfig(rounds=5), log=log, progress=False)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    at = next(i for i, line in enumerate(lines) if line.get("accepted") is not None)
    lines[at] = change(lines[at])
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(AutoProfilerError, match=f"^{re.escape(str(log))}: {message}.*"
                                                "start a new run with another --out"):
        learn(tr, va, SearchProposer(1), LearnConfig(rounds=5), log=log, progress=False)


def test_fewer_rounds_than_the_log_holds_give_the_tree_of_that_many_rounds(small, tmp_path):
    """A run asking for fewer rounds than its log holds replays only the first ones: its
    result is a fresh run's of that many rounds (the search is deterministic), and the log
    keeps the others for a run that asks for them again."""
    tr, va = small
    log = tmp_path / "log.jsonl"
    whole = learn(tr, va, SearchProposer(1), LearnConfig(rounds=8), log=log, progress=False)
    kept = log.read_text()
    short = learn(tr, va, SearchProposer(1), LearnConfig(rounds=3), log=log, progress=False)
    fresh = learn(tr, va, SearchProposer(1), LearnConfig(rounds=3), progress=False)
    assert (short.tree, short.train, short.validation, short.rounds, short.accepted,
            short.curve, short.failed) == (fresh.tree, fresh.train, fresh.validation,
                                           fresh.rounds, fresh.accepted, fresh.curve,
                                           fresh.failed)
    assert short.rounds == 3 and len(short.curve) == 3
    assert (whole.accepted, whole.tree) != (short.accepted, short.tree)  # the test means it
    assert log.read_text() == kept
    again = learn(tr, va, SearchProposer(1), LearnConfig(rounds=8), log=log, progress=False)
    assert (again.tree, again.rounds, again.accepted) == (whole.tree, 8, whole.accepted)


def test_a_resume_of_other_settings_names_each_one_as_logged_and_now(small, tmp_path):
    tr, va = small
    log = tmp_path / "log.jsonl"
    learn(tr, va, SearchProposer(1), LearnConfig(rounds=2), log=log, progress=False)
    kept = log.read_text()
    with pytest.raises(AutoProfilerError, match=r"other settings \(config\.proposals: 8 in "
                                                r"the log, 4 now; config\.margin: 0\.002 in "
                                                r"the log, 0\.01 now\)"):
        learn(tr, va, SearchProposer(1), LearnConfig(rounds=3, proposals=4, margin=0.01),
              log=log, progress=False)
    with pytest.raises(AutoProfilerError, match=r"proposer: 'search:1' in the log, 'search:2' "
                                                r"now; proposer_settings\.seed: 1 in the log, "
                                                r"2 now\)"):
        learn(tr, va, SearchProposer(2), LearnConfig(rounds=3), log=log, progress=False)
    penalised = gym.make("AutoProfiler-v0", problems=tr.unwrapped.problems, cost_penalty=0.1)
    with pytest.raises(AutoProfilerError, match=r"env\.cost_penalty: 0\.0 in the log, 0\.1 now"):
        learn(penalised, va, SearchProposer(1), LearnConfig(rounds=3), log=log,
              progress=False)
    fewer = gym.make("AutoProfiler-v0", problems=tr.unwrapped.problems[:11])
    with pytest.raises(AutoProfilerError, match=r"train_problems: 12 in the log, 11 now"):
        learn(fewer, va, SearchProposer(1), LearnConfig(rounds=3), log=log, progress=False)
    with pytest.raises(AutoProfilerError, match=r"start: a tree of 1 node in the log, a tree "
                                                r"of 2 nodes \(--start mine\) now"):
        learn(tr, va, SearchProposer(1), LearnConfig(rounds=3), log=log, progress=False,
              start=Tree(Collect("Occupancy")), started_from="--start mine")
    assert log.read_text() == kept


def test_a_log_written_before_the_proposer_settings_were_recorded_resumes_with_a_warning(
        small, tmp_path):
    tr, va = small
    log, fresh = tmp_path / "log.jsonl", tmp_path / "fresh.jsonl"
    learn(tr, va, SearchProposer(1), LearnConfig(rounds=2), log=log, progress=False)
    header, *rounds = log.read_text().splitlines()
    old = json.loads(header)
    assert old.pop("proposer_settings") == {"seed": 1, "attempts": 50}
    log.write_text("\n".join([json.dumps(old), *rounds]) + "\n")
    with pytest.warns(UserWarning, match="written before the learner recorded the proposer's "
                                         "settings: it is resumed with seed 1, attempts 50"):
        resumed = learn(tr, va, SearchProposer(1), LearnConfig(rounds=4), log=log,
                        progress=False)
    whole = learn(tr, va, SearchProposer(1), LearnConfig(rounds=4), log=fresh, progress=False)
    assert (resumed.tree, resumed.rounds) == (whole.tree, 4)


class _Offers:
    """A proposer offering the same edits every round."""

    name = "offers"

    def __init__(self, *edits):
        self.edits = list(edits)

    def propose(self, feedback, n):
        from agents.tree.proposers.base import Proposal

        return Proposal(edits=self.edits[:n])


def test_an_edit_below_the_margin_does_not_hide_a_prune_that_loses_nothing(small, tmp_path):
    """Reviewed: the learner took the best-scoring edit and only then tested it, so an edit
    that scored a little better, below the margin, kept an equal-scoring prune out."""
    from agents.tree.edits import Rewrite
    from agents.tree.learner import CHOICE, Scorer

    tr, va = small
    start = Tree(Branch(Condition("budget", "fraction", 0.9), Stop(), Stop()))
    grow, prune = Rewrite(2, Collect("Occupancy")), Rewrite(0, Stop())  # 0.25 < 0.9: else
    log = tmp_path / "log.jsonl"
    result = learn(tr, va, _Offers(grow, prune), LearnConfig(budget=0.25, rounds=1,
                   margin=0.05), start=start, log=log, progress=False)
    header, line = (json.loads(x) for x in log.read_text().splitlines())
    assert header["choice"] == CHOICE
    grown, pruned = (row["train_objective"] for row in line["proposals"])
    before = Scorer(tr, 0.25)(start).objective
    assert before < grown < before + 0.05 and pruned == pytest.approx(before, abs=1e-12)
    assert line["accepted"] == 1 and line["summary"].startswith(
        'round 1: kept rewrite node 0 as {"stop": true}')
    assert result.tree.root == Stop() and result.accepted == 1
    # above the margin, the better edit is kept, the prune not
    log2 = tmp_path / "log2.jsonl"
    learn(tr, va, _Offers(grow, prune), LearnConfig(budget=0.25, rounds=1, margin=0.01),
          start=start, log=log2, progress=False)
    assert json.loads(log2.read_text().splitlines()[1])["accepted"] == 0
    # a log begun before the rule was recorded resumes, saying what it is
    old = json.loads(log.read_text().splitlines()[0])
    del old["choice"]
    log.write_text("\n".join([json.dumps(old), json.dumps(line)]) + "\n")
    with pytest.warns(UserWarning, match="picked a round's best-scoring edit and kept it only"):
        resumed = learn(tr, va, _Offers(grow, prune), LearnConfig(
            budget=0.25, rounds=2, margin=0.05), start=start, log=log, progress=False)
    assert resumed.rounds == 2 and resumed.tree.root == Stop()
    # an edit that loses nothing but leaves the tree as large is no prune: not kept (a
    # mutation review: letting same-size edits through passed every test)
    same = Rewrite(0, Branch(Condition("budget", "fraction", 0.5), Stop(), Stop()))
    log3 = tmp_path / "log3.jsonl"
    kept = learn(tr, va, _Offers(same), LearnConfig(budget=0.25, rounds=1, margin=0.05),
                 start=start, log=log3, progress=False)
    (row,) = json.loads(log3.read_text().splitlines()[1])["proposals"]
    assert row["train_objective"] == pytest.approx(before, abs=1e-12)
    assert json.loads(log3.read_text().splitlines()[1])["accepted"] is None
    assert kept.tree.root == start.root and kept.accepted == 0


# -- the command and the shipped tree -------------------------------------------------------

def test_learn_tree_writes_the_tree_its_log_and_pictures(tmp_path, capsys):
    from experiments.cli import main

    out = tmp_path / "run"
    assert main(["learn-tree", "--budget", "0.1,0.25", "--rounds", "3", "--out",
                 str(out)]) == 0
    for name in ("tree.json", "tree.txt", "tree.png", "curve.png", "run.json",
                 "log-0.1.jsonl", "log-0.25.jsonl"):
        assert (out / name).is_file(), name
    tree = load(out / "tree.json")
    assert tree.root.condition == Condition("budget", "fraction", 0.158)
    assert set(tree.meta["scores"]) == {"0.1", "0.25"}
    printed = capsys.readouterr().out
    assert "[0] if budget >= 0.158 of the full set" in printed
    for budget in ("0.1", "0.25"):  # which round's tree is kept, said
        assert re.search(rf"budget {budget}: the tree of (round \d+|the start) \(the best "
                         r"validation\): "
                         r"train \d", printed), printed
    assert main(["benchmark", "--budgets", "0.25", "--policy", f"tree:{out / 'tree.json'}",
                 "--out", str(tmp_path / "bench")]) == 0
    assert "tree:tree" in (tmp_path / "bench" / "benchmark.csv").read_text()
    # the shipped agents' figures are one seed's: where their five seeds' are, said
    assert ("autoprofiler-tree and maskable-ppo: the shipped agents, one trained seed each, "
            "without intervals; five seeds of each, with bootstrap intervals and paired tests "
            "against the fixed configuration chosen on train: autoprofiler experiment --config "
            "compare (docs/experiment/leaderboard.md)") in capsys.readouterr().out


def test_learn_tree_starts_each_budget_from_the_better_of_start_and_the_budget_below(
        tmp_path, train):
    """The budget ladder: 0.25 starts from the 0.1 tree where that scores higher on train at
    0.25 than --start does (no profile), and the log and the tree's metadata say which."""
    from agents.tree.learner import Scorer
    from experiments.cli import main

    out = tmp_path / "run"
    assert main(["learn-tree", "--budget", "0.25,0.1", "--rounds", "4", "--out",
                 str(out)]) == 0
    tree = load(out / "tree.json")
    header = json.loads((out / "log-0.25.jsonl").read_text().splitlines()[0])
    low = json.loads((out / "log-0.1.jsonl").read_text().splitlines()[0])
    assert low["start"]["root"] == {"stop": True}  # the smallest budget starts from --start
    by_budget_root = isinstance(tree.root, Branch) and tree.root.condition.kind == "budget"
    below = tree.root.otherwise if by_budget_root else tree.root  # equal trees share one
    scorer = Scorer(train, 0.25)
    better = (Tree(below) if scorer(Tree(below)).objective > scorer(Tree(Stop())).objective
              else Tree(Stop()))
    assert header["start"]["root"] == better.root.to_dict()
    assert tree.meta["scores"]["0.25"]["started_from"] == (
        "start" if isinstance(better.root, Stop) else "budget below")
    assert tree.meta["scores"]["0.1"]["started_from"] == "start"
    assert json.loads((out / "run.json").read_text())["settings"]["budgets"] == [0.1, 0.25]


def test_learn_tree_with_more_rounds_resumes_the_ladder_as_a_fresh_run_would(tmp_path):
    """More --rounds resume the smallest budget's log; a larger budget whose start moved with
    it is learned again (its old log kept beside), so the result is a fresh run's."""
    from experiments.cli import main

    resumed, fresh = tmp_path / "resumed", tmp_path / "fresh"
    assert main(["learn-tree", "--budget", "0.1,0.25", "--rounds", "2", "--out",
                 str(resumed)]) == 0
    assert main(["learn-tree", "--budget", "0.1,0.25", "--rounds", "6", "--out",
                 str(resumed)]) == 0
    assert main(["learn-tree", "--budget", "0.1,0.25", "--rounds", "6", "--out",
                 str(fresh)]) == 0
    assert load(resumed / "tree.json").root == load(fresh / "tree.json").root

    def header(path):
        h = json.loads(path.read_text().splitlines()[0])
        h["config"].pop("rounds")  # a resumed log keeps its first run's
        return h

    for name in ("log-0.1.jsonl", "log-0.25.jsonl"):
        assert header(resumed / name) == header(fresh / name)
    # the 0.1 tree grew between 2 and 6 rounds (seed 0), so the 0.25 log of the first run
    # began from another tree: kept beside, not resumed
    superseded = resumed / "log-0.25.superseded-1.jsonl"
    assert superseded.exists()
    assert header(superseded)["start"] != header(fresh / "log-0.25.jsonl")["start"]


def test_learn_tree_of_fewer_rounds_than_its_logs_reports_those_rounds(tmp_path, capsys):
    """--rounds 2 after a 4-round run: the tree, tree.json's scores, run.json and the output
    all say 2 rounds, and the tree is a fresh 2-round run's."""
    from experiments.cli import main

    out, fresh = tmp_path / "run", tmp_path / "fresh"
    assert main(["learn-tree", "--rounds", "4", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["learn-tree", "--rounds", "2", "--out", str(out)]) == 0
    assert " in 2 rounds" in capsys.readouterr().out
    tree = load(out / "tree.json")
    assert tree.meta["learned"]["rounds"] == 2 and tree.meta["scores"]["0.25"]["rounds"] == 2
    assert json.loads((out / "run.json").read_text())["settings"]["rounds"] == 2
    assert main(["learn-tree", "--rounds", "2", "--out", str(fresh)]) == 0
    assert tree.root == load(fresh / "tree.json").root
    assert tree.meta["scores"] == load(fresh / "tree.json").meta["scores"]


def test_learn_tree_of_one_budget_on_a_ladder_log_says_to_give_the_ladder(tmp_path, capsys):
    """--budget 0.25 where --budget 0.1,0.25 ran: 0.25's log began from the 0.1 tree; the
    error says so and which --budget resumes it (for a log written before the learner said
    where its start came from too)."""
    from experiments.cli import main

    out = tmp_path / "run"
    assert main(["learn-tree", "--budget", "0.1,0.25", "--rounds", "1", "--out",
                 str(out)]) == 0
    log = out / "log-0.25.jsonl"
    kept = log.read_text()
    assert json.loads(kept.splitlines()[0])["started_from"] == (
        "the tree learned for budget 0.1 (the budget ladder)")
    capsys.readouterr()
    assert main(["learn-tree", "--budget", "0.25", "--rounds", "2", "--out", str(out)]) == 2
    assert ("holds a tree learned for --budget 0.1,0.25; this run's --budget 0.25 would "
            "replace it without budget 0.1: run with --budget 0.1,0.25" in
            capsys.readouterr().err)
    (out / "run.json").unlink()  # as a ladder run interrupted before its end leaves it
    assert main(["learn-tree", "--budget", "0.25", "--rounds", "2", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert (f"{log} began from the tree learned for budget 0.1 (the budget ladder), in a run "
            "of several budgets" in err and "this run starts budget 0.25, its smallest, from "
            "--start stop: run with --budget 0.1,0.25" in err), err
    assert log.read_text() == kept
    header, *rounds = kept.splitlines()
    old = json.loads(header)
    del old["started_from"], old["proposer_settings"]
    log.write_text("\n".join([json.dumps(old), *rounds]) + "\n")
    assert main(["learn-tree", "--budget", "0.25", "--rounds", "2", "--out", str(out)]) == 2
    assert ("began from another tree than --start stop (a smaller budget's, where its run had "
            "several)" in capsys.readouterr().err)


def test_learn_tree_keeps_a_finished_tree_and_another_commands_run(tmp_path, capsys):
    """A run of other budgets into a finished tree's folder would have replaced its tree.json
    with a tree of those budgets alone; into autoprofiler train's folder, its run.json (the
    record that says which dataset the model learned on). Both are refused, nothing
    written; a run of more budgets extends the tree."""
    from experiments.cli import main

    out = tmp_path / "run"
    assert main(["learn-tree", "--budget", "0.25", "--rounds", "1", "--out", str(out)]) == 0
    tree = (out / "tree.json").read_bytes()
    capsys.readouterr()
    assert main(["learn-tree", "--budget", "0.5", "--rounds", "1", "--out", str(out)]) == 2
    assert ("run with --budget 0.25,0.5 to keep and extend it, or give another --out"
            in capsys.readouterr().err)
    assert (out / "tree.json").read_bytes() == tree and not (out / "log-0.5.jsonl").exists()
    assert main(["learn-tree", "--budget", "0.25,0.5", "--rounds", "1", "--out",
                 str(out)]) == 0
    assert set(json.loads((out / "run.json").read_text())["settings"]["budgets"]) == {0.25, 0.5}
    trained = tmp_path / "trained"
    trained.mkdir()
    record = json.dumps({"status": "finished", "algorithm": "maskable_ppo"})
    (trained / "run.json").write_text(record)
    assert main(["learn-tree", "--rounds", "1", "--out", str(trained)]) == 2
    assert "holds another command's run" in capsys.readouterr().err
    assert (trained / "run.json").read_text() == record
    assert sorted(p.name for p in trained.iterdir()) == ["run.json"]


def test_learn_tree_refuses_another_commands_folder_before_its_wandb_run(
        tmp_path, capsys, monkeypatch, fresh_wandb):
    """A review: with --wandb, the wandb run was started (and wrote into the folder) before
    the folder was refused."""
    from experiments.cli import main

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-dir"))
    trained = tmp_path / "trained"
    trained.mkdir()
    (trained / "run.json").write_text(json.dumps({"status": "finished"}))
    assert main(["learn-tree", "--rounds", "1", "--wandb", "--out", str(trained)]) == 2
    assert "holds another command's run" in capsys.readouterr().err
    assert sorted(p.name for p in trained.iterdir()) == ["run.json"]
    assert not (tmp_path / "wandb-dir").exists()


class _Interrupted(SearchProposer):
    """The search proposer, interrupted (Ctrl-C) when asked for round ``at`` of its
    ``budget``."""

    def __init__(self, seed, at, budget):
        super().__init__(seed)
        self.at, self.budget = at, budget

    def propose(self, feedback, n):
        if feedback.round == self.at and feedback.problems[0].budget == self.budget:
            raise KeyboardInterrupt
        return super().propose(feedback, n)


def test_an_interrupted_learn_tree_says_that_the_same_command_resumes_it(
        tmp_path, capsys, monkeypatch):
    import experiments.learn_tree as learn_tree_module
    from agents.tree.learner import LearnInterruptedError
    from experiments.cli import main

    out, fresh = tmp_path / "run", tmp_path / "fresh"
    command = ["learn-tree", "--budget", "0.1,0.25", "--rounds", "4", "--out", str(out)]
    monkeypatch.setattr(learn_tree_module, "make_proposer",
                        lambda kind, seed, *a, **k: _Interrupted(seed, 3, 0.25))
    assert main(command) == 2
    err = capsys.readouterr().err
    assert (f"learn-tree was interrupted at budget 0.25 with 2 rounds of it done, kept in "
            f"{out / 'log-0.25.jsonl'}: run the same command again to resume it") in err, err
    with pytest.raises(KeyboardInterrupt):  # still one, for code that stops on one
        learn_tree_module.learn_tree([0.1, 0.25], _Interrupted(0, 4, 0.25), out, rounds=4,
                                     progress=False)
    with pytest.raises(LearnInterruptedError, match="with 3 rounds of it done"):
        learn_tree_module.learn_tree([0.1, 0.25], _Interrupted(0, 4, 0.25), out, rounds=4,
                                     progress=False)
    monkeypatch.undo()
    assert main(command) == 0
    assert main([*command[:-1], str(fresh)]) == 0
    assert load(out / "tree.json").root == load(fresh / "tree.json").root


def test_learn_tree_refuses_bad_settings(tmp_path, capsys):
    from experiments.cli import main

    assert main(["learn-tree", "--budget", "a lot", "--out", str(tmp_path)]) == 2
    assert "--budget" in capsys.readouterr().err
    assert main(["learn-tree", "--start", "nowhere.json", "--rounds", "1", "--out",
                 str(tmp_path)]) == 2
    assert "--start must be stop, roofline or a tree file" in capsys.readouterr().err
    for option, value, says in (("--rounds", "0", "--rounds 0: a whole number >= 1"),
                                ("--proposals", "-3", "--proposals -3: a whole number >= 1"),
                                ("--patience", "-1", "--patience -1: a whole number >= 0"),
                                ("--margin", "nan", "--margin nan: the mean log score")):
        assert main(["learn-tree", option, value, "--out", str(tmp_path / "x")]) == 2
        assert says in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


class _Script:
    """A proposer whose rounds are scripted: each answer is None (no reply: the endpoint
    down), "refused" (an HTTP 401: a bad key), "junk" (a reply that is not the schema),
    "invalid" (four edits, none valid), "nothing" (a reply of no edits) or "stop" (one
    usable edit)."""

    name = "script"

    def __init__(self, answers):
        self.answers, self.asked = list(answers), 0

    def propose(self, feedback, n):
        from agents.tree.edits import Rewrite
        from agents.tree.proposers.base import Proposal

        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        if answer is None:
            return Proposal(edits=[], error="connection: refused", unreached=True)
        if answer == "refused":
            return Proposal(edits=[], error="http: HTTP 401 from URL: invalid key",
                            unreached=True, refused=True)
        if answer == "junk":
            return Proposal(edits=[], error="no_json: the reply holds no JSON object")
        if answer == "invalid":  # what parse_reply leaves of a reply of invalid edits
            return Proposal(edits=[], unusable=[
                "edit 1: node 99: the tree has nodes 0 to 0",
                "edit 2: root: collect 'Foo' is not a section",
                "edit 3: an edit's op is rewrite or split, not 'merge'",
                f"edit 4: root.if: metric {SM} reads SpeedOfLight, not collected above"])
        if answer == "nothing":
            return Proposal(edits=[])
        return Proposal(edits=[Rewrite(0, Stop())])


def test_rounds_without_a_reply_are_asked_again_after_a_wait_and_never_logged_as_done(
        small, tmp_path):
    from agents.tree.learner import RETRY_WAITS, ProposerUnreachableError

    assert RETRY_WAITS == (2.0, 4.0, 8.0)
    train_env, val_env = small
    config = LearnConfig(budget=0.25, rounds=4, proposals=1)
    log = tmp_path / "log.jsonl"
    # a reply missing once or twice is asked again after 2, then 4 s: the rounds stay 1..4
    waits = []
    flaky = _Script(["stop", None, None, "junk", "stop", None, "stop"])
    result = learn(train_env, val_env, flaky, config, log=log, progress=False,
                   sleep=waits.append)
    assert waits == [2.0, 4.0, 2.0]  # the waits start again after a reply
    rounds = [json.loads(x) for x in log.read_text().splitlines()[1:]]
    assert [r["round"] for r in rounds] == [1, 2, 3, 4] and flaky.asked == 7
    assert [r["error"] for r in rounds] == [None, "no_json: the reply holds no JSON object",
                                            None, None]
    assert result.rounds == 4 and result.failed == {"no_json": 1}
    # no reply after the 2, 4 and 8 s waits: it stops, the done rounds kept, the budget named;
    # the same command goes on from there
    log2 = tmp_path / "log2.jsonl"
    waits.clear()
    with pytest.raises(ProposerUnreachableError, match=(
            r"no reply 4 times in a row at budget 0\.25 \(the last: connection: refused\): "
            r"1 round of budget 0\.25 is done and logged in log2\.jsonl; .* go on from round 2 "
            r"of budget 0\.25$")):
        learn(train_env, val_env, _Script(["stop", None]), config, log=log2, progress=False,
              sleep=waits.append)
    assert waits == [2.0, 4.0, 8.0]
    assert len(log2.read_text().splitlines()) == 2  # the settings and round 1
    again = _Script(["stop"])
    assert learn(train_env, val_env, again, config, log=log2, progress=False).rounds == 4
    assert again.asked == 3
    # a request the server refuses (a bad key, an unknown model) stops at once, without the
    # 14 s of waits: its answer will not change
    waits.clear()
    log3 = tmp_path / "log3.jsonl"
    with pytest.raises(ProposerUnreachableError, match=(
            r"the server of the proposer script refused its request at budget 0\.25 \(http: "
            r"HTTP 401 from URL: invalid key\), which asking again would not change: 1 round "
            r"of budget 0\.25 is done and logged in log3\.jsonl; with the key or the server "
            r"fixed, .* go on from round 2 of budget 0\.25; with another model or "
            r"--llm-structured, give another --out \(a log goes on only with the settings it "
            r"was started with\)$")):
        learn(train_env, val_env, _Script(["stop", "refused"]), config, log=log3,
              progress=False, sleep=waits.append)
    assert waits == []


def test_rounds_whose_edits_are_all_invalid_count_as_without_a_usable_reply(small, tmp_path):
    """A reply whose every edit is unusable (an unknown node or section, a bad op, a metric
    read above its section) is counted as "invalid" like a reply that is not JSON, and the
    round's summary counts the edits it offered."""
    train_env, val_env = small
    config = LearnConfig(budget=0.25, rounds=4, proposals=4)
    log = tmp_path / "log.jsonl"
    script = _Script(["invalid", "junk", "nothing", "stop"])
    result = learn(train_env, val_env, script, config, log=log, progress=False)
    assert result.failed == {"invalid": 1, "no_json": 1, "no_edits": 1}
    rounds = [json.loads(x) for x in log.read_text().splitlines()[1:]]
    assert [r["summary"] for r in rounds[:3]] == [
        "round 1: none of 4 edits kept (4 unusable)", "round 2: no usable reply (no_json)",
        "round 3: no edit offered"]
    # read back from the log, the same count
    more = learn(train_env, val_env, _Script(["invalid"]), LearnConfig(
        budget=0.25, rounds=5, proposals=4), log=log, progress=False)
    assert more.failed == {"invalid": 2, "no_json": 1, "no_edits": 1} and more.rounds == 5


@pytest.mark.parametrize("optimizer", ["reference", "reference-v1"])
def test_the_shipped_tree_reproduces_its_recorded_scores(optimizer):
    path = shipped_tree(optimizer)
    assert path is not None
    tree = load(path)
    assert tree.meta["learned"]["optimizer"] == optimizer
    train = gym.make("AutoProfiler-v0", split="train", optimizer=optimizer)
    val = gym.make("AutoProfiler-v0", split="val", optimizer=optimizer)
    for budget, scores in tree.meta["scores"].items():
        b = float(budget)
        assert score(rollout(train, TreePolicy(tree, train), budget=b)) == pytest.approx(
            scores["train"], rel=1e-9)
        assert score(rollout(val, TreePolicy(tree, val), budget=b)) == pytest.approx(
            scores["validation"], rel=1e-9)
    assert shipped_tree("llm:nobody") is None
    # its rendering ships beside it (read without Python), and is the tree's
    assert path.with_suffix(".txt").read_text() == export_text(tree) + "\n"


class _NoHindsight:
    """A backend as the live one is: the Backend protocol, no hindsight (best_score)."""

    def __init__(self, backend):
        self._backend = backend

    def __getattr__(self, name):
        if name == "best_score":
            raise AttributeError(name)
        return getattr(self._backend, name)


def test_the_learner_runs_on_a_backend_without_hindsight(small):
    from autoprofiler_env.envs.backends import Hindsight

    tr = gym.make("AutoProfiler-v0", problems=small[0].unwrapped.problems)
    tr.unwrapped.backend = _NoHindsight(tr.unwrapped.backend)
    assert not isinstance(tr.unwrapped.backend, Hindsight)
    seen = []

    class Probe(SearchProposer):
        def propose(self, feedback, n):
            seen.append(feedback)
            return super().propose(feedback, n)

    learn(tr, small[1], Probe(0), LearnConfig(rounds=2), progress=False)
    assert seen and all(p.oracle_speedup is None and p.regret == 0.0
                        for p in seen[0].problems)


_PROPOSALS = """
import json, gymnasium as gym, autoprofiler_env
from agents.tree.learner import LearnConfig, learn
from agents.tree.proposers.search import SearchProposer
tr = gym.make("AutoProfiler-v0", split="train")
va = gym.make("AutoProfiler-v0", split="val")
lines = []
learn(tr, va, SearchProposer(0), LearnConfig(rounds=24), progress=False, on_round=lines.append)
print(json.dumps([[p["edit"] for p in line["proposals"]] for line in lines]))
"""


def test_the_search_proposer_proposes_the_same_in_another_process():
    """The seed alone decides the proposals: not the string hashing of the process (a set of
    sections iterated in its own order once made them differ from the 16th round on)."""
    import os
    import subprocess
    import sys

    outs = [subprocess.run([sys.executable, "-c", _PROPOSALS], capture_output=True, text=True,
                           timeout=300, env={**os.environ, "PYTHONHASHSEED": seed})
            for seed in ("0", "1")]
    assert all(o.returncode == 0 for o in outs), outs[0].stderr[-2000:]
    assert outs[0].stdout == outs[1].stdout


def test_a_counts_threshold_and_value_are_whole_numbers_in_plain_terms():
    """log_n_conv_transpose >= 0.15 is n_conv_transpose >= 1 (not 0.413): a threshold rounded
    up, a value (float32 in the observation) to the nearest; other features as they are."""
    from agents.tree.render import plain

    assert plain("feature", "log_n_conv_transpose", 0.15, threshold=True) == 1
    assert plain("feature", "log_n_matmul", 0.39, threshold=True) == 2
    assert plain("feature", "log_n_ops", float(np.float32(np.log10(1 + 30000)))) == 30000
    assert plain("feature", "log_max_input_rank", float(np.log10(1 + 4)), threshold=True) == 4
    assert abs(plain("feature", "log_input_bytes", 7.405) - 2.54e7) < 1e5
    assert plain("metric", "log_n_ops", 1.0) is None


def _llm_dataset(tmp_path, replies=None):
    """The profiler study's 12 problems with an LLM optimizer's replies recorded for two
    section sets (none, SpeedOfLight), as `record --parts llm --section-sets
    "none;SpeedOfLight"` writes them: by default the same two replies (1.5x, 2.5x) for each
    set, so that every tree has the same expected score; ``replies``: the speedups per set
    (``""``, ``"SpeedOfLight"``), one row per reply."""
    from autoprofiler_env.dataset.build import build
    from autoprofiler_env.jsonlines import read_jsonl
    from autoprofiler_env.profiler import NcuRun
    from tests.conftest import DATA

    root = DATA.parent.parent / "docs" / "data"
    run_dirs = sorted(p.parent for p in (root / "profile_study_h200").glob("section-*/run.json"))
    reference = read_jsonl(root / "recording_h200" / "reference.jsonl")
    uris = [p["uri"] for p in NcuRun.load(run_dirs[0]).problems]
    replies = replies or {"": (1.5, 2.5), "SpeedOfLight": (1.5, 2.5)}
    llm = [{"uri": u, "model": "llm:m", "sections": key, "repeat": r, "correct": True,
            "error_kind": None, "candidate_ms": 1.0, "speedup": speedup}
           for u in uris for key, speedups in replies.items()
           for r, speedup in enumerate(speedups)]
    path = tmp_path / "llm.json.gz"
    build(run_dirs, reference, [], llm_rows=llm).save(path)
    return path


def test_a_tree_is_learned_for_an_llm_optimizers_few_recorded_sets_and_scored_alike(tmp_path,
                                                                                    capsys):
    """``record --parts llm`` records a few section sets: learn-tree on such a dataset was
    stopped by the first set not recorded (the oracle's search), with no option to go on;
    with ``--llm-missing largest_recorded_subset`` it learns. Each tree is scored with the
    replies drawn alike (a seeded generator): every tree here has the same score, so no edit
    is kept (a fresh draw per tree kept edits for noise), and two runs give the same tree."""
    from experiments.cli import main

    path = _llm_dataset(tmp_path)
    command = ["learn-tree", "--budget", "0.25", "--rounds", "6", "--dataset", str(path),
               "--optimizer", "llm:m"]
    assert main([*command, "--out", str(tmp_path / "raise")]) == 2
    err = capsys.readouterr().err
    assert "was not recorded with sections" in err and "--llm-missing largest_recorded_subset" \
        in err
    for run in ("a", "b"):
        assert main([*command, "--llm-missing", "largest_recorded_subset", "--out",
                     str(tmp_path / run)]) == 0
    capsys.readouterr()
    logs = [[json.loads(line)
             for line in (tmp_path / run / "log-0.25.jsonl").read_text().splitlines()]
            for run in ("a", "b")]
    rounds = [line for line in logs[0] if line.get("kind") == "round"]
    assert len(rounds) == 6 and all(line["accepted"] is None for line in rounds)
    scored = {p["train_objective"] for line in rounds for p in line["proposals"]
              if p["train_objective"] is not None}
    assert len(scored) == 1  # every tree alike
    assert (tmp_path / "a" / "tree.json").read_text() == (tmp_path / "b" / "tree.json").read_text()
    assert json.loads((tmp_path / "a" / "run.json").read_text())["settings"][
        "llm_missing"] == "largest_recorded_subset"
    # the benchmark takes the same option
    bench = ["benchmark", "--dataset", str(path), "--optimizer", "llm:m", "--budgets", "0.25",
             "--split", "train", "--seeds", "1", "--out", str(tmp_path / "bench")]
    assert main(bench) == 2 and "--llm-missing" in capsys.readouterr().err
    assert main([*bench, "--llm-missing", "largest_recorded_subset"]) == 0


def test_each_problem_draws_its_reply_whatever_the_episodes_before_it_drew(tmp_path):
    """Seeding the first reset alone left each problem's draw to depend on what the episodes
    before it drew: a set of one reply draws nothing, a set of four one number, so two trees
    that differed on the first problem got other replies on every later one (a reviewer's
    run: [3, 3, 2, 2, 1, 1] against [4, 3, 3, 2, 2, 1]). Each problem's episode is seeded
    from the problem now: scored among all, or alone, it gets the same reply."""
    from agents.tree.learner import Scorer

    path = _llm_dataset(tmp_path, {"": (2.0,), "SpeedOfLight": (1.0, 2.0, 3.0, 4.0)})
    kwargs = {"dataset": str(path), "optimizer": "llm:m", "llm_missing":
              "largest_recorded_subset"}
    env = gym.make("AutoProfiler-v0", split="train", **kwargs)
    tree = Tree(Collect("SpeedOfLight", Stop()))
    together = {r.problem: r.speedup for r in Scorer(env, 1.0)(tree).records}
    alone = {uri: Scorer(gym.make("AutoProfiler-v0", split=None, problems=[uri], **kwargs),
                         1.0)(tree).records[0].speedup for uri in together}
    assert together == alone and len(set(together.values())) > 1


def test_a_run_resumes_on_an_upgraded_file_of_its_dataset(tmp_path):
    """``dataset upgrade`` rewrites a file in place with the same content under a new
    checksum; a learn-tree log and an experiment folder made on the old file were refused as
    made with other settings."""
    import shutil

    from autoprofiler_env.dataset import DatasetFile
    from autoprofiler_env.dataset.names import resolve_dataset
    from experiments.experiment import load_config, run_experiment
    from experiments.learn_tree import learn_tree

    data = tmp_path / "data.json.gz"
    shutil.copy(resolve_dataset(None), data)
    (tmp_path / "exp.yaml").write_text(
        f"name: e\nbudgets: [0.25]\nsplits: [test]\nseeds: 1\nbaselines: [no-profile]\n"
        f"reps: 20\npoi_reps: 5\nenv: {{dataset: {data}}}\n")
    learn_tree([0.25], SearchProposer(0), tmp_path / "tree", rounds=1, dataset=str(data),
               progress=False)
    first = run_experiment(load_config(tmp_path / "exp.yaml"), tmp_path / "exp",
                           progress=False)
    content = DatasetFile.load(data)  # as `dataset upgrade` writes it: in place, the same
    content.save(data, same_content_as=[content.metadata["sha256"]])  # content
    _, results = learn_tree([0.25], SearchProposer(0), tmp_path / "tree", rounds=2,
                            dataset=str(data), progress=False)
    assert results[0.25].rounds == 2
    lines = (tmp_path / "tree" / "log-0.25.jsonl").read_text().splitlines()
    assert [json.loads(x).get("round") for x in lines] == [None, 1, 2]  # resumed, not anew
    again = run_experiment(load_config(tmp_path / "exp.yaml"), tmp_path / "exp",
                           progress=False)
    assert again["rows"] == first["rows"]


def test_the_learner_refuses_an_environment_that_shapes_the_reward():
    """A review: the learner's objective is the mean reward, which ``incorrect_reward`` (a
    training shaping) changes; it scores the program one would ship, as every evaluation."""
    from agents.tree.learner import Scorer
    from autoprofiler_env.errors import AutoProfilerError

    for kwargs, said in (({"reward": "speedup"}, "reward='log_speedup'"),
                         ({"incorrect_reward": -1.0}, "without incorrect_reward")):
        env = gym.make("AutoProfiler-v0", split="train", **kwargs)
        with pytest.raises(AutoProfilerError, match=said):
            Scorer(env, 0.25)
        env.close()
