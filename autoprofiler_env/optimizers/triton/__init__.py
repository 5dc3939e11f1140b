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
matching nodes are replaced by ``call_function`` nodes calling the launchers (their source is in
:mod:`.templates`), and the new ``forward`` is generated from the graph. The candidate is the
problem's source, then the Triton kernels and launchers as plain source text (the candidate
imports nothing of this package, so it is a standalone KernelBench ``ModelNew`` file), then
``class ModelNew(Model)`` with the generated ``forward``; it inherits ``Model.__init__``, so the
weights are the reference's.

The graph is traced at the problem's real sizes and, when it has ``SMOKE_SIZES``, at those too;
a rewrite applies only if both give the same candidate (fx bakes module constants read in
``forward`` into the graph; a size-dependent candidate would be wrong at the other size). Models
that fx cannot trace (data-dependent control flow, ...) simply do not match.

The package: :mod:`.templates` (the kernel sources), :mod:`.trace` (fx tracing, nodes as
canonical calls), :mod:`.match` (the softmax, norm and pointwise matchers), :mod:`.render`
(the standalone forward and the candidate's source, :class:`Rewrite`); this module registers
the ``triton_*`` transformations and holds :func:`analyze`.

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

import functools
import re
from pathlib import Path
from typing import Callable

from autoprofiler_env.errors import OptimizationError
from autoprofiler_env.features import StaticFeatures
from autoprofiler_env.optimizers.transforms import Transformation, register
from autoprofiler_env.optimizers.triton.match import _match_norm, _match_pointwise, _match_softmax
from autoprofiler_env.optimizers.triton.render import Rewrite, _render
from autoprofiler_env.optimizers.triton.trace import _NoMatch, _trace, _Traced
from autoprofiler_env.problems.problem import Problem, import_problem

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
