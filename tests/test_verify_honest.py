"""verify never reports success for what it did not verify (issue 14).

* a verdict resting on skipped classes is not a pass: exit 3 when the
  package's root model or most classes were not compared, and the last line
  says how many were;
* a real package (umt5) verifies its root model without a hand-written spec:
  the config comes from the tiny-config module;
* a V3 class that is still a V2 module is a named failure, not "no V3 class
  of this name";
* README documents the spec format (and its example loads);
* every long step runs inside the progress display; one compiled graph per
  distinct class/config.

Nothing here compiles a graph.
"""

from __future__ import annotations

import io
import re
import shutil
import time
from pathlib import Path

import pytest

from migrate_v3.apply import apply_paths
from migrate_v3.verify import run_verify
from migrate_v3.verify.report import EXIT_NOT_VERIFIED, ClassResult, VerifyReport

ROOT = Path(__file__).resolve().parent.parent
V2 = ROOT / "fixtures" / "models" / "tinylm"
V3 = ROOT / "fixtures" / "verify" / "tinylm_v3"


def _report(roots: list[str], *classes: ClassResult) -> VerifyReport:
    return VerifyReport("a", "b", "cpu", list(classes), roots=roots)


def _passed(name: str, how: str = "numeric") -> ClassResult:
    return ClassResult(name, "pass", compared=how)  # type: ignore[arg-type]


def test_a_verdict_resting_on_skipped_classes_is_not_a_pass() -> None:
    # umt5 before: one layer-norm passed, seven classes (the root among them) skipped: was exit 0
    skipped = [ClassResult(f"C{i}", "skipped", "constructor parameter 'config' ...") for i in range(6)]
    report = _report(["Root"], _passed("Norm"), *skipped, ClassResult("Root", "skipped", "why"))
    assert report.exit_code == EXIT_NOT_VERIFIED == 3
    cov = report.coverage
    assert (cov["compared"], cov["classes"], cov["roots_not_compared"]) == (1, 8, ["Root"])
    # the root compared, but most classes not: still not verified
    most = _report(["Root"], _passed("Root"), *skipped)
    assert most.exit_code == 3
    # children that run inside the compared root's graph count as compared
    covered = [ClassResult(f"C{i}", "skipped", "covered", covered_by="Root") for i in range(6)]
    assert _report(["Root"], _passed("Root"), *covered).exit_code == 0
    # --only leaves classes out on purpose: they do not count
    chosen = _report(["Root"], _passed("Norm"), ClassResult("Root", "skipped", "not selected", selected=False))
    assert chosen.exit_code == 0
    # a mismatch still wins; nothing compared at all is "could not run"
    assert _report(["Root"], ClassResult("Root", "fail", compared="static"), *skipped).exit_code == 1
    assert _report(["Root"], ClassResult("Root", "skipped", "why")).exit_code == 2


def test_the_last_line_says_what_was_compared() -> None:
    from migrate_v3.verify.render import render_text

    report = _report(["Root"], _passed("Norm", "static"), ClassResult("Root", "skipped", "why"))
    out = io.StringIO()
    render_text(report, out)
    text = " ".join(out.getvalue().split())
    assert "compared 1 of 2 classes by keys and hyper-parameters (not compiled)" in text
    assert "root model not compared: Root" in text and "NOT VERIFIED (exit 3)" in text
    # a compiling run: keys alone do not verify a class
    compiling = VerifyReport("a", "b", "cpu", [_passed("Norm"), _passed("Root", "static")], roots=["Root"],
                             compile_requested=True)
    out = io.StringIO()
    render_text(compiling, out)
    text = " ".join(out.getvalue().split())
    assert "compared 1 of 2 classes numerically; 1 only by keys and hyper-parameters (no inputs)" in text
    assert compiling.exit_code == 3


def _migrated(name: str, tmp_path: Path) -> tuple[Path, Path]:
    import max.pipelines.architectures as archs

    src = tmp_path / name
    shutil.copytree(Path(archs.__file__).parent / name, src, ignore=shutil.ignore_patterns("__pycache__"))
    report = apply_paths([src])
    assert not report.errors
    return src, tmp_path / f"{name}_modulev3"


def test_umt5_without_a_spec_compares_its_root_model(tmp_path: Path) -> None:
    """Before: exit 0, "all pass", 7 of 8 classes skipped (no case for their config)."""
    v2, v3 = _migrated("umt5", tmp_path)
    report = run_verify(v2, v3, compile=False, mypy=False)
    assert not report.compile_requested
    assert "UMT5EncoderModel" in report.roots
    root = report.by_name("UMT5EncoderModel")
    assert report.is_compared(root) and root.compared == "static", root
    assert root.alignment is not None and root.alignment.checkpoint_keys > 0
    # the config it was built from is the package's own, shrunk from transformers' UMT5Config
    assert report.coverage["compared"] > report.coverage["classes"] // 2
    assert report.exit_code == (1 if any(c.status == "fail" for c in report.classes) else 0)


V2_SRC = '''
from max.graph import TensorValue
from max.nn import Module

class Foo(Module):
    def __init__(self) -> None:
        super().__init__()

    def __call__(self, x: TensorValue) -> TensorValue:
        return x
'''


