"""The transformation catalogue: real rewrites of a problem into ``ModelNew`` source.

Every candidate is the problem's own source followed by ``class ModelNew(Model)``, which
changes how the same computation runs; the weights are the reference's (built with the same
seed), so the harness can compare outputs. Each transformation has a rule, from the problem's
static features (its op graph and tags), for when it applies.

| name | what it does | applies when |
|---|---|---|
| compile | ``torch.compile`` (Inductor: fuses pointwise and reduction ops) | the forward has >= 2 ops, or its main op is one Inductor generates (pointwise, reduction, softmax, norm, scan, pooling, loss) |
| max_autotune | ``torch.compile(mode="max-autotune-no-cudagraphs")``: autotuned GEMM / conv templates | a matmul, convolution or attention |
| cuda_graph | captures the forward once in a CUDA graph, then replays it | a GPU, and >= 2 ops (launch overhead to save) |
| tf32 | TF32 tensor cores for fp32 matmuls and convolutions | a matmul, convolution, attention or RNN |
| autocast_bf16 | runs the forward under bf16 autocast, outputs back to fp32 | a matmul, convolution, attention or RNN |
| autocast_fp16 | the same in fp16 | as autocast_bf16, on a GPU |
| channels_last | NHWC memory format for weights and 4-D inputs | a 2-D convolution with 4-D inputs |
| cudnn_benchmark | cuDNN tries its algorithms and keeps the fastest | a convolution or RNN |

The hand-written Triton kernels (``triton_*``) are in :mod:`.triton`; they replace the
matching part of the model's graph.
"""  # noqa: E501 (a markdown table's rows are one line each)

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Callable

from autoprofiler_env.errors import OptimizationError
from autoprofiler_env.features import StaticFeatures
from autoprofiler_env.problems.problem import Problem

GENERATED_MARK = "# ---- autoprofiler candidate: {name} ----"

_GEMM_LIKE = {"matmul", "conv", "conv_transpose", "attention", "rnn"}
_INDUCTOR_LIKE = {"pointwise", "reduction", "softmax", "norm", "scan", "pooling", "loss"}


@dataclass(frozen=True)
class Transformation:
    """One rewrite of a problem into ModelNew source.

    Attributes:
        name: its id (``"compile"``).
        description: one line.
        needs_cuda: it only makes sense (or only runs) on a GPU.
        applies: the rule: ``applies(problem, features) -> bool``.
        body: ``body(problem, features, **params) -> str``: the code after the problem's
            source, defining ``class ModelNew(Model)``.
    """

    name: str
    description: str
    needs_cuda: bool
    applies: Callable[[Problem, StaticFeatures], bool]
    body: Callable[..., str]

    def rewrite(self, problem: Problem, features: StaticFeatures, **params) -> str:
        """The candidate's full source.

        Raises:
            OptimizationError: the transformation does not apply to this problem.
        """
        if not self.applies(problem, features):
            raise OptimizationError(f"{self.name} does not apply to {problem.uri} (tags "
                                    f"{', '.join(features.tags) or 'none'})")
        code = self.body(problem, features, **params)
        return (problem.source.rstrip() + "\n\n\n" + GENERATED_MARK.format(name=self.name)
                + "\n" + textwrap.dedent(code).strip() + "\n")


def _tags(features: StaticFeatures) -> set[str]:
    return set(features.tags)


# -- the bodies ---------------------------------------------------------------------------------

def _compile_body(mode: str | None) -> Callable[..., str]:
    def body(problem, features, **params) -> str:
        return f'''
            import torch as _torch


            class ModelNew(Model):
                """The reference, compiled by torch.compile (mode={mode!r})."""

                def __init__(self, *args, **kwargs):
                    super().__init__(*args, **kwargs)
                    self._compiled = _torch.compile(super().forward, mode={mode!r}, dynamic=False)

                def forward(self, *args):
                    return self._compiled(*args)
            '''
    return body


def _cuda_graph_body(problem, features, **params) -> str:
    return '''
        import torch as _torch


        class ModelNew(Model):
            """The reference captured once in a CUDA graph and replayed: one launch instead of
            one per kernel. Inputs are copied into the graph's static buffers; the output is
            the graph's static output (overwritten by the next call)."""

            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self._graph = None
                self._key = None

            def _capture(self, args):
                self._static_args = [a.clone() if isinstance(a, _torch.Tensor) else a
                                     for a in args]
                stream = _torch.cuda.Stream()
                stream.wait_stream(_torch.cuda.current_stream())
                with _torch.cuda.stream(stream):
                    for _ in range(3):
                        super().forward(*self._static_args)
                _torch.cuda.current_stream().wait_stream(stream)
                self._graph = _torch.cuda.CUDAGraph()
                with _torch.cuda.graph(self._graph):
                    self._static_out = super().forward(*self._static_args)

            def forward(self, *args):
                key = tuple((a.shape, a.dtype, a.device) if isinstance(a, _torch.Tensor) else a
                            for a in args)
                if self._graph is None or key != self._key:
                    self._key = key
                    self._capture(args)
                for static, a in zip(self._static_args, args):
                    if isinstance(a, _torch.Tensor):
                        static.copy_(a)
                self._graph.replay()
                return self._static_out
        '''


