"""The pattern matchers: each replaces the matching nodes of a traced graph by calls to
launchers and returns ``(sites, kernel sources, launchers)``.

- :func:`_match_softmax`: softmax / log_softmax over the last dim, a scalar scale folded in.
- :func:`_match_norm`: LayerNorm, or RMSNorm with ``rms=True``.
- :func:`_match_pointwise`: chains of elementwise ops (:func:`_chains`), one generated kernel
  per distinct chain (:func:`_pointwise_source`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autoprofiler_env.numeric import is_finite_number
from autoprofiler_env.optimizers.triton.templates import (
    _LAYER_NORM,
    _NORM,
    _OPERAND,
    _RMS_NORM,
    _ROW_LAUNCH,
    _SOFTMAX,
    POINTWISE_BLOCK,
)
from autoprofiler_env.optimizers.triton.trace import (
    _FLOAT_DTYPES,
    _as_call,
    _Call,
    _is_float_tensor,
    _launcher,
    _tensor_meta,
    _Traced,
)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and is_finite_number(x)


def _lit(x) -> str:
    """A float literal for generated Triton code."""
    text = repr(float(x))
    return f"({text})" if text.startswith("-") else text


def _user_list(node) -> list:
    return list(node.users)



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
