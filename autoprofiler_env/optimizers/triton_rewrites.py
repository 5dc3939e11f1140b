"""Hand-written Triton kernels that replace parts of a model's graph.

- ``triton_softmax``: ``softmax`` / ``log_softmax`` over the last dimension (torch, F, method
  and module forms; a positive ``dim`` that is the last one too), with a preceding multiply or
  divide by a Python scalar folded into the kernel. One program per row: max, exp and sum in
  registers; rows longer than one block take an online-softmax loop.
- ``triton_layer_norm``: ``nn.LayerNorm`` / ``F.layer_norm`` / ``torch.layer_norm``. One program
  per row: mean, variance, the optional affine weight and bias.
- ``triton_rms_norm``: ``nn.RMSNorm`` / ``F.rms_norm`` / ``torch.rms_norm`` (not the spelled-out
  ``x * rsqrt(mean(x^2) + eps)``). One program per row: mean of squares, optional weight.
- ``triton_pointwise``: every run of >= 2 elementwise ops whose intermediates feed only the next
  op -- activations (relu, relu6, gelu erf / tanh, sigmoid, tanh, silu, mish, hardswish,
  hardsigmoid, leaky_relu, elu, softplus, hardtanh), exp, log, abs, neg, sqrt, rsqrt,
  reciprocal, square, pow 2 / 3 / 0.5 / -1, clamp / clamp_min / clamp_max with scalar bounds,
  add / sub / mul / div with a Python scalar on either side, ``y * sigmoid(y)``, and add / sub /
  mul / div with a tensor that broadcasts along one block of dims (a residual, a bias or gain
  vector, a per-row statistic) -- becomes one generated kernel that applies the ops in
  sequence. Runs of the same ops share a kernel.

How a rewrite is made: the reference ``Model`` is built on the meta device and traced with
``torch.fx.symbolic_trace``; shapes and dtypes come from ``ShapeProp`` on meta inputs. The
matching nodes are replaced by ``call_function`` nodes calling the launchers below, and the new
``forward`` is generated from the graph. The candidate is the problem's source, then the Triton
kernels and launchers as plain source text (the candidate imports nothing of this package, so it
is a standalone KernelBench ``ModelNew`` file), then ``class ModelNew(Model)`` with the generated
``forward``; it inherits ``Model.__init__``, so the weights are the reference's.

The graph is traced at the problem's real sizes and, when it has ``SMOKE_SIZES``, at those too;
a rewrite applies only if both give the same candidate (fx bakes module constants read in
``forward`` into the graph; a size-dependent candidate would be wrong at the other size). Models
that fx cannot trace (data-dependent control flow, ...) simply do not match.

Launch parameters: ``rewrite(problem, features, block=..., num_warps=...)``. ``block`` is the
number of columns a row program handles per step (softmax, norms; a row longer than ``block``
is looped over) or the number of elements per program (pointwise); a power of two. Left out,
both are chosen at run time from the row length (row kernels: the next power of two up to
16384 columns in one block, then 4096-column steps; 4 warps up to 1024 columns, 8 up to 4096,
16 above) or fixed (pointwise: 1024 elements, 4 warps).

The kernels are for the GPU (``needs_cuda=True``); on a CPU they run only under
``TRITON_INTERPRET=1``, set before triton is imported.
"""

from __future__ import annotations

import builtins
import functools
import math
import re
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from autoprofiler_env.errors import OptimizationError
from autoprofiler_env.features import StaticFeatures
from autoprofiler_env.optimizers.transforms import Transformation, register
from autoprofiler_env.problems.problem import Problem, import_problem

MAX_ROW_BLOCK = 16384
"""Longest row (in elements) a row kernel holds in registers at once; longer rows loop."""

LOOP_ROW_BLOCK = 4096
"""The step of the looping row kernels."""

POINTWISE_BLOCK = 1024
"""Elements per program of a pointwise kernel."""

_FLOAT_DTYPES = ("torch.float32", "torch.float16", "torch.bfloat16")


class _NoMatch(Exception):
    """The pattern is absent, or the graph cannot be turned into a standalone forward."""


# -- the kernel sources (inlined into candidates as text) ----------------------------------------

_HEADER = '''\
import torch
import triton
import triton.language as tl

# Launch parameters; None means chosen from the row length at run time.
_AP_BLOCK = {block!r}
_AP_NUM_WARPS = {num_warps!r}
'''

_ROW_LAUNCH = f'''
def _ap_row_launch(n_cols):
    """(block, num_warps, looped) for a kernel with one program per row of n_cols elements."""
    if _AP_BLOCK:
        block = _AP_BLOCK
    else:
        block = triton.next_power_of_2(n_cols)
        if block > {MAX_ROW_BLOCK}:
            block = {LOOP_ROW_BLOCK}
    if _AP_NUM_WARPS:
        num_warps = _AP_NUM_WARPS
    else:
        num_warps = 4 if block <= 1024 else 8 if block <= 4096 else 16
    return block, num_warps, block < n_cols
'''

_SOFTMAX = '''
@triton.jit
def _ap_softmax_row_kernel(x_ptr, y_ptr, n_cols, scale, LOG: tl.constexpr, BLOCK: tl.constexpr):
    # One program per row, the whole row in registers: y = softmax(x * scale), stable.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    x = tl.where(mask, x * scale, -float("inf"))
    z = x - tl.max(x, axis=0)
    e = tl.exp(z)
    s = tl.sum(e, axis=0)
    if LOG:
        y = z - tl.log(s)
    else:
        y = e / s
    tl.store(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _ap_softmax_loop_kernel(x_ptr, y_ptr, n_cols, scale, LOG: tl.constexpr, BLOCK: tl.constexpr):
    # One program per row, BLOCK columns per step: an online max / sum pass, then the output.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        mask = c < n_cols
        x = tl.load(x_row + c, mask=mask, other=0.0).to(tl.float32)
        x = tl.where(mask, x * scale, -float("inf"))
        m_new = tl.maximum(m, x)
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - m_safe) + tl.exp(x - m_safe)
        m = m_new
    m_row = tl.max(m, axis=0)
    s_row = tl.sum(s * tl.exp(m - m_row), axis=0)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        mask = c < n_cols
        z = tl.load(x_row + c, mask=mask, other=0.0).to(tl.float32) * scale - m_row
        if LOG:
            y = z - tl.log(s_row)
        else:
            y = tl.exp(z) / s_row
        tl.store(y_row + c, y.to(y_ptr.dtype.element_ty), mask=mask)


def _ap_softmax(x, log=False, scale=1.0):
    """softmax(x * scale) (log_softmax if log) over the last dimension."""
    x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    n_cols = x.shape[-1]
    block, num_warps, looped = _ap_row_launch(n_cols)
    kernel = _ap_softmax_loop_kernel if looped else _ap_softmax_row_kernel
    kernel[(x.numel() // n_cols,)](x, y, n_cols, float(scale), LOG=bool(log), BLOCK=block,
                                   num_warps=num_warps)
    return y
'''

