"""The LLM optimizer's replies by request: :class:`ReplyCache`, so that the same request (the
same model, prompt and decoding settings, seed included) is asked once.

A live episode asks the model for each (problem, section set) it ends on; every episode that
collects the same sections on the same problem sends the same prompt, and the live backend
judges each distinct candidate once already. The cache keeps each reply in memory, and, given
a file, in that JSON-lines file too (one reply a line, appended and flushed as it comes), so
that a run stopped and started again, or another run with the same model, asks nothing twice:
``LLMOptimizer(backend, cache="runs/llm-replies.jsonl")``, or ``AUTOPROFILER_LLM_CACHE`` for
the live environment's ``optimizer="llm:<model>"``.

Only replies are kept: a request that got no reply (an ``LLMError``) is asked again next
time. The file is trusted input: its replies become candidates that the judge compiles and
runs, as the model's would. Several processes may share one file (each appends under a
lock); each reads it when it starts, so a reply another process adds later is asked again
there. A request is keyed by the sha256 of its JSON: the backend's kind, where it answers
from (an endpoint's URL, credentials never in it; a local model's path), the model's name,
the messages, ``max_tokens``, ``temperature`` and ``seed``. Another seed is another request:
vary ``seed`` for other samples of the same prompt (as ``autoprofiler record --parts llm``
does per repeat).
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

from autoprofiler_env.errors import ConfigError, warn
from autoprofiler_env.jsonlines import JsonlAppender, scan_jsonl

ENV_CACHE = "AUTOPROFILER_LLM_CACHE"
"""The environment variable naming the live environment's reply cache file (none: replies are
kept in memory only, for the environment's life)."""


def request_key(backend, messages: list, *, max_tokens: int, temperature: float,
                seed: int) -> str:
    """The sha256 (hex) of a request: what the backend is and answers from, the messages and
    the decoding settings."""
    where = getattr(backend, "shown_url", None) or getattr(backend, "model_path", None)
    gguf = getattr(backend, "gguf_file", None)
    request = {"backend": type(backend).__name__, "where": None if where is None else str(where),
               "file": None if gguf is None else str(gguf),
               "model": getattr(backend, "model_name", None), "messages": messages,
               "max_tokens": int(max_tokens), "temperature": float(temperature),
               "seed": int(seed)}
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()


def _lock(f) -> None:
    """Holds ``f`` (open to append) for this process alone until it is closed: one appender
    at a time, whole lines only. Where the system has no ``flock`` (Windows) it is not
    locked: two processes appending to one cache there may write over each other's lines,
    which are then lost (silently: their requests are asked again) or damaged (left out,
    with a warning, when the cache is read); a reply is never mistaken for another's."""
    try:
        import fcntl
    except ImportError:
        return
    fcntl.flock(f, fcntl.LOCK_EX)


class ReplyCache:
    """Replies by :func:`request_key`: in memory, and in the JSON-lines file ``path`` where
    given (read when made; each new reply appended). A line that is not a reply's record is
    left out with a warning (a line cut off by a kill, silently); the file is never rewritten.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = None if path is None else Path(path)
        self._replies: dict[str, tuple[str, dict]] = {}
        self.hits = 0
        """How many requests were answered from the cache."""
        if self.path is None:
            return
        if self.path.is_dir():
            raise ConfigError(f"the LLM reply cache {self.path} ({ENV_CACHE}, or cache=) is a "
                              "folder: give a file's path (it is created), e.g. "
                              "runs/llm-replies.jsonl")
        try:
            scan = scan_jsonl(self.path)
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"the LLM reply cache {self.path} ({ENV_CACHE}, or cache=) cannot "
                              f"be read ({type(e).__name__}: {e}): give another file, or remove "
                              "it to start an empty one") from None
        bad = list(scan.damaged)
        for row in scan.rows:
            key, reply, info = row.get("key"), row.get("reply"), row.get("info", {})
            if isinstance(key, str) and isinstance(reply, str) and isinstance(info, dict):
                self._replies[key] = (reply, info)
            else:
                bad.append(row)
        if bad:
            warn(f"the LLM reply cache {self.path}: {len(bad)} line(s) that are not a reply's "
                 "record were left out (their requests are asked again)")

    def __len__(self) -> int:
        return len(self._replies)

    def get(self, key: str) -> tuple[str, dict] | None:
        """The reply and its backend's ``last_info`` kept for ``key``; None where none is."""
        found = self._replies.get(key)
        if found is None:
            return None
        self.hits += 1
        return found[0], copy.deepcopy(found[1])  # the caller's to keep or change

    def put(self, key: str, reply: str, info: dict, model: str | None = None) -> None:
        """Keeps a reply (and appends it to the file, flushed)."""
        info = json.loads(json.dumps(info, default=str))  # plain data, as the file holds it
        self._replies[key] = (reply, info)
        if self.path is None:
            return
        line = json.dumps({"key": key, "model": model, "reply": reply, "info": info}) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            _lock(f)
            if f.tell() > 0:
                with self.path.open("rb") as tail:
                    tail.seek(-1, 2)
                    if tail.read(1) != b"\n":  # a line cut off by a kill: ended first
                        JsonlAppender(self.path).close()
            f.write(line)
            f.flush()
