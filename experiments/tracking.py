"""wandb runs for the commands: one checked way to start one, and one way to end one.

Where a run goes is wandb's to decide where it can: ``WANDB_MODE`` when set; otherwise
wandb's own settings (``wandb online`` / ``wandb offline``) when wandb finds an API key
(``WANDB_API_KEY``, ``~/.netrc`` from ``wandb login``); offline when it finds none (rather
than wandb's prompt for a key, which would stop a long run at its start). The project is
``WANDB_PROJECT``, default ``autoprofiler-env``; ``WANDB_RUN_GROUP``, ``WANDB_NAME``,
``WANDB_JOB_TYPE`` and ``WANDB_TAGS`` name a command's run as wandb's documentation says
(an option such as ``--wandb-group`` wins over them; an experiment's runs per agent and
seed keep their own names).

A command that resumes (``train``, ``learn-tree``, ``experiment``, ``tune``) keeps the id of
each wandb run it starts beside the state it resumes from (:data:`RUN_IDS`: a training's or
a learning's folder, an experiment's, each of its agents' seeds', a tuning study's), and its
resumption goes on in the same wandb run (``resume="allow"``), its config saying
``resumed``: one run per training, not one per interruption. Only a resumption does: where
that state is gone (a finished run learned anew, its folder removed) the command starts a
new wandb run, as it starts anew. Offline, each resumption writes another
``offline-run-*-<id>`` folder of that id; ``wandb sync wandb/offline-run-*-<id>`` uploads
them in order into the one run. A resumption keeps the config its run was started with.
Online, wandb keeps a run's history in step order: what a killed training logged after its
last checkpoint is not replaced when it resumes from that checkpoint. The command's own
checks of its folder come after its wandb run has started: a resumption it refuses (other
settings) marks the run it reopened failed, and a re-run of a finished one that it refuses
leaves a failed run of its own, whose id then stands for the folder.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from contextlib import contextmanager
from pathlib import Path

from autoprofiler_env.errors import AutoProfilerError

RUN_IDS = "wandb.json"
"""Beside the state a command resumes from (its output folder; an experiment agent's seed
folder): the id of each wandb run started there, by job type and name, so that a resumed
command goes on in the same run."""

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
    if "weave" not in sys.modules:  # wandb takes this project's `agents` package for the
        # OpenAI Agents SDK (imported as `agents` too) and suggests installing Weave; set
        # before wandb first reads its settings (set later, wandb warns that its environment
        # changed)
        os.environ.setdefault("WANDB_DISABLE_WEAVE", "true")
    mode = os.environ.get("WANDB_MODE")
    if mode and mode not in _modes():
        raise AutoProfilerError(f"--wandb: WANDB_MODE={mode!r} is not a mode wandb knows: "
                                f"give one of {', '.join(_modes())}, or unset it")
    if mode in ("online", "run", "shared") and not _api_key_configured():
        raise AutoProfilerError(f"--wandb: WANDB_MODE={mode} and wandb finds no API key: "
                                "`wandb login` (or set WANDB_API_KEY), or set "
                                "WANDB_MODE=offline and `wandb sync` later")
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
        from wandb.sdk.lib import wbauth  # wandb >= 0.24.1
    except ImportError:  # an older wandb
        return _key_by_hand()
    from wandb.errors import AuthenticationError

    setup = wandb_setup.singleton()
    if setup is None:
        return _key_by_hand()
    try:
        return wbauth.authenticate_session(host=setup.settings.base_url, source="autoprofiler",
                                           prompt=False, update_session=False) is not None
    except TypeError:  # a wandb before 0.31, whose private lookup takes other arguments
        return _key_by_hand(setup.settings.base_url)
    except AuthenticationError as e:
        raise AutoProfilerError(f"--wandb: the configured wandb key is malformed ({e}): "
                                "`wandb login --relogin`, or set WANDB_MODE=offline") from None


def _key_by_hand(base_url: str | None = None) -> bool:
    """Whether a key is where every wandb looks first: ``WANDB_API_KEY``, or the
    ``~/.netrc`` entry (``NETRC``'s file where set) of its host (``base_url``'s: wandb's
    settings', else ``WANDB_BASE_URL``'s, by default api.wandb.ai; with its port or without)
    that ``wandb login`` writes: for a wandb older than the lookup
    :func:`_api_key_configured` asks (a key there was taken for none: its runs went
    offline, and WANDB_MODE=online was refused)."""
    import netrc
    from urllib.parse import urlparse

    if os.environ.get("WANDB_API_KEY"):
        return True
    url = urlparse(base_url or os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai")
    file = os.environ.get("NETRC") or os.path.expanduser("~/.netrc")  # as wandb names it
    try:
        entries = netrc.netrc(file)
    except (OSError, netrc.NetrcParseError):
        return False
    found = [entries.authenticators(host) for host in (url.netloc, url.hostname) if host]
    return any(entry and entry[2] for entry in found)


def wandb_run(job_type: str, config: dict, group: str | None = None,
              name: str | None = None, alongside: bool = False, *,
              default_group: str | None = None, folder: str | Path | None = None,
              resuming: bool = False):
    """A wandb run of the project (``job_type``: the command; ``group``: the group given
    (an option), else ``WANDB_RUN_GROUP``, else ``default_group``; ``name``: the run's name,
    ``WANDB_NAME`` where set, None for wandb's), where the module docstring says.
    ``alongside``: the process has a run open that goes on (an experiment's, beside its
    agents' trainings; such a run keeps its job type and name); by default wandb finishes a
    process's open run when another starts. ``folder``: where the run's id is kept
    (:data:`RUN_IDS`), beside the state a resumption goes on from; ``resuming``: the caller
    resumes from that state, and the run kept there goes on (else a new one starts, its id
    kept in place of the old)."""
    mode = check_wandb()
    import wandb

    group = group or os.environ.get("WANDB_RUN_GROUP") or default_group
    key = f"{job_type}:{name}"  # before WANDB_NAME or WANDB_JOB_TYPE rename it
    if not alongside:
        name = os.environ.get("WANDB_NAME") or name
        job_type = os.environ.get("WANDB_JOB_TYPE") or job_type
    ids_file = Path(folder) / RUN_IDS if folder is not None else None
    ids = _run_ids(ids_file)
    resumed = resuming and key in ids
    # wandb reads its environment once per process (at its first run): what a later run of
    # the same process is given (its directory, its mode, its project) is passed, not left
    # to that
    # a resumption keeps the config its run was started with (the command goes on only with
    # the same settings; one it refuses leaves that run's config as it was)
    run = wandb.init(project=os.environ.get("WANDB_PROJECT") or PROJECT, job_type=job_type,
                     config={"resumed": True} if resumed else {**config, "resumed": False},
                     group=group, name=name, mode=mode,
                     dir=os.environ.get("WANDB_DIR"),
                     **({"id": ids[key], "resume": "allow"} if resumed else {}),
                     **({"reinit": "create_new"} if alongside else {}))
    if ids_file is not None and not resumed and not run.disabled:
        from autoprofiler_env.atomic import write_atomic

        ids_file.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(ids_file, (json.dumps({**ids, key: run.id}, indent=1) + "\n").encode())
    return run


def _run_ids(path: Path | None) -> dict:
    """The wandb run ids kept in ``path`` (:data:`RUN_IDS`); none where it is missing or is
    not such a file (a damaged one: the runs start anew, with a warning)."""
    if path is None or not path.is_file():
        return {}
    try:
        ids = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(ids, dict) and all(isinstance(v, str) for v in ids.values()):
            return ids
    except (ValueError, OSError):
        pass
    from autoprofiler_env.errors import warn

    warn(f"{path} is not the wandb run ids it should hold: the wandb runs start anew")
    return {}


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


NUMERICS_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS",
                "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
"""The environment variables that choose torch's CPU threads and kernels."""

NUMERICS_ISA = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile")
"""The instruction sets (``/proc/cpuinfo`` flags) whose kernels MKL and ATen choose among."""


def numerics() -> dict:
    """What, besides the versions and the seed, decides a trained model's bits on the CPU
    (``run.json``'s ``numerics``): torch's intra-op threads (one thread and two give other
    models of one seed), the CPU (MKL's matrix products take the code path of its
    instruction set: an AVX-512 machine and an AVX2 one give other models too; MKL_CBWR pins
    it), ATen's kernels' capability, and the variables that set these. A trained model is
    reproduced bit for bit only where all of it is the same."""
    import torch

    cpu = isa = None
    try:  # a virtual machine's model name may say little: its instruction sets too
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = (part.strip() for part in line.partition(":"))
            if key == "model name" and cpu is None:
                cpu = value
            elif key == "flags" and isa is None:
                isa = sorted(f for f in value.split() if f in NUMERICS_ISA)
            if cpu is not None and isa is not None:
                break
    except OSError:
        pass
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001  (an older torch)
        capability = None
    return {"torch_threads": torch.get_num_threads(), "cpu": cpu or platform.processor() or None,
            "cpus": os.cpu_count(),
            "machine": platform.machine(), "isa": isa, "cpu_capability": capability,
            "env": {k: os.environ[k] for k in NUMERICS_ENV if k in os.environ}}