_NORM = '''
@triton.jit
def _ap_norm_row_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, eps, RMS: tl.constexpr,
                        HAS_W: tl.constexpr, HAS_B: tl.constexpr, BLOCK: tl.constexpr):
    # One program per row, the whole row in registers: LayerNorm, or RMSNorm if RMS.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    if RMS:
        d = x
    else:
        d = tl.where(mask, x - tl.sum(x, axis=0) / n_cols, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
    y = d * rstd
    if HAS_W:
        y = y * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_B:
        y = y + tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _ap_norm_loop_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, eps, RMS: tl.constexpr,
                         HAS_W: tl.constexpr, HAS_B: tl.constexpr, BLOCK: tl.constexpr):
    # One program per row, BLOCK columns per step: the mean, the variance, then the output.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    cols = tl.arange(0, BLOCK)
    mean = 0.0
    if not RMS:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):
            c = start + cols
            acc += tl.load(x_row + c, mask=c < n_cols, other=0.0).to(tl.float32)
        mean = tl.sum(acc, axis=0) / n_cols
    acc2 = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        mask = c < n_cols
        x = tl.load(x_row + c, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc2 += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc2, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        mask = c < n_cols
        x = tl.load(x_row + c, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd
        if HAS_W:
            y = y * tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
        if HAS_B:
            y = y + tl.load(b_ptr + c, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + c, y.to(y_ptr.dtype.element_ty), mask=mask)


def _ap_norm(x, weight, bias, eps, rms, ndim, normalized_shape):
    if normalized_shape is not None:
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        normalized_shape = tuple(int(size) for size in normalized_shape)
        ndim = len(normalized_shape)
        if tuple(x.shape[x.dim() - ndim:]) != normalized_shape:
            raise ValueError(f"normalized_shape {normalized_shape} is not the trailing "
                             f"shape of the input {tuple(x.shape)}")
    if not 1 <= ndim <= x.dim():
        raise ValueError(f"cannot normalize over {ndim} dims of a {x.dim()}-dim input")
    n_cols = 1
    for size in x.shape[x.dim() - ndim:]:
        n_cols *= size
    for t in (weight, bias):
        if t is not None and t.numel() != n_cols:
            raise ValueError(f"a weight or bias of shape {tuple(t.shape)} for rows of {n_cols}")
    x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    w = weight.contiguous() if weight is not None else x
    b = bias.contiguous() if bias is not None else x
    block, num_warps, looped = _ap_row_launch(n_cols)
    kernel = _ap_norm_loop_kernel if looped else _ap_norm_row_kernel
    kernel[(x.numel() // n_cols,)](x, w, b, y, n_cols, float(eps), RMS=bool(rms),
                                   HAS_W=weight is not None, HAS_B=bias is not None,
                                   BLOCK=block, num_warps=num_warps)
    return y
'''

_LAYER_NORM = '''
def _ap_layer_norm(x, weight=None, bias=None, eps=1e-5, ndim=1, normalized_shape=None):
    """F.layer_norm over the last ndim dimensions (or the trailing normalized_shape)."""
    return _ap_norm(x, weight, bias, eps, False, ndim, normalized_shape)
'''

_RMS_NORM = '''
def _ap_rms_norm(x, weight=None, eps=None, ndim=1, normalized_shape=None):
    """F.rms_norm over the last ndim dimensions (or the trailing normalized_shape)."""
    if eps is None:
        eps = torch.finfo(x.dtype).eps
    return _ap_norm(x, weight, None, eps, True, ndim, normalized_shape)
'''

_OPERAND = '''
def _ap_operand(a, x, start, stop):
    """Checks that tensor a broadcasts to x along every dim but x's dims [start, stop) (counted
    from the end), where a's sizes are x's; returns a dense, inner (the elements of x after
    that block of dims) and mid (the elements of the block): a's element for x's flat index i
    is (i // inner) % mid."""
    rank = x.dim()
    start, stop = rank + start, rank + stop
    shape = (1,) * (rank - a.dim()) + tuple(a.shape)
    expected = tuple(s if start <= d < stop else 1 for d, s in enumerate(x.shape))
    if shape != expected:
        raise ValueError(f"an operand of shape {tuple(a.shape)} does not broadcast to "
                         f"{tuple(x.shape)} as this kernel was generated for")
    inner, mid = 1, 1
    for s in x.shape[stop:]:
        inner *= s
    for s in x.shape[start:stop]:
        mid *= s
    return a.contiguous(), inner, mid
'''


# -- tracing ---------------------------------------------------------------------------------

def _torch():
    import torch

    return torch


def _placeholder(name: str) -> Callable:
    """A stand-in call target for a launcher: fx names it ``name`` in the generated code."""
    def launcher(*args, **kwargs):
        raise RuntimeError(f"{name} runs only inside a generated candidate")

    launcher.__name__ = launcher.__qualname__ = name.split("_", 2)[-1]
    launcher.__module__ = "_ap"  # fx's global name is "<module>_<name>": "_ap_softmax"
    return launcher


_PLACEHOLDERS: dict[str, Callable] = {}


def _launcher(name: str) -> Callable:
    if name not in _PLACEHOLDERS:
        _PLACEHOLDERS[name] = _placeholder(name)
    return _PLACEHOLDERS[name]


@dataclass
class _Traced:
    module: types.ModuleType
    model: Any
    gm: Any


