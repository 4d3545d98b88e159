"""Bad input gets one clear line on stderr each; everything readable is still checked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from migrate_v3 import check
from migrate_v3.cli import main

GOOD = "from max.nn import Linear\n"


def run(*args: str) -> tuple[int, str, list[str]]:
    result = CliRunner().invoke(main, ["check", "--no-cache", *args])
    return result.exit_code, result.stdout, result.stderr.splitlines()


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.py").write_text(GOOD)
    return tmp_path


def test_unparsable_file(tree: Path) -> None:
    (tree / "bad.py").write_text("from max.nn import Linear\ndef f(:\n")
    code, out, err = run(".")
    assert code == 2
    assert err == ["migrate-v3: error: bad.py: syntax error at line 2: invalid syntax"]
    assert "good.py:1:20: MV310" in out


def test_non_utf8_file(tree: Path) -> None:
    (tree / "latin.py").write_bytes(b"x = '\xe9'\n")
    code, out, err = run(".")
    assert code == 2
    assert err == ["migrate-v3: error: latin.py: not valid utf-8: byte 0xe9 at offset 5"]
    assert "good.py:1:20" in out


def test_coding_cookie_is_honoured(tree: Path) -> None:
    (tree / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\nx = '\xe9'\n")
    code, _, err = run(".")
    assert code == 1 and err == []


def test_missing_path(tree: Path) -> None:
    code, out, err = run("nope.py", "good.py")
    assert code == 2
    assert err == ["migrate-v3: error: nope.py: no such file or directory"]
    assert "good.py:1:20" in out


def test_directory_symlink_loop(tree: Path) -> None:
    (tree / "pkg").mkdir()
    (tree / "pkg" / "mod.py").write_text(GOOD)
    os.symlink("..", tree / "pkg" / "loop")
    code, out, err = run("pkg")
    assert code == 2
    assert len(err) == 1 and err[0].startswith("migrate-v3: error: pkg/loop: symbolic link loop")
    assert "pkg/mod.py:1:20" in out


def test_unreadable_file(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tree / "secret.py").write_text(GOOD)
    real = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self.name == "secret.py":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    real_read = check.read_source

    def read_source(name: str) -> bytes:
        if name.endswith("secret.py"):
            raise PermissionError(13, "Permission denied", name)
        return real_read(name)

    # As root, permission bits do not stop a read: fail the read itself (check
    # reads through read_source; the cache path through Path).
    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    monkeypatch.setattr(check, "read_source", read_source)
    code, out, err = run(".")
    assert code == 2
    assert err == ["migrate-v3: error: secret.py: Permission denied"]
    assert "good.py:1:20" in out


def test_no_syntax_check_still_reports_findings(tree: Path) -> None:
    (tree / "bad.py").write_text("from max.nn import Linear\ndef f(:\n")
    code, out, err = run("--no-syntax-check", ".")
    assert code == 1 and err == []
    assert "bad.py:1:20: MV310" in out


def test_scanner_failure_is_one_error_line_and_the_run_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file the scanner itself trips on is reported like an unreadable one; the rest is checked."""
    import migrate_v3.classify as classify

    real = classify.scan_raw

    def flaky(text: str):  # type: ignore[no-untyped-def]
        if "TRIP" in text:
            raise KeyError("boom")
        return real(text)

    monkeypatch.setattr(classify, "scan_raw", flaky)
    (tmp_path / "a.py").write_text("from max.nn import Linear  # TRIP\n")
    (tmp_path / "b.py").write_text("from max.nn import Linear\n")
    result = CliRunner().invoke(main, ["check", "--no-cache", "-j", "1", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "a.py" in result.stderr and "KeyError" in result.stderr
    assert "b.py:1:" in result.stdout


def test_read_source_reads_whole_files_whatever_their_reported_size(tmp_path: Path) -> None:
    from migrate_v3.classify import read_source

    (tmp_path / "empty.py").write_bytes(b"")
    (tmp_path / "big.py").write_bytes(b"x = 1\n" * 100_000)
    assert read_source(str(tmp_path / "empty.py")) == b""
    assert read_source(str(tmp_path / "big.py")) == b"x = 1\n" * 100_000
    # procfs reports size 0 for files that have content: the read goes on to the end.
    assert read_source("/proc/self/status").startswith(b"Name:")
    with open("/proc/self/maps", "rb") as f:  # procfs hands it over a page at a time
        assert len(read_source("/proc/self/maps")) > 4096 and len(f.read()) > 4096
    with pytest.raises(FileNotFoundError):
        read_source(str(tmp_path / "missing.py"))
