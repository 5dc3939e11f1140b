"""What runs inside a worker process: the reference's or one candidate's, never both.

A worker is started by :mod:`autoprofiler_env.harness.process`, which runs :func:`main` with
``--role reference|candidate``. The reference's
worker imports the problem and builds ``Model``; a candidate's worker (sandboxed first:
:mod:`.sandbox`) imports the problem, for its inputs, and the candidate's source, and builds
``ModelNew``. Both answer the same requests with the same code, so that the reference and the
candidate are run and timed by one procedure:

- ``load``: import and build;
- ``outputs``: the outputs for one input set, made from a seed the judge chose;
- ``warmup``: run for a while, report the time per call (sizes the timed batches only);
- ``time``: a batch of timed calls, each on a fresh input set made from its own seed (the
  sets made before the calls), with an L2 flush before each call on a GPU; the outputs of
  the calls the judge named are snapshotted when ``forward`` returns and checked for
  changes after a device-wide synchronize; ``samples`` then hands those snapshots over
  (of a tensor larger than the judge's ``count``, the values at ``count`` positions drawn
  from the judge's ``seed``, chosen after the calls, and its shape).

Nothing the candidate's worker says about correctness is believed: it hands over raw outputs
and times, which the judge (:mod:`.evaluator`) compares and checks against its own clock.

Two checks run in the worker, in both roles alike (outside the timed region): every output
leaf of every correctness and timed call must be a plain tensor (:meth:`Runner._plain`: a
subclass can put off its work until its values are read, after the timer stops), and before
any input set is made and again before each reply, what makes the inputs, reads the outputs
and sends the replies must be as it was before the candidate's code ran (:class:`Guard`),
since all of it happens in this process, untimed. The guard raises the bar; it cannot make
a process that runs the candidate's code trustworthy (docs/harness.md, "What the judge does
not stop"): the judge's own checks are what hold.
"""

from __future__ import annotations

import argparse
import builtins
import collections
import gc
import importlib.util
import math
import os
import sys
import threading
import time
import traceback
import types
from pathlib import Path

_CUDA_ERROR_MARKS = ("CUDA error", "illegal memory access", "device-side assert",
                     "CUBLAS_STATUS", "CUDNN_STATUS", "unspecified launch failure")


CPU_THREADS = 1
"""torch's threads in a worker judging on a CPU, unless ``OMP_NUM_THREADS`` says otherwise:
the reference's and the candidate's calls alternate with the judge's own work, and on a
shared machine torch's default (a thread per core, each spinning while it waits) turned an
identical candidate's 1.0x into anything from 0.012x to 77.5x over five runs on 2 busy cores
(0.87-1.09x with one thread; docs/harness.md). A GPU's workers keep torch's default."""

PREGEN_BYTES = 2 << 30
"""A timed batch's input sets are made before its first timed call, at most this many bytes
of them at a time (a larger batch is timed in chunks, each made before its first call)."""


class CudaContextLost(Exception):
    """A CUDA error after which this process cannot use the GPU again."""


class StageError(Exception):
    """The candidate (or the problem) failed at a stage: import, no_model_new, init, runtime."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage


def _is_cuda_error(e: BaseException) -> bool:
    return any(mark in str(e) for mark in _CUDA_ERROR_MARKS)


def out_of_memory(e: BaseException | None) -> bool:
    """Whether ``e`` is torch's out-of-memory error (torch imported only then): in a worker,
    and in the judge's own process."""
    import torch

    return isinstance(e, torch.OutOfMemoryError)


RETURN_SLACK_BYTES = 1 << 30
"""A process of the judge holding more than this many bytes of GPU memory cached by torch's
allocator and not in use returns them to the device (:func:`return_cached`)."""


def return_cached(device: str | None) -> bool:
    """Returns to the device the GPU memory that torch's allocator holds in this process
    but no tensor uses, where that exceeds :data:`RETURN_SLACK_BYTES`; whether it did. Three
    processes share a GPU while a candidate is judged (the judge's, the reference's, the
    candidate's), and each one's allocator keeps the blocks of the largest outputs it has
    handled: on KernelBench's ``level1/87`` (8.6 GB outputs) the judge's and the reference's
    held 93 GiB between them beside the candidate's 44.6 GiB, where the tensors they needed
    then (a kept output set, the reference's input and output, two snapshots) come to about
    40 GB by count, and honest ``tf32`` candidates of it and of ``level1/63`` ran out of the
    H200's memory in their re-checks with the warm workers stopped (2026-12-04). Off a
    GPU (``device`` None or the CPU) nothing is done; torch is imported only on a GPU."""
    if device is None or not device.startswith("cuda"):
        return False
    import torch

    if torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device) \
            <= RETURN_SLACK_BYTES:
        return False
    torch.cuda.empty_cache()
    return True


