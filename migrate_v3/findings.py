"""The plain data that every stage passes on: findings and per-file results."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, NamedTuple

from migrate_v3.rules import RULES, Fix


class Finding(NamedTuple):
    """One site that ``apply`` rewrites or a person must look at.

    A named tuple: immutable, ordered by (line, col, code, message), and built
    straight from the plain tuples that ``check``'s workers and cache ship
    (16,000 per run over the max tree) at a fraction of a dataclass's cost.
    """

    line: int
    col: int
    code: str
    message: str

    @property
    def fix(self) -> Fix:
        return RULES[self.code].fix


#: A Finding from a (line, col, code, message) tuple, without unpacking it.
finding_of = Finding._make


#: Rule code -> the label of its fix ("auto", "unsafe", "manual").
FIX_LABEL = {code: rule.fix.value for code, rule in RULES.items()}


def plain_lines(path: str, findings: Iterable[tuple[int, int, str, str]]) -> str:
    """One file's findings as check's plain text lines: ``path:line:col: CODE [fix] message``."""
    fix = FIX_LABEL
    return "".join([f"{path}:{line}:{col}: {code} [{fix[code]}] {message}\n" for line, col, code, message in findings])


#: Sorts findings as their dataclass order does, without a Python-level __lt__ per comparison.
sort_key = attrgetter("line", "col", "code", "message")


@dataclass
class FileResult:
    """What ``check`` learned about one file."""

    path: str
    kind: str  # "v2" | "v3" | "mixed" | "neutral" | "error"
    release: str | None = None
    findings: list[Finding] = field(default_factory=list)
    depends_on: list[str] = field(default_factory=list)
    error: str | None = None
    #: ``plain_lines(path, findings)`` when a check worker made them (None: make them
    #: when needed); whoever changes ``findings`` afterwards sets it back to None.
    text: str | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """``asdict(self)`` with each finding's fix, spelled out (asdict deep-copies slowly)."""
        return {
            "path": self.path,
            "kind": self.kind,
            "release": self.release,
            "findings": [
                {"line": f.line, "col": f.col, "code": f.code, "message": f.message, "fix": f.fix.value}
                for f in sorted(self.findings, key=sort_key)
            ],
            "depends_on": list(self.depends_on),
            "error": self.error,
        }
