"""Declarative weight-name rules (the ROLL "ConverOps"), each with its inverse.

A rule names source patterns (checkpoint side) and target patterns (module
side) and says how tensors combine: rename, copy (tie), merge (untie), drop,
stack/unstack over a placeholder, concat/split along a dim, and grouped QKV
fuse/unfuse. Every rule except `drop` has an exact inverse, so the reverse
mapping (module -> checkpoint) comes from the same list.

Rules are plain frozen dataclasses so templates, JSON rule files and the
adapter emitter share one representation; `RuleSet` (in `ruleset.py`)
compiles their patterns against config-derived domains.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from . import tensors as T
from .exprs import IntExpr, evaluate
from .patterns import ChoiceDomain, IntDomain, Pattern

Bindings = dict[str, int | str]
Output = tuple[int, Bindings, Any]  # (target pattern index, bindings, tensor)
GroupKey = tuple[tuple[str, int | str], ...]


class RuleError(ValueError):
    """A rule is inconsistent, or its tensors do not fit it."""


@dataclass(frozen=True, kw_only=True)
class Rule:
    """Base: metadata shared by every rule kind.

    note:      why the rule exists (shown in reports).
    absent_ok: non-empty when the target may lack this rule's outputs, and why
               (e.g. the V3 module has no MTP block); such names are reported
               as explained, and emitted adapters skip them.
    optional:  the rule may legitimately never fire (checkpoint variants).
    placement: distribution hint for `weights plan` when the module's own
               placements cannot be read: replicated | column | row | expert | vocab.
    reversed:  set on inverses; sources are then the relative (target-side) names.
    """

    kind: ClassVar[str] = ""
    many_to_one: ClassVar[bool] = False
    note: str = ""
    absent_ok: str = ""
    optional: bool = False
    placement: str = ""
    reversed: bool = False

    def inputs(self) -> tuple[str, ...]:
        raise NotImplementedError

    def outputs(self) -> tuple[str, ...]:
        raise NotImplementedError

    def inverse(self) -> Rule | None:
        raise NotImplementedError

    # -- grouping of many-to-one parts ------------------------------------
    def group_key(self, src: Sequence[Pattern], index: int, b: Bindings) -> GroupKey:
        """Identifies the parked group a part belongs to ("per prefix")."""
        return tuple(sorted(b.items()))

    def part_key(self, index: int, b: Bindings) -> Hashable:
        return index

    def expected_parts(self, src: Sequence[Pattern]) -> frozenset[Hashable]:
        return frozenset(range(len(src)))

    def combine(
        self, parts: Mapping[Hashable, Any], b: Bindings, tgt: Sequence[Pattern], config: Mapping[str, Any]
    ) -> list[Output]:
        raise NotImplementedError

    def validate(self, src: Sequence[Pattern], tgt: Sequence[Pattern]) -> None:
        """Placeholders must line up between sources and targets."""
        names = {p.slot_names for p in (*src, *tgt)}
        if len(names) > 1:
            raise RuleError(f"{self.describe()}: placeholders differ between patterns: {sorted(map(sorted, names))}")

    def describe(self) -> str:
        return f"{self.kind}({', '.join(self.inputs())} -> {', '.join(self.outputs()) or '-'})"

    def _meta(self) -> dict[str, Any]:
        return {"note": self.note, "absent_ok": self.absent_ok, "optional": self.optional,
                "placement": self.placement, "reversed": not self.reversed}


def _merge_bindings(b: Bindings, **extra: int | str) -> Bindings:
    return {**b, **extra}


@dataclass(frozen=True, kw_only=True)
class Rename(Rule):
    """One name to one name, tensor unchanged."""

    kind: ClassVar[str] = "rename"
    source: str
    target: str

    def inputs(self) -> tuple[str, ...]:
        return (self.source,)

    def outputs(self) -> tuple[str, ...]:
        return (self.target,)

    def inverse(self) -> Rule:
        return Rename(source=self.target, target=self.source, **self._meta())

    def combine(self, parts: Mapping[Hashable, Any], b: Bindings, tgt: Sequence[Pattern], config: Mapping[str, Any]) -> list[Output]:
        return [(0, b, parts[0])]


@dataclass(frozen=True, kw_only=True)
class Copy(Rule):
    """One tensor to several names (tied weights); inverse is `merge`."""

    kind: ClassVar[str] = "copy"
    source: str
    targets: tuple[str, ...]

    def inputs(self) -> tuple[str, ...]:
        return (self.source,)

    def outputs(self) -> tuple[str, ...]:
        return self.targets

    def inverse(self) -> Rule:
        return Merge(sources=self.targets, target=self.source, **self._meta())

    def combine(self, parts: Mapping[Hashable, Any], b: Bindings, tgt: Sequence[Pattern], config: Mapping[str, Any]) -> list[Output]:
        return [(i, b, parts[0]) for i in range(len(tgt))]


@dataclass(frozen=True, kw_only=True)
class Merge(Rule):
    """Several names holding the same tensor to one name (untie); parts must be identical."""

    kind: ClassVar[str] = "merge"
    many_to_one: ClassVar[bool] = True
    sources: tuple[str, ...]
    target: str

    def inputs(self) -> tuple[str, ...]:
        return self.sources

    def outputs(self) -> tuple[str, ...]:
        return (self.target,)

    def inverse(self) -> Rule:
        return Copy(source=self.target, targets=self.sources, **self._meta())

    def combine(self, parts: Mapping[Hashable, Any], b: Bindings, tgt: Sequence[Pattern], config: Mapping[str, Any]) -> list[Output]:
        first = parts[0]
        for i in range(1, len(self.sources)):
            if not T.same_bytes(first, parts[i]):
                raise RuleError(f"{self.describe()}: tied copies differ for {b}")
        return [(0, b, first)]


@dataclass(frozen=True, kw_only=True)
class Drop(Rule):
    """Consume a name and produce nothing; `reason` is required and reported."""

    kind: ClassVar[str] = "drop"
    source: str
    reason: str

    def inputs(self) -> tuple[str, ...]:
        return (self.source,)

    def outputs(self) -> tuple[str, ...]:
        return ()

    def inverse(self) -> None:
        return None

    def combine(self, parts: Mapping[Hashable, Any], b: Bindings, tgt: Sequence[Pattern], config: Mapping[str, Any]) -> list[Output]:
        return []

    def validate(self, src: Sequence[Pattern], tgt: Sequence[Pattern]) -> None:
        if not self.reason:
            raise RuleError(f"{self.describe()}: a drop needs a reason")


def _member_order(k: Hashable) -> tuple[int, str]:
    return (k, "") if isinstance(k, int) else (-1, str(k))


def _finite_members(p: Pattern, over: str) -> list[int | str]:
    dom = p.slot(over).domain
    if isinstance(dom, ChoiceDomain):
        return sorted(dom.choices)
    assert isinstance(dom, IntDomain)
    if dom.members is None:
        raise RuleError(f"{p.text}: {{{over}}} needs a finite domain to stack over")
    return sorted(dom.members)


def _check_over(rule: Rule, many: Pattern, one: Pattern, over: str) -> None:
    if over not in many.slot_names:
        raise RuleError(f"{rule.describe()}: {{{over}}} not in {many.text}")
    if over in one.slot_names:
        raise RuleError(f"{rule.describe()}: {{{over}}} must not appear in {one.text}")
    if many.slot_names - {over} != one.slot_names:
        raise RuleError(f"{rule.describe()}: placeholders differ")
    _finite_members(many, over)


@dataclass(frozen=True, kw_only=True)
class Stack(Rule):
    """All values of placeholder `over` stacked along a new `axis` (e.g. experts)."""

    kind: ClassVar[str] = "stack"
    many_to_one: ClassVar[bool] = True
    source: str
    target: str
    over: str
    axis: int = 0

    def inputs(self) -> tuple[str, ...]:
        return (self.source,)

    def outputs(self) -> tuple[str, ...]:
        return (self.target,)

    def inverse(self) -> Rule:
        return Unstack(source=self.target, target=self.source, over=self.over, axis=self.axis, **self._meta())

    def validate(self, src: Sequence[Pattern], tgt: Sequence[Pattern]) -> None:
        _check_over(self, src[0], tgt[0], self.over)

    def group_key(self, src: Sequence[Pattern], index: int, b: Bindings) -> GroupKey:
        return tuple(sorted((k, v) for k, v in b.items() if k != self.over))

    def part_key(self, index: int, b: Bindings) -> Hashable:
        return b[self.over]

    def expected_parts(self, src: Sequence[Pattern]) -> frozenset[Hashable]:
        return frozenset(_finite_members(src[0], self.over))

    def combine(self, parts: Mapping[Hashable, Any], b: Bindings, tgt: Sequence[Pattern], config: Mapping[str, Any]) -> list[Output]:
        order = sorted(parts, key=_member_order)
        rest = {k: v for k, v in b.items() if k != self.over}
        return [(0, rest, T.stack([parts[k] for k in order], self.axis))]


@dataclass(frozen=True, kw_only=True)
class Unstack(Rule):
    """One stacked tensor to one name per value of `over` (inverse of `stack`)."""

    kind: ClassVar[str] = "unstack"
    source: str
    target: str
    over: str
    axis: int = 0

    def inputs(self) -> tuple[str, ...]:
        return (self.source,)

    def outputs(self) -> tuple[str, ...]:
        return (self.target,)

    def inverse(self) -> Rule:
        return Stack(source=self.target, target=self.source, over=self.over, axis=self.axis, **self._meta())

    def validate(self, src: Sequence[Pattern], tgt: Sequence[Pattern]) -> None:
        _check_over(self, tgt[0], src[0], self.over)

    def combine(self, parts: Mapping[Hashable, Any], b: Bindings, tgt: Sequence[Pattern], config: Mapping[str, Any]) -> list[Output]:
        members = _finite_members(tgt[0], self.over)
        pieces = T.unstack(parts[0], self.axis)
        if len(pieces) != len(members):
            raise RuleError(f"{self.describe()}: {len(pieces)} slices for {len(members)} values of {{{self.over}}}")
        return [(0, _merge_bindings(b, **{self.over: m}), p) for m, p in zip(members, pieces, strict=True)]


def _sizes(rule: Rule, sizes: tuple[IntExpr, ...] | None, n: int, config: Mapping[str, Any]) -> list[int] | None:
    if sizes is None:
        return None
    if len(sizes) != n:
        raise RuleError(f"{rule.describe()}: {len(sizes)} sizes for {n} parts")
    return [evaluate(s, config) for s in sizes]


@dataclass(frozen=True, kw_only=True)
class Concat(Rule):
    """Fixed parts concatenated along `axis` (gate||up); sizes default to equal parts."""

    kind: ClassVar[str] = "concat"
    many_to_one: ClassVar[bool] = True
    sources: tuple[str, ...]
    target: str
    axis: int = 0
    sizes: tuple[IntExpr, ...] | None = None

    def inputs(self) -> tuple[str, ...]:
        return self.sources

    def outputs(self) -> tuple[str, ...]:
        return (self.target,)

    def inverse(self) -> Rule:
        return Split(source=self.target, targets=self.sources, axis=self.axis, sizes=self.sizes, **self._meta())

    def combine(self, parts: Mapping[Hashable, Any], b: Bindings, tgt: Sequence[Pattern], config: Mapping[str, Any]) -> list[Output]:
        ordered = [parts[i] for i in range(len(self.sources))]
        dims = [_dim(x, self.axis) for x in ordered]
        want = _sizes(self, self.sizes, len(ordered), config)
        if want is None and len(set(dims)) > 1:
            raise RuleError(f"{self.describe()}: unequal parts {dims} need explicit sizes to be reversible")
        if want is not None and dims != want:
            raise RuleError(f"{self.describe()}: part sizes {dims} differ from declared {want}")
        return [(0, b, T.concat(ordered, self.axis))]


@dataclass(frozen=True, kw_only=True)
class Split(Rule):
    """One tensor split along `axis` into several names (inverse of `concat`)."""

    kind: ClassVar[str] = "split"
    source: str
    targets: tuple[str, ...]
    axis: int = 0
    sizes: tuple[IntExpr, ...] | None = None

    def inputs(self) -> tuple[str, ...]:
        return (self.source,)

    def outputs(self) -> tuple[str, ...]:
        return self.targets

    def inverse(self) -> Rule:
        return Concat(sources=self.targets, target=self.source, axis=self.axis, sizes=self.sizes, **self._meta())

    def combine(self, parts: Mapping[Hashable, Any], b: Bindings, tgt: Sequence[Pattern], config: Mapping[str, Any]) -> list[Output]:
        x = parts[0]
        n = len(self.targets)
        sizes = _sizes(self, self.sizes, n, config)
        if sizes is None:
            total = _dim(x, self.axis)
            if total % n:
                raise RuleError(f"{self.describe()}: dim {total} not divisible into {n} equal parts")
            sizes = [total // n] * n
        return [(i, b, piece) for i, piece in enumerate(T.split(x, sizes, self.axis))]


def _dim(x: Any, axis: int) -> int:
    shape = T.meta_of(x).shape
    if shape is None:
        raise RuleError("shape unknown; cannot size the parts")
    return shape[axis]


@dataclass(frozen=True, kw_only=True)
class FuseQKV(Rule):
    """Separate q, k, v to one head-interleaved tensor, grouped by query group.

    Layout (Megatron): for each of `kv_heads` groups, its `heads // kv_heads`
    query heads, then its key head, then its value head, each `head_dim` rows.
    """

    kind: ClassVar[str] = "fuse_qkv"
    many_to_one: ClassVar[bool] = True
    q: str
    k: str
    v: str
    target: str
    heads: IntExpr = "num_attention_heads"
    kv_heads: IntExpr = "num_key_value_heads"
    head_dim: IntExpr = "head_dim"

    def inputs(self) -> tuple[str, ...]:
        return (self.q, self.k, self.v)

    def outputs(self) -> tuple[str, ...]:
        return (self.target,)

    def inverse(self) -> Rule:
        return UnfuseQKV(source=self.target, q=self.q, k=self.k, v=self.v, heads=self.heads,
                         kv_heads=self.kv_heads, head_dim=self.head_dim, **self._meta())

    def combine(self, parts: Mapping[Hashable, Any], b: Bindings, tgt: Sequence[Pattern], config: Mapping[str, Any]) -> list[Output]:
        h, g, d = (evaluate(e, config) for e in (self.heads, self.kv_heads, self.head_dim))
        q, k, v = parts[0], parts[1], parts[2]
        rest = _rest(q)
        _expect(self, q, h * d)
        _expect(self, k, g * d)
        _expect(self, v, g * d)
        qg = T.reshape(q, (g, (h // g) * d, *rest))
        kg = T.reshape(k, (g, d, *rest))
        vg = T.reshape(v, (g, d, *rest))
        fused = T.concat([qg, kg, vg], axis=1)
        return [(0, b, T.reshape(fused, ((h + 2 * g) * d, *rest)))]


@dataclass(frozen=True, kw_only=True)
class UnfuseQKV(Rule):
    """Inverse of `fuse_qkv`: one grouped, head-interleaved tensor to q, k, v."""

    kind: ClassVar[str] = "unfuse_qkv"
    source: str
    q: str
    k: str
    v: str
    heads: IntExpr = "num_attention_heads"
    kv_heads: IntExpr = "num_key_value_heads"
    head_dim: IntExpr = "head_dim"

    def inputs(self) -> tuple[str, ...]:
        return (self.source,)

    def outputs(self) -> tuple[str, ...]:
        return (self.q, self.k, self.v)

    def inverse(self) -> Rule:
        return FuseQKV(q=self.q, k=self.k, v=self.v, target=self.source, heads=self.heads,
                       kv_heads=self.kv_heads, head_dim=self.head_dim, **self._meta())

    def combine(self, parts: Mapping[Hashable, Any], b: Bindings, tgt: Sequence[Pattern], config: Mapping[str, Any]) -> list[Output]:
        h, g, d = (evaluate(e, config) for e in (self.heads, self.kv_heads, self.head_dim))
        x = parts[0]
        rest = _rest(x)
        _expect(self, x, (h + 2 * g) * d)
        grouped = T.reshape(x, (g, (h // g + 2) * d, *rest))
        qg, kg, vg = T.split(grouped, [(h // g) * d, d, d], axis=1)
        return [
            (0, b, T.reshape(qg, (h * d, *rest))),
            (1, b, T.reshape(kg, (g * d, *rest))),
            (2, b, T.reshape(vg, (g * d, *rest))),
        ]


def _rest(x: Any) -> tuple[int, ...]:
    shape = T.meta_of(x).shape
    if shape is None:
        raise RuleError("shape unknown; cannot regroup heads")
    return tuple(shape[1:])


def _expect(rule: Rule, x: Any, rows: int) -> None:
    shape = T.meta_of(x).shape
    if shape is None or shape[0] != rows:
        raise RuleError(f"{rule.describe()}: expected {rows} rows, got shape {shape}")


RULE_KINDS: dict[str, type[Rule]] = {
    cls.kind: cls for cls in (Rename, Copy, Merge, Drop, Stack, Unstack, Concat, Split, FuseQKV, UnfuseQKV)
}


def rule_from_dict(data: Mapping[str, Any]) -> Rule:
    """Build a rule from its JSON form (`{"kind": "rename", "source": ..., ...}`)."""
    kind = data.get("kind")
    if kind not in RULE_KINDS:
        raise RuleError(f"unknown rule kind {kind!r}; known: {sorted(RULE_KINDS)}")
    cls = RULE_KINDS[str(kind)]
    kwargs: dict[str, Any] = {}
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key, value in data.items():
        if key == "kind":
            continue
        if key not in fields:
            raise RuleError(f"{kind}: unknown field {key!r}")
        f = fields[key]
        kwargs[f.name] = tuple(value) if isinstance(value, list) else value
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise RuleError(f"{kind}: {exc}") from exc


def rule_to_dict(rule: Rule) -> dict[str, Any]:
    """JSON form of a rule (inverse of `rule_from_dict`)."""
    out: dict[str, Any] = {"kind": rule.kind}
    for f in dataclasses.fields(rule):
        value = getattr(rule, f.name)
        if value == f.default:
            continue
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out
