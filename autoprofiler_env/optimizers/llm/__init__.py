"""The LLM optimizer: a language model rewrites a problem into ``ModelNew``, shown the profile.

>>> from autoprofiler_env.optimizers.llm import LLMOptimizer, OpenAIChatBackend
>>> from autoprofiler_env.problems import load_problem
>>> backend = OpenAIChatBackend("http://127.0.0.1:8000/v1", "my-model")  # or the env vars
>>> candidate = LLMOptimizer(backend).optimize(load_problem("softmax_16384x4096"), profile)
>>> candidate.error or candidate.source

The prompt (:func:`build_messages`, in ``prompt``) is KernelBench's: the problem's source, the
rules a ``ModelNew`` must keep, and the profile rendered by
:func:`~autoprofiler_env.profiler.render.render_markdown`. The model's reply goes through
:func:`extract_code` (``reply``). A backend is anything with :meth:`ChatBackend.complete`
(``backend``):

- :class:`OpenAIChatBackend` (``openai``): any OpenAI-compatible ``/chat/completions`` endpoint
  (vLLM, SGLang, llama.cpp's server, hosted APIs), with the standard library only; one
  deadline bounds the whole request (``deadline``). Configured by its arguments or by
  ``AUTOPROFILER_LLM_BASE_URL``, ``AUTOPROFILER_LLM_MODEL`` and ``AUTOPROFILER_LLM_API_KEY``
  (else ``OPENAI_API_KEY``).
- :class:`TransformersBackend` (``local``): a local ``transformers`` causal LM, loaded from a
  local path only.

:meth:`LLMOptimizer.optimize` (``optimizer``) never raises for what the model does: an
empty reply, a reply without code, cut off inside its code or with code that does not parse,
a prompt the local model's context cannot hold, a local generation out of time all give a
:class:`Candidate` with ``error="<kind>: <message>"`` (the kinds of :class:`LLMError`). A
request that got no reply from the model (the endpoint down, an HTTP error, a redirect, no
answer in time: ``LLMError.unreached``) is not the model's doing: it raises. The prompt states
the tolerance the candidate is judged at. Decoding is deterministic by default: temperature 0
and a fixed seed; each request is asked once per optimizer, its reply kept (``cache``, in
memory or in a file: :mod:`~autoprofiler_env.optimizers.llm.cache`). docs/optimizers.md says
how to plug in your own model.
"""

from __future__ import annotations

from autoprofiler_env.optimizers.llm.backend import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_SEED,
    DEFAULT_TEMPERATURE,
    DEFAULT_TIMEOUT_S,
    ChatBackend,
)
from autoprofiler_env.optimizers.llm.local import TransformersBackend
from autoprofiler_env.optimizers.llm.openai import (
    ENV_API_KEY,
    ENV_BASE_URL,
    ENV_MODEL,
    ENV_OPENAI_API_KEY,
    OpenAIChatBackend,
    _chat_url,  # noqa: F401  (the tests import it from here)
)
from autoprofiler_env.optimizers.llm.optimizer import REPLY_CHARS, LLMOptimizer
from autoprofiler_env.optimizers.llm.prompt import (
    CLOSING,
    INSTRUCTIONS,
    NO_PROFILE_TEXT,
    SYSTEM_PROMPT,
    Message,
    build_messages,
    render_profile,
)
from autoprofiler_env.optimizers.llm.reply import extract_code

__all__ = [
    "CLOSING", "DEFAULT_MAX_TOKENS", "DEFAULT_SEED", "DEFAULT_TEMPERATURE", "DEFAULT_TIMEOUT_S",
    "ENV_API_KEY", "ENV_BASE_URL", "ENV_MODEL", "ENV_OPENAI_API_KEY", "INSTRUCTIONS",
    "NO_PROFILE_TEXT", "REPLY_CHARS", "SYSTEM_PROMPT", "ChatBackend", "LLMOptimizer", "Message",
    "OpenAIChatBackend", "TransformersBackend", "build_messages", "extract_code", "render_profile",
]
