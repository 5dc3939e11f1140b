"""wandb runs for the commands: one checked way to start one, and one way to end one.

Where a run goes is wandb's to decide where it can: ``WANDB_MODE`` when set; otherwise
wandb's own settings (``wandb online`` / ``wandb offline``) when wandb finds an API key
(``WANDB_API_KEY``, ``~/.netrc`` from ``wandb login``); offline when it finds none (rather
than wandb's prompt for a key, which would stop a long run at its start). The project is
``WANDB_PROJECT``, default ``autoprofiler-env``.
"""

from __future__ import annotations

import os
import platform
import sys
from contextlib import contextmanager

from autoprofiler_env.errors import AutoProfilerError

PROJECT = "autoprofiler-env"
MODES = ("online", "offline", "shared", "disabled", "dryrun", "run")
"""The modes wandb accepts (its ``Settings.mode``), where wandb does not say itself."""


def check_wandb() -> str | None:
    """Raises an :class:`AutoProfilerError` saying what to do where ``--wandb`` could not
    log: wandb not importable, or ``WANDB_MODE`` not a mode wandb knows. A command that takes
    ``--wandb`` calls this first, so the error comes before its work, not after. Returns the
    mode to start a run in (:func:`wandb_mode`)."""
    try:
        import wandb  # noqa: F401
    except ImportError as e:
        raise AutoProfilerError(f"--wandb: wandb cannot be imported ({e}): install it "
                                "(`pip install wandb`; autoprofiler-env depends on it), or "
                                "leave out --wandb") from None
    mode = os.environ.get("WANDB_MODE")
    if mode and mode not in _modes():
        raise AutoProfilerError(f"--wandb: WANDB_MODE={mode!r} is not a mode wandb knows: "
                                f"give one of {', '.join(_modes())}, or unset it")
    return wandb_mode()  # a configured key of a malformed format: said now


def _modes() -> tuple[str, ...]:
    try:
        from typing import get_args

        from wandb.sdk.wandb_settings import Settings

        return get_args(Settings.model_fields["mode"].annotation) or MODES
    except (ImportError, AttributeError, KeyError):
        return MODES


def wandb_mode() -> str | None:
    """The mode to start a run in: ``WANDB_MODE`` if set; None (wandb decides, from its
    settings) where wandb finds an API key; ``offline`` where it finds none."""
    return os.environ.get("WANDB_MODE") or (None if _api_key_configured() else "offline")


def _api_key_configured() -> bool:
    """Whether wandb finds credentials for its server, as ``wandb.init`` looks them up
    (the environment, ``~/.netrc``, its settings), without asking the server or prompting."""
    from wandb.sdk import wandb_setup

    try:
        from wandb.sdk.lib import wbauth  # wandb >= 0.22
    except ImportError:  # an older wandb: its key in the environment only
        return bool(os.environ.get("WANDB_API_KEY"))
    from wandb.errors import AuthenticationError

    host = wandb_setup.singleton().settings.base_url
    try:
        return wbauth.authenticate_session(host=host, source="autoprofiler", prompt=False,
                                           update_session=False) is not None
    except TypeError:  # a wandb whose private lookup takes other arguments
        return bool(os.environ.get("WANDB_API_KEY"))
    except AuthenticationError as e:
        raise AutoProfilerError(f"--wandb: the configured wandb key is malformed ({e}): "
                                "`wandb login --relogin`, or set WANDB_MODE=offline") from None


def wandb_run(job_type: str, config: dict, group: str | None = None,
              name: str | None = None, alongside: bool = False):
    """A wandb run of the project (``job_type``: the command; ``group``: the experiment it
    belongs to, None for none; ``name``: the run's name, None for wandb's), where the module
    docstring says. ``alongside``: the process has a run open that goes on (an experiment's,
    beside its agents' trainings); by default wandb finishes a process's open run when
    another starts."""
    mode = check_wandb()
    import wandb

    if "weave" not in sys.modules:  # wandb takes this project's `agents` package for the
        # OpenAI Agents SDK (imported as `agents` too) and suggests installing Weave
        os.environ.setdefault("WANDB_DISABLE_WEAVE", "true")

    # wandb reads its environment once per process (at its first run): what a later run of
    # the same process is given (its directory, its mode, its project) is passed, not left
    # to that
    return wandb.init(project=os.environ.get("WANDB_PROJECT") or PROJECT, job_type=job_type,
                      config=config, group=group, name=name, mode=mode,
                      dir=os.environ.get("WANDB_DIR"),
                      **({"reinit": "create_new"} if alongside else {}))


@contextmanager
def finishing(run):
    """Finishes ``run`` (None: no run) as the block ends: with exit code 0 when it ends
    normally, 1 when it raises (Ctrl-C included, and any ``SystemExit``: the commands return
    their exit code rather than raise it), so that wandb marks a failed or interrupted run
    failed rather than finished."""
    if run is None:
        yield None
        return
    try:
        yield run
    except BaseException:
        run.finish(exit_code=1)
        raise
    run.finish(exit_code=0)


def dataset_sha256(dataset: str | None) -> str | None:
    """The sha256 of the dataset that ``dataset`` names (None: the default), for a run's
    config."""
    from autoprofiler_env.dataset import Dataset

    return Dataset.load(dataset).metadata.get("sha256")


def versions() -> dict:
    """The versions a run's results depend on (``run.json``'s, a wandb run's config)."""
    from importlib import metadata

    found = {"python": platform.python_version()}
    for name in ("autoprofiler-env", "stable-baselines3", "sb3-contrib", "gymnasium",
                 "torch", "numpy"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found
