"""The prompt: KernelBench's request for a ``ModelNew``, with the problem's source, the rules
a ``ModelNew`` must keep and the profile (:func:`build_messages`)."""

from __future__ import annotations

import math

from autoprofiler_env.problems.problem import Problem
from autoprofiler_env.profiler.records import Profile
from autoprofiler_env.profiler.render import render_markdown

Message = dict[str, str]

SYSTEM_PROMPT = (
    "You are an expert in GPU performance engineering: CUDA, Triton and PyTorch. You rewrite "
    "PyTorch programs into faster ones that compute the same results."
)

DEFAULT_TOLERANCE = (1e-2, 1e-2)
"""(atol, rtol) the prompt states when it is not told the judge's: KernelBench v0.1's fp32
tolerance, the harness's default (:data:`autoprofiler_env.harness.tolerance.DEFAULT_ATOL`,
which a test checks it equals: the harness package imports torch, which this module's readers,
the tree's LLM proposer among them, do not need)."""

_INSTRUCTIONS = """\
You are given a PyTorch program: a `Model` (an `nn.Module`), with `get_inputs()` and \
`get_init_inputs()`, which give its forward's inputs and its constructor's arguments. \
Write `ModelNew`, an optimized version of `Model` that runs faster on an NVIDIA GPU.

Rules:
- `ModelNew` has the same interface as `Model`: it is built with the same arguments \
(`ModelNew(*get_init_inputs())`), its forward takes the same inputs and returns outputs of \
the same structure, shapes and dtypes.
- Results in fp32 must match `Model`'s within {tolerance}, on fresh random inputs.
- Create parameters the way `Model` does and in the same order: the weights of both are \
initialized from the same random seed.
- You may use PyTorch operators, custom CUDA kernels compiled with \
`torch.utils.cpp_extension.load_inline`, or Triton kernels. Replace the operators whose \
replacement pays off (fusing them, using a better algorithm, or avoiding memory traffic).
- Your code is a complete, self-contained Python module: the imports, any kernels and \
helpers, and `class ModelNew(nn.Module)`. It need not define `Model`, `get_inputs` or \
`get_init_inputs`.
"""



def _number(x: float) -> str:
    """``1e-2`` for a power of ten (as KernelBench writes its tolerance), else ``%g``."""
    if x > 0:
        exponent = round(math.log10(x))
        if math.isclose(x, 10.0 ** exponent, rel_tol=1e-9):
            return f"1e{exponent}"
    return f"{x:g}"


def instructions(tolerance: tuple[float, float] = DEFAULT_TOLERANCE) -> str:
    """The rules of the prompt, stating ``tolerance`` ((atol, rtol) of fp32 results: the
    judge's own, so that a model is not asked for less, or more, than it is judged by)."""
    atol, rtol = tolerance
    stated = (f"atol = rtol = {_number(atol)}" if atol == rtol
              else f"atol = {_number(atol)}, rtol = {_number(rtol)}")
    return _INSTRUCTIONS.format(tolerance=stated)


INSTRUCTIONS = instructions()
"""The rules at the default tolerance (:data:`DEFAULT_TOLERANCE`)."""

CLOSING = """\
Reply with exactly one Python code block (```python ... ```) holding the complete module \
that defines `class ModelNew`. Keep any explanation short and outside the code block."""

NO_PROFILE_TEXT = ("No profile was collected for this program: optimize it from its source "
                   "alone.\n")


def render_profile(profile: Profile | None) -> str:
    """The profile's part of the prompt: :func:`render_markdown`, or a note that none was
    collected."""
    if profile is None or not profile.sections:
        return NO_PROFILE_TEXT
    return render_markdown(profile)


def build_messages(problem: Problem, profile: Profile | None,
                   tolerance: tuple[float, float] = DEFAULT_TOLERANCE) -> list[Message]:
    """The chat messages (system, then user) asking for a ``ModelNew`` for ``problem``,
    judged at ``tolerance`` ((atol, rtol) of fp32 results).

    A pure function of the problem's source, the profile and the tolerance: the same inputs
    give the same messages.
    """
    source = problem.source.rstrip()
    user = "\n".join([
        instructions(tolerance),
        f"## The program: `{problem.name}` ({problem.uri})",
        "",
        "```python",
        source,
        "```",
        "",
        "## Its profile",
        "",
        render_profile(profile).rstrip(),
        "",
        "## Your answer",
        "",
        CLOSING,
    ])
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
