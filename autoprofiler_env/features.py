"""Static features of a problem: what an agent knows before it spends any profiling budget.

They are computed on the CPU without a GPU and without running a single kernel: the reference
model is built and run on PyTorch's ``meta`` device (shapes only, no data), while a dispatch
mode counts every ATen operator it dispatches and torch's ``FlopCounterMode`` counts FLOPs.

Three things are not seen right at the ATen level on the meta device, so a function mode
watches the torch calls of the forward too:

- an RNN (``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN``: ``torch.lstm``, ``torch.gru``,
  ``torch.rnn_tanh``, ``torch.rnn_relu``) is one cuDNN call on a GPU, but decomposes into
  tens of thousands of ATen operators on the meta device: it counts as ``rnn`` operators, one
  per layer, direction and time step, with the FLOPs of its weight matrices, and its
  decomposition is not traced (nor paid for: it runs without the counting modes);
- ``scaled_dot_product_attention`` is one fused kernel on a GPU but its math decomposition
  (bmm, softmax, bmm) on the meta device: it counts as one ``attention`` operator;
- a loss function (``F.kl_div``, ``F.triplet_margin_loss``, ``F.cross_entropy``, ...) mostly
  decomposes into pointwise operators and reductions: those count as ``loss`` operators.

An RNN *cell* (``nn.LSTMCell``, ``torch.lstm_cell``, ...) is two GEMMs and one fused gate kernel
on a GPU (and torch.compile sees its GEMMs), so its GEMMs stay ``matmul`` and the rest of it
counts as one ``rnn`` operator. A transposed convolution is ATen's ``convolution`` with
``transposed=True``: ``conv_transpose``.

A problem whose code needs real values (``.item()``, ``.tolist()``, a data-dependent shape) is
built on the CPU and traced on meta where only its constructor or inputs need them, and run on
the CPU otherwise (at its smoke sizes when it has them); :attr:`StaticFeatures.trace` says
which.

A file that puts its model or tensors on CUDA itself (``.cuda()``, ``.to("cuda")``,
``device="cuda"`` or ``0``, ``.pin_memory()``; KernelBench's files leave that to the harness) is
traced as if it did not: a function mode reads CUDA as the trace's device, so the features need
no GPU and are the same on a machine with one. Not so for a file that asks whether it has one
(``"cuda" if torch.cuda.is_available() else "cpu"``): without a GPU its tensors are the CPU's,
which the meta trace cannot mix with its own, so it is traced on the CPU (at its smoke sizes,
if it has them), and on meta where it has a GPU; a file that calls more of CUDA
(``torch.cuda.synchronize()``) fails without one.

>>> from autoprofiler_env.problems import load_problem
>>> f = static_features(load_problem("softmax_16384x4096"))
>>> f.tags, f.flops, f.bytes_min  # FlopCounterMode counts matmuls and convolutions only
(('softmax',), 0, 536870912)
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from autoprofiler_env.errors import ProblemError
from autoprofiler_env.problems.problem import Problem, Size, import_problem, input_list

# An operator's category, by its ATen name. Checked in this order; the first match wins.
_CATEGORY_BY_NAME: dict[str, frozenset[str]] = {
    "attention": frozenset({
        "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention", "scaled_dot_product_attention",
        "_scaled_dot_product_attention_math", "_scaled_dot_product_flash_attention_for_cpu",
        "_fused_sdp_choice", "_flash_attention_forward", "_efficient_attention_forward",
        # only attention's math path dispatches it (an sdpa inside another torch function,
        # nn.MultiheadAttention's, is seen only through its decomposition)
        "_safe_softmax"}),
    "matmul": frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "mv", "addmv", "dot",
                         "linear", "_addmm_activation", "addbmm", "einsum"}),
    # (and convolution / _convolution with transposed=True: op_category reads the flag)
    "conv_transpose": frozenset({"conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                                 "slow_conv_transpose2d", "slow_conv_transpose3d",
                                 "cudnn_convolution_transpose", "miopen_convolution_transpose",
                                 "mkldnn_convolution_transpose"}),
    "conv": frozenset({"convolution", "_convolution", "conv1d", "conv2d", "conv3d",
                       "cudnn_convolution", "mkldnn_convolution", "_slow_conv2d_forward",
                       "slow_conv3d_forward", "slow_conv_dilated2d", "slow_conv_dilated3d",
                       "_conv_depthwise2d", "conv_depthwise3d"}),
    "rnn": frozenset({"lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell",
                      "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "_cudnn_rnn"}),
    "softmax": frozenset({"_softmax", "_log_softmax", "softmax", "log_softmax"}),
    "norm": frozenset({"native_layer_norm", "native_batch_norm", "native_group_norm",
                       "_native_batch_norm_legit", "_native_batch_norm_legit_functional",
                       "_native_batch_norm_legit_no_training", "instance_norm",
                       "_fused_rms_norm", "rms_norm", "layer_norm", "batch_norm", "group_norm",
                       "_batch_norm_impl_index", "cudnn_batch_norm"}),
    "pooling": frozenset({"max_pool1d", "max_pool2d", "max_pool3d",
                          "max_pool2d_with_indices", "max_pool3d_with_indices", "avg_pool1d",
                          "avg_pool2d", "avg_pool3d", "_adaptive_avg_pool2d",
                          "_adaptive_avg_pool3d", "adaptive_max_pool2d", "adaptive_max_pool1d",
                          "adaptive_max_pool3d", "max_pool1d_with_indices"}),
    "loss": frozenset({"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "nll_loss_forward",
                       "nll_loss2d_forward", "nll_loss", "nll_loss2d", "nll_loss_nd", "kl_div",
                       "binary_cross_entropy", "binary_cross_entropy_with_logits",
                       "cross_entropy_loss", "soft_margin_loss", "multi_margin_loss",
                       "multilabel_margin_loss_forward", "margin_ranking_loss",
                       "hinge_embedding_loss", "cosine_embedding_loss", "triplet_margin_loss",
                       "poisson_nll_loss", "_ctc_loss", "ctc_loss"}),
    "scan": frozenset({"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp",
                       "_cummax_helper", "_cummin_helper"}),
    "copy": frozenset({"clone", "_to_copy", "copy", "cat", "stack", "contiguous", "pad",
                       "constant_pad_nd", "flip", "roll", "repeat", "index_select", "gather",
                       "scatter", "where", "masked_fill", "index", "embedding", "tril", "triu",
                       "_unsafe_index", "upsample_nearest2d", "upsample_bilinear2d",
                       "im2col", "col2im", "topk", "sort"}),
}
_REDUCTION_NAMES = frozenset({"sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin",
                              "prod", "norm", "linalg_vector_norm", "logsumexp", "var", "std",
                              "var_mean", "std_mean", "all", "any"})
# Operators that launch no kernel: allocations, and views that ATen does not flag as views.
_NO_KERNEL_NAMES = frozenset({
    "unsafe_split", "unsafe_split_with_sizes", "_unsafe_view", "split", "split_with_sizes",
    "chunk", "unbind", "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones",
    "ones_like", "full", "full_like", "fill", "zero", "scalar_tensor", "arange", "lift_fresh",
    "_local_scalar_dense"})

_POINTWISE_NAMES = frozenset({
    "hardswish", "hardsigmoid", "mish", "hardtanh", "threshold", "softshrink", "hardshrink",
    "rrelu_with_noise", "prelu",
    # tagged pointwise by recent torch, but not by every version (torch 2.11 left leaky_relu
    # "other"): named, so that the features, and the candidates that apply, do not depend on it
    "abs", "add", "clamp", "clamp_min", "clamp_max", "div", "eq", "gelu", "leaky_relu", "mul",
    "pow", "relu", "rsqrt", "sigmoid", "silu", "softplus", "sub", "tanh", "exp", "log", "neg",
    "sqrt", "elu", "maximum", "minimum"})

OP_CATEGORIES: tuple[str, ...] = (
    "matmul", "conv", "conv_transpose", "attention", "rnn", "softmax", "norm", "pooling", "loss",
    "scan", "reduction", "pointwise", "copy", "other",
)
"""Every category of :attr:`StaticFeatures.op_histogram`, in the order of the feature vector."""

TRACES: tuple[str, ...] = ("meta", "cpu-init", "cpu", "cpu-smoke")
"""How the features were computed (:attr:`StaticFeatures.trace`): ``meta``, everything on the
meta device; ``cpu-init``, the Model or the inputs built on the CPU (they need real values),
then moved to meta, the forward traced on meta (the same counts as ``meta``); ``cpu``, the
forward run on the CPU with real tensors at the size asked; ``cpu-smoke``, the same at the
file's ``SMOKE_SIZES`` instead (the counts are the smoke size's, not the size asked)."""


_CONVOLUTIONS = frozenset({"convolution", "_convolution", "convolution_overrideable"})
_TRANSPOSED_ARG = 6  # convolution(input, weight, bias, stride, padding, dilation, transposed, ...)

_GEMM_LIKE = frozenset({"matmul", "conv", "conv_transpose", "attention", "rnn"})
"""Categories that keep their own name inside a loss or an RNN cell (a GEMM there is a GEMM)."""


def op_category(func, args: tuple = (), kwargs: dict | None = None) -> str | None:
    """The category of an ATen operator (an overload or a packet), or None for views and
    allocations (they launch no kernel, or none that a profile would care about).

    ``args`` and ``kwargs``, where given, are the call's: a ``convolution`` with
    ``transposed=True`` (what ``nn.ConvTranspose2d`` dispatches) is a ``conv_transpose``, one
    without them a ``conv``.
    """
    if isinstance(func, _torch()._ops.OpOverload):
        if func.is_view:
            return None
        packet, tags = func.overloadpacket, func.tags
    else:
        packet, tags = func, ()
    name = packet.__name__.rstrip("_")  # in-place "relu_" is "relu"
    if name in _NO_KERNEL_NAMES:
        return None
    if name in _CONVOLUTIONS:
        transposed = (args[_TRANSPOSED_ARG] if len(args) > _TRANSPOSED_ARG
                      else (kwargs or {}).get("transposed", False))
        return "conv_transpose" if transposed else "conv"
    for category, names in _CATEGORY_BY_NAME.items():
        if name in names:
            return category
    if name in _REDUCTION_NAMES or _torch().Tag.reduction in tags:
        return "reduction"
    if name in _POINTWISE_NAMES or _torch().Tag.pointwise in tags:
        return "pointwise"
    return "other"


def _torch():
    import torch

    return torch


@dataclass(frozen=True)
class StaticFeatures:
    """What is known about a problem without profiling it.

    Attributes:
        flops: floating-point operations of one forward (torch's FlopCounterMode: matmuls,
            convolutions, attention; pointwise work is not counted there).
        pointwise_flops: one operation per output element of every pointwise operator.
        bytes_min: bytes that must move at least: inputs, parameters and outputs, once each.
        bytes_unfused: bytes read and written if every dispatched operator is its own kernel.
        n_ops: dispatched ATen operators that launch work (a proxy for kernel launches); an
            RNN counts one per layer, direction and step, an attention call one (the module's
            docstring says why).
        op_histogram: operator count per category of :data:`OP_CATEGORIES`.
        param_count, param_bytes, input_bytes, output_bytes: sizes.
        n_inputs: number of input tensors.
        max_input_rank: the largest input rank (2 for a matrix, 4 for an image batch).
        tags: the categories present, largest FLOPs first, then by count.
        trace: how they were computed, one of :data:`TRACES` (``meta`` for every problem of
            the suite).
    """

    flops: int
    pointwise_flops: int
    bytes_min: int
    bytes_unfused: int
    n_ops: int
    op_histogram: dict[str, int] = field(default_factory=dict)
    param_count: int = 0
    param_bytes: int = 0
    input_bytes: int = 0
    output_bytes: int = 0
    n_inputs: int = 0
    max_input_rank: int = 0
    tags: tuple[str, ...] = ()
    trace: str = "meta"

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte of the minimal traffic: high means compute-bound."""
        return (self.flops + self.pointwise_flops) / max(self.bytes_min, 1)

    @property
    def fusion_ratio(self) -> float:
        """Unfused over minimal traffic: how much a fusing compiler could save."""
        return self.bytes_unfused / max(self.bytes_min, 1)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tags"] = list(self.tags)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> StaticFeatures:
        d = dict(d)
        d["tags"] = tuple(d.get("tags", ()))
        return cls(**d)

    def vector(self) -> np.ndarray:
        """A fixed-length float32 vector, ordered as :data:`FEATURE_NAMES`: log-scaled sizes
        (log10(1 + x)), then the op histogram as log10(1 + count)."""
        sizes = [self.flops, self.pointwise_flops, self.bytes_min, self.bytes_unfused,
                 self.n_ops, self.param_bytes, self.input_bytes, self.output_bytes,
                 self.n_inputs, self.max_input_rank]
        ratios = [self.arithmetic_intensity, self.fusion_ratio]
        hist = [self.op_histogram.get(c, 0) for c in OP_CATEGORIES]
        values = np.asarray(sizes + ratios + hist, dtype=np.float64)
        return np.log10(1.0 + values).astype(np.float32)


