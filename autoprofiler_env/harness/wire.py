"""The messages between the judge and its worker processes: JSON headers and raw tensor bytes.

Nothing a worker sends is unpickled: a pickle from a candidate's process would run its code in
the judge. A message is one JSON frame, then one frame of raw bytes per tensor it names
(``{"tensors": [{"dtype": "float32", "shape": [4, 8]}, ...]}``). The judge reads with a bound
on the total size and checks every field; anything else is a :class:`WireError`, which the
judge reports as a forged or malformed reply (``ErrorKind.PROTOCOL``).
"""

from __future__ import annotations

import json
import math
import os
import select
import struct
import threading
import time

import torch

MAX_HEADER_BYTES = 1 << 20

DTYPES = {name: getattr(torch, name) for name in (
    "float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8",
    "bool", "complex64", "complex128")}


class WireError(Exception):
    """A frame that is not what the protocol allows."""


STAGE_BYTES = 1 << 26  # a CUDA tensor crosses the host in pinned 64 MB pieces, two in flight
_local = threading.local()


def _stage(device, k: int) -> torch.Tensor:
    """This thread's ``k``-th pinned host buffer (0 or 1) for copies to or from ``device``
    (pageable memory where pinning fails). A thread's own: the recorder's warm workers are
    threads of one process receiving at once, and buffers shared between them mixed their
    outputs (an H200 run's warm trials reported mismatches that were not there)."""
    stages = getattr(_local, "stages", None)
    if stages is None:
        stages = _local.stages = {}
    key = (str(device), k)
    if key not in stages or stages[key].numel() != STAGE_BYTES:
        try:
            stages[key] = torch.empty(STAGE_BYTES, dtype=torch.uint8, pin_memory=True)
        except RuntimeError:
            stages[key] = torch.empty(STAGE_BYTES, dtype=torch.uint8)
    return stages[key]


def _write_all(fd: int, view: memoryview) -> None:
    while len(view):
        view = view[os.write(fd, view):]


def _frame_head(size: int) -> bytes:
    """:class:`multiprocessing.connection.Connection`'s frame header for ``size`` bytes."""
    return struct.pack("!i", size) if size <= 0x7fffffff else struct.pack("!iQ", -1, size)


def _send_tensor(fd: int, t: torch.Tensor) -> None:
    raw = t.reshape(-1).view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8)
    _write_all(fd, memoryview(_frame_head(raw.numel())))
    if raw.device.type != "cuda":
        if raw.numel():
            _write_all(fd, memoryview(raw.numpy()).cast("B"))
        return
    # device -> pinned buffer k (asynchronous) while buffer 1-k goes out through the socket;
    # the events on the tensor's device's stream, whichever device is current
    pending = None
    with torch.cuda.device(raw.device):
        for k, start in enumerate(range(0, raw.numel(), STAGE_BYTES)):
            piece = raw[start:start + STAGE_BYTES]
            stage = _stage(raw.device, k % 2)[:piece.numel()]
            stage.copy_(piece, non_blocking=True)
            event = torch.cuda.Event()
            event.record()
            if pending is not None:
                pending[0].synchronize()
                _write_all(fd, memoryview(pending[1].numpy()).cast("B"))
            pending = (event, stage)
        if pending is not None:
            pending[0].synchronize()
            _write_all(fd, memoryview(pending[1].numpy()).cast("B"))


def send(conn, header: dict, tensors: list | tuple = ()) -> None:
    """Sends a header and the tensors it lists (their raw bytes, a frame each; a CUDA tensor
    streams through two pinned buffers, never copied whole to the host)."""
    flat = [t.detach().contiguous() for t in tensors]
    header = dict(header, tensors=[{"dtype": str(t.dtype).removeprefix("torch."),
                                    "shape": list(t.shape)} for t in flat])
    conn.send_bytes(json.dumps(header, allow_nan=True).encode())
    for t in flat:
        _send_tensor(conn.fileno(), t)


def _read_exact(fd: int, view: memoryview, deadline: float | None = None) -> None:
    """Fills ``view`` from ``fd``; by ``deadline`` (``time.monotonic()``) or
    :class:`TimeoutError`: a worker that sends part of a frame and stops cannot hold the
    judge."""
    got = 0
    while got < len(view):
        if deadline is not None and not select.select(
                [fd], [], [], max(deadline - time.monotonic(), 0.0))[0]:
            raise TimeoutError(f"a frame stopped after {got} of {len(view)} bytes")
        n = os.readv(fd, [view[got:]])
        if n == 0:
            raise EOFError("the other side closed the connection inside a frame")
        got += n


