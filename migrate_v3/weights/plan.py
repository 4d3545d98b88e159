"""Per-device weight bytes under tensor / expert parallelism.

Distribution is a separate step from naming (the seed's DistConverter). The
preferred source is the V3 module itself: built lazily on a virtual-GPU mesh,
every parameter carries a `DeviceMapping` (Replicated, Sharded(axis), or a
single device for ExpertParallelMoE's experts). Where the module does not
expose a placement — TensorParallelMoE keeps routed experts on the host and
shards them at trace time, and some modules cannot be built multi-device —
the rule's `placement` hint is used instead, and the plan says so.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .ruleset import RuleSet
from .target import Placement, Target, TargetParam

KINDS = ("replicated", "column", "row", "expert", "other")


@dataclass
class Plan:
    devices: int
    bytes: dict[str, list[int]] = field(default_factory=dict)  # kind -> per-device bytes
    derived: dict[str, int] = field(default_factory=dict)  # reason -> #params from rule hints
    unknown: list[str] = field(default_factory=list)
    source: str = ""

    def per_device(self) -> list[int]:
        return [sum(self.bytes.get(k, [0] * self.devices)[d] for k in KINDS) for d in range(self.devices)]

    def add(self, kind: str, shares: list[int]) -> None:
        row = self.bytes.setdefault(kind, [0] * self.devices)
        for d, b in enumerate(shares):
            row[d] += b


def _split(total_dim: int, n: int) -> list[int]:
    base, extra = divmod(total_dim, n)
    return [base + (1 if d < extra else 0) for d in range(n)]


def _shares(nbytes: int, shape: tuple[int, ...], axis: int, n: int) -> list[int]:
    if not shape:
        return [nbytes] * n
    per_row = nbytes // max(shape[axis], 1)
    return [per_row * s for s in _split(shape[axis], n)]


def _from_placement(p: Placement, nbytes: int, shape: tuple[int, ...], n: int) -> tuple[str, list[int]] | None:
    if n == 1 or p.kind == "replicated":
        return "replicated", [nbytes] * n
    if p.kind == "sharded" and p.axis is not None:
        kind = "column" if p.axis == 0 else "row"
        if len(p.shard_shapes) == n:  # the module's own shard shapes
            total = math.prod(shape) or 1
            return kind, [nbytes * math.prod(s) // total for s in p.shard_shapes]
        return kind, _shares(nbytes, shape, p.axis, n)
    if p.kind == "device" and p.device is not None:
        shares = [0] * n
        shares[p.device % n] = nbytes
        return "expert", shares
    return None


def _from_hint(hint: str, name_bindings: Mapping[str, Any], nbytes: int, shape: tuple[int, ...],
               tp: int, ep: int, n_experts: int) -> tuple[str, list[int]] | None:
    n = max(tp, ep)
    base, _, sub = hint.partition(":")
    if base == "expert":
        if ep > 1 and "expert" in name_bindings and n_experts:
            shares = [0] * n
            shares[int(name_bindings["expert"]) * ep // n_experts] = nbytes
            return "expert", shares
        base = sub or "replicated"
    if base == "replicated" or tp == 1:
        return "replicated", [nbytes] * n
    if base in ("column", "vocab"):
        return "column", _shares(nbytes, shape, 0, n)
    if base == "row":
        return "row", _shares(nbytes, shape, min(1, len(shape) - 1), n)
    return None


def build_plan(
    params: Mapping[str, TargetParam],
    ruleset: RuleSet | None,
    origin: Mapping[str, int],
    bindings: Mapping[str, Mapping[str, Any]],
    *,
    tp: int,
    ep: int,
    module_placements: bool,
    source: str,
) -> Plan:
    """Bytes per device; `origin`/`bindings` give each name's rule for hint fallback."""
    n = max(tp, ep)
    plan = Plan(n, source=source)
    n_experts = 0
    if ruleset is not None:
        members = ruleset.domains.named.get("expert")
        n_experts = len(members.members) if members and members.members else 0
    derived: dict[str, int] = defaultdict(int)
    for name, param in params.items():
        meta = param.meta
        nbytes = meta.nbytes
        if nbytes is None or meta.shape is None:
            plan.unknown.append(name)
            continue
        got = None
        if module_placements and param.placement is not None:
            got = _from_placement(param.placement, nbytes, meta.shape, n)
        if got is None and ruleset is not None and name in origin:
            hint = ruleset.rules[origin[name]].rule.placement
            got = _from_hint(hint, bindings.get(name, {}), nbytes, meta.shape, tp, ep, n_experts)
            if got is not None:
                why = (
                    "module keeps these on the host and shards them at trace time"
                    if param.placement is not None and param.placement.kind == "host"
                    else "no placement readable from the module"
                )
                derived[f"{why} (rule hint {hint or 'replicated'})"] += 1
        if got is None:
            plan.unknown.append(name)
            continue
        kind, shares = got
        plan.add(kind, shares)
    plan.derived = dict(derived)
    return plan


def render(plan: Plan) -> str:
    per = plan.per_device()
    unit, scale = ("GiB", 1024**3) if max(per, default=0) >= 1024**3 else ("MiB", 1024**2)
    lines = [
        f"weights per device ({plan.devices} devices), {unit}; placements: {plan.source}",
        "column = sharded on axis 0 (out features / vocab), row = sharded on axis 1, "
        "expert = whole experts on one device",
        "",
        f"{'device':>6}  " + "  ".join(f"{k:>11}" for k in KINDS) + f"  {'total':>11}",
    ]
    for d, total in enumerate(per):
        cells = "  ".join(f"{plan.bytes.get(k, [0] * plan.devices)[d] / scale:>11.3f}" for k in KINDS)
        lines.append(f"{d:>6}  {cells}  {total / scale:>11.3f}")
    lines.append("")
    lines.append(f"sum over devices: {sum(per) / scale:.3f} {unit}")
    for why, count in plan.derived.items():
        lines.append(f"derived from rules for {count:,} parameters: {why}")
    if plan.unknown:
        lines.append(f"not placed (no shape or placement): {len(plan.unknown):,}, e.g. {plan.unknown[0]}")
    return "\n".join(lines)


def to_json(plan: Plan) -> dict[str, Any]:
    return {
        "devices": plan.devices,
        "source": plan.source,
        "bytes_by_kind": plan.bytes,
        "bytes_per_device": plan.per_device(),
        "derived": plan.derived,
        "unplaced": len(plan.unknown),
    }


def hint_bindings(ruleset: RuleSet, origin: Mapping[str, int], names: list[str]) -> dict[str, dict[str, Any]]:
    """Target-side bindings (e.g. the expert index) for names produced by rules."""
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        idx = origin.get(name)
        if idx is None:
            continue
        for pat in ruleset.rules[idx].tgt:
            b = pat.match(name)
            if b is not None:
                out[name] = b
                break
    return out


def target_with_hints_only(target: Target) -> Target:
    """The same parameters with placements removed (forces the rule-hint path)."""
    return Target({n: TargetParam(n, p.meta, None) for n, p in target.params.items()}, target.source)
