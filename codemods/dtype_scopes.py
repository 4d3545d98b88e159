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

A module of the package built with a dtype read off a config or named
(``VisionBlock(dtype=config.dtype)``, ``dtype=config.llm_dtype``,
``dtype=DType.float32``) keeps its ``dtype`` parameter, but its layers no
longer take it: V2 built the whole child in that dtype (a vision tower in its
sub-config's), so the statement is built under ``default_dtype`` of it too.
A bare ``dtype=dtype`` hands on the dtype the module itself is built under.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from codemods.args import source
from codemods.base import TODO_PREFIX, Codemod, FileState, nodes_of, todo_comments
from migrate_v3.knowledge.layers import module_kind, v2_symbol

_KEY = "DtypeScopes"

#: a dtype handed to a module of the package that V2 built it in: read off something
#: (``config.dtype``, ``self.config.vision_config.dtype``, ``config.llm_dtype``) or named (``DType.float32``)
_HANDED_DTYPE = re.compile(r"(?:[A-Za-z_]\w*\.)+(?:\w+_)?dtype|DType\.\w+")
_DTYPE_KEYWORD = re.compile(r"\bdtype\s*=(?!=)")


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
        #: (class name, dtype code) of the package's classes built with a dtype V2 built them in
        self.handed: set[tuple[str, str]] = set()
        #: the dtypes of the enclosing ``with default_dtype(...)`` blocks
        self.scoped: list[str] = []
        #: enclosing classes, innermost last: True for a module (a pipeline model's builds are
        #: ``pipeline_model``'s); and the file's module classes, by name
        self.classes: list[bool] = []
        self.module_classes: set[str] = set()

    def idle_hooks(self) -> tuple[str, ...]:
        """No ``dtype=`` keyword in the file: no call hands a module its dtype."""
        return () if _DTYPE_KEYWORD.search(self.state.source) else ("visit_Call",)

    def visit_Call(self, node: cst.Call) -> None:
        if not isinstance(node.func, cst.Name) or not node.func.value[:1].isupper():
            return
        qualname = self.qualname(node.func)
        if qualname is not None and (qualname.startswith("max.") or qualname == "max"):
            return  # a max class: ``layers`` maps its arguments
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "dtype":
                code = source(arg.value)
                if _HANDED_DTYPE.fullmatch(code):
                    self.handed.add((node.func.value, code))

    def visit_With(self, node: cst.With) -> None:
        self.scoped += [_scoped_dtype(item.item) or "" for item in node.items]

    def leave_With(self, original: cst.With, updated: cst.With) -> cst.With:
        del self.scoped[len(self.scoped) - len(original.items):]
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(True)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.functions.pop()
        return updated

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.functions.append(False)
        is_module = any(self._module_base(base.value) for base in node.bases)
        if is_module:
            self.module_classes.add(node.name.value)
        self.classes.append(is_module)

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.functions.pop()
        self.classes.pop()
        return updated

    def _module_base(self, base: cst.BaseExpression) -> bool:
        """A V2 module, layer or ported class, one of this file's modules, or a sibling's class
        the plan says derives from a max module."""
        value = base.value if isinstance(base, cst.Subscript) else base
        qualname = self.qualname(value)
        if module_kind(v2_symbol(qualname)) is not None:
            return True
        if isinstance(value, cst.Name) and value.value in self.module_classes:
            return True
        library = self.state.context.library_bases.get(qualname or "", "")
        return library.startswith(("max.nn.", "max.experimental.nn."))

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        if self.functions and self.functions[-1] and self.handed and self.classes and self.classes[-1]:
            updated = self._handed_scopes(original, updated)
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

    def _handed_scopes(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        """Each statement building a module of the package with a dtype V2 built it in (one
        dtype per statement), under ``default_dtype`` of it unless a block already is."""
        body = list(updated.body)
        for i, stmt in enumerate(body):
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            values = {
                code for call in nodes_of(stmt, (cst.Call,)) if isinstance(call, cst.Call)
                and isinstance(call.func, cst.Name) for arg in call.args
                if arg.keyword is not None and arg.keyword.value == "dtype"
                and (call.func.value, code := source(arg.value)) in self.handed
            }
            if len(values) != 1 or (value := values.pop()) in self.scoped:
                continue
            old: cst.CSTNode = original.body[i] if len(original.body) == len(body) else original
            body[i] = self._scoped(stmt, value, old, handed=True)
        return updated.with_changes(body=body)

    def _scoped(self, stmt: cst.BaseStatement, value: str, old: cst.CSTNode, handed: bool = False) -> cst.BaseStatement:
        if not isinstance(stmt, cst.SimpleStatementLine) or nodes_of(stmt, (cst.Lambda,)) or _reads_own_binding(stmt, value):
            return stmt
        default_dtype = self.state.import_name("max.experimental.tensor", "default_dtype")
        block = cst.parse_statement(f"with {default_dtype}({value}):\n    pass\n")
        assert isinstance(block, cst.With) and isinstance(block.body, cst.IndentedBlock)
        # the dtype TODOs go; the other TODOs are about the statement and stay on it; the author's lines go above
        todos = [line for line in stmt.leading_lines if line.comment is not None and line.comment.value.startswith(TODO_PREFIX)]
        inner = [line for line in todos if not _dtype_todo(line.comment.value)]  # type: ignore[union-attr]
        outer = [line for line in stmt.leading_lines if line not in todos]
        self.rewrote(old, "MV342", f"built with dtype={value}, which V2 built its layers in: the statement is built "
                     f"under default_dtype({value})" if handed else
                     f"dtype={value} dropped from its layer: the statement is built under default_dtype({value})")
        return block.with_changes(body=block.body.with_changes(body=[stmt.with_changes(leading_lines=inner)]), leading_lines=outer)


def _scoped_dtype(item: cst.BaseExpression) -> str | None:
    """The dtype of a ``default_dtype(x)`` context manager, or None."""
    if isinstance(item, cst.Call) and len(item.args) == 1 and source(item.func).split(".")[-1] == "default_dtype":
        return source(item.args[0].value)
    return None


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
