"""Render a CheckResult as grouped text or JSON.

A DeepSeek-V3 checkpoint has 92k names; a useful report has a few dozen
lines. Names are grouped by their non-numeric skeleton, and each numeric
segment is collapsed into a range list (`layers.{3-60}.mlp.experts.{0-255}`),
with the exact count of names in the group.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .check import CheckResult
from .engine import Leftover


@dataclass(frozen=True)
class Group:
    pattern: str
    count: int
    example: str


def ranges(values: Iterable[int]) -> str:
    """`[0,1,2,5,7,8]` -> `0-2,5,7-8`."""
    vs = sorted(set(values))
    out: list[str] = []
    i = 0
    while i < len(vs):
        j = i
        while j + 1 < len(vs) and vs[j + 1] == vs[j] + 1:
            j += 1
        out.append(str(vs[i]) if i == j else f"{vs[i]}-{vs[j]}")
        i = j + 1
    return ",".join(out)


def group_names(names: Iterable[str]) -> list[Group]:
    """Collapse numeric segments into ranges; groups keep first-seen order."""
    keys: dict[tuple[str, ...], tuple[list[set[int]], list[int], str]] = {}
    for name in names:
        parts = name.split(".")
        key = tuple("#" if p.isdigit() else p for p in parts)
        entry = keys.get(key)
        if entry is None:
            entry = keys[key] = ([set() for p in parts if p.isdigit()], [0], name)
        nums = [int(p) for p in parts if p.isdigit()]
        for s, v in zip(entry[0], nums, strict=True):
            s.add(v)
        entry[1][0] += 1
    groups: list[Group] = []
    for key, (sets, count, example) in keys.items():
        it = iter(sets)
        rendered = []
        for seg in key:
            if seg == "#":
                s = next(it)
                rendered.append(str(next(iter(s))) if len(s) == 1 else "{" + ranges(s) + "}")
            else:
                rendered.append(seg)
        groups.append(Group(".".join(rendered), count[0], example))
    return groups


def _groups_json(names: list[str]) -> list[dict[str, Any]]:
    return [{"pattern": g.pattern, "count": g.count, "example": g.example} for g in group_names(names)]


def _leftover_json(lo: Leftover) -> dict[str, Any]:
    return {"rule": lo.rule.label, "group": lo.bindings, "present": lo.present, "missing": lo.missing}


def to_json(res: CheckResult, header: dict[str, Any]) -> dict[str, Any]:
    """A JSON-able summary; name lists appear only as groups."""
    return {
        **header,
        "ok": res.ok,
        "counts": {
            "checkpoint": res.n_checkpoint, "target": res.n_target, "produced": res.n_produced,
            "unconsumed": len(res.unconsumed), "missing": len(res.missing),
            "unexpected": len(res.unexpected), "never_fired": len(res.never_fired),
            "never_fired_optional": len(res.never_fired_optional), "mismatches": len(res.mismatches),
            "leftovers": len(res.leftovers), "errors": len(res.errors),
            "explained_absent": sum(map(len, res.explained_absent.values())),
            "dropped": sum(map(len, res.dropped.values())), "unchecked_shapes": res.unchecked_shapes,
        },
        "unconsumed": _groups_json(res.unconsumed),
        "missing": _groups_json(res.missing),
        "unexpected": _groups_json(res.unexpected),
        "never_fired": [cr.label for cr in res.never_fired],
        "never_fired_optional": [cr.label for cr in res.never_fired_optional],
        "mismatches": [
            {**g, "produced": _mm(res, g["example"], "produced"), "expected": _mm(res, g["example"], "expected")}
            for g in _groups_json([m.name for m in res.mismatches])
        ],
        "leftovers": [_leftover_json(lo) for lo in res.leftovers],
        "errors": res.errors[:50],
        "explained": [
            {"what": what, "reason": reason, "count": len(names), "groups": _groups_json(names)}
            for (what, reason), names in _explained(res).items()
        ],
    }


def _explained(res: CheckResult) -> dict[tuple[str, str], list[str]]:
    """Explained names keyed by (what happened, reason), merged across rules."""
    out: dict[tuple[str, str], list[str]] = {}
    for i, names in res.explained_absent.items():
        out.setdefault(("produced, absent from target", res.rules[i].rule.absent_ok), []).extend(names)
    for i, names in res.dropped.items():
        out.setdefault(("dropped", getattr(res.rules[i].rule, "reason", "")), []).extend(names)
    return out


def _mm(res: CheckResult, name: str, which: str) -> dict[str, Any]:
    m = next(x for x in res.mismatches if x.name == name)
    meta = m.produced if which == "produced" else m.expected
    return {"shape": list(meta.shape) if meta.shape is not None else None, "dtype": meta.dtype}


def to_text(res: CheckResult, header: dict[str, Any], limit: int = 25) -> str:
    """Human report: one section per category, grouped, capped at `limit` groups each."""
    lines = [
        f"checkpoint: {header.get('checkpoint')} ({header.get('checkpoint_kind')}, {res.n_checkpoint:,} names)",
        f"target:     {header.get('target')} ({res.n_target:,} parameters)",
        f"rules:      {header.get('rules')} ({len(res.rules)} rules); produced {res.n_produced:,} names",
        "",
    ]

    def section(title: str, names: list[str]) -> None:
        mark = "ok  " if not names else "FAIL"
        lines.append(f"[{mark}] {title}: {len(names):,}")
        groups = group_names(names)
        for g in groups[:limit]:
            lines.append(f"         {g.count:>7,}  {g.pattern}")
        if len(groups) > limit:
            lines.append(f"         ... {len(groups) - limit} more groups")

    section("checkpoint keys no rule consumed", res.unconsumed)
    section("parameters nothing produced", res.missing)
    mark = "ok  " if not res.never_fired else "FAIL"
    lines.append(f"[{mark}] rules that never fired: {len(res.never_fired)}"
                 f" (+{len(res.never_fired_optional)} optional)")
    lines += [f"         {cr.label}" for cr in res.never_fired]
    mark = "ok  " if not res.mismatches else "FAIL"
    lines.append(f"[{mark}] shape/dtype mismatches: {len(res.mismatches):,}")
    for g in group_names([m.name for m in res.mismatches])[:limit]:
        m = next(x for x in res.mismatches if x.name == g.example)
        lines.append(
            f"         {g.count:>7,}  {g.pattern}: produced {_fmt(m.produced)}, module wants {_fmt(m.expected)}"
        )
    section("produced names the target lacks (unexplained)", res.unexpected)
    mark = "ok  " if not res.leftovers else "FAIL"
    lines.append(f"[{mark}] incomplete many-to-one groups: {len(res.leftovers)}")
    lines += [f"         {lo.describe()}" for lo in res.leftovers[:limit]]
    if res.errors:
        lines.append(f"[FAIL] rule errors: {len(res.errors)}")
        lines += [f"         {e}" for e in res.errors[:limit]]
    explained = _explained(res)
    if explained:
        lines.append("")
        lines.append("explained (not problems):")
        for (what, reason), names in explained.items():
            lines.append(f"  {len(names):,} {what}: {reason}")
            groups = group_names(names)
            for g in groups[:limit]:
                lines.append(f"         {g.count:>7,}  {g.pattern}")
            if len(groups) > limit:
                lines.append(f"         ... {len(groups) - limit} more groups")
    if res.unchecked_shapes:
        lines.append(f"note: {res.unchecked_shapes:,} names had no shape on one side; shapes not compared")
    lines.append("")
    lines.append("OK" if res.ok else f"PROBLEMS: {res.problems:,}")
    return "\n".join(lines)


def _fmt(meta: Any) -> str:
    shape = "?" if meta.shape is None else "x".join(map(str, meta.shape)) or "scalar"
    return f"{shape} {meta.dtype or '?'}"


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, sort_keys=False)
