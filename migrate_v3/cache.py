"""A content-hash cache of check results, as ruff keeps one.

One marshal file per project: path -> (blake2b of the bytes, result tuple).
The key includes the tool version and the knowledge data, so a new rule or a
regenerated allow-list invalidates everything at once.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import tempfile
from pathlib import Path
from typing import Any

from migrate_v3 import __version__
from migrate_v3.knowledge.symbols import _DATA

_FORMAT = 1


def _salt() -> str:
    h = hashlib.blake2b(digest_size=8)
    h.update(f"{__version__}/{_FORMAT}".encode())
    h.update(_DATA.read_bytes())
    for name in ("scan.py", "rules.py", "knowledge/symbols.py", "classify.py"):
        h.update((Path(__file__).parent / name).read_bytes())
    return h.hexdigest()


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class Cache:
    """Load once, look up per file, save once (atomically)."""

    def __init__(self, directory: Path, *, enabled: bool = True) -> None:
        self.path = directory / "check.marshal"
        self.enabled = enabled
        self._salt = _salt() if enabled else ""
        self._entries: dict[str, tuple[str, Any]] = {}
        self._dirty = False
        if enabled:
            try:
                salt, entries = marshal.loads(self.path.read_bytes())
                if salt == self._salt:
                    self._entries = entries
            except (OSError, ValueError, EOFError, TypeError):
                pass

    def get(self, path: str, key: str) -> Any | None:
        entry = self._entries.get(path)
        return entry[1] if entry is not None and entry[0] == key else None

    def put(self, path: str, key: str, value: Any) -> None:
        if self.enabled:
            self._entries[path] = (key, value)
            self._dirty = True

    def save(self) -> None:
        if not (self.enabled and self._dirty):
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            gitignore = self.path.parent / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text("*\n", encoding="utf-8")
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".check-")
            with os.fdopen(fd, "wb") as out:
                out.write(marshal.dumps((self._salt, self._entries)))
            os.replace(tmp, self.path)
        except OSError:
            pass  # a cache that cannot be written only costs time
