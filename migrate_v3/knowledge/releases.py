"""Read the public names of a ``max`` release from its source, without importing it.

``regenerate_releases`` feeds this the ``.py``/``.pyi`` files of each old
wheel and of the installed max; the facts it derives (which names are gone in
26.7 and what replaced them) are stored in ``gone_26_7.json``. Reading source
with ``ast`` works for any release on any platform: an old wheel is never
installed or imported.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

#: A binding of a module-level name: ("def", kind) | ("import", module, name or None)
#: | ("alias", other local name) | ("star", module).
Binding = tuple[str, ...]

_DEPRECATED_USE = re.compile(r"\.\.\s+deprecated::[^\n]*\n\s*Use\s+:\w+:`~?([\w.]+)`")


@dataclass
class ModuleFacts:
    """One module's top-level bindings, in source order (a later binding wins)."""

    name: str
    is_package: bool
    bindings: dict[str, Binding] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)
    all: list[str] | None = None
    #: name -> the replacement a ``.. deprecated::`` note in its docstring names
    deprecated: dict[str, str] = field(default_factory=dict)
    #: class name -> its member names (methods and class-level assignments)
    members: dict[str, frozenset[str]] = field(default_factory=dict)


def module_name(path: str) -> tuple[str, bool] | None:
    """``max/a/b.py`` -> ("max.a.b", False); ``max/a/__init__.pyi`` -> ("max.a", True)."""
    if not path.endswith((".py", ".pyi")):
        return None
    parts = path.rsplit(".", 1)[0].split("/")
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    if not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts), False


def _absolute(module: ModuleFacts, level: int, target: str | None) -> str:
    parts = module.name.split(".")
    if not module.is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    base = ".".join(parts)
    return f"{base}.{target}" if target else base


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Top-level statements, looking into if/try/with blocks (module scope all the same)."""
    for stmt in body:
        if isinstance(stmt, ast.If | ast.With):
            yield from _statements(stmt.body)
            yield from _statements(getattr(stmt, "orelse", []))
        elif isinstance(stmt, ast.Try):
            yield from _statements(stmt.body)
            for handler in stmt.handlers:
                yield from _statements(handler.body)
            yield from _statements(stmt.orelse)
            yield from _statements(stmt.finalbody)
        else:
            yield stmt


def _literal_strings(node: ast.expr) -> list[str] | None:
    if isinstance(node, ast.List | ast.Tuple) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return None


def read_module(name: str, is_package: bool, source: str) -> ModuleFacts:
    """The facts of one module's source (an unparsable one has none)."""
    facts = ModuleFacts(name, is_package)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return facts
    for stmt in _statements(tree.body):
        _read_statement(facts, stmt)
    return facts


def _read_statement(facts: ModuleFacts, stmt: ast.stmt) -> None:
    b = facts.bindings
    if isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        b[stmt.name] = ("def", "class" if isinstance(stmt, ast.ClassDef) else "function")
        doc = ast.get_docstring(stmt) or ""
        m = _DEPRECATED_USE.search(doc)
        if m is not None:
            facts.deprecated[stmt.name] = m.group(1)
        if isinstance(stmt, ast.ClassDef):
            facts.members[stmt.name] = frozenset(_members(stmt))
    elif isinstance(stmt, ast.ImportFrom):
        module = _absolute(facts, stmt.level, stmt.module) if stmt.level else (stmt.module or "")
        for alias in stmt.names:
            if alias.name == "*":
                facts.stars.append(module)
            else:
                b[alias.asname or alias.name] = ("import", module, alias.name)
    elif isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.asname:
                b[alias.asname] = ("import", alias.name, "")
            else:
                top = alias.name.split(".")[0]
                b[top] = ("import", top, "")
    elif isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        value = stmt.value
        for target in targets:
            if not isinstance(target, ast.Name):
                continue
            if target.id == "__all__":
                _read_all(facts, stmt, value)
            elif isinstance(value, ast.Name) and isinstance(stmt, ast.Assign | ast.AnnAssign):
                b[target.id] = ("alias", value.id)
            elif not isinstance(stmt, ast.AugAssign):
                b[target.id] = ("def", "name")
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value  # __all__.extend([...])
        func = call.func
        if (
            isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "__all__"
            and func.attr == "extend" and call.args
        ):
            extra = _literal_strings(call.args[0])
            facts.all = None if extra is None or facts.all is None else [*facts.all, *extra]
    elif isinstance(stmt, ast.Delete):
        for target in stmt.targets:
            if isinstance(target, ast.Name):
                b.pop(target.id, None)


def _read_all(facts: ModuleFacts, stmt: ast.stmt, value: ast.expr | None) -> None:
    names = _literal_strings(value) if value is not None else None
    if isinstance(stmt, ast.AugAssign):
        facts.all = None if names is None or facts.all is None else [*facts.all, *names]
    else:
        facts.all = names


def _members(cls: ast.ClassDef) -> Iterator[str]:
    for item in cls.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            yield item.name
        elif isinstance(item, ast.Assign):
            yield from (t.id for t in item.targets if isinstance(t, ast.Name))
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            yield item.target.id


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


