"""Fixture pairs are the spec: ``fixtures/<codemod>/<case>.input.py`` → ``.expected.py``.

Every pair runs through the whole pipeline (so a codemod's output is also
checked against the ones after it), with both name resolvers, and a second
run over the expected file must change nothing.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import libcst as cst
import pytest

import codemods
from codemods.base import TODO_RE, CallShape, FieldDecl
from migrate_v3.pipeline import TransformContext, TransformError, transform_source
from migrate_v3.rules import RULES

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
#: every fixture folder with input/expected pairs (a new codemod's folder is tested once it has one)
CODEMOD_DIRS = sorted({p.parent.name for p in FIXTURES.glob("*/*.input.py")})
CASES = sorted(p for d in CODEMOD_DIRS for p in (FIXTURES / d).glob("*.input.py"))


def _context(case: Path, **overrides: object) -> TransformContext:
    ctx_file = case.with_name(case.name.replace(".input.py", ".context.json"))
    data = json.loads(ctx_file.read_text()) if ctx_file != case and ctx_file.exists() else {}
    # (JSON has lists where the plan gives frozensets of names)
    if "class_attributes" in data:
        data["class_attributes"] = {k: frozenset(v) for k, v in data["class_attributes"].items()}
    if "attribute_reads" in data:
        data["attribute_reads"] = frozenset(data["attribute_reads"])
    if "call_keywords" in data:
        data["call_keywords"] = frozenset(CallShape(n, frozenset(k), *rest) for n, k, *rest in data["call_keywords"])
    if "data_classes" in data:
        data["data_classes"] = frozenset(data["data_classes"])
    if "neutral_modules" in data:
        data["neutral_modules"] = frozenset(data["neutral_modules"])
    if "module_classes" in data:
        data["module_classes"] = frozenset(data["module_classes"])
    if "class_fields" in data:
        data["class_fields"] = {k: frozenset(v) for k, v in data["class_fields"].items()}
    if "field_decls" in data:  # [annotation, value, [[module, name], ...], (plain default)]
        data["field_decls"] = {k: FieldDecl(a, v, tuple(map(tuple, i)), *rest) for k, (a, v, i, *rest) in data["field_decls"].items()}
    data.update(overrides)
    return TransformContext(**data)


def _expected(case: Path) -> Path:
    return case.with_name(case.name.replace(".input.py", ".expected.py"))


def _id(case: Path) -> str:
    return f"{case.parent.name}/{case.name.removesuffix('.input.py')}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_fixture(case: Path) -> None:
    result = transform_source(case.read_text(), path=str(case), context=_context(case))
    assert result.code == _expected(case).read_text()


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_fixture_precise_names_agree(case: Path) -> None:
    """libcst's QualifiedNameProvider and the import table give the same output."""
    result = transform_source(case.read_text(), context=_context(case, precise_names=True))
    assert result.code == _expected(case).read_text()


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_fixture_idempotent(case: Path) -> None:
    """Second run changes nothing — even with the V3-file gate switched off."""
    expected = _expected(case).read_text()
    again = transform_source(expected, context=_context(case, only_v2=False))
    assert again.code == expected
    assert not again.changed


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_fixture_todos_match_markers(case: Path) -> None:
    """Every marker of the output is reported, once, with the line it sits on."""
    result = transform_source(case.read_text(), context=_context(case))
    lines = result.code.splitlines()
    markers = [i + 1 for i, line in enumerate(lines) if TODO_RE.search(line)]
    assert [t.line for t in result.todos] == markers
    assert len({(t.line, t.message) for t in result.todos}) == len(result.todos)
    for todo in result.todos:
        assert todo.code in RULES
        assert lines[todo.line - 1].strip().startswith(f"# TODO(migrate-v3): {todo.code} ")


def test_each_pair_changes_something_or_is_a_declared_noop() -> None:
    noops = {c for c in CASES if c.read_text() == _expected(c).read_text()}
    assert {_id(c) for c in noops} == {
        "imports/reexport",
        "module_interface/not_a_module",
        "tensor_types/v3_noop",
        "layers/local_linear",
        "registration/already",
        "release_names/leave_alone",
    }


def test_findings_name_known_rules() -> None:
    for case in CASES:
        for finding in transform_source(case.read_text(), context=_context(case)).findings:
            assert finding.code in RULES, (case, finding)


def test_order_lists_every_codemod_once_with_docs() -> None:
    classes = codemods.ORDER
    assert len(set(classes)) == len(classes)
    assert [c.__name__ for c in classes[-4:-1]] == ["Imports", "ImportOrder", "NeutralImportOrder"], "imports settle last but for the comment-only safety net"
    assert classes[-1].__name__ == "Residual"
    for cls in classes:
        doc = cls.__module__ and __import__(cls.__module__, fromlist=["x"]).__doc__
        assert doc and "MV3" in doc.splitlines()[0] or "MV4" in (doc or ""), cls
        assert "→" in (doc or ""), f"{cls.__name__} docstring needs a before → after example"


def test_rule_examples_appear_in_fixtures() -> None:
    """Each rule's ``before`` is in some input and its ``after`` in that case's expected."""
    pairs = [(c.read_text(), _expected(c).read_text()) for c in CASES]
    missing = [
        code
        for code, rule in RULES.items()
        if code.startswith("MV3") or code.startswith("MV4")
        if not any(rule.before in i and rule.after in e for i, e in pairs)
    ]
    assert missing == []