FEATURE_NAMES: tuple[str, ...] = (
    "log_flops", "log_pointwise_flops", "log_bytes_min", "log_bytes_unfused", "log_n_ops",
    "log_param_bytes", "log_input_bytes", "log_output_bytes", "log_n_inputs",
    "log_max_input_rank", "log_arithmetic_intensity", "log_fusion_ratio",
    *(f"log_n_{c}" for c in OP_CATEGORIES),
)


def _tensors(obj) -> list:
    from torch.utils._pytree import tree_flatten

    torch = _torch()
    return [t for t in tree_flatten(obj)[0] if isinstance(t, torch.Tensor)]


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def static_features(problem: Problem, size: Size = "full") -> StaticFeatures:
    """Traces the problem's reference forward on the meta device and counts.

    Raises:
        ProblemError: the file does not import, or its model or forward fails on the meta
            device (an operator without a meta kernel, or a bug in the problem) and on the CPU.
    """
    return module_features(problem.path, import_problem(problem.path, size))


def module_features(path: str | Path, module: ModuleType,
                    on_fallback: Callable[[str], None] | None = None) -> StaticFeatures:
    """The second half of :func:`static_features`: traces an already imported problem module.

    Separate so that :mod:`autoprofiler_env.problems.isolated` can tell a slow or crashing
    import from a slow or crashing trace, and name the right one in its error.

    The Model and the inputs are built on the meta device; one that needs real values there
    is built on the CPU and moved to meta (``trace="cpu-init"``). A forward that needs real
    values runs on the CPU with real tensors instead, at the module's ``SMOKE_SIZES`` if it has
    them (``trace="cpu-smoke"``; the module's sizes are put back afterwards), else at its own
    (``trace="cpu"``); ``on_fallback``, if given, is called with the reason first.

    Raises:
        ProblemError: the model or its forward fails on the meta device for a reason other
            than needing real values, or on the CPU too.
    """
    try:
        try:
            return _trace_on_meta(path, module)
        except _NeedsData as e:
            reason = e.reason
        if on_fallback is not None:
            on_fallback(reason)
        return _trace_on_cpu(path, module, reason)
    except ProblemError as e:
        if e.hint or not _wants_cuda(e):
            raise
        raise ProblemError(path, e.cause, hint=(
            "features are traced without a GPU, reading .cuda(), .to('cuda') and "
            "device='cuda' as the trace's own device, but this file calls more of CUDA "
            "(torch.cuda...): build the Model and the inputs on the default device and leave "
            "CUDA calls out of the forward, as KernelBench's files do; the harness moves them "
            "to the GPU")) from e


