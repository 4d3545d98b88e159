"""MV30x/MV31x — imports: add the V3 homes, drop the V2 names that became unused.

Runs last (on the whole rewritten module). A ``max.nn``/``max.graph`` name is
removed only when the earlier codemods made it unused (a name that was
already unused, e.g. a re-export in ``__init__.py``, stays); a name still used
is re-pointed to its V3 home when it has one, kept when ``allowed_max_nn``
says V3 code keeps it, and flagged (MV300) otherwise. Imports the rewritten
code needs are merged into an existing ``from M import ...`` or added after
the last import. Works through aliases (``import max.nn as nn``).

    from max.nn import Linear   →   from max.experimental.nn import Linear
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import libcst as cst

from codemods.args import source
from codemods.base import TODO_PREFIX, Codemod, FileState, attach_todos, render
from codemods.resolve import import_bindings, module_name
from migrate_v3.knowledge import ops as K
from migrate_v3.knowledge.layers import (
    CONTAINER_MODULE,
    CONTAINERS,
    FLAGGED_ELSEWHERE,
    FUNCTIONS,
    LAYERS,
    MODULE_HOME,
    MODULE_NAMES,
    NO_V3_CLASS,
)

_LEGACY = {"max.nn.module_v3": "max.experimental.nn"}
#: (the lookahead lets the regex engine skip to the next quote, ``#`` or f/F before trying each branch)
_STRINGS_AND_COMMENTS = re.compile(
    r"""(?=[fF'"\#])(?:(?P<keep>[fF][rR]?(?:'''|\"\"\"|'|"))|'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"|\#[^\n]*)"""
)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_IMPORT_STMT = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import[ \t]*\([^)]*\)|from[ \t]+[\w.]+[ \t]+import[^\n]*|import[ \t][^\n]*)", re.M)


def blank(code: str) -> str:
    """``code`` with its comments and plain strings blanked (an f-string's prefix and quote
    stay, so the names in its expressions still count)."""
    return _STRINGS_AND_COMMENTS.sub(lambda m: m.group("keep") or " ", code)


def blanked_code(module: cst.Module, state: FileState) -> str:
    """``blank(render(module, state))`` less the header and footer (comment lines only),
    each top-level statement blanked once per file: ``Imports`` and ``ImportOrder`` read
    the same statements."""
    code = render(module, state)
    rendered, cache = state.rendered, state.blanked
    parts = []
    for stmt in module.body:
        hit = cache.get(id(stmt))
        if hit is None:
            text = rendered.get(id(stmt))
            if text is None:  # render printed the module whole (libcst's own rule)
                return blank(code)
            hit = cache[id(stmt)] = (stmt, blank(text[1]))
        parts.append(hit[1])
    return "".join(parts)


def blanked_source(state: FileState) -> str:
    """The file's source without its import statements, blanked (once per file)."""
    if state.blanked_source is None:
        state.blanked_source = blank(_IMPORT_STMT.sub(" ", state.source))
    return state.blanked_source


def v3_home(symbol: str) -> tuple[str, str] | None:
    """(module, name) of a V2 ``max.nn`` symbol's V3 replacement, if it has one."""
    if symbol in LAYERS:
        spec = LAYERS[symbol]
        return spec.v3_module, spec.v3_name
    if symbol in CONTAINERS:
        return CONTAINER_MODULE, CONTAINERS[symbol]
    if symbol in MODULE_NAMES:
        return MODULE_HOME, "Module"
    if symbol in FUNCTIONS:
        return FUNCTIONS[symbol]
    if symbol in K.FUNCTIONAL_KERNELS:
        return K.FUNCTIONAL_KERNELS_MODULE, symbol
    return None


def _is_import_line(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, cst.Import | cst.ImportFrom) for s in stmt.body
    )


