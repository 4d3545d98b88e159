"""MV311/MV312/MV313 — imports of older max releases' names, spelled the 26.7 way.

Runs on the source text before every codemod (``pipeline.transform_source``),
so that the codemods and the classifier see code in max 26.7's layout:

* MV311: a namespace that moved as a whole (25.6/25.7's ``max.nn.module_v3``;
  26.1's ``max.nn.legacy`` for V2 and ``max.nn``/``max.tensor``/
  ``max.functional``/``max.random`` for ModuleV3) — per name, where 26.7 has it;
* MV312: a name 26.7 has under another name or home, the same object by the
  evidence of the old wheels (``knowledge/gone_26_7.json``); a renamed name
  keeps its local name (``import New as Old``), so no other line changes;
* MV313: a name 26.7 does not have gets a TODO above its import naming what
  replaced it, when the releases' source shows it.

Only import statements change (``import a.b`` without ``as`` binds ``max``
and is left alone, as ``check`` leaves it). The lines of the result map back
to the source's (``Renamed.line_of``) so that rewrites keep their places.

    from max.nn.legacy import Linear   →   from max.nn import Linear
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from codemods.base import TODO_PREFIX
from codemods.resolve import statement_blocks
from migrate_v3.findings import Finding
from migrate_v3.knowledge import symbols as K

_MODULE = re.compile(r"from[ \t]+([\w.]+)[ \t]+import\b")
_COMMENT = re.compile(r"#[^\n]*")


@dataclass
class Renamed:
    """The source with older releases' names rewritten, and where its lines came from."""

    code: str
    findings: list[Finding] = field(default_factory=list)
    #: 1-based line of ``code`` -> 1-based line of the source it came from
    origin: list[int] = field(default_factory=list)

    def line_of(self, line: int) -> int:
        return self.origin[line - 1] if 0 < line <= len(self.origin) else line


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _targets(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The qualified names an import binds, as ``check`` reads them."""
    if isinstance(node, ast.Import):
        return [a.name if a.asname else a.name.split(".")[0] for a in node.names]
    if node.level or not node.module:
        return []
    return [node.module if a.name == "*" else f"{node.module}.{a.name}" for a in node.names]


@dataclass
class _Edit:
    """What to do with one import statement."""

    new: str | None = None  # the statement's new text (without indentation), or None: unchanged
    verbatim: bool = False  # ``new`` keeps the statement's own lines after the first (their indentation too)
    todos: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


def current_names(source: str) -> Renamed | None:
    """``source`` with its imports of older releases' names rewritten; None when it has none."""
    if "max" not in source:
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None  # the codemods' parse reports it
    imports = list(_imports(tree.body))
    targets = [t for n in imports for t in _targets(n)]
    if not any(t.startswith("max.") for t in targets):
        return None
    nn_is_v3 = any(_under(t, ns) for t in targets for ns in K.NN_IS_V3)
    lines = source.splitlines(keepends=True)
    edits: dict[int, tuple[ast.stmt, _Edit]] = {}
    for node in imports:
        edit = _edit(node, nn_is_v3, lines)
        if edit.new is not None or edit.todos:
            edits[node.lineno] = (node, edit)
    if not edits:
        return None
    return _apply(lines, edits)


def _imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of ``body`` and the statement bodies nested in it, in order
    (imports are statements: the expressions, most of a tree, are not walked)."""
    for stmt in body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            yield stmt
            continue
        for block in statement_blocks(stmt):
            yield from _imports(block)


def _edit(node: ast.Import | ast.ImportFrom, nn_is_v3: bool, lines: list[str]) -> _Edit:
    edit = _Edit()
    if isinstance(node, ast.ImportFrom):
        if node.level or not node.module or not node.module.startswith("max"):
            return edit
        groups: list[tuple[str, list[str]]] = []  # (module, ["name" | "name as local"]) in order
        moved = False
        for alias in node.names:
            target = node.module if alias.name == "*" else f"{node.module}.{alias.name}"
            new = _new_name(target, nn_is_v3, alias, edit)
            if alias.name == "*":
                module, spelled = new or node.module, "*"
            else:
                module, name = (new or target).rsplit(".", 1)
                local = alias.asname or alias.name
                spelled = name if name == local else f"{name} as {local}"
            moved = moved or new is not None
            if groups and groups[-1][0] == module:
                groups[-1][1].append(spelled)
            else:
                groups.append((module, [spelled]))
        if moved:
            edit.new, edit.verbatim = _from_text(node, groups, lines)
        return edit
    parts: list[str] = []
    moved = False
    for alias in node.names:
        new = _new_name(alias.name, nn_is_v3, alias, edit) if alias.asname else None
        moved = moved or new is not None
        parts.append(f"{new or alias.name} as {alias.asname}" if alias.asname else alias.name)
    if moved:
        edit.new = "import " + ", ".join(parts)
    return edit


def _new_name(target: str, nn_is_v3: bool, alias: ast.alias, edit: _Edit) -> str | None:
    """The 26.7 name of ``target`` when it moved (noting the rewrite), else None (noting a TODO when gone)."""
    if not target.startswith("max."):
        return None
    found = K.gone(target, nn_is_v3)
    if found is None:
        return None
    if found.code == "MV313":  # gone: a TODO; spelled the 26.7 way when its namespace moved
        edit.todos.append(f"{TODO_PREFIX}{found.code} {found.message}")
    else:
        edit.findings.append(Finding(alias.lineno, alias.col_offset, found.code, f"{target} → {found.new}"))
    return found.new


def _from_text(node: ast.ImportFrom, groups: list[tuple[str, list[str]]], lines: list[str]) -> tuple[str, bool]:
    """The statement's new text and whether it is the old one with only its module replaced
    (when the names stay: its layout and comments are kept), else one ``from M import ...``
    per module, after the comments it had."""
    original = _segment(node, lines)
    m = _MODULE.match(original)
    if len(groups) == 1 and m is not None and m.group(1) == node.module:
        module, names = groups[0]
        same = [a.name if a.asname is None else f"{a.name} as {a.asname}" for a in node.names]
        if names == same:
            return original[: m.start(1)] + module + original[m.end(1) :], True
    comments = _COMMENT.findall(original)
    statements = [f"from {module} import {', '.join(names)}" for module, names in groups]
    return "\n".join([*comments, *statements]), False


def _segment(node: ast.stmt, lines: list[str]) -> str:
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    head = lines[first].encode()[node.col_offset :].decode()
    if first == last:
        return lines[first].encode()[node.col_offset : node.end_col_offset].decode()
    tail = lines[last].encode()[: node.end_col_offset].decode()
    return head + "".join(lines[first + 1 : last]) + tail


def _apply(lines: list[str], edits: dict[int, tuple[ast.stmt, _Edit]]) -> Renamed:
    out: list[str] = []
    origin: list[int] = []
    findings: list[Finding] = []
    i = 0
    while i < len(lines):
        number = i + 1
        if number not in edits:
            out.append(lines[i])
            origin.append(number)
            i += 1
            continue
        node, edit = edits[number]
        first, last = i, (node.end_lineno or node.lineno) - 1
        raw_head = lines[first].encode()
        indent = raw_head[: node.col_offset].decode()
        whole = not indent.strip(" \t")
        above = _comment_block(lines, first)
        todo_indent = indent if whole else re.match(r"[ \t]*", lines[first]).group()  # type: ignore[union-attr]
        for todo in edit.todos:
            if todo not in above:
                out.append(f"{todo_indent}{todo}\n")
                origin.append(number)
        if edit.new is None or (not whole and "\n" in edit.new):
            if edit.new is not None:  # an import after `;` or `:` that splits in two: by hand
                out.append(f"{todo_indent}{TODO_PREFIX}MV311 split this import: its names moved to different modules\n")
                origin.append(number)
            out.extend(lines[first : last + 1])
            origin.extend(range(number, last + 2))
            i = last + 1
            continue
        findings.extend(edit.findings)
        rest = lines[last].encode()[node.end_col_offset :].decode()  # a comment, `; more`, the newline
        new_lines = edit.new.split("\n")
        text = indent + "\n".join(
            line if k == 0 or edit.verbatim else indent + line for k, line in enumerate(new_lines)
        ) + rest
        for k, line in enumerate(text.splitlines(keepends=True)):
            out.append(line)
            origin.append(min(number + k, last + 1))
        i = last + 1
    return Renamed("".join(out), sorted(findings), origin)


def _comment_block(lines: list[str], first: int) -> str:
    """The comment lines right above line index ``first``."""
    block = []
    j = first - 1
    while j >= 0 and lines[j].lstrip().startswith("#"):
        block.append(lines[j])
        j -= 1
    return "".join(block)
