"""MV342 — calls of V2 layer methods that the layer's V3 class does not have.

``layers`` maps a V2 layer's constructor onto its V3 class, but a method only
V2's class had (``AttentionWithRope.materialize_kv_from_hidden``, which DFlash
drafts call to write context K/V) would raise ``AttributeError`` at trace
time, with nothing in the output saying so. A call of such a method, in a
file that imports the V2 class and defines no method of that name itself,
gets a TODO saying what V3 code does instead (``V2_ONLY_METHODS``, checked
against max):

    layer.self_attn.materialize_kv_from_hidden(layer_idx=i, hidden=h, ...)
    →  # TODO(migrate-v3): MV342 V3 AttentionWithRope has no materialize_kv_from_hidden(): ...
"""

from __future__ import annotations

import re

import libcst as cst

from codemods.base import Codemod, FileState
from migrate_v3.knowledge.layers import V2_ONLY_METHODS

#: method name → the V2 classes that have it
_OWNERS: dict[str, list[str]] = {}
for _cls, _methods in V2_ONLY_METHODS.items():
    for _name in _methods:
        _OWNERS.setdefault(_name, []).append(_cls)


class LayerMethods(Codemod):
    PREFIX = "MV342"

    @classmethod
    def applies(cls, source: str) -> bool:
        return any(f".{name}(" in source for name in _OWNERS)

    def __init__(self, state: FileState) -> None:
        super().__init__(state)
        #: V2 classes of ``V2_ONLY_METHODS`` the file imports from max.nn (named in it, when names
        #: are resolved by scope)
        imported = self.imported()
        self.imported_classes = {
            target.rpartition(".")[2] for target in imported
            if target.startswith("max.nn.") and target.rpartition(".")[2] in V2_ONLY_METHODS
        } if imported is not None else {c for c in V2_ONLY_METHODS if c in state.source}

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in _OWNERS:
            return
        name = func.attr.value
        owners = [c for c in _OWNERS[name] if c in self.imported_classes]
        if not owners or re.search(rf"\bdef {name}\s*\(", self.state.source):
            return  # (no such V2 layer here, or the package's own method of that name)
        self.todo("MV342", f"V3 {owners[0]} has no {name}(): {V2_ONLY_METHODS[owners[0]][name]}")


__all__ = ["LayerMethods"]
