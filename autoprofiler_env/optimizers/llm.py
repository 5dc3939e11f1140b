"""The LLM optimizer: a language model rewrites a problem into ``ModelNew``, shown the profile.

>>> from autoprofiler_env.optimizers.llm import LLMOptimizer, OpenAIChatBackend
>>> from autoprofiler_env.problems import load_problem
>>> backend = OpenAIChatBackend("http://127.0.0.1:8000/v1", "my-model")  # or the env vars
>>> candidate = LLMOptimizer(backend).optimize(load_problem("softmax_4096x8192"), profile)
>>> candidate.error or candidate.source

The prompt (:func:`build_messages`) is KernelBench's: the problem's source, the rules a
``ModelNew`` must keep, and the profile rendered by
:func:`~autoprofiler_env.profiler.render.render_markdown`. The model's reply goes through
:func:`extract_code`. A backend is anything with :meth:`ChatBackend.complete`:

- :class:`OpenAIChatBackend`: any OpenAI-compatible ``/chat/completions`` endpoint (vLLM,
  SGLang, llama.cpp's server, hosted APIs), with the standard library only. Configured by its
  arguments or by ``AUTOPROFILER_LLM_BASE_URL``, ``AUTOPROFILER_LLM_MODEL`` and
  ``AUTOPROFILER_LLM_API_KEY`` (else ``OPENAI_API_KEY``).
- :class:`TransformersBackend`: a local ``transformers`` causal LM, loaded from a local path
  only.

:meth:`LLMOptimizer.optimize` never raises for what the model does: a time-out, a failed
request, an empty reply, a reply without code or with code that does not parse all give a
:class:`Candidate` with ``error="<kind>: <message>"`` (the kinds of :class:`LLMError`).
Decoding is deterministic by default: temperature 0 and a fixed seed.
"""

from __future__ import annotations

import ast
import functools
import http.client
import io
import json
import math
import os
import re
import socket
import textwrap
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Protocol, runtime_checkable

from autoprofiler_env.errors import LLMError, OptimizationError
from autoprofiler_env.optimizers.candidate import Candidate
from autoprofiler_env.problems.problem import Problem
from autoprofiler_env.profiler.records import Profile
from autoprofiler_env.profiler.render import render_markdown

DEFAULT_MAX_TOKENS = 4096
DEFAULT_TEMPERATURE = 0.0
DEFAULT_SEED = 1234
DEFAULT_TIMEOUT_S = 300.0
REPLY_CHARS = 4000
"""How much of the raw reply a candidate's evidence keeps."""

ENV_BASE_URL = "AUTOPROFILER_LLM_BASE_URL"
ENV_MODEL = "AUTOPROFILER_LLM_MODEL"
ENV_API_KEY = "AUTOPROFILER_LLM_API_KEY"
ENV_OPENAI_API_KEY = "OPENAI_API_KEY"

Message = dict[str, str]


# -- the prompt ---------------------------------------------------------------------------------

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


# -- the reply ----------------------------------------------------------------------------------

# An opening fence: at the start of its line (an info string may follow the label), or after
# text on its line when nothing follows the label ("Here it is: ```python"); not an inline
# mention such as "(```python ... ```)". Group 1 is the info string of a fence that opens its
# line (its label is read by _LABEL), group 2 the label of one after text. No two quantifiers
# in a row may match the same characters: an earlier form (```[ \t]*([^\s`]*)[^\n`]*) took
# quadratic time on a fence followed by a long run of blanks (8,000 blanks: 0.7 s).
_FENCE = re.compile(r"(?:^[ \t]*```([^\n`]*)|```[ \t]*(?:([^\s`]+)[ \t]*)?)\n", re.MULTILINE)
_LABEL = re.compile(r"[ \t]*([^\s`]*)")
_CLOSE = re.compile(r"^[ \t]*```[ \t]*$", re.MULTILINE)
_PYTHON_LABELS = {"", "python", "py", "python3", "py3"}
_MODEL_NEW = re.compile(r"^[ \t]*class[ \t]+ModelNew\b", re.MULTILINE)


def _fenced_blocks(reply: str) -> list[tuple[str, str]]:
    """Every fenced block as (label, code), in order. A block left open at the end of the
    reply (the model ran out of tokens) runs to the end."""
    blocks, pos = [], 0
    while True:
        opening = _FENCE.search(reply, pos)
        if opening is None:
            return blocks
        closing = _CLOSE.search(reply, opening.end())
        end = closing.start() if closing else len(reply)
        info, label = opening.group(1), opening.group(2)
        if info is not None:
            label = _LABEL.match(info).group(1)
        blocks.append(((label or "").lower(), reply[opening.end():end]))
        if closing is None:
            return blocks
        pos = closing.end()


