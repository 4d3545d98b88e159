"""Import a V2 or V3 package (or one module) from a path, under an alias.

Both sides often share module names (``layers``, ``model``), and a migrated
package sits in a temporary directory, so each side is imported under a
private top-level name. Package ``__init__`` files are not executed: they
tend to import registration machinery the classes do not need; relative
imports still work because the alias packages carry ``__path__``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path

_ALIAS_COUNTER = count()


@dataclass
class LoadedSide:
    """The modules of one side and the errors met while importing them."""

    root: Path
    alias: str
    modules: list[types.ModuleType] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)


def _stub_package(name: str, path: Path) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = [str(path)]
    module.__package__ = name
    module.__file__ = str(path / "__init__.py")
    sys.modules[name] = module
    return module


def load_side(path: Path, label: str) -> LoadedSide:
    """Import every ``.py`` file under ``path`` (or the one file) under an alias."""
    path = path.resolve()
    alias = f"_migrate_v3_verify_{label}_{next(_ALIAS_COUNTER)}"
    if path.is_file():
        root = path.parent
        files = [path]
    else:
        root = path
        files = sorted(
            p for p in path.rglob("*.py")
            if "__pycache__" not in p.parts and p.name != "__init__.py"
        )
    side = LoadedSide(root=root, alias=alias, files=files)
    _stub_package(alias, root)
    for sub in sorted({f.parent for f in files} | {p for f in files for p in f.parents}):
        if sub != root and root in sub.parents:
            rel = sub.relative_to(root).parts
            _stub_package(".".join((alias, *rel)), sub)
    for file in files:
        rel = file.relative_to(root).with_suffix("").parts
        name = ".".join((alias, *rel))
        try:
            side.modules.append(importlib.import_module(name))
        except Exception as exc:  # noqa: BLE001 - reported per file
            side.errors[str(file)] = f"{type(exc).__name__}: {exc}"
    return side


def defined_classes(side: LoadedSide) -> dict[str, type]:
    """Every class defined (not imported) in this side's modules, by name."""
    found: dict[str, type] = {}
    for module in side.modules:
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__:
                found.setdefault(value.__name__, value)
    return found


def module_classes(side: LoadedSide, base: type) -> dict[str, type]:
    """Classes defined on this side that subclass ``base``, by name."""
    return {
        name: cls for name, cls in defined_classes(side).items()
        if issubclass(cls, base) and cls is not base
    }
