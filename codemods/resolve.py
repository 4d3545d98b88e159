"""Name resolution: which module symbol a ``Name``/``Attribute`` refers to.

Two interchangeable resolvers:

* :class:`ScopeResolver` asks libcst's ``QualifiedNameProvider`` (scope
  analysis: honours shadowing, function-local imports, ``global``...).
* :class:`ImportTableResolver` reads the import statements only. It is ~5x
  cheaper (scope analysis costs more than parsing) and exact for code that
  does not rebind imported names; ``apply`` uses it by default and the test
  suite checks both give the same output on every fixture.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Protocol

import libcst as cst
from libcst.metadata import QualifiedName, QualifiedNameSource


def dotted(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` as a string, or None for anything but names and attributes."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def module_name(node: cst.BaseExpression | None, relative: tuple[cst.Dot, ...] = ()) -> str:
    """The dotted module of an ``ImportFrom`` (with leading dots when relative)."""
    base = dotted(node) if node is not None else ""
    return "." * len(relative) + (base or "")


def iter_imports(body: Sequence[cst.BaseStatement]) -> Iterator[cst.Import | cst.ImportFrom]:
    """Every import statement, at any depth of statement nesting (not expressions)."""
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import | cst.ImportFrom):
                    yield small
        elif isinstance(stmt, cst.BaseCompoundStatement):
            yield from _iter_compound(stmt)


def statement_blocks(stmt: ast.AST) -> Iterator[list[ast.stmt]]:
    """The statement lists directly inside an ``ast`` compound statement, in source order
    (``body``, except handlers / match cases, ``orelse``, ``finalbody``): the ``ast`` twin of
    the block walk below, for code that walks statements and never expressions."""
    body = getattr(stmt, "body", None)
    if isinstance(body, list):
        yield body
    for part in (*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())):
        yield part.body
    for name in ("orelse", "finalbody"):
        tail = getattr(stmt, name, None)
        if isinstance(tail, list) and tail:
            yield tail


def _iter_compound(stmt: cst.BaseCompoundStatement) -> Iterator[cst.Import | cst.ImportFrom]:
    blocks: list[cst.BaseSuite] = []
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.BaseSuite):
        blocks.append(body)
    for case in getattr(stmt, "cases", ()):
        blocks.append(case.body)
    for attr in ("orelse", "finalbody"):
        extra = getattr(stmt, attr, None)
        if extra is not None:
            if isinstance(extra, cst.If):
                yield from _iter_compound(extra)
            else:
                blocks.append(extra.body)
    for handler in getattr(stmt, "handlers", ()):
        blocks.append(handler.body)
    for block in blocks:
        if isinstance(block, cst.IndentedBlock):
            yield from iter_imports(block.body)


def import_bindings(node: cst.Import | cst.ImportFrom) -> Iterator[tuple[str, str]]:
    """(local name, qualified target) for each name an import statement binds."""
    if isinstance(node, cst.Import):
        for alias in node.names:
            target = dotted(alias.name) or ""
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                yield alias.asname.name.value, target
            else:
                first = target.split(".", 1)[0]
                yield first, first
        return
    if isinstance(node.names, cst.ImportStar):
        return
    mod = module_name(node.module, tuple(node.relative))
    for alias in node.names:
        name = dotted(alias.name) or ""
        local = name
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            local = alias.asname.name.value
        sep = "" if mod.endswith(".") else "."
        yield local, f"{mod}{sep}{name}"


class Resolver(Protocol):
    def qualname(self, node: cst.BaseExpression) -> str | None:
        """The imported symbol ``node`` (an original node) refers to, or None."""
        ...


class ImportTableResolver:
    """Resolves through the file's import statements (no scope analysis)."""

    def __init__(self, module: cst.Module) -> None:
        self.table: dict[str, str] = {}
        for imp in iter_imports(module.body):
            for local, target in import_bindings(imp):
                self.table[local] = target

    def qualname(self, node: cst.BaseExpression) -> str | None:
        if isinstance(node, cst.Name):
            return self.table.get(node.value)
        if isinstance(node, cst.Attribute):
            base = self.qualname(node.value)
            return None if base is None else f"{base}.{node.attr.value}"
        return None


class ScopeResolver:
    """Resolves with libcst's ``QualifiedNameProvider`` (its resolved mapping for the module)."""

    def __init__(self, names: Mapping[cst.CSTNode, Collection[QualifiedName]]) -> None:
        self.names = names

    def qualname(self, node: cst.BaseExpression) -> str | None:
        names = self.names.get(node, ())
        if callable(names):  # newer libcst resolves this provider lazily: a value to call
            names = names()
        for q in sorted(names, key=lambda q: q.name):
            if q.source is QualifiedNameSource.IMPORT:
                return str(q.name)
        return None
