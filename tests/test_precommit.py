"""The pre-commit hook, run by pre-commit itself on a temporary git repository."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.mark.slow
def test_hook_blocks_v2_and_passes_v3(tmp_path: Path) -> None:
    if importlib.util.find_spec("pre_commit") is None:
        pytest.fail("pre-commit is not installed (it is in the dev extra)")
    work = tmp_path / "work"
    work.mkdir()
    _git(work, "init", "-q")
    (work / "v2.py").write_text("from max.nn import Linear\n")
    (work / "v3.py").write_text("from max.experimental.nn import Linear\n")
    _git(work, "add", ".")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pc-home"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

    def hook(*files: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "try-repo", str(REPO), "migrate-v3-check", "--files", *files],
            cwd=work, env=env, capture_output=True, text=True, timeout=600,
        )

    blocked = hook("v2.py", "v3.py")
    assert blocked.returncode == 1, blocked.stdout + blocked.stderr
    assert "v2.py:1:20: MV310" in blocked.stdout
    passed = hook("v3.py")
    assert passed.returncode == 0, passed.stdout + passed.stderr
