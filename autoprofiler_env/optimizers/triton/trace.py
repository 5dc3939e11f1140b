"""Tracing a problem with torch.fx and reading its nodes as canonical calls.

:func:`_trace` builds the problem's ``Model`` on the meta device, traces it and propagates
shapes; :func:`_as_call` turns a node (a function, a method or a leaf module) into a
:class:`_Call` with its arguments bound by name; :func:`_launcher` gives the stand-in call
targets the matchers insert for the generated launchers.
"""

from __future__ import annotations

import functools
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from autoprofiler_env.problems.problem import import_problem

_FLOAT_DTYPES = ("torch.float32", "torch.float16", "torch.bfloat16")


class _NoMatch(Exception):
    """The pattern is absent, or the graph cannot be turned into a standalone forward."""


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
