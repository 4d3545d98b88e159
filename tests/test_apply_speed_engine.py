"""The fast ``apply`` path gives exactly what libcst's own machinery gives.

``codemods.base.Engine.run`` walks the tree itself (rebuilding only changed
nodes, skipping subtrees no hook can see) instead of libcst's transformer;
``migrate_v3.pipeline.REFERENCE_ENGINE`` switches back to libcst's. Both must
agree on every output byte and every reported line.
"""

from __future__ import annotations

import json
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

import codemods.base as base
import codemods.grammar as node_grammar
import migrate_v3.pipeline as pipeline
from codemods.base import FileState, TransformContext, fast_path_problem, grammar, positions, render
from migrate_v3.apply import apply_paths
from tests.test_codemods import _context

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
def _parses(path: Path) -> bool:
    try:
        cst.parse_module(path.read_text())
    except cst.ParserSyntaxError:
        return False
    return True


#: every statement and expression form of Python 3.10/3.11, with V2 sites in each
SYNTAX = ROOT / "tests" / "data" / "engine_syntax.py"
#: every fixture file libcst parses (the syntax-error fixtures are the check's cases)
INPUTS = [p for p in sorted(FIXTURES.rglob("*.py")) if _parses(p)] + [SYNTAX]
CASES = [*sorted(FIXTURES.rglob("*.input.py")), SYNTAX]


def _both(source: str, ctx: TransformContext, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    monkeypatch.setattr(pipeline, "REFERENCE_ENGINE", True)
    reference = pipeline.transform_source(source, context=ctx)
    monkeypatch.setattr(pipeline, "REFERENCE_ENGINE", False)
    fast = pipeline.transform_source(source, context=ctx)
    return reference, fast


def test_the_fast_path_is_available() -> None:
    """libcst's node classes were understood and its printing and positions are what the fast
    path expects (else ``apply`` falls back to libcst's transformer, and says so)."""
    assert grammar() is not None
    assert fast_path_problem() is None


def test_every_parsed_node_class_is_in_the_grammar() -> None:
    """The grammar's classes are libcst's exported ones: a parsed class missing from it
    would never be entered by the Engine."""
    g = grammar()
    assert g is not None
    seen: set[type] = set()
    for path in INPUTS:
        stack: list[cst.CSTNode] = [cst.parse_module(path.read_text())]
        while stack:
            node = stack.pop()
            seen.add(type(node))
            stack.extend(node.children)
    assert {c.__name__ for c in seen} <= set(g.classes)
    assert len(seen) > 140


_INDENTED = """\
class C(Base):
    x: int = 1

    # a comment line
    @property
    def f(self, a: int = 2, *args: str, b, **kw) -> None:
        if a:  # comment
            return (yield a[1:2, ...])
        elif b: pass
        s = \"\"\"a string
that keeps its own lines\"\"\"
        return f"{a!r:>{b}}" \\
            if a else -a ** 2
"""


@pytest.mark.parametrize("indent", ["    ", "\t", "  "])
def test_code_for_at_an_indentation_is_the_source(indent: str) -> None:
    """A statement printed alone at its block's indentation is its own source text (comments,
    continuation lines and a multi-line string included), whatever the indentation is."""
    source = _INDENTED.replace("    ", indent)
    module = cst.parse_module(source)
    cls = module.body[0]
    assert isinstance(cls, cst.ClassDef) and isinstance(cls.body, cst.IndentedBlock)
    method = cls.body.body[-1]
    start = source.index(f"\n{indent}# a comment line")  # (its blank line is its own)
    assert base.code_for(module, method, indent) == source[start:]
    assert base.code_for(module, cls.body.body[0], indent) == f"{indent}x: int = 1\n"


def test_an_unreadable_grammar_is_reported_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> node_grammar.Grammar:
        raise TypeError("TypeParam: something new")

    monkeypatch.setattr(node_grammar, "build", boom)
    monkeypatch.setattr(base, "_GRAMMAR", [])
    monkeypatch.setattr(base, "_PROBLEM", [])
    problem = fast_path_problem()
    assert problem is not None and problem.endswith("its node classes could not be read (TypeError: TypeParam: something new)")
    assert pipeline.reference_engine()
    # ... and apply still gives the same output through libcst's transformer
    source = (FIXTURES / "layers" / "linear.input.py").read_text()
    slow = pipeline.transform_source(source)
    monkeypatch.undo()
    assert slow == pipeline.transform_source(source)


def test_new_syntax_when_libcst_parses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """PEP 695 type parameters (libcst >= 1.1 parses them, whatever Python runs it):
    the Engine walks the new node classes as libcst's transformer does."""
    source = (
        "from max.nn import Linear\n"
        "type Alias[T: int = Linear, *Ts, **P] = list[T]\n"
        "def make[T](d: int) -> Linear:\n    return Linear(d, d, dtype, device)\n"
        "class Box[T](Base[T]):\n    x = Linear(2, 2, dtype, device)\n"
    )
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        assert "TypeParam" not in dir(cst)  # an old libcst: the syntax does not exist for it
        return
    state = FileState(context=TransformContext(), source=source)
    state.resolver = base.make_resolver(module, precise=False)
    from codemods import ORDER

    fast = base.Engine([c(state) for c in ORDER], state).run(module).code
    state2 = FileState(context=TransformContext(), source=source)
    state2.resolver = base.make_resolver(module, precise=False)
    reference = module.visit(base.Engine([c(state2) for c in ORDER], state2)).code
    assert fast == reference
    assert "Linear(in_dim=d, out_dim=d, bias=False)" in fast


def test_slow_path_says_so_once(tmp_path: Path) -> None:
    """Forced off, ``apply`` warns once on stderr and in --report, and writes the same files."""
    import os
    import subprocess
    import sys

    outputs = {}
    for off in (False, True):
        env = {**os.environ, "MIGRATE_V3_NO_FAST_PATH": "1" if off else "0"}
        out, report = tmp_path / f"out-{off}", tmp_path / f"report-{off}.json"
        proc = subprocess.run(
            [sys.executable, "-m", "migrate_v3", "apply", str(FIXTURES / "models" / "tinylm"), "--out", str(out),
             "--report", str(report), "--verbose"],
            capture_output=True, text=True, env=env, check=False,
        )
        assert proc.returncode == 1, proc.stderr  # written; tinylm's MV304 docstring TODOs remain
        engine = json.loads(report.read_text())["engine"]
        if off:
            assert proc.stderr.count("warning: apply's fast path is unavailable") == 1, proc.stderr
            assert "(disabled by MIGRATE_V3_NO_FAST_PATH=1)" in proc.stderr
            assert engine == {"fast": False, "problem": "disabled by MIGRATE_V3_NO_FAST_PATH=1"}
        else:
            assert "warning" not in proc.stderr
            assert "fast path: the Engine's traversal on libcst" in proc.stderr
            assert engine == {"fast": True, "problem": None}
        outputs[off] = {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*.py"))}
    assert outputs[True] == outputs[False] and outputs[True]


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


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: str(p.relative_to(ROOT)))
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


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: str(p.relative_to(ROOT)))
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
        for fname in g.kinds[type(node)]:
            value = getattr(node, fname)
            children = value if isinstance(value, (list, tuple)) else [value]
            for child in children:
                if isinstance(child, cst.CSTNode):
                    if type(child).__name__ not in g.holds[name, fname]:
                        bad.append(f"{name}.{fname}: {type(child).__name__}")
                    stack.append(child)
    return bad


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: str(p.relative_to(ROOT)))
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
