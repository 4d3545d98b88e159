"""`apply --verify` proves the package it just wrote (issue 5, item 5)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from migrate_v3.apply_cmd import apply

TINYLM = Path(__file__).resolve().parent.parent / "fixtures" / "models" / "tinylm"


@pytest.mark.slow
def test_apply_then_verify_the_example(tmp_path: Path) -> None:
    src = tmp_path / "tinylm"
    shutil.copytree(TINYLM, src, ignore=shutil.ignore_patterns("__pycache__"))
    result = CliRunner().invoke(apply, [str(src), "--out", str(tmp_path / "out"), "--verify"])
    # verified; the exit code is 1 for tinylm's docstrings that call it V2 (MV304 TODOs)
    assert result.exit_code == 1, result.output
    assert "3 TODOs (MV304×3)" in result.output
    assert "TinyLM" in result.output and "pass" in result.output
