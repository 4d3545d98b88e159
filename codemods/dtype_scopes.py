"""MV342 — a layer V2 built in a dtype of its own is built under ``default_dtype`` of it.

V2 layers take ``dtype=``; V3 layers take the dtype of the ``default_dtype`` they
are built under (the model's, when the pipeline builds the root). ``layers``
drops ``dtype=`` and, where it names a dtype apart from the model's
(``DType.float32``, ``config.llm_dtype``), says so in a TODO. For a layer that
is no norm, the statement that builds it is built under that dtype instead,
which is what V2 built (a norm keeps the TODO: V2 cast its weight to the
input's dtype, V3 does not). Only in a function body, for a simple statement
whose dropped dtypes all read the same, outside a lambda, and when the dtype
reads no name the statement binds (a comprehension's):

    self.gate = Linear(hidden, experts, dtype=config.gate_dtype, device=d)
    →  with default_dtype(config.gate_dtype):
           self.gate = Linear(in_dim=hidden, out_dim=experts, bias=False)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from codemods.base import TODO_PREFIX, Codemod, FileState, nodes_of, todo_comments

_KEY = "DtypeScopes"


@dataclass
class DtypeScope:
    """What ``layers`` dropped in one statement: the TODO texts of its pinned dtypes, and the one
    dtype to build the statement under (None: it may not be scoped: a norm, a factory, two dtypes)."""

    texts: set[str] = field(default_factory=set)
    value: str | None = ""

    def add(self, text: str, value: str | None) -> None:
        self.texts.add(f"{TODO_PREFIX}MV342 {text}")
        self.value = value if self.value in ("", value) else None


def dtype_scopes(state: FileState) -> dict[int, DtypeScope]:
    """This file's statements (ids of the original nodes) that build a layer whose pinned dtype
    ``layers`` dropped → what it dropped (made on first use)."""
    found = state.shared.get(_KEY)
    if found is None:
        found = state.shared[_KEY] = {}
    return found


class DtypeScopes(Codemod):
    PREFIX = "MV342"

    @classmethod
    def applies(cls, source: str) -> bool:
        return "dtype" in source

    def __init__(self, state: FileState) -> None:
        super().__init__(state)
        #: enclosing scopes, innermost last: True for a function
        self.functions: list[bool] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(True)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.functions.pop()
        return updated

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.functions.append(False)

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.functions.pop()
        return updated

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        scopes: dict[int, DtypeScope] | None = self.state.shared.get(_KEY)
        if not scopes or not self.functions or not self.functions[-1]:
            return updated
        # the statements that dropped a pinned dtype, in order, matched to those that still carry
        # the same TODOs (other rewrites may have added, replaced or removed statements)
        olds = [(s, scopes[id(s)]) for s in original.body if id(s) in scopes]
        if not olds:
            return updated
        body = list(updated.body)
        for i, stmt in enumerate(body):
            todos = {c for c in todo_comments(stmt) if _dtype_todo(c)}
            at = next((j for j, (_, scope) in enumerate(olds) if scope.texts == todos), None) if todos else None
            if at is None:
                continue
            old, scope = olds.pop(at)
            if scope.value:
                body[i] = self._scoped(stmt, scope.value, old)
        return updated.with_changes(body=body)

    def _scoped(self, stmt: cst.BaseStatement, value: str, old: cst.BaseStatement) -> cst.BaseStatement:
        if not isinstance(stmt, cst.SimpleStatementLine) or nodes_of(stmt, (cst.Lambda,)) or _reads_own_binding(stmt, value):
            return stmt
        default_dtype = self.state.import_name("max.experimental.tensor", "default_dtype")
        block = cst.parse_statement(f"with {default_dtype}({value}):\n    pass\n")
        assert isinstance(block, cst.With) and isinstance(block.body, cst.IndentedBlock)
        # the dtype TODOs go; the other TODOs are about the statement and stay on it; the author's lines go above
        todos = [line for line in stmt.leading_lines if line.comment is not None and line.comment.value.startswith(TODO_PREFIX)]
        inner = [line for line in todos if not _dtype_todo(line.comment.value)]  # type: ignore[union-attr]
        outer = [line for line in stmt.leading_lines if line not in todos]
        self.rewrote(old, "MV342", f"dtype={value} dropped from its layer: the statement is built under default_dtype({value})")
        return block.with_changes(body=block.body.with_changes(body=[stmt.with_changes(leading_lines=inner)]), leading_lines=outer)


def _dtype_todo(text: str) -> bool:
    return text.startswith(f"{TODO_PREFIX}MV342 ") and "dropped: V3 weights take default_dtype" in text


def _reads_own_binding(stmt: cst.SimpleStatementLine, value: str) -> bool:
    """``value`` names something a comprehension (or ``:=``) of ``stmt`` binds."""
    bound: set[str] = set()
    for node in nodes_of(stmt, (cst.CompFor, cst.NamedExpr)):
        target = node.target if isinstance(node, cst.CompFor | cst.NamedExpr) else None
        if target is not None:
            bound |= {n.value for n in nodes_of(target, (cst.Name,)) if isinstance(n, cst.Name)}
    return any(name in bound for name in _identifiers(value))


def _identifiers(code: str) -> set[str]:
    expr = cst.parse_expression(code)
    return {n.value for n in nodes_of(expr, (cst.Name,)) if isinstance(n, cst.Name)} | (
        {expr.value} if isinstance(expr, cst.Name) else set()
    )


__all__ = ["DtypeScope", "DtypeScopes", "dtype_scopes"]
