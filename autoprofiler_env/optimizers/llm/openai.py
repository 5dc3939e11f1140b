"""The OpenAI-compatible backend: :class:`OpenAIChatBackend` speaks ``/chat/completions``
(vLLM, SGLang, llama.cpp's server, hosted APIs) with the standard library only."""

from __future__ import annotations

import http.client
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request

from autoprofiler_env.errors import LLMError, OptimizationError
from autoprofiler_env.optimizers.llm.backend import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_SEED,
    DEFAULT_TEMPERATURE,
    DEFAULT_TIMEOUT_S,
)
from autoprofiler_env.optimizers.llm.deadline import _Deadline, _opener
from autoprofiler_env.optimizers.llm.prompt import Message

ENV_BASE_URL = "AUTOPROFILER_LLM_BASE_URL"
ENV_MODEL = "AUTOPROFILER_LLM_MODEL"
ENV_API_KEY = "AUTOPROFILER_LLM_API_KEY"
ENV_OPENAI_API_KEY = "OPENAI_API_KEY"
MAX_REPLY_BYTES = 64 << 20
"""The most of a reply's body read (64 MiB): a chat completion this project asks for is tens
of kB; an endpoint that sends more (a misconfigured proxy, a hostile server) is an error,
not gigabytes held in memory."""