def _frame_size(fd: int, deadline: float | None) -> int:
    head = bytearray(4)
    _read_exact(fd, memoryview(head), deadline)
    n, = struct.unpack("!i", head)
    if n == -1:
        head = bytearray(8)
        _read_exact(fd, memoryview(head), deadline)
        n, = struct.unpack("!Q", head)
    return n


def _recv_header(conn, deadline: float | None) -> bytes:
    fd = conn.fileno()
    n = _frame_size(fd, deadline)
    if not 0 <= n <= MAX_HEADER_BYTES:
        raise WireError(f"a header frame of {n} bytes (at most {MAX_HEADER_BYTES})")
    raw = bytearray(n)
    _read_exact(fd, memoryview(raw), deadline)
    return bytes(raw)


def _recv_into(conn, out: torch.Tensor, size: int, deadline: float | None = None) -> None:
    """Reads one frame of ``size`` bytes into ``out`` (flat ``uint8``, on the host or a CUDA
    device): a frame in :class:`multiprocessing.connection.Connection`'s format, read from
    its file descriptor without the three host copies that ``recv_bytes`` and a
    ``bytearray`` make; to a CUDA device through two pinned buffers."""
    fd = conn.fileno()
    n = _frame_size(fd, deadline)
    if n != size:
        raise WireError(f"a tensor needs {size} bytes, its frame has {n}")
    if out.device.type != "cuda":
        if size:
            _read_exact(fd, memoryview(out.numpy()).cast("B"), deadline)
        return
    events = [None, None]
    with torch.cuda.device(out.device):  # the events on the stream the copies go to
        for k, start in enumerate(range(0, size, STAGE_BYTES)):
            stage = _stage(out.device, k % 2)[:min(STAGE_BYTES, size - start)]
            if events[k % 2] is not None:
                events[k % 2].synchronize()  # its last piece has reached the device
            _read_exact(fd, memoryview(stage.numpy()).cast("B"), deadline)
            out[start:start + stage.numel()].copy_(stage, non_blocking=True)
            events[k % 2] = torch.cuda.Event()
            events[k % 2].record()
        for event in events:
            if event is not None:
                event.synchronize()


def recv(conn, max_bytes: int = 1 << 36, device: str | None = None,
         deadline: float | None = None) -> tuple[dict, list[torch.Tensor]]:
    """Reads one message. ``max_bytes`` bounds what its tensors may take; they land on
    ``device`` (default: the host); their frames must arrive by ``deadline``
    (``time.monotonic()``; default: no limit).

    Raises:
        WireError: a frame that does not parse or does not match its header.
        TimeoutError: a tensor's frame was not complete by the deadline.
        EOFError, OSError: the other side is gone.
    """
    raw = _recv_header(conn, deadline)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise WireError(f"a header that is not JSON: {e}") from e
    if not isinstance(header, dict):
        raise WireError(f"a header that is a {type(header).__name__}, not an object")
    specs = header.pop("tensors", [])
    if not isinstance(specs, list):
        raise WireError("'tensors' is not a list")
    tensors, budget = [], max_bytes
    for spec in specs:
        if not (isinstance(spec, dict) and spec.get("dtype") in DTYPES
                and isinstance(spec.get("shape"), list)
                and all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**40
                        for n in spec["shape"])):
            raise WireError(f"a tensor description that is not valid: {str(spec)[:200]}")
        dtype = DTYPES[spec["dtype"]]
        size = math.prod(spec["shape"]) * torch.empty((), dtype=dtype).element_size()
        if size > budget:
            raise WireError(f"tensors larger than the {max_bytes} bytes allowed")
        budget -= size
        flat = torch.empty(size, dtype=torch.uint8, device=device)
        try:
            _recv_into(conn, flat, size, deadline)
        except WireError as e:
            raise WireError(f"a {spec['dtype']} tensor of shape {spec['shape']}: {e}") from None
        tensors.append(flat.view(dtype).reshape(spec["shape"]))
    return header, tensors


def send_json(conn, message: dict) -> None:
    """A request from the judge (it is trusted; JSON keeps one format both ways)."""
    conn.send_bytes(json.dumps(message).encode())


def recv_json(conn) -> dict | None:
    """A request, as a worker reads it; None asks the worker to exit."""
    message = json.loads(conn.recv_bytes())
    return message if isinstance(message, dict) else None
