"""Paths -> the Python files to look at, with one clear error per bad path.

Walks directories without following a symlink back into one of its own
ancestors (a loop), skips the usual tool and environment folders, and applies
``--exclude`` globs to paths relative to the argument they came from.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".tox", ".nox", ".mypy_cache",
    ".ruff_cache", ".pytest_cache", ".migrate_v3_cache", "node_modules", "build", "dist",
    "*.egg-info",
)


@dataclass
class Discovery:
    files: list[Path] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)


def _excluded(rel: str, name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(rel, p) for p in patterns)


def discover(paths: Iterable[str | Path], exclude: Iterable[str] = ()) -> Discovery:
    """Expand files and directories into .py files (sorted, deduplicated)."""
    result = Discovery()
    patterns = tuple(exclude)
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if not os.path.lexists(path):
            result.errors.append((str(path), "no such file or directory"))
            continue
        if path.is_dir():
            for f in _walk(path, patterns, DEFAULT_EXCLUDES, result):
                if f not in seen:
                    seen.add(f)
                    result.files.append(f)
        elif not path.exists():
            result.errors.append((str(path), "broken symbolic link"))
        elif _excluded(path.as_posix(), path.name, patterns):
            continue
        elif path not in seen:
            seen.add(path)
            result.files.append(path)
    return result


def _walk(root: Path, patterns: tuple[str, ...], defaults: tuple[str, ...], result: Discovery) -> Iterator[Path]:
    ancestors: list[str] = []

    def visit(directory: Path) -> Iterator[Path]:
        real = os.path.realpath(directory)
        if real in ancestors:
            result.errors.append((str(directory), f"symbolic link loop (points back to {real})"))
            return
        ancestors.append(real)
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            result.errors.append((str(directory), exc.strerror or str(exc)))
            ancestors.pop()
            return
        prefix = len(str(root)) + 1
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError as exc:
                result.errors.append((entry.path, exc.strerror or str(exc)))
                continue
            if not is_dir and not entry.name.endswith((".py", ".pyi")):
                continue
            child = Path(entry.path)
            rel = entry.path[prefix:]
            if is_dir:
                if _excluded(rel, entry.name, defaults + patterns):
                    continue
                if entry.is_symlink():
                    target = os.path.realpath(child)
                    if real == target or real.startswith(target + os.sep):
                        result.errors.append((str(child), f"symbolic link loop (points back to {target})"))
                        continue
                yield from visit(child)
            else:
                if patterns and _excluded(rel, entry.name, patterns):
                    continue
                if entry.is_symlink() and not child.exists():
                    result.errors.append((str(child), "broken symbolic link"))
                    continue
                yield child
        ancestors.pop()

    yield from visit(root)
