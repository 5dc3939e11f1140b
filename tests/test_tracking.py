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
        logged = read_offline_run(runs[0], wait_s=30)
        assert logged.finished
        assert (logged.group, logged.job_type, logged.config["name"]) == (group or "", "test",
                                                                          name)
        assert logged.curve("x") == [(0, 1.0)]


def test_a_run_still_being_written_is_read_as_far_as_written_after_the_wait(tmp_path,
                                                                            monkeypatch):
    """wandb's service can still be flushing the file when finish() returns: the reader
    waits for the exit record, and past ``wait_s`` gives the run as far as written."""
    import time

    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    run = wandb_run("test", {"name": "partial"}, group="g")
    run.log({"x": 1.0})
    run.finish()
    (written,) = (tmp_path / "wandb").glob("offline-run-*/*.wandb")
    whole = read_offline_run(written, wait_s=30)
    assert whole.finished and whole.group == "g"
    head = tmp_path / "head.wandb"
    head.write_bytes(written.read_bytes()[:1024])  # its first records, no exit record yet
    started = time.monotonic()
    partial = read_offline_run(head, wait_s=0.5)
    assert not partial.finished and 0.5 <= time.monotonic() - started < 10
