"""MV3xx safety net — every V2 site ``check`` still sees in the output gets a TODO.

The codemods flag the sites they know; ``check`` (``migrate_v3.scan``) also
reports uses of V2 names they do not visit (annotations, ``ShardingStrategy``
uses, ``Graph`` in signatures...). A migrated file must not hide any of them,
so after ``Imports`` has settled the final names, the output is scanned once
and each statement with a finding but no ``TODO(migrate-v3)`` marker gets one
with ``check``'s own message. Comments only: nothing ``Imports`` saw changes.
It works on the final code text (a pass the engine runs after printing the
module), so the output is printed once and never re-parsed.

    strategy: ShardingStrategy = ShardingStrategy.rowwise(n)
    →  # TODO(migrate-v3): MV390 ShardingStrategy (no V3 class)
       strategy: ShardingStrategy = ShardingStrategy.rowwise(n)
"""

from __future__ import annotations

import ast
import re
from collections import deque
from functools import partial

import libcst as cst

from codemods.base import TODO_PREFIX, Codemod
from migrate_v3.findings import Finding
from migrate_v3.scan import scan_source


def statements(tree: ast.Module) -> list[ast.stmt]:
    """The statements of ``ast.walk(tree)``, in its order, without walking expressions.

    Statements nest only in statement bodies (and except/case clauses), so a
    breadth-first walk of that skeleton meets them level by level in the same
    order as ``ast.walk``.
    """
    out: list[ast.stmt] = []
    todo: deque[ast.AST] = deque([tree])
    while todo:
        node = todo.popleft()
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.stmt):
                        out.append(item)
                        todo.append(item)
                    elif isinstance(item, ast.excepthandler | ast.match_case):
                        todo.append(item)
    return out


def first_line(node: ast.stmt) -> int:
    """Where a statement's text starts: its first decorator for a decorated def or class
    (``ast`` gives the ``def``/``class`` line; a comment there would split the decorators from it)."""
    decorators = getattr(node, "decorator_list", None)
    return min([node.lineno, *(d.lineno for d in decorators)]) if decorators else node.lineno


def statement_starts(stmts: list[ast.stmt]) -> dict[int, int]:
    """Line → first line of the innermost statement containing it."""
    starts: dict[int, int] = {}
    spans = sorted(
        ((first_line(n), n.end_lineno or n.lineno) for n in stmts),
        key=lambda span: span[1] - span[0],
        reverse=True,
    )
    for first, last in spans:  # widest first: the innermost statement wins
        for line in range(first, last + 1):
            starts[line] = first
    return starts


