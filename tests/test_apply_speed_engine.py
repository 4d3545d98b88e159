"""The fast ``apply`` path gives exactly what libcst's own machinery gives.

``codemods.base.Engine.run`` walks the tree itself (rebuilding only changed
nodes, skipping subtrees no hook can see) instead of libcst's transformer,
and rewrite positions come from a lazy codegen instead of libcst's
``PositionProvider``. ``migrate_v3.pipeline.REFERENCE_ENGINE`` switches back to
libcst's; both must agree on every output byte and every reported line.
"""

from __future__ import annotations

import json
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

import codemods.base as base
import migrate_v3.pipeline as pipeline
from codemods.base import FileState, TransformContext, grammar, positions, render
from migrate_v3.apply import apply_paths

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
def _parses(path: Path) -> bool:
    try:
        cst.parse_module(path.read_text())
    except cst.ParserSyntaxError:
        return False
    return True


#: every fixture file libcst parses (the syntax-error fixtures are the check's cases)
INPUTS = [p for p in sorted(FIXTURES.rglob("*.py")) if _parses(p)]
CASES = sorted(FIXTURES.rglob("*.input.py"))


def _context(case: Path, **overrides: object) -> TransformContext:
    ctx_file = case.with_name(case.name.replace(".input.py", ".context.json"))
    data = json.loads(ctx_file.read_text()) if ctx_file.exists() else {}
    data.update(overrides)
    return TransformContext(**data)


def _both(source: str, ctx: TransformContext, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    monkeypatch.setattr(pipeline, "REFERENCE_ENGINE", True)
    reference = pipeline.transform_source(source, context=ctx)
    monkeypatch.setattr(pipeline, "REFERENCE_ENGINE", False)
    fast = pipeline.transform_source(source, context=ctx)
    return reference, fast


def test_the_fast_traversal_is_available() -> None:
    """libcst's node classes were understood (else Engine.run falls back to libcst's transformer)."""
    assert grammar() is not None


@pytest.mark.parametrize("precise", [False, True], ids=["import-table", "precise"])
@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name.removesuffix('.input.py')}")
def test_fixture_same_as_libcst_transformer(case: Path, precise: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    reference, fast = _both(case.read_text(), _context(case, precise_names=precise), monkeypatch)
    assert fast == reference


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name.removesuffix('.input.py')}")
def test_fixture_same_without_prefilters(case: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Text prefilters only skip work: with all of them off the result is the same."""
    ctx = _context(case)
    fast = pipeline.transform_source(case.read_text(), context=ctx)
    monkeypatch.setattr(base, "PREFILTERS", False)
    assert pipeline.transform_source(case.read_text(), context=ctx) == fast


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_lazy_positions_match_position_provider(path: Path) -> None:
    """Every node of every fixture file: the same start as libcst's PositionProvider."""
    module = cst.parse_module(path.read_text())
    ranges = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = list(ranges)
    found = positions(module, nodes)
    assert {id(n): found[id(n)] for n in nodes} == {id(n): (r.start.line, r.start.column) for n, r in ranges.items()}
    # a node that is not in the module has no position; a few nodes stop the codegen early
    stranger = cst.Name("x")
    assert id(stranger) not in positions(module, [stranger, *nodes[:3]])


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_render_is_module_code(path: Path) -> None:
    module = cst.parse_module(path.read_text())
    state = FileState(context=TransformContext())
    assert render(module, state) == module.code
    assert render(module, state) == module.code  # from the cache
    trimmed = module.with_changes(has_trailing_newline=False)
    assert render(trimmed, state) == trimmed.code


def _parsed_children_fit_annotations(module: cst.Module) -> list[str]:
    g = grammar()
    assert g is not None
    bad: list[str] = []
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        name = type(node).__name__
        for fname, _kind in g.spec[type(node)]:
            value = getattr(node, fname)
            children = value if isinstance(value, (list, tuple)) else [value]
            for child in children:
                if isinstance(child, cst.CSTNode):
                    if type(child).__name__ not in g.holds[name, fname]:
                        bad.append(f"{name}.{fname}: {type(child).__name__}")
                    stack.append(child)
    return bad


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_parsed_trees_fit_the_grammar(path: Path) -> None:
    """The Engine skips subtrees by the field annotations: the parser must keep to them."""
    module = cst.parse_module(path.read_text())
    assert _parsed_children_fit_annotations(module) == []


import max as max_pkg  # noqa: E402 - the suite runs with max installed (CI installs it)

ARCHITECTURES = Path(list(max_pkg.__path__)[0]) / "pipelines" / "architectures"
#: small and varied: Graph builders, pipeline models, sibling imports, registration
PACKAGES = ["bert", "mpnet", "qwen3", "olmo2", "gemma3"]


#: every file of the V2 packages (what ``apply`` reads)
REAL_FILES = sorted(
    py for pkg in ARCHITECTURES.iterdir() if pkg.is_dir() and not pkg.name.endswith("_modulev3") for py in pkg.rglob("*.py")
)


def test_real_trees_fit_the_grammar_and_graph_prefilter() -> None:
    """Every V2 package file: parsed children fit the field annotations, and where
    GraphCompile.PLAN_TRIGGER says no, ``plan_module`` finds nothing."""
    from codemods.graph_build import GraphPlan, plan_module
    from codemods.graph_compile import GraphCompile
    from codemods.resolve import ImportTableResolver

    assert len(REAL_FILES) > 500
    bad: set[str] = set()
    skipped = 0
    for py in [*INPUTS, *REAL_FILES]:
        source = py.read_text(encoding="utf-8")
        try:
            module = cst.parse_module(source)
        except cst.ParserSyntaxError:
            continue
        bad.update(_parsed_children_fit_annotations(module))
        # (without the word Graph no name resolves to max.graph.Graph)
        if "Graph" in source and not GraphCompile.PLAN_TRIGGER.search(source):
            skipped += 1
            assert plan_module(module, ImportTableResolver(module).qualname) == GraphPlan(), py
    assert bad == set()
    assert skipped > 20


def _report(tmp: Path, monkeypatch: pytest.MonkeyPatch, reference: bool, prefilters: bool = True) -> dict[str, object]:
    monkeypatch.setattr(pipeline, "REFERENCE_ENGINE", reference)
    monkeypatch.setattr(base, "PREFILTERS", prefilters)
    out = tmp / f"{reference}-{prefilters}"
    pkgs = [ARCHITECTURES / p for p in PACKAGES if (ARCHITECTURES / p).is_dir()]
    report = apply_paths(pkgs, out=out, jobs=1)
    files = {f.source: {**f.to_json(), "dest": None} for f in report.files}
    code = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.py"))}
    return {"files": files, "code": code}


def test_real_packages_same_as_libcst_transformer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A few real V2 packages, whole apply: outputs and reports byte for byte."""
    fast = _report(tmp_path, monkeypatch, reference=False)
    reference = _report(tmp_path, monkeypatch, reference=True)
    unfiltered = _report(tmp_path, monkeypatch, reference=False, prefilters=False)
    assert fast["code"] and fast["files"]
    assert fast == reference
    assert fast == unfiltered


def test_residual_statements_are_ast_walk_order() -> None:
    """``residual.statements`` skips expressions but keeps ``ast.walk``'s statement order."""
    import ast

    from codemods.residual import statements

    for py in [*INPUTS, *REAL_FILES]:
        try:
            tree = ast.parse(py.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        assert statements(tree) == [n for n in ast.walk(tree) if isinstance(n, ast.stmt)], py