def _one_line(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    return text[0] if len(text) == 1 else f"{text[0]} ... {text[-1]}"[:500]


class Auditor:
    """Records what a candidate does that the sandbox forbids (a write outside its folders, an
    internet socket) through Python's audit hooks, which cannot be removed once added. The OS
    isolation stops the act itself where it is available; this makes it a verdict.

    A search of the process's live objects (``gc.get_objects`` / ``get_referrers`` /
    ``get_referents``, ``sys._current_frames``) is refused outright, not only recorded: it is
    how a candidate reaches the worker's pipe and its :class:`Guard` (the static check rejects
    ``import gc``, but not ``importlib.import_module("g" + "c")``); neither torch nor triton
    calls them outside debugging tools. Not refused: the worker's frames
    (``sys._getframe``, which torch.compile reads) and the collector's lists walked through
    ``ctypes``, which no audit event can refuse: a ``ctypes.Union`` of an address and a
    pointer reads memory without raising one (docs/harness.md, "What the judge does not
    stop")."""

    SEARCH_EVENTS = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents",
                               "sys._current_frames"})

    _WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    _FS_EVENTS = frozenset({"os.remove", "os.rmdir", "os.rename", "os.replace",
                            "shutil.rmtree", "os.truncate", "os.chmod", "os.chown", "os.link",
                            "os.symlink", "os.mkdir"})

    def __init__(self, allowed: list[str]) -> None:
        self.allowed = [os.path.realpath(p) for p in allowed] + ["/dev/null", "/dev/shm"]
        self.violations: list[str] = []
        self.active = False

    def hook(self):
        """What to add with ``sys.addaudithook``: this auditor (its state shared), called
        through a class of its own whose methods are copies made now, bound to a copy of this
        module's names. A candidate that reaches :class:`Auditor` (the module imported by a
        built name) and replaces its ``__call__``, or the code of it, changes nothing the hook
        runs (it did: gc's searches came back, and the guard was blinded)."""
        names = dict(vars(sys.modules[__name__]))

        def private(value):
            if not isinstance(value, types.FunctionType):
                return value
            return types.FunctionType(value.__code__, names, value.__name__,
                                      value.__defaults__, value.__closure__)

        members = {k: private(v) for k, v in vars(Auditor).items()
                   if k not in ("__dict__", "__weakref__")}
        twin = object.__new__(type("AuditHook", (), members))
        twin.__dict__ = self.__dict__  # the same violations, allowed folders, active flag
        return twin

    def _outside(self, path) -> str | None:
        if isinstance(path, int):
            return None
        try:
            real = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return None
        if any(real == a or real.startswith(a.rstrip("/") + "/") for a in self.allowed):
            return None
        return real

    def __call__(self, event: str, args: tuple) -> None:
        if not self.active:
            return
        if event in self.SEARCH_EVENTS:
            if len(self.violations) <= 20:
                self.violations.append(f"called {event} (a search of the worker's objects)")
            raise PermissionError(f"{event} is refused while a candidate is judged: the "
                                  "worker's objects are not the candidate's to search")
        if len(self.violations) > 20:
            return
        if event == "open" and len(args) >= 3:
            path, mode, flags = args[0], args[1], args[2]
            writing = (any(c in mode for c in "wax+") if isinstance(mode, str)
                       else isinstance(flags, int) and bool(flags & self._WRITE_FLAGS))
            where = self._outside(path) if writing else None
            if where:
                self.violations.append(f"opened {where} for writing")
        elif event in self._FS_EVENTS and args:
            where = self._outside(args[0])
            if where:
                self.violations.append(f"{event} on {where}")
        elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
            sock = args[0] if args else None
            family = getattr(sock, "family", None)
            if family is not None and int(family) in (2, 10):  # AF_INET, AF_INET6
                self.violations.append(f"{event} to {args[1] if len(args) > 1 else '?'}")