def _chat_url(base_url: str) -> str:
    """``.../chat/completions`` under ``base_url``, as OpenAI's clients build it; a bare
    ``http://host:port`` gets ``/v1`` first; a query string (``?api-version=...``) stays the
    query.

    Raises:
        OptimizationError: ``base_url`` is not an http(s) URL, or holds credentials
            (``user:key@host``: the key goes in ``api_key``; the message never shows it).
    """
    parts = urllib.parse.urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OptimizationError(f"the LLM endpoint {redacted_url(base_url)!r} is not an "
                                "http(s) URL: give the API's base, e.g. "
                                "http://127.0.0.1:8000/v1")
    try:
        parts.port  # noqa: B018  (a port that is not a number, or out of range, raises)
    except ValueError:
        raise OptimizationError(f"the LLM endpoint {redacted_url(base_url)!r} has a port "
                                "that is not a number of 0-65535") from None
    if parts.username is not None or parts.password is not None:
        raise OptimizationError(
            f"the LLM endpoint {redacted_url(base_url)!r} holds credentials (user:key@host), "
            f"which this client does not send: give the key as api_key, or set {ENV_API_KEY}")
    path = parts.path.rstrip("/")
    if not path.endswith("/chat/completions"):
        path = (path or "/v1") + "/chat/completions"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def redacted_url(url: str) -> str:
    """``url`` as messages show it: no credentials, and a query's values hidden (a key may
    travel there: ``?api-key=...``)."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # a port that is not a number
        return "<an endpoint URL this client cannot read>"
    netloc = ("***@" if "@" in parts.netloc else "") + (f"[{host}]" if ":" in host else host)
    query = "&".join(f"{name}=..." for name, _ in urllib.parse.parse_qsl(
        parts.query, keep_blank_values=True))
    return urllib.parse.urlunsplit((parts.scheme, netloc + port, parts.path, query, ""))


_CONTEXT = re.compile(r"context[ _-]?(length|size|window)|context_length_exceeded|maximum "
                      r"context|too many tokens|prompt is too long", re.IGNORECASE)
"""What an endpoint's refusal of a prompt too long for the model says (OpenAI's
``context_length_exceeded``, vLLM's "maximum context length", llama.cpp's "context size")."""


def _refusal(status: int | None, detail: str, message: str) -> LLMError:
    """The error of a request the server refused or failed: a prompt too long for the
    model's context is an outcome of the prompt (``context``, as a local model's), anything
    else no reply (``http``)."""
    if status in (None, 400, 413, 422) and _CONTEXT.search(detail):
        return LLMError("context", message, status=status, unreached=False)
    return LLMError("http", message, status=status)


def _is_timeout(e: object) -> bool:
    return isinstance(e, TimeoutError) or "timed out" in str(e)


def _bounded(value: object, depth: int) -> bool:
    """Whether ``value`` (decoded JSON) nests at most ``depth`` containers deep: what the
    evidence keeps must stay printable and serializable."""
    if isinstance(value, dict):
        return depth > 0 and all(_bounded(v, depth - 1) for v in value.values())
    if isinstance(value, list):
        return depth > 0 and all(_bounded(v, depth - 1) for v in value)
    return True


class OpenAIChatBackend:
    """An OpenAI-compatible chat completions endpoint (vLLM, SGLang, llama.cpp's server,
    hosted APIs), spoken with the standard library.

    Args:
        base_url: the API's base, e.g. ``http://127.0.0.1:8000/v1`` (``http://host:port``
            alone gets ``/v1``); default ``$AUTOPROFILER_LLM_BASE_URL``.
        model: the model's name as the server knows it; default ``$AUTOPROFILER_LLM_MODEL``.
        api_key: sent as ``Authorization: Bearer``; default ``$AUTOPROFILER_LLM_API_KEY``,
            else ``$OPENAI_API_KEY``, else none.

    ``timeout_s`` bounds the whole request, not each read: the connect, sending it, and
    receiving the status, the headers and the body must all be done within it (name
    resolution is not bounded: the standard library cannot interrupt it). A server that trickles
    its reply is an ``LLMError("timeout")`` once the time is spent.

    Raises:
        OptimizationError: no base URL or no model, from the arguments or the environment.
    """

    def __init__(self, base_url: str | None = None, model: str | None = None,
                 api_key: str | None = None) -> None:
        base_url = base_url or os.environ.get(ENV_BASE_URL)
        model = model or os.environ.get(ENV_MODEL)
        if not base_url:
            raise OptimizationError(
                f"no LLM endpoint: set {ENV_BASE_URL} (an OpenAI-compatible API's base, e.g. "
                "http://127.0.0.1:8000/v1), or give base_url (the record and learn-tree "
                "commands' --llm-base-url)")
        if not model:
            raise OptimizationError(
                f"no LLM model: set {ENV_MODEL} (the model's name as the server lists it "
                "under /v1/models), or give model (the record and learn-tree commands' "
                "--llm-model)")
        self.url = _chat_url(base_url)
        self.shown_url = redacted_url(self.url)
        self.model_name = model
        self.api_key = api_key or os.environ.get(ENV_API_KEY) or os.environ.get(
            ENV_OPENAI_API_KEY) or None
        self.last_info: dict = {}

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIChatBackend({self.shown_url!r}, {self.model_name!r})"

    def request_body(self, messages: list[Message], *, max_tokens: int, temperature: float,
                     seed: int, response_format: dict | None = None) -> dict:
        """The JSON body of a request; ``response_format`` (e.g.
        :func:`~autoprofiler_env.optimizers.llm.backend.json_schema_format`) is sent only when
        given, so servers that do not know the field see the same body as before."""
        body = {"model": self.model_name, "messages": messages, "max_tokens": max_tokens,
                "temperature": temperature, "seed": seed, "stream": False}
        if response_format is not None:
            body["response_format"] = response_format
        return body

    def complete(self, messages: list[Message], *, max_tokens: int = DEFAULT_MAX_TOKENS,
                 temperature: float = DEFAULT_TEMPERATURE, seed: int = DEFAULT_SEED,
                 timeout_s: float = DEFAULT_TIMEOUT_S,
                 response_format: dict | None = None) -> str:
        """The text of the first choice. ``response_format`` constrains the reply where the
        server supports it (a server that does not may answer HTTP 400: leave it out then).

        Raises:
            LLMError: ``timeout``, ``http``, ``connection`` or ``empty``.
        """
        body = json.dumps(self.request_body(messages, max_tokens=max_tokens,
                                            temperature=temperature, seed=seed,
                                            response_format=response_format)).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "User-Agent": "autoprofiler-env"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        self.last_info = {}
        deadline = _Deadline(timeout_s)
        try:
            with _opener(deadline).open(request, timeout=timeout_s) as response:
                raw = response.read(MAX_REPLY_BYTES + 1)
            if len(raw) > MAX_REPLY_BYTES:  # its readers take the first 100,000 characters
                raise LLMError("http", f"the reply of {self.shown_url} is longer than "
                               f"{MAX_REPLY_BYTES:,} bytes, which no chat completion this "
                               "project asks for is: not read further")
        except urllib.error.HTTPError as e:
            with e:
                try:
                    detail = e.read(64 << 10).decode("utf-8", "replace")  # 300 shown
                except Exception:  # the body of a failed response may itself fail to read
                    detail = ""
            detail = " ".join(detail.split())[:300]
            if 300 <= e.code < 400:  # not followed (the key goes to this endpoint alone)
                location = e.headers.get("Location") if e.headers is not None else None
                raise LLMError("http", f"HTTP {e.code} from {self.shown_url}: it redirects "
                               + (f"to {redacted_url(urllib.parse.urljoin(self.url, location))}"
                                  " " if location else "")
                               + "and a request with the API key is never sent on: give "
                               "the endpoint's own URL as the base URL", status=e.code) from e
            raise _refusal(e.code, detail, f"HTTP {e.code} from {self.shown_url}"
                           + (f": {detail}" if detail else "")) from e
        except (OSError, http.client.HTTPException) as e:  # URLError, timeouts, resets
            cause = getattr(e, "reason", e)  # URLError wraps the socket's error
            if _is_timeout(cause) or _is_timeout(e) or deadline.spent():
                limit = f"{timeout_s:g} s" if timeout_s is not None else "its time"
                raise LLMError("timeout", f"no complete reply from {self.shown_url} within "
                               f"{limit}: gave up after {deadline.waited():.1f} s, "
                               f"{deadline.received} bytes received", unreached=True) from e
            raise LLMError("connection", f"cannot reach {self.shown_url}: "
                           f"{type(cause).__name__}: {cause}") from e
        return self._content(raw)

    def _content(self, raw: bytes) -> str:
        """The text of a chat completion's first choice, from the reply's body.

        Raises:
            LLMError: ``http`` (the body is not JSON this decoder can read), ``empty`` (no
                choices, or no text in the first).
        """
        preview = raw[:200].decode("utf-8", "replace")
        try:
            reply = json.loads(raw)
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, an over-long integer
            raise LLMError("http", f"the reply from {self.shown_url} is not JSON: "
                           f"{raw[:200]!r}") from e
        except RecursionError as e:  # "[" * 100000
            raise LLMError("http", f"the reply from {self.shown_url} is not JSON this client can "
                           f"read: it nests too deeply: {preview!r}") from e
        choices = reply.get("choices") if isinstance(reply, dict) else None
        if not choices and isinstance(reply, dict) and reply.get("error"):
            # an error in a 200's body (some servers and proxies answer so): no model reply
            error = reply["error"]
            message = error.get("message") if isinstance(error, dict) else error
            code = error.get("code") if isinstance(error, dict) else None
            detail = " ".join(str(message).split())[:300]
            raise _refusal(None, f"{detail} {code or ''}",
                           f"the reply from {self.shown_url} is an error: {detail}")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise LLMError("empty", f"the reply from {self.shown_url} has no choices: "
                           f"{preview}")
        choice = choices[0]
        finish_reason = choice.get("finish_reason")
        finish_reason = finish_reason[:100] if isinstance(finish_reason, str) else None
        usage = reply.get("usage")
        self.last_info = {"finish_reason": finish_reason,
                          "usage": usage if isinstance(usage, dict) and _bounded(usage, 2)
                          else None}
        message = choice.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):  # content as parts: [{"type": "text", "text": ...}]
            content = "".join(p["text"] for p in content
                              if isinstance(p, dict) and isinstance(p.get("text"), str))
        if not isinstance(content, str) or not content.strip():
            raise LLMError("empty", f"the model returned no content (finish_reason "
                           f"{finish_reason!r})")
        return content
