"""The Triton kernel sources a candidate inlines as text: the header, the row-launch helper,
the softmax and norm kernels with their launchers, and the operand helper of the generated
pointwise kernels (whose own source is generated in :mod:`.match`).

The sources are plain strings; ``import triton`` in them runs in the candidate, not here.
"""

from __future__ import annotations

MAX_ROW_BLOCK = 16384
"""Longest row (in elements) a row kernel holds in registers at once; longer rows loop."""

LOOP_ROW_BLOCK = 4096
"""The step of the looping row kernels."""

POINTWISE_BLOCK = 1024
"""Elements per program of a pointwise kernel."""

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
