"""MV362 — weight adapters: key-renaming functions are flagged, never rewritten.

``compile(weights=...)`` binds checkpoint entries by attribute path from the
root module and silently ignores entries that match nothing, so a rename that
was right for the V2 module tree can quietly drop weights in V3 (the
llama3/olmo2/phi3 ports prefix ``language_model.`` instead of stripping
``model.``). Which prefix is right depends on the migrated module tree, so
every module-level function of a V2 file that takes a state dict / ``Weights``
and renames keys (``removeprefix``/``removesuffix``/``replace``/``re.sub``)
gets a TODO pointing at ``migrate-v3 weights check``.

    def convert_safetensor_state_dict(state_dict: dict[str, Weights]) -> ...:
        new_name = name.removeprefix("model.")
    →  # TODO(migrate-v3): MV362 V3 keys are attribute paths from the root module: ...
       def convert_safetensor_state_dict(state_dict: dict[str, Weights]) -> ...:
"""

from __future__ import annotations

import libcst as cst

from codemods.args import source
from codemods.base import Codemod, nodes_of

_RENAMES = frozenset({"removeprefix", "removesuffix", "replace", "sub"})
_MESSAGE = (
    "V3 keys are attribute paths from the root module: check this renaming against the "
    "migrated module tree with `migrate-v3 weights check` (compile() ignores keys that match nothing)"
)


def _takes_state_dict(func: cst.FunctionDef) -> bool:
    params = (*func.params.posonly_params, *func.params.params, *func.params.kwonly_params)
    for param in params:
        ann = source(param.annotation.annotation) if param.annotation else ""
        if "state_dict" in param.name.value or "Weights" in ann or "WeightData" in ann:
            return True
    return False


def _renames_keys(func: cst.FunctionDef) -> bool:
    return any(
        isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _RENAMES
        for node in nodes_of(func.body, (cst.Call,))
    )


class WeightAdapters(Codemod):
    PREFIX = "MV362"
    #: a V2 weight_adapters.py imports only max.graph.weights, which V3 shares
    NEUTRAL_OK = True

    @classmethod
    def applies(cls, source: str) -> bool:
        return ("Weights" in source or "state_dict" in source) and any(
            f".{r}(" in source for r in _RENAMES
        )

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.depth = 0

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.depth += 1

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.depth -= 1
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.depth == 0 and _takes_state_dict(node) and _renames_keys(node):
            self.todo("MV362", _MESSAGE)
        self.depth += 1

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.depth -= 1
        return updated
