"""The plain data that every stage passes on: findings and per-file results."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
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


#: A Finding from a (line, col, code, message) tuple: ``Finding._make`` without its
#: Python-level length check (the tuples come from the scanner), all in C.
finding_of = partial(tuple.__new__, Finding)


#: Rule code -> the label of its fix ("auto", "unsafe", "manual").
FIX_LABEL = {code: rule.fix.value for code, rule in RULES.items()}


def plain_lines(path: str, findings: Iterable[tuple[int, int, str, str]]) -> str:
    """One file's findings as check's plain text lines: ``path:line:col: CODE [fix] message``."""
    fix = FIX_LABEL
    return "".join([f"{path}:{line}:{col}: {code} [{fix[code]}] {message}\n" for line, col, code, message in findings])


class Record:
    """Plain data, compared and shown by the names in ``__slots__`` (less ``_unshown``).

    Not dataclasses: ``check`` starts in tens of milliseconds, and importing
    ``dataclasses`` (with the ``inspect`` module it pulls in) and building its
    classes would take ~9 ms of that, so the records on check's path are spelled out.
    """

    __slots__ = ()
    _unshown: frozenset[str] = frozenset()
    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def _shown(self) -> tuple[tuple[str, Any], ...]:
        names: tuple[str, ...] = self.__slots__  # each subclass names its fields
        return tuple((n, getattr(self, n)) for n in names if n not in self._unshown)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and type(other) is type(self) and self._shown() == other._shown()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={v!r}' for n, v in self._shown())})"


class FileResult(Record):
    """What ``check`` learned about one file."""

    __slots__ = ("path", "kind", "release", "findings", "depends_on", "error", "text")
    _unshown = frozenset({"text"})

    def __init__(
        self, path: str, kind: str, release: str | None = None, findings: list[Finding] | None = None,
        depends_on: list[str] | None = None, error: str | None = None, text: str | None = None,
    ) -> None:
        self.path = path
        self.kind = kind  # "v2" | "v3" | "mixed" | "neutral" | "error"
        self.release = release
        self.findings: list[Finding] = [] if findings is None else findings
        self.depends_on: list[str] = [] if depends_on is None else depends_on
        self.error = error
        #: ``plain_lines(path, findings)`` when a check worker made them (None: make them
        #: when needed); whoever changes ``findings`` afterwards sets it back to None.
        self.text = text

    def to_json(self) -> dict[str, Any]:
        """``asdict(self)`` with each finding's fix, spelled out (asdict deep-copies slowly)."""
        return {
            "path": self.path,
            "kind": self.kind,
            "release": self.release,
            "findings": [
                {"line": f.line, "col": f.col, "code": f.code, "message": f.message, "fix": f.fix.value}
                for f in sorted(self.findings)
            ],
            "depends_on": list(self.depends_on),
            "error": self.error,
        }
