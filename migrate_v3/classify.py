"""One file -> its kind (v2 / v3 / mixed / neutral), target release and findings."""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Sequence
from importlib.util import MAGIC_NUMBER, cache_from_source, source_hash
from pathlib import Path
from typing import Any, Literal, overload

from migrate_v3.findings import FileResult, Finding, Record, finding_of
from migrate_v3.scan import Scan, scan_raw, syntax_error

_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.M)


class SourceError(Exception):
    """A file that cannot be read or decoded: one line saying why."""


def read_source(path: str) -> bytes:
    """The bytes of one file, with the fewest system calls and objects (check reads thousands)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        want = os.fstat(fd).st_size + 1  # a byte more than the size: a short read is the whole file
        chunks = [os.read(fd, want)]
        if len(chunks[0]) == want:  # more than the size said (a growing file, procfs): read to the end
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def decode(data: bytes) -> str:
    """Decode Python source as the interpreter would (UTF-8 or a PEP 263 cookie)."""
    # The cookie can only be on one of the first two lines.
    first = data.find(b"\n")
    second = data.find(b"\n", first + 1) if first >= 0 else -1
    head = data[:second] if second >= 0 else data
    m = _COOKIE.search(head) if b"coding" in head else None
    encoding = m.group(1).decode("ascii") if m else "utf-8"
    if m:
        try:
            codecs.lookup(encoding)
        except LookupError as exc:
            raise SourceError(f"unknown source encoding {encoding!r}") from exc
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise SourceError(
            f"not valid {encoding}: byte 0x{data[exc.start]:02x} at offset {exc.start}"
        ) from exc
    return text[1:] if text.startswith("\ufeff") else text


def compiled_by_python(path: str, data: bytes) -> bool:
    """Whether this interpreter's bytecode cache proves that ``data``, read from ``path``, compiles.

    A ``__pycache__`` file with this interpreter's magic number that is valid
    for the source (the import system's own test: recorded mtime and size, or
    the source hash of hash-based pycs) was written by compiling these bytes,
    and compiling implies parsing. We also require the pyc to be no older than
    the source. Installed packages always have one, so ``check`` need not parse
    them again; anything else (no pyc, stale, another Python) is parsed.
    """
    if not path.endswith(".py"):
        return False
    try:
        fd = os.open(cache_from_source(path, optimization=""), os.O_RDONLY)
        try:
            header = os.read(fd, 16)
            written = os.fstat(fd).st_mtime_ns
        finally:
            os.close(fd)
        source = os.stat(path)
    except (OSError, ValueError, NotImplementedError):
        return False
    if len(header) < 16 or header[:4] != MAGIC_NUMBER or source.st_size != len(data):
        return False
    flags = int.from_bytes(header[4:8], "little")
    if flags & 0b1:  # hash-based pyc
        return flags in (0b01, 0b11) and header[8:16] == source_hash(data)
    return (
        flags == 0
        and int.from_bytes(header[8:12], "little") == int(source.st_mtime) & 0xFFFFFFFF
        and int.from_bytes(header[12:16], "little") == source.st_size & 0xFFFFFFFF
        and source.st_mtime_ns <= written
    )


def kind_of(scan: Scan) -> str:
    if scan.v2 and scan.v3:
        return "mixed"
    if scan.v2:
        return "v2"
    if scan.v3:
        return "v3"
    return "neutral"


class Classified(Record):
    """A file's result plus the imports that may point at other packages' code."""

    __slots__ = ("result", "relative_imports", "absolute_arch_imports", "dependencies")

    def __init__(
        self, result: FileResult, relative_imports: list[tuple[str, int, int]] | None = None,
        absolute_arch_imports: list[tuple[str, int, int]] | None = None,
        dependencies: list[tuple[str, str, int, int]] | None = None,
    ) -> None:
        self.result = result
        self.relative_imports: list[tuple[str, int, int]] = relative_imports or []
        self.absolute_arch_imports: list[tuple[str, int, int]] = absolute_arch_imports or []
        #: (package, target file, line, col) of the imports into other architecture
        #: packages, when the worker already resolved them (check.dependency_candidates).
        self.dependencies = dependencies


#: What ``check`` ships between processes and caches for one file:
#: (kind, release, error, findings as (line, col, code, message), relative imports, arch imports).
Packed = tuple[str, "str | None", "str | None", list[tuple[int, int, str, str]], list[tuple[str, int, int]], list[tuple[str, int, int]]]


@overload
def classify_bytes(data: bytes, path: str, *, check_syntax: bool = ..., packed: Literal[False] = ...) -> Classified: ...
@overload
def classify_bytes(data: bytes, path: str, *, check_syntax: bool = ..., packed: Literal[True]) -> Packed: ...


def classify_bytes(data: bytes, path: str, *, check_syntax: bool = True, packed: bool = False) -> Classified | Packed:
    """One file's result; ``packed=True`` returns it as plain data (see ``Packed``)."""
    out = _classify(data, path, check_syntax)
    return out if packed else unpack(path, out)


def _classify(data: bytes, path: str, check_syntax: bool) -> Packed:
    try:
        text = decode(data)
    except SourceError as exc:
        return ("error", None, str(exc), [], [], [])
    try:
        scan, findings = scan_raw(text)
    except Exception as exc:  # noqa: BLE001 - one file the scanner trips on must not stop the run
        return ("error", None, f"internal error while scanning: {type(exc).__name__}: {exc}", [], [], [])
    # Parsing costs three times the scan: do it where it matters, for the files
    # check reports on (and apply would rewrite).
    if check_syntax and (findings or scan.todo_markers) and not compiled_by_python(path, data):
        problem = syntax_error(text, path)
        if problem is not None:
            return ("error", None, problem, [], [], [])
    return (kind_of(scan), scan.release, None, findings, scan.relative_imports, scan.absolute_arch_imports)


def unpack(
    path: str, packed: Sequence[Any], dependencies: Sequence[Sequence[Any]] | None = None,
    text: str | None = None,
) -> Classified:
    """``Packed`` data (from a worker or the cache) -> the Classified it stands for."""
    kind, release, error, findings, rel, absolute = packed
    result = FileResult(path, kind, release, list(map(finding_of, findings)), error=error, text=text)
    # marshal (workers, the cache) gives back tuples as tuples: no copies needed.
    return Classified(result, rel, absolute, dependencies)  # type: ignore[arg-type]


def classify_file(path: Path, *, check_syntax: bool = True) -> Classified:
    try:
        data = path.read_bytes()
    except OSError as exc:
        return Classified(FileResult(str(path), "error", error=exc.strerror or str(exc)))
    return classify_bytes(data, str(path), check_syntax=check_syntax)


def dependency_finding(package: str, target: str, line: int, col: int) -> Finding:
    return Finding(line, col, "MV301", f"depends on V2 package {package!r} ({target}): migrate it first")
