"""The cheap syntax test of `check` decides exactly as parsing with ast does."""

from __future__ import annotations

import ast
import os
import py_compile
from pathlib import Path

import pytest

from migrate_v3.check import run_check
from migrate_v3.classify import compiled_by_python
from migrate_v3.config import Settings
from migrate_v3.scan import syntax_error

SOURCES = [
    "x = 1\n",
    "def f(:\n",
    "nonlocal x\n",  # the symbol table rejects it, ast does not: no error, as before
    "def f():\n    yield = 1\n",
    "x = (\n",
    "class A:\n  def f(self):\n\treturn 1\n",
    "x = '\u00e9'\n",
    "async def f():\n    await x\n",
    "f(**x, *y)\n",
    "x = 1\x00\n",
    "def f():\n    global x\n    x = 1\n    global x\n",
]


def _ast_error(text: str) -> str | None:
    try:
        compile(text, "m.py", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return f"syntax error at line {exc.lineno}: {exc.msg}"
    except ValueError as exc:
        return f"cannot parse: {exc}"
    return None


@pytest.mark.parametrize("text", SOURCES)
def test_same_verdict_and_message_as_ast(text: str) -> None:
    assert syntax_error(text, "m.py") == _ast_error(text)


def test_a_valid_pyc_proves_the_source_compiles(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("x = 1\n")
    assert not compiled_by_python(str(src), src.read_bytes())  # no pyc yet
    py_compile.compile(str(src), doraise=True)
    assert compiled_by_python(str(src), src.read_bytes())
    src.write_text("x = (\n")  # same size, written after the pyc: stale
    assert not compiled_by_python(str(src), src.read_bytes())


def test_hash_based_pycs_compare_the_bytes(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("x = 1\n")
    py_compile.compile(str(src), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    assert compiled_by_python(str(src), b"x = 1\n")
    assert not compiled_by_python(str(src), b"x = (\n")


def test_stubs_and_missing_files_are_parsed(tmp_path: Path) -> None:
    stub = tmp_path / "m.pyi"
    stub.write_text("x: int\n")
    assert not compiled_by_python(str(stub), stub.read_bytes())
    assert not compiled_by_python(str(tmp_path / "gone.py"), b"")


def test_unparsable_file_without_pyc_is_an_error_beside_compiled_ones(tmp_path: Path) -> None:
    good = tmp_path / "good.py"
    good.write_text("from max.nn import Linear\n")
    py_compile.compile(str(good), doraise=True)
    bad = tmp_path / "bad.py"
    bad.write_text("from max.nn import Linear\ndef f(:\n")
    report = run_check([tmp_path], Settings(cache=False, root=tmp_path))
    assert report.errors == [(str(bad), "syntax error at line 2: invalid syntax")]
    assert [f.path for f in report.files] == [str(good)]
    quiet = run_check([tmp_path], Settings(cache=False, root=tmp_path, syntax=False))
    assert quiet.errors == [] and len(quiet.files) == 2


@pytest.mark.skipif(os.name != "posix", reason="mtime resolution")
def test_pyc_older_than_its_source_proves_nothing(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("x = 1\n")
    pyc = Path(py_compile.compile(str(src), doraise=True))
    stat = src.stat()
    os.utime(pyc, ns=(stat.st_atime_ns, stat.st_mtime_ns - 1))
    assert not compiled_by_python(str(src), src.read_bytes())
