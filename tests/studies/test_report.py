"""The data report's mechanics, on the small real dataset of the profiler study's 12 problems
(reference-v1's outcomes only), at two budgets."""

import itertools

import pytest

from experiments.studies import report as report_module
from experiments.studies.report import markdown, report

BUDGETS = [0.1, 0.25]
FIXED = ("set:", "section:", "curated:", "no-profile")


@pytest.fixture(scope="module")
def result(study_dataset, tmp_path_factory):
    """The report on every problem (split all), the fixed configuration chosen on train."""
    out = tmp_path_factory.mktemp("report")
    return report(str(study_dataset), out, BUDGETS, split=None), out


@pytest.fixture(scope="module")
def backend(study_dataset):
    from autoprofiler_env.envs.backends import ReplayBackend

    return ReplayBackend(str(study_dataset), optimizer="reference-v1")


def test_report_names_its_optimizer_and_problems(result):
    result, out = result
    assert result["optimizer"] == "reference-v1"  # the study dataset's only optimizer
    assert result["problems"] == result["dataset_problems"] == 12
    assert result["split"] == "all" and result["budgets"] == BUDGETS
    for path in result["figures"]:
        assert (out / path.rsplit("/", 1)[1]).stat().st_size > 10_000


def test_full_evidence_stays_under_the_ceiling(result):
    e = result[0]["full_evidence"]
    assert e["ceiling"] >= e["full_evidence"] - 1e-12
    assert e["ceiling"] >= e["no_profile"] - 1e-12
    assert e["best_recorded"] >= e["ceiling"] - 1e-12  # the optimizer chooses among those
    assert e["ratio"] == pytest.approx(e["full_evidence"] / e["ceiling"])
    assert e["pass"] == (e["ratio"] >= 0.9)


def test_oracle_beats_every_fixed_configuration_and_the_train_choice_is_trains_best(result):
    result = result[0]
    ceiling = result["full_evidence"]["ceiling"]
    for row in result["oracle_vs_fixed"]:
        budget = row["budget"]
        here = {r["agent"]: r for r in result["agents"] if r["budget"] == budget}
        train = {r["agent"]: r for r in result["train_agents"] if r["budget"] == budget}
        assert len(train) == len(here)
        assert all(r["episodes"] == 7 for r in train.values())  # the train split's problems
        fixed = [a for a in here if a.startswith(FIXED)]
        assert ceiling >= row["oracle"] - 1e-12
        assert all(row["oracle"] >= here[a]["geomean_speedup"] - 1e-12 for a in here)
        # chosen on train by its geomean there, scored here; hindsight is the best here
        assert train[row["train_fixed_agent"]]["geomean_speedup"] == max(
            train[a]["geomean_speedup"] for a in fixed)
        assert row["train_fixed"] == here[row["train_fixed_agent"]]["geomean_speedup"]
        assert row["best_fixed"] == max(here[a]["geomean_speedup"] for a in fixed)
        assert row["best_fixed"] >= row["train_fixed"]
        assert row["ratio"] == pytest.approx(row["oracle"] / row["train_fixed"])
        assert row["pass"] == (row["ratio"] >= 1.10 - 1e-9)


def test_the_search_agrees_with_the_oracle_and_with_brute_force(result, backend):
    from autoprofiler_env.scoring import log_score

    result = result[0]
    assert result["oracle_mismatch"] == []
    sections = backend.sections
    uri = sorted(result["search"][0.25])[0]
    full = backend.full_cost(uri)[0]
    for budget in BUDGETS:
        found = result["search"][budget][uri]
        # every affordable set, enumerated plainly
        scores = {}
        for size in range(len(sections) + 1):
            for combo in itertools.combinations(sections, size):
                if sum(backend.cost(uri, s)[0] for s in combo) <= budget * full + 1e-12:
                    o = backend.finish(uri, combo)
                    scores[combo] = log_score(o.correct, o.speedup)
        best = max(scores.values())
        optimal = [c for c, v in scores.items() if v >= best - 1e-9]
        assert found["value"] == pytest.approx(best)
        assert found["optimal_sets"] == len(optimal)
        assert found["smallest"] == min(map(len, optimal))
        assert found["smallest_set"] in optimal
        assert set(found["decisive"]) == set.intersection(*map(set, optimal))