def test_syntax_error_is_one_line() -> None:
    with pytest.raises(TransformError) as err:
        transform_source("from max.nn import Linear\ndef f(:\n", path="bad.py")
    assert "\n" not in str(err.value) and "bad.py" in str(err.value)


def test_v3_file_is_left_alone() -> None:
    src = "from max.experimental.nn import Module\nfrom max.graph import ops\n\nx = ops.add\n"
    result = transform_source(src)
    assert result.code == src and not result.changed and result.kind == "v3"


def test_neutral_file_is_not_parsed() -> None:
    src = "def f(:\n"  # would not parse; a neutral file is never parsed
    assert transform_source(src).code == src


TINYLM = FIXTURES / "models" / "tinylm"


@pytest.mark.parametrize("name", ["layers.py", "model.py"])
def test_tinylm_output_is_v3_and_stable(name: str) -> None:
    result = transform_source((TINYLM / name).read_text())
    tree = ast.parse(result.code)
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {m for m in modules if m and (m == "max.nn" or m.startswith("max.nn."))}
    assert "TensorValue" not in {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert "def __call__" not in result.code
    again = transform_source(result.code, context=TransformContext(only_v2=False))
    assert again.code == result.code


def test_tinylm_layers_keep_v2_numerics() -> None:
    code = transform_source((TINYLM / "layers.py").read_text()).code
    assert "Linear(in_dim=hidden, out_dim=ffn, bias=False)" in code
    assert "Linear(in_dim=ffn, out_dim=hidden, bias=True)" in code
    assert "LayerNorm(dim=hidden, eps=eps, keep_dtype=False)" in code
    assert "MultiplyBeforeCastRMSNorm(dim=hidden, eps=eps)" in code
    tree = cst.parse_module(code)
    classes = [s.name.value for s in tree.body if isinstance(s, cst.ClassDef)]
    assert classes[0] == "MultiplyBeforeCastRMSNorm"


def test_release_names_outputs_import_what_max_26_7_has() -> None:
    """Every ``from max... import`` that the older-release fixtures' outputs keep without an
    MV313 TODO names a module and attribute of the installed max (26.7), and the ModuleV3
    ones build under ``F.lazy()``: the 26.1 and 25.x layouts map onto real 26.7 homes."""
    import importlib

    from max.experimental import functional as F

    checked = 0
    for expected in sorted((FIXTURES / "release_names").glob("*.expected.py")):
        lines = expected.read_text().splitlines()
        for node in ast.walk(ast.parse(expected.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("max")):
                continue
            above = node.lineno - 2
            while above >= 0 and lines[above].lstrip().startswith("#"):
                above -= 1
            if any("TODO(migrate-v3): MV313" in line for line in lines[above + 1 : node.lineno - 1]):
                continue
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                assert hasattr(module, alias.name), f"{expected.name}: {node.module}.{alias.name}"
                checked += 1
    assert checked >= 30
    built = {}
    for case, build in [("v3_26_1", "Tiny(10, 4)"), ("legacy_26_1", "Block(4, 2, None)"), ("module_v3_25x", "Head()")]:
        namespace: dict[str, object] = {}
        exec(compile(_expected(FIXTURES / "release_names" / f"{case}.input.py").read_text(), case, "exec"), namespace)
        with F.lazy():
            built[case] = sorted(dict(eval(build, namespace).parameters))  # noqa: S307 - the fixture's own class
    assert built["v3_26_1"][:2] == ["blocks.0.bias", "blocks.0.weight"]
    assert built["legacy_26_1"] == ["layers.0.weight", "layers.1.weight", "norm.weight"]
    assert built["module_v3_25x"][:2] == ["layers.0.bias", "layers.0.weight"]


def test_head_split_is_a_call_not_a_word_in_a_comment() -> None:
    """``shard()`` splits heads when it calls a head splitter; the name in a comment or a string is not one."""
    from codemods.shard_scan import class_facts

    def facts(shard_body: str) -> bool:
        code = f"class A:\n    def shard(self, devices):\n{shard_body}        return []\n"
        node = cst.parse_module(code).body[0]
        assert isinstance(node, cst.ClassDef)
        return class_facts(node, lambda n: None).head_split

    assert facts("        n = self.kv_params.num_heads_for_device(0)\n")
    assert facts("        lo, hi = _compute_shard_range(8, 2, 0)\n")
    assert not facts("        # unlike num_heads_for_device(i), keep every head\n        x = 'num_heads_for_device('\n")


def test_an_added_port_is_reported_under_the_rule_that_needed_it() -> None:
    """A port is reported by the rule that added it (the bridge's MV383), not as a layer variant
    (MV341, which a V3 class with V2's numerics, such as OffsetRMSNorm, still is)."""
    case = FIXTURES / "pipeline_model" / "sibling_base_bridged.input.py"
    found = transform_source(case.read_text(), path=str(case), context=_context(case)).findings
    added = {(f.code, f.message) for f in found if f.message.startswith("added ")}
    assert added == {("MV383", "added load_graph_specs (migrate-v3's port)")}
    case = FIXTURES / "sharding" / "moe_sharded_layers.input.py"
    found = transform_source(case.read_text(), path=str(case), context=_context(case)).findings
    assert {(f.code, f.message) for f in found if f.message.startswith("added ")} == {("MV341", "added OffsetRMSNorm")}