def test_a_v3_class_still_on_a_v2_base_is_named_not_missing(tmp_path: Path) -> None:
    """Before: "Foo: no V3 class of this name" (skipped, exit 2) though the V3 file defines Foo."""
    (tmp_path / "v2").mkdir()
    (tmp_path / "v3").mkdir()
    (tmp_path / "v2" / "m.py").write_text(V2_SRC)
    (tmp_path / "v3" / "m.py").write_text(V2_SRC)  # "migrated" but still a max.nn Module
    report = run_verify(tmp_path / "v2", tmp_path / "v3", compile=False, mypy=False)
    foo = report.by_name("Foo")
    assert foo.status == "fail", foo
    assert re.search(r"the V3 side defines Foo \(m\.py:5\) but it is still a V2 module: it extends "
                     r"max\.nn\.layer\.layer\.Module", foo.reason), foo.reason
    assert report.exit_code == 1


def _readme_section(title: str) -> str:
    text = (ROOT / "README.md").read_text()
    return text.split(f"### {title}\n", 1)[1].split("\n## ", 1)[0]


def test_readme_says_how_to_write_a_spec_and_its_examples_load(tmp_path: Path) -> None:
    from migrate_v3.verify.spec import load_spec

    section = _readme_section("Writing a spec")
    (python,) = re.findall(r"```python\n(.+?)```", section, re.S)
    (toml,) = re.findall(r"```toml\n(.+?)```", section, re.S)
    spec_py = tmp_path / "spec.py"
    spec_py.write_text(python.replace("MyConfig(", "dict("))
    spec = load_spec(spec_py)
    assert set(spec.cases) == {"MyModel", "MyMLP"} and spec.pairs == {"OldName": "NewName"}
    assert spec.only == ["MyModel"] and spec.dtype == "bfloat16"
    (tmp_path / "pyproject.toml").write_text(toml)
    from_toml = load_spec(tmp_path / "pyproject.toml")
    assert from_toml.only == ["MyMLP"] and from_toml.cases["MyMLP"].args == [16, 32]
    verify = (ROOT / "README.md").read_text().split("\n## verify\n", 1)[1].split("\n## ", 1)[0]
    assert "**3** nothing failed but the package is\n**not verified**" in verify


class _Recorder:
    """A Progress that records which step each call happened in."""

    def __init__(self) -> None:
        self.active: list[str] = []
        self.labels: list[str] = []

    def set_total(self, total: int) -> None:
        pass

    def step(self, label: str, counted: bool = True):  # type: ignore[no-untyped-def]
        import contextlib

        @contextlib.contextmanager
        def cm():  # type: ignore[no-untyped-def]
            self.active.append(label)
            self.labels.append(label)
            try:
                yield
            finally:
                self.active.pop()

        return cm()

    def close(self) -> None:
        pass


def test_compiles_imports_and_the_mypy_wait_run_inside_progress_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from migrate_v3.verify import runner, sides, typecheck

    recorder = _Recorder()
    seen: dict[str, str] = {}

    def fake(side: str):  # type: ignore[no-untyped-def]
        def compile_side(*args, **kwargs):  # type: ignore[no-untyped-def]
            seen[side] = recorder.active[-1] if recorder.active else ""
            return lambda inputs: [(np.zeros((2, 64), np.float32), "float32")]

        return compile_side

    def collect(job):  # type: ignore[no-untyped-def]
        seen["mypy"] = recorder.active[-1] if recorder.active else ""
        return typecheck.MypyResult(0, 0)

    monkeypatch.setattr(runner, "make_progress", lambda enabled: recorder)
    monkeypatch.setattr(sides, "compile_v2", fake("v2"))
    monkeypatch.setattr(sides, "compile_v3", fake("v3"))
    monkeypatch.setattr(typecheck, "start_both", lambda *a, **k: "job")
    monkeypatch.setattr(typecheck, "collect", collect)
    report = run_verify(V2, V3, only=["TinyLM"])
    assert seen == {"v2": "TinyLM: compile V2", "v3": "TinyLM: compile V3",
                    "mypy": "waiting for mypy (both sides)"}, (seen, recorder.labels)
    assert "importing both sides" in recorder.labels
    assert report.graphs_compiled == 2


def test_plain_progress_says_a_long_step_is_still_running() -> None:
    from migrate_v3.verify.progress import PlainProgress

    out = io.StringIO()
    progress = PlainProgress(out, heartbeat=0.05)
    progress.set_total(1)
    with progress.step("TinyLM: compile V2"):
        time.sleep(0.3)
    lines = out.getvalue().splitlines()
    assert lines[0] == "[1/1] TinyLM: compile V2 ..."
    assert any("TinyLM: compile V2: still running" in line for line in lines[1:-1])
    assert lines[-1].startswith("[1/1] TinyLM: compile V2 done in ")


def test_one_compiled_graph_per_distinct_class_and_config() -> None:
    import numpy as np

    from migrate_v3.verify.runner import _compiled, compile_key
    from migrate_v3.verify.spec import Case, Input

    class Cls:
        pass

    weights = {"w": np.zeros((4, 4), np.float32)}
    case = Case(inputs=[Input((2, 4))], kwargs={"hidden": 4})
    same = Case(inputs=[Input((2, 4))], kwargs={"hidden": 4})
    other = Case(inputs=[Input((2, 4))], kwargs={"hidden": 8})
    cache: dict[object, object] = {}
    made: list[int] = []

    def make() -> object:
        made.append(1)
        return object()

    first, fresh = _compiled(cache, compile_key("v3", Cls, case, ["t"], weights), make)
    again, fresh_again = _compiled(cache, compile_key("v3", Cls, same, ["t"], dict(weights)), make)
    assert fresh and not fresh_again and again is first and len(made) == 1
    _compiled(cache, compile_key("v3", Cls, other, ["t"], weights), make)
    _compiled(cache, compile_key("v2", Cls, case, ["t"], weights), make)
    assert len(made) == 3
