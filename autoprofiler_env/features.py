"""Static features of a problem: what an agent knows before it spends any profiling budget.

They are computed on the CPU without a GPU and without running a single kernel: the reference
model is built and run on PyTorch's ``meta`` device (shapes only, no data), while a dispatch
mode counts every ATen operator it dispatches and torch's ``FlopCounterMode`` counts FLOPs.

>>> from autoprofiler_env.problems import load_problem
>>> f = static_features(load_problem("softmax_4096x8192"))
>>> f.tags, f.flops, f.bytes_min
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType

import numpy as np

from autoprofiler_env.errors import ProblemError
from autoprofiler_env.problems.problem import Problem, Size, import_problem

# An operator's category, by its ATen name. Checked in this order; the first match wins.
_CATEGORY_BY_NAME: dict[str, frozenset[str]] = {
    "attention": frozenset({
        "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention", "scaled_dot_product_attention",
        "_scaled_dot_product_attention_math", "_scaled_dot_product_flash_attention_for_cpu",
        "_fused_sdp_choice"}),
    "matmul": frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "mv", "addmv", "dot",
                         "linear", "_addmm_activation", "addbmm", "einsum"}),
    "conv_transpose": frozenset({"conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}),
    "conv": frozenset({"convolution", "_convolution", "conv1d", "conv2d", "conv3d",
                       "cudnn_convolution", "mkldnn_convolution", "_slow_conv2d_forward",
                       "slow_conv3d_forward", "slow_conv_dilated2d", "slow_conv_dilated3d",
                       "_conv_depthwise2d", "conv_depthwise3d"}),
    "rnn": frozenset({"lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell",
                      "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "_cudnn_rnn"}),
    "softmax": frozenset({"_softmax", "_log_softmax", "softmax", "log_softmax",
                          "_safe_softmax"}),
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
                       "nll_loss2d_forward", "nll_loss", "kl_div", "binary_cross_entropy",
                       "binary_cross_entropy_with_logits", "soft_margin_loss",
                       "multi_margin_loss", "margin_ranking_loss", "hinge_embedding_loss",
                       "cosine_embedding_loss", "triplet_margin_loss"}),
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


def op_category(func) -> str | None:
    """The category of an ATen operator (an overload or a packet), or None for views and
    allocations (they launch no kernel, or none that a profile would care about)."""
    if isinstance(func, _torch()._ops.OpOverload):
        if func.is_view:
            return None
        packet, tags = func.overloadpacket, func.tags
    else:
        packet, tags = func, ()
    name = packet.__name__.rstrip("_")  # in-place "relu_" is "relu"
    if name in _NO_KERNEL_NAMES:
        return None
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
        n_ops: dispatched ATen operators that launch work (a proxy for kernel launches).
        op_histogram: operator count per category of :data:`OP_CATEGORIES`.
        param_count, param_bytes, input_bytes, output_bytes: sizes.
        n_inputs: number of input tensors.
        max_input_rank: the largest input rank (2 for a matrix, 4 for an image batch).
        tags: the categories present, largest FLOPs first, then by count.
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
        return np.log10(1.0 + np.asarray(sizes + ratios + hist, dtype=np.float64)).astype(np.float32)


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
            device (an operator without a meta kernel, or a bug in the problem).
    """
    return module_features(problem.path, import_problem(problem.path, size))


def module_features(path: str | Path, module: ModuleType) -> StaticFeatures:
    """The second half of :func:`static_features`: traces an already imported problem module.

    Separate so that :mod:`autoprofiler_env.problems.isolated` can tell a slow or crashing
    import from a slow or crashing trace, and name the right one in its error.

    Raises:
        ProblemError: the model or its forward fails on the meta device.
    """
    torch = _torch()
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    class _Counter(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.histogram: Counter[str] = Counter()
            self.flops_by_category: Counter[str] = Counter()
            self.bytes = 0
            self.pointwise_flops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            category = op_category(func)
            if category is not None:
                self.histogram[category] += 1
                self.bytes += _nbytes(_tensors((args, kwargs))) + _nbytes(_tensors(out))
                if category == "pointwise":
                    self.pointwise_flops += sum(t.numel() for t in _tensors(out))
            return out

    try:
        with torch.device("meta"), torch.no_grad():
            model = module.Model(*module.get_init_inputs())
            inputs = module.get_inputs()
            flop_counter, counter = FlopCounterMode(display=False), _Counter()
            with flop_counter, counter:
                output = model(*inputs)
            flops_by_module = flop_counter.get_flop_counts().get("Global", {})
    except Exception as e:
        raise ProblemError(path, f"the reference forward failed on the meta device: "
                           f"{type(e).__name__}: {e}") from e
    flops = int(flop_counter.get_total_flops())
    flops_by_category: Counter[str] = Counter()
    for func, n in flops_by_module.items():
        flops_by_category[op_category(func) or "other"] += int(n)
    params = list(model.parameters()) + list(model.buffers())
    in_tensors, out_tensors = _tensors(inputs), _tensors(output)
    histogram = {c: counter.histogram[c] for c in OP_CATEGORIES if counter.histogram[c]}
    tags = sorted(histogram, key=lambda c: (-flops_by_category[c], -histogram[c],
                                            OP_CATEGORIES.index(c)))
    return StaticFeatures(
        flops=flops,
        pointwise_flops=int(counter.pointwise_flops),
        bytes_min=_nbytes(in_tensors) + _nbytes(params) + _nbytes(out_tensors),
        bytes_unfused=int(counter.bytes),
        n_ops=int(sum(histogram.values())),
        op_histogram=histogram,
        param_count=sum(p.numel() for p in model.parameters()),
        param_bytes=_nbytes(params),
        input_bytes=_nbytes(in_tensors),
        output_bytes=_nbytes(out_tensors),
        n_inputs=len(in_tensors),
        max_input_rank=max((t.dim() for t in in_tensors), default=0),
        tags=tuple(t for t in tags if t not in ("copy", "other")) or tuple(tags),
    )
