"""A saved stable-baselines3 model read without running code from it.

SB3 keeps a model's classes, spaces and schedules in its ``data`` as cloudpickle pickles,
and ``Algorithm.load`` unpickles them: a model file can run any code when it is loaded
(a pickle's ``__reduce__``). The weights themselves are read with ``torch.load(...,
weights_only=True)``. :func:`safe_objects` reads each pickled entry with an unpickler that
builds only what SB3 and sb3-contrib save there (gymnasium spaces, numpy arrays and
generators, SB3's policy, buffer and schedule classes, torch's optimizer and module
classes) and refuses any other global; the entries are then handed to ``load`` as its
``custom_objects``, so that SB3 unpickles none of them. A schedule saved as a function (an
older SB3's or rl-baselines3-zoo's closures) is not read: a model loaded so predicts, and
is not trained further (its schedules give 0).
"""

from __future__ import annotations

import base64
import binascii
import importlib
import io
import json
import pickle
import zipfile
from pathlib import Path

from autoprofiler_env.errors import AutoProfilerError

SCHEDULES = frozenset({"learning_rate", "lr_schedule", "clip_range", "clip_range_vf",
                       "exploration_schedule"})
"""The entries that hold a schedule: one saved as a function is replaced by :class:`Unread`
(prediction does not call them; SB3 calls ``lr_schedule(1)`` once, building the policy's
optimizer, whose state the saved one replaces)."""

_GLOBALS = frozenset({
    ("collections", "OrderedDict"), ("collections", "deque"),
    ("numpy", "dtype"), ("numpy", "ndarray"),
    ("numpy._core.multiarray", "scalar"), ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.numeric", "_frombuffer"), ("numpy.core.numeric", "_frombuffer"),
    ("numpy.random._pickle", "__bit_generator_ctor"),
    ("numpy.random._pickle", "__generator_ctor"),
    ("numpy.random._pickle", "__randomstate_ctor"),
    ("numpy.random.bit_generator", "SeedSequence"),
    ("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence"),
    ("numpy.random._pcg64", "PCG64"), ("numpy.random._pcg64", "PCG64DXSM"),
    ("numpy.random._mt19937", "MT19937"), ("numpy.random._philox", "Philox"),
    ("numpy.random._sfc64", "SFC64"),
    ("agents.rl.config", "LinearSchedule"),
})
"""The functions and classes, besides :func:`_allowed_class`'s, that a saved model's
entries are built with: containers, numpy's arrays, scalars and random generators, and this
project's ``lin_<x>`` schedule."""


def _bases() -> tuple[type, ...]:
    import gymnasium
    import torch
    from stable_baselines3.common import type_aliases, utils
    from stable_baselines3.common.buffers import BaseBuffer
    from stable_baselines3.common.policies import BasePolicy

    schedules = tuple(getattr(utils, n) for n in ("ConstantSchedule", "FloatSchedule",
                                                  "LinearSchedule") if hasattr(utils, n))
    return (gymnasium.spaces.Space, BasePolicy, BaseBuffer, torch.optim.Optimizer,
            torch.nn.Module, type_aliases.TrainFreq, type_aliases.TrainFrequencyUnit,
            *schedules)


def _allowed_class(module: str, name: str) -> bool:
    """A class of gymnasium, SB3, sb3-contrib or torch of the kinds a saved model holds
    (:func:`_bases`): a space, a policy, a buffer, a schedule, an optimizer, a module."""
    if module.split(".")[0] not in ("gymnasium", "stable_baselines3", "sb3_contrib", "torch"):
        return False
    try:
        value = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return False
    return isinstance(value, type) and issubclass(value, _bases())


class RefusedGlobal(Exception):
    """An entry names a function or class that :func:`safe_objects` does not build."""


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) in _GLOBALS or _allowed_class(module, name):
            return super().find_class(module, name)
        raise RefusedGlobal(f"{module}.{name}")


class Unread:
    """A schedule saved as a function, not read (:data:`SCHEDULES`): gives 0."""

    def __init__(self, key: str) -> None:
        self.key = key

    def __call__(self, progress_remaining: float) -> float:
        return 0.0

    def __repr__(self) -> str:
        return f"Unread({self.key!r})"


def safe_objects(path: str | Path) -> dict:
    """Every pickled entry of the model file ``path``'s ``data``, built without running
    code from it: ``load``'s ``custom_objects``. An entry that names anything else is an
    error saying what, and how to load it where the file is trusted."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as archive:
            data = json.loads(archive.read("data"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as e:
        raise AutoProfilerError(f"{path}: not a stable-baselines3 model file ({e})") from e
    if not isinstance(data, dict):
        raise AutoProfilerError(f"{path}: not a stable-baselines3 model file (its data is "
                                "not a mapping)")
    objects = {}
    for key, item in data.items():
        if not (isinstance(item, dict) and ":serialized:" in item):
            continue
        try:
            raw = base64.b64decode(str(item[":serialized:"]).encode(), validate=True)
            objects[key] = _Unpickler(io.BytesIO(raw)).load()
        except RefusedGlobal as e:
            if key in SCHEDULES:
                objects[key] = Unread(key)
                continue
            raise AutoProfilerError(
                f"{path}: its {key!r} is pickled with {e}, which a model file is not "
                "trusted to run (a pickle can run any code when it is loaded): where you "
                "trust the file, load it with stable-baselines3 itself and save the policy "
                "with only SB3's own classes") from None
        except (pickle.UnpicklingError, binascii.Error, ValueError, TypeError, EOFError,
                AttributeError, IndexError, KeyError, RecursionError, MemoryError) as e:
            raise AutoProfilerError(f"{path}: its {key!r} cannot be read ({type(e).__name__}"
                                    f": {e}): a damaged model file") from None
    return objects