def _trace(path: Path, size: str) -> _Traced:
    """The problem's Model on the meta device, traced by fx, with shapes propagated."""
    torch = _torch()
    from torch.fx.passes.shape_prop import ShapeProp

    module = import_problem(path, size)
    try:
        with torch.device("meta"):
            model = module.Model(*module.get_init_inputs())
            inputs = module.get_inputs()
    except Exception as e:
        raise _NoMatch(f"the model does not build on the meta device: {type(e).__name__}: "
                       f"{e}") from e
    try:
        gm = torch.fx.symbolic_trace(model)
    except Exception as e:  # data-dependent control flow, ...: the model does not match
        raise _NoMatch(f"fx cannot trace the model: {type(e).__name__}: {e}") from e
    try:
        with torch.no_grad():
            ShapeProp(gm).propagate(*inputs)
    except Exception as e:
        raise _NoMatch(f"the traced graph does not run on the meta device: "
                       f"{type(e).__name__}: {e}") from e
    return _Traced(module, model, gm)


def _tensor_meta(node):
    from torch.fx.passes.shape_prop import TensorMetadata

    meta = node.meta.get("tensor_meta") if hasattr(node, "meta") else None
    return meta if isinstance(meta, TensorMetadata) else None


def _is_float_tensor(node) -> bool:
    tm = _tensor_meta(node)
    return tm is not None and str(tm.dtype) in _FLOAT_DTYPES


_MISSING = object()


def _bind(node, names: tuple[str, ...], defaults: dict[str, Any]) -> dict | None:
    """The node's arguments by parameter name (the first parameter is the input / self)."""
    args, kwargs = list(node.args), dict(node.kwargs)
    if len(args) > len(names):
        return None
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names or key in bound:
            return None
        bound[key] = value
    for name in names:
        bound.setdefault(name, defaults.get(name, _MISSING))
    if any(v is _MISSING for v in bound.values()):
        return None
    return bound


def _is_number(x) -> bool:
    return (isinstance(x, (int, float)) and not isinstance(x, bool)
            and math.isfinite(float(x)))


def _lit(x) -> str:
    """A float literal for generated Triton code."""
    text = repr(float(x))
    return f"({text})" if text.startswith("-") else text


def _user_list(node) -> list:
    return list(node.users)


# -- the call forms, normalised ----------------------------------------------------------------

@dataclass(frozen=True)
class _Call:
    """A node as (canonical op name, bound arguments); ``module`` for call_module nodes."""

    op: str
    bound: dict
    module: Any = None


# canonical op -> (parameter names after the input, defaults)
_SIGNATURES: dict[str, tuple[tuple[str, ...], dict]] = {
    "relu": (("inplace",), {"inplace": False}),
    "relu6": (("inplace",), {"inplace": False}),
    "gelu": (("approximate",), {"approximate": "none"}),
    "sigmoid": ((), {}),
    "tanh": ((), {}),
    "silu": (("inplace",), {"inplace": False}),
    "mish": (("inplace",), {"inplace": False}),
    "hardswish": (("inplace",), {"inplace": False}),
    "hardsigmoid": (("inplace",), {"inplace": False}),
    "leaky_relu": (("negative_slope", "inplace"), {"negative_slope": 0.01, "inplace": False}),
    "elu": (("alpha", "inplace"), {"alpha": 1.0, "inplace": False}),
    "softplus": (("beta", "threshold"), {"beta": 1.0, "threshold": 20.0}),
    "hardtanh": (("min_val", "max_val", "inplace"),
                 {"min_val": -1.0, "max_val": 1.0, "inplace": False}),
    "exp": ((), {}), "log": ((), {}), "abs": ((), {}), "neg": ((), {}), "sqrt": ((), {}),
    "rsqrt": ((), {}), "reciprocal": ((), {}), "square": ((), {}),
    "clamp": (("min", "max"), {"min": None, "max": None}),
    "clamp_min": (("min",), {}),
    "clamp_max": (("max",), {}),
    "pow": (("exponent",), {}),
    "add": (("other", "alpha"), {"alpha": 1}),
    "sub": (("other", "alpha"), {"alpha": 1}),
    "mul": (("other",), {}),
    "div": (("other", "rounding_mode"), {"rounding_mode": None}),
    "softmax": (("dim", "dtype"), {"dtype": None}),
    "log_softmax": (("dim", "dtype"), {"dtype": None}),
    "layer_norm": (("normalized_shape", "weight", "bias", "eps"),
                   {"weight": None, "bias": None, "eps": 1e-5}),
    "rms_norm": (("normalized_shape", "weight", "eps"), {"weight": None, "eps": None}),
}

# F.softmax / F.log_softmax take (input, dim=None, _stacklevel=3, dtype=None)
_F_SOFTMAX_SIG = (("dim", "_stacklevel", "dtype"), {"dim": None, "_stacklevel": 3,
                                                     "dtype": None})
# torch.layer_norm takes a trailing cudnn_enable
_TORCH_LAYER_NORM_SIG = (("normalized_shape", "weight", "bias", "eps", "cudnn_enable"),
                         {"weight": None, "bias": None, "eps": 1e-5, "cudnn_enable": True})


@functools.lru_cache(maxsize=1)
def _function_table() -> dict:
    """call_function target -> (canonical op, signature)."""
    import operator

    torch = _torch()
    F = torch.nn.functional
    table: dict = {}

    def add(target, op, sig=None):
        if target is not None:
            table[target] = (op, sig or _SIGNATURES[op])

    for op in ("relu", "sigmoid", "tanh", "exp", "log", "abs", "neg", "sqrt", "rsqrt",
               "reciprocal", "square", "clamp", "clamp_min", "clamp_max", "pow", "add", "sub",
               "mul", "div", "softmax", "log_softmax", "rms_norm"):
        add(getattr(torch, op, None), op)
    add(torch.clip, "clamp")
    add(torch.negative, "neg")
    add(torch.multiply, "mul")
    add(torch.subtract, "sub")
    add(torch.true_divide, "div", (("other",), {}))
    add(torch.divide, "div")
    add(torch.layer_norm, "layer_norm", _TORCH_LAYER_NORM_SIG)
    for op in ("relu", "relu6", "gelu", "silu", "mish", "hardswish", "hardsigmoid",
               "leaky_relu", "elu", "softplus", "hardtanh", "layer_norm", "rms_norm"):
        add(getattr(F, op, None), op)
    add(F.sigmoid, "sigmoid")
    add(F.tanh, "tanh")
    add(F.softmax, "softmax", _F_SOFTMAX_SIG)
    add(F.log_softmax, "log_softmax", _F_SOFTMAX_SIG)
    for target, op in ((operator.add, "add"), (operator.sub, "sub"), (operator.mul, "mul"),
                       (operator.truediv, "div"), (operator.pow, "pow"),
                       (operator.neg, "neg")):
        signature = {"neg": ((), {}), "pow": (("exponent",), {})}.get(op, (("other",), {}))
        table[target] = (op, signature)
    return table


