"""The package stays ruff-clean and mypy-clean (the brief asks for both)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_ruff_clean() -> None:
    # (this interpreter's ruff, whether or not its venv is on PATH)
    if importlib.util.find_spec("ruff") is None:
        pytest.fail("ruff is not installed (it is in the dev extra)")
    proc = _run(sys.executable, "-m", "ruff", "check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_mypy_clean() -> None:
    proc = _run(sys.executable, "-m", "mypy")
    assert proc.returncode == 0, proc.stdout + proc.stderr
