"""The content-hash cache: a second run reads no file twice; a changed file is checked again."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrate_v3 import check as check_module
from migrate_v3.check import run_check
from migrate_v3.config import Settings


def test_second_run_uses_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "m.py"
    src.write_text("from max.nn import Linear\n")
    settings = Settings(root=tmp_path)
    first = run_check([src], settings)
    assert (tmp_path / ".migrate_v3_cache" / "check.marshal").is_file()

    def boom(*args: object, **kwargs: object) -> object:
        raise AssertionError("classified again despite an unchanged file")

    monkeypatch.setattr(check_module, "classify_bytes", boom)
    second = run_check([src], settings)
    assert [f.findings for f in second.files] == [f.findings for f in first.files]

    src.write_text("from max.nn import Linear, LayerList\n")
    with pytest.raises(AssertionError, match="classified again"):
        run_check([src], settings)


def test_no_cache_writes_nothing(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("x = 1\n")
    run_check([src], Settings(root=tmp_path, cache=False))
    assert not (tmp_path / ".migrate_v3_cache").exists()


def test_corrupt_cache_is_ignored(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("from max.nn import Linear\n")
    (tmp_path / ".migrate_v3_cache").mkdir()
    (tmp_path / ".migrate_v3_cache" / "check.marshal").write_bytes(b"garbage")
    report = run_check([src], Settings(root=tmp_path))
    assert report.files[0].kind == "v2"
