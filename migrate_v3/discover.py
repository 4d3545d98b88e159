"""Paths -> the Python files to look at, with one clear error per bad path.

Walks directories without following a symlink back into one of its own
ancestors (a loop), skips the usual tool and environment folders, and applies
``--exclude`` globs to paths relative to the argument they came from.

The walk works on strings (``os.scandir``), not ``Path`` objects: a tree of
2,000 files is listed in a few milliseconds. Paths are spelled as
``str(Path(...))`` spells them, which is how the rest of ``check`` names files.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from migrate_v3.findings import Record

DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".tox", ".nox", ".mypy_cache",
    ".ruff_cache", ".pytest_cache", ".migrate_v3_cache", "node_modules", "build", "dist",
    "*.egg-info",
)


class Discovery(Record):
    """The files found, and one line per path that could not be walked."""

    __slots__ = ("files", "errors")

    def __init__(self) -> None:
        self.files: list[str] = []
        self.errors: list[tuple[str, str]] = []  # (path, reason)


@lru_cache(maxsize=64)
def _matcher(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One regex for ``fnmatch.fnmatch(x, p) for any p`` (POSIX: case-sensitive, as fnmatch is here)."""
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(os.path.normcase(p))})" for p in patterns))


def _excluded(rel: str, name: str, patterns: Iterable[str]) -> bool:
    if os.path.normcase("Aa") != "Aa":  # pragma: no cover - Windows folds case; keep fnmatch's rules
        return any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(rel, p) for p in patterns)
    matcher = _matcher(tuple(patterns))
    return matcher is not None and (matcher.match(name) is not None or matcher.match(rel) is not None)


def discover(paths: Iterable[str | Path], exclude: Iterable[str] = ()) -> Discovery:
    """Expand files and directories into .py files (sorted, deduplicated)."""
    result = Discovery()
    patterns = tuple(exclude)
    seen: set[str] = set()
    for raw in paths:
        path = Path(raw)
        if not os.path.lexists(path):
            result.errors.append((str(path), "no such file or directory"))
            continue
        if path.is_dir():
            for f in _walk(str(path), patterns, result):
                if f not in seen:
                    seen.add(f)
                    result.files.append(f)
        elif not path.exists():
            result.errors.append((str(path), "broken symbolic link"))
        elif _excluded(path.as_posix(), path.name, patterns):
            continue
        elif str(path) not in seen:
            seen.add(str(path))
            result.files.append(str(path))
    return result


def _walk(root: str, patterns: tuple[str, ...], result: Discovery) -> list[str]:
    """The .py/.pyi files under ``root`` in sorted depth-first order (names as ``str(Path)``)."""
    out: list[str] = []
    ancestors: list[str] = []
    dir_patterns = _matcher(DEFAULT_EXCLUDES + patterns)
    file_patterns = _matcher(patterns)
    # paths relative to root, spelled from the names we build (``scandir(".")``
    # yields ``./x`` but ``scandir("pkg")`` yields ``pkg/x``: not a fixed prefix)
    prefix = 0 if root == "." else len(root) if root.endswith("/") else len(root) + 1
    errors = result.errors

    def visit(directory: str, real: str) -> None:
        if real in ancestors:
            errors.append((directory, f"symbolic link loop (points back to {real})"))
            return
        ancestors.append(real)
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            errors.append((directory, exc.strerror or str(exc)))
            ancestors.pop()
            return
        base = "" if directory == "." else directory if directory.endswith("/") else directory + "/"
        for entry in entries:
            name = entry.name
            try:
                is_dir = entry.is_dir()
            except OSError as exc:
                errors.append((entry.path, exc.strerror or str(exc)))
                continue
            if not is_dir and not name.endswith((".py", ".pyi")):
                continue
            child = base + name
            rel = child[prefix:]
            if is_dir:
                if dir_patterns is not None and (dir_patterns.match(name) or dir_patterns.match(rel)):
                    continue
                if entry.is_symlink():
                    target = os.path.realpath(child)
                    if real == target or real.startswith(target + os.sep):
                        errors.append((child, f"symbolic link loop (points back to {target})"))
                        continue
                    visit(child, target)
                else:
                    visit(child, real + name if real.endswith("/") else real + "/" + name)
            else:
                if file_patterns is not None and (file_patterns.match(name) or file_patterns.match(rel)):
                    continue
                if entry.is_symlink() and not os.path.exists(child):
                    errors.append((child, "broken symbolic link"))
                    continue
                out.append(child)
        ancestors.pop()

    visit(root, os.path.realpath(root))
    return out
