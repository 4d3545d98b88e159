"""The ``check`` run: discover -> classify (cached, in parallel) -> dependencies -> filter.

It is the front half of ``apply``'s flow, stopped before anything is written.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from migrate_v3.classify import Classified, classify_bytes, classify_file, dependency_finding
from migrate_v3.config import Settings
from migrate_v3.discover import discover
from migrate_v3.findings import FileResult, Finding
from migrate_v3.rules import matches
from migrate_v3.workers import fork_is_safe, fork_map

#: Below this many files to classify, worker processes cost more than they save.
_PARALLEL_THRESHOLD = 64


@dataclass
class CheckReport:
    files: list[FileResult] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (path, one-line reason)

    @property
    def findings_count(self) -> int:
        return sum(len(f.findings) for f in self.files)

    def kinds(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for f in self.files:
            counts[f.kind] = counts.get(f.kind, 0) + 1
        return counts


def _pack(c: Classified) -> tuple[Any, ...]:
    r = c.result
    return (
        r.kind, r.release, r.error,
        [(f.line, f.col, f.code, f.message) for f in r.findings],
        c.relative_imports, c.absolute_arch_imports,
    )


def _unpack(path: str, packed: Sequence[Any]) -> Classified:
    kind, release, error, findings, rel, absolute = packed
    result = FileResult(path, kind, release, [Finding(*f) for f in findings], error=error)
    return Classified(result, [tuple(x) for x in rel], [tuple(x) for x in absolute])


def _classify_one(name: str, data: bytes | None, check_syntax: bool) -> tuple[Any, ...]:
    if data is None:
        try:
            data = Path(name).read_bytes()
        except OSError as exc:
            return ("error", None, exc.strerror or str(exc), [], [], [])
    return _pack(classify_bytes(data, name, check_syntax=check_syntax))


def _classify_items(items: list[tuple[str, bytes | None]], check_syntax: bool) -> list[tuple[Any, ...]]:
    """Worker entry point for spawned workers (the bytes travel through a pipe)."""
    return [_classify_one(name, data, check_syntax) for name, data in items]


#: The files to classify, set before forking so that the children inherit
#: the list (and any bytes already read) instead of receiving it.
_SHARED: list[tuple[str, bytes | None]] = []


def _classify_shared(indices: range, check_syntax: bool) -> list[tuple[Any, ...]]:
    shared = _SHARED
    return [_classify_one(shared[i][0], shared[i][1], check_syntax) for i in indices]


def _classify_todo(todo: list[tuple[str, bytes | None]], settings: Settings) -> list[tuple[Any, ...]]:
    """Packed results for ``todo`` (in order), in ``settings.jobs`` processes when worth it.

    Files not read yet (``None``) are read by the process that classifies them.
    """
    syntax = settings.syntax
    jobs = settings.jobs or os.cpu_count() or 1
    piles = min(jobs, len(todo) // (_PARALLEL_THRESHOLD // 2)) if len(todo) >= _PARALLEL_THRESHOLD else 1
    if piles <= 1:
        return [_classify_one(name, data, syntax) for name, data in todo]
    # Interleaved piles: neighbouring files (same package, same kind of code) split evenly.
    ranges = [range(k, len(todo), piles) for k in range(piles)]
    if fork_is_safe():
        _SHARED[:] = todo
        try:
            answers = fork_map(lambda indices: _classify_shared(indices, syntax), ranges)
        finally:
            _SHARED.clear()
    else:
        from migrate_v3.workers import process_pool

        with process_pool(piles) as pool:
            futures = [pool.submit(_classify_items, [todo[i] for i in r], syntax) for r in ranges]
            answers = [future.result() for future in futures]
    packed: list[tuple[Any, ...]] = [()] * len(todo)
    for indices, answer in zip(ranges, answers, strict=True):
        for index, result in zip(indices, answer, strict=True):
            packed[index] = result
    return packed


def classify_many(files: Iterable[Path | str], settings: Settings) -> dict[str, Classified]:
    out: dict[str, Classified] = {}
    if not settings.cache:
        todo: list[tuple[str, bytes | None]] = [(str(path), None) for path in files]
        for (name, _), packed in zip(todo, _classify_todo(todo, settings), strict=True):
            out[name] = _unpack(name, packed)
        return out

    from migrate_v3.cache import Cache, digest

    cache = Cache(settings.root / settings.cache_dir)
    todo = []
    keys: dict[str, str] = {}
    flag = "s" if settings.syntax else "n"
    for path in files:
        name = str(path)
        try:
            data = Path(name).read_bytes()
        except OSError as exc:
            out[name] = Classified(FileResult(name, "error", error=exc.strerror or str(exc)))
            continue
        key = digest(data) + flag
        keys[name] = key
        hit = cache.get(name, key)
        if hit is not None:
            out[name] = _unpack(name, hit)
        else:
            todo.append((name, data))
    for (name, _), packed in zip(todo, _classify_todo(todo, settings), strict=True):
        out[name] = _unpack(name, packed)
        cache.put(name, keys[name], packed)
    cache.save()
    return out


# --- dependencies on other packages' V2 code ----------------------------------------------


def _module_file(base: Path, parts: list[str]) -> Path | None:
    return _module_file_cached(base, tuple(parts))


@lru_cache(maxsize=16384)
def _module_file_cached(base: Path, parts: tuple[str, ...]) -> Path | None:
    for k in range(len(parts), 0, -1):
        candidate = base.joinpath(*parts[:k])
        if candidate.with_suffix(".py").is_file():
            return candidate.with_suffix(".py")
        if (candidate / "__init__.py").is_file():
            return candidate / "__init__.py"
    return None


@lru_cache(maxsize=4096)
def architecture_package(directory: Path) -> Path | None:
    """The nearest directory at or above ``directory`` holding an ``arch.py``.

    That is what MAX calls an architecture package, the unit that is migrated
    (and registered) as a whole; imports between two of them are dependencies.
    """
    for candidate in (directory, *directory.parents):
        if (candidate / "arch.py").is_file():
            return candidate
        if not (candidate / "__init__.py").is_file():
            return None
    return None


def _other_package(file: Path, target: Path) -> str | None:
    mine, theirs = architecture_package(file.parent), architecture_package(target.parent)
    if theirs is None or theirs == mine:
        return None
    return theirs.name


def resolve_relative(file: Path, target: str) -> tuple[str, Path] | None:
    """``from ..pkg.mod import x`` in ``file`` -> ("pkg", path of pkg/mod.py) when pkg is another package."""
    level = len(target) - len(target.lstrip("."))
    parts = [p for p in target[level:].split(".") if p]
    if level < 2 or not parts:
        return None
    base = file.parent
    for _ in range(level - 1):
        base = base.parent
    found = _module_file(base, parts)
    if found is None:
        return None
    package = _other_package(file, found)
    return (package, found) if package is not None else None


def _architectures_dir(file: Path) -> Path | None:
    for parent in file.parents:
        if parent.name == "architectures" and parent.parent.name == "pipelines" and parent.parent.parent.name == "max":
            return parent
    for entry in sys.path:
        candidate = Path(entry or ".") / "max" / "pipelines" / "architectures"
        if candidate.is_dir():
            return candidate
    return None


def resolve_absolute(file: Path, target: str) -> tuple[str, Path] | None:
    """``max.pipelines.architectures.pkg.mod.x`` -> ("pkg", path) when pkg is not ``file``'s own."""
    parts = target.split(".")[3:]
    if not parts:
        return None
    root = _architectures_dir(file)
    found = _module_file(root, parts) if root is not None else None
    if found is None:
        return None
    package = _other_package(file, found)
    return (package, found) if package is not None else None


