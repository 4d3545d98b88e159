"""Regenerate ``gone_26_7.json``: the names of older max releases that 26.7 no longer has.

Run ``python -m migrate_v3.knowledge.regenerate_releases`` in an environment
with the ``verify`` extra installed (max 26.7). It downloads the wheel of
every max release from 25.4.0 up to the installed one (``pip download
--no-deps``, CPython 3.11 manylinux x86_64, into a temporary folder or
``--wheels DIR``), reads the public names of each from the source inside the
wheel (``migrate_v3.knowledge.releases``: never installed, never imported),
reads the installed max's source the same way, and writes:

* ``layouts``: the release layouts whose namespaces moved as a whole (25.6/25.7
  kept ModuleV3 in ``max.nn.module_v3``; 26.1 put ModuleV3 at ``max.nn``,
  ``max.tensor``, ``max.functional``, ``max.random`` and V2 at
  ``max.nn.legacy``): every public name there, mapped to its 26.7 home, or to
  null when 26.7 has no such name.
* ``gone``: every other public name (module, class, function or value) of a
  release that is not importable from the same place in 26.7, with the
  releases it was in, and what replaced it when the wheels say so:
  ``mechanical`` only with evidence that it is the same object
  (``re-export``: in some release the old name was an import of a name 26.7
  still has; ``alias``: ``Old = New`` in a release); otherwise a hint
  (``deprecation-note``: a ``.. deprecated::`` docstring names the
  replacement; ``same-members``: the next release defines, in the same or a
  renamed module, a class with exactly the same members) or none.

Wheels are never stored in the repository.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from migrate_v3.knowledge.releases import ModuleFacts, Release, module_name, read_module

OUT = Path(__file__).with_name("gone_26_7.json")
FIRST = (25, 4, 0)

#: Old layouts: (releases, old namespace prefix, 26.7 prefix). The 26.1 moves are
#: stated by 26.1's own ``max/nn/__init__.py`` ("For legacy layer-based API, use
#: max.nn.legacy"); each name below them is checked against 26.7 one by one.
LAYOUTS: list[tuple[tuple[str, ...], str, str]] = [
    (("25.6", "25.7"), "max.nn.module_v3", "max.experimental.nn"),
    (("26.1",), "max.nn.legacy", "max.nn"),
    (("26.1",), "max.nn", "max.experimental.nn"),
    (("26.1",), "max.tensor", "max.experimental.tensor"),
    (("26.1",), "max.functional", "max.experimental.functional"),
    (("26.1",), "max.random", "max.experimental.random"),
]


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


def available_versions() -> list[str]:
    """max versions on the package index, from ``pip index versions max``."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "max"], capture_output=True, text=True, check=True
    ).stdout
    m = re.search(r"Available versions:\s*(.*)", out)
    return [v.strip() for v in m.group(1).split(",")] if m else []


def download(version: str, into: Path) -> Path:
    """The wheel of ``version`` in ``into`` (downloaded with pip when not there yet)."""
    found = sorted(into.glob(f"max-{version}-*.whl"))
    if found:
        return found[0]
    subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
            "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", "--abi", "none",
            "--platform", "manylinux_2_34_x86_64", f"max=={version}", "-d", str(into),
        ],
        check=True,
    )
    return sorted(into.glob(f"max-{version}-*.whl"))[0]


def _read_all(files: Iterable[tuple[str, str]]) -> Iterator[ModuleFacts]:
    for path, source in files:
        named = module_name(path)
        if named is not None:
            yield read_module(named[0], named[1], source)


def _merged(facts: Iterable[ModuleFacts]) -> list[ModuleFacts]:
    """One entry per module: a ``.py`` wins over its ``.pyi`` stub (read first)."""
    out: dict[str, ModuleFacts] = {}
    for f in facts:
        out[f.name] = f
    return list(out.values())


def wheel_release(version: str, wheel: Path) -> Release:
    with zipfile.ZipFile(wheel) as z:
        names = sorted(
            (n for n in z.namelist() if n.startswith("max/") and n.endswith((".py", ".pyi"))),
            key=lambda n: (n.endswith(".py"), n),
        )
        files = [(n, z.read(n).decode("utf-8", errors="replace")) for n in names]
    return Release(version, _merged(_read_all(files)))


def installed_release() -> Release:
    import importlib.util
    from importlib.metadata import version

    spec = importlib.util.find_spec("max")
    assert spec is not None and spec.submodule_search_locations, "max is not installed"
    root = Path(list(spec.submodule_search_locations)[0])
    paths = sorted(
        (p for p in root.rglob("*.py*") if p.suffix in {".py", ".pyi"} and "__pycache__" not in p.parts),
        key=lambda p: (p.suffix == ".py", str(p)),
    )
    files = [(f"max/{p.relative_to(root).as_posix()}", p.read_text(encoding="utf-8", errors="replace")) for p in paths]
    return Release(version("max"), _merged(_read_all(files)))


