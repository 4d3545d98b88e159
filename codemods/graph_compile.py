"""MV38x — graph construction and pipeline models (flagged, not rewritten yet).

Explicit ``Graph(...)`` building, ``session.load(graph, weights_registry=...)``,
V2 ``state_dict``/``load_state_dict``/``trace`` and V2 ``PipelineModel`` bases
become ``F.lazy()`` + ``model.compile(*types, weights=...)`` and the ModuleV3
pipeline bases. That rewrite is a later issue: these sites are left unchanged
with a TODO so nothing breaks silently.

    with Graph("m", input_types=types) as graph:
    →  # TODO(migrate-v3): MV380 build under F.lazy() and call model.compile(*input_types, weights=...)
       with Graph("m", input_types=types) as graph:
"""

from __future__ import annotations

import libcst as cst

from codemods.base import Codemod

_V2_PIPELINE_BASES = {
    "PipelineModel": "ModuleV3PipelineModel",
    "PipelineModelWithKVCache": "ModuleV3PipelineModelWithKVCache",
    "GraphPipelineModelWithKVCache": "ModuleV3PipelineModelWithKVCache",
    "MultiGraphPipelineModelWithKVCache": "ModuleV3MultiGraphPipelineModelWithKVCache",
}
_STATE_DICT = {
    "load_state_dict": "pass weights=state_dict to model.compile() instead",
    "state_dict": "V3 modules have no state_dict(): compile(weights=...) takes the checkpoint",
    "raw_state_dict": "V3 modules have no raw_state_dict()",
}


class GraphCompile(Codemod):
    PREFIX = "MV38"

    @classmethod
    def applies(cls, source: str) -> bool:
        return any(w in source for w in ("Graph", "state_dict", "weights_registry", "PipelineModel", "trace"))

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.class_depth = 0

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.class_depth += 1
        for base in node.bases:
            qual = self.qualname(base.value.value if isinstance(base.value, cst.Subscript) else base.value)
            name = qual.rsplit(".", 1)[1] if qual and qual.startswith("max.pipelines") else None
            if name in _V2_PIPELINE_BASES:
                self.todo("MV383", f"{name} → {_V2_PIPELINE_BASES[name]} (max.pipelines.lib.interfaces)")

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.class_depth -= 1
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value == "trace" and self.class_depth:
            self.todo("MV382", "trace() override: V3 unflattens inputs in forward() and compiles with model.compile()")

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        qual = self.qualname(original.func)
        if qual in ("max.graph.Graph", "max.graph.graph.Graph"):
            self.todo("MV380", "build under F.lazy() and call model.compile(*input_types, weights=...)")
        elif qual is not None and qual.endswith(".GraphSpec") and qual.startswith("max.pipelines"):
            self.todo("MV382", "GraphSpec: V3 compiles the module with model.compile()")
        elif isinstance(original.func, cst.Attribute):
            method = original.func.attr.value
            if method == "load" and any(a.keyword is not None and a.keyword.value == "weights_registry" for a in original.args):
                self.todo("MV381", "use compiled = model.compile(*types, weights=state_dict)")
            elif method in _STATE_DICT:
                self.todo("MV382", f".{method}(): {_STATE_DICT[method]}")
        return updated