_METHODS = {name: name for name in (
    "relu", "sigmoid", "tanh", "exp", "log", "abs", "neg", "sqrt", "rsqrt", "reciprocal",
    "square", "clamp", "clamp_min", "clamp_max", "pow", "add", "sub", "mul", "div",
    "softmax", "log_softmax")}
_METHODS.update({"clip": "clamp", "negative": "neg", "multiply": "mul", "subtract": "sub",
                 "true_divide": "div", "divide": "div"})


def _module_call(node, module) -> _Call | None:
    """Leaf modules as calls, with their attributes as arguments."""
    nn = _torch().nn
    if node.kwargs or len(node.args) != 1:
        return None
    x = node.args[0]
    simple = {nn.ReLU: "relu", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.SiLU: "silu",
              nn.Mish: "mish", nn.Hardswish: "hardswish", nn.Hardsigmoid: "hardsigmoid",
              nn.ReLU6: "relu6"}
    kind = type(module)
    if kind in simple:
        return _Call(simple[kind], {"input": x, "inplace": getattr(module, "inplace", False)},
                     module)
    if kind is nn.GELU:
        return _Call("gelu", {"input": x, "approximate": module.approximate}, module)
    if kind is nn.LeakyReLU:
        return _Call("leaky_relu", {"input": x, "negative_slope": module.negative_slope,
                                    "inplace": module.inplace}, module)
    if kind is nn.ELU:
        return _Call("elu", {"input": x, "alpha": module.alpha, "inplace": module.inplace},
                     module)
    if kind is nn.Softplus:
        return _Call("softplus", {"input": x, "beta": module.beta,
                                  "threshold": module.threshold}, module)
    if kind is nn.Hardtanh:  # ReLU6 is a Hardtanh too; it is caught above
        return _Call("hardtanh", {"input": x, "min_val": module.min_val,
                                  "max_val": module.max_val, "inplace": module.inplace}, module)
    if kind is nn.Softmax:
        return _Call("softmax", {"input": x, "dim": module.dim, "dtype": None}, module)
    if kind is nn.LogSoftmax:
        return _Call("log_softmax", {"input": x, "dim": module.dim, "dtype": None}, module)
    if kind is nn.LayerNorm:
        return _Call("layer_norm", {"input": x, "normalized_shape": tuple(module.normalized_shape),
                                    "eps": module.eps}, module)
    if getattr(nn, "RMSNorm", None) is not None and kind is nn.RMSNorm:
        return _Call("rms_norm", {"input": x, "normalized_shape": tuple(module.normalized_shape),
                                  "eps": module.eps}, module)
    return None


def _as_call(node, gm) -> _Call | None:
    """The node as a canonical call, or None if it is none of the ops handled here."""
    if node.op == "call_function":
        try:
            entry = _function_table().get(node.target)
        except TypeError:  # an unhashable target
            return None
        if entry is None:
            return None
        op, (names, defaults) = entry
        bound = _bind(node, ("input",) + names, defaults)
        return _Call(op, bound) if bound is not None else None
    if node.op == "call_method":
        op = _METHODS.get(node.target)
        if op is None:
            return None
        names, defaults = _SIGNATURES[op]
        bound = _bind(node, ("input",) + names, defaults)
        return _Call(op, bound) if bound is not None else None
    if node.op == "call_module":
        try:
            module = gm.get_submodule(node.target)
        except AttributeError:
            return None
        return _module_call(node, module)
    return None


# -- code generation ---------------------------------------------------------------------------

def _standalone_forward(traced: _Traced, launchers: dict[str, Callable]) -> tuple[str, list[str]]:
    """The rewritten graph's forward as source (indented for a class body) and the import
    lines its globals need.

    Raises:
        _NoMatch: the forward refers to something a standalone file cannot name.
    """
    from torch.fx.graph import _custom_builtins

    graph = traced.gm.graph
    graph.lint()
    # attributes fx made up while tracing (tensor constants) do not exist on Model
    for node in graph.nodes:
        if node.op in ("get_attr", "call_module"):
            obj: Any = traced.model
            for part in node.target.split("."):
                if not hasattr(obj, part):
                    raise _NoMatch(f"the traced graph uses {node.target}, which Model lacks")
                obj = getattr(obj, part)
    code = graph.python_code(root_module="self")
    src = code.src
    start = src.find("def forward(")
    if start < 0:
        raise _NoMatch("fx generated no forward")
    src = src[start:].rstrip()
    body_names = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", src))
    imports: list[str] = []
    by_object = {id(fn): name for name, fn in launchers.items()}
    for name, obj in code.globals.items():
        if name not in body_names:
            continue
        if id(obj) in by_object:
            if name != by_object[id(obj)]:
                imports.append(f"{name} = {by_object[id(obj)]}")
            continue
        builtin = _custom_builtins.get(name)
        if builtin is not None and builtin.obj is obj:
            imports.append(builtin.import_str)
            continue
        if getattr(builtins, name, None) is obj:
            continue
        if getattr(traced.module, name, _MISSING) is obj:
            continue  # a global of the problem's own source, which the candidate contains
        if isinstance(obj, types.ModuleType):
            imports.append(f"import {obj.__name__} as {name}")
            continue
        module_name = getattr(obj, "__module__", None)
        qualname = getattr(obj, "__qualname__", None)
        if (module_name and qualname and "." not in qualname
                and not module_name.startswith(("autoprofiler_env", "_autoprofiler_problem"))):
            import importlib

            try:
                found = getattr(importlib.import_module(module_name), qualname, None)
            except ImportError:
                found = None
            if found is obj:
                imports.append(f"from {module_name} import {qualname} as {name}")
                continue
        raise _NoMatch(f"the generated forward refers to {name} ({obj!r}), which a standalone "
                       "file cannot import")
    return "\n".join("    " + line if line.strip() else "" for line in src.splitlines()), imports


