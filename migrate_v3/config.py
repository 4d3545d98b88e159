"""Settings from ``[tool.migrate-v3]`` in the nearest pyproject.toml, merged with flags."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from migrate_v3.findings import Record


def _toml(text: str) -> dict[str, Any]:
    """tomllib.loads, imported when a pyproject.toml may hold our table (check starts faster)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib.loads(text)




class ConfigError(Exception):
    """A pyproject.toml that cannot be read or has an unknown setting."""


class Settings(Record):
    """check's settings: [tool.migrate-v3] keys (dashes or underscores), then flags."""

    __slots__ = ("select", "ignore", "exclude", "jobs", "cache", "cache_dir", "syntax", "format", "root", "source")

    def __init__(
        self, *, select: tuple[str, ...] = (), ignore: tuple[str, ...] = (), exclude: tuple[str, ...] = (),
        jobs: int = 0, cache: bool = True, cache_dir: str = ".migrate_v3_cache", syntax: bool = True,
        format: str = "text", root: Path | None = None, source: Path | None = None,
    ) -> None:
        self.select, self.ignore, self.exclude = select, ignore, exclude
        self.jobs = jobs  # 0: one worker per core
        self.cache, self.cache_dir, self.syntax, self.format = cache, cache_dir, syntax, format
        self.root: Path = Path.cwd() if root is None else root
        self.source = source  # the pyproject.toml read, if any


_LISTS = {"select", "ignore", "exclude"}


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above ``start`` that has a [tool.migrate-v3] table."""
    here = start.resolve()
    for directory in [here, *here.parents]:
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                text = candidate.read_text(encoding="utf-8")
                # No "migrate-v3" in the text: no table of ours, and no need to parse it.
                data = _toml(text) if "migrate-v3" in text else {}
            except (OSError, UnicodeDecodeError, ValueError) as exc:  # TOMLDecodeError is a ValueError
                raise ConfigError(f"{candidate}: {exc}") from exc
            if "migrate-v3" in data.get("tool", {}):
                return candidate
    return None


def load_settings(start: Path) -> Settings:
    """Read the nearest ``[tool.migrate-v3]``; unknown keys are an error, not a silent no-op."""
    path = find_pyproject(start if start.is_dir() else start.parent)
    settings = Settings()
    if path is None:
        return settings
    table: dict[str, Any] = _toml(path.read_text(encoding="utf-8"))["tool"]["migrate-v3"]
    known = {name.replace("_", "-"): name for name in Settings.__slots__} | {name: name for name in Settings.__slots__}
    for key, value in table.items():
        if isinstance(value, dict):
            continue  # sub-tables (e.g. [tool.migrate-v3.verify]) belong to their commands
        name = known.get(key)
        if name is None or name in {"root", "source"}:
            raise ConfigError(f"{path}: unknown setting [tool.migrate-v3] {key}")
        setattr(settings, name, tuple(value) if name in _LISTS else value)
    settings.root = path.parent
    settings.source = path
    return settings


def tool_table(start: Path, name: str) -> dict[str, Any]:
    """A sub-table such as ``[tool.migrate-v3.verify]`` (empty when absent)."""
    path = find_pyproject(start if start.is_dir() else start.parent)
    if path is None:
        return {}
    table = _toml(path.read_text(encoding="utf-8"))["tool"]["migrate-v3"].get(name, {})
    return dict(table) if isinstance(table, dict) else {}
