"""MV38x — KV-cache plumbing (flagged, not rewritten yet).

V3 unflattens KV-cache inputs in the root module's ``forward()`` and uses the
Tensor-backed ``PagedCacheValues`` of ``common_layers.kv_cache``; the V2
``max.nn`` name is an alias of the V2 input type. Left unchanged with a TODO.

    self.kv_params.unflatten_kv_inputs(iter(kv_inputs))
    →  # TODO(migrate-v3): MV384 unflatten KV inputs in forward()
"""

from __future__ import annotations

import libcst as cst

from codemods.base import Codemod
from codemods.resolve import import_bindings

_UNFLATTEN = ("unflatten_kv_inputs", "unflatten_basic_kv_tree")


class KVCache(Codemod):
    PREFIX = "MV384"

    @classmethod
    def applies(cls, source: str) -> bool:
        return "unflatten_" in source or "PagedCacheValues" in source

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom:
        for local, target in import_bindings(original):
            if target.startswith("max.nn") and target.endswith(".PagedCacheValues"):
                self.todo(
                    "MV385",
                    f"{local} from max.nn is the V2 input alias; V3 code uses "
                    "max.experimental.nn.common_layers.kv_cache.PagedCacheValues (from_upstream)",
                )
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = original.func
        if isinstance(func, cst.Attribute) and func.attr.value in _UNFLATTEN:
            self.todo("MV384", f"{func.attr.value}: unflatten KV inputs in the root module's forward()")
        return updated