@dataclass(frozen=True)
class Rewrite:
    """A rewrite ready for rendering (params are filled in later), or why there is none."""

    sites: tuple[str, ...] = ()
    source: str = ""  # the body with {block!r} / {num_warps!r} still to fill
    reason: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.sites)


def _render(name: str, traced: _Traced, launchers: dict[str, Callable], kernels: list[str],
            sites: list[str]) -> str:
    forward, imports = _standalone_forward(traced, launchers)
    lines = [_HEADER]
    extra = [i for i in dict.fromkeys(imports) if i != "import torch"]
    if extra:
        lines.append("\n".join(extra) + "\n")
    for kernel in kernels:
        lines.append(kernel.replace("{", "{{").replace("}", "}}"))
    doc = (f'    """Model with {len(sites)} part(s) of its forward replaced by hand-written '
           f'Triton kernels ({name}):\n'
           + "".join(f"    - {s}\n" for s in sites).replace("{", "{{").replace("}", "}}")
           + '    """')
    lines.append("\nclass ModelNew(Model):\n" + doc + "\n\n"
                 + forward.replace("{", "{{").replace("}", "}}") + "\n")
    return "\n".join(lines)


# -- the matchers ------------------------------------------------------------------------------

def _last_dim(dim, node) -> bool:
    tm = _tensor_meta(node)
    if tm is None or not isinstance(dim, int) or isinstance(dim, bool):
        return False
    rank = len(tm.shape)
    return rank >= 1 and (dim if dim >= 0 else dim + rank) == rank - 1


def _scalar_scale(node, gm, consumer) -> float | None:
    """The scale s if node is ``x * s`` / ``s * x`` / ``x / s`` (s a Python number) whose only
    user is consumer, else None."""
    call = _as_call(node, gm)
    if call is None or call.op not in ("mul", "div") or _user_list(node) != [consumer]:
        return None
    a, b = call.bound["input"], call.bound["other"]
    if call.op == "div" and call.bound.get("rounding_mode") is not None:
        return None
    if call.op == "mul" and _is_number(a) and hasattr(b, "op"):
        a, b = b, a
    if not hasattr(a, "op") or not _is_number(b):
        return None
    if call.op == "div":
        return None if float(b) == 0.0 else 1.0 / float(b)
    return float(b)


def _match_softmax(traced: _Traced) -> tuple[list[str], list[str], dict]:
    gm = traced.gm
    graph = gm.graph
    launcher = _launcher("_ap_softmax")
    sites = []
    for node in list(graph.nodes):
        call = _as_call(node, gm)
        if call is None or call.op not in ("softmax", "log_softmax"):
            continue
        x = call.bound["input"]
        if (not hasattr(x, "op") or call.bound.get("dtype") is not None
                or not _is_float_tensor(x) or not _last_dim(call.bound["dim"], x)):
            continue
        kwargs: dict = {}
        if call.op == "log_softmax":
            kwargs["log"] = True
        folded = None
        scale = _scalar_scale(x, gm, node)
        if scale is not None:
            inner = _as_call(x, gm).bound
            source = inner["input"] if hasattr(inner["input"], "op") else inner["other"]
            if (_is_float_tensor(source)
                    and _tensor_meta(source).shape == _tensor_meta(x).shape
                    and _tensor_meta(source).dtype == _tensor_meta(x).dtype):
                kwargs["scale"] = scale
                folded, x = x, source
        with graph.inserting_before(node):
            new = graph.call_function(launcher, (x,), kwargs)
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        graph.erase_node(node)
        if folded is not None:
            graph.erase_node(folded)
        sites.append(f"{call.op} over the last dimension of {_shape(x)}"
                     + (f", input scaled by {scale:g} in the kernel" if folded is not None
                        else "") + f" ({node.name})")
    return sites, [_ROW_LAUNCH, _SOFTMAX], {"_ap_softmax": launcher}


def _shape(node) -> str:
    tm = _tensor_meta(node)
    return "x".join(str(s) for s in tm.shape) if tm is not None else "?"


def _match_norm(traced: _Traced, rms: bool) -> tuple[list[str], list[str], dict]:
    gm = traced.gm
    graph = gm.graph
    op = "rms_norm" if rms else "layer_norm"
    name = "_ap_" + op
    launcher = _launcher(name)
    sites = []
    for node in list(graph.nodes):
        call = _as_call(node, gm)
        if call is None or call.op != op:
            continue
        x = call.bound["input"]
        if not hasattr(x, "op") or not _is_float_tensor(x):
            continue
        shape = call.bound["normalized_shape"]
        if isinstance(shape, int) and not isinstance(shape, bool):
            shape = (shape,)
        if isinstance(shape, (tuple, list)) and all(isinstance(d, int) for d in shape):
            kwargs = {"ndim": len(shape)}  # literal sizes: the dim count holds at any size
        else:
            kwargs = {"normalized_shape": shape}
        with graph.inserting_before(node):
            if call.module is not None:
                weight = (graph.get_attr(f"{node.target}.weight")
                          if getattr(call.module, "weight", None) is not None else None)
                bias = (graph.get_attr(f"{node.target}.bias")
                        if getattr(call.module, "bias", None) is not None else None)
            else:
                weight, bias = call.bound.get("weight"), call.bound.get("bias")
            args = (x, weight, call.bound["eps"]) if rms else (x, weight, bias,
                                                               call.bound["eps"])
            new = graph.call_function(launcher, args, kwargs)
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        graph.erase_node(node)
        affine = ("weight and bias" if weight is not None and bias is not None
                  else "weight" if weight is not None else "bias" if bias is not None
                  else "no affine")
        sites.append(f"{op} of {_shape(x)} over {call.bound['normalized_shape']!r}, "
                     f"{affine} ({node.name})")
    kernels = [_ROW_LAUNCH, _NORM, _RMS_NORM if rms else _LAYER_NORM]
    return sites, kernels, {name: launcher}


