"""Streaming application of a RuleSet: one `(name, tensor)` in, entries out.

This is the seed's `add_hf_weight` contract: `add` returns None while a
many-to-one rule is still waiting for parts (parked per group, i.e. per layer
/ expert prefix), or the dict of produced entries once a group is complete
(empty for a `drop`).
`finish` raises `LeftoverPartsError` listing every group still parked. The
same class runs the reverse direction with `ruleset.inverse()`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .rules import Bindings, GroupKey, RuleError, _finite_members
from .ruleset import CompiledRule, RuleSet


class UnmatchedNameError(RuleError):
    """No rule claims a name (strict mode)."""


class DuplicateNameError(RuleError):
    """A name was fed twice, or two groups produced the same name."""


@dataclass
class Leftover:
    """A parked group that never completed."""

    rule: CompiledRule
    bindings: Bindings
    present: list[str]
    missing: list[str]

    def describe(self) -> str:
        return (
            f"{self.rule.label} {dict(sorted(self.bindings.items()))}: "
            f"have {len(self.present)} ({_short(self.present)}), "
            f"missing {len(self.missing)} ({_short(self.missing)})"
        )


def _short(names: list[str], limit: int = 3) -> str:
    head = ", ".join(names[:limit])
    return head + (f", ... +{len(names) - limit}" if len(names) > limit else "")


class LeftoverPartsError(RuleError):
    """Many-to-one rules still hold parts at the end of the stream."""

    def __init__(self, leftovers: list[Leftover]):
        self.leftovers = leftovers
        lines = "\n  ".join(lo.describe() for lo in leftovers)
        super().__init__(f"{len(leftovers)} incomplete group(s) at end of stream:\n  {lines}")


@dataclass
class _Group:
    rule: CompiledRule
    bindings: Bindings
    parts: dict[Hashable, tuple[str, Any]] = field(default_factory=dict)


class Mapper:
    """Feed names one at a time; see module docstring for the contract."""

    def __init__(self, ruleset: RuleSet, *, strict: bool = True, track: bool = True):
        self.ruleset = ruleset
        self.strict = strict
        self.track = track
        self.fired: Counter[int] = Counter()
        self.unmatched: list[str] = []
        self.origin: dict[str, int] = {}
        self.consumed: dict[str, int] = {}
        self._seen: set[str] = set()
        self._groups: dict[tuple[int, GroupKey], _Group] = {}
        self._expected: dict[int, frozenset[Hashable]] = {}

    def add(self, name: str, tensor: Any) -> dict[str, Any] | None:
        """Consume one entry; None = nothing produced yet (parked or unmatched)."""
        if name in self._seen:
            raise DuplicateNameError(f"{name!r} fed twice")
        self._seen.add(name)
        hit = self.ruleset.find(name)
        if hit is None:
            if self.strict:
                raise UnmatchedNameError(f"no rule matches {name!r}")
            self.unmatched.append(name)
            return None
        cr, index, b = hit
        self.fired[cr.index] += 1
        if self.track:
            self.consumed[name] = cr.index
        rule = cr.rule
        if not rule.many_to_one:
            return self._emit(cr, rule.combine({0: tensor}, b, cr.tgt, self.ruleset.config))
        key = (cr.index, rule.group_key(cr.src, index, b))
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(cr, dict(key[1]))
        group.parts[rule.part_key(index, b)] = (name, tensor)
        expected = self._expected.get(cr.index)
        if expected is None:
            expected = self._expected[cr.index] = rule.expected_parts(cr.src)
        if set(group.parts) != expected:
            return None
        del self._groups[key]
        tensors = {k: t for k, (_, t) in group.parts.items()}
        return self._emit(cr, rule.combine(tensors, b, cr.tgt, self.ruleset.config))

    def _emit(self, cr: CompiledRule, outputs: list[tuple[int, Bindings, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for ti, ob, tensor in outputs:
            tname = cr.tgt[ti].format(ob)
            if tname in out or (self.track and tname in self.origin):
                raise DuplicateNameError(f"{tname!r} produced twice (last by {cr.label})")
            out[tname] = tensor
            if self.track:
                self.origin[tname] = cr.index
        return out

    def origin_of_input(self, name: str) -> int | None:
        """Index of the rule that consumed input `name` (when tracking)."""
        return self.consumed.get(name)

    def leftovers(self) -> list[Leftover]:
        """Groups still parked, with the part names they have and lack."""
        result: list[Leftover] = []
        for group in self._groups.values():
            cr = group.rule
            have = sorted(name for name, _ in group.parts.values())
            missing = [
                _part_name(cr, k, group.bindings)
                for k in sorted(self._expected[cr.index] - set(group.parts), key=str)
            ]
            result.append(Leftover(cr, group.bindings, have, missing))
        result.sort(key=lambda lo: (lo.rule.index, sorted(lo.bindings.items(), key=str)))
        return result

    def finish(self) -> None:
        """End of stream: raise LeftoverPartsError if any group is incomplete."""
        leftovers = self.leftovers()
        if leftovers:
            raise LeftoverPartsError(leftovers)


def _part_name(cr: CompiledRule, key: Hashable, b: Bindings) -> str:
    over = getattr(cr.rule, "over", None)
    if over is not None and cr.rule.many_to_one and len(cr.src) == 1:
        members = _finite_members(cr.src[0], over)
        value = next(m for m in members if m == key)
        return cr.src[0].format({**b, over: value})
    assert isinstance(key, int)
    return cr.src[key].format(b)


def map_all(ruleset: RuleSet, items: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """Map a whole stream strictly; raises on unmatched names and leftovers."""
    mapper = Mapper(ruleset, strict=True, track=False)
    out: dict[str, Any] = {}
    for name, tensor in items:
        produced = mapper.add(name, tensor)
        for key, value in (produced or {}).items():
            if key in out:
                raise DuplicateNameError(f"{key!r} produced twice")
            out[key] = value
    mapper.finish()
    return out
