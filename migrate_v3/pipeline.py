"""Run the codemods of ``codemods.ORDER`` over one source text: a pure function.

One parse, one traversal (all codemods batched, see ``codemods.base.Engine``),
one print (top-level statements printed once, shared by ``Imports`` and the
output; ``Residual`` works on that text). The original lines of the rewrites
are found afterwards, by one codegen of the original module stopped at the
last rewritten node. Files that already use ``max.experimental`` are left
alone, and so are files a text prefilter shows no codemod could change — both
keep ``apply`` cheap and make it idempotent on V3 code.
"""

from __future__ import annotations

import ast
import gc
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import libcst as cst

from codemods import ORDER
from codemods.base import (
    TODO_RE,
    Codemod,
    Engine,
    FileState,
    TransformContext,
    WholeModuleNeeded,
    code_for,
    fast_path_problem,
    make_resolver,
    positions,
    prefilters_on,
    render,
)
from codemods.import_order import ImportOrder, with_imports
from codemods.imports import Imports
from codemods.release_names import current_names
from codemods.residual import statements
from migrate_v3.classify import kind_of
from migrate_v3.findings import Finding
from migrate_v3.scan import scan_source

__all__ = ["TransformContext", "TransformError", "TransformResult", "classify_source", "transform_source"]



class TransformError(Exception):
    """The source could not be parsed; the message is one line."""


@dataclass
class TransformResult:
    """The rewritten code and what was done to get it."""

    code: str
    changed: bool
    #: every rewrite, by rule code (line/col of the original site)
    findings: list[Finding] = field(default_factory=list)
    #: every TODO marker in the output (line/col in the output)
    todos: list[Finding] = field(default_factory=list)
    #: "v2" | "v3" | "neutral"
    kind: str = "neutral"
    #: CPython's parser accepted ``code`` on the way (``apply`` need not prove it parses again)
    parsed: bool = False


def classify_source(source: str) -> str:
    """``v3``, ``v2`` or ``neutral``: check's classifier, so both commands agree.

    A mixed file (ModuleV3 code that still uses V2 layers) and ModuleV3 code
    written against an older release's namespaces are ``v2`` here: both have
    sites apply rewrites.
    """
    scan = scan_source(source)
    return transform_kind(kind_of(scan), scan.release)


def transform_kind(kind: str, release: str | None) -> str:
    """:func:`classify_source` from check's kind and release of the file."""
    if kind == "mixed" or (kind == "v3" and release in {"25.6/25.7", "26.1"}):
        return "v2"  # V2 sites, or an older release's namespaces, to rewrite
    return kind


def todo_markers(code: str) -> list[Finding]:
    """The ``# TODO(migrate-v3): MVxxx ...`` markers of ``code`` as findings."""
    out = []
    for lineno, line in enumerate(code.splitlines(), start=1):
        if "TODO(migrate-v3)" not in line:
            continue
        m = TODO_RE.search(line)
        if m is not None:
            out.append(Finding(lineno, m.start(), m.group(1), m.group(2)))
    return out


def select_codemods(source: str, kind: str, context: TransformContext | None = None) -> list[type[Codemod]]:
    """The codemods of ORDER that can change ``source`` (cheap text prefilter)."""
    ctx = context or TransformContext()
    on = prefilters_on()
    if kind == "v2":
        return [c for c in ORDER if not on or c.applies_to(source, ctx)]
    return [c for c in ORDER if c.NEUTRAL_OK and (not on or c.applies_to(source, ctx))]


def transform_source(
    source: str, *, path: str = "<string>", context: TransformContext | None = None
) -> TransformResult:
    """Rewrite V2 ``source`` into V3. Pure: no I/O. Raises TransformError on bad syntax.

    Imports of older releases' names are first spelled the max 26.7 way
    (``codemods.release_names``), so that everything after sees 26.7's layout.
    """
    ctx = context or TransformContext()
    official_port = (ctx.package or "").endswith("_modulev3") and ctx.only_v2
    renamed = None if official_port or not ctx.old_release_names else current_names(source)
    if renamed is None:
        return _transform_source(source, path, ctx)
    result = _transform_source(renamed.code, path, replace(ctx, renamed_from=source))
    moved = [f._replace(line=renamed.line_of(f.line)) for f in result.findings]
    result.findings = sorted([*renamed.findings, *moved])
    result.changed = result.code != source
    return result


