"""Where the V3 variant gets registered, and how to tell the user.

A package inside a tree whose ``__init__.py`` lists architectures (MAX's
``pipelines/architectures/__init__.py``: ``_LazyArch(name, ".pkg", "x_arch")``)
needs one more entry; ``--register`` adds it right after the V2 entry. A
package of the user's own is loaded with ``--custom-architectures`` and must
export ``ARCHITECTURES``. Every name a hint or an entry uses is one the
written ``__init__.py`` or ``arch.py`` defines: a package without an
architecture (no ``arch.py``, e.g. a text encoder other packages import)
gets no registration.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from codemods.registration import SUFFIX, v3_arch_variable
from migrate_v3.plan import top_level_names

_LAZY = re.compile(
    r'(?P<indent>[ \t]*)_LazyArch\(\s*"(?P<name>[^"]+)",\s*"\.(?P<pkg>\w+)",\s*"(?P<var>\w+)",?\s*\),?'
)


@dataclass
class RegistrationHint:
    message: str
    registry: Path | None = None
    entry: str | None = None
    added: bool = False


def registry_entries(registry_text: str, package: str) -> list[tuple[str, str, str]]:
    """(indent+match end, name, variable) of the V2 entries for ``package``."""
    return [
        (m.group(0), m.group("name"), m.group("var"))
        for m in _LAZY.finditer(registry_text)
        if m.group("pkg") == package
    ]


@dataclass(frozen=True)
class OutputNames:
    """What the written package defines: the names its ``__init__.py`` binds (None: not
    knowable statically) and the ``SupportedArchitecture`` variables of its ``arch.py``."""

    exported: frozenset[str] | None
    architectures: tuple[str, ...]

    @classmethod
    def of(cls, init: str | None, arch: str | None) -> OutputNames:
        exported: frozenset[str] | None = frozenset()
        if init is not None:
            names = top_level_names(ast.parse(init))
            exported = None if names is None else frozenset(names)
        return cls(exported, tuple(architecture_variables(arch)) if arch is not None else ())

    def exports(self, name: str) -> bool:
        """Whether ``from package import name`` works (assumed when the names can't be known)."""
        return name in self.architectures if self.exported is None else name in self.exported


def architecture_variables(text: str) -> list[str]:
    """Top-level ``x = SupportedArchitecture(...)`` variables of an ``arch.py``."""
    out: list[str] = []
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if isinstance(value, ast.Call):
            func = value.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name == "SupportedArchitecture":
                out.extend(t.id for t in targets if isinstance(t, ast.Name))
    return out


def _custom_hint(package_dir: Path, v3_package: str, names: OutputNames) -> RegistrationHint:
    served = f"`max serve --model <repo> --custom-architectures {package_dir.parent / v3_package} --prefer-module-v3`"
    if names.exported is not None and "ARCHITECTURES" in names.exported:
        return RegistrationHint(f"{v3_package}: exports ARCHITECTURES: serve it with {served}")
    archs = ", ".join(names.architectures)
    if not archs:
        return RegistrationHint(f"{v3_package}: no architecture to register (no SupportedArchitecture in arch.py)")
    how = "" if all(names.exports(a) for a in names.architectures) else f"from .arch import {archs}; "
    return RegistrationHint(
        f"{v3_package}: serve it as a custom architecture: add `{how}ARCHITECTURES = [{archs}]` "
        f"to {v3_package}/__init__.py, then {served}"
    )


def hint_for(package_dir: Path, v3_package: str, *, register: bool, names: OutputNames) -> RegistrationHint:
    """What to add (or what was added) so the migrated package, which defines ``names``, can be served."""
    registry = package_dir.parent / "__init__.py"
    text = registry.read_text(encoding="utf-8") if registry.is_file() else ""
    entries = registry_entries(text, package_dir.name) if "_LazyArch(" in text else []
    if not entries:
        return _custom_hint(package_dir, v3_package, names)
    new_entries = []
    for _, name, var in entries:
        v3_var = v3_arch_variable(var) or var
        if names.exports(v3_var):
            new_entries.append(f'_LazyArch("{name}{SUFFIX}", ".{v3_package}", "{v3_var}"),')
    if not new_entries:
        wanted = ", ".join(v3_arch_variable(var) or var for _, _, var in entries)
        return RegistrationHint(f"{registry}: {v3_package} does not export {wanted}: not registered", registry)
    entry = "\n".join(new_entries)
    if all(e.split(",")[0] in text for e in new_entries):
        return RegistrationHint(f"{registry}: already registers {v3_package}", registry, entry)
    if not register:
        return RegistrationHint(
            f"{registry}: add next to the {package_dir.name} entry (or rerun with --register):\n    {entry}",
            registry,
            entry,
        )
    last = entries[-1][0]
    indent = re.match(r"[ \t]*", last)
    pad = indent.group(0) if indent else ""
    addition = "".join(f"\n{pad}{e}" for e in new_entries)
    registry.write_text(text.replace(last, last + addition, 1), encoding="utf-8")
    return RegistrationHint(f"{registry}: registered {v3_package}", registry, entry, added=True)