def _layout_of(release: str, qualified: str) -> tuple[str, str] | None:
    """(old prefix, 26.7 prefix) of the layout ``qualified`` belongs to in ``release``."""
    short = _short(release)
    for releases, old, new in LAYOUTS:  # the longest prefix is listed first
        if short in releases and (qualified == old or qualified.startswith(old + ".")):
            return old, new
    return None


def _short(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _moved(release: str, qualified: str) -> str:
    """``qualified`` of ``release`` spelled in 26.7's layout (the same when its namespace did not move)."""
    layout = _layout_of(release, qualified)
    return qualified if layout is None else layout[1] + qualified[len(layout[0]):]


def _prune(table: dict[str, dict[str, Any]]) -> None:
    """A name inside a gone module needs no entry of its own unless it says what replaced it."""

    def module_gone(qualified: str) -> bool:
        module = qualified.rpartition(".")[0]
        while module:
            if table.get(module, {}).get("kind") == "module":
                return True
            module = module.rpartition(".")[0]
        return False

    for qualified in [q for q, entry in table.items() if entry["to"] is None and module_gone(q)]:
        del table[qualified]


def _public_pairs(release: Release) -> Iterator[tuple[str, str, str]]:
    for module in release.public_modules():
        for name, kind in release.public_names(module).items():
            yield module, name, kind


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


#: What a name resolves to in one release: (kind, defining module, name).
Site = tuple[str, str, str]


class Current:
    """The installed release, indexed for the questions the diff asks."""

    def __init__(self, release: Release) -> None:
        self.release = release
        #: what a public API name resolves to -> those names (listed in ``__all__``, or
        #: defined where they are: not a module's incidental imports)
        self.homes: dict[Site, list[str]] = {}
        #: a class or function's name and kind -> the public places 26.7 defines one
        self.by_name: dict[tuple[str, str], set[Site]] = {}
        for module, name, _ in _public_pairs(release):
            facts = release.modules[module]
            site = release.resolve(module, name)
            binding = facts.bindings.get(name)
            api = (facts.all is not None and name in facts.all) or (binding is not None and binding[0] == "def")
            if api and site[0] != "external":
                self.homes.setdefault(site, []).append(f"{module}.{name}")
            if site[0] in {"class", "function"} and not _private(site[1]):
                self.by_name.setdefault((site[2], site[0]), set()).add(site)

    def exists(self, qualified: str) -> bool:
        return self.release.exists(qualified)

    def site(self, qualified: str) -> Site:
        module, _, name = qualified.rpartition(".")
        return self.release.resolve(module, name)

    def home(self, site: Site, old: str) -> str | None:
        """The public name to suggest for ``site``: one in the defining module's own
        package line first, then the shortest, then the one nearest ``old``."""
        homes = self.homes.get(site)
        if not homes:
            return None
        defining, parts = site[1], old.split(".")

        def shared(q: str) -> int:
            n = 0
            for a, b in zip(q.split(".")[:-1], parts[:-1], strict=False):
                if a != b:
                    break
                n += 1
            return n

        def own(q: str) -> bool:
            module = q.rpartition(".")[0]
            return defining == module or defining.startswith(module + ".")

        return sorted(homes, key=lambda q: (not own(q), q.count("."), -shared(q), q))[0]


class Diff:
    """Old releases against the installed one."""

    def __init__(self, old: list[Release], current: Release) -> None:
        self.old = sorted(old, key=lambda r: _key(r.version))
        self.current = Current(current)
        self.layouts: dict[str, dict[str, Any]] = {}
        self.gone: dict[str, dict[str, Any]] = {}
        self._hops: dict[str, list[tuple[Release, list[tuple[str, str, str]]]]] = {}

    def run(self) -> None:
        for release in self.old:
            for module, name, kind in _public_pairs(release):
                qualified = f"{module}.{name}"
                layout = _layout_of(release.version, qualified)
                table = self.gone
                if layout is not None:
                    short = _short(release.version)
                    moved = self.layouts.setdefault(short, {"moves": {}, "missing": {}})
                    moved["moves"][layout[0]] = layout[1]
                    if self.current.exists(_moved(release.version, qualified)):
                        continue
                    table = moved["missing"]
                elif self.current.exists(qualified):
                    continue
                entry = table.setdefault(qualified, {"kind": kind, "first": release.version})
                entry["last"] = release.version
                self._hops.setdefault(qualified, []).append((release, release.hops(module, name)))
        tables = [self.gone, *(layout["missing"] for layout in self.layouts.values())]
        for table in tables:
            for qualified, entry in table.items():
                entry.update(self._replacement(qualified, entry))
        for table in tables:
            _prune(table)

    def _replacement(self, qualified: str, entry: dict[str, Any]) -> dict[str, Any]:
        """Evidence that it is the same object (the newest release's first); else a hint; else none."""
        for release, hops in reversed(self._hops[qualified]):
            found = self._same_object(release, qualified, hops)
            if found is not None:
                return found
        last = next(r for r in self.old if r.version == entry["last"])
        module, _, name = qualified.rpartition(".")
        site = last.resolve(module, name)
        for hint in (self._deprecation_note, self._same_members, self._same_name):
            found = hint(last, qualified, site)
            if found is not None:
                return found
        return {"to": None, "mechanical": False, "evidence": None}

    def _same_object(self, release: Release, qualified: str, hops: list[tuple[str, str, str]]) -> dict[str, Any] | None:
        """In ``release``, ``qualified`` was imported or aliased from a name 26.7 still has."""
        how = "re-export"
        for module, name, step in hops[1:]:
            how = "alias" if step == "alias" or how == "alias" else step
            other = _moved(release.version, f"{module}.{name}")
            if not self.current.exists(other):
                continue
            home = self.current.home(self.current.site(other), qualified)
            if home is not None:
                via = f"{module}.{name}"  # as that release spelled it
                return {"to": home, "mechanical": True, "evidence": how, "in": release.version, "via": via}
        return None

    def _deprecation_note(self, last: Release, qualified: str, site: Site) -> dict[str, Any] | None:
        """A ``.. deprecated:: Use :obj:`X` instead.`` docstring names the replacement."""
        facts = last.modules.get(site[1])
        named = facts.deprecated.get(site[2]) if facts is not None else None
        if named is None:
            return None
        module = site[1]
        while module:  # the name the docstring gives, looked up from the defining module outwards
            candidate = f"{module}.{named}"
            if self.current.exists(candidate):
                home = self.current.home(self.current.site(candidate), qualified)
                if home is not None:
                    return {"to": home, "mechanical": False, "evidence": "deprecation-note",
                            "in": last.version, "via": f"{site[1]}.{site[2]}"}
            module = module.rpartition(".")[0]
        return None

    def _same_members(self, last: Release, qualified: str, site: Site) -> dict[str, Any] | None:
        """The next release defines exactly one other class with exactly the same (3+) members."""
        facts = last.modules.get(site[1])
        members = facts.members.get(site[2]) if facts is not None and site[0] == "class" else None
        if not members or len(members) < 3:
            return None
        following = next((r for r in self.old if _key(r.version) > _key(last.version)), self.current.release)
        matches = [
            f"{m.name}.{cls}" for m in following.modules.values() for cls, mem in m.members.items()
            if mem == members and (m.name, cls) != (site[1], site[2])
        ]
        if len(matches) != 1 or not self.current.exists(matches[0]):
            return None
        home = self.current.home(self.current.site(matches[0]), qualified)
        if home is None:
            return None
        return {"to": home, "mechanical": False, "evidence": "same-members", "in": following.version, "via": matches[0]}

    def _same_name(self, last: Release, qualified: str, site: Site) -> dict[str, Any] | None:
        """26.7 defines exactly one public class (or function) of this name."""
        if site[0] not in {"class", "function"}:
            return None
        sites = self.current.by_name.get((site[2], site[0]), set())
        home = self.current.home(next(iter(sites)), qualified) if len(sites) == 1 else None
        if home is None:
            return None
        return {"to": home, "mechanical": False, "evidence": "same-name", "in": self.current.release.version,
                "via": f"{site[1]}.{site[2]}"}


def dumps(version: str, versions: list[str], diff: Diff) -> str:
    """The JSON text: one line per name, so that a regeneration's diff reads name by name."""

    def line(key: str, value: object) -> str:
        return f"  {json.dumps(key)}: {json.dumps(value, sort_keys=True, separators=(',', ':'))}"

    def table(entries: dict[str, Any], indent: str) -> str:
        if not entries:
            return "{}"
        return "{\n" + ",\n".join(indent + line(k, v) for k, v in sorted(entries.items())) + f"\n{indent}}}"

    layouts = ",\n".join(
        f'  {json.dumps(release)}: {{\n    "moves": {json.dumps(layout["moves"], sort_keys=True)},\n'
        f'    "missing": {table(layout["missing"], "    ")}\n  }}'
        for release, layout in sorted(diff.layouts.items())
    )
    gone = table(diff.gone, "")
    head = f'{{\n"max_version": {json.dumps(version)},\n"releases": {json.dumps(versions)},\n'
    return f'{head}"layouts": {{\n{layouts}\n}},\n"gone": {gone}\n}}\n'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", type=Path, help="folder for the downloaded wheels (kept; default: a temporary one)")
    parser.add_argument("--versions", help="comma-separated releases (default: pip index versions max, from 25.4.0)")
    args = parser.parse_args(argv)
    current = installed_release()
    versions = args.versions.split(",") if args.versions else [
        v for v in available_versions() if FIRST <= _key(v) < _key(current.version)
    ]
    versions = sorted(versions, key=_key)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.wheels or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        old = [wheel_release(v, download(v, folder)) for v in versions]
    diff = Diff(old, current)
    diff.run()
    OUT.write_text(dumps(current.version, versions, diff), encoding="utf-8")
    mechanical = sum(1 for e in diff.gone.values() if e["mechanical"])
    print(f"wrote {OUT}: {len(diff.gone)} gone names ({mechanical} mechanical renames) from {', '.join(versions)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