def _transform_source(source: str, path: str, ctx: TransformContext) -> TransformResult:
    known = ctx.source_kind if ctx.renamed_from is None else None  # (renamed: other code)
    kind = known if known is not None else classify_source(source)
    if (ctx.package or "").endswith("_modulev3") and ctx.only_v2:
        # a V3 package (an official port): its V2-style helpers are kept on purpose
        return TransformResult(source, False, [], todo_markers(source), kind)
    if kind == "v3" and ctx.only_v2:
        # V3 (or mixed) code is left alone, except the registration names of a
        # V2 package's arch.py/__init__.py (a V2 arch.py may import V3 helpers)
        v2_package = ctx.package is not None and not ctx.package.endswith("_modulev3")
        registration = v2_package and (ctx.is_arch_module or ctx.is_package_init)
        if not registration and ctx.renamed_from is None:
            return TransformResult(source, False, [], todo_markers(source), kind)
        selected = [
            c for c in ORDER
            if ((registration and c.PREFIX == "MV303") or (ctx.renamed_from is not None and c is ImportOrder))
            and (not prefilters_on() or c.applies_to(source, ctx))
        ]
    else:
        selected = select_codemods(source, kind, ctx)
    if not selected:
        return TransformResult(source, False, [], todo_markers(source), kind)
    with gc_paused():
        kinds = _import_hooks(tuple(selected))
        if kinds and not (reference_engine() or ctx.precise_names):
            done = _rewrite_imports(source, ctx, kind, selected, kinds)
            if done is not None:
                return done
        return _rewrite(source, path, ctx, kind, selected)


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while one file is rewritten (or the plan parses a tree).

    libcst trees hold no reference cycles, so the collector's passes over the
    hundreds of thousands of nodes a file allocates find nothing (they cost
    ~10% of ``apply``); the few cycles a transform leaves (codemods and their
    state) are collected once the collector runs again.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _rewrite(source: str, path: str, ctx: TransformContext, kind: str, selected: list[type[Codemod]]) -> TransformResult:
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else "syntax error"
        raise TransformError(f"{path}: cannot parse: {msg} (line {exc.raw_line})") from exc
    state = FileState(context=ctx, source=source)
    if module.body:
        state.first_statement = id(module.body[0])
        state.header_comments = frozenset(el.comment.value for el in module.header if el.comment)
    state.resolver = make_resolver(module, ctx.precise_names)
    state.module = module
    engine = Engine([c(state) for c in selected], state)
    reference = reference_engine()
    new_module = module.visit(engine) if reference else engine.run(module)
    if state.needed_imports and Imports not in selected:
        # a neutral file: what its codemods asked to import (``Imports`` adds it on a V2 file)
        new_module = with_imports(new_module, state.needed_imports)
    code = new_module.code if reference else render(new_module, state)
    parsed = False
    for text_pass in state.text_passes:
        code, parsed = text_pass(code)
    found: Mapping[int, tuple[int, int]] = {}
    if ctx.positions and state.rewrites:
        nodes = [node for node, _, _ in state.rewrites]
        found = positions(module, nodes)
    return TransformResult(
        code=code,
        changed=code != source,
        findings=sorted(Finding(*found.get(id(node), (0, 0)), rule, message) for node, rule, message in state.rewrites),
        todos=todo_markers(code),
        kind=kind,
        parsed=parsed,
    )


# --- files where only import statements can change -----------------------------------
#
# When every hook of the selected codemods is on ``Import``/``ImportFrom``
# (``Dependencies``, ``SelfImports``: most neutral files), nothing but import
# statements can change. Those are found with ``ast`` (C, ~7x cheaper than
# libcst's parse) and each is parsed, rewritten and printed on its own, at
# its indentation; every other byte is the source's. Anything unusual (a
# one-line suite, a ``;``, a line continuation, an indented import over several
# lines, ``\r``, an existing migrate-v3 TODO, a hook asking for the import
# table) takes the whole-module path.

_IMPORT_HOOK_NAMES = frozenset({"visit_Import", "leave_Import", "visit_ImportFrom", "leave_ImportFrom"})
_IMPORT_KINDS: dict[tuple[type[Codemod], ...], frozenset[str]] = {}
_REST_OF_LINE = re.compile(r"[ \t]*(?:#[^\\]*)?")


