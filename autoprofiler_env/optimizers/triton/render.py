"""Rendering a rewritten graph as a standalone candidate: :func:`_standalone_forward` (the
generated ``forward`` and the imports its globals need), :func:`_render` (header, kernels and
``class ModelNew(Model)``) and :class:`Rewrite`, the result of an analysis.
"""

from __future__ import annotations

import builtins
import re
import types
from dataclasses import dataclass
from typing import Any, Callable

from autoprofiler_env.optimizers.triton.templates import _HEADER
from autoprofiler_env.optimizers.triton.trace import _MISSING, _NoMatch, _Traced


def _standalone_forward(traced: _Traced, launchers: dict[str, Callable]) -> tuple[str, list[str]]:
    """The rewritten graph's forward as source (indented for a class body) and the import
    lines its globals need.

    Raises:
        _NoMatch: the forward refers to something a standalone file cannot name.
    """
    from torch.fx.graph import _custom_builtins

    graph = traced.gm.graph
    graph.lint()
    # attributes fx made up while tracing (tensor constants) do not exist on Model
    for node in graph.nodes:
        if node.op in ("get_attr", "call_module"):
            obj: Any = traced.model
            for part in node.target.split("."):
                if not hasattr(obj, part):
                    raise _NoMatch(f"the traced graph uses {node.target}, which Model lacks")
                obj = getattr(obj, part)
    code = graph.python_code(root_module="self")
    src = code.src
    start = src.find("def forward(")
    if start < 0:
        raise _NoMatch("fx generated no forward")
    src = src[start:].rstrip()
    body_names = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", src))
    imports: list[str] = []
    by_object = {id(fn): name for name, fn in launchers.items()}
    for name, obj in code.globals.items():
        if name not in body_names:
            continue
        if id(obj) in by_object:
            if name != by_object[id(obj)]:
                imports.append(f"{name} = {by_object[id(obj)]}")
            continue
        builtin = _custom_builtins.get(name)
        if builtin is not None and builtin.obj is obj:
            imports.append(builtin.import_str)
            continue
        if getattr(builtins, name, None) is obj:
            continue
        if getattr(traced.module, name, _MISSING) is obj:
            continue  # a global of the problem's own source, which the candidate contains
        if isinstance(obj, types.ModuleType):
            imports.append(f"import {obj.__name__} as {name}")
            continue
        module_name = getattr(obj, "__module__", None)
        qualname = getattr(obj, "__qualname__", None)
        if (module_name and qualname and "." not in qualname
                and not module_name.startswith(("autoprofiler_env", "_autoprofiler_problem"))):
            import importlib

            try:
                found = getattr(importlib.import_module(module_name), qualname, None)
            except ImportError:
                found = None
            if found is obj:
                imports.append(f"from {module_name} import {qualname} as {name}")
                continue
        raise _NoMatch(f"the generated forward refers to {name} ({obj!r}), which a standalone "
                       "file cannot import")
    return "\n".join("    " + line if line.strip() else "" for line in src.splitlines()), imports


@dataclass(frozen=True)
class Rewrite:
    """A rewrite ready for rendering (params are filled in later), or why there is none."""

    sites: tuple[str, ...] = ()
    source: str = ""  # the body with {block!r} / {num_warps!r} still to fill
    reason: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.sites)


def _render(name: str, traced: _Traced, launchers: dict[str, Callable], kernels: list[str],
            sites: list[str]) -> str:
    forward, imports = _standalone_forward(traced, launchers)
    lines = [_HEADER]
    extra = [i for i in dict.fromkeys(imports) if i != "import torch"]
    if extra:
        lines.append("\n".join(extra) + "\n")
    for kernel in kernels:
        lines.append(kernel.replace("{", "{{").replace("}", "}}"))
    doc = (f'    """Model with {len(sites)} part(s) of its forward replaced by hand-written '
           f'Triton kernels ({name}):\n'
           + "".join(f"    - {s}\n" for s in sites).replace("{", "{{").replace("}", "}}")
           + '    """')
    lines.append("\nclass ModelNew(Model):\n" + doc + "\n\n"
                 + forward.replace("{", "{{").replace("}", "}}") + "\n")
    return "\n".join(lines)
