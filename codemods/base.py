"""What every codemod shares: per-file state, the base class, the engine.

A codemod is a small class with libcst-style ``visit_<Node>``/``leave_<Node>``
hooks (like ``libcst.codemod.VisitorBasedCodemodCommand``). The :class:`Engine`
runs all codemods of ``codemods.ORDER`` in ONE traversal: at each node their
hooks run in ORDER, each receiving the node the previous one returned (the way
ruff and Fixit batch rules). One traversal instead of one per codemod keeps
``apply`` close to the cost of a plain libcst parse-and-print; the traversal
is the Engine's own (see "the traversal" below), not libcst's transformer,
which costs as much as the parse.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import libcst as cst
from libcst import FlattenSentinel, MaybeSentinel, RemovalSentinel
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider

from codemods import grammar as node_grammar
from codemods.resolve import ImportTableResolver, Resolver, ScopeResolver

#: The text prefilters (``Codemod.applies`` and narrower ones inside codemods)
#: only skip work that cannot change the output; ``MIGRATE_V3_NO_PREFILTERS=1``
#: turns them all off to show that (``bench/apply_bench.py compare``).
PREFILTERS = os.environ.get("MIGRATE_V3_NO_PREFILTERS") != "1"


def prefilters_on() -> bool:
    return PREFILTERS


TODO_PREFIX = "# TODO(migrate-v3): "
TODO_RE = re.compile(r"#\s*TODO\(migrate-v3\):\s*(MV\d{3})\s*(.*?)\s*$")


class FieldDecl(NamedTuple):
    """A V2 dataclass field as a V3 subclass re-declares it when the V3 base lost it:
    ``name: <annotation> = <value>`` (a keyword-only ``field(...)``, so it fits after any
    field), and the ``from module import name`` imports the two need; ``default`` is the plain
    default value (``= v`` or ``field(default=v)``; None: none, or a factory) that a class which
    is no dataclass can hold as a class attribute."""

    annotation: str
    value: str
    imports: tuple[tuple[str, str], ...] = ()
    default: str | None = None


class CallShape(NamedTuple):
    """A call that passes names by keyword and may call a module instance (``module_interface``):
    how many positionals (None: a ``*`` spread), the keyword names, whether a ``**`` spread
    passes more, and the class called when the call shows it (``self(...)``: its own)."""

    positional: int | None
    keywords: frozenset[str]
    spread: bool = False
    of: str | None = None


@dataclass
class TransformContext:
    """Per-run options and cross-file facts (plain data, no I/O)."""

    #: V2 package name → its V3 package name, for packages that have a V3
    #: variant or are migrated in the same run (``llama3`` → ``llama3_modulev3``).
    v3_packages: dict[str, str] = field(default_factory=dict)
    #: dotted module of an existing V3 variant → the names it defines (see plan.module_exports)
    v3_exports: dict[str, frozenset[str]] = field(default_factory=dict)
    #: ``pkg.module.Class`` → attribute names, for existing V3 variants and their V2 packages
    class_attributes: dict[str, frozenset[str]] = field(default_factory=dict)
    #: every ``.name`` the files of this file's package read (by text)
    attribute_reads: frozenset[str] = frozenset()
    #: existing variants whose pipeline ``model`` this file's package imports (so it builds their module tree)
    variant_models: frozenset[str] = frozenset()
    #: ``pkg.module.Class`` → ``__init__`` parameters, same classes as ``class_attributes``
    class_signatures: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: ``pkg.module.Class`` with no ``__init__`` of its own → the class whose ``__init__`` it runs (plan.init_owners)
    init_owners: dict[str, str] = field(default_factory=dict)
    #: ``class_attributes`` with what each class inherits from the other classes read
    class_fields: dict[str, frozenset[str]] = field(default_factory=dict)
    #: ``pkg.module.Class`` of the V2 classes among those that are dataclasses (configs)
    data_classes: frozenset[str] = frozenset()
    #: ``pkg.module.Class.field`` → its declaration, for the fields of those V2 dataclasses
    field_decls: dict[str, FieldDecl] = field(default_factory=dict)
    #: ``pkg.module.Class`` → the qualified ``max`` library class it subclasses, same classes
    library_bases: dict[str, str] = field(default_factory=dict)
    #: ``pkg.module.Class`` → the parameters its instances are called with (``forward``/``__call__``)
    call_signatures: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: the calls of this file's package that may call a module instance with keywords
    #: (``module_interface.call_keywords``); None: not known, the file's own are read
    call_keywords: frozenset[CallShape] | None = None
    #: dotted modules of V2 siblings that use no V2 API (importing them brings no V2 graph code)
    neutral_modules: frozenset[str] = frozenset()
    #: the source before ``release_names`` spelled its imports the 26.7 way (None: it did not)
    renamed_from: str | None = None
    #: the file may import older releases' names; False when ``check`` found none (MV311-MV313),
    #: which spares ``release_names`` its parse of the file
    old_release_names: bool = True
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
    #: Report the original line/column of each rewrite (costs a codegen of the rewritten statements).
    positions: bool = True
    #: ``classify_source`` of this exact source when the caller already knows it (apply has
    #: check's scan of every file: the file is not scanned twice); None: classify it
    source_kind: str | None = None
    #: The file is an architecture's ``arch.py`` (registration rewrite).
    is_arch_module: bool = False
    #: The file is a package ``__init__.py`` (export renames).
    is_package_init: bool = False
    #: How deep the file sits inside its package (0 = top-level module).
    package_depth: int = 0
    #: The dotted package a relative import's first dot names (``pkg.layers`` for ``pkg/layers/x.py``).
    file_package: str = ""
    #: ``pkg.module.Class`` of the package's (and read siblings') classes that derive from a
    #: ``max`` module class (``plan.module_classes``)
    module_classes: frozenset[str] = frozenset()


@dataclass
class FileState:
    """Mutable state of one file's transform, shared by all codemods."""

    context: TransformContext
    #: the file's source text (for cheap regex prefilters)
    source: str = ""
    resolver: Resolver = field(default=None)  # type: ignore[assignment]
    #: (original node, rule code, message) of every rewrite; positions are resolved at the end
    rewrites: list[tuple[cst.CSTNode, str, str]] = field(default_factory=list)
    #: (module, name, asname) imports the rewritten code needs
    needed_imports: set[tuple[str, str, str | None]] = field(default_factory=set)
    #: module-level helper code to append after the imports, by name
    helpers: dict[str, str] = field(default_factory=dict)
    #: the rule a helper is reported under when it is added (MV341 when not named here: a layer
    #: variant; a port says which rule needed it)
    helper_rules: dict[str, str] = field(default_factory=dict)
    #: TODO texts for the innermost statement being visited
    statement_todos: list[list[str]] = field(default_factory=list)
    #: ids of Name nodes that are not references (attribute names, keywords, defs)
    non_refs: set[int] = field(default_factory=set)
    #: ids of expressions used as a call's function / an attribute's base
    call_funcs: set[int] = field(default_factory=set)
    attr_bases: set[int] = field(default_factory=set)
    #: depth inside annotations
    annotation_depth: int = 0
    #: names bound at module level (classes, functions, assignments, imports)
    module_names: set[str] = field(default_factory=set)
    #: the module's first statement (id) and the comments of the module header above it
    first_statement: int = -1
    header_comments: frozenset[str] = frozenset()
    #: renames of module-level names done by a codemod (``foo_arch`` → ``foo_modulev3_arch``)
    renamed_exports: dict[str, str] = field(default_factory=dict)
    #: code of rendered top-level statements and header/footer lines by id (each kept alive with it)
    rendered: dict[int, tuple[cst.CSTNode, str]] = field(default_factory=dict)
    #: the same code with comments and plain strings blanked (``codemods.imports.blanked_code``)
    blanked: dict[int, tuple[cst.CSTNode, str]] = field(default_factory=dict)
    blanked_source: str | None = None
    #: passes over the final code text, in order (``Residual``'s comments): each returns the new
    #: text and whether CPython's parser accepted it (then ``apply`` need not prove it again)
    text_passes: list[Callable[[str], tuple[str, bool]]] = field(default_factory=list)
    #: ids of (original) classes subclassing a V2 layer whose ``super().__init__`` was mapped to V3 (or flagged)
    layer_inits: set[int] = field(default_factory=set)
    #: the whole module being rewritten; None on the import-statement path (see :class:`WholeModuleNeeded`)
    module: cst.Module | None = None
    #: facts one codemod leaves for a later one in the same traversal, by the codemod's name
    shared: dict[str, Any] = field(default_factory=dict)
    #: local names of sibling classes imported as their variant's class of the same V3 base
    #: (``Dependencies``) → the ``LayerSpec`` mapping their calls (``LayerConstructors``, ``LayerCalls``)
    layer_substitutes: dict[str, Any] = field(default_factory=dict)
    #: local names of sibling classes whose V3 variant's ``forward`` lacks V2 ``__call__`` parameters
    #: that carry no data (``Dependencies``) → those parameters: their calls drop them (``LayerCalls``)
    call_drops: dict[str, frozenset[str]] = field(default_factory=dict)

    def qualname(self, node: cst.BaseExpression) -> str | None:
        if isinstance(node, cst.Name) and id(node) in self.non_refs:
            return None
        return self.resolver.qualname(node)

    def import_name(self, module: str, name: str) -> str:
        """Request ``from module import name``; returns the local name to use."""
        self.needed_imports.add((module, name, None))
        return name


