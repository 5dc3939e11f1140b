"""What a backend is: :class:`ChatBackend`, and the decoding settings every request uses
unless told otherwise (deterministic: temperature 0 and a fixed seed)."""

from __future__ import annotations

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
