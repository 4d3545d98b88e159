"""MV36x — ``Weight(...)`` → a ``Tensor`` parameter of the same shape and dtype.

V3 makes every Tensor attribute a parameter, keyed by its attribute path; V2
keyed a ``Weight`` by its ``name=``. When the two differ the checkpoint key
changes, which the report says (MV361). The device argument goes away
(``Module.to(device)`` places parameters).

    self.weight = Weight("weight", DType.float32, [4], DeviceRef.CPU())
    →  self.weight = Tensor.zeros([4], dtype=DType.float32)

An annotation ``Weight`` becomes ``Tensor`` as well.
"""

from __future__ import annotations

import libcst as cst

from codemods.args import as_keyword, bind, relayout, source
from codemods.base import Codemod
from codemods.tensor_types import TENSOR_MODULE, graph_symbol

_WEIGHT_PARAMS = ("name", "dtype", "shape", "device", "quantization_encoding", "align", "sharding_strategy", "_placeholder", "_has_alias")


class Parameters(Codemod):
    PREFIX = "MV36"

    @classmethod
    def applies(cls, source: str) -> bool:
        return "Weight" in source

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.targets: list[str | None] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        target = node.targets[0].target if len(node.targets) == 1 else None
        attr = None
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
            attr = target.attr.value
        self.targets.append(attr)

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        self.targets.pop()
        return updated

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        target = node.target
        self_attr = isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self"
        self.targets.append(target.attr.value if self_attr and isinstance(target, cst.Attribute) else None)

    def leave_AnnAssign(self, original: cst.AnnAssign, updated: cst.AnnAssign) -> cst.AnnAssign:
        self.targets.pop()
        return updated

    def idle_hooks(self) -> tuple[str, ...]:
        imported = self.imported()
        if imported is None or any(graph_symbol(t) == "Weight" for t in imported):
            return ()
        return ("leave_Name",)  # no name of the file is V2's Weight (an attribute chain still may be)

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if self.state.annotation_depth == 0 or id(original) in self.state.non_refs:
            return updated
        return self._annotation(original, updated)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        if self.state.annotation_depth == 0:
            return updated
        return self._annotation(original, updated)

    def _annotation(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        """``attr: Weight`` annotates what is now a Tensor parameter."""
        if graph_symbol(self.qualname(original)) != "Weight" or id(original) in self.state.attr_bases:
            return updated
        self.rewrote(original, "MV360", "Weight annotation → Tensor")
        return cst.Name(self.state.import_name(TENSOR_MODULE, "Tensor"))

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if graph_symbol(self.qualname(original.func)) != "Weight":
            return updated
        bound = bind(updated, _WEIGHT_PARAMS)
        if bound is None or "shape" not in bound.args or "dtype" not in bound.args:
            self.todo("MV360", "Weight(...): make it a Tensor attribute (Tensor.zeros(shape, dtype=...))")
            return updated
        for extra in ("quantization_encoding", "sharding_strategy", "align"):
            if extra in bound.args and source(bound.args[extra].value) != "None":
                self.todo("MV360", f"Weight({extra}=...) has no Tensor equivalent")
                return updated
        attr = self.targets[-1] if self.targets else None
        name_arg = bound.args.get("name")
        key = source(name_arg.value) if name_arg else None
        if attr is None:
            self.todo("MV361", f"Weight name {key} was the V2 checkpoint key; in V3 the key is the attribute path")
        elif key is not None and key.strip("'\"") != attr:
            self.todo("MV361", f"checkpoint key {key} becomes {attr!r} (V3 keys are attribute paths): map it in the weight adapter")
        shape = bound.args["shape"].with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)
        dtype = as_keyword(bound.args["dtype"], "dtype")
        tensor = self.state.import_name(TENSOR_MODULE, "Tensor")
        self.rewrote(original, "MV360", "Weight(...) → Tensor.zeros(shape, dtype=...)")
        func = cst.Attribute(value=cst.Name(tensor), attr=cst.Name("zeros"))
        return updated.with_changes(func=func, args=relayout(updated.args, [shape, dtype]))