def imports_siblings(source: str) -> bool:
    """``source`` may import a sibling architecture package (relatively or by its absolute name)."""
    return "from .." in source or "architectures." in source


class WholeModuleNeeded(Exception):
    """A hook needs the whole module (``FileState.module``) where only import statements were
    parsed: the file takes the whole-module path instead."""


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

    @classmethod
    def applies_to(cls, source: str, context: TransformContext) -> bool:
        """:meth:`applies` for a file in its context (its package, ``arch.py``...)."""
        return cls.applies(source)

    def idle_hooks(self) -> Collection[str]:
        """Hooks (``"leave_Name"``...) that cannot change this file, decided once from what it
        imports: the Engine does not call them (a hook on every ``Name`` costs per node)."""
        return ()

    def imported(self) -> Collection[str] | None:
        """Every dotted target the file's imports bind; None when names are resolved by scope."""
        resolver = self.state.resolver
        return resolver.table.values() if isinstance(resolver, ImportTableResolver) else None

    def qualname(self, node: cst.BaseExpression) -> str | None:
        return self.state.qualname(node)

    def rewrote(self, node: cst.CSTNode, code: str, message: str) -> None:
        """Report a rewrite at ``node`` (a node of the original tree: its line is reported)."""
        self.state.rewrites.append((node, code, message))

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