# pointwise ops: canonical op -> a function(bound args) returning the Triton lines (in: v, out: v)
def _unary_lines(call: _Call) -> list[str] | None:
    b, op = call.bound, call.op
    tanh = "2.0 * tl.sigmoid(2.0 * {x}) - 1.0"
    if op == "relu":
        return ["v = tl.maximum(v, 0.0)"]
    if op == "relu6":
        return ["v = tl.minimum(tl.maximum(v, 0.0), 6.0)"]
    if op == "gelu":
        if b["approximate"] == "none":
            return ["v = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))"]
        if b["approximate"] == "tanh":
            return ["t = 0.7978845608028654 * (v + 0.044715 * v * v * v)",
                    "v = 0.5 * v * (1.0 + " + tanh.format(x="t") + ")"]
        return None
    if op == "sigmoid":
        return ["v = tl.sigmoid(v)"]
    if op == "tanh":
        return ["v = " + tanh.format(x="v")]
    if op == "silu":
        return ["v = v * tl.sigmoid(v)"]
    if op == "mish":
        return ["t = tl.where(v > 20.0, v, tl.log(1.0 + tl.exp(v)))",
                "v = v * (" + tanh.format(x="t") + ")"]
    if op == "hardswish":
        return ["v = v * tl.minimum(tl.maximum(v + 3.0, 0.0), 6.0) / 6.0"]
    if op == "hardsigmoid":
        return ["v = tl.minimum(tl.maximum(v + 3.0, 0.0), 6.0) / 6.0"]
    if op == "leaky_relu" and _is_number(b["negative_slope"]):
        return [f"v = tl.where(v > 0.0, v, v * {_lit(b['negative_slope'])})"]
    if op == "elu" and _is_number(b["alpha"]):
        return [f"v = tl.where(v > 0.0, v, {_lit(b['alpha'])} * (tl.exp(v) - 1.0))"]
    if op == "softplus" and _is_number(b["beta"]) and _is_number(b["threshold"]) \
            and float(b["beta"]) != 0.0:
        return [f"t = v * {_lit(b['beta'])}",
                f"v = tl.where(t > {_lit(b['threshold'])}, v, "
                f"tl.log(1.0 + tl.exp(t)) / {_lit(b['beta'])})"]
    if op == "hardtanh" and _is_number(b["min_val"]) and _is_number(b["max_val"]):
        return [f"v = tl.minimum(tl.maximum(v, {_lit(b['min_val'])}), {_lit(b['max_val'])})"]
    if op in ("exp", "log", "abs", "sqrt", "rsqrt"):
        return [f"v = tl.{op}(v)"]
    if op == "neg":
        return ["v = -v"]
    if op == "reciprocal":
        return ["v = 1.0 / v"]
    if op == "square":
        return ["v = v * v"]
    if op in ("clamp", "clamp_min", "clamp_max"):
        lo, hi = b.get("min"), b.get("max")
        if (lo is None and hi is None) or any(x is not None and not _is_number(x)
                                              for x in (lo, hi)):
            return None
        lines = []
        if lo is not None:
            lines.append(f"v = tl.maximum(v, {_lit(lo)})")
        if hi is not None:
            lines.append(f"v = tl.minimum(v, {_lit(hi)})")
        return lines
    if op == "pow":
        e = b["exponent"]
        if not _is_number(e):
            return None
        return {2.0: ["v = v * v"], 3.0: ["v = v * v * v"], 1.0: [], 0.5: ["v = tl.sqrt(v)"],
                -1.0: ["v = 1.0 / v"]}.get(float(e))
    return None


_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


@dataclass
class _Step:
    """One elementwise op in a chain: applied to ``primary``; ``operand`` is a tensor node
    (binary op) or None; ``absorbed`` are nodes it consumes besides itself (the sigmoid of a
    ``y * sigmoid(y)``)."""

    node: Any
    primary: Any
    lines: list[str]
    label: str
    operand: Any = None
    inplace: bool = False
    absorbed: tuple = ()


def _is_sigmoid_of(node, x, gm) -> bool:
    call = _as_call(node, gm)
    return call is not None and call.op == "sigmoid" and call.bound["input"] is x


def _pointwise_steps(node, gm) -> list[_Step]:
    """The ways node is an elementwise op on one tensor (its primary input), which has the
    output's shape and dtype (the fused kernel's output is shaped and typed like its input)."""
    out = _tensor_meta(node)
    return [s for s in _pointwise_options(node, gm)
            if _tensor_meta(s.primary) is not None
            and tuple(_tensor_meta(s.primary).shape) == tuple(out.shape)
            and _tensor_meta(s.primary).dtype == out.dtype]


def _pointwise_options(node, gm) -> list[_Step]:
    call = _as_call(node, gm)
    out = _tensor_meta(node)
    if call is None or out is None or str(out.dtype) not in _FLOAT_DTYPES:
        return []
    b = call.bound
    x = b["input"]
    inplace = bool(b.get("inplace", False))
    if call.op in _INFIX or call.op == "pow":
        other = b.get("other", b.get("exponent"))
        if call.op in ("add", "sub") and b.get("alpha", 1) != 1:
            return []
        if call.op == "div" and b.get("rounding_mode") is not None:
            return []
        if call.op == "pow":
            if not hasattr(x, "op"):
                return []
            lines = _unary_lines(call)
            return [] if lines is None else [_Step(node, x, lines, f"pow {other!r}")]
        sym = _INFIX[call.op]
        x_node, o_node = hasattr(x, "op"), hasattr(other, "op")
        if x_node and _is_number(other):
            return [_Step(node, x, [f"v = v {sym} {_lit(other)}"], f"{call.op} {other!r}")]
        if o_node and _is_number(x):  # 2.0 * y, 1.0 - y (operator forms)
            return [_Step(node, other, [f"v = {_lit(x)} {sym} v"], f"{x!r} {sym} y")]
        if not (x_node and o_node):
            return []
        if x is other:
            if call.op == "mul":
                return [_Step(node, x, ["v = v * v"], "square")]
            return []
        if call.op == "mul":  # y * sigmoid(y): silu
            for y, s in ((x, other), (other, x)):
                if _is_sigmoid_of(s, y, gm) and _user_list(s) == [node]:
                    return [_Step(node, y, ["v = v * tl.sigmoid(v)"], "y * sigmoid(y)",
                                  absorbed=(s,))]
        steps = []
        for primary, operand, first in ((x, other, False), (other, x, True)):
            if (_is_float_tensor(primary) and _is_float_tensor(operand)
                    and tuple(_tensor_meta(primary).shape) == tuple(out.shape)
                    and _tensor_meta(primary).dtype == out.dtype
                    and _tensor_meta(operand).dtype == out.dtype):
                expr = f"a {sym} v" if first else f"v {sym} a"
                steps.append(_Step(node, primary, [f"v = {expr}"], f"{call.op} tensor",
                                   operand=operand))
        return steps
    if not hasattr(x, "op"):
        return []
    lines = _unary_lines(call)
    if lines is None:
        return []
    return [_Step(node, x, lines, call.op, inplace=inplace)]


