"""wandb runs of one process: each lands where its environment says, with its group."""

from experiments.tracking import wandb_run
from experiments.wandb_offline import read_offline_run


def test_two_runs_of_one_process_each_land_in_their_own_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    for name, group in (("first", None), ("second", "g2")):
        monkeypatch.setenv("WANDB_DIR", str(tmp_path / name))
        run = wandb_run("test", {"name": name}, group=group)
        run.log({"x": 1.0})
        run.finish()
        runs = list((tmp_path / name / "wandb").glob("offline-run-*"))
        assert len(runs) == 1, f"{name}: {list(tmp_path.rglob('offline-run-*'))}"
        logged = read_offline_run(runs[0])
        assert (logged.group, logged.job_type, logged.config["name"]) == (group or "", "test",
                                                                          name)
        assert logged.curve("x") == [(0, 1.0)]
