"""The tree study: its numbers come from the learner and the benchmark, and its criteria are
computed from them."""

from baselines import FIXED_PREFIXES
from experiments.studies import tree as study


def test_the_study_compares_the_learned_tree_with_the_baselines():
    result = study.study([0.25], seeds=2, rounds=3, optimizer=None)
    entry = result["budgets"]["0.25"]
    assert entry["train_chosen_fixed"].startswith(FIXED_PREFIXES)
    assert [s["seed"] for s in entry["seeds"]] == [0, 1]
    for split in ("val", "test"):
        s = entry["splits"][split]
        assert s["tree_min"] <= s["tree_geomean_over_seeds"] <= s["tree_max"] <= s["oracle"]
        assert s["pass_oracle"] == (s["tree_geomean_over_seeds"] >= 0.95 * s["oracle"])
        assert s["no_profile"] <= s["oracle"]
    assert 0 <= entry["median_cost_share_test"] <= 0.25 + 1e-9
    text = study.markdown(result)
    assert "## Budget 25% of the full set's cost" in text and "| test |" in text