def extract_code(reply: str) -> str:
    """The program in a model's reply: the last fenced ``python`` (or unlabeled) block that
    defines ``class ModelNew``, else the last such block of any content.

    Raises:
        LLMError: ``empty`` (the reply is blank), ``no_code`` (no python block), ``syntax``
            (the code does not parse, or nests too deeply for Python's parser; the message
            gives the line when there is one).
    """
    if not reply or not reply.strip():
        raise LLMError("empty", "the model's reply is empty")
    python = [textwrap.dedent(code).strip("\n") + "\n"
              for label, code in _fenced_blocks(reply) if label in _PYTHON_LABELS]
    python = [code for code in python if code.strip()]
    if not python:
        raise LLMError("no_code", f"the reply ({len(reply)} chars) has no ```python code "
                       "block")
    with_model_new = [code for code in python if _MODEL_NEW.search(code)]
    code = (with_model_new or python)[-1]
    try:
        ast.parse(code)
    except SyntaxError as e:
        line = (e.text or "").strip()
        raise LLMError("syntax", f"the code does not parse: line {e.lineno}: {e.msg}"
                       + (f": {line[:120]!r}" if line else "")) from e
    except ValueError as e:  # null bytes, lone surrogates
        raise LLMError("syntax", f"the code does not parse: {e}") from e
    except (RecursionError, MemoryError) as e:  # the parser's own limits: "-" * 100000 + "1"
        raise LLMError("syntax", f"the code does not parse: it is nested too deeply "
                       f"({type(e).__name__})") from e
    return code


# -- backends -----------------------------------------------------------------------------------

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


def _chat_url(base_url: str) -> str:
    """``.../chat/completions`` under ``base_url``, as OpenAI's clients build it; a bare
    ``http://host:port`` gets ``/v1`` first."""
    url = base_url.strip().rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    if urllib.parse.urlsplit(url).path in ("", "/"):
        url += "/v1"
    return url + "/chat/completions"


def _is_timeout(e: object) -> bool:
    return isinstance(e, TimeoutError) or "timed out" in str(e)


# -- one deadline for the whole request ---------------------------------------------------------
#
# A socket's timeout bounds each call alone: a server that sends one byte a second never trips
# it. So every blocking step of a request (the connect, a TLS handshake, each send, each read
# of the status line, the headers and the body) waits at most what is left of one deadline,
# and a step that starts with nothing left raises TimeoutError.

class _Deadline:
    """``seconds`` from now (None: none), on the monotonic clock; counts the bytes received."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.started = time.monotonic()
        self.at = math.inf if seconds is None else self.started + seconds
        self.received = 0

    def left(self) -> float | None:
        """The seconds left, for a socket's timeout (None: no deadline).

        Raises:
            TimeoutError: none are left.
        """
        if self.at == math.inf:
            return None
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"timed out: the request's {self.seconds:g} s are spent")
        return left

    def spent(self) -> bool:
        return time.monotonic() >= self.at

    def waited(self) -> float:
        return time.monotonic() - self.started


class _DeadlineSocket:
    """A connected socket (plain or TLS) whose every send and receive waits at most until the
    deadline. Anything else goes to the socket itself. Like ``socket.makefile``, ``close``
    leaves the socket open while a file made from it is (urllib closes the connection's
    socket before the body is read)."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        self._sock = sock
        self._deadline = deadline
        self._files = 0
        self._closed = False

    def __getattr__(self, name: str):
        return getattr(self._sock, name)

    def _arm(self) -> None:
        self._sock.settimeout(self._deadline.left())

    def recv_into(self, *args, **kwargs) -> int:
        self._arm()
        n = self._sock.recv_into(*args, **kwargs)
        self._deadline.received += n
        return n

    def recv(self, *args, **kwargs) -> bytes:
        self._arm()
        data = self._sock.recv(*args, **kwargs)
        self._deadline.received += len(data)
        return data

    def send(self, data, *args) -> int:
        self._arm()
        return self._sock.send(data, *args)

    def sendall(self, data, *args) -> None:
        # send() by send(): sendall's own timeout would let a slow reader stretch one call
        with memoryview(data) as view, view.cast("B") as octets:
            sent = 0
            while sent < len(octets):
                sent += self.send(octets[sent:], *args)

    def makefile(self, mode: str = "rb", *args, **kwargs) -> io.BufferedReader:
        if mode != "rb":
            raise ValueError(f"a deadline socket reads only (mode {mode!r})")
        self._files += 1
        return io.BufferedReader(_DeadlineReader(self))

    def _file_closed(self) -> None:
        self._files -= 1
        if self._closed and self._files <= 0:
            self._sock.close()

    def close(self) -> None:
        self._closed = True
        if self._files <= 0:
            self._sock.close()


