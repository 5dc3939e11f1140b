"""Reading a model's reply: the program in its fenced code blocks (:func:`extract_code`)."""

from __future__ import annotations

import re
import textwrap

from autoprofiler_env.errors import LLMError
from autoprofiler_env.pyast import parse

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


def fenced_blocks(reply: str) -> list[tuple[str, str, bool]]:
    """Every fenced block as (label, code, whether it was closed), in order. A block left
    open at the end of the reply (the model ran out of tokens) runs to the end."""
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
        blocks.append(((label or "").lower(), reply[opening.end():end], closing is not None))
        if closing is None:
            return blocks
        pos = closing.end()


_THINKING = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)


def answer(reply: str) -> str:
    """The reply without a reasoning model's ``<think>...</think>`` (a draft, not the
    answer; one left open, cut off, runs to the end; where the server put the opening tag in
    the prompt, the reply's text up to its last ``</think>``)."""
    answer = _THINKING.sub("", reply)
    return answer.rpartition("</think>")[2] if "</think>" in answer else answer


def _chosen(reply: str) -> tuple[str, bool] | None:
    """The block :func:`extract_code` takes (its code, dedented, and whether it was closed),
    or None where the answer has no python block."""
    python = [(textwrap.dedent(code).strip("\n") + "\n", closed)
              for label, code, closed in fenced_blocks(answer(reply))
              if label in _PYTHON_LABELS and code.strip()]
    with_model_new = [block for block in python if _MODEL_NEW.search(block[0])]
    return (with_model_new or python)[-1] if python else None


def code_cut_off(reply: str) -> bool:
    """Whether the block :func:`extract_code` takes from the reply is left open: the reply
    ended inside that code (a block cut off after it, of another language or not the
    program, is not)."""
    chosen = _chosen(reply)
    return chosen is not None and not chosen[1]


def extract_code(reply: str) -> str:
    """The program in a model's reply: the last fenced ``python`` (or unlabeled) block that
    defines ``class ModelNew``, else the last such block of any content; a reasoning model's
    ``<think>...</think>`` is not the answer, and its code is not taken.

    Raises:
        LLMError: ``empty`` (the reply is blank), ``no_code`` (no python block), ``syntax``
            (the code does not parse, or nests too deeply for Python's parser; the message
            gives the line when there is one).
    """
    if not reply or not reply.strip():
        raise LLMError("empty", "the model's reply is empty")
    chosen = _chosen(reply)
    if chosen is None:
        thought = answer(reply) != reply
        raise LLMError("no_code", f"the reply ({len(reply)} chars) has no ```python code "
                       "block" + (" outside its <think>...</think>" if thought else ""))
    code = chosen[0]
    try:
        parse(code)
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
