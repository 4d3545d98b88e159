"""Where the V3 variant gets registered, and how to tell the user.

A package inside a tree whose ``__init__.py`` lists architectures (MAX's
``pipelines/architectures/__init__.py``: ``_LazyArch(name, ".pkg", "x_arch")``)
needs one more entry; ``--register`` adds it right after the V2 entry. A
package of the user's own is loaded with ``--custom-architectures`` and must
export ``ARCHITECTURES``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from codemods.registration import SUFFIX, v3_arch_variable

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


def hint_for(package_dir: Path, v3_package: str, *, register: bool) -> RegistrationHint:
    """What to add (or what was added) so the migrated package can be served."""
    registry = package_dir.parent / "__init__.py"
    text = registry.read_text(encoding="utf-8") if registry.is_file() else ""
    entries = registry_entries(text, package_dir.name) if "_LazyArch(" in text else []
    if not entries:
        arch = f"{package_dir.name}_modulev3_arch"
        return RegistrationHint(
            f"{v3_package}: serve it as a custom architecture: export ARCHITECTURES = [{arch}] "
            f"from {v3_package}/__init__.py, then `max serve --model <repo> "
            f"--custom-architectures {package_dir.parent / v3_package} --prefer-module-v3`"
        )
    new_entries = []
    for _, name, var in entries:
        v3_var = v3_arch_variable(var) or var
        new_entries.append(f'_LazyArch("{name}{SUFFIX}", ".{v3_package}", "{v3_var}"),')
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
