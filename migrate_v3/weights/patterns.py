"""Dotted name patterns with typed placeholders, anchored at both ends.

A pattern is a dotted name whose segments are literals or whole-segment
placeholders: `model.layers.{layer:moe}.mlp.experts.{expert}.up_proj.weight`.
Keeping placeholders whole-segment makes matching a per-segment comparison
and makes the overlap test between two patterns exact, which is what lets
a rule set reject ambiguous rules when they are registered.

Placeholder forms:
  `{layer}`          integer, domain named like the placeholder if one exists
  `{layer:moe}`      integer restricted to the named domain
  `{layer:main&moe}` intersection of named domains
  `{p:q_proj|k_proj}` one of the listed words
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

_SLOT_RE = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)(?::([^{}]+))?\}$")
_CHOICE_RE = re.compile(r"^[A-Za-z0-9_]+$")


class PatternError(ValueError):
    """A pattern is malformed or refers to an unknown domain."""


@dataclass(frozen=True)
class IntDomain:
    """A set of non-negative integers (`members=None`: all of them).

    `base` is subtracted when the value is written into (or added when read
    from) a *relative* pattern: MTP layer 61 of the checkpoint is layer 0 of
    its own namespace in the target.
    """

    members: frozenset[int] | None = None
    base: int = 0

    def __and__(self, other: IntDomain) -> IntDomain:
        if self.base and other.base and self.base != other.base:
            raise PatternError("cannot intersect domains with different bases")
        if self.members is None:
            members = other.members
        elif other.members is None:
            members = self.members
        else:
            members = self.members & other.members
        return IntDomain(members, self.base or other.base)

    def written(self, relative: bool) -> frozenset[int] | None:
        """The integers as they appear in names (shifted by base if relative)."""
        if self.members is None:
            return None
        if relative and self.base:
            return frozenset(m - self.base for m in self.members)
        return self.members


@dataclass(frozen=True)
class ChoiceDomain:
    """A fixed set of words."""

    choices: frozenset[str]


Domain = IntDomain | ChoiceDomain


@dataclass
class Domains:
    """Named integer domains (layer sets, expert ranges) a rule set resolves against."""

    named: dict[str, IntDomain] = field(default_factory=dict)

    def resolve(self, slot: str, spec: str | None) -> Domain:
        if spec is None:
            return self.named.get(slot, IntDomain())
        if "|" in spec:
            words = spec.split("|")
            bad = [w for w in words if not _CHOICE_RE.match(w)]
            if bad:
                raise PatternError(f"bad choice words {bad} in {{{slot}:{spec}}}")
            return ChoiceDomain(frozenset(words))
        parts = spec.split("&")
        unknown = [p for p in parts if p not in self.named]
        if unknown:
            raise PatternError(
                f"unknown domain {unknown[0]!r} in {{{slot}:{spec}}}; known: {sorted(self.named)}"
            )
        dom = self.named[parts[0]]
        for part in parts[1:]:
            dom = dom & self.named[part]
        return dom


@dataclass(frozen=True)
class Slot:
    """One placeholder segment."""

    name: str
    spec: str | None
    domain: Domain


Segment = str | Slot


@dataclass(frozen=True)
class Pattern:
    """A compiled pattern; `relative` patterns write integers minus the domain base."""

    text: str
    segments: tuple[Segment, ...]
    relative: bool = False

    @property
    def slots(self) -> tuple[Slot, ...]:
        return tuple(s for s in self.segments if isinstance(s, Slot))

    @property
    def slot_names(self) -> frozenset[str]:
        return frozenset(s.name for s in self.slots)

    def slot(self, name: str) -> Slot:
        for s in self.slots:
            if s.name == name:
                return s
        raise KeyError(name)

    def match(self, name: str) -> dict[str, int | str] | None:
        """Bindings if `name` matches the whole pattern, else None."""
        parts = name.split(".")
        if len(parts) != len(self.segments):
            return None
        out: dict[str, int | str] = {}
        for seg, part in zip(self.segments, parts, strict=True):
            if isinstance(seg, str):
                if seg != part:
                    return None
                continue
            value = _read(seg.domain, part, self.relative)
            if value is None:
                return None
            out[seg.name] = value
        return out

    def format(self, bindings: Mapping[str, int | str]) -> str:
        """The name for these bindings (values must lie in the slot domains)."""
        parts: list[str] = []
        for seg in self.segments:
            if isinstance(seg, str):
                parts.append(seg)
                continue
            value = bindings[seg.name]
            if isinstance(seg.domain, ChoiceDomain):
                if value not in seg.domain.choices:
                    raise PatternError(f"{value!r} not allowed in {self.text}")
                parts.append(str(value))
            else:
                if not isinstance(value, int) or (
                    seg.domain.members is not None and value not in seg.domain.members
                ):
                    raise PatternError(f"{value!r} outside the domain of {{{seg.name}}} in {self.text}")
                written = value - seg.domain.base if self.relative else value
                parts.append(str(written))
        return ".".join(parts)

    def compatible_skeleton(self, skeleton: tuple[str, ...]) -> bool:
        """Cheap pre-filter: digits already replaced by '#' in `skeleton`."""
        if len(skeleton) != len(self.segments):
            return False
        for seg, part in zip(self.segments, skeleton, strict=True):
            if isinstance(seg, str):
                if seg != part:
                    return False
            elif isinstance(seg.domain, IntDomain):
                if part != "#":
                    return False
        return True

    def overlaps(self, other: Pattern) -> bool:
        """True if some name matches both patterns (exact, per segment)."""
        if len(self.segments) != len(other.segments):
            return False
        return all(
            _segments_overlap(a, self.relative, b, other.relative)
            for a, b in zip(self.segments, other.segments, strict=True)
        )

    def expand(self, fixed: Mapping[str, int | str] | None = None) -> Iterable[str]:
        """All names of a pattern whose domains are finite (for tests and synthesis)."""
        fixed = dict(fixed or {})
        free = [s for s in self.slots if s.name not in fixed]
        values: list[list[int | str]] = []
        for s in free:
            if isinstance(s.domain, ChoiceDomain):
                values.append(sorted(s.domain.choices))
            elif s.domain.members is None:
                raise PatternError(f"cannot expand infinite placeholder {{{s.name}}} in {self.text}")
            else:
                values.append(sorted(s.domain.members))
        yield from _product(self, free, values, fixed)


def _product(
    pat: Pattern, free: list[Slot], values: list[list[int | str]], fixed: dict[str, int | str]
) -> Iterable[str]:
    if not free:
        yield pat.format(fixed)
        return
    head, rest = free[0], free[1:]
    for v in values[0]:
        yield from _product(pat, rest, values[1:], {**fixed, head.name: v})


def _read(domain: Domain, part: str, relative: bool) -> int | str | None:
    if isinstance(domain, ChoiceDomain):
        return part if part in domain.choices else None
    if not part.isdigit() or (len(part) > 1 and part[0] == "0"):
        return None
    value = int(part) + (domain.base if relative else 0)
    if domain.members is not None and value not in domain.members:
        return None
    return value


def _written_words(domain: Domain, relative: bool) -> frozenset[str] | None:
    if isinstance(domain, ChoiceDomain):
        return domain.choices
    written = domain.written(relative)
    return None if written is None else frozenset(str(v) for v in written)


def _segments_overlap(a: Segment, a_rel: bool, b: Segment, b_rel: bool) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    if isinstance(a, str):
        assert isinstance(b, Slot)
        return _read(b.domain, a, b_rel) is not None
    if isinstance(b, str):
        return _read(a.domain, b, a_rel) is not None
    wa = _written_words(a.domain, a_rel)
    wb = _written_words(b.domain, b_rel)
    if wa is None and wb is None:
        return True
    if wa is None:
        assert wb is not None
        return any(_read(a.domain, w, a_rel) is not None for w in wb)
    if wb is None:
        return any(_read(b.domain, w, b_rel) is not None for w in wa)
    return bool(wa & wb)


def compile_pattern(text: str, domains: Domains, *, relative: bool = False) -> Pattern:
    """Parse `text` into a Pattern, resolving placeholder domains."""
    if not text or text.startswith(".") or text.endswith("."):
        raise PatternError(f"bad pattern {text!r}")
    segments: list[Segment] = []
    seen: set[str] = set()
    for part in text.split("."):
        if not part:
            raise PatternError(f"empty segment in {text!r}")
        if "{" in part or "}" in part:
            m = _SLOT_RE.match(part)
            if not m:
                raise PatternError(
                    f"placeholder must fill a whole segment: {part!r} in {text!r}"
                )
            name, spec = m.group(1), m.group(2)
            if name in seen:
                raise PatternError(f"placeholder {{{name}}} repeated in {text!r}")
            seen.add(name)
            segments.append(Slot(name, spec, domains.resolve(name, spec)))
        else:
            segments.append(part)
    return Pattern(text, tuple(segments), relative)


def share_specs(texts: tuple[str, ...]) -> tuple[str, ...]:
    """Give a bare `{name}` the spec another pattern of the same rule gives it.

    So `rename model.layers.{layer:moe}.x -> lm.layers.{layer}.x` restricts
    both sides to MoE layers; conflicting specs are an error.
    """
    specs: dict[str, str] = {}
    for text in texts:
        for part in text.split("."):
            m = _SLOT_RE.match(part)
            if m and m.group(2):
                if specs.setdefault(m.group(1), m.group(2)) != m.group(2):
                    raise PatternError(f"{{{m.group(1)}}} has conflicting specs in {list(texts)}")

    def fill(text: str) -> str:
        parts = []
        for part in text.split("."):
            m = _SLOT_RE.match(part)
            if m and not m.group(2) and m.group(1) in specs:
                part = "{" + m.group(1) + ":" + specs[m.group(1)] + "}"
            parts.append(part)
        return ".".join(parts)

    return tuple(fill(t) for t in texts)


def skeleton(name: str) -> tuple[str, ...]:
    """Name segments with every all-digit segment replaced by '#'."""
    return tuple("#" if p.isdigit() else p for p in name.split("."))