def without_comments(stmt: cst.SimpleStatementLine, texts: Collection[str]) -> cst.SimpleStatementLine:
    """``stmt`` without its leading comment lines whose text is one of ``texts`` (notes a rewrite resolved)."""
    lines = [line for line in stmt.leading_lines if line.comment is None or line.comment.value not in texts]
    return stmt.with_changes(leading_lines=lines) if len(lines) != len(stmt.leading_lines) else stmt


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


# --- the traversal -----------------------------------------------------------------
#
# libcst's CSTTransformer rebuilds every node it descends into (a new dataclass,
# validated, per node) and dispatches attribute hooks per field: as costly as the
# parse itself. The Engine walks the tree itself instead, with the same hook
# protocol and order (``on_visit`` → children in libcst's order → ``on_leave``,
# sentinels and body-statement removal as libcst documents them), but it
# rebuilds a node only when one of its children changed, and it does not enter
# subtrees where no hook and no bookkeeping can fire (whitespace, punctuation,
# literals...: known from libcst's field annotations). What it knows of libcst's
# node classes comes from libcst's public API only (``codemods/grammar.py``).
#
# The observable differences: an unchanged node in ``updated`` is the original
# object, not a copy (hooks look nodes up — ids, positions, qualified names —
# through ``original``, as they already do); and where an old libcst rebuilds a
# node without some of its fields (libcst 1.0 drops ``MatchCase``'s
# ``whitespace_before_colon``), the Engine keeps them.
# ``tests/test_apply_speed_engine.py`` and ``bench/apply_bench.py compare``
# check the result against libcst's transformer (``pipeline.REFERENCE_ENGINE``).