def _import_hooks(selected: tuple[type[Codemod], ...]) -> frozenset[str]:
    """``{"ImportFrom", ...}`` when the codemods hook only import statements, else empty."""
    if selected not in _IMPORT_KINDS:
        hooks = {a for c in selected for a in dir(c) if a.startswith(("visit_", "leave_"))}
        _IMPORT_KINDS[selected] = (
            frozenset(h.split("_", 1)[1] for h in hooks) if hooks and hooks <= _IMPORT_HOOK_NAMES else frozenset()
        )
    return _IMPORT_KINDS[selected]


class _NoImportTable:
    def qualname(self, node: cst.BaseExpression) -> str | None:
        raise WholeModuleNeeded  # the import table needs every import: parse the module


def _rewrite_imports(
    source: str, ctx: TransformContext, kind: str, selected: list[type[Codemod]], kinds: frozenset[str]
) -> TransformResult | None:
    """The result of :func:`_rewrite` when only import statements can change; None: use it."""
    if "\r" in source or "TODO(migrate-v3)" in source or not source.endswith("\n"):
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None  # libcst reports it
    lines = source.split("\n")
    sites = sorted(
        (s for s in statements(tree) if type(s).__name__ in kinds),
        key=lambda s: (s.lineno, s.col_offset),
    )
    state = FileState(context=ctx, source=source)
    state.resolver = _NoImportTable()
    engine = Engine([c(state) for c in selected], state)
    replaced: dict[int, tuple[int, str]] = {}  # first line index → (end line index, new code)
    findings: list[Finding] = []
    try:
        for stmt in sites:
            first, last = stmt.lineno - 1, (stmt.end_lineno or stmt.lineno) - 1
            # (ast's columns count UTF-8 bytes)
            head = lines[first].encode()
            indent = head[: stmt.col_offset].decode(errors="replace")
            rest = lines[last].encode()[stmt.end_col_offset or 0 :].decode(errors="replace")
            if (
                indent.strip(" \t")  # after `;`, `else:`, `if x:` ... (or a form feed)
                or _REST_OF_LINE.fullmatch(rest) is None  # `; more`, a continuation
                or (first and lines[first - 1].endswith("\\"))
                # libcst keeps an indented statement's continuation lines relative to
                # its block's indentation (bracketed) or not (after a backslash)
                or (indent and last > first)
            ):
                return None
            text = "\n".join([head[stmt.col_offset :].decode(), *lines[first + 1 : last + 1]]) + "\n"
            mini = cst.parse_module(text)
            if mini.header or mini.footer or len(mini.body) != 1 or not isinstance(mini.body[0], cst.SimpleStatementLine):
                return None
            seen = len(state.rewrites)
            new = engine.run(mini)
            if new is not mini:
                if new.header or new.footer or not new.body:
                    return None
                replaced[first] = (last, "".join(code_for(new, line, indent) for line in new.body))
            mine = state.rewrites[seen:]
            found = positions(mini, [n for n, _, _ in mine]) if ctx.positions and mine else {}
            for node, rule, message in mine:
                line_no, col = found.get(id(node), (0, 0))
                if id(node) in found:
                    line_no, col = line_no + first, col + (len(indent) if line_no == 1 else 0)
                findings.append(Finding(line_no, col, rule, message))
    except (WholeModuleNeeded, cst.ParserSyntaxError):
        return None
    out_lines: list[str] = []
    i = 0
    while i < len(lines):
        if i in replaced:
            end, code = replaced[i]
            out_lines.append(code[:-1])  # (the join puts the newline back)
            i = end + 1
        else:
            out_lines.append(lines[i])
            i += 1
    code = "\n".join(out_lines)
    return TransformResult(code=code, changed=code != source, findings=sorted(findings), todos=todo_markers(code), kind=kind)


#: Run libcst's own transformer instead of the Engine's traversal: the
#: reference the fast path is checked against (tests and ``bench/apply_bench.py compare`` set it).
REFERENCE_ENGINE = os.environ.get("MIGRATE_V3_REFERENCE_ENGINE") == "1"


def reference_engine() -> bool:
    """libcst's own machinery runs: asked for, or the fast path is unavailable (``fast_path_problem``)."""
    return REFERENCE_ENGINE or fast_path_problem() is not None
