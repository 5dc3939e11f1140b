"""The one reader of a condition's value (:mod:`agents.tree.reading`): the compiled policy,
the search proposer's thresholds and the LLM proposer's prompt agree on what a condition
reads from an observation."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import autoprofiler_env  # noqa: F401
from agents.tree.edits import Split
from agents.tree.learner import LearnConfig, learn
from agents.tree.nodes import Branch, Collect, Condition, Stop, Tree, roofline_tree, vocabulary
from agents.tree.policy import TreePolicy
from agents.tree.proposers.base import Feedback, Proposal
from agents.tree.proposers.llm import build_messages
from agents.tree.proposers.search import SearchProposer
from agents.tree.reading import observed
from autoprofiler_env.envs.observation import squash

# kind, name, the section it reads (None: free), values in the condition's units
CASES = [
    ("metric", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "SpeedOfLight",
     (0.0, 12.5, 60.0, 97.3)),
    ("metric", "smsp__inst_issued.avg", "InstructionStats", (3.0, 2.0e4, 7.5e8)),
    ("finding", "SpeedOfLight", "SpeedOfLight", (0.0, 8.4, 20.0, 64.0)),
    ("feature", "log_flops", None, (-1.5, 0.0, 6.1, 9.5)),
    ("budget", "fraction", None, (0.05, 0.25, 1.0)),
]


@pytest.fixture(scope="module")
def env():
    return gym.make("AutoProfiler-v0", split="train")


def _obs(env, kind: str, name: str, section: str | None, value: float, known: bool = True):
    """An observation holding ``value`` (in the condition's units) for ``kind`` ``name``:
    ``section`` collected when ``known``, else passed over (it does not fit)."""
    base = env.unwrapped
    n, m = len(base.sections), len(base.metric_names)
    obs = {"collected": np.zeros(n, np.int8), "metrics": np.zeros(m, np.float32),
           "metrics_known": np.zeros(m, np.int8), "findings": np.zeros(n, np.float32),
           "features": np.zeros(len(vocabulary().features), np.float32),
           "budget_total": np.array([0.3, 0.0], np.float32),
           "action_mask": np.ones(n + 1, np.int8)}
    if section is not None:
        obs["collected" if known else "action_mask"][base.sections.index(section)] = known
    if kind == "metric":
        j = base.metric_names.index(name)
        obs["metrics"][j], obs["metrics_known"][j] = squash(value), known
    elif kind == "finding":
        obs["findings"][base.sections.index(name)] = value / 100.0
    elif kind == "feature":
        obs["features"][vocabulary().features.index(name)] = value
    else:
        obs["budget_total"][0] = value if known else 0.0
    return obs


def _takes_then(env, condition: Condition, section: str | None, obs: dict) -> bool:
    branch = Branch(condition, Collect("Occupancy"), Stop())
    path = TreePolicy(Tree(Collect(section, branch) if section else branch), env).path(obs)
    at = 1 if section else 0
    return path[path.index(at) + 1] == at + 1


@pytest.mark.parametrize("kind, name, section, values", CASES)
def test_the_policy_branches_on_the_value_observed_reads(env, kind, name, section, values):
    base = env.unwrapped
    vocab = vocabulary(tuple(base.sections))
    for value in values:
        obs = _obs(env, kind, name, section, value)
        seen = observed(obs, kind, name, vocab, base.metric_names)
        assert seen == pytest.approx(value, rel=1e-5, abs=1e-6)
        # thresholds off the value: at a tie the policy compares float32 values
        for at_least in (value - 0.01 * abs(value) - 1e-3, value + 0.01 * abs(value) + 1e-3):
            condition = Condition(kind, name, at_least)
            assert _takes_then(env, condition, section, obs) == (seen >= at_least)
        # unknown: the section not collected, or the full set's cost unknown (budget 0)
        if section is not None or kind == "budget":
            unknown = _obs(env, kind, name, section, value, known=False)
            assert observed(unknown, kind, name, vocab, base.metric_names) is None
            assert not _takes_then(env, Condition(kind, name, -1e9), section, unknown)


class _Capture:
    name = "capture"

    def __init__(self) -> None:
        self.feedback: list[Feedback] = []

    def propose(self, feedback: Feedback, n: int) -> Proposal:
        self.feedback.append(feedback)
        return Proposal(edits=[])


def test_search_thresholds_and_the_prompt_read_what_the_policy_reads():
    train = gym.make("AutoProfiler-v0", split="train")
    train = gym.make("AutoProfiler-v0", problems=train.unwrapped.problems[:16])
    val = gym.make("AutoProfiler-v0", problems=train.unwrapped.problems[:2])
    capture = _Capture()
    for budget in (0.1, 0.5):  # two budgets: the search also splits on the budget
        learn(train, val, capture, LearnConfig(budget=budget, rounds=1),
              start=roofline_tree(), progress=False)
    first, second = capture.feedback
    fb = Feedback(first.tree, first.score, first.problems + second.problems,
                  first.section_costs, first.vocabulary, first.metric_names)
    vocab, tree = fb.vocabulary, fb.tree
    kinds = set()
    for round_ in range(8):
        fb = Feedback(tree, fb.score, fb.problems, fb.section_costs, vocab, fb.metric_names,
                      round_)
        for edit in SearchProposer(0).propose(fb, 8).edits:
            old = tree.nodes()[edit.node]
            if isinstance(edit, Split):
                c = edit.condition
            elif isinstance(edit.with_, Branch) and isinstance(old, Branch) and (
                    edit.with_.then, edit.with_.otherwise) == (old.then, old.otherwise):
                c = edit.with_.condition  # a retune
            else:
                continue
            kinds.add(c.kind)
            edited = edit.apply(tree, vocab)
            policy = TreePolicy(edited, train)
            sides = []
            for p in (p for p in fb.problems if edit.node in p.path):
                seen = observed(p.observation, c.kind, c.name, vocab, fb.metric_names)
                path = policy.path(p.observation)
                then = path[path.index(edit.node) + 1] == edit.node + 1
                assert then == (seen is not None and seen >= c.at_least)
                sides.append(then)
            assert any(sides) and not all(sides)  # the threshold splits the problems
            if c.kind in ("metric", "finding"):  # the prompt shows the value read
                shown = Feedback(edited, fb.score, fb.problems, fb.section_costs, vocab,
                                 fb.metric_names)
                user = build_messages(shown, 1, problems_shown=len(fb.problems),
                                      features_shown=0)[1]["content"]
                header = next(line for line in user.splitlines() if line.startswith("problem"))
                column = header.split(" | ").index(c.describe().split(" >= ")[0])
                for p in fb.problems:
                    row = next(line for line in user.splitlines()
                               if line.startswith(f"{p.problem} | {p.budget:.3g} |"))
                    seen = observed(p.observation, c.kind, c.name, vocab, fb.metric_names)
                    assert row.split(" | ")[column] == ("?" if seen is None
                                                        else format(seen, ".3g"))
    assert kinds >= {"metric", "feature"}  # findings and the budget are rare draws here