_REQUIRED, _OPTIONAL, _SEQUENCE, _BODY, _NODE_OR_SEQUENCE = (
    node_grammar.REQUIRED,
    node_grammar.OPTIONAL,
    node_grammar.SEQUENCE,
    node_grammar.BODY,
    node_grammar.NODE_OR_SEQUENCE,
)

#: the grammar, or why it could not be built (then the Engine uses libcst's transformer)
_GRAMMAR: list[node_grammar.Grammar | str] = []


def grammar() -> node_grammar.Grammar | None:
    """libcst's node classes as the Engine walks them (None: use libcst's transformer, see :func:`fast_path_problem`)."""
    if not _GRAMMAR:
        try:
            _GRAMMAR.append(node_grammar.build())
        except Exception as exc:  # noqa: BLE001 - reported by fast_path_problem, never silent
            _GRAMMAR.append(f"{type(exc).__name__}: {exc}")
    g = _GRAMMAR[0]
    return None if isinstance(g, str) else g


_PROBLEM: list[str | None] = []


def fast_path_problem() -> str | None:
    """Why ``apply`` cannot use its fast path with the installed libcst (None: it can).

    The fast path is the Engine's own traversal (built from libcst's public
    node classes, :mod:`codemods.grammar`); without it ``apply`` runs
    libcst's transformer (the reference it is tested against): the same
    output, slower. ``apply``
    prints the reason once on stderr and puts it in ``--report``.
    """
    if not _PROBLEM:
        _PROBLEM.append(_find_fast_path_problem())
    return _PROBLEM[0]


def _find_fast_path_problem() -> str | None:
    if os.environ.get("MIGRATE_V3_NO_FAST_PATH") == "1":
        return "disabled by MIGRATE_V3_NO_FAST_PATH=1"
    grammar()
    g = _GRAMMAR[0]
    if isinstance(g, str):
        return f"libcst {libcst_version()}: its node classes could not be read ({g})"
    return None