def exempt_lines(tree: ast.Module, stmts: list[ast.stmt]) -> set[int]:
    """Lines whose findings are deliberate, not residue.

    * imports whose every name is re-exported in ``__all__`` (a package's API,
      left to ``Imports``, which keeps them on purpose);
    * ``forward(self, ...)`` bodies for MV384: that is where V3 unflattens KV inputs.
    """
    exported: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            if isinstance(node.value, ast.List | ast.Tuple):
                exported |= {e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    lines: set[int] = set()
    for found in stmts:
        if isinstance(found, ast.ImportFrom) and exported and all((a.asname or a.name) in exported for a in found.names):
            lines.update(range(found.lineno, (found.end_lineno or found.lineno) + 1))
    return lines


def forward_lines(stmts: list[ast.stmt]) -> set[int]:
    lines: set[int] = set()
    for node in stmts:
        if isinstance(node, ast.FunctionDef) and node.name == "forward" and node.args.args and node.args.args[0].arg == "self":
            lines.update(range(node.body[0].lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def flagged(lines: list[str], first: int, line: int) -> bool:
    """A marker on the statement's lines up to ``line`` or in the comment block above it."""
    block = lines[first - 1 : line]
    j = first - 2
    while j >= 0 and lines[j].lstrip().startswith("#"):
        block.append(lines[j])
        j -= 1
    return any("TODO(migrate-v3)" in text for text in block)


class Residual(Codemod):
    PREFIX = "MV3"

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        source = self.state.source
        # prose is flagged only in a file the migration changed (a re-export keeps its words)
        self.state.text_passes.append(partial(_notes, source))
        return updated


def _notes(source: str, code: str) -> tuple[str, bool]:
    """(A module-level function: a closure over the file's state would be a reference cycle.)"""
    return residual_notes_parsed(code, prose=code != source)


#: line boundaries of str.splitlines() other than "\n"
_OTHER_LINE_ENDS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


#: "V2" as a word of prose about the API (not MiMo-V2, not V2.6)
#: (the literal first, the look-behind after it: the regex engine then jumps from one "V2" to the next)
_V2_WORD = re.compile(r"V2(?<![\w.-]V2)(?![\w]|\.\d)")
_V3_WORD = re.compile(r"(?<![\w.-])(?:V3|ModuleV3)(?![\w]|\.\d)")
PROSE_MESSAGE = "the docstring calls this code V2: say what the ModuleV3 code does"


def prose_findings(tree: ast.Module) -> list[Finding]:
    """MV304 at every docstring that calls the (now migrated) code V2: prose is not rewritten."""
    out = []
    for node in [tree, *(n for n in statements(tree) if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef))]:
        body = node.body
        first = body[0] if body else None
        if (
            isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str) and _V2_WORD.search(first.value.value)
            and not _V3_WORD.search(first.value.value)  # prose that compares the two is right as it is
        ):
            out.append(Finding(first.lineno, first.col_offset, "MV304", PROSE_MESSAGE))
    return out


def residual_notes_parsed(code: str, prose: bool = True) -> tuple[str, bool]:
    """``code`` with a TODO above every statement that still has a ``check`` finding and none,
    and above every docstring that still calls the code V2; and whether CPython's parser
    accepted the text returned: it parsed ``code``, and a whole comment line (or a blank one)
    put above a line where a statement begins, after a line that does not end in a
    backslash, changes no token."""
    findings = scan_source(code).findings
    prose = prose and _V2_WORD.search(code) is not None
    if not findings and not prose:
        return code, False
    lines = code.splitlines()
    tree = ast.parse(code)
    if prose:
        findings = [*findings, *prose_findings(tree)]
    if not findings:
        return code, True
    stmts = statements(tree)
    starts = statement_starts(stmts)
    exempt, forwards = exempt_lines(tree, stmts), forward_lines(stmts)
    notes: dict[int, list[str]] = {}
    for f in findings:
        if f.line in exempt or (f.code == "MV384" and f.line in forwards):
            continue
        first = starts.get(f.line, f.line)
        if flagged(lines, first, f.line):
            continue
        text = f"{TODO_PREFIX}{f.code} {f.message}"
        if text not in notes.setdefault(first, []):
            notes[first].append(text)
    if not notes:
        return code, True
    firsts = set(starts.values())
    parsed = all(n in firsts and (n == 1 or not lines[n - 2].endswith("\\")) for n in notes)
    # isort keeps a comment above an import apart from the import before it
    imports = {n.lineno for n in stmts if isinstance(n, ast.Import | ast.ImportFrom)}
    import_ends = {n.end_lineno for n in stmts if isinstance(n, ast.Import | ast.ImportFrom)}
    out: list[str] = []
    for number, text in enumerate(lines, start=1):
        indent = text[: len(text) - len(text.lstrip())]
        if number in notes and number in imports and number - 1 in import_ends:
            out.append("")
        out.extend(indent + note for note in notes.get(number, []))
        out.append(text)
    result = "\n".join(out) + ("\n" if code.endswith("\n") else "")
    if _OTHER_LINE_ENDS.search(code):
        # lines were split where "\n".join does not put them back: libcst says
        # whether that still parses (and prints it back unchanged if it does)
        return cst.parse_module(result).code, False
    return result, parsed
