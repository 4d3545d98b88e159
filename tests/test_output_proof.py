"""``apply`` proves every file it writes parses; a rewrite whose last pass parsed the text says so.

``Residual`` parses the rewritten code with ``ast`` and puts its TODO lines
above it; when each of those lines lands above a line where a statement
begins (and not after a backslash), the tokens are the same, so the text
written needs no second parse. These tests hold that claim against CPython's
own parser on every fixture and on texts built to break it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import migrate_v3.pipeline as pipeline
from codemods.residual import residual_notes_parsed
from migrate_v3.scan import syntax_error

ROOT = Path(__file__).resolve().parent.parent
CASES = sorted((ROOT / "fixtures").rglob("*.input.py"))

V2_LEFT = "from max.graph import ops\n\n\ndef f(a, b):\n{body}    return x\n"


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def test_every_text_said_parsed_parses() -> None:
    said = 0
    for case in CASES:
        try:
            result = pipeline.transform_source(case.read_text(), path=str(case))
        except pipeline.TransformError:
            continue
        if result.parsed:
            said += 1
            assert syntax_error(result.code, str(case)) is None, case
    assert said >= 20  # the claim is made (else apply proves every file twice, silently)


def test_a_note_above_a_statement_keeps_the_proof() -> None:
    code = V2_LEFT.format(body="    x = ops.matmul(a, b)\n")
    out, parsed = residual_notes_parsed(code)
    assert "TODO(migrate-v3): MV370" in out and parsed and _parses(out)


def test_a_note_after_a_backslash_does_not_claim_it() -> None:
    """A comment line after a continuation joins the line before it: not claimed (apply's
    own proof decides; CPython happens to accept this one)."""
    code = V2_LEFT.format(body="    y = 1; \\\n    x = ops.matmul(a, b)\n")
    out, parsed = residual_notes_parsed(code)
    assert "TODO(migrate-v3): MV370" in out and not parsed
    assert syntax_error(out, "<b>") is None


def test_no_finding_no_parse_no_claim() -> None:
    out, parsed = residual_notes_parsed("x = 1\n", prose=False)
    assert out == "x = 1\n" and not parsed


def test_apply_skips_only_the_proven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """apply proves a file itself unless the rewrite parsed that very text."""
    import migrate_v3.apply as apply

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    # a: a star import stays, with a note Residual parsed; b: migrated, nothing left to note
    (pkg / "a.py").write_text((ROOT / "fixtures" / "imports" / "star.input.py").read_text())
    (pkg / "b.py").write_text((ROOT / "fixtures" / "imports" / "legacy.input.py").read_text())
    proved: list[str] = []
    real = apply._parse_problem

    def spy(data: bytes, path: str) -> str | None:
        proved.append(Path(path).name)
        return real(data, path)

    monkeypatch.setattr(apply, "_parse_problem", spy)
    report = apply.apply_paths([pkg], jobs=1)
    assert "a.py" not in proved and "b.py" in proved
    assert not report.error_lines and {Path(f.source).name for f in report.files if f.changed} == {"a.py", "b.py"}
