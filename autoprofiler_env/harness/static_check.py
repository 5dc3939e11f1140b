"""A static check of a candidate's source, in the spirit of KernelBench's
``kernel_static_checker.py``: it names the constructs that reward hacking uses.

It reads the syntax tree (no regular expressions over text, so comments and strings never
match). Findings of a *rejecting* rule fail the candidate (``ErrorKind.STATIC``) when the
harness runs with ``static_check="enforce"`` (the default); *warning* rules are listed in the
result only. The table is also in docs/harness.md.

| rule | rejects or warns | what it finds |
|---|---|---|
| ``patch`` | rejects | an assignment to an attribute of ``torch`` (outside ``torch.backends`` and the ``torch._inductor`` / ``torch._dynamo`` configs), ``time``, ``gc``, ``builtins``, ``sys``, ``os``, ``json`` (the worker's replies) or the harness (directly, through a name bound to one: ``_T = torch.Tensor; _T.to = f``, or through ``getattr(torch, "Tensor").to = f``), ``setattr`` / ``delattr`` / ``type.__setattr__`` on one of them, or into such a module's or object's namespace (``vars(m)[name] = f``, ``m.__dict__[name] = f``, ``vars(m).update(...)``); a name counts as the module only where an import (or an alias of one) bound it |
| ``introspection`` | rejects | the judge's own package (``autoprofiler_env``: imported, or by ``importlib.import_module`` / ``__import__`` of a name that starts so), ``gc``, ``inspect``, ``ctypes``, ``sys._getframe``, ``sys.settrace``, ``sys.setprofile``, ``sys.monitoring``, frame attributes (``f_back``, ``f_globals``, ``f_locals``, ``gi_frame``, ``tb_frame``), ``sys.modules``, ``__subclasses__``, ``__globals__``, ``__builtins__`` |
| ``environment`` | rejects | ``os.environ``, ``os.getenv``, ``os.environb``, ``os.putenv`` (but setting a build variable by its literal name: ``os.environ["TORCH_CUDA_ARCH_LIST"] = ...``, ``MAX_JOBS``, ``CUDA_*``, ``TRITON_*``) |
| ``network`` | rejects | ``socket``, ``ssl``, ``http``, ``urllib``, ``requests``, ``httpx``, ``aiohttp``, ``ftplib``, ``smtplib`` |
| ``filesystem`` | rejects | ``open`` for writing, ``os.remove`` / ``unlink`` / ``rmdir`` / ``rename`` / ``replace`` / ``makedirs`` / ``mkdir``, ``shutil``, ``Path.write_*`` / ``unlink`` / ``rmdir`` / ``touch`` |
| ``concurrency`` | rejects | ``threading``, ``_thread``, ``multiprocessing``, ``concurrent.futures``, ``subprocess``, ``os.fork`` / ``system`` / ``exec*`` / ``spawn*`` / ``popen``, ``signal``, ``torch.set_num_threads`` / ``set_num_interop_threads`` (the reference is timed with the judge's threads) |
| ``dynamic_code`` | warns | ``exec``, ``eval``, ``compile``, ``__import__``, ``importlib`` (they can hide anything from this check) |
| ``stream`` | warns | ``torch.cuda.Stream``, ``torch.cuda.stream``, ``wait_stream``, ``record_stream`` (legitimate in CUDA-graph capture; work left on a side stream is caught at run time) |
| ``fallback`` | warns | ``try`` / ``except`` (KernelBench's bypass rule; falling back to PyTorch is not cheating here) |

A static check is never complete (``getattr(__builtins__, "ev" + "al")`` passes it); the
run-time defences (docs/harness.md) do not depend on it.
"""  # noqa: E501 (a markdown table's rows are one line each)

from __future__ import annotations

import ast
from dataclasses import dataclass

from autoprofiler_env.pyast import parse

REJECT = ("patch", "introspection", "environment", "network", "filesystem", "concurrency")
WARN = ("dynamic_code", "stream", "fallback")

_PROTECTED_MODULES = {"torch", "time", "gc", "builtins", "sys", "os", "autoprofiler_env",
                      "numpy", "triton", "json"}
_ALLOWED_TORCH_ATTRS = ("torch.backends.", "torch._inductor.config.", "torch._dynamo.config.",
                        "torch._functorch.config.", "torch.fx.experimental._config.")
