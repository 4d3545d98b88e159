"""Read what ``apply`` left behind, so verify can point at it.

``apply --report x.json`` (or the in-memory ``ApplyReport`` when ``apply
--verify`` calls :func:`run_verify`) lists, per written file, the TODOs the
codemods could not resolve. A class that fails verification is usually
explained by a TODO in the file that defines it; verify attaches those.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _entries(report: Any) -> list[Mapping[str, Any]]:
    if isinstance(report, (str, Path)):
        data = json.loads(Path(report).read_text(encoding="utf-8"))
        return list(data.get("files", []))
    files = getattr(report, "files", None)
    if files is None and isinstance(report, Mapping):
        files = report.get("files", [])
    out: list[Mapping[str, Any]] = []
    for f in files or []:
        out.append(f.to_json() if hasattr(f, "to_json") else f)
    return out


def todos_by_file(report: Any) -> dict[str, list[str]]:
    """Resolved destination path -> ``"line: CODE message"`` for each TODO."""
    result: dict[str, list[str]] = {}
    for entry in _entries(report):
        dest = entry.get("dest") or entry.get("source")
        if not dest:
            continue
        todos = [
            f"{Path(dest).name}:{t.get('line')}: {t.get('code')} {t.get('message')}"
            for t in entry.get("todos", [])
        ]
        if todos:
            result[str(Path(dest).resolve())] = todos
    return result
