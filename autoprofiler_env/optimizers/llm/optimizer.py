"""The optimizer: :class:`LLMOptimizer` asks a backend for a ``ModelNew`` and turns what
comes back, or what went wrong, into a :class:`Candidate`."""

from __future__ import annotations

import time
from pathlib import Path

from autoprofiler_env.errors import LLMError
from autoprofiler_env.optimizers.candidate import Candidate
from autoprofiler_env.optimizers.llm.cache import ReplyCache, request_key
from autoprofiler_env.optimizers.llm.backend import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_SEED,
    DEFAULT_TEMPERATURE,
    DEFAULT_TIMEOUT_S,
    ChatBackend,
)
from autoprofiler_env.optimizers.llm.prompt import DEFAULT_TOLERANCE, build_messages
from autoprofiler_env.optimizers.llm.reply import code_cut_off, extract_code
from autoprofiler_env.problems.problem import Problem
from autoprofiler_env.profiler.records import Profile

REPLY_CHARS = 4000
"""How much of the raw reply a candidate's evidence keeps."""


class LLMOptimizer:
    """Asks a language model for a ``ModelNew``, showing it the problem and the profile.

    Args:
        backend: the model (:class:`OpenAIChatBackend`, :class:`TransformersBackend`, or any
            :class:`ChatBackend`).
        max_tokens, temperature, seed, timeout_s: the decoding settings of every request
            (deterministic by default: greedy with a fixed seed).
        tolerance: (atol, rtol) of fp32 results that the prompt states: the judge's
            (the live environment passes its own; default KernelBench v0.1's 1e-2).
        cache: the replies by request (:mod:`~autoprofiler_env.optimizers.llm.cache`): True
            (the default) keeps them in memory, so that the same request (problem, profile,
            settings and seed) is asked once per optimizer; a file's path keeps them in that
            JSON-lines file too, across runs; a :class:`ReplyCache` is used as it is; False
            asks every time. A reply served from it says so in the candidate's evidence
            (``cached``).
    """

    def __init__(self, backend: ChatBackend, *, max_tokens: int = DEFAULT_MAX_TOKENS,
                 temperature: float = DEFAULT_TEMPERATURE, seed: int = DEFAULT_SEED,
                 timeout_s: float = DEFAULT_TIMEOUT_S,
                 tolerance: tuple[float, float] = DEFAULT_TOLERANCE,
                 cache: bool | str | Path | ReplyCache = True) -> None:
        self.backend = backend
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.timeout_s = timeout_s
        self.tolerance = tuple(float(t) for t in tolerance)
        self.cache = (cache if isinstance(cache, ReplyCache) else None if cache is False
                      else ReplyCache(None if cache is True else cache))

    @property
    def producer(self) -> str:
        return f"llm:{self.backend.model_name}"

    def optimize(self, problem: Problem, profile: Profile | None = None) -> Candidate:
        """A candidate for ``problem`` from one request. Never raises for the model's failures:
        they come back as a candidate with ``error`` set (``"<kind>: <message>"``; a reply
        cut off by ``max_tokens`` inside its code is ``truncated``).

        Raises:
            LLMError: no reply came from the model (:attr:`~autoprofiler_env.errors.LLMError.
                unreached`: the endpoint could not be reached, failed or did not answer in
                time): that is not the model's outcome, and must not be taken for one (a
                recording asks again; an episode stops with it).
        """
        messages = build_messages(problem, profile, self.tolerance)
        evidence: dict[str, object] = {
            "sections": list(profile.sections) if profile is not None else [],
            "profile_uri": profile.problem_uri if profile is not None else None,
            "prompt_chars": sum(len(m["content"]) for m in messages),
            "max_tokens": self.max_tokens, "temperature": self.temperature, "seed": self.seed,
        }
        started = time.perf_counter()
        reply: str | None = None
        key = cached = None
        if self.cache is not None:
            key = request_key(self.backend, messages, max_tokens=self.max_tokens,
                              temperature=self.temperature, seed=self.seed)
            cached = self.cache.get(key)
        info: dict = {}
        try:
            if cached is not None:
                reply, info = cached
                evidence["cached"] = True
            else:
                reply = self.backend.complete(messages, max_tokens=self.max_tokens,
                                              temperature=self.temperature, seed=self.seed,
                                              timeout_s=self.timeout_s)
                info = dict(getattr(self.backend, "last_info", None) or {})
                if self.cache is not None:
                    self.cache.put(key, reply, info, self.backend.model_name)
            source = extract_code(reply)
            failed: LLMError | None = None
        except LLMError as e:
            if e.unreached:
                raise
            if reply is None:  # the backend's own error: what it reported, where it did
                info = dict(getattr(self.backend, "last_info", None) or {})
            failed = e
        evidence.update(self._reply_evidence(reply, started, info))
        if failed is None and evidence.get("finish_reason") == "length" and code_cut_off(reply):
            failed = LLMError("truncated", f"the reply was cut off by max_tokens "
                              f"({self.max_tokens}) inside its code: raise max_tokens")
        if failed is not None:  # the model answered: an empty reply, or one without code
            return Candidate(problem_uri=problem.uri, source="", producer=self.producer,
                             reason=f"{self.producer}: its reply gave no program "
                             f"({failed.kind})", evidence=evidence, error=str(failed))
        shown = (f"a profile of {', '.join(profile.sections)}" if profile is not None
                 and profile.sections else "no profile")
        return Candidate(problem_uri=problem.uri, source=source, producer=self.producer,
                         reason=f"LLM reply: {self.producer} rewrote the program, shown {shown}",
                         evidence=evidence)

    @staticmethod
    def _reply_evidence(reply: str | None, started: float, info: dict) -> dict[str, object]:
        evidence: dict[str, object] = {"elapsed_s": round(time.perf_counter() - started, 3)}
        if info.get("finish_reason") is not None:
            evidence["finish_reason"] = info["finish_reason"]
        if info.get("usage"):
            evidence["usage"] = info["usage"]
        if reply is not None:
            evidence["reply_chars"] = len(reply)
            evidence["reply"] = (reply if len(reply) <= REPLY_CHARS else
                                 reply[:REPLY_CHARS] + f"\n... [{len(reply) - REPLY_CHARS} "
                                 "more chars]")
        return evidence
