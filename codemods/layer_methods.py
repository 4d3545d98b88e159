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

The same holds for a V2 ``Transformer`` method a subclass of a sibling's text model calls on
itself, when the sibling's variant is max's official port, whose text model lacks it
(``V2_MODEL_METHODS``: an EAGLE draft on Llama3 embeds and fuses its input, then runs the rest):

    return self._process_hidden_states(h, kv_collection, return_n_logits, input_row_offsets)
    →  return process_hidden_states(self, h, kv_collection, return_n_logits, input_row_offsets)
"""

from __future__ import annotations

import re

import libcst as cst

from codemods.base import Codemod, FileState
from codemods.model_outputs import official_text_model
from codemods.ports import add_port
from migrate_v3.knowledge.layers import V2_MODEL_METHODS, V2_ONLY_METHODS
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
        return any(f".{name}(" in source for name in (*_OWNERS, *V2_MODEL_METHODS))

    def __init__(self, state: FileState) -> None:
        super().__init__(state)
        #: V2 classes of ``V2_ONLY_METHODS`` the file imports from max.nn (named in it, when names
        #: are resolved by scope)
        imported = self.imported()
        self.imported_classes = {
            target.rpartition(".")[2] for target in imported
            if target.startswith("max.nn.") and target.rpartition(".")[2] in V2_ONLY_METHODS
        } if imported is not None else {c for c in V2_ONLY_METHODS if c in state.source}
        #: per enclosing class: the official module of the text model it subclasses, or None
        self.bases: list[str | None] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        found = (official_text_model(self, b.value) for b in node.bases if b.keyword is None)
        self.bases.append(next((f[0] for f in found if f is not None), None))

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.bases.pop()
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = updated.func
        if isinstance(func, cst.Attribute) and func.attr.value in V2_MODEL_METHODS:
            return self._model_method(original, updated, func)
        if not isinstance(func, cst.Attribute) or func.attr.value not in _OWNERS:
            return updated
        name = func.attr.value
        owners = [c for c in _OWNERS[name] if c in self.imported_classes]
        if not owners or re.search(rf"\b(?:def|class) {name}\b", self.state.source):
            return updated  # (no such V2 layer here, or the package's own method of that name)
        if name not in PORTS:
            self.todo("MV342", f"V3 {owners[0]} has no {name}(): {V2_ONLY_METHODS[owners[0]][name]}")
            return updated
        add_port(self.state, name, "MV342")
        self.rewrote(original, "MV342", f"{owners[0]}.{name}() has no V3 method: migrate-v3's port, "
                     f"{name}(layer, ...), added")
        return _called_on(updated, name, func.value)

    def _model_method(self, original: cst.Call, updated: cst.Call, func: cst.Attribute) -> cst.BaseExpression:
        """``self.<V2 Transformer method>(...)`` in a subclass of a text model whose official port lacks it."""
        method = func.attr.value
        module = self.bases[-1] if self.bases else None
        if not (isinstance(func.value, cst.Name) and func.value.value == "self") or module not in V2_MODEL_METHODS[method]:
            return updated
        if re.search(rf"\bdef {method}\b", self.state.source):
            return updated  # (the package's own method of that name)
        port = method.lstrip("_")
        add_port(self.state, port, "MV342")
        self.rewrote(original, "MV342", f"{module}'s text model has no {method}() (V2 Transformer's): migrate-v3's "
                     f"port, {port}(self, ...), added")
        return _called_on(updated, port, func.value)


def _called_on(call: cst.Call, function: str, obj: cst.BaseExpression) -> cst.Call:
    """``obj.m(args)`` → ``function(obj, args)`` (the call's layout kept)."""
    space = call.whitespace_before_args
    first = cst.Arg(obj, comma=cst.Comma(whitespace_after=space if isinstance(
        space, cst.ParenthesizedWhitespace) else cst.SimpleWhitespace(" ")))
    return call.with_changes(func=cst.Name(function), args=[first, *call.args])


__all__ = ["LayerMethods"]
