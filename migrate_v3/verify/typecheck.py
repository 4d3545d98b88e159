"""mypy over both sides: V3 type errors counted against V2's own count.

The ``Module[[...], ...]`` signatures of a V3 port turn many migration
mistakes into type errors (migration-guide step 10); counting against the
V2 baseline keeps errors the source already had from failing the port.
max 26.7 ships no ``py.typed``, so without ``--follow-untyped-imports``
every max name is ``Any`` and mypy sees nothing (measured: a ``TensorValue``
annotation left in ``forward()`` gave 0 errors without it, 2 with it).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from migrate_v3.verify.report import MypyFile, MypyResult

_LINE = re.compile(r"^(?P<path>[^:\n]+\.py):\d+(?::\d+)?: error: (?P<msg>.*)$")


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts)


def _follows_untyped() -> list[str]:
    """``--follow-untyped-imports`` where mypy has it (1.14+)."""
    try:
        from mypy.version import __version__
    except ImportError:
        return []
    major, minor = (int(p) for p in re.findall(r"\d+", __version__)[:2])
    return ["--follow-untyped-imports"] if (major, minor) >= (1, 14) else []


def start_mypy(path: Path, cache_dir: Path | None = None) -> subprocess.Popen[str]:
    """Start mypy in the background; :func:`finish_mypy` collects it."""
    path = path.resolve()
    cmd = [
        sys.executable, "-m", "mypy", "--no-error-summary", "--show-error-codes",
        "--ignore-missing-imports", "--follow-imports=silent", "--no-color-output",
        *_follows_untyped(),
        "--explicit-package-bases", "--python-version", f"{sys.version_info.major}.{sys.version_info.minor}",
    ]
    if cache_dir is not None:
        cmd += ["--cache-dir", str(cache_dir)]
    cmd += [str(p) for p in _files(path)]
    base = path if path.is_dir() else path.parent
    return subprocess.Popen(
        cmd, cwd=base.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish_mypy(proc: subprocess.Popen[str]) -> tuple[Counter[str], list[str], str]:
    out, err = proc.communicate()
    if proc.returncode not in (0, 1):
        return Counter(), [], (err or out).strip()[:500]
    counts: Counter[str] = Counter()
    messages: list[str] = []
    for line in out.splitlines():
        match = _LINE.match(line.strip())
        if match:
            counts[match["path"]] += 1
            messages.append(line.strip())
    return counts, messages, ""


MypyJob = tuple["subprocess.Popen[str]", "subprocess.Popen[str]"]


def start_both(v2_path: Path, v3_path: Path, cache_dir: Path | None = None) -> MypyJob:
    """Start both sides now (they overlap with compiling); collect later."""
    return (
        start_mypy(v2_path, cache_dir / "v2" if cache_dir else None),
        start_mypy(v3_path, cache_dir / "v3" if cache_dir else None),
    )


def collect(job: MypyJob) -> MypyResult:
    """Per-file counts for both sides, messages for V3."""
    c2, _, e2 = finish_mypy(job[0])
    c3, m3, e3 = finish_mypy(job[1])
    return MypyResult(
        v2_errors=sum(c2.values()),
        v3_errors=sum(c3.values()),
        v2_files=[MypyFile(p, n) for p, n in sorted(c2.items())],
        v3_files=[MypyFile(p, n) for p, n in sorted(c3.items())],
        messages=m3,
        error=e2 or e3,
    )


def run_mypy(v2_path: Path, v3_path: Path, cache_dir: Path | None = None) -> MypyResult:
    return collect(start_both(v2_path, v3_path, cache_dir))