class _DeadlineReader(io.RawIOBase):
    """The raw stream under ``_DeadlineSocket.makefile``: each read is one bounded receive."""

    def __init__(self, sock: _DeadlineSocket) -> None:
        super().__init__()
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        return self._sock.recv_into(buffer)

    def fileno(self) -> int:
        return self._sock.fileno()

    def close(self) -> None:
        if not self.closed:
            super().close()
            self._sock._file_closed()


class _DeadlineConnection:
    """Mixed into http.client's connections: the connect and a TLS handshake wait at most what
    is left of the deadline, and the connected socket is a :class:`_DeadlineSocket`."""

    def __init__(self, *args, deadline: _Deadline, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline
        create = self._create_connection

        def create_connection(address, timeout=None, source_address=None, *more, **kw):
            sock = create(address, self._deadline.left(), source_address, *more, **kw)
            try:  # a TLS handshake that follows is bounded by the socket's timeout as a whole
                sock.settimeout(self._deadline.left())
            except BaseException:
                sock.close()
                raise
            return sock

        self._create_connection = create_connection

    def connect(self) -> None:
        super().connect()
        self.sock = _DeadlineSocket(self.sock, self._deadline)


class _DeadlineHTTPConnection(_DeadlineConnection, http.client.HTTPConnection):
    pass


class _DeadlineHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def do_open(self, http_class, req, **kwargs):
        return super().do_open(functools.partial(_DeadlineHTTPConnection,
                                                 deadline=self._deadline), req, **kwargs)


_HANDLERS: list[type] = [_DeadlineHTTPHandler]

if hasattr(http.client, "HTTPSConnection") and hasattr(urllib.request, "HTTPSHandler"):
    class _DeadlineHTTPSConnection(_DeadlineConnection, http.client.HTTPSConnection):
        pass

    class _DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
        def __init__(self, deadline: _Deadline) -> None:
            super().__init__()
            self._deadline = deadline

        def do_open(self, http_class, req, **kwargs):
            return super().do_open(functools.partial(_DeadlineHTTPSConnection,
                                                     deadline=self._deadline), req, **kwargs)

    _HANDLERS.append(_DeadlineHTTPSHandler)


def _opener(deadline: _Deadline) -> urllib.request.OpenerDirector:
    """urllib's default opener (proxies, redirects, errors), its HTTP(S) bound by
    ``deadline``."""
    return urllib.request.build_opener(*(handler(deadline) for handler in _HANDLERS))


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
                f"no LLM endpoint: pass base_url or set {ENV_BASE_URL} (an OpenAI-compatible "
                "API's base, e.g. http://127.0.0.1:8000/v1)")
        if not model:
            raise OptimizationError(
                f"no LLM model: pass model or set {ENV_MODEL} (the model's name as the "
                "server lists it under /v1/models)")
        self.url = _chat_url(base_url)
        self.model_name = model
        self.api_key = api_key or os.environ.get(ENV_API_KEY) or os.environ.get(
            ENV_OPENAI_API_KEY) or None
        self.last_info: dict = {}

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIChatBackend({self.url!r}, {self.model_name!r})"

    def request_body(self, messages: list[Message], *, max_tokens: int, temperature: float,
                     seed: int) -> dict:
        return {"model": self.model_name, "messages": messages, "max_tokens": max_tokens,
                "temperature": temperature, "seed": seed, "stream": False}

    def complete(self, messages: list[Message], *, max_tokens: int = DEFAULT_MAX_TOKENS,
                 temperature: float = DEFAULT_TEMPERATURE, seed: int = DEFAULT_SEED,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
        body = json.dumps(self.request_body(messages, max_tokens=max_tokens,
                                            temperature=temperature, seed=seed)).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "User-Agent": "autoprofiler-env"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        self.last_info = {}
        deadline = _Deadline(timeout_s)
        try:
            with _opener(deadline).open(request, timeout=timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as e:
            with e:
                try:
                    detail = e.read().decode("utf-8", "replace")
                except Exception:  # the body of a failed response may itself fail to read
                    detail = ""
            detail = " ".join(detail.split())[:300]
            raise LLMError("http", f"HTTP {e.code} from {self.url}"
                           + (f": {detail}" if detail else "")) from e
        except (OSError, http.client.HTTPException) as e:  # URLError, timeouts, resets
            cause = getattr(e, "reason", e)  # URLError wraps the socket's error
            if _is_timeout(cause) or _is_timeout(e) or deadline.spent():
                limit = f"{timeout_s:g} s" if timeout_s is not None else "its time"
                raise LLMError("timeout", f"no complete reply from {self.url} within {limit}: "
                               f"gave up after {deadline.waited():.1f} s, "
                               f"{deadline.received} bytes received") from e
            raise LLMError("connection", f"cannot reach {self.url}: "
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
            raise LLMError("http", f"the reply from {self.url} is not JSON: "
                           f"{raw[:200]!r}") from e
        except RecursionError as e:  # "[" * 100000
            raise LLMError("http", f"the reply from {self.url} is not JSON this client can "
                           f"read: it nests too deeply: {preview!r}") from e
        choices = reply.get("choices") if isinstance(reply, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise LLMError("empty", f"the reply from {self.url} has no choices: {preview}")
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


def _transformers():
    try:
        import transformers
    except ImportError as e:
        raise OptimizationError(
            "TransformersBackend needs the transformers package, which autoprofiler-env "
            "requires: reinstall it with `pip install -e .`") from e
    return transformers


class TransformersBackend:
    """A local ``transformers`` causal LM, never downloaded: loaded with
    ``local_files_only=True`` from a directory or from a GGUF file (``gguf_file``, or a
    ``model_path`` ending in ``.gguf``; GGUF needs the ``gguf`` and ``accelerate`` packages,
    and is de-quantized to fp32).

    The prompt goes through the tokenizer's chat template when it has one, or
    ``chat_template`` (a Jinja template) when given; a system message the template refuses is
    folded into the first user message. Without a template: plain "role: text" turns.
    Temperature 0 decodes greedily; ``timeout_s`` bounds generation (``max_time``): a
    generation cut by it is an ``LLMError("timeout")``.

    Raises:
        OptimizationError: transformers is missing, or ``model_path`` is not a local path.
    """

    def __init__(self, model_path: str | Path, *, gguf_file: str | None = None,
                 model_name: str | None = None, chat_template: str | None = None,
                 device: str = "cpu", torch_dtype: str | None = None) -> None:
        transformers = _transformers()
        path = Path(model_path).expanduser()
        if not path.exists():
            raise OptimizationError(
                f"{model_path} is not a local path: TransformersBackend loads models from "
                "disk only and never downloads")
        if path.is_file() and path.suffix == ".gguf":
            path, gguf_file = path.parent, path.name
        kwargs: dict = {"local_files_only": True}
        if gguf_file:
            kwargs["gguf_file"] = gguf_file
        self.model_path = path
        self.gguf_file = gguf_file
        self.model_name = model_name or (Path(gguf_file).stem if gguf_file else path.name)
        self.device = device
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(path), **kwargs)
        if chat_template is not None:  # e.g. for a GGUF file that carries none
            self.tokenizer.chat_template = chat_template
        model_kwargs = dict(kwargs)
        if torch_dtype is not None:
            model_kwargs["torch_dtype"] = torch_dtype
        self.model = transformers.AutoModelForCausalLM.from_pretrained(
            str(path), **model_kwargs).to(device)
        self.model.eval()
        self.last_info: dict = {}

    def __repr__(self) -> str:
        return f"TransformersBackend({str(self.model_path)!r}, gguf_file={self.gguf_file!r})"

    def prompt_ids(self, messages: list[Message]):
        """The token ids of the prompt (a tensor of shape (1, n)), ready for ``generate``."""
        import torch

        ids = self._template_ids(messages)
        if not isinstance(ids, torch.Tensor):  # some versions give a BatchEncoding
            ids = ids["input_ids"]
        return ids

    def _template_ids(self, messages: list[Message]):
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            try:
                return tok.apply_chat_template(messages, add_generation_prompt=True,
                                               return_tensors="pt", return_dict=False)
            except Exception:  # a template that refuses a system message (jinja raises)
                system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
                rest = [dict(m) for m in messages if m["role"] != "system"]
                if system and rest and rest[0]["role"] == "user":
                    rest[0]["content"] = system + "\n\n" + rest[0]["content"]
                return tok.apply_chat_template(rest, add_generation_prompt=True,
                                               return_tensors="pt", return_dict=False)
        text = "\n\n".join(f"{m['role']}: {m['content']}" for m in messages) + "\n\nassistant:"
        return tok(text, return_tensors="pt").input_ids

    def complete(self, messages: list[Message], *, max_tokens: int = DEFAULT_MAX_TOKENS,
                 temperature: float = DEFAULT_TEMPERATURE, seed: int = DEFAULT_SEED,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
        import torch

        ids = self.prompt_ids(messages).to(self.device)
        torch.manual_seed(seed)
        sampling = {"do_sample": True, "temperature": temperature} if temperature > 0 else {
            "do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.tokenizer.eos_token_id
        started = time.perf_counter()
        with torch.no_grad():
            out = self.model.generate(ids, attention_mask=torch.ones_like(ids),
                                      max_new_tokens=max_tokens, max_time=timeout_s,
                                      pad_token_id=pad, **sampling)
        elapsed = time.perf_counter() - started
        new = out[0, ids.shape[-1]:]
        n_new = int(new.shape[-1])
        finished = n_new > 0 and int(new[-1]) in self._eos_ids()
        self.last_info = {
            "finish_reason": "stop" if finished else "length" if n_new >= max_tokens else
            "time",
            "usage": {"prompt_tokens": int(ids.shape[-1]), "completion_tokens": n_new}}
        if not finished and n_new < max_tokens and elapsed >= timeout_s:
            raise LLMError("timeout", f"{self.model_name} did not finish within {timeout_s:g} s "
                           f"({n_new} tokens)")
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        if not text.strip():
            raise LLMError("empty", f"{self.model_name} generated no text ({n_new} tokens)")
        return text

    def _eos_ids(self) -> set[int]:
        ids = set()
        for source in (self.model.generation_config, self.tokenizer):
            eos = getattr(source, "eos_token_id", None)
            if isinstance(eos, int):
                ids.add(eos)
            elif eos:
                ids.update(int(i) for i in eos)
        return ids


# -- the optimizer ------------------------------------------------------------------------------

class LLMOptimizer:
    """Asks a language model for a ``ModelNew``, showing it the problem and the profile.

    Args:
        backend: the model (:class:`OpenAIChatBackend`, :class:`TransformersBackend`, or any
            :class:`ChatBackend`).
        max_tokens, temperature, seed, timeout_s: the decoding settings of every request
            (deterministic by default: greedy with a fixed seed).
    """

    def __init__(self, backend: ChatBackend, *, max_tokens: int = DEFAULT_MAX_TOKENS,
                 temperature: float = DEFAULT_TEMPERATURE, seed: int = DEFAULT_SEED,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.backend = backend
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.timeout_s = timeout_s

    @property
    def producer(self) -> str:
        return f"llm:{self.backend.model_name}"

    def optimize(self, problem: Problem, profile: Profile | None = None) -> Candidate:
        """A candidate for ``problem`` from one request. Never raises for the model's failures:
        they come back as a candidate with ``error`` set (``"<kind>: <message>"``)."""
        messages = build_messages(problem, profile)
        evidence: dict[str, object] = {
            "sections": list(profile.sections) if profile is not None else [],
            "profile_uri": profile.problem_uri if profile is not None else None,
            "prompt_chars": sum(len(m["content"]) for m in messages),
            "max_tokens": self.max_tokens, "temperature": self.temperature, "seed": self.seed,
        }
        started = time.perf_counter()
        reply: str | None = None
        try:
            reply = self.backend.complete(messages, max_tokens=self.max_tokens,
                                          temperature=self.temperature, seed=self.seed,
                                          timeout_s=self.timeout_s)
            source = extract_code(reply)
            failed: LLMError | None = None
        except LLMError as e:
            failed = e
        evidence.update(self._reply_evidence(reply, started))
        if failed is not None:
            # the server answered (an empty reply, or one without code), or never did
            answered = reply is not None or failed.kind == "empty"
            stage = "its reply gave no program" if answered else "the request failed"
            return Candidate(problem_uri=problem.uri, source="", producer=self.producer,
                             reason=f"{self.producer}: {stage} ({failed.kind})",
                             evidence=evidence, error=str(failed))
        shown = (f"a profile of {', '.join(profile.sections)}" if profile is not None
                 and profile.sections else "no profile")
        return Candidate(problem_uri=problem.uri, source=source, producer=self.producer,
                         reason=f"LLM reply: {self.producer} rewrote the program, shown {shown}",
                         evidence=evidence)

    def _reply_evidence(self, reply: str | None, started: float) -> dict[str, object]:
        info = getattr(self.backend, "last_info", None) or {}
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


__all__ = [
    "DEFAULT_MAX_TOKENS", "DEFAULT_SEED", "DEFAULT_TEMPERATURE", "DEFAULT_TIMEOUT_S",
    "ChatBackend", "LLMOptimizer", "OpenAIChatBackend", "TransformersBackend", "build_messages",
    "extract_code", "render_profile",
]
