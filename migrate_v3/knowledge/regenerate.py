"""Regenerate ``max_26_7.json`` from an installed ``max`` package.

Run ``python -m migrate_v3.knowledge.regenerate`` in an environment with the
``verify`` extra installed. The facts are derived, never typed by hand:

* ``allowed_max_nn``: every ``max.nn`` name that an official ``*_modulev3``
  port imports. V3 code may keep these (KV-cache parameter classes, mask
  variants, comm/EP buffers, kernel functions...), so they do not make a V3
  file "mixed".
* ``ops``: every public function of ``max.graph.ops`` (and its submodules
  ``allreduce``, ``reducescatter``, ``random``) and whether
  ``max.experimental.functional`` has a function of the same name.
* ``functional``: the public names of ``max.experimental.functional``.
"""

from __future__ import annotations

import ast
import inspect
import json
import sys
from pathlib import Path

OUT = Path(__file__).with_name("max_26_7.json")


def _max_root() -> Path:
    import max

    return Path(list(max.__path__)[0])


def allowed_max_nn(architectures: Path) -> dict[str, list[str]]:
    """Names each official port imports from ``max.nn``/``max.nn.*``."""
    found: dict[str, set[str]] = {}
    for port in sorted(p for p in architectures.iterdir() if p.name.endswith("_modulev3")):
        for path in sorted(port.rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.ImportFrom)
                    and node.level == 0
                    and node.module
                    and (node.module == "max.nn" or node.module.startswith("max.nn."))
                ):
                    for alias in node.names:
                        found.setdefault(alias.name, set()).add(node.module)
    return {name: sorted(mods) for name, mods in sorted(found.items())}


def ops_table() -> dict[str, dict[str, object]]:
    import max.experimental.functional as F
    import max.graph.ops as ops

    table: dict[str, dict[str, object]] = {}
    for name in sorted(dir(ops)):
        obj = getattr(ops, name)
        if name.startswith("_"):
            continue
        if inspect.ismodule(obj):
            if name not in {"allreduce", "reducescatter", "random"}:
                continue
            for sub in sorted(dir(obj)):
                fn = getattr(obj, sub)
                if sub.startswith("_") or not inspect.isfunction(fn):
                    continue
                if getattr(fn, "__module__", "").startswith("max.graph.ops"):
                    table[f"{name}.{sub}"] = {"in_functional": False}
            continue
        if not (inspect.isfunction(obj) or inspect.isbuiltin(obj)):
            continue
        if not getattr(obj, "__module__", "").startswith("max.graph.ops"):
            continue
        table[name] = {"in_functional": hasattr(F, name)}
    return table


def main() -> int:
    import max.experimental.functional as F

    root = _max_root()
    data = {
        "max_version": _version(),
        "allowed_max_nn": allowed_max_nn(root / "pipelines" / "architectures"),
        "ops": ops_table(),
        "functional": sorted(n for n in dir(F) if not n.startswith("_")),
    }
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(data['allowed_max_nn'])} allowed names, {len(data['ops'])} ops)")
    return 0


def _version() -> str:
    from importlib.metadata import version

    return version("max")


if __name__ == "__main__":
    sys.exit(main())
