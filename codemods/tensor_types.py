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

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        #: per enclosing function: its parameters annotated as graph values (Tensors now)
        self.params: list[set[str]] = []
        #: ``x = TensorValue(x)`` of such a parameter: ids of the statements, and of the calls' callee
        self.conversions: set[int] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.params.append({
            p.name.value for p in (*node.params.params, *node.params.kwonly_params)
            if p.annotation is not None and graph_symbol(self.qualname(p.annotation.annotation)) in _TO_TENSOR
        })

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.params.pop()
        return updated

    def visit_Assign(self, node: cst.Assign) -> None:
        """``x = TensorValue(x)`` of a parameter ``x: TensorValueLike``: V2 made a graph value of
        what it was given; the parameter is a Tensor now, so the statement goes."""
        value, target = node.value, node.targets[0].target if len(node.targets) == 1 else None
        if (
            self.params and isinstance(target, cst.Name) and target.value in self.params[-1]
            and isinstance(value, cst.Call) and len(value.args) == 1 and value.args[0].keyword is None
            and isinstance(value.args[0].value, cst.Name) and value.args[0].value.value == target.value
            and graph_symbol(self.qualname(value.func)) == "TensorValue"
        ):
            self.conversions.update((id(node), id(value.func)))

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | cst.RemovalSentinel:
        if self.conversions and len(original.body) == 1 and id(original.body[0]) in self.conversions:
            self.rewrote(original, "MV373", "x = TensorValue(x) of a parameter dropped: it is a Tensor")
            return cst.RemovalSentinel.REMOVE
        return updated

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
            if id(original) in self.conversions:
                return updated  # (the statement goes)
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
