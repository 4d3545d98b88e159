"""Rule files: the JSON form of a rule list, for models without a built-in template.

Format: a JSON list of rules, or an object with a "rules" list. Each rule is
`{"kind": "rename", "source": "...", "target": "...", ...}` with the field
names of the dataclasses in `rules.py` (`sources`/`targets` for the
many-sided kinds).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .rules import Rule, rule_from_dict, rule_to_dict
from .sources import SourceError


def load_rules(path: Path) -> list[Rule]:
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SourceError(f"{path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise SourceError(f"{path}: invalid JSON: {exc}") from exc
    items = data.get("rules") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise SourceError(f"{path}: expected a list of rules or {{'rules': [...]}}")
    return [rule_from_dict(item) for item in items]


def dump_rules(rules: list[Rule]) -> str:
    return json.dumps({"rules": [rule_to_dict(r) for r in rules]}, indent=2)
