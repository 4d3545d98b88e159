"""Declarative checkpoint-name mapping for ModuleV3, checked against the real module.

Import-light: nothing here imports max or numpy at module load; `target`,
`factories` and the tensor paths import them when used.
"""

from __future__ import annotations

from .engine import LeftoverPartsError, Mapper, map_all
from .rules import (
    Concat,
    Copy,
    Drop,
    FuseQKV,
    Merge,
    Rename,
    Rule,
    Split,
    Stack,
    UnfuseQKV,
    Unstack,
)
from .ruleset import RuleOverlapError, RuleSet
from .tensors import TensorMeta, TypedArray

__all__ = [
    "Concat", "Copy", "Drop", "FuseQKV", "LeftoverPartsError", "Mapper", "Merge", "Rename", "Rule",
    "RuleOverlapError", "RuleSet", "Split", "Stack", "TensorMeta", "TypedArray", "UnfuseQKV", "Unstack",
    "map_all",
]
