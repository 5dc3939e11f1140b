"""wandb runs for the commands: one way to start one (offline when no key is configured)."""

from __future__ import annotations

import os


def wandb_run(job_type: str, config: dict, group: str | None = None):
    """A wandb run of the project (``job_type``: the command; ``group``: the experiment it
    belongs to, None for none), offline unless ``WANDB_API_KEY`` or ``WANDB_MODE`` says
    otherwise."""
    try:
        import wandb
    except ImportError as e:
        raise SystemExit("wandb is not installed; autoprofiler-env requires it: reinstall it "
                         "with `pip install -e .`") from e
    mode = os.environ.get("WANDB_MODE") or (None if os.environ.get("WANDB_API_KEY")
                                            else "offline")
    # wandb reads its environment once per process (at its first run): what a later run of
    # the same process is given (its directory, its mode) is passed, not left to that
    return wandb.init(project="autoprofiler-env", job_type=job_type, config=config,
                      group=group, mode=mode, dir=os.environ.get("WANDB_DIR"))
