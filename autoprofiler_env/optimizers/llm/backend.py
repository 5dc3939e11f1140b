"""What a backend is: :class:`ChatBackend`, and the decoding settings every request uses
unless told otherwise (deterministic: temperature 0 and a fixed seed)."""

from __future__ import annotations

import inspect
from typing import Protocol, runtime_checkable

from autoprofiler_env.optimizers.llm.prompt import Message

DEFAULT_MAX_TOKENS = 4096
DEFAULT_TEMPERATURE = 0.0
DEFAULT_SEED = 1234
DEFAULT_TIMEOUT_S = 300.0


@runtime_checkable
class ChatBackend(Protocol):
    """Something that answers chat messages with text.

    Attributes:
        model_name: names the model in a candidate's producer (``llm:<model_name>``).

    A backend may also keep ``last_info``, a dict of what its last call reported besides the
    text (``finish_reason``, ``usage``); the optimizer copies it into the candidate's evidence
    when it is there.

    A backend that can constrain its reply to a JSON schema takes one more keyword,
    ``response_format`` (OpenAI's form, :func:`json_schema_format`); callers pass it only where
    :func:`takes_response_format` says so, so a backend without it still serves.
    """

    model_name: str

    def complete(self, messages: list[Message], *, max_tokens: int, temperature: float,
                 seed: int, timeout_s: float) -> str:
        """The model's reply to ``messages``.

        Raises:
            LLMError: no reply (``timeout``, ``http``, ``connection``) or an empty one
                (``empty``).
        """
        ...


def json_schema_format(name: str, schema: dict, strict: bool = True) -> dict:
    """OpenAI's ``response_format`` asking for a reply that follows ``schema`` (a JSON schema):
    ``{"type": "json_schema", "json_schema": {"name": ..., "schema": ..., "strict": ...}}``,
    the form that OpenAI, vLLM, SGLang and llama.cpp's own ``llama-server`` accept
    (llama-cpp-python's server takes only ``{"type": "json_object", "schema": ...}`` and
    answers this form with HTTP 500, "Input should be 'text' or 'json_object'")."""
    return {"type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": strict}}


def takes_response_format(backend: object) -> bool:
    """Whether ``backend.complete`` accepts ``response_format`` (by name or through
    ``**kwargs``): :class:`OpenAIChatBackend` does, :class:`TransformersBackend` (no constrained
    decoding) does not."""
    try:
        parameters = inspect.signature(backend.complete).parameters
    except (AttributeError, TypeError, ValueError):
        return False
    return "response_format" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
