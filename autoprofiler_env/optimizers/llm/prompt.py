"""The prompt: KernelBench's request for a ``ModelNew``, with the problem's source, the rules
a ``ModelNew`` must keep and the profile (:func:`build_messages`)."""

from __future__ import annotations

from autoprofiler_env.problems.problem import Problem
from autoprofiler_env.profiler.records import Profile
from autoprofiler_env.profiler.render import render_markdown

Message = dict[str, str]

SYSTEM_PROMPT = (
    "You are an expert in GPU performance engineering: CUDA, Triton and PyTorch. You rewrite "
    "PyTorch programs into faster ones that compute the same results."
)

INSTRUCTIONS = """\
You are given a PyTorch program: a `Model` (an `nn.Module`), with `get_inputs()` and \
`get_init_inputs()`, which give its forward's inputs and its constructor's arguments. \
Write `ModelNew`, an optimized version of `Model` that runs faster on an NVIDIA GPU.

Rules:
- `ModelNew` has the same interface as `Model`: it is built with the same arguments \
(`ModelNew(*get_init_inputs())`), its forward takes the same inputs and returns outputs of \
the same structure, shapes and dtypes.
- Results in fp32 must match `Model`'s within atol = rtol = 1e-2, on fresh random inputs.
- Create parameters the way `Model` does and in the same order: the weights of both are \
initialized from the same random seed.
- You may use PyTorch operators, custom CUDA kernels compiled with \
`torch.utils.cpp_extension.load_inline`, or Triton kernels. Replace the operators whose \
replacement pays off (fusing them, using a better algorithm, or avoiding memory traffic).
- Your code is a complete, self-contained Python module: the imports, any kernels and \
helpers, and `class ModelNew(nn.Module)`. It need not define `Model`, `get_inputs` or \
`get_init_inputs`.
"""

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


def build_messages(problem: Problem, profile: Profile | None) -> list[Message]:
    """The chat messages (system, then user) asking for a ``ModelNew`` for ``problem``.

    A pure function of the problem's source and the profile: the same inputs give the same
    messages.
    """
    source = problem.source.rstrip()
    user = "\n".join([
        INSTRUCTIONS,
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
