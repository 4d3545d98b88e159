"""Run a rule set over checkpoint metadata and compare with the target tree.

Because V3 `compile` ignores extra keys, a silently misnamed weight would
leave a parameter at its random init. The check therefore reports every
direction of disagreement: checkpoint keys no rule consumed, parameters
nothing produced, produced names the target lacks, rules that never fired,
incomplete many-to-one groups, and shape/dtype mismatches. Names that a
rule explicitly accounts for (`drop` reasons, `absent_ok`) are listed as
explained, not as problems.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .engine import Leftover, Mapper
from .rules import Drop, RuleError
from .ruleset import CompiledRule, RuleSet
from .target import Target
from .tensors import TensorMeta


@dataclass(frozen=True)
class Mismatch:
    name: str
    produced: TensorMeta
    expected: TensorMeta
    rule: str


@dataclass
class CheckResult:
    n_checkpoint: int
    n_target: int
    n_produced: int
    unconsumed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    never_fired: list[CompiledRule] = field(default_factory=list)
    never_fired_optional: list[CompiledRule] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)
    leftovers: list[Leftover] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    explained_absent: dict[int, list[str]] = field(default_factory=dict)
    dropped: dict[int, list[str]] = field(default_factory=dict)
    unchecked_shapes: int = 0
    rules: list[CompiledRule] = field(default_factory=list)

    @property
    def problems(self) -> int:
        return (
            len(self.unconsumed) + len(self.missing) + len(self.unexpected) + len(self.never_fired)
            + len(self.mismatches) + len(self.leftovers) + len(self.errors)
        )

    @property
    def ok(self) -> bool:
        return self.problems == 0


def run_check(ruleset: RuleSet, checkpoint: Mapping[str, Any], target: Target) -> CheckResult:
    """Map `checkpoint` (name -> TensorMeta or tensor) and compare with `target`."""
    mapper = Mapper(ruleset, strict=False)
    produced: dict[str, Any] = {}
    consumed_by: dict[int, list[str]] = defaultdict(list)
    errors: list[str] = []
    for name, value in checkpoint.items():
        try:
            out = mapper.add(name, value)
        except RuleError as exc:
            errors.append(f"{name}: {exc}")
            continue
        hit_rule = mapper.origin_of_input(name)
        if hit_rule is not None and isinstance(ruleset.rules[hit_rule].rule, Drop):
            consumed_by[hit_rule].append(name)
        if out:
            produced.update(out)

    res = CheckResult(len(checkpoint), len(target.params), len(produced), rules=list(ruleset.rules))
    res.errors = errors
    res.unconsumed = list(mapper.unmatched)
    res.leftovers = mapper.leftovers()
    res.dropped = dict(consumed_by)
    for cr in ruleset.rules:
        if mapper.fired[cr.index] == 0:
            (res.never_fired_optional if cr.rule.optional else res.never_fired).append(cr)

    explained: dict[int, list[str]] = defaultdict(list)
    for name, value in produced.items():
        cr = ruleset.rules[mapper.origin[name]]
        param = target.params.get(name)
        if param is None:
            if cr.rule.absent_ok:
                explained[cr.index].append(name)
            else:
                res.unexpected.append(name)
            continue
        got = value if isinstance(value, TensorMeta) else _meta(value)
        want = param.meta
        if got.shape is None or want.shape is None:
            res.unchecked_shapes += 1
        elif got.shape != want.shape:
            res.mismatches.append(Mismatch(name, got, want, cr.label))
            continue
        if got.dtype and want.dtype and got.dtype != want.dtype:
            res.mismatches.append(Mismatch(name, got, want, cr.label))
    res.explained_absent = dict(explained)
    res.missing = [n for n in target.params if n not in produced]
    return res


def _meta(value: Any) -> TensorMeta:
    from .tensors import meta_of

    return meta_of(value)