def _names(code: types.CodeType) -> set[str]:
    """The names a code object reads (globals, attributes), its nested functions' included."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


UNWATCHED = frozenset({"__warningregistry__", "manual_seed"})
"""Names the :class:`Guard` leaves alone: Python adds ``__warningregistry__`` to a module the
first time a warning is attributed to its code (``level3/28_VisionTransformer``'s
``nn.TransformerEncoder`` warns from its ``Model.__init__``), and importing ``torch._dynamo``
(any ``torch.compile``) rewraps ``torch.manual_seed``, which the worker seeds through the
generators themselves."""

WORKER_CALLS = {"torch": ("get_rng_state", "set_rng_state", "equal", "no_grad", "device",
                          "empty", "randint", "Generator"),
                "torch.cuda": ("manual_seed", "get_rng_state", "set_rng_state", "synchronize",
                               "Event", "mem_get_info", "empty_cache", "device"),
                "torch.utils._pytree": ("tree_flatten",)}
"""What the worker itself calls from Python around the inputs and the outputs (besides
``torch.Tensor``'s methods and ``torch.device``'s context, watched whole)."""


GUARD_READS = {"sys": ("gettrace", "getprofile", "monitoring"),
               "threading": ("gettrace", "getprofile"),
               "torch.overrides": ("_get_current_function_mode_stack",),
               "torch._C": ("_len_torch_dispatch_stack",)}
"""What the :class:`Guard` reads the process-wide hooks through: replaced, they could report
none."""

REPLY_CALLS = {"os": ("write", "readv"), "struct": ("pack", "unpack"), "select": ("select",)}
"""What a reply passes through on its way out (besides the modules of
:data:`WATCHED_MODULES`, the JSON encoder's and the pipe's classes, and ``torch.cuda.Event``,
watched whole): the times a timed batch reports are made in the candidate's process, and a
candidate that rewrote them on the way (``wire.send`` wrapped to report 0 ms, or
``json._default_encoder`` replaced) was judged correct at 4.8-5.6 million times on
``relu_small``."""

WATCHED_MODULES = (__name__, "autoprofiler_env.harness.wire", "json", "json.encoder")
"""The modules the :class:`Guard` watches whole, every name in them (this one, the wire
protocol's, and the JSON encoder's a reply is made with), a function's code too."""


def _reply_objects() -> dict:
    """The classes a reply is made and sent with, and ``json.dumps``'s encoder, by label:
    their own attributes are watched (an attribute set on the encoder, ``encode = f``, is
    found before its class's)."""
    import json
    import multiprocessing.connection as connection

    import torch

    objects = {"json.JSONEncoder": json.JSONEncoder, "json.JSONDecoder": json.JSONDecoder,
               "json._default_encoder": json._default_encoder,
               "Connection": connection.Connection,
               "_ConnectionBase": connection._ConnectionBase}
    if hasattr(torch.cuda, "Event"):
        objects["torch.cuda.Event"] = torch.cuda.Event
    return objects


