"""One file -> its kind (v2 / v3 / mixed / neutral), target release and findings."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field
from pathlib import Path

from migrate_v3.findings import FileResult, Finding
from migrate_v3.scan import Scan, scan_source, syntax_error

_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.M)


class SourceError(Exception):
    """A file that cannot be read or decoded: one line saying why."""


def decode(data: bytes) -> str:
    """Decode Python source as the interpreter would (UTF-8 or a PEP 263 cookie)."""
    head = b"\n".join(data.split(b"\n", 2)[:2])
    m = _COOKIE.search(head)
    encoding = m.group(1).decode("ascii") if m else "utf-8"
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


def kind_of(scan: Scan) -> str:
    if scan.v2 and scan.v3:
        return "mixed"
    if scan.v2:
        return "v2"
    if scan.v3:
        return "v3"
    return "neutral"


@dataclass
class Classified:
    """A file's result plus the imports that may point at other packages' code."""

    result: FileResult
    relative_imports: list[tuple[str, int, int]] = field(default_factory=list)
    absolute_arch_imports: list[tuple[str, int, int]] = field(default_factory=list)


def classify_bytes(data: bytes, path: str, *, check_syntax: bool = True) -> Classified:
    try:
        text = decode(data)
    except SourceError as exc:
        return Classified(FileResult(path, "error", error=str(exc)))
    scan = scan_source(text)
    # Parsing costs three times the scan: do it where it matters, for the files
    # check reports on (and apply would rewrite).
    if check_syntax and (scan.findings or scan.todo_markers):
        problem = syntax_error(text, path)
        if problem is not None:
            return Classified(FileResult(path, "error", error=problem))
    result = FileResult(path, kind_of(scan), scan.release, list(scan.findings))
    return Classified(result, scan.relative_imports, scan.absolute_arch_imports)


def classify_file(path: Path, *, check_syntax: bool = True) -> Classified:
    try:
        data = path.read_bytes()
    except OSError as exc:
        return Classified(FileResult(str(path), "error", error=exc.strerror or str(exc)))
    return classify_bytes(data, str(path), check_syntax=check_syntax)


def dependency_finding(package: str, target: str, line: int, col: int) -> Finding:
    return Finding(line, col, "MV301", f"depends on V2 package {package!r} ({target}): migrate it first")