def libcst_version() -> str:
    """The installed libcst's version, for messages."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("libcst")
    except PackageNotFoundError:
        return "(unknown version)"


#: (bookkeeping, visit hooks, leave hooks, flags, children to walk, live fields not yet seen visited)
_Entry = tuple[
    "Callable[[FileState, Any], None] | None",
    tuple[Callable[[Any], Any], ...],
    tuple[Callable[[Any, Any], Any], ...],
    int,
    tuple[tuple[str, int], ...],
    frozenset[str],
]
_IMPORT, _STATEMENT, _ANNOTATION = 1, 2, 4
_PLANS: dict[frozenset[str], tuple[frozenset[str], dict[type, frozenset[str]]]] = {}
#: node class → the fields libcst visits, in its order (see ``node_grammar.visiting_order``)
_ORDER: dict[type, tuple[str, ...]] = {}


def _plan(hooked: frozenset[str]) -> tuple[frozenset[str], dict[type, frozenset[str]]]:
    """Which classes to enter and which of their fields to walk, for this set of hooked classes.

    A class is *live* when a hook or the engine's bookkeeping runs on it, or
    when one of its fields can hold a live class; only live fields are walked.
    """
    cached = _PLANS.get(hooked)
    if cached is not None:
        return cached
    g = grammar()
    assert g is not None
    live = set(hooked)
    changed = True
    while changed:
        changed = False
        for (name, _field), held in g.holds.items():
            if name not in live and not held.isdisjoint(live):
                live.add(name)
                changed = True
    walk = {
        cls: frozenset(f for f in g.kinds[cls] if not g.holds[name, f].isdisjoint(live))
        for name, cls in g.classes.items()
        if name in live
    }
    _PLANS[hooked] = (frozenset(live), walk)
    return _PLANS[hooked]


def nodes_of(
    root: cst.CSTNode, kinds: tuple[type[cst.CSTNode], ...], skip: tuple[type[cst.CSTNode], ...] = ()
) -> list[cst.CSTNode]:
    """Every node of ``kinds`` in ``root``'s subtree (``root`` included), not inside a ``skip``
    node; in no particular order.

    Only the fields that can hold such a node are walked (the Engine's plan); a
    ``CSTVisitor`` would pass every node, rebuilding each. Without the grammar
    (see :func:`fast_path_problem`) libcst's visitor does the walk.
    """
    found: list[cst.CSTNode] = []
    g = grammar()
    if g is None:
        root.visit(_Collect(kinds, skip, found))
        return found
    _, walk = _plan(frozenset(k.__name__ for k in kinds))
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if skip and isinstance(node, skip):
            continue
        if isinstance(node, kinds):
            found.append(node)
        for name in walk.get(type(node), ()):
            value = getattr(node, name)
            if isinstance(value, cst.CSTNode):
                stack.append(value)
            elif isinstance(value, tuple | list):
                stack.extend(value)
    return found


_HOOK_NAMES: dict[type, tuple[str, ...]] = {}


def _hook_names(cls: type) -> tuple[str, ...]:
    """``visit_*``/``leave_*`` attributes of a codemod class, in ``dir`` order (once per class)."""
    names = _HOOK_NAMES.get(cls)
    if names is None:
        names = _HOOK_NAMES[cls] = tuple(a for a in dir(cls) if a.startswith(("visit_", "leave_")))
    return names


class _Collect(cst.CSTVisitor):
    """:func:`nodes_of` without the grammar (a class at module level: one per call is a cycle)."""

    def __init__(
        self, kinds: tuple[type[cst.CSTNode], ...], skip: tuple[type[cst.CSTNode], ...], found: list[cst.CSTNode]
    ) -> None:
        super().__init__()
        self.kinds, self.skip, self.found = kinds, skip, found

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, self.skip):
            return False
        if isinstance(node, self.kinds):
            self.found.append(node)
        return True


class Engine(cst.CSTTransformer):
    """Runs a list of codemods in one traversal, hooks in list order.

    :meth:`run` is the fast traversal; ``module.visit(engine)`` (libcst's own
    transformer) gives the same result and is kept as the reference.
    """

    def __init__(self, codemods: list[Codemod], state: FileState) -> None:
        super().__init__()
        self.state = state
        self.visits: dict[str, list[Callable[[Any], Any]]] = {}
        self.leaves: dict[str, list[Callable[[Any, Any], Any]]] = {}
        for mod in codemods:
            idle = mod.idle_hooks()
            for attr in _hook_names(type(mod)):
                if attr in idle:
                    continue
                if attr.startswith("visit_"):
                    self.visits.setdefault(attr[6:], []).append(getattr(mod, attr))
                else:
                    self.leaves.setdefault(attr[6:], []).append(getattr(mod, attr))
        self._entries: dict[type, _Entry | None] = {}
        self._live: frozenset[str] = frozenset()
        self._walk_fields: dict[type, frozenset[str]] = {}
        g = grammar() if fast_path_problem() is None else None
        self._grammar = g
        self._node_classes = frozenset(g.classes.values()) if g is not None else frozenset()
        if g is not None:
            hooked = frozenset(self.visits) | frozenset(self.leaves) | frozenset(_BOOKKEEPING)
            self._live, self._walk_fields = _plan(hooked)

    # -- libcst's protocol (the reference traversal) ---------------------------------

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
            result = self._statement_todos(original_node, result)
        return result

    def _statement_todos(self, original_node: cst.CSTNode, result: Any) -> Any:
        todos = self.state.statement_todos.pop()
        if todos and isinstance(result, cst.CSTNode):
            extra = self.state.header_comments if id(original_node) == self.state.first_statement else frozenset()
            result = attach_todos(result, todos, extra)
        elif todos and self.state.statement_todos:
            self.state.statement_todos[-1].extend(todos)
        return result

    # -- the fast traversal ------------------------------------------------------------

    def run(self, module: cst.Module) -> cst.Module:
        """The codemods applied to ``module`` (libcst's ``module.visit(engine)``, faster)."""
        if self._grammar is None:
            return module.visit(self)
        result = self._walk(module)
        if isinstance(result, RemovalSentinel):
            return module.with_changes(body=(), header=(), footer=())
        return result

    def _entry(self, cls: type, node: cst.CSTNode) -> _Entry | None:
        name = cls.__name__
        if name not in self._live:
            entry = None
        else:
            flags = (
                (_IMPORT if name in _IMPORTS else 0)
                | (_STATEMENT if name in _STATEMENT_KINDS else 0)
                | (_ANNOTATION if name == "Annotation" else 0)
            )
            fields: tuple[tuple[str, int], ...] = ()
            pending: frozenset[str] = frozenset()
            live_fields = self._walk_fields.get(cls, frozenset())
            if live_fields and not flags & _IMPORT:
                order = _ORDER.get(cls)
                if order is None:
                    order = _ORDER[cls] = node_grammar.visiting_order(node)
                assert self._grammar is not None
                kinds = self._grammar.kinds[cls]
                fields = tuple((f, kinds[f]) for f in order if f in live_fields)
                pending = live_fields.difference(order)
            entry = (
                _BOOKKEEPING.get(name),
                tuple(self.visits.get(name, ())),
                tuple(self.leaves.get(name, ())),
                flags,
                fields,
                pending,
            )
        self._entries[cls] = entry
        return entry

    def _relearn(self, cls: type, node: cst.CSTNode) -> _Entry | None:
        """``node`` fills a field libcst skipped on the node its order was learned from: learn again."""
        order = node_grammar.visiting_order(node)
        if not set(order) <= set(_ORDER.get(cls, ())):
            _ORDER[cls] = order
        return self._entry(cls, node)

    def _walk(self, node: cst.CSTNode) -> Any:
        cls = type(node)
        try:
            entry = self._entries[cls]
        except KeyError:
            entry = self._entry(cls, node)
        if entry is None:
            return node
        if entry[5] and not all(node_grammar.is_empty(getattr(node, f)) for f in entry[5]):
            entry = self._relearn(cls, node)
            assert entry is not None
        book, visits, leaves, flags, fields, _pending = entry
        state = self.state
        if book is not None:
            book(state, node)
        descend = True
        for hook in visits:
            if hook(node) is False:
                descend = False
        updated: Any = node
        if descend and fields:
            changes: dict[str, Any] | None = None
            walk = self._walk
            plain = self._node_classes  # (type checks on these skip the ABC machinery)
            new: Any
            for name, kind in fields:
                value = getattr(node, name)
                if kind == _NODE_OR_SEQUENCE:
                    kind = _REQUIRED if isinstance(value, cst.CSTNode) else _SEQUENCE
                if kind >= _SEQUENCE:
                    if value is None:  # FormattedStringExpression.format_spec
                        continue
                    new = self._walk_sequence(value, kind == _BODY)
                    if new is value:
                        continue
                elif kind == _REQUIRED:
                    new = walk(value)
                    if new is value:
                        continue
                    if type(new) not in plain:
                        _check_single(value, new, removable=False)
                elif value is None or value is MaybeSentinel.DEFAULT:
                    continue
                else:
                    new = walk(value)
                    if new is value:
                        continue
                    if type(new) not in plain and _check_single(value, new, removable=True):
                        new = None if kind == _OPTIONAL else MaybeSentinel.DEFAULT
                if changes is None:
                    changes = {}
                changes[name] = new
            if changes is not None:
                updated = node.with_changes(**changes)
        result: Any = updated
        for leave in leaves:
            result = leave(node, result)
            if type(result) not in self._node_classes and not isinstance(result, cst.CSTNode):
                break
        if flags & _ANNOTATION:
            state.annotation_depth -= 1
        elif flags & _STATEMENT:
            result = self._statement_todos(node, result)
        if (
            result is not updated
            and type(result) not in self._node_classes
            and not isinstance(result, (cst.CSTNode, RemovalSentinel, FlattenSentinel))
        ):
            raise Exception(
                "Expected a node of type CSTNode or a RemovalSentinel, "
                f"but got a return value of {type(result).__name__}"
            )
        return result

    def _walk_sequence(self, children: Sequence[cst.CSTNode], body: bool) -> Sequence[cst.CSTNode]:
        """``visit_sequence``/``visit_body_sequence``: the same tuple object when nothing changed."""
        out: list[cst.CSTNode] | None = None
        walk = self._walk
        for i, child in enumerate(children):
            new = walk(child)
            if new is child and out is None:
                continue
            if out is None:
                out = list(children[:i])
            if isinstance(new, RemovalSentinel):
                continue
            if isinstance(new, FlattenSentinel):
                for item in new:
                    if body and not _removable(child) and _removable(item):
                        continue
                    out.append(item)
            elif not (body and not _removable(child) and _removable(new)):
                out.append(new)
        return children if out is None else tuple(out)


def _removable(node: cst.CSTNode) -> bool:
    """A body line a removal emptied: libcst's statement bodies drop it (``visit_body_sequence``)."""
    return isinstance(node, cst.SimpleStatementLine) and not node.body


def _check_single(value: cst.CSTNode, new: Any, *, removable: bool) -> bool:
    """libcst's checks on a child visited in a single-node field; True: it was removed."""
    if isinstance(new, FlattenSentinel):
        raise TypeError(
            f"We got a FlattenSentinel while visiting a {type(value).__name__}. This "
            "node's parent does not allow for it to be it to be replaced with a sequence."
        )
    if isinstance(new, RemovalSentinel):
        if not removable:
            raise TypeError(
                f"We got a RemovalSentinel while visiting a {type(value).__name__}. This "
                "node's parent does not allow it to be removed."
            )
        return True
    return False


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


def make_resolver(module: cst.Module, precise: bool) -> Resolver:
    if precise:
        names = MetadataWrapper(module, unsafe_skip_copy=True).resolve(QualifiedNameProvider)
        return ScopeResolver(names)
    return ImportTableResolver(module)


# --- code and positions ---------------------------------------------------------------


def code_for(module: cst.Module, node: cst.CSTNode, indent: str = "") -> str:
    """``module.code_for_node(node)``; with ``indent``, the statement as printed inside a block at that indentation.

    The indented form prints ``node`` as the body of an ``if _:`` block whose
    indentation is ``indent`` and drops the block's header line: libcst's
    public printing, with its own rules for continuation and comment lines.
    """
    if not indent:
        return module.code_for_node(node)
    assert isinstance(node, cst.BaseStatement), "only a statement is printed at an indentation"
    header = "if _:" + module.default_newline
    code = module.code_for_node(cst.If(test=cst.Name("_"), body=cst.IndentedBlock(body=[node], indent=indent)))
    return code[len(header) :]


def render(module: cst.Module, state: FileState) -> str:
    """``module.code``, reusing the code of top-level statements already rendered for this file."""
    if not module.has_trailing_newline:
        return module.code  # libcst drops the last token: keep its exact rule
    if not (module.header or module.body or module.footer):
        return module.default_newline
    cache = state.rendered
    parts = []
    for node in (*module.header, *module.body, *module.footer):  # (a licence header is printed once too)
        hit = cache.get(id(node))
        if hit is None:
            hit = cache[id(node)] = (node, module.code_for_node(node))
        parts.append(hit[1])
    return "".join(parts)


def positions(module: cst.Module, nodes: list[cst.CSTNode]) -> dict[int, tuple[int, int]]:
    """(line, column) where libcst's ``PositionProvider`` starts each of ``nodes``
    in ``module``, by ``id()`` of the node; nodes not in ``module`` are left out."""
    ranges = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    return {id(n): (ranges[n].start.line, ranges[n].start.column) for n in nodes if n in ranges}
