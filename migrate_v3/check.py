"""The ``check`` run: discover -> classify (cached, in parallel) -> dependencies -> filter.

It is the front half of ``apply``'s flow, stopped before anything is written.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from migrate_v3.classify import (
    Classified,
    Packed,
    classify_bytes,
    classify_file,
    dependency_finding,
    read_source,
    unpack,
)
from migrate_v3.config import Settings
from migrate_v3.discover import discover
from migrate_v3.findings import FileResult, Record, plain_lines
from migrate_v3.rules import matches
from migrate_v3.workers import fork_is_safe, fork_map

#: Below this many files to classify, worker processes cost more than they save.
_PARALLEL_THRESHOLD = 64
#: Files per pile of work that a process takes at a time.
_PILE = 16


class CheckReport(Record):
    """Every file's result, in path order, and one line per file or path that could not be checked."""

    __slots__ = ("files", "errors")

    def __init__(self, files: list[FileResult] | None = None, errors: list[tuple[str, str]] | None = None) -> None:
        self.files: list[FileResult] = [] if files is None else files
        self.errors: list[tuple[str, str]] = [] if errors is None else errors  # (path, one-line reason)

    @property
    def findings_count(self) -> int:
        return sum(len(f.findings) for f in self.files)

    def kinds(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for f in self.files:
            counts[f.kind] = counts.get(f.kind, 0) + 1
        return counts


#: A file's dependency candidates: (package, target file, line, col) per import of
#: its that resolves into another architecture package.
Candidates = list[tuple[str, str, int, int]]
#: What a worker returns for one file: the packed result, its dependency
#: candidates (which depend on other files, so they are never cached with the
#: result) and, when asked for, its findings as check's plain text lines.
Answer = tuple[Packed, Candidates, "str | None"]


def _classify_one(name: str, data: bytes | None, check_syntax: bool, text: bool) -> Answer:
    if data is None:
        try:
            data = read_source(name)
        except OSError as exc:
            return ("error", None, exc.strerror or str(exc), [], [], []), [], None
    packed = classify_bytes(data, name, check_syntax=check_syntax, packed=True)
    lines = plain_lines(name, packed[3]) if text else None
    return packed, dependency_candidates(name, packed[4], packed[5]), lines


def _classify_items(items: list[tuple[str, bytes | None]], check_syntax: bool, text: bool) -> list[Answer]:
    """Worker entry point for spawned workers (the bytes travel through a pipe)."""
    return [_classify_one(name, data, check_syntax, text) for name, data in items]


#: The files to classify, set before forking so that the children inherit
#: the list (and any bytes already read) instead of receiving it.
_SHARED: list[tuple[str, bytes | None]] = []


def _classify_shared(indices: range, check_syntax: bool, text: bool) -> list[Answer]:
    shared = _SHARED
    return [_classify_one(shared[i][0], shared[i][1], check_syntax, text) for i in indices]


def _classify_todo(
    todo: list[tuple[str, bytes | None]], settings: Settings,
    consume: Callable[[int, Answer], None], text: bool = False,
) -> None:
    """``consume(i, answer for todo[i])`` for every file, in ``settings.jobs`` processes when
    worth it; ``text``: answers carry the plain text lines.

    Files not read yet (``None``) are read by the process that classifies them.
    This process's answers arrive as it makes them, so the caller unpacks them
    while the workers are still busy; the workers' come at the end.
    """
    syntax = settings.syntax
    jobs = settings.jobs or os.cpu_count() or 1
    processes = min(jobs, len(todo) // (_PARALLEL_THRESHOLD // 2)) if len(todo) >= _PARALLEL_THRESHOLD else 1
    if processes <= 1:
        for index, (name, data) in enumerate(todo):
            consume(index, _classify_one(name, data, syntax, text))
        return
    # Small piles of neighbouring files, taken by whichever process is free: files
    # differ in cost, so fixed halves would leave one process waiting for the other.
    ranges = [range(start, min(start + _PILE, len(todo))) for start in range(0, len(todo), _PILE)]

    def take(pile: int, answer: list[Answer]) -> None:
        for index, result in zip(ranges[pile], answer, strict=True):
            consume(index, result)

    if fork_is_safe():
        _SHARED[:] = todo
        try:
            fork_map(lambda indices: _classify_shared(indices, syntax, text), ranges, take, processes)
        finally:
            _SHARED.clear()
    else:
        from migrate_v3.workers import process_pool

        with process_pool(processes) as pool:
            futures = [pool.submit(_classify_items, [todo[i] for i in r], syntax, text) for r in ranges]
            for pile, future in enumerate(futures):
                take(pile, future.result())


def classify_many(files: Iterable[Path | str], settings: Settings, *, text: bool = False) -> dict[str, Classified]:
    """Each file's Classified, in discovery order; ``text``: results carry their plain text lines."""
    out: dict[str, Classified] = {}
    if not settings.cache:
        todo: list[tuple[str, bytes | None]] = [(str(path), None) for path in files]

        def keep(index: int, answer: Answer) -> None:
            out[todo[index][0]] = unpack(todo[index][0], *answer)

        _classify_todo(todo, settings, keep, text)
        return {name: out[name] for name, _ in todo}  # in discovery order, as before

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
            out[name] = unpack(name, hit)
        else:
            todo.append((name, data))
    def keep_and_cache(index: int, answer: Answer) -> None:
        name = todo[index][0]
        out[name] = unpack(name, *answer)
        cache.put(name, keys[name], answer[0])

    _classify_todo(todo, settings, keep_and_cache, text)
    cache.save()
    return out


# --- dependencies on other packages' V2 code ----------------------------------------------


# Paths here are strings spelled as str(Path(...)) spells them (what discover
# produces): Path objects cost more than the look-ups they name.


def _parent(path: str) -> str:
    """``str(Path(path).parent)``."""
    i = path.rfind("/")
    return "." if i < 0 else path[: i or 1]


def _join(directory: str, parts: Sequence[str]) -> str:
    """``str(Path(directory).joinpath(*parts))`` for parts without "/" or "" in them."""
    tail = "/".join(parts)
    if directory == ".":
        return tail
    return directory + tail if directory.endswith("/") else f"{directory}/{tail}"


def _name(path: str) -> str:
    """``Path(path).name``."""
    return "" if path in {".", "/"} else path[path.rfind("/") + 1 :]


@lru_cache(maxsize=16384)
def _module_file(base: str, parts: tuple[str, ...]) -> str | None:
    if any(not p or "/" in p for p in parts):  # not a module name: let pathlib spell it
        found = _module_file_path(Path(base), parts)
        return None if found is None else str(found)
    for k in range(len(parts), 0, -1):
        candidate = _join(base, parts[:k])
        if os.path.isfile(candidate + ".py"):
            return candidate + ".py"
        if os.path.isfile(candidate + "/__init__.py"):
            return candidate + "/__init__.py"
    return None


def _module_file_path(base: Path, parts: tuple[str, ...]) -> Path | None:
    for k in range(len(parts), 0, -1):
        candidate = base.joinpath(*parts[:k])
        if candidate.with_suffix(".py").is_file():
            return candidate.with_suffix(".py")
        if (candidate / "__init__.py").is_file():
            return candidate / "__init__.py"
    return None


@lru_cache(maxsize=4096)
def _architecture_package(directory: str) -> str | None:
    candidate = directory
    while True:
        if os.path.isfile(_join(candidate, ("arch.py",))):
            return candidate
        if not os.path.isfile(_join(candidate, ("__init__.py",))):
            return None
        parent = _parent(candidate)
        if parent == candidate:
            return None
        candidate = parent


def architecture_package(directory: Path) -> Path | None:
    """The nearest directory at or above ``directory`` holding an ``arch.py``.

    That is what MAX calls an architecture package, the unit that is migrated
    (and registered) as a whole; imports between two of them are dependencies.
    """
    found = _architecture_package(str(directory))
    return None if found is None else Path(found)


def _other_package(directory: str, target: str) -> str | None:
    mine, theirs = _architecture_package(directory), _architecture_package(_parent(target))
    if theirs is None or theirs == mine:
        return None
    return _name(theirs)


@lru_cache(maxsize=16384)
def _resolve_relative(directory: str, target: str) -> tuple[str, str] | None:
    level = len(target) - len(target.lstrip("."))
    parts = tuple(p for p in target[level:].split(".") if p)
    if level < 2 or not parts:
        return None
    base = directory
    for _ in range(level - 1):
        base = _parent(base)
    found = _module_file(base, parts)
    if found is None:
        return None
    package = _other_package(directory, found)
    return (package, found) if package is not None else None


def resolve_relative(file: Path, target: str) -> tuple[str, Path] | None:
    """``from ..pkg.mod import x`` in ``file`` -> ("pkg", path of pkg/mod.py) when pkg is another package."""
    found = _resolve_relative(str(file.parent), target)
    return None if found is None else (found[0], Path(found[1]))


@lru_cache(maxsize=4096)
def _architectures_dir(directory: str) -> str | None:
    candidate = directory
    while True:
        parent = _parent(candidate)
        if _name(candidate) == "architectures" and _name(parent) == "pipelines" and _name(_parent(parent)) == "max":
            return candidate
        if parent == candidate:
            break
        candidate = parent
    for entry in sys.path:
        found = Path(entry or ".") / "max" / "pipelines" / "architectures"
        if found.is_dir():
            return str(found)
    return None


@lru_cache(maxsize=16384)
def _resolve_absolute(directory: str, target: str) -> tuple[str, str] | None:
    parts = tuple(target.split(".")[3:])
    if not parts:
        return None
    root = _architectures_dir(directory)
    found = _module_file(root, parts) if root is not None else None
    if found is None:
        return None
    package = _other_package(directory, found)
    return (package, found) if package is not None else None


def resolve_absolute(file: Path, target: str) -> tuple[str, Path] | None:
    """``max.pipelines.architectures.pkg.mod.x`` -> ("pkg", path) when pkg is not ``file``'s own."""
    found = _resolve_absolute(str(file.parent), target)
    return None if found is None else (found[0], Path(found[1]))


def dependency_candidates(
    name: str, relative: Sequence[Sequence[Any]], absolute: Sequence[Sequence[Any]]
) -> Candidates:
    """(package, target file, line, col) for each import of file ``name`` (its relative
    and absolute architecture imports) that resolves into another architecture package."""
    if not relative and not absolute:
        return []
    directory = _parent(name)
    out: Candidates = []
    # resolve_relative needs two leading dots (one is the file's own package).
    for target, line, col in relative:
        if target.startswith(".."):
            found = _resolve_relative(directory, target)
            if found is not None:
                out.append((found[0], found[1], line, col))
    for target, line, col in absolute:
        found = _resolve_absolute(directory, target)
        if found is not None:
            out.append((found[0], found[1], line, col))
    return out


def link_dependencies(classified: dict[str, Classified], settings: Settings) -> None:
    """Mark files that import another package's V2 (or mixed) module."""
    extra: dict[str, str] = {}
    intrinsic = {name: c.result.kind for name, c in classified.items()}

    def kind(name: str) -> str:
        """A target's kind from its own content (dependencies do not propagate)."""
        if name in intrinsic:
            return intrinsic[name]
        if name not in extra:
            extra[name] = classify_file(Path(name), check_syntax=False).result.kind
        return extra[name]

    for name, c in classified.items():
        candidates = c.dependencies
        if candidates is None:  # a cached result: resolve here
            candidates = dependency_candidates(name, c.relative_imports, c.absolute_arch_imports)
        added = False
        for package, target, line, col in candidates:
            # a *_modulev3 package's leftover V2 sites are findings in its own files
            if kind(target) in {"v2", "mixed"} and not package.endswith("_modulev3"):
                if package not in c.result.depends_on:
                    c.result.depends_on.append(package)
                c.result.findings.append(dependency_finding(package, target, line, col))
                c.result.text = None  # the lines no longer say it all
                added = True
        if c.result.depends_on and c.result.kind == "neutral":
            c.result.kind = "v2"  # builds on another package's V2 code (e.g. subclasses its model)
        if added:
            c.result.findings.sort()


def run_check(paths: Sequence[str | Path], settings: Settings, *, text: bool = False) -> CheckReport:
    """``text``: each file's result carries its findings as plain text lines (formatted by the workers)."""
    found = discover(paths, settings.exclude)
    classified = classify_many(found.files, settings, text=text)
    link_dependencies(classified, settings)
    report = CheckReport(errors=list(found.errors))
    select, ignore = settings.select, settings.ignore
    wanted: dict[str, bool] = {}  # rule code -> kept by --select/--ignore
    for name in sorted(classified):
        result = classified[name].result
        if result.kind == "error":
            report.errors.append((name, result.error or "unknown error"))
            continue
        if select or ignore:
            for f in result.findings:
                if f.code not in wanted:
                    wanted[f.code] = (not select or matches(f.code, select)) and not matches(f.code, ignore)
            kept = [f for f in result.findings if wanted[f.code]]
            if len(kept) != len(result.findings):
                result.findings, result.text = kept, None
        report.files.append(result)
    return report
