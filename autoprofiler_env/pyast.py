"""Python source parsed into a syntax tree, alike on every Python the package runs on."""

from __future__ import annotations

import ast
import sys


_DEPTH_CHECKED = sys.version_info >= (3, 11)
"""Whether ``ast.parse`` itself refuses a tree too deep (3.11 on)."""


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse(source, filename, mode)``, where a source nested too deeply raises
    RecursionError on Python 3.10 too. There ``ast.parse`` has no depth limit while it builds
    the tree, and a chain of a million ``1+1+...`` or ``a.b.b...`` (2 MB: an LLM's reply, a
    candidate file) crashed the interpreter, the judge's process with it; 3.11 raises
    RecursionError. On 3.10 ``compile`` checks the depth first (any other error it finds is
    left to ``ast.parse`` to say, as on 3.11)."""
    if not _DEPTH_CHECKED:
        try:
            compile(source, filename, mode, dont_inherit=True)
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001 (ast.parse says what is wrong, as it does on 3.11)
            pass
    return ast.parse(source, filename=filename, mode=mode)
