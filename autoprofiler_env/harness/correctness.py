"""Comparing a candidate's outputs with the reference's, with guards against degenerate
outputs (KernelBench issue 165: an all-zeros output passed ``allclose`` on some problems)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from autoprofiler_env.harness.records import ErrorKind


@dataclass(frozen=True)
class Mismatch:
    kind: ErrorKind
    message: str


_CHUNK = 1 << 24  # elements compared at a time: bounds the temporaries of a 1 GB output


def _flat_chunks(*tensors: torch.Tensor):
    """Chunks of the flattened tensors, at least in float32 (float64 stays float64)."""
    flat = [t.detach().reshape(-1) for t in tensors]
    wide = torch.float64 if flat[0].dtype in (torch.float64, torch.complex128) else torch.float32
    for start in range(0, flat[0].numel(), _CHUNK):
        chunk = [f[start:start + _CHUNK] for f in flat]
        if chunk[0].is_complex():
            chunk = [torch.view_as_real(c) for c in chunk]
        yield [c.to(wide) for c in chunk]


def _is_constant(t: torch.Tensor) -> bool:
    return t.numel() > 1 and bool((t == t.reshape(-1)[0]).all())


def _within(reference: torch.Tensor, value, atol: float, rtol: float) -> bool:
    """Whether ``value`` (a tensor or a number) is within ``atol + rtol * |reference|``
    everywhere, as ``torch.allclose(value, reference)`` would say, chunk by chunk."""
    if isinstance(value, torch.Tensor):
        return all(bool(((v - r).abs() <= atol + rtol * r.abs()).all())
                   for r, v in _flat_chunks(reference, value))
    return all(bool(((r - value).abs() <= atol + rtol * r.abs()).all())
               for (r,) in _flat_chunks(reference))


def trivial_match(reference: torch.Tensor, atol: float, rtol: float) -> str | None:
    """Names a constant that matches the reference output at this tolerance, if any.

    Such an output makes a problem ill-posed: a candidate returning that constant would pass.
    """
    if reference.numel() == 0 or not torch.is_floating_point(reference):
        return None
    if _within(reference, 0.0, atol, rtol):
        return "zeros"
    if reference.numel() > 1:
        mean = reference.double().mean().item()
        if _within(reference, mean, atol, rtol):
            return f"the constant {mean:.4g}"
    return None


def constant_fits(reference: torch.Tensor) -> list[tuple[str, float]]:
    """The constants a degenerate candidate would return (zeros, then the output's mean where
    it has more than one value), each with the smallest ``t`` at which it matches the
    reference output with ``atol = rtol = t``: ``max |r - c| / (1 + |r|)``, in one pass over
    the output. None for an empty or non-floating output. The least ``t`` is the output's
    ``constant_needed``: a regime that loose admits a constant candidate
    (:func:`~autoprofiler_env.harness.tolerance.admits_constant`); :func:`trivial_match`
    asks the same at one (atol, rtol).
    """
    if reference.numel() == 0 or not torch.is_floating_point(reference):
        return []
    constants = [("zeros", 0.0)]
    if reference.numel() > 1:
        mean = reference.double().mean().item()
        constants.append((f"the constant {mean:.4g}", mean))
    worst = [0.0] * len(constants)
    for (r,) in _flat_chunks(reference):
        scale = 1 + r.abs()
        for i, (_, c) in enumerate(constants):
            worst[i] = max(worst[i], float(((r - c).abs() / scale).max()))
    return [(name, t) for (name, _), t in zip(constants, worst)]


@dataclass(frozen=True)
class Opaque:
    """An output leaf that is neither a tensor nor a plain value (only its type is known)."""

    type_name: str


@dataclass
class Comparison:
    """The outcome of comparing one set of outputs.

    Attributes:
        mismatch: the first failure found at the judged tolerance, or None.
        needed: per floating dtype, ``max |c - r| / (1 + |r|)``: the smallest ``t`` passing
            with ``atol = rtol = t`` (``inf`` where no tolerance passes).
        max_abs_error: the largest ``|c - r|``.
    """

    mismatch: Mismatch | None
    needed: dict = field(default_factory=dict)
    max_abs_error: float = 0.0


def _never(kind: ErrorKind, message: str, dtypes) -> Comparison:
    return Comparison(Mismatch(kind, message), {d: math.inf for d in dtypes}, math.nan)


def _dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def compare(reference: list, candidate: list, tolerance_for) -> Comparison:
    """Compares a candidate's output leaves with the reference's (CPU tensors and values).

    ``tolerance_for(dtype_name) -> (atol, rtol)`` gives the judged tolerance per dtype. The
    first failure is reported: structure, shape, dtype, non-finite values, a constant output
    where the reference varies, or values outside ``atol + rtol * |reference|``; ``needed`` is
    measured over every value even so, when the shapes allow it.
    """
    dtypes = sorted({_dtype_name(r) for r in reference
                     if isinstance(r, torch.Tensor) and (r.is_floating_point() or r.is_complex())})
    if len(reference) != len(candidate):
        return _never(ErrorKind.STRUCTURE, f"{len(candidate)} outputs, expected "
                      f"{len(reference)}", dtypes)
    needed: dict[str, float] = {d: 0.0 for d in dtypes}
    worst = 0.0
    first: Mismatch | None = None
    for i, (ref, cand) in enumerate(zip(reference, candidate)):
        where = f"output {i}" if len(reference) > 1 else "the output"
        if not isinstance(ref, torch.Tensor):
            if isinstance(cand, torch.Tensor) or type(cand) is not type(ref) or cand != ref:
                return _never(ErrorKind.MISMATCH, f"{where} is {cand!r}, expected {ref!r}",
                              dtypes)
            continue
        if not isinstance(cand, torch.Tensor):
            kind = cand.type_name if isinstance(cand, Opaque) else type(cand).__name__
            return _never(ErrorKind.STRUCTURE, f"{where} is a {kind}, expected a tensor",
                          dtypes)
        if cand.shape != ref.shape:
            return _never(ErrorKind.SHAPE, f"{where} has shape {tuple(cand.shape)}, expected "
                          f"{tuple(ref.shape)}", dtypes)
        if cand.dtype != ref.dtype:
            return _never(ErrorKind.DTYPE, f"{where} has dtype {cand.dtype}, expected "
                          f"{ref.dtype}", dtypes)
        if not torch.is_floating_point(ref) and not torch.is_complex(ref):
            if not torch.equal(cand, ref):
                return _never(ErrorKind.MISMATCH, f"{where}: integer values differ", dtypes)
            continue
        ref_finite = torch.isfinite(ref)
        bad = ~torch.isfinite(cand) & ref_finite
        if bool(bad.any()):
            return _never(ErrorKind.NONFINITE, f"{where} has {int(bad.sum())} NaN/Inf values "
                          "where the reference is finite", dtypes)
        if _is_constant(cand) and not _is_constant(ref):
            return _never(ErrorKind.DEGENERATE, f"{where} is the constant "
                          f"{cand.reshape(-1)[0].item():.4g} everywhere; the reference varies",
                          dtypes)
        atol, rtol = tolerance_for(_dtype_name(ref))
        err, ratio, n_bad = 0.0, 0.0, 0
        for r, c in _flat_chunks(ref, cand):
            finite = torch.isfinite(r)
            diff = torch.where(finite, (c - r).abs(), torch.zeros_like(r))
            if diff.numel():
                err = max(err, float(diff.max()))
                ratio = max(ratio, float((diff / (1 + r.abs().nan_to_num(0, 0, 0))).max()))
            n_bad += int((diff > atol + rtol * r.abs()).sum())
        worst = max(worst, err)
        name = _dtype_name(ref)
        needed[name] = max(needed[name], ratio)
        if n_bad and first is None:
            first = Mismatch(ErrorKind.MISMATCH, f"{where}: {n_bad} of {ref.numel()} values "
                             f"outside atol={atol:g}, rtol={rtol:g} (max abs error {err:.3g})")
    return Comparison(first, needed, worst)


FINGERPRINT_CHUNK = 1 << 24
"""Elements summed at a time by `fingerprint`: its float64 copy is 128 MB, never the output's
twice (a 7 GB fp32 output, KernelBench's level1/35_GroupNorm_, asked 14 GB at once)."""


def _total(flat: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The sum of a flat tensor in `dtype`, a chunk at a time (the upcast is a copy)."""
    if flat.numel() == 0:
        return torch.zeros((), dtype=dtype)
    return torch.stack([c.to(dtype).sum() for c in flat.split(FINGERPRINT_CHUNK)]).sum()


def fingerprint(leaves: list) -> tuple:
    """A cheap, hashable identity of each output leaf (its sum and a strided sample), to tell
    an output that stays the same across input sets."""
    out = []
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            flat = leaf.reshape(-1)
            sample = flat[::max(1, flat.numel() // 4096)]
            if flat.is_complex():
                flat, sample = flat.real, sample.real
            if flat.is_floating_point():
                out.append((tuple(leaf.shape), float(_total(flat, torch.float64).nan_to_num(0)),
                            tuple(sample.double().nan_to_num(0).tolist())))
            else:
                out.append((tuple(leaf.shape), int(_total(flat, torch.int64)),
                            tuple(sample.tolist())))
        else:
            out.append(repr(leaf))
    return tuple(out)