class Guard:
    """What makes a worker's inputs and reads its outputs, as it was when the problem was
    imported: a candidate whose code changes it (the problem's ``get_inputs`` replaced by one
    that computes the answer while the inputs are made, where no timer runs; ``torch.randn``
    or ``torch.Tensor.to`` wrapped; ``Tensor.detach``, which the snapshot calls, made to do
    the work; a trace function or a ``torch`` mode that sees every call) is refused before
    the next input set is made or the next reply leaves, with the ``sandbox`` verdict. Held
    by both workers alike; the check runs from private copies made before the candidate's
    code ran (:func:`_private_copies`), and watched functions are compared with their code
    (:func:`_held`), but a candidate that reaches the guard object itself (through the
    worker's frames: ``gc``'s searches are refused by the :class:`Auditor`) can still blind
    it.

    It holds the objects it saw (compared by identity; held, so that a new object cannot
    take a freed one's id): the problem module's names, its functions' code, defaults and
    closures; where the problem's code reads an attribute of a module it imports (``torch``,
    ``nn``, ``F``), that attribute; ``torch.Tensor``'s own attributes and those the problem's
    code reads from its bases; ``torch.device``'s context (``DeviceContext``, which makes the
    inputs on the device); what the worker calls itself (:data:`WORKER_CALLS`, its own
    functions and classes); and the process-wide hooks (trace and profile functions,
    ``sys.monitoring`` tools, ``gc`` callbacks, ``torch`` function modes other than a
    device's, dispatch modes); on a CPU, torch's thread counts (a candidate that takes more
    threads than the reference was timed with is faster by the machine, not by its code; one
    that takes them inside ``forward`` and gives them back is the static check's to find).
    :data:`UNWATCHED` names what torch and Python change themselves. A patch inside torch
    beneath what is watched is not seen (docs/harness.md)."""

    def __init__(self, module: types.ModuleType, cpu: bool = False) -> None:
        self.module = module
        self.cpu = cpu
        self.names: set[str] = set()  # what the problem's own code reads, as imported
        for value in vars(module).values():
            if isinstance(value, types.FunctionType):
                self.names |= _names(value.__code__)
        self.names -= UNWATCHED
        # what the check itself runs, held from here (before any of the candidate's code):
        # replaced in the module, the class or builtins, or their code replaced in place,
        # they would hide every change
        self._builtins = builtins.__dict__
        self._builtins_seen = dict(builtins.__dict__)
        private = _private_copies()
        self.check_held = types.MethodType(private["Guard.check"], self)
        self._read_state = private["Guard._state"]
        self._report = private["Guard._report"]
        self.seen = self._state()

    def _state(self) -> dict:
        import torch
        import torch.utils._device

        module, names = self.module, self.names
        state: dict = {}
        for name, value in vars(module).items():
            if name in UNWATCHED:
                continue
            state[f"problem.{name}"] = (value,)
            if isinstance(value, types.FunctionType):
                cells = tuple(c.cell_contents for c in value.__closure__ or () if _filled(c))
                state[f"problem.{name}()"] = (value.__code__, value.__defaults__,
                                              value.__kwdefaults__, *cells)
        for label, owner in vars(module).items():
            if isinstance(owner, types.ModuleType):
                for name in names:
                    state[f"{label}.{name}"] = (vars(owner).get(name),)
        for name in names:  # as a class's attribute is found: the first class that has it
            state[f"torch.Tensor.{name}"] = (
                next((vars(c)[name] for c in torch.Tensor.__mro__ if name in vars(c)), None),)
        # torch.nn.Parameter too: an output may be one (Runner._plain), and the snapshot's
        # detach, clone and __torch_function__ are looked up on it first
        for label, owner in (("torch.Tensor", torch.Tensor),
                             ("torch.nn.Parameter", torch.nn.Parameter),
                             ("DeviceContext", torch.utils._device.DeviceContext)):
            for name, value in vars(owner).items():
                state[f"{label}.{name}"] = (value,)
        for label, owner in _reply_objects().items():
            for name, value in vars(owner).items():
                state[f"{label}.{name}"] = (value,)
        for label, attrs in {**WORKER_CALLS, **GUARD_READS, **REPLY_CALLS}.items():
            owner = sys.modules.get(label)
            for name in attrs:
                state[f"{label}.{name}"] = (vars(owner).get(name) if owner else None,)
        for label, owner in (("Runner", Runner), ("Guard", Guard)):
            for name, value in vars(owner).items():
                if callable(value) or isinstance(value, (staticmethod, classmethod)):
                    state[f"{label}.{name}"] = _held(value)
        for label in WATCHED_MODULES:  # every name, a function's code and defaults too
            owner = sys.modules.get(label)
            for name, value in (vars(owner) if owner else {}).items():
                if name not in UNWATCHED:
                    state[f"{label}.{name}"] = _held(value)
        monitoring = getattr(sys, "monitoring", None)  # Python 3.12's tools
        modes = torch.overrides._get_current_function_mode_stack()
        state["hooks"] = (sys.gettrace(), sys.getprofile(), threading.gettrace(),
                          threading.getprofile(), *gc.callbacks,
                          *(monitoring.get_tool(i) for i in range(6) if monitoring),
                          *(type(m) for m in modes
                            if not isinstance(m, torch.utils._device.DeviceContext)),
                          torch._C._len_torch_dispatch_stack())
        if self.cpu:  # more threads than the reference was timed with are the machine's
            state["torch threads"] = (torch.get_num_threads(), torch.get_num_interop_threads())
        return state

    def check(self) -> None:
        """Raises ``StageError("sandbox")`` naming what changed since the problem's import.

        The builtins are compared first, with no builtin called (a replaced ``sorted`` or
        ``vars`` would hide the rest), then the rest through the functions held when the
        guard was made."""
        now, seen = self._builtins, self._builtins_seen
        for name, value in seen.items():
            if name not in now or now[name] is not value:
                raise StageError("sandbox", "the candidate changed code that its process "
                                 f"runs for the judge (builtins.{name})")
        if len(now) != len(seen):
            raise StageError("sandbox", "the candidate changed code that its process runs "
                             "for the judge (builtins)")
        self._report(self, self._read_state(self))

    def _report(self, now: dict) -> None:
        seen = self.seen
        changed = sorted(k for k in seen.keys() | now.keys()
                         if k not in seen or k not in now or len(seen[k]) != len(now[k])
                         or not all(map(_same, seen[k], now[k])))
        if changed:
            said = ", ".join(changed[:4])
            raise StageError("sandbox", f"the candidate changed code that its process runs "
                             f"for the judge ({said}{', ...' if len(changed) > 4 else ''}): "
                             "the worker's own, or what makes the inputs, which is not timed")


def _private_copies() -> dict:
    """Copies of the functions :meth:`Guard.check` runs (its own, :func:`_same`,
    :func:`_filled`, :func:`_held`, :func:`_reply_objects`), bound to a copy of this
    module's names made now: made before the candidate's code runs, no module, class or
    code object the candidate can reach changes what they do."""
    import copy

    names = dict(vars(sys.modules[__name__]))
    for name in ("WORKER_CALLS", "GUARD_READS", "REPLY_CALLS", "WATCHED_MODULES", "UNWATCHED"):
        names[name] = copy.deepcopy(names[name])

    def private(f):
        return types.FunctionType(f.__code__, names, f.__name__, f.__defaults__, f.__closure__)

    for name in ("_same", "_filled", "_held", "_reply_objects"):
        names[name] = private(names[name])
    return {f"Guard.{name}": private(vars(Guard)[name])
            for name in ("check", "_state", "_report")}


