"""``apply`` on input it cannot migrate: one error line each, nothing written for it, exit 2.

Every Python file ``apply`` writes must parse with CPython's grammar whatever
path it took through the pipeline (a file no codemod touches, the
import-statement path, libcst accepting what CPython rejects), and the V2
source is never modified.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from migrate_v3.apply import apply_paths
from migrate_v3.apply_cmd import apply
from migrate_v3.cli import main

V2 = "from max.nn import Linear\n\nx = Linear(2, 3, None, None, has_bias=True)\n"


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def parses(data: bytes) -> bool:
    try:
        compile(data, "<output>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def run(*args: str) -> tuple[int, str, list[str]]:
    result = CliRunner().invoke(apply, list(args))
    return result.exit_code, result.stdout, [line for line in result.stderr.splitlines() if line]


@pytest.fixture
def pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "good.py").write_text(V2)
    return root


# The bad files: what each holds, and check's error line for it (apply prints the same).
BAD = {
    # a V2 file that does not parse: libcst reports another line (8:9 here) than CPython (6)
    "syntax.py": (b"from max.nn import Linear\n\n\n\n\ndef f(x:\n    pass\n\n\nx = 1\n", "syntax error at line 6: '(' was never closed"),
    # binary content named .py
    "binary.py": (b"\x00\x01\xff\xfe\x89PNG\r\n", "not valid utf-8: byte 0xff at offset 2"),
    # a bad encoding: Latin-1 bytes without a coding cookie
    "latin.py": (b"from max.nn import Linear\nname = '\xe9'\n", "not valid utf-8: byte 0xe9 at offset 34"),
    # a neutral file (no codemod touches it: the text prefilter never parses it) that does not parse
    "neutral.py": (b"def helper(:\n    return 1\n", "syntax error at line 1: invalid syntax"),
    # V2 code libcst parses and rewrites but CPython's grammar rejects
    "lenient.py": (V2.encode() + b"del f()\n", "syntax error at line 4: cannot delete function call"),
}


def test_bad_files_get_one_line_each_and_nothing_written(pkg: Path) -> None:
    for name, (data, _) in BAD.items():
        (pkg / name).write_bytes(data)
    before = digest(pkg)
    code, out, err = run("pkg", "--report", "r.json")
    assert code == 2
    assert sorted(err) == sorted(f"error: pkg/{name}: {reason}" for name, (_, reason) in BAD.items())
    target = pkg.parent / "pkg_modulev3"
    assert sorted(p.name for p in target.iterdir()) == ["__init__.py", "good.py"]
    assert "max.experimental.nn import Linear" in (target / "good.py").read_text()
    assert out.splitlines()[-2] == f"Wrote pkg_modulev3: 2 files, 1 changed, 0 TODOs; {len(BAD)} errors."
    assert digest(pkg) == before
    data = json.loads(Path("r.json").read_text())
    assert data["error_count"] == len(BAD)
    failed = {Path(f["source"]).name: f for f in data["files"] if f["error"]}
    assert sorted(failed) == sorted(BAD) and all(f["dest"] == "" for f in failed.values())
    run("pkg", "--force", "--report", "r.md")
    assert f"errors: {len(BAD)}" in Path("r.md").read_text()


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_single_file_writes_nothing(pkg: Path, name: str) -> None:
    data, reason = BAD[name]
    (pkg / name).write_bytes(data)
    code, out, err = run(f"pkg/{name}")
    assert code == 2
    assert err == [f"error: pkg/{name}: {reason}"]
    assert not list(pkg.glob("*_modulev3*")) and not list(pkg.glob(".migrate-v3-*"))
    assert (pkg / name).read_bytes() == data
    assert out.splitlines()[-1] == "Nothing written; 1 error."


@pytest.mark.parametrize("name", ["syntax.py", "binary.py", "latin.py"])
def test_apply_and_check_print_the_same_error(pkg: Path, name: str) -> None:
    """Same line number (CPython's), same words: only check's prefix differs."""
    (pkg / name).write_bytes(BAD[name][0])
    checked = CliRunner().invoke(main, ["check", "--no-cache", f"pkg/{name}"])
    _, _, err = run(f"pkg/{name}")
    assert checked.exit_code == 2
    assert checked.stderr.splitlines() == [line.replace("error: ", "migrate-v3: error: ", 1) for line in err]


def test_written_output_is_proven_to_parse_on_every_path(pkg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A codemod that breaks a file: the file is reported (an internal error) and not written."""
    import migrate_v3.apply as apply_mod
    from migrate_v3.pipeline import transform_source

    def broken(source: str, **kwargs: object):  # type: ignore[no-untyped-def]
        result = transform_source(source, **kwargs)  # type: ignore[arg-type]
        result.code += "def (:\n"
        return result

    monkeypatch.setattr(apply_mod, "transform_source", broken)
    report = apply_paths([Path("pkg")])
    assert report.exit_code == 2
    assert sorted(f.error for f in report.files if f.error) == [
        "pkg/__init__.py: internal error: the migrated code does not parse (syntax error at line 1: invalid syntax)",
        "pkg/good.py: internal error: the migrated code does not parse (syntax error at line 4: invalid syntax)",
    ]
    out = pkg.parent / "pkg_modulev3"
    assert not out.exists() or not list(out.rglob("*.py"))


def test_encodings_are_kept(pkg: Path) -> None:
    """A coding cookie or a BOM: decoded as Python does; the output is written in the same encoding."""
    (pkg / "cookie.py").write_bytes(b"# -*- coding: latin-1 -*-\n" + V2.encode() + b"name = '\xe9'\n")
    (pkg / "bom.py").write_bytes(b"\xef\xbb\xbf" + V2.replace("\n", "\r\n").encode())
    code, _, err = run("pkg")
    assert code == 0 and err == []
    target = pkg.parent / "pkg_modulev3"
    cookie = (target / "cookie.py").read_bytes()
    assert b"max.experimental.nn" in cookie and b"name = '\xe9'" in cookie and parses(cookie)
    bom = (target / "bom.py").read_bytes()
    assert bom.startswith(b"\xef\xbb\xbffrom max.experimental.nn import Linear\r\n") and parses(bom)
