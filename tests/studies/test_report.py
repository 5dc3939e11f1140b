"""The data report's mechanics, on the small real dataset of the profiler study's 12 problems."""

from experiments.studies.report import report


def test_report_tables_and_figures(study_dataset, tmp_path):
    result = report(str(study_dataset), tmp_path, [0.25, 1.0], split="train")
    for row in result["oracle_vs_fixed"]:
        assert row["best_candidate"] >= row["oracle"] >= row["best_fixed"] - 1e-12
    w = result["larger_profile"]
    assert w["pairs"] > 0 and abs(w["worse"] + w["better"] + w["same"] - 1) < 1e-9
    assert result["decisive"]
    for path in result["figures"]:
        assert (tmp_path / path.rsplit("/", 1)[1]).stat().st_size > 10_000


def test_report_markdown_lists_every_agent_at_every_budget(study_dataset, tmp_path):
    from experiments.studies.report import markdown

    result = report(str(study_dataset), tmp_path, [0.25, 1.0], split="train")
    text = markdown(result, str(study_dataset), "train")
    agents = {r["agent"] for r in result["agents"]}
    assert {"oracle", "no-profile", "set:basic", "section:SpeedOfLight"} <= agents
    table = text.split("Every agent")[1].split("\n\n")[1].splitlines()
    assert table[0] == "| agent | 25% | 100% |"
    assert {line.split(" | ")[0].lstrip("| ") for line in table[2:]} == agents