def _held(value) -> tuple:
    """What the :class:`Guard` compares of a watched value: the object, and a function's code,
    defaults and closure (replaced in place, ``f.__code__ = g.__code__``, a function keeps
    its identity)."""
    func = getattr(value, "__func__", value)  # a staticmethod's or classmethod's
    if not isinstance(func, types.FunctionType):
        return (value,)
    cells = tuple(c.cell_contents for c in func.__closure__ or () if _filled(c))
    return (value, func.__code__, func.__defaults__, func.__kwdefaults__, *cells)


def _same(a, b) -> bool:
    """The same object (a count or a name: the same value)."""
    return a is b or (type(a) is type(b) and type(a) in (int, str) and a == b)


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


class Runner:
    """A problem's module and one model (the reference or the candidate) on a device."""

    def __init__(self, role: str, auditor: Auditor | None) -> None:
        import torch

        self.torch = torch
        self.role = role
        self.auditor = auditor
        # fp32 means fp32: cuDNN's default would let convolutions use TF32. A candidate may
        # change these (that is what its TF32 transformation does), in its own process only.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.module = None
        self.guard: Guard | None = None
        self.model = None
        self.device = "cpu"
        self.flush = None
        self.samples: list[tuple[int, list]] = []

    # -- loading ----------------------------------------------------------------------------

    def load(self, path: str, size: str, device: str, seed: int, source: str | None) -> dict:
        from autoprofiler_env.problems.problem import import_problem

        torch = self.torch
        self.device = device
        self.release()
        self.module = import_problem(Path(path), size)  # ProblemError: the problem's fault
        on_cuda = torch.device(device).type == "cuda"
        if not on_cuda and "OMP_NUM_THREADS" not in os.environ:
            torch.set_num_threads(CPU_THREADS)
        self.guard = Guard(self.module, cpu=not on_cuda)  # before the candidate's code runs
        if on_cuda:
            # CUDA initialised first: torch's memory statistics of an index given ("cuda:0")
            # before anything initialised it raise "Invalid device argument" ("cuda" reads
            # the current device, which initialises it)
            torch.cuda.init()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
            baseline = torch.cuda.memory_allocated(device)
        if source is None:
            cls = self.module.Model
        else:
            cls = self._import_candidate(source)
        self.guard.check_held()  # before get_init_inputs
        try:
            self.model = self._build(cls, seed)
        except Exception as e:
            if _is_cuda_error(e):
                raise CudaContextLost(_one_line(e)) from e
            raise StageError("init", _one_line(e)) from e
        reply = {}
        if source is None:  # the reference: its own footprint, weights and one forward
            self.run(self.inputs(seed + 1))
            self.sync()
            if on_cuda:
                reply["peak_memory_bytes"] = torch.cuda.max_memory_allocated(device) - baseline
        return reply

    def release(self) -> None:
        """Lets go of the last problem's model and kept samples, and (GPU) returns their
        cached blocks to the device. A reference worker serves problem after problem: before
        2026-12-03 the next one's peak was measured above what the last one still held, so
        a problem smaller than its predecessor read as almost nothing (KernelBench's
        ``level2/2``, whose output alone is 2.1 GB: 0.14 MB), and the blocks the worker kept
        cached were lost to the other processes on the GPU."""
        import gc

        self.model = self.module = self.guard = None
        self.samples = []
        gc.collect()  # a model's reference cycles (its hooks, its parent links)

    def _import_candidate(self, source: str):
        path = Path.cwd() / "candidate.py"
        path.write_text(source)  # a real file: triton's @jit and tracebacks read the source
        spec = importlib.util.spec_from_file_location("candidate", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["candidate"] = module
        if self.auditor is not None:
            self.auditor.active = True
        try:
            spec.loader.exec_module(module)
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise StageError("import", f"the candidate raised {type(e).__name__} at "
                                 "import") from None
            raise StageError("import", _one_line(e)) from e
        cls = getattr(module, "ModelNew", None)
        if not isinstance(cls, type):
            raise StageError("no_model_new", "the candidate defines no class ModelNew")
        return cls

    def _build(self, cls, seed: int):
        torch = self.torch
        torch.manual_seed(seed)
        with torch.device(self.device):
            model = cls(*self.module.get_init_inputs())
        return model.to(self.device)

    # -- running ----------------------------------------------------------------------------

    def inputs(self, seed: int, checked: bool = False) -> list:
        """The input set of ``seed``; ``checked``: the :class:`Guard` has just been asked
        (a timed batch asks it once per chunk of input sets)."""
        torch = self.torch
        if not checked:
            self.guard.check_held()
        # the generators the inputs are drawn from: the CPU's and this device's (the same
        # values as torch.manual_seed, which seeds every device: 0.1-0.2 ms on an H200 host)
        torch.default_generator.manual_seed(seed)
        device = torch.device(self.device)
        if device.type == "cuda":
            with torch.cuda.device(device):
                torch.cuda.manual_seed(seed)
        from autoprofiler_env.problems.problem import input_list

        with torch.device(self.device):
            inputs = input_list(self.module.get_inputs())
        return [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in inputs]

    def run(self, inputs: list):
        with self.torch.no_grad():
            return self.model(*inputs)

    def sync(self) -> None:
        if self.torch.device(self.device).type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def _plain(self, output) -> list:
        """The output's leaves, each tensor among them of torch's own type: a subclass (its
        ``__torch_function__`` or ``__torch_dispatch__``) can put off its work until its
        values are read, after the timer has stopped, and is the ``structure`` verdict."""
        leaves = flatten(output)
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, self.torch.Tensor) and type(leaf) not in (
                    self.torch.Tensor, self.torch.nn.Parameter):
                raise StageError("structure", f"output {i} is a {type(leaf).__qualname__}, a "
                                 "subclass of torch.Tensor: an output must be a plain tensor "
                                 "(a subclass can put its work off until its values are "
                                 "read, after the timer has stopped)")
        return leaves

    def _leaves(self, output) -> tuple[list[dict], list]:
        """The output's leaves: tensors (sent raw) and plain values."""
        specs, tensors = [], []
        for leaf in self._plain(output):
            if isinstance(leaf, self.torch.Tensor):
                specs.append({"tensor": len(tensors)})
                tensors.append(leaf)
            elif isinstance(leaf, (bool, int, float, str)) or leaf is None:
                value = leaf
                if isinstance(leaf, float) and not math.isfinite(leaf):
                    value = repr(leaf)
                specs.append({"value": value})
            else:
                specs.append({"other": type(leaf).__name__})
        return specs, tensors

    def _snapshot(self, output) -> tuple[list[dict], list, list]:
        specs, tensors = self._leaves(output)
        return specs, [t.detach().clone() for t in tensors], tensors

    def _changed(self, snaps: list, live: list) -> bool:
        """Whether any output differs, bit for bit, from its snapshot (NaNs included)."""
        torch = self.torch

        def bits(t):
            return t.detach().reshape(-1).view(torch.uint8) if t.numel() else t

        return any(s.shape != t.shape or not torch.equal(bits(s), bits(t))
                   for s, t in zip(snaps, live))

    def outputs(self, seed: int) -> tuple[dict, list]:
        output = self.run(self.inputs(seed))
        specs, snaps, live = self._snapshot(output)  # at return, before any synchronize
        self.sync()
        return {"leaves": specs, "nesting": nesting(output),
                "changed": self._changed(snaps, live)}, snaps

    def warmup(self, seed: int, ms: float) -> dict:
        inputs = self.inputs(seed)
        start, calls = time.perf_counter(), 0
        while calls < 3 or (time.perf_counter() - start) * 1e3 < ms:  # a fresh process is cold
            self.run(inputs)
            self.sync()
            calls += 1
        return {"per_call_ms": (time.perf_counter() - start) * 1e3 / calls}

    def _flush_buffer(self):
        torch = self.torch
        if self.flush is None:
            props = torch.cuda.get_device_properties(self.device)
            l2_bytes = getattr(props, "L2_cache_size", 64 << 20)
            self.flush = torch.empty(max(2 * l2_bytes, 1 << 20) // 4, dtype=torch.int32,
                                     device=self.device)
        return self.flush

    def _input_sets(self, seeds: list[int], first: int) -> list:
        """(inputs, generator states) for ``seeds[first:]``, as many as :data:`PREGEN_BYTES`
        (and an eighth of the device's free memory) hold, one at least. The states are the
        generators' right after each set was made: restored before its call, a ``forward``
        that draws random numbers (dropout) draws what it would have drawn had its inputs
        been made just before it, whatever the chunking."""
        from torch.utils._pytree import tree_flatten

        torch = self.torch
        budget = PREGEN_BYTES
        if torch.device(self.device).type == "cuda":
            budget = min(budget, torch.cuda.mem_get_info(self.device)[0] // 8)
        self.guard.check_held()
        sets = [(self.inputs(seeds[first], checked=True), self._rng_state())]
        size = sum(x.numel() * x.element_size() for x in tree_flatten(sets[0][0])[0]
                   if isinstance(x, torch.Tensor))
        for seed in seeds[first + 1:first + max(1, budget // max(size, 1))]:
            sets.append((self.inputs(seed, checked=True), self._rng_state()))
        return sets

    def _rng_state(self) -> tuple:
        torch = self.torch
        device = torch.device(self.device)
        cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        return torch.get_rng_state(), cuda

    def _set_rng_state(self, state: tuple) -> None:
        torch = self.torch
        torch.set_rng_state(state[0])
        if state[1] is not None:
            torch.cuda.set_rng_state(state[1], torch.device(self.device))

    def time(self, seeds: list[int], flush: bool, sample: list[int]) -> dict:
        """One timed batch: per call a fresh input set, then (GPU) an L2 flush, then the call
        between two CUDA events (CPU: ``perf_counter``). The input sets are made before the
        calls they feed (in chunks of :data:`PREGEN_BYTES`): made between two calls, their
        host time (0.1-0.3 ms) would leave the GPU idle before each call, and a short
        program's time would then include the host's launch latency
        (docs/data/judge_overhead_h200)."""
        torch = self.torch
        cuda = torch.device(self.device).type == "cuda"
        sample = set(sample)
        self.samples = []
        kept, changed = [], False
        buffer = self._flush_buffer() if cuda and flush else None
        events = []
        times = []
        sets: list = []
        for i, seed in enumerate(seeds):
            if not sets:
                sets = self._input_sets(seeds, i)
                self.sync()
            inputs, state = sets.pop(0)
            self._set_rng_state(state)  # host-side, before the call's events
            if cuda:
                if buffer is not None:
                    buffer.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                    enable_timing=True)
                start.record()
                output = self.run(inputs)
                end.record()
                events.append((start, end))
            else:
                t0 = time.perf_counter()
                output = self.run(inputs)
                times.append((time.perf_counter() - t0) * 1e3)
            self._plain(output)  # every call's, not only the sampled ones
            if i in sample:  # snapshot at return, compare after a device-wide synchronize
                specs, snaps, live = self._snapshot(output)
                self.sync()
                changed = changed or self._changed(snaps, live)
                kept.append((seed, specs, snaps))
                del live
            del output, inputs
        self.sync()
        if cuda:
            times = [s.elapsed_time(e) for s, e in events]
        self.samples = kept
        return {"times_ms": times, "changed": changed}

    def take_samples(self, seed: int, count: int) -> tuple[dict, list]:
        header, tensors = [], []
        for sample_seed, specs, snaps in self.samples:
            offset = len(tensors)
            header.append({"seed": sample_seed, "shapes": [list(t.shape) for t in snaps],
                           "leaves": [{"tensor": s["tensor"] + offset} if "tensor" in s else s
                                      for s in specs]})
            tensors.extend(sample_positions(t, seed, count) for t in snaps)
        self.samples = []
        return {"samples": header}, tensors


def _items(output) -> list | None:
    """A container's (key, value) pairs, read with the built-in types' own methods; None for
    a leaf. A subclass's ``__iter__``, ``items`` or ``__len__`` (a namedtuple's, an
    ``OrderedDict``'s) is the candidate's code, which could do the call's work when the
    judge walks the output, after the timer (and only for the sampled calls, which are
    walked twice)."""
    if isinstance(output, tuple):
        return list(enumerate(tuple.__iter__(output)))
    if isinstance(output, list):
        return list(enumerate(list.__iter__(output)))
    if isinstance(output, collections.deque):
        return list(enumerate(collections.deque.__iter__(output)))
    if isinstance(output, dict):
        return list(dict.items(output))
    return None


def _key(key) -> str:
    """A dict key in the nesting, by the built-in type's own repr (a subclass's ``__repr__``
    is the candidate's code): a str, an int or a bool as written, another key by its type."""
    for kind in (bool, int, str):
        if isinstance(key, kind):
            return kind.__repr__(key)
    return type(key).__name__


def flatten(output) -> list:
    """An output's leaves in order (``torch.utils._pytree.tree_flatten``'s order for tuples,
    namedtuples, lists, deques and dicts), walked by :func:`_items`."""
    items = _items(output)
    if items is None:
        return [output]
    return [leaf for _, value in items for leaf in flatten(value)]


def nesting(output) -> str:
    """An output's containers with its leaves as ``*``: ``*`` one tensor, ``(*, *)`` a tuple
    or a list of two (either: a drop-in replacement may return one for the other), ``{'h':
    *}`` a dict. The judge compares the candidate's with the reference's."""
    items = _items(output)
    if items is None:
        return "*"
    if isinstance(output, dict):
        return "{" + ", ".join(f"{_key(k)}: {nesting(v)}" for k, v in items) + "}"
    inner = ", ".join(nesting(v) for _, v in items)
    return f"({inner},)" if len(items) == 1 else f"({inner})"


def sample_positions(t, seed: int, count: int):
    """A tensor's values at ``count`` positions drawn (with replacement) from ``seed``; the
    whole tensor, flattened, where it has no more than ``count`` values. The positions depend
    on the seed and the number of values only, so the reference's worker and a candidate's
    draw the same ones."""
    import torch

    flat = t.reshape(-1)
    if flat.numel() <= count:
        return flat
    positions = torch.randint(flat.numel(), (count,),
                              generator=torch.Generator().manual_seed(seed))
    return flat[positions.to(flat.device)]


def serve(conn, role: str, auditor: Auditor | None, isolation: dict) -> None:
    """The worker's loop: one reply per request until the judge closes the pipe."""
    import torch

    from autoprofiler_env.errors import ProblemError
    from autoprofiler_env.harness import wire

    # held before any candidate's code runs: the module's names replaced (``vars(wire)["send"]
    # = f``) do not reach the replies; what they call beneath is the guard's to watch
    send, recv_json = wire.send, wire.recv_json
    runner = Runner(role, auditor)
    send(conn, {"ok": True, "pid": os.getpid(), "torch": torch.__version__,
                "isolation": isolation})

    def reply(header: dict, tensors=()) -> None:
        if auditor is not None:
            header["violations"] = list(auditor.violations)
        send(conn, header, tensors)

    def checked(header: dict, tensors=()) -> None:
        """A reply made after the candidate's code ran: the guard's check first, so that a
        change made during the calls (the last batch's, which no later check would see) is
        refused before the numbers it could have changed leave."""
        if runner.guard is not None:
            runner.guard.check_held()
        reply({"ok": True, **header}, tensors)

    while True:
        try:
            request = recv_json(conn)
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if request is None or request.get("op") == "exit":
            return
        op = request.get("op")
        try:
            if op == "load":
                reply({"ok": True, **runner.load(request["path"], request["size"],
                                                 request["device"], request["seed"],
                                                 request.get("source"))})
            elif op == "outputs":
                checked(*runner.outputs(request["seed"]))
            elif op == "warmup":
                checked(runner.warmup(request["seed"], request["ms"]))
            elif op == "time":
                checked(runner.time(request["seeds"], request["flush"], request["sample"]))
            elif op == "samples":
                checked(*runner.take_samples(request["seed"], request["count"]))
            else:
                reply({"ok": False, "internal_error": f"unknown request {op!r}"})
        except ProblemError as e:
            reply({"ok": False, "problem_error": e.cause, "path": e.path})
        except StageError as e:
            if role == "reference" and out_of_memory(e.__cause__):
                reply({"ok": False, "out_of_memory": str(e)})
            elif role == "reference":  # the problem's own code (its Model, its outputs)
                reply({"ok": False, "problem_error": f"the reference failed ({e.stage}): {e}",
                       "path": request.get("path", "")})
            else:
                reply({"ok": False, "stage": e.stage, "error": str(e)})
        except CudaContextLost as e:
            reply({"ok": False, "cuda_error": str(e)})
            os._exit(3)  # the context is gone; the judge starts a fresh worker
        except Exception as e:
            if _is_cuda_error(e):
                reply({"ok": False, "cuda_error": _one_line(e)})
                os._exit(3)
            if role == "reference" and out_of_memory(e):  # maybe the other processes' doing
                reply({"ok": False, "out_of_memory": _one_line(e)})
            elif role == "reference":  # the problem's own code failed
                reply({"ok": False, "problem_error": f"the reference failed: {_one_line(e)}",
                       "path": request.get("path", "")})
            elif op in ("outputs", "warmup", "time"):
                reply({"ok": False, "stage": "runtime", "error": _one_line(e)})
            else:
                reply({"ok": False, "internal_error": traceback.format_exc(),
                       "short": _one_line(e)})
        return_cached(runner.device)  # what the request left cached, for the other processes
        # (its outputs were the reply's arguments only: freed with it)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="autoprofiler-worker",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=("reference", "candidate"), required=True)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--sandbox", action="store_true")
    parser.add_argument("--writable", action="append", default=[])
    parser.add_argument("--cpu-seconds", type=float)
    parser.add_argument("--address-space", type=int)
    args = parser.parse_args(argv)
    from multiprocessing.connection import Connection

    from autoprofiler_env.harness import sandbox
    from autoprofiler_env.processes import die_with_parent

    isolation = {}
    if args.sandbox:
        isolation = sandbox.isolate(args.parent, args.writable, args.cpu_seconds,
                                    args.address_space)
    else:
        die_with_parent(args.parent)
    os.dup2(2, 1)  # a candidate's prints must not reach the judge's stdout (JSON lives there)
    sys.stdout = sys.stderr
    conn = Connection(args.fd)
    auditor = None
    if args.role == "candidate":
        auditor = Auditor(args.writable + [os.getcwd()])
        sys.addaudithook(auditor.hook())
    serve(conn, args.role, auditor, isolation)

