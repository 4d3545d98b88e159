"""MV310 — the import block after the rewrites: what they made unused goes, what they touched is laid out as isort/ruff would.

Runs right after ``Imports``, on the whole module, and changes only top-level
import statements the rewrites touched: those ``Imports`` changed or added,
and those whose every use the rewrites removed (any module: ``Iterable``
used only by a V2 ``trace()`` override). A name that was already unused (a
re-export) stays. A touched statement is sorted and placed the way ruff's
isort rules (its defaults: ``from`` names by type then name, ``as`` imports
one per statement, straight imports before ``from`` imports in a section,
relative imports furthest first) would place it: in its section (future,
standard library, other absolute, relative), beside the statements of the
same top-level package, one line when it fits in 79 columns, else one name
per line with a trailing comma. Statements nobody touched keep their place
and layout; a touched statement with a comment keeps its place too.

    from max.graph import (
        DeviceRef,
        Weight,
    )
    from .layers import Block
    from collections.abc import Callable      (added after the relative imports)
    →  from collections.abc import Callable
       ...
       from max.graph import (
           DeviceRef,
       )
       from .layers import Block
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence

import libcst as cst

from codemods.base import Codemod, TransformContext, code_for
from codemods.imports import (
    _alias_name,
    _import_line,
    _is_docstring,
    _is_import_line,
    blanked_code,
    blanked_source,
)
from codemods.registration import Registration
from codemods.resolve import dotted, import_bindings, module_name

#: One-line imports longer than this are written one name per line (PEP 8's
#: limit: a trailing-comma layout is kept by ruff/isort at any line length).
LINE_LIMIT = 79
_STDLIB = frozenset(sys.stdlib_module_names)
_DIGITS = re.compile(r"(\d+)")
TODO_MARK = "TODO(migrate-v3)"
FUTURE, STDLIB, ABSOLUTE, RELATIVE = range(4)


def natural(text: str) -> tuple[tuple[int, int | str], ...]:
    """isort's case-insensitive natural order (``qwen2`` before ``qwen10``)."""
    return tuple((1, int(p)) if p.isdigit() else (0, p.lower()) for p in _DIGITS.split(text) if p)