_ENV_WRITABLE = ("TORCH_", "CUDA_", "TRITON_", "NVCC_", "MAX_JOBS", "CXX", "CC")
"""The environment variables a candidate may set (by a literal name: a build's settings,
``TORCH_CUDA_ARCH_LIST``, ``MAX_JOBS``); its process's environment is scrubbed of secrets, and
reading it stays the ``environment`` rule's."""
_INTROSPECTION_MODULES = {"gc", "inspect", "ctypes", "_ctypes"}
_SYS_INTROSPECTION = {"modules", "_getframe", "settrace", "setprofile", "monitoring"}
_NETWORK_MODULES = {"socket", "ssl", "http", "urllib", "urllib3", "requests", "httpx", "aiohttp",
                    "ftplib", "smtplib", "telnetlib", "xmlrpc", "asyncio"}
_CONCURRENCY_MODULES = {"threading", "_thread", "multiprocessing", "concurrent", "subprocess",
                        "signal"}
_FS_MODULES = {"shutil"}
_FRAME_ATTRS = {"f_back", "f_globals", "f_locals", "f_builtins", "gi_frame", "tb_frame",
                "cr_frame", "__subclasses__", "__globals__", "__builtins__", "_getframe"}
_ENV_ATTRS = {"environ", "getenv", "environb", "putenv", "unsetenv"}
_OS_FS = {"remove", "unlink", "rmdir", "removedirs", "rename", "renames", "replace", "makedirs",
          "mkdir", "truncate", "chmod", "chown", "link", "symlink"}
_OS_PROC = {"fork", "forkpty", "system", "popen", "execv", "execve", "execl", "execle", "execlp",
            "execvp", "execvpe", "spawnl", "spawnv", "spawnve", "posix_spawn", "posix_spawnp",
            "kill", "killpg"}
_PATH_WRITES = {"write_text", "write_bytes", "unlink", "rmdir", "touch",
                "mkdir", "symlink_to", "hardlink_to", "chmod"}
_STREAM_ATTRS = {"wait_stream", "record_stream"}
_TORCH_THREADS = {"set_num_threads", "set_num_interop_threads"}
_DYNAMIC = {"exec", "eval", "compile", "__import__"}


_IMPORTERS = {"__import__", "importlib.import_module", "importlib.__import__",
              "importlib.util.find_spec"}


