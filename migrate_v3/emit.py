"""Write outputs atomically: stage beside the destination, then move into place.

Everything of a run is written into hidden staging directories on the same
filesystem as each destination; only when every file is written are the
targets moved into place with ``os.replace``. An interrupted run leaves no
half-written package (the staging directories are removed on the way out).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from types import TracebackType


class Stager:
    """Collects output files per target, then publishes them all at the end."""

    def __init__(self, *, force: bool) -> None:
        self.force = force
        self._staging: dict[Path, Path] = {}  # destination parent → staging dir
        self._targets: list[tuple[Path, Path]] = []  # (staged root, destination)

    def __enter__(self) -> Stager:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    def _staging_for(self, dest: Path) -> Path:
        parent = dest.parent
        if parent not in self._staging:
            parent.mkdir(parents=True, exist_ok=True)
            self._staging[parent] = Path(tempfile.mkdtemp(prefix=".migrate-v3-", dir=parent))
        return self._staging[parent]

    def begin(self, dest: Path) -> Path:
        """A fresh staged root for ``dest`` (a directory or a file path)."""
        staged = self._staging_for(dest) / dest.name
        self._targets.append((staged, dest))
        return staged

    @staticmethod
    def write(staged_root: Path, rel: Path | None, data: bytes) -> None:
        path = staged_root / rel if rel is not None else staged_root
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def blocked(self, dest: Path) -> bool:
        """True when ``dest`` exists and ``--force`` was not given."""
        return dest.exists() and not self.force

    def publish(self) -> list[Path]:
        """Move every staged target into place; returns the destinations."""
        published = []
        for staged, dest in self._targets:
            if not staged.exists():
                continue
            if dest.exists():
                backup = staged.parent / f".old-{dest.name}"
                os.replace(dest, backup)
            os.replace(staged, dest)
            published.append(dest)
        return published

    def cleanup(self) -> None:
        for staging in self._staging.values():
            shutil.rmtree(staging, ignore_errors=True)
        self._staging.clear()
