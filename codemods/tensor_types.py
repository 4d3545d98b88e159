"""MV33x — ``TensorValue``/``BufferValue``/``TensorValueLike`` → ``Tensor``.

Rewrites every type reference (annotations, ``isinstance`` checks, ``cast``,
aliases); a *call* such as ``TensorValue(x)`` is graph plumbing and is flagged.
``Value``/``Type`` annotations have no V3 counterpart in ``forward()`` and are
flagged (MV331).

    def f(x: TensorValue) -> TensorValue:   →   def f(x: Tensor) -> Tensor:
"""

from __future__ import annotations

import libcst as cst

from codemods.base import Codemod

TENSOR_MODULE = "max.experimental.tensor"
_TO_TENSOR = {"TensorValue", "BufferValue", "TensorValueLike"}
_GRAPH_ONLY = {"Value", "Type"}


def graph_symbol(qualified: str | None) -> str | None:
    """``max.graph.value.TensorValue`` → ``TensorValue`` (None outside max.graph)."""
    if qualified is None or not qualified.startswith("max.graph."):
        return None
    return qualified.rsplit(".", 1)[1]


class TensorTypes(Codemod):
    PREFIX = "MV33"

    @classmethod
    def applies(cls, source: str) -> bool:
        return "Value" in source or "Type" in source

    def idle_hooks(self) -> tuple[str, ...]:
        imported = self.imported()
        if imported is None or any(graph_symbol(t) in _TO_TENSOR or graph_symbol(t) in _GRAPH_ONLY for t in imported):
            return ()
        return ("leave_Name",)  # no name of the file is one of them (an attribute chain still may be)

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if id(original) in self.state.non_refs:
            return updated
        symbol = graph_symbol(self.qualname(original))
        return self._rewrite(original, updated, symbol)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        qual = self.qualname(original)
        if qual is None or not qual.startswith("max.graph.") or qual.count(".") < 2:
            return updated
        return self._rewrite(original, updated, graph_symbol(qual))

    def _rewrite(
        self, original: cst.BaseExpression, updated: cst.BaseExpression, symbol: str | None
    ) -> cst.BaseExpression:
        if symbol in _TO_TENSOR:
            if id(original) in self.state.call_funcs:
                self.todo("MV373", f"{symbol}(...) converts graph values: in V3 code this is kernel interop only")
                return updated
            if id(original) in self.state.attr_bases:
                return updated
            name = self.state.import_name(TENSOR_MODULE, "Tensor")
            self.rewrote(original, "MV330", f"{symbol} → Tensor")
            return cst.Name(name)
        if symbol in _GRAPH_ONLY and self.state.annotation_depth > 0:
            self.todo("MV331", f"{symbol} annotation: forward() receives Tensors, not graph values")
        return updated