def _leading_text(node: ast.AST) -> str:
    """The text a string expression starts with, as far as it is written out: ``"a.b"``,
    ``"a." + x``, ``f"a.{x}"`` (all ``"a."``...); ``""`` where it starts with a name."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _leading_text(node.left)
        return left + _leading_text(node.right) if isinstance(node.left, ast.Constant) \
            else left
    if isinstance(node, ast.JoinedStr) and node.values:
        return _leading_text(node.values[0])
    return ""


@dataclass(frozen=True)
class Finding:
    """One construct the check found."""

    rule: str
    line: int
    message: str

    @property
    def rejects(self) -> bool:
        return self.rule in REJECT

    def __str__(self) -> str:
        return f"line {self.line}: {self.rule}: {self.message}"


def _dotted(node: ast.AST) -> str | None:
    """``torch.cuda.Event.record`` for an attribute chain of names (``getattr(m, "name")``
    read as ``m.name``), else None."""
    parts = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id == "getattr" and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            parts.append(node.args[1].value)
            node = node.args[0]
        else:
            break
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Visitor(ast.NodeVisitor):
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.aliases: dict[str, str] = {}  # local name -> module it is bound to
        self.allowed: set[int] = set()  # nodes of an allowed use (an environment write)

    def add(self, rule: str, node: ast.AST, message: str) -> None:
        self.findings.append(Finding(rule, getattr(node, "lineno", 0), message))

    def _resolve(self, dotted: str | None) -> str | None:
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        base = self.aliases.get(head, head)
        return f"{base}.{rest}" if rest else base

    def _imported(self, dotted: str | None) -> str | None:
        """:meth:`_resolve`'s name where it starts from a name an import (or an alias of one)
        bound: a local variable that happens to be called ``time`` or ``json`` is not the
        module."""
        if dotted is None or dotted.partition(".")[0] not in self.aliases:
            return None
        return self._resolve(dotted)

    def _protected(self, node: ast.AST) -> str | None:
        """The protected module or object ``node`` names (through an import), else None."""
        full = self._imported(_dotted(node))
        return full if full and full.split(".")[0] in _PROTECTED_MODULES else None

    # -- imports ----------------------------------------------------------------------------

    def _import(self, node: ast.AST, module: str) -> None:
        top = module.split(".")[0]
        if top == "autoprofiler_env":  # a candidate has no use for the judge's own code
            self.add("introspection", node, f"imports {module}, the judge's own package")
        elif top in _INTROSPECTION_MODULES:
            self.add("introspection", node, f"imports {module}")
        elif top in _NETWORK_MODULES:
            self.add("network", node, f"imports {module}")
        elif top in _CONCURRENCY_MODULES:
            self.add("concurrency", node, f"imports {module}")
        elif top in _FS_MODULES:
            self.add("filesystem", node, f"imports {module}")
        elif top == "importlib":
            self.add("dynamic_code", node, f"imports {module}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._import(node, alias.name)
            self.aliases[(alias.asname or alias.name).split(".")[0]] = (
                alias.name if alias.asname else alias.name.split(".")[0])
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._import(node, module)
        for alias in node.names:
            full = f"{module}.{alias.name}" if module else alias.name
            self.aliases[alias.asname or alias.name] = full
            if module == "os" and alias.name in _ENV_ATTRS:
                self.add("environment", node, f"imports os.{alias.name}")
            elif module == "os" and alias.name in _OS_PROC:
                self.add("concurrency", node, f"imports os.{alias.name}")
            elif module == "os" and alias.name in _OS_FS:
                self.add("filesystem", node, f"imports os.{alias.name}")
            elif module == "sys" and alias.name in _SYS_INTROSPECTION:
                self.add("introspection", node, f"imports sys.{alias.name}")
            elif module == "torch" and alias.name in _TORCH_THREADS:
                self.add("concurrency", node, f"imports torch.{alias.name}")
        self.generic_visit(node)

    # -- assignments (monkey-patching) ------------------------------------------------------

    def _check_target(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._check_target(t, node)
            return
        if not isinstance(target, (ast.Attribute, ast.Subscript)):
            return
        if isinstance(target, ast.Subscript) and self._namespace(target.value, node):
            return
        base = target.value if isinstance(target, ast.Subscript) else target
        if isinstance(target, ast.Subscript) and self._env_write(base, target.slice):
            return
        full = self._imported(_dotted(base))
        if full is None:
            owner = self._fetched(base)
            if owner is not None:
                self.add("patch", node, f"assigns an attribute of {owner}")
            return
        if any(full.startswith(p) or full + "." == p for p in _ALLOWED_TORCH_ATTRS):
            return
        if full.split(".")[0] in _PROTECTED_MODULES and "." in full:
            self.add("patch", node, f"assigns {full}")
        elif full.split(".")[0] in _PROTECTED_MODULES and isinstance(target, ast.Subscript):
            self.add("patch", node, f"assigns an item of {full}")

    def _namespace(self, value: ast.AST, node: ast.AST) -> bool:
        """``vars(x)`` or ``x.__dict__`` of a protected ``x`` written into (an item assigned,
        or ``update`` / ``setdefault``): a finding. (Of the candidate's own objects it is
        not; of an object passed in, the input guard watches what matters.)"""
        if isinstance(value, ast.Call) and _dotted(value.func) == "vars" and value.args:
            owner = value.args[0]
        elif isinstance(value, ast.Attribute) and value.attr == "__dict__":
            owner = value.value
        else:
            return False
        name = self._protected(owner)
        if name is None:
            return False
        self.add("patch", node, f"assigns into the namespace of {name}")
        return True

    def _env_write(self, base: ast.AST, key: ast.AST) -> bool:
        """``os.environ[KEY] = ...`` or ``os.environ.setdefault(KEY, ...)`` of a build
        setting (:data:`_ENV_WRITABLE`, a literal name): allowed, and not read as a use."""
        if self._imported(_dotted(base)) != "os.environ" or not (
                isinstance(key, ast.Constant) and isinstance(key.value, str)
                and key.value.startswith(_ENV_WRITABLE)):
            return False
        self.allowed.add(id(base))
        return True

    def _fetched(self, base: ast.AST) -> str | None:
        """The protected object an attribute chain starts from through ``getattr(m, name)``
        (``getattr(torch, "Tensor").to``), else None."""
        while isinstance(base, ast.Attribute):
            base = base.value
        if isinstance(base, ast.Call) and _dotted(base.func) == "getattr" and base.args:
            owner = self._imported(_dotted(base.args[0]))
            if owner and owner.split(".")[0] in _PROTECTED_MODULES and not any(
                    (owner + ".").startswith(p) for p in _ALLOWED_TORCH_ATTRS):
                return owner
        return None

    def _imported_by_call(self, value: ast.AST) -> str | None:
        """The module ``__import__("m")`` or ``importlib.import_module("m")`` binds."""
        if (isinstance(value, ast.Call) and self._resolve(_dotted(value.func)) in _IMPORTERS
                and value.args and isinstance(value.args[0], ast.Constant)
                and isinstance(value.args[0].value, str)):
            return value.args[0].value
        return None

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_target(target, node)
        # a name bound to a protected module or its attribute (``_T = torch.Tensor``) is an
        # alias: ``_T.to = f`` assigns ``torch.Tensor.to``
        full = self._imported(_dotted(node.value)) or self._imported_by_call(node.value)
        if full is not None and full.split(".")[0] in _PROTECTED_MODULES:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.aliases[target.id] = full
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._check_target(target, node)
        self.generic_visit(node)

    # -- names, attributes, calls -----------------------------------------------------------

    def visit_Attribute(self, node: ast.Attribute) -> None:
        full = self._resolve(_dotted(node)) or ""
        if id(node) in self.allowed:
            pass
        elif node.attr in _FRAME_ATTRS:
            self.add("introspection", node, f"reads .{node.attr}")
        elif full.startswith("sys.") and full[4:] in _SYS_INTROSPECTION:
            self.add("introspection", node, f"uses {full}")
        elif full.startswith("os.") and node.attr in _ENV_ATTRS:
            self.add("environment", node, f"uses {full}")
        elif full.startswith("os.") and node.attr in _OS_PROC:
            self.add("concurrency", node, f"uses {full}")
        elif full.startswith("torch.") and node.attr in _TORCH_THREADS:
            self.add("concurrency", node, f"uses {full}")
        elif full.startswith("os.") and node.attr in _OS_FS:
            self.add("filesystem", node, f"uses {full}")
        elif full in ("torch.cuda.Stream", "torch.cuda.stream") or node.attr in _STREAM_ATTRS:
            self.add("stream", node, f"uses {full or node.attr}")
        elif node.attr in _PATH_WRITES and not full.startswith(("torch.", "os.")):
            self.add("filesystem", node, f"calls .{node.attr}")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in _DYNAMIC and isinstance(node.ctx, ast.Load):
            self.add("dynamic_code", node, f"uses {node.id}")
        elif node.id in _FRAME_ATTRS:
            self.add("introspection", node, f"uses {node.id}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = self._resolve(_dotted(node.func))
        if func in _IMPORTERS and node.args and _leading_text(node.args[0]).startswith(
                "autoprofiler_env"):
            self.add("introspection", node, f"{func} of the judge's own package")
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("update", "setdefault"):
            self._namespace(node.func.value, node)
            if node.func.attr == "setdefault" and node.args:
                self._env_write(node.func.value, node.args[0])
        if (func in ("setattr", "delattr") or (func or "").endswith(
                (".__setattr__", ".__delattr__"))) and node.args:
            target = self._imported(_dotted(node.args[0]))
            if target and target.split(".")[0] in _PROTECTED_MODULES and not any(
                    (target + ".").startswith(p) for p in _ALLOWED_TORCH_ATTRS):
                self.add("patch", node, f"{func} on {target}")
        if func in ("open", "io.open", "builtins.open", "os.open"):
            mode = None
            if len(node.args) >= 2:
                mode = node.args[1]
            for kw in node.keywords:
                if kw.arg in ("mode", "flags"):
                    mode = kw.value
            if func == "os.open" or (mode is not None and not (
                    isinstance(mode, ast.Constant) and isinstance(mode.value, str)
                    and not set(mode.value) & set("wax+"))):
                self.add("filesystem", node, f"{func} for writing")
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        self.add("fallback", node, "try/except (a fallback to PyTorch is allowed here)")
        self.generic_visit(node)

    visit_TryStar = visit_Try


def check_source(source: str) -> list[Finding]:
    """The findings in ``source``, in line order. A source that does not parse has none (the
    import in the worker reports the syntax error)."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    visitor = _Visitor()
    try:
        visitor.visit(tree)
    except RecursionError:
        visitor.add("dynamic_code", tree, "a syntax tree too deep to check")
    return sorted(visitor.findings, key=lambda f: f.line)
