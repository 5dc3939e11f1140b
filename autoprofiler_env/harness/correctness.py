"""Comparing a candidate's outputs with the reference's, with guards against degenerate
outputs (KernelBench issue 165: an all-zeros output passed ``allclose`` on some problems)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils._pytree import tree_flatten

from autoprofiler_env.harness.records import ErrorKind


@dataclass(frozen=True)
class Mismatch:
    kind: ErrorKind
    message: str


def _leaves(output) -> list:
    return tree_flatten(output)[0]


_CHUNK = 1 << 24  # elements compared at a time: bounds the temporaries of a 1 GB output


def _flat_chunks(*tensors: torch.Tensor):
    flat = [t.detach().reshape(-1) for t in tensors]
    for start in range(0, flat[0].numel(), _CHUNK):
        yield [f[start:start + _CHUNK].double() for f in flat]


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


def compare(reference, candidate, atol: float, rtol: float) -> tuple[Mismatch | None, float]:
    """Checks a candidate's output against the reference's.

    Returns ``(None, max_abs_error)`` when they match, otherwise the first mismatch found:
    structure, shape, dtype, non-finite values, a constant output where the reference varies,
    or values outside ``atol + rtol * |reference|``.
    """
    ref_leaves, cand_leaves = _leaves(reference), _leaves(candidate)
    if len(ref_leaves) != len(cand_leaves):
        return Mismatch(ErrorKind.STRUCTURE, f"{len(cand_leaves)} outputs, expected "
                        f"{len(ref_leaves)}"), float("nan")
    worst = 0.0
    for i, (ref, cand) in enumerate(zip(ref_leaves, cand_leaves)):
        where = f"output {i}" if len(ref_leaves) > 1 else "the output"
        if not isinstance(ref, torch.Tensor):
            if isinstance(cand, torch.Tensor) or cand != ref:
                return Mismatch(ErrorKind.MISMATCH, f"{where} is {cand!r}, expected {ref!r}"), \
                    float("nan")
            continue
        if not isinstance(cand, torch.Tensor):
            return Mismatch(ErrorKind.STRUCTURE, f"{where} is a {type(cand).__name__}, "
                            "expected a tensor"), float("nan")
        if cand.shape != ref.shape:
            return Mismatch(ErrorKind.SHAPE, f"{where} has shape {tuple(cand.shape)}, expected "
                            f"{tuple(ref.shape)}"), float("nan")
        if cand.dtype != ref.dtype:
            return Mismatch(ErrorKind.DTYPE, f"{where} has dtype {cand.dtype}, expected "
                            f"{ref.dtype}"), float("nan")
        if cand.device != ref.device:
            return Mismatch(ErrorKind.STRUCTURE, f"{where} is on {cand.device}, expected "
                            f"{ref.device}"), float("nan")
        if not torch.is_floating_point(ref) and not torch.is_complex(ref):
            if not torch.equal(cand, ref):
                return Mismatch(ErrorKind.MISMATCH, f"{where}: integer values differ"), \
                    float("nan")
            continue
        ref_finite = torch.isfinite(ref)
        if bool((~torch.isfinite(cand) & ref_finite).any()):
            n = int((~torch.isfinite(cand) & ref_finite).sum())
            return Mismatch(ErrorKind.NONFINITE, f"{where} has {n} NaN/Inf values where the "
                            "reference is finite"), float("nan")
        if _is_constant(cand) and not _is_constant(ref):
            return Mismatch(ErrorKind.DEGENERATE, f"{where} is the constant "
                            f"{cand.reshape(-1)[0].item():.4g} everywhere; the reference "
                            "varies"), float("nan")
        err, n_bad = 0.0, 0
        for r, c in _flat_chunks(ref, cand):
            diff = torch.where(torch.isfinite(r), (c - r).abs(), torch.zeros_like(r))
            err = max(err, float(diff.max()))
            n_bad += int((diff > atol + rtol * r.abs()).sum())
        worst = max(worst, err)
        if n_bad:
            return Mismatch(ErrorKind.MISMATCH, f"{where}: {n_bad} of {ref.numel()} values "
                            f"outside atol={atol}, rtol={rtol} (max abs error {err:.3g})"), err
    return None, worst
