"""MV342 — calls of V2 layer methods that the layer's V3 class does not have.

``layers`` maps a V2 layer's constructor onto its V3 class, but a method only
V2's class had (``AttentionWithRope.materialize_kv_from_hidden``, which DFlash
drafts call to write context K/V) would raise ``AttributeError`` at trace
time, with nothing in the output saying so. A call of such a method, in a
file that imports the V2 class and defines no method of that name itself,
calls migrate-v3's port of it, a function of the layer added to the module
(``knowledge/ports``, tested against V2's method), or, without one, gets a TODO
saying what V3 code does instead (``V2_ONLY_METHODS``, checked against max):

    layer.self_attn.materialize_kv_from_hidden(layer_idx=i, hidden=h, ...)
    →  materialize_kv_from_hidden(layer.self_attn, layer_idx=i, hidden=h, ...)
"""

from __future__ import annotations

import re

import libcst as cst

from codemods.base import Codemod, FileState
from codemods.ports import add_port
from migrate_v3.knowledge.layers import V2_ONLY_METHODS
from migrate_v3.knowledge.ports import PORTS

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

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = updated.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in _OWNERS:
            return updated
        name = func.attr.value
        owners = [c for c in _OWNERS[name] if c in self.imported_classes]
        if not owners or re.search(rf"\b(?:def|class) {name}\b", self.state.source):
            return updated  # (no such V2 layer here, or the package's own method of that name)
        if name not in PORTS:
            self.todo("MV342", f"V3 {owners[0]} has no {name}(): {V2_ONLY_METHODS[owners[0]][name]}")
            return updated
        add_port(self.state, name)
        self.rewrote(original, "MV342", f"{owners[0]}.{name}() has no V3 method: migrate-v3's port, "
                     f"{name}(layer, ...), added")
        space = updated.whitespace_before_args
        layer = cst.Arg(func.value, comma=cst.Comma(whitespace_after=space if isinstance(
            space, cst.ParenthesizedWhitespace) else cst.SimpleWhitespace(" ")))
        return updated.with_changes(func=cst.Name(name), args=[layer, *updated.args])


__all__ = ["LayerMethods"]