class Release:
    """Every module of one release, and what its public names resolve to."""

    def __init__(self, version: str, modules: Iterable[ModuleFacts]) -> None:
        self.version = version
        self.modules: dict[str, ModuleFacts] = {m.name: m for m in modules}
        for name in list(self.modules):  # namespace packages (``max`` has no __init__.py)
            parts = name.split(".")
            for i in range(1, len(parts)):
                self.modules.setdefault(".".join(parts[:i]), ModuleFacts(".".join(parts[:i]), True))
        self.children: dict[str, set[str]] = {}
        for name in self.modules:
            parent, _, child = name.rpartition(".")
            if parent:
                self.children.setdefault(parent, set()).add(child)
        self._star_cache: dict[str, dict[str, str]] = {}

    def star_names(self, module: str, seen: frozenset[str] = frozenset()) -> dict[str, str]:
        """Names ``from module import *`` binds -> the module they are looked up in."""
        if module in self._star_cache:
            return self._star_cache[module]
        facts = self.modules.get(module)
        if facts is None or module in seen:
            return {}
        out: dict[str, str] = {}
        if facts.all is not None:
            out = dict.fromkeys(facts.all, module)
        else:
            for star in facts.stars:
                out.update({n: m for n, m in self.star_names(star, seen | {module}).items()})
            out.update((n, module) for n in facts.bindings if not n.startswith("_"))
        self._star_cache[module] = out
        return out

    def binds(self, module: str, name: str) -> bool:
        """Whether ``from module import name`` works in this release."""
        facts = self.modules.get(module)
        if facts is None:
            return False
        return (
            name in facts.bindings
            or name in self.children.get(module, ())
            or (facts.all is not None and name in facts.all)
            or any(name in self.star_names(star) for star in facts.stars)
        )

    def public_names(self, module: str) -> dict[str, str]:
        """The names a user imports from ``module``: name -> kind ("module", "class",
        "function", "name"). ``__all__`` when it is a literal, else every binding not
        starting with ``_`` (a package's imports from max count, a plain module's
        imports do not: re-exporting is what an ``__init__`` is for); plus public submodules."""
        facts = self.modules[module]
        out: dict[str, str] = {}
        if facts.all is not None:
            names: Iterable[str] = facts.all
        else:
            names = [
                n for n, b in facts.bindings.items()
                if not n.startswith("_") and (b[0] != "import" or (facts.is_package and b[1].startswith("max")))
            ]
            if facts.is_package:
                names += [n for star in facts.stars if star.startswith("max") for n in self.star_names(star)]
        for n in names:
            end = self.resolve(module, n)
            out[n] = end[0] if end[0] in {"module", "class", "function"} else "name"
        for child in self.children.get(module, ()):
            if not child.startswith("_"):
                out[child] = "module"
        return out

    def public_modules(self) -> list[str]:
        return sorted(m for m in self.modules if not _private(m))

    def hops(self, module: str, name: str) -> list[tuple[str, str, str]]:
        """The names ``module.name`` is known by, following imports and ``x = y``
        aliases: [(module, name, how it got there)], the first being itself."""
        out = [(module, name, "self")]
        seen = {(module, name)}
        while True:
            step = self._step(module, name)
            if step is None or (step[0], step[1]) in seen:
                return out
            module, name, how = step
            seen.add((module, name))
            out.append((module, name, how))

    def _step(self, module: str, name: str) -> tuple[str, str, str] | None:
        facts = self.modules.get(module)
        if facts is None:
            return None
        binding = facts.bindings.get(name)
        if binding is None:
            for star in facts.stars:
                if name in self.star_names(star):
                    return self.star_names(star)[name], name, "re-export"
            return None
        if binding[0] == "alias":
            return module, binding[1], "alias"
        if binding[0] == "import" and binding[2]:
            target_module, target = binding[1], binding[2]
            if target_module in self.modules and not self.binds(target_module, target):
                return None  # `from pkg import submodule`: the module itself
            return target_module, target, "re-export"
        return None

    def resolve(self, module: str, name: str) -> tuple[str, str, str]:
        """(kind, defining module, name) of what ``module.name`` is in this release;
        kind "module", "class", "function", "name" or "external"."""
        last_module, last_name, _ = self.hops(module, name)[-1]
        facts = self.modules.get(last_module)
        if facts is None:
            return ("external", last_module, last_name)
        binding = facts.bindings.get(last_name)
        if binding is None or (binding[0] == "import" and not binding[2]):
            full = f"{last_module}.{last_name}"
            if full in self.modules or (binding is not None and binding[1] in self.modules):
                return ("module", binding[1] if binding is not None else full, "")
            return ("name", last_module, last_name)
        if binding[0] == "import":
            return ("module", f"{binding[1]}.{binding[2]}", "")
        if binding[0] == "def":
            return (binding[1], last_module, last_name)
        return ("name", last_module, last_name)

    def exists(self, qualified: str) -> bool:
        """Whether ``qualified`` (a module, or a name in one) is importable in this release."""
        if qualified in self.modules:
            return True
        module, _, name = qualified.rpartition(".")
        return bool(module) and self.binds(module, name)
