"""A compiled, overlap-free list of rules bound to one config.

Registration compiles each rule's patterns against the config's domains,
checks that placeholders line up, and rejects a rule whose source (or
target) pattern can match a name another rule already claims — so every
checkpoint name has at most one rule and the reverse mapping is unambiguous.
Lookup uses a skeleton cache (digits -> '#'), so a 92k-name index costs one
dict hit plus one per-segment match per name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .layers import domains_from_config, text_config
from .patterns import Domains, Pattern, compile_pattern, share_specs, skeleton
from .rules import Bindings, Rule, RuleError


class RuleOverlapError(RuleError):
    """Two rules could both claim the same name."""


@dataclass(frozen=True)
class CompiledRule:
    """A rule with its patterns compiled; `index` is its registration order."""

    index: int
    rule: Rule
    src: tuple[Pattern, ...]
    tgt: tuple[Pattern, ...]

    @property
    def label(self) -> str:
        return f"#{self.index} {self.rule.describe()}"


@dataclass
class RuleSet:
    """Rules for one model config; `config` feeds domains and size expressions."""

    config: dict[str, Any]
    domains: Domains
    name: str = ""
    rules: list[CompiledRule] = field(default_factory=list)
    not_invertible: list[CompiledRule] = field(default_factory=list)
    _cache: dict[tuple[str, ...], list[tuple[CompiledRule, int, Pattern]]] = field(
        default_factory=dict, repr=False
    )
    _tcache: dict[tuple[str, ...], list[tuple[CompiledRule, int, Pattern]]] = field(
        default_factory=dict, repr=False
    )

    @classmethod
    def for_config(cls, config: Mapping[str, Any], rules: Iterable[Rule] = (), name: str = "") -> RuleSet:
        rs = cls(text_config(config), domains_from_config(config), name)
        rs.extend(rules)
        return rs

    def extend(self, rules: Iterable[Rule]) -> None:
        for r in rules:
            self.add(r)

    def add(self, rule: Rule) -> CompiledRule:
        """Compile and register `rule`; raises RuleOverlapError on ambiguity."""
        src_rel, tgt_rel = rule.reversed, not rule.reversed
        texts = share_specs((*rule.inputs(), *rule.outputs()))
        n_in = len(rule.inputs())
        src = tuple(compile_pattern(t, self.domains, relative=src_rel) for t in texts[:n_in])
        tgt = tuple(compile_pattern(t, self.domains, relative=tgt_rel) for t in texts[n_in:])
        rule.validate(src, tgt)
        for i, a in enumerate(src):
            for b in src[i + 1 :]:
                if a.overlaps(b):
                    raise RuleOverlapError(f"{rule.describe()}: its inputs {a.text} and {b.text} overlap")
        for i, a in enumerate(tgt):
            for b in tgt[i + 1 :]:
                if a.overlaps(b):
                    raise RuleOverlapError(f"{rule.describe()}: its outputs {a.text} and {b.text} overlap")
        for other in self.rules:
            _check_disjoint(rule, src, other, other.src, "input")
            _check_disjoint(rule, tgt, other, other.tgt, "output")
        compiled = CompiledRule(len(self.rules), rule, src, tgt)
        self.rules.append(compiled)
        self._cache.clear()
        self._tcache.clear()
        return compiled

    def find(self, name: str) -> tuple[CompiledRule, int, Bindings] | None:
        """The rule, input index and bindings that claim `name`, or None."""
        key = skeleton(name)
        cands = self._cache.get(key)
        if cands is None:
            cands = [
                (cr, i, p)
                for cr in self.rules
                for i, p in enumerate(cr.src)
                if p.compatible_skeleton(key)
            ]
            self._cache[key] = cands
        for cr, i, p in cands:
            b = p.match(name)
            if b is not None:
                return cr, i, b
        return None

    def find_target(self, name: str) -> tuple[CompiledRule, int, Bindings] | None:
        """The rule, output index and bindings that produce `name`, or None."""
        key = skeleton(name)
        cands = self._tcache.get(key)
        if cands is None:
            cands = [
                (cr, i, p)
                for cr in self.rules
                for i, p in enumerate(cr.tgt)
                if p.compatible_skeleton(key)
            ]
            self._tcache[key] = cands
        for cr, i, p in cands:
            b = p.match(name)
            if b is not None:
                return cr, i, b
        return None

    def inverse(self) -> RuleSet:
        """Target -> source rules; drops have no inverse and are listed in `not_invertible`."""
        inv = RuleSet(self.config, self.domains, f"{self.name} (reverse)")
        for cr in self.rules:
            r = cr.rule.inverse()
            if r is None:
                inv.not_invertible.append(cr)
            else:
                inv.add(r)
        return inv


def _check_disjoint(
    rule: Rule, mine: tuple[Pattern, ...], other: CompiledRule, theirs: tuple[Pattern, ...], side: str
) -> None:
    for a in mine:
        for b in theirs:
            if a.overlaps(b):
                raise RuleOverlapError(
                    f"{rule.describe()} overlaps {other.label}: {side} patterns {a.text} and {b.text} "
                    "can match the same name"
                )
