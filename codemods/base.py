"""What every codemod shares: per-file state, the base class, the engine.

A codemod is a small class with libcst-style ``visit_<Node>``/``leave_<Node>``
hooks (like ``libcst.codemod.VisitorBasedCodemodCommand``). The :class:`Engine`
runs all codemods of ``codemods.ORDER`` in ONE traversal: at each node their
hooks run in ORDER, each receiving the node the previous one returned (the way
ruff and Fixit batch rules). One traversal instead of one per codemod keeps
``apply`` close to the cost of a plain libcst parse-and-print.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import libcst as cst
from libcst.metadata import PositionProvider, QualifiedNameProvider

from codemods.resolve import ImportTableResolver, Resolver, ScopeResolver
from migrate_v3.findings import Finding

TODO_PREFIX = "# TODO(migrate-v3): "
TODO_RE = re.compile(r"#\s*TODO\(migrate-v3\):\s*(MV\d{3})\s*(.*?)\s*$")


@dataclass
class TransformContext:
    """Per-run options and cross-file facts (plain data, no I/O)."""

    #: V2 package name → its V3 package name, for packages that have a V3
    #: variant or are migrated in the same run (``llama3`` → ``llama3_modulev3``).
    v3_packages: dict[str, str] = field(default_factory=dict)
    #: Dotted prefix under which sibling architecture packages live.
    architectures_package: str = "max.pipelines.architectures"
    #: The package this file belongs to (``mpnet``), when known.
    package: str | None = None
    #: Apply MV371-style fixes whose meaning is only equivalent for V2-valid input.
    unsafe_fixes: bool = False
    #: Leave files that already use ``max.experimental`` untouched.
    only_v2: bool = True
    #: Resolve names with libcst's QualifiedNameProvider instead of the import table.
    precise_names: bool = False
    #: Report the original line/column of each rewrite (costs a position pass).
    positions: bool = True
    #: The file is an architecture's ``arch.py`` (registration rewrite).
    is_arch_module: bool = False
    #: The file is a package ``__init__.py`` (export renames).
    is_package_init: bool = False
    #: How deep the file sits inside its package (0 = top-level module).
    package_depth: int = 0


@dataclass
class FileState:
    """Mutable state of one file's transform, shared by all codemods."""

    context: TransformContext
    #: the file's source text (for cheap regex prefilters)
    source: str = ""
    resolver: Resolver = field(default=None)  # type: ignore[assignment]
    findings: list[Finding] = field(default_factory=list)
    #: (module, name, asname) imports the rewritten code needs
    needed_imports: set[tuple[str, str, str | None]] = field(default_factory=set)
    #: module-level helper code to append after the imports, by name
    helpers: dict[str, str] = field(default_factory=dict)
    #: TODO texts for the innermost statement being visited
    statement_todos: list[list[str]] = field(default_factory=list)
    #: ids of Name nodes that are not references (attribute names, keywords, defs)
    non_refs: set[int] = field(default_factory=set)
    #: ids of expressions used as a call's function / an attribute's base
    call_funcs: set[int] = field(default_factory=set)
    attr_bases: set[int] = field(default_factory=set)
    #: depth inside annotations
    annotation_depth: int = 0
    position_of: Callable[[cst.CSTNode], tuple[int, int]] = lambda node: (0, 0)
    #: names bound at module level (classes, functions, assignments, imports)
    module_names: set[str] = field(default_factory=set)
    #: the module's first statement (id) and the comments of the module header above it
    first_statement: int = -1
    header_comments: frozenset[str] = frozenset()
    #: renames of module-level names done by a codemod (``foo_arch`` → ``foo_modulev3_arch``)
    renamed_exports: dict[str, str] = field(default_factory=dict)

    def qualname(self, node: cst.BaseExpression) -> str | None:
        if isinstance(node, cst.Name) and id(node) in self.non_refs:
            return None
        return self.resolver.qualname(node)

    def import_name(self, module: str, name: str) -> str:
        """Request ``from module import name``; returns the local name to use."""
        self.needed_imports.add((module, name, None))
        return name


class Codemod:
    """Base class: one concern, one rule-code prefix, libcst-style hooks.

    Subclasses define ``visit_<Node>(node)`` / ``leave_<Node>(original, updated)``
    and call :meth:`rewrote` / :meth:`todo` to report what they did.
    """

    PREFIX: ClassVar[str] = "MV3"
    #: Also runs on files with no V2 code (``arch.py``, ``__init__.py``...).
    NEUTRAL_OK: ClassVar[bool] = False

    def __init__(self, state: FileState) -> None:
        self.state = state

    @classmethod
    def applies(cls, source: str) -> bool:
        """Cheap text prefilter: False means the codemod cannot change ``source``."""
        return True

    def qualname(self, node: cst.BaseExpression) -> str | None:
        return self.state.qualname(node)

    def rewrote(self, node: cst.CSTNode, code: str, message: str) -> None:
        line, col = self.state.position_of(node)
        self.state.findings.append(Finding(line, col, code, message))

    def todo(self, code: str, message: str) -> None:
        """Attach ``# TODO(migrate-v3): <code> <message>`` to the enclosing statement."""
        text = f"{TODO_PREFIX}{code} {message}"
        if self.state.statement_todos:
            pending = self.state.statement_todos[-1]
            if text not in pending:
                pending.append(text)