def _tf32_body(problem, features, **params) -> str:
    return '''
        import torch as _torch


        class ModelNew(Model):
            """The reference with TF32 tensor cores for fp32 matmuls and convolutions."""

            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                _torch.backends.cuda.matmul.allow_tf32 = True
                _torch.backends.cudnn.allow_tf32 = True
                _torch.set_float32_matmul_precision("high")
        '''


def _autocast_body(dtype: str) -> Callable[..., str]:
    def body(problem, features, **params) -> str:
        return f'''
            import torch as _torch
            from torch.utils._pytree import tree_map as _tree_map


            def _to_fp32(t):
                if isinstance(t, _torch.Tensor) and t.is_floating_point():
                    return t.float()
                return t


            class ModelNew(Model):
                """The reference under {dtype} autocast; floating outputs cast back to fp32."""

                def forward(self, *args):
                    device = next((a.device.type for a in args if isinstance(a, _torch.Tensor)),
                                  "cuda")
                    with _torch.autocast(device_type=device, dtype=_torch.{dtype}):
                        out = super().forward(*args)
                    return _tree_map(_to_fp32, out)
            '''
    return body


def _channels_last_body(problem, features, **params) -> str:
    return '''
        import torch as _torch


        class ModelNew(Model):
            """The reference in NHWC (channels-last) memory format: weights and 4-D inputs."""

            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.to(memory_format=_torch.channels_last)

            def forward(self, *args):
                args = [a.contiguous(memory_format=_torch.channels_last)
                        if isinstance(a, _torch.Tensor) and a.dim() == 4 else a for a in args]
                return super().forward(*args)
        '''


def _cudnn_benchmark_body(problem, features, **params) -> str:
    return '''
        import torch as _torch


        class ModelNew(Model):
            """The reference with cuDNN's autotuner: the fastest algorithm per shape."""

            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                _torch.backends.cudnn.benchmark = True
        '''


# -- the catalogue ------------------------------------------------------------------------------

def _gemm_like(problem: Problem, f: StaticFeatures) -> bool:
    return bool(_tags(f) & _GEMM_LIKE)


TRANSFORMATIONS: dict[str, Transformation] = {t.name: t for t in (
    Transformation(
        "compile", "torch.compile (Inductor fusion)", False,
        lambda p, f: f.n_ops >= 2 or bool(f.tags and f.tags[0] in _INDUCTOR_LIKE),
        _compile_body(None)),
    Transformation(
        "max_autotune", "torch.compile with autotuned GEMM/conv templates, no CUDA graphs",
        True, _gemm_like, _compile_body("max-autotune-no-cudagraphs")),
    Transformation("cuda_graph", "capture once in a CUDA graph, replay", True,
                   lambda p, f: f.n_ops >= 2, _cuda_graph_body),
    Transformation("tf32", "TF32 tensor cores for fp32 matmul and convolution", True,
                   _gemm_like, _tf32_body),
    Transformation("autocast_bf16", "bf16 autocast, fp32 outputs", False, _gemm_like,
                   _autocast_body("bfloat16")),
    Transformation("autocast_fp16", "fp16 autocast, fp32 outputs", True, _gemm_like,
                   _autocast_body("float16")),
    Transformation("channels_last", "NHWC memory format for 2-D convolutions", False,
                   lambda p, f: bool(_tags(f) & {"conv", "conv_transpose"})
                   and f.max_input_rank == 4, _channels_last_body),
    # cudnn.benchmark picks among cuDNN's convolution algorithms (PyTorch's
    # torch.backends.cudnn docs); a cuDNN RNN has no such choice
    Transformation("cudnn_benchmark", "cuDNN autotuner", True,
                   lambda p, f: bool(_tags(f) & {"conv", "conv_transpose"}),
                   _cudnn_benchmark_body),
)}


def register(transformation: Transformation) -> None:
    """Adds a transformation to the catalogue (the Triton rewrites register themselves)."""
    TRANSFORMATIONS[transformation.name] = transformation


def applicable(problem: Problem, features: StaticFeatures, device: str = "cuda"
               ) -> list[Transformation]:
    """The transformations whose rule holds for this problem, in catalogue order."""
    on_gpu = device.startswith("cuda")
    return [t for t in TRANSFORMATIONS.values()
            if (on_gpu or not t.needs_cuda) and t.applies(problem, features)]


def identity_source(problem: Problem) -> str:
    """The reference itself as a candidate: what an optimizer returns when nothing applies."""
    return (problem.source.rstrip() + "\n\n\n" + GENERATED_MARK.format(name="identity")
            + "\nclass ModelNew(Model):\n    \"\"\"The reference, unchanged.\"\"\"\n")