def test_set_sizes_and_decisive_counts_are_consistent(result):
    result = result[0]
    n = result["problems"]
    for row in result["set_sizes"]:
        per = result["search"][row["budget"]]
        assert sum(row[f"size_{k}"] for k in range(4)) == row["problems"] == n
        assert row["share_2_or_more"] == (row["size_2"] + row["size_3"]) / n
        assert row["share_2_or_more"] == sum(r["smallest"] >= 2 for r in per.values()) / n
        assert (row["pass"] is not None) == (row["budget"] in (0.1, 0.25))
    for budget, d in result["decisive"].items():
        per = result["search"][budget]
        assert set(d["counts"]) == set(result["sections"])
        assert all(0 <= v <= n for v in d["counts"].values())
        assert sum(d["counts"].values()) == sum(len(r["decisive"]) for r in per.values())
        assert d["on_three"] == sum(v >= 3 for v in d["counts"].values()) <= 15
        for r in per.values():
            # a decisive section is in every optimal set, the smallest among them
            assert set(r["decisive"]) <= set(r["smallest_set"])
            assert r["smallest"] == len(r["smallest_set"])
    # a larger budget affords more sets: the oracle's score cannot fall
    assert all(result["search"][0.25][u]["value"] >= r["value"] - 1e-12
               for u, r in result["search"][0.1].items())
    tagged = sum(v for c in result["decisive_by_tag"].values() for s, v in c.items()
                 if s != "none")
    assert tagged == sum(result["decisive"][0.25]["counts"].values())


def test_larger_profile_counts_add_up(result):
    w = result[0]["larger_profile"]
    assert w["pairs"] > 0 and abs(w["worse"] + w["better"] + w["same"] - 1) < 1e-9
    assert sum(w["worse_by_added_section"].values()) == round(w["worse"] * w["pairs"])
    assert sum(w["better_by_added_section"].values()) == round(w["better"] * w["pairs"])


def test_markdown_starts_with_the_command_and_lists_every_agent(result):
    result = result[0]
    text = markdown(result, "python -m experiments.studies.report --dataset d --split all")
    lines = text.splitlines()
    assert lines[0] == "`python -m experiments.studies.report --dataset d --split all`"
    assert "Optimizer **reference-v1**, **12 problems**" in lines[2]
    assert text.count("PASS") + text.count("FAIL") == 1 + 3 * len(BUDGETS)
    agents = {r["agent"] for r in result["agents"]}
    assert {"oracle", "no-profile", "set:basic", "section:SpeedOfLight"} <= agents
    table = text.split("Every agent")[1].split("\n\n")[1].splitlines()
    assert table[0] == "| agent | 10% | 25% |"
    assert {line.split(" | ")[0].lstrip("| ") for line in table[2:]} == agents
    per_problem = text.split("Per problem")[1].split("\n\n")[1].splitlines()
    assert len(per_problem) == 2 + result["problems"]


def test_main_writes_the_exact_command_first(result, monkeypatch, tmp_path):
    computed = result[0]
    seen = {}

    def fake(dataset, out, budgets, split, optimizer):
        seen.update(dataset=dataset, budgets=budgets, split=split, optimizer=optimizer)
        return computed

    monkeypatch.setattr(report_module, "report", fake)
    argv = ["--dataset", "x.json.gz", "--out", str(tmp_path), "--split", "all",
            "--optimizer", "reference-v1"]
    assert report_module.main(argv) == 0
    first = (tmp_path / "tables.md").read_text().splitlines()[0]
    assert first == f"`python -m experiments.studies.report {' '.join(argv)}`"
    assert seen == {"dataset": "x.json.gz", "budgets": [0.02, 0.05, 0.1, 0.25, 0.5],
                    "split": None, "optimizer": "reference-v1"}
