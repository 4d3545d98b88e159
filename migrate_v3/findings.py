"""The plain data that every stage passes on: findings and per-file results."""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from migrate_v3.rules import RULES, Fix


@dataclass(frozen=True, order=True)
class Finding:
    """One site that ``apply`` rewrites or a person must look at."""

    line: int
    col: int
    code: str
    message: str

    @property
    def fix(self) -> Fix:
        return RULES[self.code].fix


_new = object.__new__


def new_finding(line: int, col: int, code: str, message: str) -> Finding:
    """``Finding(line, col, code, message)`` at half the cost of the frozen dataclass __init__.

    The same object (fields in ``__dict__``): check builds 16,000 of them per run.
    """
    f = _new(Finding)
    f.__dict__.update(line=line, col=col, code=code, message=message)
    return f


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
