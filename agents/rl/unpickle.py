"""A saved stable-baselines3 model read without running code from it.

SB3 keeps a model's classes, spaces and schedules in its ``data`` as cloudpickle pickles,
and ``Algorithm.load`` unpickles them: a model file can run any code when it is loaded
(a pickle's ``__reduce__``). The weights themselves are read with ``torch.load(...,
weights_only=True)``. :func:`safe_objects` reads each pickled entry with an unpickler that
builds only what SB3 and sb3-contrib save there (gymnasium spaces, numpy arrays and
generators, SB3's schedules; SB3's policy and buffer classes and torch's optimizer and
module classes as values, never called) and refuses anything else; the entries are then
handed to ``load`` as its ``custom_objects``, so that SB3 unpickles none of them. A
schedule saved as a function (an older SB3's or rl-baselines3-zoo's closures) is not read:
a model loaded so predicts, and is not trained further (its schedules give 0).

Only what is named may be called or given state: a pickle of allowed classes could otherwise
build an instance of one and call it (a review built a torch ``InterpreterModule`` from plain
modules and had it write a file and run code through torch.fx, 2026-12-07).
"""

from __future__ import annotations

import base64
import functools
import importlib
import io
import json
import pickle
import sys
import warnings
import zipfile
from pathlib import Path

from autoprofiler_env.errors import AutoProfilerError

SCHEDULES = frozenset({"learning_rate", "lr_schedule", "clip_range", "clip_range_vf",
                       "exploration_schedule"})
"""The entries that hold a schedule: one saved as a function is replaced by :class:`Unread`
(prediction does not call them; SB3 calls ``lr_schedule(1)`` once, building the policy's
optimizer, whose state the saved one replaces)."""

_CALLS = frozenset({
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
    ("numpy.random._sfc64", "SFC64"), ("numpy.random._generator", "Generator"),
    ("numpy.random.mtrand", "RandomState"),
    *(("gymnasium.spaces." + module, name) for module, name in (
        ("box", "Box"), ("discrete", "Discrete"), ("multi_binary", "MultiBinary"),
        ("multi_discrete", "MultiDiscrete"), ("dict", "Dict"), ("tuple", "Tuple"))),
    ("stable_baselines3.common.utils", "ConstantSchedule"),
    ("stable_baselines3.common.utils", "FloatSchedule"),
    ("stable_baselines3.common.utils", "LinearSchedule"),
    ("stable_baselines3.common.type_aliases", "TrainFreq"),
    ("stable_baselines3.common.type_aliases", "TrainFrequencyUnit"),
    ("agents.rl.config", "LinearSchedule"),
})
"""The functions and classes a saved model's entries are built by calling (and the only
objects a pickle may call, or give state to an instance of): containers, numpy's arrays,
scalars and random generators, gymnasium's spaces, SB3's schedules and train frequency,
this project's ``lin_<x>`` schedule."""


def _value_class(module: str, name: str) -> bool:
    """A class a saved model names as a value only (never called, never given state): a
    policy or a buffer class of SB3 or sb3-contrib, torch's optimizer and module classes
    (``policy_kwargs``' ``optimizer_class``, ``activation_fn``)."""
    if module.split(".")[0] not in ("stable_baselines3", "sb3_contrib", "torch"):
        return False
    loaded = sys.modules.get(module)  # imported already (the algorithms, torch): a name in
    value = getattr(loaded, name, None)  # a pickle imports nothing (a module's own code)
    import torch
    from stable_baselines3.common.buffers import BaseBuffer
    from stable_baselines3.common.policies import BasePolicy

    return isinstance(value, type) and issubclass(
        value, (BasePolicy, BaseBuffer, torch.optim.Optimizer, torch.nn.Module))


@functools.cache
def _resolved() -> tuple[tuple, tuple[type, ...]]:
    """:data:`_CALLS`' objects (those this numpy has: ``numpy.core`` is ``numpy._core``'s
    deprecated alias in numpy 2), and the classes among them."""
    calls = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for module, name in sorted(_CALLS):
            try:
                calls.append(getattr(importlib.import_module(module), name))
            except (ImportError, AttributeError):
                pass
    return tuple(calls), tuple(c for c in calls if isinstance(c, type))


class RefusedGlobal(Exception):
    """An entry names, calls or gives state to what :func:`safe_objects` does not build."""


def _described(value) -> str:
    kind = value if isinstance(value, type) else type(value)
    return f"{kind.__module__}.{kind.__qualname__}" + ("" if kind is value else " instance")


class _Unpickler(pickle._Unpickler):
    """Python's own unpickler, restricted: a global is one of :data:`_CALLS` or a value
    class (:func:`_value_class`); a call (``REDUCE``, ``NEWOBJ``) only of :data:`_CALLS`
    (never of an instance a pickle built, nor of a value class); state (``BUILD``) only
    for an instance of one of them; the older opcodes that call (``INST``, ``OBJ``) never.
    Pure Python, so that every opcode passes through these checks (the C unpickler calls
    ``find_class`` alone)."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, file) -> None:
        super().__init__(file)
        self.calls, self.kinds = _resolved()

    def find_class(self, module: str, name: str):
        if (module, name) in _CALLS or _value_class(module, name):
            return super().find_class(module, name)
        raise RefusedGlobal(f"{module}.{name}")

    def _callable(self, value) -> None:
        if not any(value is c for c in self.calls):
            raise RefusedGlobal(f"a call of {_described(value)}")

    def load_reduce(self) -> None:
        self._callable(self.stack[-2])
        super().load_reduce()

    def load_newobj(self) -> None:
        self._callable(self.stack[-2])
        super().load_newobj()

    def load_newobj_ex(self) -> None:
        self._callable(self.stack[-3])
        super().load_newobj_ex()

    def load_build(self) -> None:
        target = self.stack[-2]
        if isinstance(target, type) or not isinstance(target, self.kinds):
            raise RefusedGlobal(f"state given to {_described(target)}")
        super().load_build()

    def load_refused(self) -> None:
        raise RefusedGlobal("a protocol 0/1 call (INST, OBJ)")

    dispatch[pickle.REDUCE[0]] = load_reduce
    dispatch[pickle.NEWOBJ[0]] = load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex
    dispatch[pickle.BUILD[0]] = load_build
    dispatch[pickle.INST[0]] = load_refused
    dispatch[pickle.OBJ[0]] = load_refused


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
        except Exception as e:  # noqa: BLE001  (a damaged or hostile pickle: anything)
            raise AutoProfilerError(f"{path}: its {key!r} cannot be read ({type(e).__name__}"
                                    f": {e}): a damaged model file") from None
    return objects