def _wants_cuda(e: BaseException) -> bool:
    """Whether the error (or one it came from) is torch's for CUDA on a machine without it, or
    a tensor of the file's left on CUDA beside the trace's."""
    # the errors torch raised, not the ProblemError's own message (which names the path)
    return _says(e.__cause__, _CUDA_WORD)


# "Torch not compiled with CUDA enabled", "No CUDA GPUs are available", "Found no NVIDIA
# driver", "... on the same device, but found ... cuda:0 and meta", "Cannot access accelerator
# device when none is available" (torch.device(0))
_CUDA_WORD = re.compile(r"CUDA|NVIDIA|(?<![a-z])(cuda|accelerator)(?![a-z])")


def _is_cuda(value) -> bool:
    torch = _torch()
    return ((isinstance(value, str) and value.split(":")[0] == "cuda")
            or (isinstance(value, torch.device) and value.type == "cuda"))


def _cuda_as_traced():
    """A torch function mode reading CUDA as the trace's device: ``device="cuda"`` (or an int
    device) of a factory, ``.to("cuda")``, ``.to(0)`` and ``.cuda()`` go to the default device
    (meta in the meta trace, the CPU in the CPU's), and pinned memory is not asked for
    (``.pin_memory()`` is the tensor itself). Entered inside ``torch.device(...)``, so that the
    default device is still that one while it handles a call."""
    from torch.overrides import TorchFunctionMode

    torch = _torch()
    # .to's and Module.to's (its _parse_to's) first argument is a device where it is an int
    to_calls = {torch.Tensor.to: 1, torch._C._nn._parse_to: 0}

    class CudaAsTraced(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is torch.device:  # as written: the call it is given to reads it
                return func(*args, **kwargs)
            if func is torch.Tensor.cuda:
                return args[0].to(torch.get_default_device())
            if func is torch.Tensor.pin_memory:
                return args[0]
            try:
                at = to_calls.get(func)
            except TypeError:  # an unhashable callable (as _count's _Calls meets): not .to
                at = None
            moved = [i for i, a in enumerate(args) if _is_cuda(a) or (i == at and type(a) is int)]
            if moved or any(_is_cuda(v) for v in kwargs.values()) or "pin_memory" in kwargs \
                    or type(kwargs.get("device")) is int:
                here = torch.get_default_device()  # (not cheap: only where it is needed)
                args = tuple(here if i in moved else a for i, a in enumerate(args))
                kwargs = {k: here if _is_cuda(v) or (k == "device" and type(v) is int) else v
                          for k, v in kwargs.items() if k != "pin_memory"}
            return func(*args, **kwargs)

    return CudaAsTraced()


class _NeedsData(Exception):
    """The forward needs real values on the meta device (``reason``: the error it raised)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _needs_data(e: BaseException) -> bool:
    """Whether an error raised on the meta device is the meta device's limit, not the problem's
    bug: ``.item()``, ``.tolist()``, ``.numpy()``, an operator without a meta kernel (nonzero,
    unique), a tensor of the file's own on another device. All of them name the meta device."""
    return _says(e, _META_WORD)


def _says(e: BaseException | None, words: re.Pattern) -> bool:
    """Whether ``e`` or an error it came from (its first eight causes) says ``words``."""
    seen = 0
    while e is not None and seen < 8:
        if words.search(str(e)):
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False


# "meta tensors", "the 'Meta' backend", "register_meta function for torch.nonzero()", not
# "metadata"; and torch's "data-dependent" errors
_META_WORD = re.compile(r"(?<![a-z])meta(?![a-z])|data.(in)?dependent", re.IGNORECASE)


def _describe(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def _meta_device_sound() -> None:
    """Makes ``with torch.device("meta")`` create every tensor constructor's tensors there
    again. torch keeps the constructors that device contexts redirect in a cache made at its
    first use; transformers 5 swaps ``torch.linspace`` for a wrapper of its own while it loads
    a model (``meta_device_safe_creation_ops``), and where that load was the first use, the
    wrapper was kept instead: from then on ``torch.linspace`` in the process made CPU tensors
    under the meta device (a local LLM loaded before a problem's features were traced: a
    constructor that needs real values traced as if it did not). Nothing where the cache
    holds torch's own functions, or where this torch has no such cache."""
    torch = _torch()
    try:
        from torch.utils._device import _device_constructors
    except ImportError:
        return
    cached = getattr(_device_constructors, "cache_clear", None)
    if cached is not None and torch.linspace not in _device_constructors():
        cached()


def _trace_on_meta(path: str | Path, module: ModuleType) -> StaticFeatures:
    torch = _torch()
    _meta_device_sound()
    built_on_cpu: list[str] = []

    def build(what: str, make: Callable[[], Any]) -> Any:
        try:
            with torch.device("meta"), torch.no_grad(), _cuda_as_traced():
                return make()
        except Exception as e:
            if not _needs_data(e):
                raise ProblemError(path, f"building {what} failed on the meta device: "
                                   f"{_describe(e)}") from e
        # it needs real values (Swin's stochastic-depth rates are torch.linspace(...).item()):
        # built on the CPU, then moved to meta, so the forward is still traced on shapes only
        try:
            with torch.no_grad(), _cuda_as_traced():
                value = make()
                moved = value.to("meta") if isinstance(value, torch.nn.Module) else \
                    _tree_to_meta(value)
        except Exception as e:
            raise ProblemError(path, f"building {what} failed on the meta device and on the "
                               f"CPU: {_describe(e)}") from e
        built_on_cpu.append(what)
        return moved

    model = build("Model", lambda: module.Model(*module.get_init_inputs()))
    inputs = build("the inputs", lambda: input_list(module.get_inputs()))
    try:
        with torch.device("meta"), torch.no_grad(), _cuda_as_traced():
            return _count(model, inputs, "cpu-init" if built_on_cpu else "meta")
    except Exception as e:
        if _needs_data(e):
            raise _NeedsData(_describe(e)) from e
        raise ProblemError(path, f"the reference forward failed on the meta device: "
                           f"{_describe(e)}") from e


def _tree_to_meta(obj):
    from torch.utils._pytree import tree_map

    torch = _torch()
    return tree_map(lambda t: t.to("meta") if isinstance(t, torch.Tensor) else t, obj)


def _trace_on_cpu(path: str | Path, module: ModuleType, reason: str) -> StaticFeatures:
    """The forward with real tensors on the CPU, at the smoke sizes where the file has them."""
    torch = _torch()
    smoke = getattr(module, "SMOKE_SIZES", None)
    if not (isinstance(smoke, dict) and smoke and all(hasattr(module, k) for k in smoke)):
        smoke = {}
    saved = {k: getattr(module, k) for k in smoke}
    at_smoke = bool(smoke) and any(saved[k] != v for k, v in smoke.items())
    try:
        for key, value in smoke.items():
            setattr(module, key, value)
        with torch.device("cpu"), torch.no_grad(), _cuda_as_traced():
            model = module.Model(*module.get_init_inputs())
            inputs = input_list(module.get_inputs())
            return _count(model, inputs, "cpu-smoke" if at_smoke else "cpu")
    except Exception as e:
        raise ProblemError(path, f"the reference forward needs real values ({reason}), and "
                           f"failed on the CPU too: {_describe(e)}") from e
    finally:
        for key, value in saved.items():
            setattr(module, key, value)


def _call_kinds() -> dict:
    """The torch calls the forward's function mode handles, by function: ``rnn`` and
    ``attention`` (counted as a whole, their decomposition untraced), ``rnn_cell`` and ``loss``
    (traced, their non-GEMM operators counted as the call's)."""
    global _CALL_KINDS
    if _CALL_KINDS is None:
        torch = _torch()
        import torch.nn.functional as F

        kinds: dict = {}
        for name in ("lstm", "gru", "rnn_tanh", "rnn_relu"):  # torch._VF.lstm is torch.lstm
            kinds[getattr(torch, name)] = "rnn"
        for name in ("lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"):
            kinds[getattr(torch, name)] = "rnn_cell"
        kinds[F.scaled_dot_product_attention] = "attention"
        for owner in (F, torch, torch._C._nn):
            for name in dir(owner):
                if name.endswith("_loss") or name in _LOSS_FUNCTIONS:
                    function = getattr(owner, name, None)
                    if callable(function) and not isinstance(function, type):
                        kinds.setdefault(function, "loss")
        _CALL_KINDS = kinds
    return _CALL_KINDS


_CALL_KINDS: dict | None = None
_LOSS_FUNCTIONS = frozenset({"cross_entropy", "kl_div", "binary_cross_entropy",
                             "binary_cross_entropy_with_logits"})  # besides the "*_loss" ones


@dataclass(frozen=True)
class _RnnCall:
    """A ``torch.lstm`` / ``gru`` / ``rnn_tanh`` / ``rnn_relu`` call, read from its arguments
    (ATen's two signatures: ``(input, hx, params, has_biases, num_layers, dropout, train,
    bidirectional, batch_first)`` and the packed ``(data, batch_sizes, hx, params, ...)``)."""

    data: Any  # the input, or a packed sequence's data
    hx: Any  # lstm: [h0, c0]; the others: h0
    params: tuple  # every layer's and direction's weights and biases
    num_layers: int
    bidirectional: bool
    steps: int  # time steps

    @classmethod
    def of(cls, args: tuple) -> _RnnCall | None:
        """The call, or None if its arguments are not ATen's positional ones."""
        try:
            return cls._read(args)
        except (ValueError, IndexError, TypeError, AttributeError):
            return None

    @classmethod
    def _read(cls, args: tuple) -> _RnnCall:
        torch = _torch()
        p = max(i for i, a in enumerate(args) if isinstance(a, (list, tuple))
                and a and all(isinstance(t, torch.Tensor) for t in a))  # params, after lstm's hx
        data, second = args[0], args[1]
        if (isinstance(second, torch.Tensor) and second.dim() == 1
                and not second.is_floating_point()):  # packed: the batch size of every step
            steps = second.shape[0]
        elif data.dim() == 3:
            steps = data.shape[1] if len(args) > p + 6 and args[p + 6] else data.shape[0]
        else:  # unbatched (steps, features)
            steps = data.shape[0]
        return cls(data, args[p - 1], tuple(args[p]), int(args[p + 2]), bool(args[p + 5]),
                   int(steps))

    @property
    def n_ops(self) -> int:
        """One per layer, direction and time step: a cuDNN RNN's launches grow with them."""
        return self.num_layers * (2 if self.bidirectional else 1) * self.steps

    @property
    def flops(self) -> int:
        """Each weight matrix multiplies one vector per token, as the decomposition's GEMMs do
        (what FlopCounterMode counts of them)."""
        tokens = self.data.numel() // max(self.data.shape[-1], 1)
        return int(2 * tokens * sum(w.numel() for w in self.params if w.dim() == 2))

    def meta_outputs(self) -> tuple:
        """The call's outputs on the meta device, without running its decomposition (tens of
        seconds there: the meta kernels of its thousands of operators are Python)."""
        torch = _torch()
        h0, c0 = tuple(self.hx) if isinstance(self.hx, (list, tuple)) else (self.hx, None)
        width = (2 if self.bidirectional else 1) * h0.shape[-1]  # hidden size, or proj_size
        out = torch.empty((*self.data.shape[:-1], width), dtype=self.data.dtype, device="meta")
        hidden = (torch.empty_like(h0),) + ((torch.empty_like(c0),) if c0 is not None else ())
        return (out, *hidden)


def _vector_flops(func, args: tuple) -> int:
    """The FLOPs of a matrix-vector or vector-vector product (``mv``, ``addmv``, ``dot``,
    ``vdot``: what ``a @ x`` with a 1-D ``x`` dispatches), two per multiply-add, which torch's
    FlopCounterMode does not count (0 for them in torch 2.11-2.13: the shipped suite's
    ``matvec_16384x16384`` was built with flops 0, docs/dataset.md); 0 for any other
    operator."""
    name = getattr(func, "overloadpacket", func).__name__.rstrip("_")
    tensors = [a for a in args if isinstance(a, _torch().Tensor)]
    if name == "mv" and len(tensors) >= 1 and tensors[0].dim() == 2:
        return 2 * tensors[0].numel()
    if name == "addmv" and len(tensors) >= 2 and tensors[1].dim() == 2:
        return 2 * tensors[1].numel()
    if name in ("dot", "vdot") and tensors:
        return 2 * tensors[0].numel()
    return 0


def _attention_flops(args: tuple, kwargs: dict) -> int:
    """``scaled_dot_product_attention``'s FLOPs as torch's FlopCounterMode counts them:
    Q K^T and (softmax) V, every query against every key (a causal mask is not subtracted)."""
    q, k, v = (list(args) + [kwargs.get(n) for n in ("query", "key", "value")][len(args):])[:3]
    length, embed = q.shape[-2], q.shape[-1]
    batch_heads = q.numel() // max(length * embed, 1)
    return int(2 * batch_heads * length * k.shape[-2] * (embed + v.shape[-1]))


@dataclass
class _Tally:
    """What the forward's modes count."""

    histogram: Counter = field(default_factory=Counter)
    flops_by_category: Counter = field(default_factory=Counter)
    bytes: int = 0
    pointwise_flops: int = 0
    region_flops: int = 0  # FLOPs of the calls counted as a whole (FlopCounterMode saw none)
    vector_flops: int = 0  # of mv, addmv, dot: FlopCounterMode counts none (_vector_flops)
    context: str | None = None  # "loss" or "rnn_cell" while inside one
    context_counted: bool = False

    def op(self, category: str, flops: int, nbytes: int) -> None:
        count = 1
        if self.context == "loss" and category not in _GEMM_LIKE:
            category = "loss"
        elif self.context == "rnn_cell" and category not in _GEMM_LIKE:
            # one fused gate kernel on a GPU (_thnn_fused_lstm_cell): its pointwise ops are one
            category, count = "rnn", 0 if self.context_counted else 1
            self.context_counted = True
        self.histogram[category] += count
        self.flops_by_category[category] += flops
        self.bytes += nbytes

    def region(self, category: str, n_ops: int, flops: int, nbytes: int) -> None:
        self.histogram[category] += n_ops
        self.flops_by_category[category] += flops
        self.region_flops += flops
        self.bytes += nbytes


def _count(model, inputs, trace: str) -> StaticFeatures:
    """Runs ``model(*inputs)`` under the counting modes (on whichever device the caller set)."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
    from torch.utils.flop_counter import FlopCounterMode

    flop_counter, tally, kinds = FlopCounterMode(display=False), _Tally(), _call_kinds()

    class _Operators(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            before = flop_counter.get_total_flops()  # FlopCounterMode runs below this mode
            out = func(*args, **kwargs)
            category = op_category(func, args, kwargs)
            if category is not None:
                if category == "pointwise":
                    tally.pointwise_flops += sum(t.numel() for t in _tensors(out))
                counted = flop_counter.get_total_flops() - before
                vector = _vector_flops(func, args) if category == "matmul" and not counted else 0
                tally.vector_flops += vector  # where a later torch counts them, not twice
                tally.op(category, counted + vector,
                         _nbytes(_tensors((args, kwargs))) + _nbytes(_tensors(out)))
            return out

    class _Calls(TorchFunctionMode):
        # sees the forward's own torch calls, not the ones nested inside a torch function
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            try:
                kind = kinds.get(func)
            except TypeError:  # an unhashable callable: none of ours
                kind = None
            if kind is None or tally.context is not None:
                return func(*args, **kwargs)
            if kind in ("rnn", "attention"):
                rnn = _RnnCall.of(args) if kind == "rnn" and not kwargs else None
                with _disable_current_modes():  # its decomposition is not what a GPU runs
                    if rnn is not None and all(t.is_meta for t in _tensors(args)):
                        out = rnn.meta_outputs()
                    else:
                        out = func(*args, **kwargs)
                n_ops, flops = ((rnn.n_ops, rnn.flops) if rnn is not None
                                else (1, _attention_flops(args, kwargs)) if kind == "attention"
                                else (1, 0))  # an RNN called in a way we cannot read
                tally.region(kind, n_ops, flops,
                             _nbytes(_tensors((args, kwargs))) + _nbytes(_tensors(out)))
                return out
            tally.context, tally.context_counted = kind, False
            try:
                return func(*args, **kwargs)
            finally:
                tally.context = None

    with flop_counter, _Operators(), _Calls():
        output = model(*inputs)
    flops = int(flop_counter.get_total_flops()) + tally.region_flops + tally.vector_flops
    params = list(model.parameters()) + list(model.buffers())
    in_tensors, out_tensors = _tensors(inputs), _tensors(output)
    histogram = {c: tally.histogram[c] for c in OP_CATEGORIES if tally.histogram[c]}
    tags = sorted(histogram, key=lambda c: (-tally.flops_by_category[c], -histogram[c],
                                            OP_CATEGORIES.index(c)))
    return StaticFeatures(
        flops=flops,
        pointwise_flops=int(tally.pointwise_flops),
        bytes_min=_nbytes(in_tensors) + _nbytes(params) + _nbytes(out_tensors),
        bytes_unfused=int(tally.bytes),
        n_ops=int(sum(histogram.values())),
        op_histogram=histogram,
        param_count=sum(p.numel() for p in model.parameters()),
        param_bytes=_nbytes(params),
        input_bytes=_nbytes(in_tensors),
        output_bytes=_nbytes(out_tensors),
        n_inputs=len(in_tensors),
        max_input_rank=max((t.dim() for t in in_tensors), default=0),
        tags=tuple(t for t in tags if t not in ("copy", "other")) or tuple(tags),
        trace=trace,
    )