def todo_comments(node: cst.CSTNode) -> set[str]:
    lines = getattr(node, "leading_lines", ())
    return {el.comment.value for el in lines if el.comment is not None}


def attach_todos(node: cst.CSTNode, todos: list[str], also_existing: frozenset[str] = frozenset()) -> cst.CSTNode:
    """Add TODO comment lines before a statement, never twice.

    ``also_existing``: comments already above the statement but stored
    elsewhere (libcst keeps the comments before a module's first statement in
    ``Module.header``).
    """
    if not todos or not hasattr(node, "leading_lines"):
        return node
    existing = todo_comments(node) | also_existing
    new = [t for t in todos if t not in existing]
    if not new:
        return node
    lines = list(node.leading_lines) + [
        cst.EmptyLine(comment=cst.Comment(t)) for t in new
    ]
    return node.with_changes(leading_lines=lines)




class Engine(cst.CSTTransformer):
    """Runs a list of codemods in one traversal, hooks in list order."""

    def __init__(self, codemods: list[Codemod], state: FileState) -> None:
        super().__init__()
        self.state = state
        self.visits: dict[str, list[Callable[[Any], Any]]] = {}
        self.leaves: dict[str, list[Callable[[Any, Any], Any]]] = {}
        for mod in codemods:
            for attr in dir(type(mod)):
                if attr.startswith("visit_"):
                    self.visits.setdefault(attr[6:], []).append(getattr(mod, attr))
                elif attr.startswith("leave_"):
                    self.leaves.setdefault(attr[6:], []).append(getattr(mod, attr))

    def on_visit(self, node: cst.CSTNode) -> bool:
        state = self.state
        kind = type(node).__name__
        book = _BOOKKEEPING.get(kind)
        if book is not None:
            book(state, node)
        if kind in _IMPORTS:
            descend = False
        else:
            descend = True
        hooks = self.visits.get(kind)
        if hooks:
            for hook in hooks:
                if hook(node) is False:
                    descend = False
        return descend

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        result: Any = updated_node
        kind = type(original_node).__name__
        hooks = self.leaves.get(kind)
        if hooks:
            for hook in hooks:
                result = hook(original_node, result)
                if not isinstance(result, cst.CSTNode):
                    break
        if kind == "Annotation":
            self.state.annotation_depth -= 1
        elif kind in _STATEMENT_KINDS:
            todos = self.state.statement_todos.pop()
            if todos and isinstance(result, cst.CSTNode):
                extra = self.state.header_comments if id(original_node) == self.state.first_statement else frozenset()
                result = attach_todos(result, todos, extra)
            elif todos and self.state.statement_todos:
                self.state.statement_todos[-1].extend(todos)
        return result


def _on_statement(state: FileState, node: Any) -> None:
    state.statement_todos.append([])


def _on_function(state: FileState, node: Any) -> None:
    state.statement_todos.append([])
    state.non_refs.add(id(node.name))


def _on_attribute(state: FileState, node: Any) -> None:
    state.non_refs.add(id(node.attr))
    state.attr_bases.add(id(node.value))


def _on_call(state: FileState, node: Any) -> None:
    state.call_funcs.add(id(node.func))


def _on_arg(state: FileState, node: Any) -> None:
    if node.keyword is not None:
        state.non_refs.add(id(node.keyword))


def _on_param(state: FileState, node: Any) -> None:
    state.non_refs.add(id(node.name))


def _on_annotation(state: FileState, node: Any) -> None:
    state.annotation_depth += 1


_STATEMENT_KINDS = frozenset(
    {
        "SimpleStatementLine",
        "FunctionDef",
        "ClassDef",
        "If",
        "For",
        "While",
        "With",
        "Try",
        "TryStar",
        "Match",
    }
)
_IMPORTS = frozenset({"Import", "ImportFrom"})
#: engine bookkeeping per node type (dispatch by type name: no isinstance chains)
_BOOKKEEPING: dict[str, Callable[[FileState, Any], None]] = {
    **{k: _on_statement for k in _STATEMENT_KINDS},
    "FunctionDef": _on_function,
    "ClassDef": _on_function,
    "Attribute": _on_attribute,
    "Call": _on_call,
    "Arg": _on_arg,
    "Param": _on_param,
    "Annotation": _on_annotation,
}


_ENGINE_CLASSES: dict[tuple[bool, bool], type[Engine]] = {}


def engine_class(positions: bool, precise: bool) -> type[Engine]:
    """An Engine subclass declaring exactly the metadata this run needs."""
    key = (positions, precise)
    if key not in _ENGINE_CLASSES:
        deps: list[Any] = []
        if positions:
            deps.append(PositionProvider)
        if precise:
            deps.append(QualifiedNameProvider)
        _ENGINE_CLASSES[key] = type(
            "Engine", (Engine,), {"METADATA_DEPENDENCIES": tuple(deps)}
        )
    return _ENGINE_CLASSES[key]


def make_resolver(module: cst.Module, engine: Engine, precise: bool) -> Resolver:
    return ScopeResolver(engine) if precise else ImportTableResolver(module)
