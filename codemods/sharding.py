"""MV39x — V2 sharding (flagged, not rewritten yet).

V2 sets a ``ShardingStrategy`` per layer and calls ``.shard(devices)``; V3
places tensors on a ``DeviceMesh`` (``col_parallel``/``row_parallel``) and
inserts collectives from placements. ``Allreduce``/``Signals`` go away.

    self.q_proj.sharding_strategy = ShardingStrategy.rowwise(n)
    →  # TODO(migrate-v3): MV390 V2 rowwise (axis 0) is V3 col_parallel(layer); ...
"""

from __future__ import annotations

import libcst as cst

from codemods.base import Codemod

_COLLECTIVE_CLASSES = {
    "Allreduce": "use F.allreduce_sum(t, mesh_axis=0) (or a Replicated F.transfer_to)",
    "Signals": "signal buffers are added by compile(); drop them",
}
_SHARD_HELPERS = ("forward_sharded_layers", "forward_sequential_layers", "shard")


class Sharding(Codemod):
    PREFIX = "MV39"

    @classmethod
    def applies(cls, source: str) -> bool:
        return any(w in source for w in ("shard", "Shard", "Allreduce", "Signals"))

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        qual = self.qualname(original.func)
        name = qual.rsplit(".", 1)[1] if qual else None
        if name in _COLLECTIVE_CLASSES and qual is not None and qual.startswith("max.nn"):
            self.todo("MV391", f"{name}: {_COLLECTIVE_CLASSES[name]}")
        elif qual is not None and qual.startswith("max.") and "ShardingStrategy" in qual:
            self.todo("MV390", "ShardingStrategy: V3 places weights on a DeviceMesh "
                      "(V2 rowwise = V3 col_parallel, V2 columnwise = V3 row_parallel)")
        elif name in _SHARD_HELPERS[:2] and qual is not None and qual.startswith("max.nn"):
            self.todo("MV390", f"{name}: V3 runs one module on one distributed Tensor")
        elif isinstance(original.func, cst.Attribute) and original.func.attr.value == "shard":
            self.todo("MV390", ".shard(devices): V3 has no per-device module lists; use placements")
        return updated

    def leave_AssignTarget(self, original: cst.AssignTarget, updated: cst.AssignTarget) -> cst.AssignTarget:
        target = original.target
        if isinstance(target, cst.Attribute) and target.attr.value == "sharding_strategy":
            self.todo("MV390", "sharding_strategy: use col_parallel()/row_parallel() from common_layers.linear")
        return updated
