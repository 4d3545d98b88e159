"""Which targets of an ``apply`` run have anything to migrate.

``apply`` writes a target only when ``check`` would report something in it
(a V2 site, an older release's namespace, a dependency on another package's
V2 code) or when one of its non-V3 files imports a package that has a V3
variant, beside it or written by this same run (``apply`` points those
imports at the variant; ``check`` sees such dependencies only between
packages that have an ``arch.py``). A package that
is already ModuleV3, or a folder without Python, is not written: a copy with
renamed registrations is not a migration. Check's own classifier decides, so
the two commands agree, and its error lines (undecodable file, syntax error)
are the ones ``apply`` prints.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from migrate_v3.check import link_dependencies
from migrate_v3.classify import Classified, classify_bytes
from migrate_v3.config import Settings
from migrate_v3.plan import Target


def classify_sources(sources: dict[str, bytes]) -> tuple[dict[str, Classified], dict[str, tuple[str, str | None]]]:
    """Check's result for each ``.py`` file (path -> bytes), dependencies on V2 packages included;
    and each file's own (kind, release), before a dependency on V2 code made a neutral file ``v2``."""
    classified = {name: classify_bytes(data, name) for name, data in sources.items()}
    scanned = {name: (c.result.kind, c.result.release) for name, c in classified.items()}
    link_dependencies(classified, Settings(cache=False))
    return classified, scanned


def _imported_packages(path: Path, c: Classified) -> set[Path | str]:
    """Directories (relative imports) and architecture names (absolute imports) ``path`` imports from."""
    out: set[Path | str] = set()
    for target, _, _ in c.relative_imports:
        level = len(target) - len(target.lstrip("."))
        first = target[level:].split(".")[0]
        if level >= 2 and first:  # one dot is the file's own package
            base = path.parent
            for _ in range(level - 1):
                base = base.parent
            out.add(base / first)
    for target, _, _ in c.absolute_arch_imports:
        parts = target.split(".")  # max.pipelines.architectures.<name>...
        if len(parts) > 3:
            out.add(parts[3])
    return out


def needing_migration(targets: list[Target], classified: dict[str, Classified], variants: Iterable[str]) -> set[int]:
    """``id`` of each target with something to migrate (see the module docstring);
    ``variants``: the names of the packages with a V3 variant beside them (the plan's map)."""

    def findings(t: Target) -> bool:
        return any(str(src) in classified and classified[str(src)].result.findings for src, _ in t.files)

    def imports(t: Target) -> set[Path | str]:
        out: set[Path | str] = set()
        for src, _ in t.files:
            c = classified.get(str(src))
            if c is not None and c.result.kind not in {"v3", "error"}:
                out |= _imported_packages(src, c)
        return out

    run = {t.name for t in targets if t.is_package}
    names = {n for n in variants if n not in run}
    beside: set[Path | str] = {*names, *(t.source.parent / n for t in targets for n in names)}
    need = {id(t) for t in targets if findings(t)}
    imported = {id(t): imports(t) for t in targets}
    grew = True
    while grew:  # a package importing one that imports a migrated one is migrated too
        migrated = set(beside)
        for t in targets:
            if id(t) in need and t.is_package:
                migrated.update((t.source, t.name))
        grew = False
        for t in targets:
            if id(t) not in need and imported[id(t)] & migrated:
                need.add(id(t))
                grew = True
    return need
