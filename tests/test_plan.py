"""The recording plan: the candidates the reference optimizer can reach, and their order."""

import json
from collections import Counter

import pytest

from autoprofiler_env.dataset import Dataset
from autoprofiler_env.dataset.record.plan import (
    PlannedCandidate,
    PlannedProblem,
    balanced_order,
    load_plan,
    planning_optimizers,
    reachable,
    save_plan,
)
from autoprofiler_env.dataset.replay import DEFAULT_DATASET
from autoprofiler_env.errors import DatasetError
from autoprofiler_env.optimizers import ReferenceOptimizer
from autoprofiler_env.optimizers.compose import composed_name, parts

PLAN = DEFAULT_DATASET.parents[3] / "docs" / "data" / "recording_h200_v2" / "plan.json"


@pytest.fixture(scope="module")
def ds():
    return Dataset.load(DEFAULT_DATASET)


def _choice(ds, uri, sections, tolerance=None):
    record = ds.record(uri)
    opt = ReferenceOptimizer(tolerance=tolerance)
    profile = ds.profile(uri, sections) if sections else None
    return opt.choose(None, profile, record.features,
                      applicable=frozenset(record.transformations),
                      eager_ms=record.eager["median_ms"])[0]


def test_every_reachable_candidate_is_what_its_cheapest_set_gives(ds):
    uri = "problem://autoprofiler/v1/level2/conv2d_batchnorm_relu_32x64x112x112"
    found = reachable(ds, uri, [ReferenceOptimizer()],
                      frozenset(ds.record(uri).transformations))
    assert len(found) >= 3 and "identity" not in found
    for name, planned in found.items():
        assert planned.name == name == composed_name(parts(name))
        assert _choice(ds, uri, planned.sections) == name
        assert 0 <= planned.cost_share <= 1
    # the full evidence's choice is reachable, at a share no larger than the full set's
    assert _choice(ds, uri, ds.sections) in found
    # under a tolerance that forbids TF32 / FP16 the rules reach other candidates: the plan
    # takes both regimes
    strict = _choice(ds, uri, ds.sections, tolerance="kernelbench")
    both = reachable(ds, uri, planning_optimizers(), frozenset(ds.record(uri).transformations))
    assert set(found) <= set(both) and (strict == "identity" or strict in both)


def test_a_section_that_bears_on_no_rule_stands_for_every_such_section(ds):
    uri = "problem://autoprofiler/v1/level1/relu_16384x16384"
    bearing = ds.bearing(uri, ReferenceOptimizer())
    others = [s for s in ds.sections if s not in bearing]
    assert bearing and others
    # any one of them gives what the cheapest of them gives: the kernel list and durations
    assert len({_choice(ds, uri, (s,)) for s in others}) == 1


def test_the_committed_plan_is_the_optimizers(ds):
    """A change of the rules that changes what a problem can reach must come with a new plan
    (and a recording of what it adds): three problems checked (the whole plan takes about
    80 s to make)."""
    plan = {p.uri: p for p in load_plan(PLAN)}
    assert len(plan) == len(ds.uris())
    for uri in ("problem://autoprofiler/v1/level1/softmax_16384x4096",
                "problem://autoprofiler/v1/level3/mlp_tiny_8layer_64x256",
                "problem://autoprofiler/v1/level3/resnet_basic_block_32x64x56x56"):
        found = reachable(ds, uri, planning_optimizers(),
                          frozenset(ds.record(uri).transformations))
        assert {c.name: c for c in plan[uri].candidates} == found, uri


def test_every_prefix_of_the_order_is_balanced_across_splits_and_levels():
    groups = {f"u{i:03d}": (split, level) for i, (split, level) in enumerate(
        [("train", 1)] * 33 + [("train", 2)] * 15 + [("train", 3)] * 12 + [("val", 1)] * 7
        + [("val", 2)] * 3 + [("val", 3)] * 2 + [("test", 1)] * 13 + [("test", 2)] * 6
        + [("test", 3)] * 5)}
    order = balanced_order(groups)
    assert sorted(order) == sorted(groups)
    for n in (12, 24, 48):
        splits = Counter(groups[u][0] for u in order[:n])
        assert abs(splits["test"] - n * 24 / 96) <= 1.5, (n, splits)
        assert abs(splits["train"] - n * 60 / 96) <= 1.5, (n, splits)
        levels = Counter(groups[u][1] for u in order[:n])
        assert abs(levels[1] - n * 53 / 96) <= 2, (n, levels)


def test_a_plan_round_trips_and_a_bad_file_is_a_clear_error(tmp_path):
    plan = [PlannedProblem("problem://x", "test",
                           (PlannedCandidate("compile+tf32", ("SpeedOfLight",), 0.1),))]
    save_plan(plan, tmp_path / "plan.json", {"optimizer": "reference"})
    assert load_plan(tmp_path / "plan.json") == plan
    with pytest.raises(DatasetError, match="no plan file"):
        load_plan(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text(json.dumps({"problems": [{"uri": "x"}]}))
    with pytest.raises(DatasetError, match="is not a recording plan"):
        load_plan(tmp_path / "bad.json")


def test_a_problem_gets_an_optimizers_outcomes_only_once_its_plan_is_recorded():
    from autoprofiler_env.dataset.build import build
    from autoprofiler_env.jsonlines import read_jsonl

    data = DEFAULT_DATASET.parents[3] / "docs" / "data"
    study = data / "profile_study_h200"
    relu = "problem://autoprofiler/v1/level1/relu_16384x16384"
    softmax = "problem://autoprofiler/v1/level1/softmax_16384x4096"

    def row(uri, name):
        return {"uri": uri, "transformation": name, "correct": True, "error_kind": None,
                "candidate_ms": 0.5, "speedup": 1.2, "judge": 3}

    plan = [PlannedProblem(relu, "train", (PlannedCandidate("compile", (), 0.0),)),
            PlannedProblem(softmax, "train", (PlannedCandidate("compile", (), 0.0),
                                              PlannedCandidate("triton_softmax", ("x",), 0.1)))]
    runs = [study / "section-SpeedOfLight"]
    reference = read_jsonl(data / "recording_h200" / "reference.jsonl")
    content = build(runs, reference, [], sections=("SpeedOfLight",),
                    optimizer_rows={"reference": [row(relu, "compile"), row(softmax, "compile")]},
                    plans={"reference": plan})
    assert set(content.problems[relu].outcomes) == {"reference"}
    assert "reference" not in content.problems[softmax].outcomes  # triton_softmax is missing
    meta = content.metadata["optimizers"]["reference"]
    assert meta["problems"] == 1 and meta["incomplete"] == {softmax: ["triton_softmax"]}
