"""The machine a recording is made on (:func:`machine_info`, stored with each reference and
candidate row), what a recording call checks before it records (:func:`preflight`: this
machine can, and is the recording's), and the deadline a recording stops by."""

from __future__ import annotations

import platform
import sys
import time
from pathlib import Path

from autoprofiler_env.errors import MachineError

SAME_MACHINE = ("device", "gpu", "torch")
"""What makes rows one machine's: a recording's rows, and a reused candidate row with this
machine's (as a dataset's build asks of its reference timings)."""
LOGS = ("reference.jsonl", "candidates.jsonl")
"""A recording's logs whose rows name their machine (:func:`machine_info`)."""
DONE_LOGS = (*LOGS, "llm.jsonl", "llm_replies.jsonl")
"""A recording's logs whose rows are work done: a line lost from one is work done again."""


class OtherMachineError(MachineError):
    """Rows of one machine asked to go into a recording made on another (a ``--device cpu``
    pipeline check into a GPU's recording, another GPU, another torch): a recording's rows
    are one machine's, its times and verdicts too, and a row of another would pass for done."""


def machine_info(device: str) -> dict:
    """The versions and the device a recording was made with; a
    :class:`~autoprofiler_env.errors.MachineError` where ``device`` is a CUDA device that
    torch does not see."""
    import torch

    info = {"torch": torch.__version__, "python": platform.python_version(), "device": device}
    if device.startswith("cuda"):
        from autoprofiler_env.envs.backends.live import require_cuda

        require_cuda(device, f"recording on --device {device} needs a CUDA GPU",
                     "record on a GPU machine (docs/dataset.md), or try the pipeline with "
                     "--device cpu")
        props = torch.cuda.get_device_properties(device)
        info.update(gpu=props.name, cuda=torch.version.cuda,
                    sm_count=props.multi_processor_count,
                    memory_gb=round(props.total_memory / 2**30, 1))
        try:
            import triton

            info["triton"] = triton.__version__
        except ImportError:
            pass
    return info


def machine_of(row: dict) -> tuple | None:
    """A row's machine (:data:`SAME_MACHINE`), None where it names none (a row written by
    hand, or before rows named it)."""
    if not any(k in row for k in SAME_MACHINE):
        return None
    return tuple(row.get(k) for k in SAME_MACHINE)


def describe(machine: tuple) -> str:
    """``device cuda, GPU NVIDIA H200, torch 2.11.0+cu130``."""
    device, gpu, torch = machine
    return ", ".join([f"device {device}", *([f"GPU {gpu}"] if gpu else []), f"torch {torch}"])


def machines(paths) -> dict[tuple, str]:
    """The machines the rows of ``paths`` (JSON-lines logs) were made on, each with where
    its first row is (``reference.jsonl: problem://...``)."""
    from autoprofiler_env.jsonlines import read_jsonl

    found: dict[tuple, str] = {}
    for path in paths:
        for row in read_jsonl(Path(path)):
            machine = machine_of(row)
            if machine is not None and machine not in found:
                found[machine] = f"{Path(path).name}: {row.get('uri')}"
    return found


def check_machine(paths, info: dict, where: Path) -> None:
    """Refuses to add this machine's rows (``info``: :func:`machine_info`) to logs whose rows
    were made on another, or on several (``where``: the recording, for the message).

    Raises:
        OtherMachineError: naming both machines, and what to do.
    """
    found = machines(paths)
    here = machine_of(info)
    if len(found) > 1:
        said = "; ".join(f"{describe(m)} ({first})" for m, first in found.items())
        raise OtherMachineError(
            f"{where} holds rows of {len(found)} machines ({said}): a recording is one "
            "machine's; remove the other machines' rows, or record this machine's into "
            "another --out")
    if found and here not in found:
        (machine, first), = found.items()
        raise OtherMachineError(
            f"{where} was recorded on {describe(machine)} ({first}); this is "
            f"{describe(here)}: a recording's rows are one machine's, and another's would "
            "pass for done; record this machine's into another --out")


def preflight(out: Path, device: str | None, ncu: bool = False) -> None:
    """What a recording call checks before it records anything, so that a refusal leaves
    ``out`` as it was (no folder made, no line logged): where the rows are made here
    (``device``; None where they are made elsewhere, on a Ray cluster), that this machine
    can record on ``device`` and that the recording's rows are this machine's
    (:func:`check_machine`); with ``ncu`` (an ncu part has work to do), that ncu is here.
    Then it says which lines of the recording's logs no kill explains: the work they held is
    done again (:func:`say_damaged`).

    Raises:
        MachineError: no CUDA device for ``device``; :class:`OtherMachineError`.
        NcuNotFoundError: ``ncu`` and no ncu.
    """
    out = Path(out)
    if device is not None:
        check_machine([out / name for name in LOGS], machine_info(device), out)
    if ncu:
        from autoprofiler_env.profiler import runner

        runner.find_ncu()
    say_damaged(out)


def say_damaged(out: Path) -> None:
    """One line on stderr per log of the recording that holds lines no kill explains (torn
    inside the file, or not a JSON record: :func:`~autoprofiler_env.jsonlines.scan_jsonl`):
    the file, the lines, and that their work counts as not done."""
    from autoprofiler_env.jsonlines import scan_jsonl

    for path in (Path(out) / name for name in DONE_LOGS):
        damaged = scan_jsonl(path).damaged
        if damaged:
            shown = ", ".join(map(str, damaged[:10])) + (", ..." if len(damaged) > 10 else "")
            many = len(damaged) > 1
            say(f"{path}: line{'s' if many else ''} {shown} "
                f"{'are not whole records' if many else 'is not a whole record'} (cut off "
                f"inside the file, or not JSON): what {'they' if many else 'it'} held counts "
                "as not done and is recorded again; check the file")


def say(message: str) -> None:
    """A line for the user on stderr, between the progress bars."""
    from tqdm import tqdm

    tqdm.write(f"autoprofiler: {message}", file=sys.stderr)


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() > deadline