def member_key(name: str, asname: str | None = None) -> tuple[object, ...]:
    """ruff's ``order-by-type`` order of imported names: CONSTANTS, Classes, others."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return (kind, natural(name), name, natural(asname or ""), asname or "")


def _aliases(small: cst.ImportFrom) -> list[tuple[str, str | None]]:
    assert not isinstance(small.names, cst.ImportStar)
    return [
        (_alias_name(a), a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else None)
        for a in small.names
    ]


_KEYS: dict[int, tuple[cst.SimpleStatementLine, int, tuple[object, ...], str]] = {}
_CODES: dict[int, tuple[cst.BaseStatement, str]] = {}


def _keys(stmt: cst.SimpleStatementLine) -> tuple[int, tuple[object, ...], str]:
    """(section, sort key, top-level package) of a statement, computed once per statement object."""
    hit = _KEYS.get(id(stmt))
    if hit is None or hit[0] is not stmt:
        hit = _KEYS[id(stmt)] = (stmt, section(stmt), sort_key(stmt), _top_package(stmt))
    return hit[1], hit[2], hit[3]


def section(stmt: cst.SimpleStatementLine) -> int:
    small = stmt.body[0]
    if isinstance(small, cst.ImportFrom):
        if small.relative:
            return RELATIVE
        top = module_name(small.module).split(".")[0]
        if top == "__future__":
            return FUTURE
    else:
        assert isinstance(small, cst.Import)
        top = _alias_name(small.names[0]).split(".")[0]
    return STDLIB if top in _STDLIB else ABSOLUTE


def _top_package(stmt: cst.SimpleStatementLine) -> str:
    small = stmt.body[0]
    if isinstance(small, cst.ImportFrom):
        return module_name(small.module, tuple(small.relative)).split(".")[0]
    assert isinstance(small, cst.Import)
    return _alias_name(small.names[0]).split(".")[0]


def sort_key(stmt: cst.SimpleStatementLine) -> tuple[object, ...]:
    """Where ruff puts a statement inside its section."""
    small = stmt.body[0]
    if isinstance(small, cst.Import):
        return (0, 0, natural(_alias_name(small.names[0])), ())
    assert isinstance(small, cst.ImportFrom)
    names = [] if isinstance(small.names, cst.ImportStar) else _aliases(small)
    first = min(member_key(*n) for n in names) if names else ()
    return (1, -len(small.relative), natural(module_name(small.module)), first)


#: a name not after ``.`` or a word character (its first character is matched before the
#: look-behind, so the regex engine skips the text between names fast)
_REFERENCE = re.compile(r"[A-Za-z_](?<![.\w].)\w*")


def _bound(body: Sequence[cst.BaseStatement]) -> set[str]:
    """The names the top-level import statements of ``body`` bind."""
    return {
        local
        for stmt in body if _is_import_line(stmt)
        for small in stmt.body  # type: ignore[attr-defined]
        if not (isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar))
        for local, _ in import_bindings(small)
    }


_EMPTY = cst.Module(body=[])


def _has_comment(stmt: cst.SimpleStatementLine) -> bool:
    """A comment above, inside or after the statement (a ``#`` in its code: imports hold no strings)."""
    return any(line.comment for line in stmt.leading_lines) or "#" in ImportOrder._code(stmt)


def layout(module: str, names: Sequence[tuple[str, str | None]], vertical: bool = False) -> cst.SimpleStatementLine:
    """``from module import names`` on one line when it fits, else one name per line."""
    parts = [n if a is None or a == n else f"{n} as {a}" for n, a in names]
    line = f"from {module} import {', '.join(parts)}"
    if not vertical and len(line) <= LINE_LIMIT:
        return _import_line(line + "\n")
    return _import_line(f"from {module} import (\n" + "".join(f"    {p},\n" for p in parts) + ")\n")


def canonical(stmt: cst.SimpleStatementLine) -> list[cst.SimpleStatementLine]:
    """A comment-free touched import statement as ruff writes it (maybe several statements)."""
    small = stmt.body[0]
    if isinstance(small, cst.Import):
        return [_import_line(f"import {code_for(cst.Module(body=[]), a.with_changes(comma=cst.MaybeSentinel.DEFAULT))}\n") for a in small.names]
    assert isinstance(small, cst.ImportFrom)
    if isinstance(small.names, cst.ImportStar):
        return [stmt]
    module = module_name(small.module, tuple(small.relative))
    names = sorted(set(_aliases(small)), key=lambda t: member_key(*t))
    plain = [(n, a) for n, a in names if a is None or a == n]
    # a trailing comma after the last name keeps the statement one name per line
    vertical = isinstance(small.names, Sequence) and small.names and small.names[-1].comma is not cst.MaybeSentinel.DEFAULT
    out = [layout(module, plain, vertical=bool(vertical) and small.rpar is not None)] if plain else []
    out += [layout(module, [alias]) for alias in names if alias not in plain]
    return out


def sort_names_in_place(node: cst.ImportFrom, before: Sequence[tuple[str, str | None]]) -> cst.ImportFrom:
    """Re-sort renamed names when the statement was sorted before (the commas and layout stay)."""
    if isinstance(node.names, cst.ImportStar):
        return node
    keys = [member_key(*t) for t in before]
    if keys != sorted(keys):
        return node
    order = sorted(node.names, key=lambda a: member_key(*_aliases(node.with_changes(names=[a]))[0]))
    names = [slot.with_changes(name=a.name, asname=a.asname) for slot, a in zip(node.names, order, strict=True)]
    return node.with_changes(names=names)


def _spacing(lines: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """The blank lines above a statement before its first comment line."""
    out = []
    for line in lines:
        if line.comment is not None:
            break
        out.append(line)
    return out


def _comments_from(lines: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """The leading lines from the first comment on (a comment block stays with its statement)."""
    return list(lines[len(_spacing(lines)) :])


def _space_comments(block: list[cst.SimpleStatementLine], todos_only: bool) -> list[cst.SimpleStatementLine]:
    """A blank line above a comment block on an import that follows another import
    (isort keeps such a comment apart from the import before it): above every
    comment in a block the rewrites rearranged, above the TODOs they added elsewhere."""
    out = []
    for i, stmt in enumerate(block):
        lines = stmt.leading_lines
        if i and lines and lines[0].comment is not None and (
            not todos_only or any(TODO_MARK in line.comment.value for line in lines if line.comment)
        ):
            stmt = stmt.with_changes(leading_lines=[cst.EmptyLine(), *lines])
        out.append(stmt)
    return out


def _neutral_moves(source: str, context: TransformContext) -> bool:
    """A codemod that runs on neutral files may move an import to another section or
    change its names: an absolute sibling import made relative, an export renamed, a
    batch processor's base replaced (``codemods.batch_processors``), a sibling's class called
    without the V2 arguments its variant lacks (``codemods.dependencies.SiblingCalls``)."""
    return (
        "architectures." in source or Registration.applies_to(source, context) or "RaggedBatchProcessor" in source
        or (bool(context.class_signatures) and "from .." in source)
    )


def _content(stmt: cst.BaseStatement) -> tuple[object, ...]:
    """What an import statement says: each import's module, names and aliases, and its end-of-line
    comment; equal for a statement rebuilt unchanged (comparing this costs no print)."""
    assert isinstance(stmt, cst.SimpleStatementLine)
    out: list[object] = []
    for small in stmt.body:
        if isinstance(small, cst.ImportFrom):
            out.append(module_name(small.module, tuple(small.relative)))
            names = small.names
        elif isinstance(small, cst.Import):
            names = small.names
        else:
            return (id(stmt),)  # (not an import line: never equal to another)
        out.append("*" if isinstance(names, cst.ImportStar) else tuple(
            (dotted(a.name), None if a.asname is None else dotted(a.asname.name)) for a in names
        ))
    comment = stmt.trailing_whitespace.comment
    out.append(None if comment is None else comment.value)
    return tuple(out)


class ImportOrder(Codemod):
    """On every V2 file (``Imports`` ran), unless :class:`NeutralImportOrder` runs instead."""

    PREFIX = "MV31"

    @classmethod
    def applies_to(cls, source: str, context: TransformContext) -> bool:
        return not _neutral_moves(source, context)

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        state = self.state
        renamed_from = state.context.renamed_from
        # (imports release_names already rewrote count as touched: compare with the source before it)
        first = original if renamed_from is None else cst.parse_module(renamed_from)
        before_stmts = {id(s): s for s in first.body if _is_import_line(s)}  # (kept: an unchanged one is itself)
        before: set[tuple[object, ...]] | None = None  # what they import, when a statement is not one of them
        rest = updated.with_changes(body=[s for s in updated.body if not _is_import_line(s)])
        used_after = set(_REFERENCE.findall(blanked_code(rest, state)))
        used_before = set(_REFERENCE.findall(blanked_source(state)))
        # an import a rewrite asked for and did not use in the end goes too
        used_before |= {alias or name for _, name, alias in state.needed_imports} - _bound(original.body)
        body: list[cst.BaseStatement] = []
        blocks: list[tuple[int, int]] = []  # [start, end) of each run of import statements
        touched: set[int] = set()
        carry: list[cst.EmptyLine] = []
        for stmt in updated.body:
            if carry and hasattr(stmt, "leading_lines"):
                stmt = stmt.with_changes(leading_lines=[*carry, *stmt.leading_lines])
                carry = []
            if not _is_import_line(stmt):
                body.append(stmt)
                continue
            assert isinstance(stmt, cst.SimpleStatementLine)
            kept = self._drop_unused(stmt, used_before, used_after)
            if kept is None:
                carry = list(stmt.leading_lines)
                continue
            if not blocks or blocks[-1][1] != len(body):
                blocks.append((len(body), len(body)))
            if before_stmts.get(id(kept)) is not kept:
                if before is None:
                    before = {_content(s) for s in before_stmts.values()}
                if _content(kept) not in before:
                    touched.add(len(body))
            body.append(kept)
            blocks[-1] = (blocks[-1][0], len(body))
        for start, end in reversed(blocks):
            mine = {i - start for i in touched if start <= i < end}
            block = [s for s in body[start:end] if isinstance(s, cst.SimpleStatementLine)]
            body[start:end] = _space_comments(self._arrange(block, mine), False) if mine else _space_comments(block, True)
        _KEYS.clear()
        _CODES.clear()
        return updated.with_changes(body=body)

    @staticmethod
    def _code(stmt: cst.BaseStatement) -> str:
        """The statement's code without its leading lines (its comments inside included),
        printed once per statement object while a module is arranged."""
        assert isinstance(stmt, cst.SimpleStatementLine)
        hit = _CODES.get(id(stmt))
        if hit is None or hit[0] is not stmt:
            code = ";".join(code_for(_EMPTY, small) for small in stmt.body) + code_for(_EMPTY, stmt.trailing_whitespace)
            hit = _CODES[id(stmt)] = (stmt, code)
        return hit[1]

    def _drop_unused(
        self, stmt: cst.SimpleStatementLine, used_before: set[str], used_after: set[str]
    ) -> cst.SimpleStatementLine | None:
        """The statement without the names the rewrites made unused (None: nothing left)."""
        smalls: list[cst.BaseSmallStatement] = []
        for small in stmt.body:
            if isinstance(small, cst.ImportFrom) and (
                isinstance(small.names, cst.ImportStar) or module_name(small.module) == "__future__"
            ):
                smalls.append(small)
                continue
            assert isinstance(small, cst.Import | cst.ImportFrom)
            names = list(small.names)  # type: ignore[arg-type]
            keep = []
            for alias, (local, target) in zip(names, import_bindings(small), strict=True):
                if local in used_before and local not in used_after:
                    self.rewrote(small, "MV310", f"import of {target} removed (the rewrite left it unused)")
                    continue
                keep.append(alias)
            if len(keep) == len(names):
                smalls.append(small)
            elif keep:
                # the last name takes the removed last name's comma (and so the layout's line break)
                parenthesized = isinstance(small, cst.ImportFrom) and small.rpar is not None
                keep[-1] = keep[-1].with_changes(comma=names[-1].comma if parenthesized else cst.MaybeSentinel.DEFAULT)
                smalls.append(small.with_changes(names=keep))
        if not smalls:
            return None
        if len(smalls) != len(stmt.body):
            smalls[-1] = smalls[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return stmt.with_changes(body=smalls) if smalls != list(stmt.body) else stmt

    def _arrange(self, block: list[cst.SimpleStatementLine], touched: set[int]) -> list[cst.SimpleStatementLine]:
        """The block with its touched, comment-free statements laid out and put in place."""
        # a comment above a statement may be about its neighbours too: that one stays
        movable = [
            i for i in sorted(touched)
            if len(block[i].body) == 1 and not any(line.comment for line in block[i].leading_lines)
        ]
        if not movable:
            return block
        head = _spacing(block[0].leading_lines)
        kept: list[cst.SimpleStatementLine] = []
        moving: list[cst.SimpleStatementLine] = []
        carry: list[cst.EmptyLine] = []
        for i, stmt in enumerate(block):
            if i in movable:
                # a statement with a comment inside keeps its layout
                moving.extend([stmt.with_changes(leading_lines=())] if _has_comment(stmt) else canonical(stmt))
                carry = carry or _spacing(stmt.leading_lines)
                continue
            if carry and not _spacing(stmt.leading_lines):
                stmt = stmt.with_changes(leading_lines=[*carry, *stmt.leading_lines])
            carry = []
            kept.append(stmt)
        for stmt in sorted(moving, key=lambda s: _keys(s)[:2]):
            kept = self._merge_or_insert(kept, stmt)
        # the block starts with the spacing it had; a group start that moved down gets
        # the blank line isort puts between sections (or none inside one)
        out = []
        for i, stmt in enumerate(kept):
            lines = list(stmt.leading_lines)
            if i == 0:
                lines = [*head, *_comments_from(lines)]
            elif _spacing(lines) and _keys(kept[i - 1])[::2] == _keys(stmt)[::2]:
                lines = _comments_from(lines)
            else:  # one blank line at most between groups
                lines = [*_spacing(lines)[:1], *_comments_from(lines)]
            out.append(stmt.with_changes(leading_lines=lines) if lines != list(stmt.leading_lines) else stmt)
        return out

    @staticmethod
    def _merge_or_insert(block: list[cst.SimpleStatementLine], stmt: cst.SimpleStatementLine) -> list[cst.SimpleStatementLine]:
        small = stmt.body[0]
        sec, key, top = _keys(stmt)
        if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
            names = _aliases(small)
            if all(a is None or a == n for n, a in names):
                module = module_name(small.module, tuple(small.relative))
                for i, other in enumerate(block):
                    o = other.body[0]
                    if (
                        len(other.body) == 1 and isinstance(o, cst.ImportFrom) and not isinstance(o.names, cst.ImportStar)
                        and module_name(o.module, tuple(o.relative)) == module
                        and all(a is None or a == n for n, a in _aliases(o))
                        and "#" not in ImportOrder._code(other)
                    ):
                        merged = sorted(set(_aliases(o)) | set(names), key=lambda t: member_key(*t))
                        vertical = o.rpar is not None and o.names[-1].comma is not cst.MaybeSentinel.DEFAULT
                        new = layout(module, merged, vertical=bool(vertical)).with_changes(leading_lines=other.leading_lines)
                        return [*block[:i], new, *block[i + 1 :]]
        keys = [_keys(s) for s in block]
        same = [i for i, k in enumerate(keys) if k[0] == sec]
        near = [i for i in same if keys[i][2] == top] or same
        if near:
            later = [i for i in near if keys[i][1] > key]
            at = later[0] if later else near[-1] + 1
            lines: list[cst.EmptyLine] = []
            if later and at == near[0] and _spacing(block[at].leading_lines):
                # first of its group: it takes the group's spacing
                lines = _spacing(block[at].leading_lines)
                block = [*block[:at], block[at].with_changes(leading_lines=_comments_from(block[at].leading_lines)), *block[at + 1 :]]
            return [*block[:at], stmt.with_changes(leading_lines=lines), *block[at:]]
        at = next((i for i, k in enumerate(keys) if k[0] > sec), len(block))
        new = stmt.with_changes(leading_lines=[cst.EmptyLine()])
        if at < len(block) and not _spacing(block[at].leading_lines):
            block = [*block[:at], block[at].with_changes(leading_lines=[cst.EmptyLine(), *block[at].leading_lines]), *block[at + 1 :]]
        return [*block[:at], new, *block[at:]]


def with_imports(module: cst.Module, needed: Iterable[tuple[str, str, str | None]]) -> cst.Module:
    """``module`` with ``from M import N [as A]`` for each of ``needed`` its top-level imports do
    not bind yet, merged into its first import block or placed there as isort would
    (:meth:`ImportOrder._merge_or_insert`). ``Imports`` adds what a rewrite asked for on a V2 file;
    on a neutral file (no ``Imports``) the pipeline calls this."""
    body = list(module.body)
    bound = {local: target for stmt in body if isinstance(stmt, cst.SimpleStatementLine)
             for small in stmt.body if isinstance(small, cst.Import | cst.ImportFrom)
             for local, target in import_bindings(small)}
    missing = sorted((m, n, a) for m, n, a in set(needed) if bound.get(a or n) != f"{m}.{n}")
    if not missing:
        return module
    first = next((i for i, stmt in enumerate(body) if _is_import_line(stmt)), None)
    if first is None:  # after the docstring
        at = 1 if body and _is_docstring(body[0]) else 0
        new = [layout(m, [(n, a)]) for m, n, a in missing]
        return module.with_changes(body=[*body[:at], *new, *body[at:]])
    end = next((i for i in range(first, len(body)) if not _is_import_line(body[i])), len(body))
    block = [s for s in body[first:end] if isinstance(s, cst.SimpleStatementLine)]
    head = block[0].leading_lines
    try:
        for m, n, a in missing:
            block = ImportOrder._merge_or_insert(block, layout(m, [(n, a)]))
    finally:
        _KEYS.clear()
        _CODES.clear()
    if block[0].leading_lines != head:  # a statement put first takes the block's spacing
        block[0] = block[0].with_changes(leading_lines=head)
    return module.with_changes(body=[*body[:first], *block, *body[end:]])


class NeutralImportOrder(ImportOrder):
    """The same pass on any file where a neutral codemod may move or rename an import
    (on a V2 file it runs in place of :class:`ImportOrder`, never both). Other neutral
    files keep the per-statement import path (``pipeline._rewrite_imports``)."""

    NEUTRAL_OK = True

    @classmethod
    def applies_to(cls, source: str, context: TransformContext) -> bool:
        return _neutral_moves(source, context)
