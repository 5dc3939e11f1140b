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
    if not os.environ.get("WANDB_API_KEY") and not os.environ.get("WANDB_MODE"):
        os.environ["WANDB_MODE"] = "offline"
    return wandb.init(project="autoprofiler-env", job_type=job_type, config=config,
                      group=group)
