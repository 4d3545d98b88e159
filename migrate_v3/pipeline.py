"""Run the codemods of ``codemods.ORDER`` over one source text: a pure function.

One parse, one traversal (all codemods batched, see ``codemods.base.Engine``),
one print. Files that already use ``max.experimental`` are left alone, and so
are files a text prefilter shows no codemod could change — both keep ``apply``
cheap and make it idempotent on V3 code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from codemods import ORDER
from codemods.base import TODO_RE, Codemod, FileState, TransformContext, engine_class, make_resolver
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


def classify_source(source: str) -> str:
    """``v3``, ``v2`` or ``neutral``: check's classifier, so both commands agree.

    A mixed file (ModuleV3 code that still uses V2 layers) and ModuleV3 code
    written against an older release's namespaces are ``v2`` here: both have
    sites apply rewrites.
    """
    scan = scan_source(source)
    kind = kind_of(scan)
    if kind == "mixed" or (kind == "v3" and scan.release in {"25.6/25.7", "26.1"}):
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


def select_codemods(source: str, kind: str) -> list[type[Codemod]]:
    """The codemods of ORDER that can change ``source`` (cheap text prefilter)."""
    if kind == "v2":
        return [c for c in ORDER if c.applies(source)]
    return [c for c in ORDER if c.NEUTRAL_OK and c.applies(source)]


def transform_source(
    source: str, *, path: str = "<string>", context: TransformContext | None = None
) -> TransformResult:
    """Rewrite V2 ``source`` into V3. Pure: no I/O. Raises TransformError on bad syntax."""
    ctx = context or TransformContext()
    kind = classify_source(source)
    if (ctx.package or "").endswith("_modulev3") and ctx.only_v2:
        # a V3 package (an official port): its V2-style helpers are kept on purpose
        return TransformResult(source, False, [], todo_markers(source), kind)
    if kind == "v3" and ctx.only_v2:
        # V3 (or mixed) code is left alone, except the registration names of a
        # V2 package's arch.py/__init__.py (a V2 arch.py may import V3 helpers)
        v2_package = ctx.package is not None and not ctx.package.endswith("_modulev3")
        if not (v2_package and (ctx.is_arch_module or ctx.is_package_init)):
            return TransformResult(source, False, [], todo_markers(source), kind)
        selected = [c for c in ORDER if c.PREFIX == "MV303" and c.applies(source)]
    else:
        selected = select_codemods(source, kind)
    if not selected:
        return TransformResult(source, False, [], todo_markers(source), kind)
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else "syntax error"
        raise TransformError(f"{path}: cannot parse: {msg} (line {exc.raw_line})") from exc
    state = FileState(context=ctx, source=source)
    if module.body:
        state.first_statement = id(module.body[0])
        state.header_comments = frozenset(el.comment.value for el in module.header if el.comment)
    codemods = [c(state) for c in selected]
    engine = engine_class(ctx.positions, ctx.precise_names)(codemods, state)
    if ctx.positions or ctx.precise_names:
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        state.resolver = make_resolver(module, engine, ctx.precise_names)
        if ctx.positions:
            state.position_of = _positions(engine)
        new_module = wrapper.visit(engine)
    else:
        state.resolver = make_resolver(module, engine, False)
        new_module = module.visit(engine)
    code = new_module.code
    return TransformResult(
        code=code,
        changed=code != source,
        findings=sorted(state.findings),
        todos=todo_markers(code),
        kind=kind,
    )


def _positions(engine: cst.MetadataDependent) -> Callable[[cst.CSTNode], tuple[int, int]]:
    def position_of(node: cst.CSTNode) -> tuple[int, int]:
        try:
            pos = engine.get_metadata(PositionProvider, node)
        except KeyError:
            return (0, 0)
        return (pos.start.line, pos.start.column)

    return position_of
