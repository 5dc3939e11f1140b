"""The machine a recording is made on (:func:`machine_info`, stored with each reference and
candidate row) and the deadline a recording stops by."""

from __future__ import annotations

import platform
import time


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


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() > deadline
