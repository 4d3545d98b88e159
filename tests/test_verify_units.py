"""verify's pure parts: key alignment, tolerances, specs, exit codes.

No graph is compiled here; these run in well under a second.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from migrate_v3.verify.align import align_keys, mark_linear_biases
from migrate_v3.verify.compare import compare_output
from migrate_v3.verify.report import ClassResult, MypyResult, OutputCheck, VerifyReport
from migrate_v3.verify.spec import DEVICE, DTYPE, BuildContext, load_spec

F32 = "float32"


def sig(*names: str, shape: tuple[int, ...] = (4,)) -> dict[str, tuple[tuple[int, ...], str]]:
    return {n: (shape, F32) for n in names}


def test_alignment_clean() -> None:
    a = align_keys(sig("a.weight", "b.weight"), sig("a.weight", "b.weight"))
    assert a.ok and not a.blocks_compile and a.suggestions == []


def test_alignment_reports_unexpected_keys_compile_would_ignore() -> None:
    a = align_keys(sig("a.weight", "a.bias"), sig("a.weight"))
    assert [(i.kind, i.key) for i in a.issues] == [("unexpected", "a.bias")]
    assert not a.ok and not a.blocks_compile
    assert "silently ignore" in a.issues[0].detail


def test_alignment_missing_bias_names_the_linear_flip() -> None:
    a = align_keys(sig("mlp.w.weight"), sig("mlp.w.weight", "mlp.w.bias"))
    assert a.blocks_compile
    assert a.issues[0].kind == "missing"
    mark_linear_biases(a, {"mlp.w"})
    assert "bias=True" in a.issues[0].detail
    b = align_keys(sig("n.weight"), sig("n.weight", "n.bias"))
    mark_linear_biases(b, {"mlp.w"})  # a norm bias is not a Linear flip
    assert "bias=True" not in b.issues[0].detail


def test_alignment_suggests_language_model_prefix() -> None:
    ckpt = sig("embed.weight", "layers.0.w.weight", "norm.weight")
    v3 = sig("language_model.embed.weight", "language_model.layers.0.w.weight",
             "language_model.norm.weight")
    a = align_keys(ckpt, v3)
    assert [(s.kind, s.new, s.explains) for s in a.suggestions] == [
        ("add_prefix", "language_model.", 3)
    ]


def test_alignment_suggests_strip_prefix() -> None:
    a = align_keys(sig("model.a.weight", "model.b.weight"), sig("a.weight", "b.weight"))
    assert [(s.kind, s.old) for s in a.suggestions] == [("strip_prefix", "model.")]


def test_alignment_suggests_segment_rename() -> None:
    a = align_keys(sig("norm.ln.weight", "norm.ln.bias", "x.weight"),
                   sig("norm.layer_norm.weight", "norm.layer_norm.bias", "x.weight"))
    assert [(s.kind, s.old, s.new, s.explains) for s in a.suggestions] == [
        ("rename", "ln", "layer_norm", 2)
    ]


def test_alignment_shape_and_dtype() -> None:
    a = align_keys({"w": ((4, 8), F32)}, {"w": ((8, 4), "bfloat16")})
    assert sorted(i.kind for i in a.issues) == ["dtype", "shape"]
    assert a.blocks_compile


def test_compare_passes_within_float32_tolerance() -> None:
    ref = np.linspace(-1, 1, 10, dtype=np.float32)
    check = compare_output(0, ref, ref + 1e-6, F32, F32)
    assert check.passed and check.max_abs == pytest.approx(1e-6, rel=0.1)


def test_compare_fails_beyond_tolerance_and_reports_errors() -> None:
    ref = np.ones(4, dtype=np.float32)
    check = compare_output(0, ref, ref * 1.01, F32, F32)
    assert not check.passed
    assert check.max_rel == pytest.approx(0.01, rel=1e-3)


def test_compare_bfloat16_is_looser_than_float32() -> None:
    ref = np.ones(4, dtype=np.float32)
    assert compare_output(0, ref, ref * 1.01, "bfloat16", "bfloat16").passed
    assert not compare_output(0, ref, ref * 1.05, "bfloat16", "bfloat16").passed


def test_compare_shape_dtype_and_nan_mismatch() -> None:
    ref = np.ones((2, 3), dtype=np.float32)
    assert not compare_output(0, ref, ref.T, F32, F32).passed
    assert not compare_output(0, ref, ref, F32, "bfloat16").passed
    bad = ref.copy()
    bad[0, 0] = np.nan
    assert not compare_output(0, ref, bad, F32, F32).passed


def test_integer_outputs_must_match_exactly() -> None:
    ref = np.arange(4)
    assert compare_output(0, ref, ref, "int64", "int64").passed
    assert not compare_output(0, ref, ref + 1, "int64", "int64").passed


def _out(passed: bool) -> OutputCheck:
    return OutputCheck(0, F32, [1], 0.0, 0.0, 1e-4, 1e-4, passed)


def test_exit_codes() -> None:
    ok = VerifyReport("a", "b", "cpu", [ClassResult("A", "pass", outputs=[_out(True)])])
    assert ok.exit_code == 0
    bad = VerifyReport("a", "b", "cpu", [ClassResult("A", "pass"), ClassResult("B", "fail")])
    assert bad.exit_code == 1
    nothing = VerifyReport("a", "b", "cpu", [ClassResult("A", "skipped", "why")])
    assert nothing.exit_code == 2
    broken = VerifyReport("a", "b", "cpu", error="no max")
    assert broken.exit_code == 2
    typed = VerifyReport("a", "b", "cpu", [ClassResult("A", "pass")], mypy=MypyResult(0, 3))
    assert typed.exit_code == 1


class Args:
    def __init__(self, *args: object) -> None:
        self.args = args


def test_python_spec_builds_each_side_with_placeholders(tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.py"
    spec_file.write_text(textwrap.dedent("""
        from migrate_v3.verify.spec import DEVICE, DTYPE, Case, Input
        CASES = {"Thing": Case(inputs=[Input((2, 3))], args=(3,), v2_args=(DTYPE, DEVICE))}
        PAIRS = {"Old": "New"}
    """))
    spec = load_spec(spec_file)
    case = spec.cases["Thing"]
    ctx = BuildContext("f32", "cpu0")
    assert case.build("v2", Args, ctx).args == (3, "f32", "cpu0")
    assert case.build("v3", Args, ctx).args == (3,)
    assert spec.pairs == {"Old": "New"}


def test_pyproject_spec(tmp_path: Path) -> None:
    toml = tmp_path / "pyproject.toml"
    toml.write_text(textwrap.dedent("""
        [tool.migrate-v3.verify]
        dtype = "bfloat16"
        only = ["FeedForward"]
        [tool.migrate-v3.verify.classes.FeedForward]
        args = [16, 32]
        v2_kwargs = { dtype = "$dtype", device = "$device" }
        inputs = [{ shape = [2, 5, 16], dims = ["batch", "seq", 16] }]
        tolerance = [1e-3, 1e-3]
    """))
    spec = load_spec(toml)
    assert spec.dtype == "bfloat16" and spec.only == ["FeedForward"]
    case = spec.cases["FeedForward"]
    assert case.v2_kwargs == {"dtype": DTYPE, "device": DEVICE}
    assert case.inputs[0].compile_dims() == ("batch", "seq", 16)
    assert case.tolerance == (1e-3, 1e-3)


def test_importing_the_tool_and_verify_command_does_not_import_max() -> None:
    code = (
        "import sys; import migrate_v3.verify, migrate_v3.verify_cmd, migrate_v3.verify.report;"
        "assert not any(m == 'max' or m.startswith('max.') for m in sys.modules), 'max imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_progress_is_plain_lines_when_not_a_terminal() -> None:
    import io

    from migrate_v3.verify.progress import NullProgress, PlainProgress, make_progress

    stream = io.StringIO()
    progress = make_progress(True, stream)
    assert isinstance(progress, PlainProgress)
    progress.set_total(2)
    with progress.step("TinyLM: compile V2"):
        pass
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[1/2] TinyLM: compile V2 ..."
    assert lines[1].startswith("[1/2] TinyLM: compile V2 done in ")
    assert isinstance(make_progress(False, stream), NullProgress)


def test_a_module_whose_constructor_raised_is_not_recorded() -> None:
    """The ladder's L2 counts recorded roots: a half-built one (its ``__init__`` raised, the
    load path caught it) must not pass for a constructed model; its built children stay."""
    from migrate_v3.verify.archbuild import Capture, record_constructions

    class Base:
        def __init__(self) -> None:
            pass

    class Child(Base):
        def __init__(self, n: int) -> None:
            super().__init__()
            self.n = n

    class Root(Base):
        def __init__(self, fail: bool) -> None:
            super().__init__()
            self.child = Child(1)
            if fail:
                raise AttributeError("config has no quant_config")

    captures: list[Capture] = []
    with record_constructions(Base, captures):
        Root(False)
        try:
            Root(True)
        except AttributeError:
            pass
    assert [(type(c.module).__name__, c.args) for c in captures] == [
        ("Root", (False,)), ("Child", (1,)), ("Child", (1,)),
    ]


def test_a_shared_parameter_is_signed_once_by_its_first_path() -> None:
    """Tied modules list one tensor under two paths; ``Module.compile`` maps the tree with
    ``shared=True`` and names each weight by its first path (``_weight_utils.name_weights``),
    so the weights it asks for name it once: so does the ladder's/verify's V3 signature."""
    from max.experimental import functional as F
    from max.experimental.nn import Linear, Module
    from max.experimental.tensor import Tensor

    from migrate_v3.verify.sides import v3_signature

    class Tied(Module[[Tensor], Tensor]):
        def __init__(self) -> None:
            self.first = Linear(in_dim=2, out_dim=2, bias=False)
            self.again = self.first

        def forward(self, x: Tensor) -> Tensor:
            return self.again(self.first(x))

    with F.lazy():
        tied = Tied()
    assert [name for name, _ in tied.parameters] == ["first.weight", "again.weight"]
    assert list(v3_signature(tied)) == ["first.weight"]


def test_package_roots_skip_classes_built_by_a_factory_a_class_calls(tmp_path: Path) -> None:
    """A helper layer built by a module-level function that a model class calls is no root
    (qwen_image's ``_SiLUPlaceholder``, built by ``_make_block_modulation``); a class only an
    uncalled function builds, and a class nothing builds, still are."""
    import importlib.util

    from migrate_v3.verify.runner import package_roots

    path = tmp_path / "roots_pkg.py"
    path.write_text(textwrap.dedent('''
        class Helper:
            pass

        class Child:
            pass

        class Lone:
            pass

        class Made:
            pass

        def make_helper():
            return [Helper()]

        def build_made():
            return Made()

        class Model:
            def __init__(self):
                self.mod = make_helper()
                self.child = Child()
    '''))
    spec = importlib.util.spec_from_file_location("roots_pkg", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["roots_pkg"] = module
    try:
        spec.loader.exec_module(module)
        classes = {n: getattr(module, n) for n in ("Helper", "Child", "Lone", "Made", "Model")}
        assert package_roots(classes) == ["Lone", "Made", "Model"]
    finally:
        del sys.modules["roots_pkg"]
