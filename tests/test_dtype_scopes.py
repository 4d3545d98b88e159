"""A V2 layer built in a dtype of its own keeps that dtype once migrated (``codemods.dtype_scopes``).

V2 layers take ``dtype=``; the migrated statement is built under ``default_dtype`` of it inside a
model built in another dtype. Checked on the real classes, no compile: the V3 module built under
``F.lazy()`` and a bfloat16 ``default_dtype`` has the V2 module's parameter names, shapes and dtypes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from migrate_v3.pipeline import transform_source
from migrate_v3.verify import sides
from tests.migrated_archs import load_module

V2 = '''\
from max.dtype import DType
from max.graph import DeviceRef, TensorValue
from max.nn import Embedding, Linear
from max.nn.layer import Module


class Block(Module):
    def __init__(self, dim: int, dtype: DType, gate_dtype: DType) -> None:
        super().__init__()
        self.embed = Embedding(16, dim, dtype, DeviceRef.CPU())
        self.proj = Linear(dim, dim, dtype=dtype, device=DeviceRef.CPU())
        self.gate = Linear(dim, 4, dtype=gate_dtype, device=DeviceRef.CPU())
        self.head = Linear(dim, 16, dtype=DType.float32, device=DeviceRef.CPU(), has_bias=True)

    def __call__(self, x: TensorValue) -> TensorValue:
        return self.head(self.proj(self.embed(x)))
'''


@pytest.mark.needs_max
def test_a_layer_in_its_own_dtype_keeps_it_in_a_model_of_another(tmp_path: Path) -> None:
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.tensor import default_dtype

    migrated = transform_source(V2).code
    assert "with default_dtype(gate_dtype):" in migrated and "TODO(migrate-v3): MV342 Linear(dtype=" not in migrated
    v2 = load_module("dtype_scopes_v2_block", V2, tmp_path)
    v3 = load_module("dtype_scopes_v3_block", migrated, tmp_path)

    block2 = v2.Block(8, DType.bfloat16, DType.float32)  # type: ignore[attr-defined]
    with F.lazy(), default_dtype(DType.bfloat16):  # (the model's dtype, as the V3 pipeline builds it)
        block3 = v3.Block(8, DType.bfloat16, DType.float32)  # type: ignore[attr-defined]
    expected = sides.v2_signature(block2)
    assert expected["gate.weight"][1] != expected["proj.weight"][1]  # (the case is there)
    assert sides.v3_signature(block3) == expected
