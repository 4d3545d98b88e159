"""The fast paths of `check` produce exactly what the plain ones do (no timings here)."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from migrate_v3 import report
from migrate_v3.check import CheckReport, run_check
from migrate_v3.cli import _parse_check
from migrate_v3.config import Settings
from migrate_v3.findings import FileResult, Finding

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "check"


@pytest.fixture(scope="module")
def fixture_report() -> CheckReport:
    return run_check([FIXTURES], Settings(cache=False, root=FIXTURES))


def _plain_json(rep: CheckReport) -> str:
    data = {
        "tool": "migrate-v3",
        "version": report.__version__,
        "summary": report.summary(rep),
        "files": [f.to_json() for f in rep.files],
        "errors": [{"path": p, "error": e} for p, e in rep.errors],
    }
    return json.dumps(data, indent=1) + "\n"


def test_json_is_json_dump_of_to_json(fixture_report: CheckReport) -> None:
    assert any(f.findings for f in fixture_report.files)
    out = io.StringIO()
    report.write_json(fixture_report, out)
    assert out.getvalue() == _plain_json(fixture_report)


def test_odd_values_still_match_json_dump() -> None:
    rep = CheckReport(files=[
        FileResult('we"ird\\path\u00e9.py', "v2", None, [Finding(3, 1, "MV310", "50% of {x} \u2192 \"y\"\n")]),
        FileResult("empty.py", "neutral"),
    ], errors=[("bad.py", "syntax error at line 1: invalid syntax")])
    out = io.StringIO()
    report.write_json(rep, out)
    assert out.getvalue() == _plain_json(rep)
    sarif = io.StringIO()
    report.write_sarif(rep, sarif)
    data = json.loads(sarif.getvalue())
    assert data["runs"][0]["results"][0]["message"]["text"] == "50% of {x} \u2192 \"y\"\n"
    assert sarif.getvalue() == json.dumps(data, indent=1) + "\n"


def test_dumps_matches_json_on_random_values() -> None:
    from json.encoder import encode_basestring_ascii

    rng = random.Random(7)
    leaves = [None, True, False, 0, -5, 10**20, 1.5, float("nan"), float("inf"), "", "a\"b\\c\n\u00e9\U0001f600", "%s"]

    def value(depth: int = 0) -> object:
        r = rng.random()
        if depth > 3 or r < 0.3:
            return rng.choice(leaves)
        if r < 0.6:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        return {f"k{i}%": value(depth + 1) for i in range(rng.randint(0, 3))}

    for _ in range(2000):
        v = value()
        assert report._dumps(v, encode_basestring_ascii) == json.dumps(v, indent=1)


def test_sarif_results_match_a_plain_rendering(fixture_report: CheckReport) -> None:
    out = io.StringIO()
    report.write_sarif(fixture_report, out)
    data = json.loads(out.getvalue())
    assert out.getvalue() == json.dumps(data, indent=1) + "\n"
    results = data["runs"][0]["results"]
    findings = [(f.path, x) for f in fixture_report.files for x in f.findings]
    assert len(results) == len(findings)
    rules = [r["id"] for r in data["runs"][0]["tool"]["driver"]["rules"]]
    for result, (path, x) in zip(results, findings, strict=True):
        assert result["ruleId"] == x.code and rules[result["ruleIndex"]] == x.code
        assert result["level"] == ("error" if x.fix.value == "manual" else "warning")
        assert result["message"] == {"text": x.message}
        assert result["locations"] == [{"physicalLocation": {
            "artifactLocation": {"uri": path}, "region": {"startLine": x.line, "startColumn": x.col}}}]


@pytest.mark.parametrize("args", [
    ["check", "pkg"], ["check", "-j2", "--format", "json", "pkg"], ["check", "--jobs=0", "a", "--", "-b"],
    ["check", "--select", "MV34", "--select=MV37", "--ignore", "MV371", "--exclude", "x*", "--exit-zero",
     "--no-cache", "--no-syntax-check", "a", "b"],
])
def test_fast_parse_accepts_what_click_accepts(args: list[str]) -> None:
    assert _parse_check(args) is not None


@pytest.mark.parametrize("args", [
    ["check"], ["check", "--help"], ["check", "-h", "a"], ["check", "--format", "xml", "a"], ["check", "-j=2", "a"],
    ["check", "-j", "-1", "a"], ["check", "--no-cache=1", "a"], ["check", "--select"], ["check", "--bogus", "a"],
    ["rules"], ["check", "-", "a"], ["check", ""],
])
def test_fast_parse_leaves_the_rest_to_click(args: list[str]) -> None:
    assert _parse_check(args) is None


def test_check_path_imports_neither_click_nor_rich(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("from max.nn import Linear\n")
    # With explicit arguments the fast path exits with SystemExit (the console entry
    # point, which reads sys.argv, ends the process outright: see the next test).
    code = (
        "import sys\n"
        "from migrate_v3.cli import main\n"
        "try:\n    main(['check', '--no-cache', 'm.py'])\n"
        "except SystemExit as e:\n    code = e.code\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'click', 'rich', 'libcst', 'max'})\n"
        "print('EXIT', code, 'HEAVY', bad)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "m.py:1:20: MV310" in proc.stdout
    assert proc.stdout.strip().endswith("EXIT 1 HEAVY []"), proc.stdout + proc.stderr


def test_console_entry_flushes_everything_and_keeps_the_exit_code(tmp_path: Path) -> None:
    """The entry point skips interpreter teardown (os._exit): all output must still arrive."""
    for i in range(300):
        (tmp_path / f"m{i}.py").write_text("from max.nn import Linear\n\nx = Linear(1, 2)\n")
    (tmp_path / "bad.py").write_bytes(b"\xff\xfe")
    proc = subprocess.run([sys.executable, "-m", "migrate_v3", "check", "--no-cache", "."], cwd=tmp_path,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2  # findings and an unreadable file: the error wins
    lines = proc.stdout.splitlines()
    assert len([line for line in lines if ": MV" in line]) == 600
    assert lines[-1].startswith("Checked 300 files") and "bad.py" in proc.stderr
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "ok.py").write_text("x = 1\n")
    proc = subprocess.run([sys.executable, "-m", "migrate_v3", "check", "--no-cache", "clean"], cwd=tmp_path,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0 and proc.stdout.startswith("Checked 1 files")


@pytest.mark.parametrize("extra", [[], ["--select", "MV30,MV34"], ["--ignore", "MV301"]])
def test_text_lines_made_by_workers_match_the_json_report(tmp_path: Path, extra: list[str]) -> None:
    """Workers format the plain lines; dependency findings added afterwards and
    --select/--ignore must still show, exactly as the JSON report has them."""
    import shutil

    shutil.copytree(ROOT / "fixtures" / "check_deps", tmp_path / "archs")
    # A file with findings of its own (so a worker formats its lines) and a dependency.
    (tmp_path / "archs" / "user_pkg" / "mixed.py").write_text(
        "from max.nn import Linear\n\nfrom ..base_v2.layers import Block\n\nx = Linear(1, 2)\n"
    )
    for i in range(80):  # enough files for worker processes
        (tmp_path / f"m{i}.py").write_text("from max.nn import Linear\n\nx = Linear(1, 2)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "migrate_v3", "check", "--no-cache", "-j2", *extra, *args, "."],
                              cwd=tmp_path, capture_output=True, text=True, env=env)
        assert proc.returncode == 1, proc.stderr
        return proc.stdout

    text = run().splitlines()[:-1]
    report = json.loads(run("--format", "json"))
    expected = [
        f"{f['path']}:{x['line']}:{x['col']}: {x['code']} [{x['fix']}] {x['message']}"
        for f in report["files"]
        for x in f["findings"]
    ]
    assert text == expected
    assert any(": MV301 " in line for line in text) == (extra != ["--ignore", "MV301"])
