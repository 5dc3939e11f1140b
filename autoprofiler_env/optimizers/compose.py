"""Candidates as compositions of decisions: one transformation per kind, layered.

A kernel engineer makes several decisions at once (docs/optimizers.md): how the code is
generated, at which precision it runs, in which memory format, with which convolution
algorithm, and how it is launched. A composed candidate takes at most one transformation of
each kind and stacks their ``ModelNew`` classes, innermost first:

| kind | transformations | its layer |
|---|---|---|
| codegen | compile, max_autotune, triton_* | wraps (or, Triton, replaces) the reference's forward |
| precision | tf32, autocast_bf16, autocast_fp16 | runs what is inside at that precision |
| memory | channels_last | converts the weights and 4-D inputs to NHWC |
| conv_algo | cudnn_benchmark | lets cuDNN pick the fastest algorithm |
| launch | cuda_graph | captures everything inside in one CUDA graph |

Each layer is the transformation's own body with its class renamed: the innermost layer
subclasses ``Model``, each next one the layer inside it, and the outermost is ``ModelNew``;
every layer reaches the one inside through ``super().forward``. A composition's name is its
parts' names joined by ``+``, innermost first (``"compile+autocast_bf16+cuda_graph"``); a
name without ``+`` is the single transformation, with the very source it has alone.

Not composed: two transformations of one kind (one decision, one choice), and a Triton
kernel with autocast (the hand-written kernels are the fp32 computation they replace).
"""

from __future__ import annotations

import textwrap

from autoprofiler_env.errors import OptimizationError
from autoprofiler_env.features import StaticFeatures
from autoprofiler_env.optimizers.transforms import GENERATED_MARK, TRANSFORMATIONS
from autoprofiler_env.problems.problem import Problem

KINDS = ("codegen", "precision", "memory", "conv_algo", "launch")
"""The kinds of decision, innermost layer first."""
_KIND = {"compile": "codegen", "max_autotune": "codegen", "tf32": "precision",
         "autocast_bf16": "precision", "autocast_fp16": "precision",
         "channels_last": "memory", "cudnn_benchmark": "conv_algo", "cuda_graph": "launch"}
_CLASS_LINE = "class ModelNew(Model):"


def kind(name: str) -> str:
    """The kind of decision a transformation makes."""
    if name.startswith("triton_"):
        return "codegen"
    try:
        return _KIND[name]
    except KeyError:
        raise OptimizationError(f"{name!r} is not a transformation of the catalogue: "
                                f"{', '.join(sorted(TRANSFORMATIONS))}") from None


def parts(name: str) -> tuple[str, ...]:
    """The transformations of a (composed) candidate's name, innermost first."""
    return tuple(name.split("+"))


def composed_name(names) -> str:
    """The canonical name of a composition: its parts innermost first, checked.

    Raises:
        OptimizationError: an unknown transformation, two of one kind, or a Triton kernel
            with autocast.
    """
    names = list(dict.fromkeys(names))
    if not names:
        raise OptimizationError("a composition needs at least one transformation")
    kinds = [kind(n) for n in names]
    for k in KINDS:
        same = [n for n, nk in zip(names, kinds) if nk == k]
        if len(same) > 1:
            raise OptimizationError(f"{' and '.join(same)} both decide the {k}: a composition "
                                    "takes one transformation of each kind")
    if any(n.startswith("triton_") for n in names) and any(
            n.startswith("autocast_") for n in names):
        raise OptimizationError("a Triton kernel is not composed with autocast: the kernel is "
                                "the fp32 computation it replaces")
    return "+".join(sorted(names, key=lambda n: KINDS.index(kind(n))))


def applies(problem: Problem, features: StaticFeatures, name: str,
            device: str = "cuda") -> bool:
    """Whether every part of ``name`` applies to the problem (on ``device``) and the parts
    compose."""
    try:
        names = parts(composed_name(parts(name)))
    except OptimizationError:
        return False
    on_gpu = device.startswith("cuda")
    return all((on_gpu or not TRANSFORMATIONS[n].needs_cuda)
               and TRANSFORMATIONS[n].applies(problem, features) for n in names)


def compose(problem: Problem, features: StaticFeatures, name: str, **params) -> str:
    """The candidate's full source for a composed name (``params`` go to the codegen layer:
    a Triton kernel's ``block`` and ``num_warps``).

    Raises:
        OptimizationError: the parts do not compose, or one does not apply to the problem.
    """
    names = parts(composed_name(parts(name)))
    if len(names) == 1:
        return TRANSFORMATIONS[names[0]].rewrite(problem, features, **params)
    layers, base = [], "Model"
    for i, part in enumerate(names):
        transformation = TRANSFORMATIONS[part]
        if not transformation.applies(problem, features):
            raise OptimizationError(f"{part} does not apply to {problem.uri} (tags "
                                    f"{', '.join(features.tags) or 'none'})")
        code = textwrap.dedent(transformation.body(
            problem, features, **(params if kind(part) == "codegen" else {}))).strip()
        if code.count(_CLASS_LINE) != 1:
            raise OptimizationError(f"{part}'s body does not define ModelNew(Model) once: it "
                                    "cannot be layered")
        cls = "ModelNew" if i == len(names) - 1 else f"_Layer{i}_{part}"
        layers.append(f"# layer {i}: {part}\n" + code.replace(_CLASS_LINE,
                                                              f"class {cls}({base}):"))
        base = cls
    joined = "+".join(names)
    return (problem.source.rstrip() + "\n\n\n" + GENERATED_MARK.format(name=joined) + "\n"
            + "\n\n\n".join(layers) + "\n")