def link_dependencies(classified: dict[str, Classified], settings: Settings) -> None:
    """Mark files that import another package's V2 (or mixed) module."""
    extra: dict[str, str] = {}
    intrinsic = {name: c.result.kind for name, c in classified.items()}

    def kind(path: Path) -> str:
        """A target's kind from its own content (dependencies do not propagate)."""
        name = str(path)
        if name in intrinsic:
            return intrinsic[name]
        if name not in extra:
            extra[name] = classify_file(path, check_syntax=False).result.kind
        return extra[name]

    for name, c in classified.items():
        file = Path(name)
        candidates = [(resolve_relative(file, t), line, col) for t, line, col in c.relative_imports]
        candidates += [(resolve_absolute(file, t), line, col) for t, line, col in c.absolute_arch_imports]
        for resolved, line, col in candidates:
            if resolved is None:
                continue
            package, target = resolved
            if kind(target) in {"v2", "mixed"}:
                if package not in c.result.depends_on:
                    c.result.depends_on.append(package)
                c.result.findings.append(dependency_finding(package, str(target), line, col))
        if c.result.depends_on and c.result.kind == "neutral":
            c.result.kind = "v2"  # builds on another package's V2 code (e.g. subclasses its model)
        c.result.findings.sort()


def run_check(paths: Sequence[str | Path], settings: Settings) -> CheckReport:
    found = discover(paths, settings.exclude)
    classified = classify_many(found.files, settings)
    link_dependencies(classified, settings)
    report = CheckReport(errors=list(found.errors))
    for name in sorted(classified):
        result = classified[name].result
        if result.kind == "error":
            report.errors.append((name, result.error or "unknown error"))
            continue
        result.findings = [
            f for f in result.findings
            if (not settings.select or matches(f.code, settings.select))
            and not matches(f.code, settings.ignore)
        ]
        report.files.append(result)
    return report