def _broadcast_block(operand, main) -> tuple[int, int] | None:
    """The dims [start, stop) of main (negative, from the end) along which operand varies,
    the others being broadcast; None if operand does not broadcast that way."""
    s = tuple(_tensor_meta(main).shape)
    t = tuple(_tensor_meta(operand).shape)
    rank = len(s)
    if len(t) > rank:
        return None
    t = (1,) * (rank - len(t)) + t
    kept = [d for d in range(rank) if t[d] != 1]
    if not kept:
        return (0, 0)
    start, stop = min(kept), max(kept) + 1
    if any(t[d] != s[d] for d in range(start, stop)):
        return None
    return (start - rank, stop - rank)


def _chains(gm) -> list[list[_Step]]:
    """Maximal runs of elementwise steps, each step's primary being the previous step's node,
    every intermediate used by the next step alone."""
    nodes = list(gm.graph.nodes)
    options = {n: _pointwise_steps(n, gm) for n in nodes}
    absorbed_by = {}
    for n, steps in options.items():
        for step in steps:
            for a in step.absorbed:
                absorbed_by[a] = n

    def users(n):
        return {absorbed_by.get(u, u) for u in n.users}

    def usable(step):
        return step.operand is None or _broadcast_block(step.operand, step.primary) is not None

    taken: set = set()
    chains = []
    for n in nodes:
        if n in taken or n in absorbed_by or not options[n]:
            continue
        head = next((s for s in options[n] if usable(s)), None)
        if head is None:
            continue
        if head.inplace and (head.primary.op in ("placeholder", "get_attr")
                             or users(head.primary) != {n}):
            continue
        chain = [head]
        while True:
            cur = chain[-1].node
            nxt = users(cur)
            if len(nxt) != 1:
                break
            u = next(iter(nxt))
            if u in taken or u in absorbed_by:
                break
            step = next((s for s in options.get(u, ()) if s.primary is cur and usable(s)
                         and s.operand is not cur), None)
            if step is None:
                break
            chain.append(step)
        size = sum(1 + len(s.absorbed) for s in chain)
        if size >= 2:
            chains.append(chain)
            taken.update(s.node for s in chain)
    return chains


def _pointwise_source(k: int | str, chain: list[_Step]) -> str:
    main = chain[0].primary
    rank = len(_tensor_meta(main).shape)
    operands = [s for s in chain if s.operand is not None]
    params = ", ".join(["x_ptr"] + [f"a{i}_ptr, a{i}_inner, a{i}_mid"
                                    for i in range(len(operands))] + ["out_ptr", "n_elements"])
    body = ["    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
            "    mask = offs < n_elements",
            "    v = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)"]
    labels = []
    i = 0
    for step in chain:
        labels.append(step.label)
        body.append(f"    # {step.label}")
        lines = step.lines
        if step.operand is not None:
            start, stop = _broadcast_block(step.operand, step.primary)
            if (start, stop) == (-rank, 0):
                index = "offs"
            elif stop == 0:
                index = f"offs % a{i}_mid"
            elif start == -rank:
                index = f"offs // a{i}_inner"
            else:
                index = f"(offs // a{i}_inner) % a{i}_mid"
            body.append(f"    a = tl.load(a{i}_ptr + {index}, mask=mask, other=1.0)"
                        ".to(tl.float32)")
            i += 1
        body.extend("    " + line for line in lines)
    body.append("    tl.store(out_ptr + offs, v.to(out_ptr.dtype.element_ty), mask=mask)")
    args = ", ".join(["x"] + [f"a{j}" for j in range(len(operands))])
    prep = []
    call_args = ["x"]
    for j, step in enumerate(operands):
        start, stop = _broadcast_block(step.operand, step.primary)
        prep.append(f"    a{j}, a{j}_inner, a{j}_mid = _ap_operand(a{j}, x, {start}, {stop})")
        call_args.append(f"a{j}, a{j}_inner, a{j}_mid")
    call_args += ["out", "n"]
    chain_doc = " -> ".join(labels)
    return f'''
@triton.jit
def _ap_pointwise_{k}_kernel({params}, BLOCK: tl.constexpr):
    # {chain_doc}
{chr(10).join(body)}


def _ap_pointwise_{k}({args}):
    """{chain_doc}, in one kernel."""
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return out
{chr(10).join(prep) + chr(10) if prep else ""}    block = _AP_BLOCK or {POINTWISE_BLOCK}
    _ap_pointwise_{k}_kernel[(triton.cdiv(n, block),)](
        {", ".join(call_args)}, BLOCK=block, num_warps=_AP_NUM_WARPS or 4)
    return out
'''


