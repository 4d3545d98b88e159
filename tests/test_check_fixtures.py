"""Each fixtures/check/<case>.py is classified and reported as its .expected.json says.

Expected findings are written as (line, token, code): the column is where the
token first occurs on that line (``token#2``: its second occurrence), so the
spec reads like the source it describes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from migrate_v3.check import run_check
from migrate_v3.classify import classify_file
from migrate_v3.config import Settings

CASES = sorted((Path(__file__).parent.parent / "fixtures" / "check").glob("*.py"))


def _column(line: str, token: str) -> int:
    token, _, nth = token.partition("#")
    pos = -1
    for _ in range(int(nth or 1)):
        pos = line.index(token, pos + 1)
    return pos + 1


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_fixture(case: Path) -> None:
    expected = json.loads(case.with_suffix(".expected.json").read_text())
    result = classify_file(case).result
    assert result.kind == expected["kind"]
    if result.kind == "error":
        assert result.error is not None and result.error.startswith(expected["error"])
        return
    assert result.release == expected["release"]
    lines = case.read_text().splitlines()
    want = sorted((ln, _column(lines[ln - 1], tok), code) for ln, tok, code in expected["findings"])
    got = sorted((f.line, f.col, f.code) for f in result.findings)
    assert got == want


def test_every_case_has_an_expectation() -> None:
    assert len(CASES) >= 14
    for case in CASES:
        assert case.with_suffix(".expected.json").is_file(), case


def test_dependency_on_another_architecture_package(fixtures: Path) -> None:
    root = fixtures / "check_deps"
    report = run_check([root], Settings(cache=False, root=root))
    by_name = {Path(f.path).relative_to(root).as_posix(): f for f in report.files}
    assert by_name["base_v2/layers.py"].kind == "v2"
    model = by_name["user_pkg/model.py"]
    assert model.kind == "v2"  # neutral on its own, but subclasses V2 code
    assert model.depends_on == ["base_v2"]
    assert [(f.line, f.code) for f in model.findings] == [(1, "MV301")]
    # a neutral module of another package is not a V2 dependency ...
    assert by_name["user_pkg/arch.py"].kind == "neutral"
    assert by_name["user_pkg/arch.py"].depends_on == []
    # ... and an import inside the same package never is.
    assert by_name["user_pkg/sub/helpers.py"].depends_on == []
    # a *_modulev3 package is not a V2 dependency: its leftovers are its own findings
    assert by_name["half_modulev3/layers.py"].kind == "mixed"
    assert [f.code for f in by_name["half_modulev3/layers.py"].findings] == ["MV310", "MV340"]
    assert by_name["next_modulev3/model.py"].depends_on == []
    assert by_name["next_modulev3/model.py"].findings == []