def _import_from(module: str, names: Sequence[tuple[str, str | None]]) -> cst.SimpleStatementLine:
    parts = ", ".join(n if a is None or a == n else f"{n} as {a}" for n, a in names)
    return _import_line(f"from {module} import {parts}\n")


@lru_cache(maxsize=4096)
def _import_line(code: str) -> cst.SimpleStatementLine:
    """(Nodes are immutable: the same import line is parsed once per process.)"""
    stmt = cst.parse_statement(code)
    assert isinstance(stmt, cst.SimpleStatementLine)
    return stmt


def _clashes(needed: dict[str, set[tuple[str, str | None]]], bound: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Local name → (what the rewritten code needs it to be, what a kept import binds it to)."""
    out: dict[str, tuple[str, str]] = {}
    for module, names in needed.items():
        for name, alias in names:
            local = alias or name
            target = f"{module}.{name}"
            if local in bound and bound[local] != target:
                out[local] = (target, bound[local])
    return out


def _flag_clashes(body: list[cst.BaseStatement], clashes: dict[str, tuple[str, str]]) -> list[cst.BaseStatement]:
    """A TODO on the import that binds a name the rewritten code needs for something else:
    the later import shadows the earlier one, silently."""
    out = []
    for stmt in body:
        if _is_import_line(stmt):
            assert isinstance(stmt, cst.SimpleStatementLine)
            locals_ = {local for small in stmt.body for local, _ in import_bindings(small)}  # type: ignore[arg-type]
            todos = [
                f"{TODO_PREFIX}MV310 {local} names {clashes[local][0]} in the migrated code, and "
                f"{clashes[local][1]} elsewhere in this file: import one of them under another name"
                for local in sorted(locals_ & clashes.keys())
            ]
            if todos:
                stmt = attach_todos(stmt, todos)  # type: ignore[assignment]
        out.append(stmt)
    return out


class Imports(Codemod):
    PREFIX = "MV31"

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        state = self.state
        body = list(updated.body)
        rest = updated.with_changes(body=[s for s in body if not _is_import_line(s)])
        used_after = set(_IDENT.findall(blanked_code(rest, state)))
        used_before = set(_IDENT.findall(blanked_source(state)))
        needed: dict[str, set[tuple[str, str | None]]] = {}
        for module, name, alias in sorted(state.needed_imports, key=lambda t: (t[0], t[1], t[2] or "")):
            needed.setdefault(module, set()).add((name, alias))
        provided = {alias or name for names in needed.values() for name, alias in names} | set(state.helpers)
        bound: dict[str, str] = {}
        new_body: list[cst.BaseStatement] = []
        first_changed: int | None = None
        allowed = K.allowed_max_nn()
        carry: list[cst.EmptyLine] = []  # leading lines of a removed import statement
        self.carried_to: dict[int, int] = {}  # new_body index → number of carried lines
        for stmt in body:
            if carry and hasattr(stmt, "leading_lines"):
                self.carried_to[len(new_body)] = len(carry)
                stmt = stmt.with_changes(leading_lines=[*carry, *stmt.leading_lines])
                carry = []
            if not _is_import_line(stmt):
                new_body.append(stmt)
                continue
            assert isinstance(stmt, cst.SimpleStatementLine)
            smalls: list[cst.BaseSmallStatement] = []
            state.statement_todos.append([])
            for small in stmt.body:
                kept = self._rewrite_import(small, used_after, used_before, provided, needed, allowed)
                if kept is not None:
                    smalls.append(kept)
                    if isinstance(kept, cst.Import | cst.ImportFrom):
                        for local, target in import_bindings(kept):
                            bound[local] = target
            todos = state.statement_todos.pop()
            extra = state.header_comments if not new_body else frozenset()
            if smalls == list(stmt.body):
                new_body.append(attach_todos(stmt, todos, extra))  # type: ignore[arg-type]
                continue
            if first_changed is None:
                first_changed = len(new_body)
            if smalls:
                last = smalls[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
                new_body.append(attach_todos(stmt.with_changes(body=[*smalls[:-1], last]), todos, extra))  # type: ignore[arg-type]
            else:
                carry = [*carry, *stmt.leading_lines]
        clashes = _clashes(needed, bound)
        new_body, first_changed = self._add_needed(new_body, needed, bound, first_changed)
        if clashes:
            new_body = _flag_clashes(new_body, clashes)
        new_body = self._add_helpers(new_body)
        return updated.with_changes(body=new_body)

    def _rewrite_import(
        self,
        small: cst.BaseSmallStatement,
        used_after: set[str],
        used_before: set[str],
        provided: set[str],
        needed: dict[str, set[tuple[str, str | None]]],
        allowed: frozenset[str],
    ) -> cst.BaseSmallStatement | None:
        if isinstance(small, cst.Import):
            names = []
            for alias in small.names:
                local, target = next(import_bindings(cst.Import(names=[alias.with_changes(comma=cst.MaybeSentinel.DEFAULT)])))
                if (target == "max.nn" or target.startswith("max.nn.") or target.startswith("max.graph")) and local in used_before and local not in used_after:
                    self.rewrote(small, "MV310", f"import {target} removed (no longer used)")
                    continue
                names.append(alias)
            if not names:
                return None
            if len(names) != len(small.names):
                names[-1] = names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                return small.with_changes(names=names)
            return small
        if not isinstance(small, cst.ImportFrom) or small.relative:
            return small
        module = module_name(small.module)
        if isinstance(small.names, cst.ImportStar):
            if module == "max.nn" or module.startswith("max.nn.") or module.startswith("max.graph"):
                self.todo("MV302", "replace the star import with explicit V3 imports")
            return small
        if module in _LEGACY:
            self.rewrote(small, "MV311", f"{module} → {_LEGACY[module]}")
            return small.with_changes(module=cst.parse_expression(_LEGACY[module]))
        is_nn = module == "max.nn" or module.startswith("max.nn.")
        is_graph = module == "max.graph" or module.startswith("max.graph.")
        if not (is_nn or is_graph) and not (module == "max" and any(_alias_name(a) in ("nn", "graph") for a in small.names)):
            return small
        kept: list[cst.ImportAlias] = []
        for alias in small.names:
            name = _alias_name(alias)
            local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
            if local in used_before and local not in used_after:
                self.rewrote(small, "MV310", f"{module}.{name} removed (no longer used)")
                continue
            if not is_nn or module == "max" or local not in used_after:
                kept.append(alias)
                continue
            if local in provided:
                self.rewrote(small, "MV310", f"{module}.{name} → V3 import")
                continue
            if name in allowed or module.startswith("max.nn.kernels") or f"{module}.{name}" in K.GRAPH_FUNCTIONS:
                # kept by V3 code; kernels and graph functions are wrapped at the call site (ops codemod)
                kept.append(alias)
                continue
            home = v3_home(name)
            if home is not None:
                needed.setdefault(home[0], set()).add((home[1], None if local == home[1] else local))
                provided.add(local)
                self.rewrote(small, "MV310", f"{module}.{name} → {home[0]}.{home[1]}")
                continue
            if name not in NO_V3_CLASS and name not in FLAGGED_ELSEWHERE:
                self.todo("MV300", f"max.nn.{name} has no V3 rule")
            kept.append(alias)
        if not kept:
            return None
        if len(kept) == len(small.names):
            return small
        # in parentheses, the last name takes the removed last name's comma: a trailing
        # comma and line break stay (no dangling ``    Weight)`` line)
        last = small.names[-1].comma if isinstance(small.rpar, cst.RightParen) else cst.MaybeSentinel.DEFAULT
        kept[-1] = kept[-1].with_changes(comma=last)
        if isinstance(small.rpar, cst.RightParen) and len(kept) == 1:
            kept[0] = kept[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return small.with_changes(names=kept, lpar=None, rpar=None)
        return small.with_changes(names=kept)

    def _add_needed(
        self,
        body: list[cst.BaseStatement],
        needed: dict[str, set[tuple[str, str | None]]],
        bound: dict[str, str],
        first_changed: int | None,
    ) -> tuple[list[cst.BaseStatement], int | None]:
        missing: dict[str, list[tuple[str, str | None]]] = {}
        for module, names in sorted(needed.items()):
            for name, alias in sorted(names, key=lambda t: (t[0], t[1] or "")):
                local = alias or name
                if bound.get(local) == f"{module}.{name}":
                    continue
                missing.setdefault(module, []).append((name, alias))
        if not missing:
            return body, first_changed
        # merge into an existing `from module import ...`
        for i, stmt in enumerate(body):
            if not _is_import_line(stmt):
                continue
            assert isinstance(stmt, cst.SimpleStatementLine)
            small = stmt.body[0]
            if len(stmt.body) == 1 and isinstance(small, cst.ImportFrom) and not small.relative and not isinstance(small.names, cst.ImportStar):
                module = module_name(small.module)
                if module in missing:
                    existing = [(_alias_name(a), a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else None) for a in small.names]
                    merged = sorted(set(existing) | set(missing.pop(module)), key=lambda t: (t[0], t[1] or ""))
                    new = _import_from(module, merged).with_changes(leading_lines=stmt.leading_lines)
                    body[i] = new
        if not missing:
            return body, first_changed
        new_stmts: list[cst.BaseStatement] = [_import_from(m, names) for m, names in sorted(missing.items())]
        at = first_changed
        if at is not None and at < len(body):
            # the new imports take the place (and the spacing) of the first changed one
            here = body[at]
            lines = getattr(here, "leading_lines", ())
            n = len(lines) if _is_import_line(here) else self.carried_to.get(at, 0)
            if _is_import_line(here):  # its own comments (a TODO) stay with it
                n = next((i for i, line in enumerate(lines) if line.comment is not None), n)
            if n and isinstance(here, cst.SimpleStatementLine | cst.BaseCompoundStatement):
                new_stmts[0] = new_stmts[0].with_changes(leading_lines=here.leading_lines[:n])
                body[at] = here.with_changes(leading_lines=here.leading_lines[n:])
        if at is None:
            at = 0
            for i, stmt in enumerate(body):
                if _is_import_line(stmt):
                    at = i + 1
                elif i == 0 and _is_docstring(stmt):
                    at = 1
        return body[:at] + new_stmts + body[at:], at

    def _add_helpers(self, body: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        if not self.state.helpers:
            return body
        defined = {s.name.value for s in body if isinstance(s, cst.ClassDef | cst.FunctionDef)}
        helper: list[cst.BaseStatement]
        at = 0
        for i, stmt in enumerate(body):
            if _is_import_line(stmt):
                at = i + 1
        for name, code in self.state.helpers.items():
            if name in defined or not code:  # (no code: another helper's code defines it)
                continue
            helper = list(_helper_statements(code))
            head = helper[0]
            assert isinstance(head, cst.ClassDef | cst.FunctionDef)
            first = head.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
            body = body[:at] + [first, *helper[1:]] + body[at:]
            at += len(helper)  # (in the order they were added: one may subclass another)
            rule = self.state.helper_rules.get(name, "MV341")
            self.rewrote(first, rule, f"added {name}" if rule == "MV341" else f"added {name} (migrate-v3's port)")
        return body


@lru_cache(maxsize=64)
def _helper_statements(code: str) -> Sequence[cst.BaseStatement]:
    """(Nodes are immutable: a helper's code is parsed once per process.)"""
    return cst.parse_module(code).body


def _alias_name(alias: cst.ImportAlias) -> str:
    name = alias.name
    return name.value if isinstance(name, cst.Name) else source(name)


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, cst.SimpleString)
    )