def _match_pointwise(traced: _Traced) -> tuple[list[str], list[str], dict]:
    gm = traced.gm
    graph = gm.graph
    chains = _chains(gm)
    order = {n: i for i, n in enumerate(graph.nodes)}
    kernels, launchers, sites = [], {}, []
    fused: dict = {}  # the last node of a fused chain -> the node that replaced it
    kernel_ids: dict[str, int] = {}  # chains of the same ops share one kernel
    for chain in chains:
        source = _pointwise_source("KEY", chain)
        k = kernel_ids.get(source)
        if k is None:
            k = kernel_ids[source] = len(kernel_ids)
            kernels.append(source.replace("_ap_pointwise_KEY", f"_ap_pointwise_{k}"))
        name = f"_ap_pointwise_{k}"
        launcher = _launcher(name)
        launchers[name] = launcher
        last = chain[-1].node
        operands = [fused.get(s.operand, s.operand) for s in chain if s.operand is not None]
        primary = fused.get(chain[0].primary, chain[0].primary)
        with graph.inserting_before(last):
            new = graph.call_function(launcher, (primary, *operands))
        new.meta = dict(last.meta)
        last.replace_all_uses_with(new)
        fused[last] = new
        doomed = [s.node for s in chain] + [a for s in chain for a in s.absorbed]
        for node in sorted(doomed, key=order.__getitem__, reverse=True):
            graph.erase_node(node)
        steps = " -> ".join(s.label.replace(" tensor", f" {s.operand.name}") if s.operand
                            is not None else s.label for s in chain)
        sites.append(f"{steps} on {_shape(chain[0].primary)} "
                     f"({', '.join(n.name for s in chain for n in (*s.absorbed, s.node))})")
    if any(s.operand is not None for chain in chains for s in chain):
        kernels.insert(0, _OPERAND)
    return sites, kernels, launchers


_MATCHERS: dict[str, Callable[[_Traced], tuple[list[str], list[str], dict]]] = {
    "triton_softmax": _match_softmax,
    "triton_layer_norm": lambda t: _match_norm(t, rms=False),
    "triton_rms_norm": lambda t: _match_norm(t, rms=True),
    "triton_pointwise": _match_pointwise,
}

# the tag a problem must have (features.tags) for the rewrite to be worth tracing
# (RMSNorm dispatches as pointwise ops and a mean: a reduction)
_NEEDS_TAG = {"triton_softmax": {"softmax"}, "triton_layer_norm": {"norm"},
              "triton_rms_norm": {"norm", "reduction"}, "triton_pointwise": {"pointwise"}}


@functools.lru_cache(maxsize=512)
def _analyze(path: str, stamp: int, name: str) -> Rewrite:
    """The rewrite ``name`` of the problem file at ``path`` (``stamp``: its mtime, so an edited
    file is analysed again)."""
    del stamp
    try:
        module = import_problem(Path(path), "full")
    except Exception as e:
        return Rewrite(reason=f"the problem does not import: {e}")
    sizes = ["full"] + (["smoke"] if isinstance(getattr(module, "SMOKE_SIZES", None), dict)
                        and module.SMOKE_SIZES else [])
    rendered = []
    for size in sizes:
        try:
            traced = _trace(Path(path), size)
            sites, kernels, launchers = _MATCHERS[name](traced)
            if not sites:
                return Rewrite(reason="no matching pattern in the traced graph")
            rendered.append((sites, _render(name, traced, launchers, kernels, sites)))
        except _NoMatch as e:
            return Rewrite(reason=str(e))
        except Exception as e:  # the problem's own code at another size, fx internals
            return Rewrite(reason=f"{type(e).__name__}: {e}")
    # the docstrings name the shapes; the code (forward, kernels, launchers) must not differ
    code = {re.sub(r'""".*?"""', "", src, flags=re.S) for _, src in rendered}
    if len(code) != 1:
        return Rewrite(reason="the generated code differs between the problem's sizes (fx "
                        "baked a size-dependent constant into the graph)")
    sites, source = rendered[0]
    return Rewrite(tuple(sites), source)


def analyze(problem: Problem, name: str) -> Rewrite:
    """The (cached) rewrite ``name`` of ``problem``: ``.ok``, ``.sites``, ``.reason``."""
    if name not in _MATCHERS:
        raise KeyError(f"no Triton rewrite named {name!r}")
    path = Path(problem.path).resolve()
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return Rewrite(reason="the problem file is missing")
    return _analyze(str(path), stamp, name)


def _applies(name: str) -> Callable[[Problem, StaticFeatures], bool]:
    def applies(problem: Problem, features: StaticFeatures) -> bool:
        tags = tuple(getattr(features, "tags", ()) or ())
        if tags and not _NEEDS_TAG[name] & set(tags):
            return False
        return analyze(problem, name).ok
    applies.__name__ = f"{name}_applies"
    return applies


def _check_power_of_two(key: str, value, low: int, high: int) -> int | None:
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, int) or value < low or value > high
            or value & (value - 1)):
        raise OptimizationError(f"{key} must be a power of two between {low} and {high}, "
                                f"got {value!r}")
    return value


def _body(name: str) -> Callable[..., str]:
    def body(problem: Problem, features: StaticFeatures, block: int | None = None,
             num_warps: int | None = None, **params) -> str:
        block = _check_power_of_two("block", block, 16, 65536)
        num_warps = _check_power_of_two("num_warps", num_warps, 1, 32)
        rewrite = analyze(problem, name)
        if not rewrite.ok:
            raise OptimizationError(f"{name} does not apply to {problem.uri}: {rewrite.reason}")
        return rewrite.source.format(block=block, num_warps=num_warps)
    body.__name__ = f"{name}_body"
    return body


TRITON_TRANSFORMATIONS: tuple[Transformation, ...] = (
    Transformation("triton_softmax",
                   "Triton row softmax / log_softmax over the last dim (scalar scale folded in)",
                   True, _applies("triton_softmax"), _body("triton_softmax")),
    Transformation("triton_layer_norm", "Triton row LayerNorm over the trailing dims", True,
                   _applies("triton_layer_norm"), _body("triton_layer_norm")),
    Transformation("triton_rms_norm", "Triton row RMSNorm over the trailing dims", True,
                   _applies("triton_rms_norm"), _body("triton_rms_norm")),
    Transformation("triton_pointwise",
                   "one generated Triton kernel per chain of >= 2 elementwise ops", True,
                   _applies("triton_pointwise"), _body("triton_pointwise")),
)

for _t in TRITON_TRANSFORMATIONS:
    register(_t)
