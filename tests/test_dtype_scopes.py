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


V2_TOWER = '''\
from dataclasses import dataclass

from max.dtype import DType
from max.graph import DeviceRef, TensorValue
from max.nn import LayerList, Linear
from max.nn.layer import Module


@dataclass
class VisionConfig:
    dtype: DType
    hidden_size: int


class VisionBlock(Module):
    def __init__(self, dtype: DType, hidden_size: int) -> None:
        super().__init__()
        self.proj = Linear(hidden_size, hidden_size, dtype=dtype, device=DeviceRef.CPU())

    def __call__(self, x: TensorValue) -> TensorValue:
        return self.proj(x)


class Model(Module):
    def __init__(self, vision_config: VisionConfig, dtype: DType) -> None:
        super().__init__()
        self.vision = VisionTower(vision_config)
        self.text = VisionBlock(dtype=dtype, hidden_size=vision_config.hidden_size)

    def __call__(self, x: TensorValue) -> TensorValue:
        return self.text(self.vision(x))


class VisionTower(Module):
    def __init__(self, config: VisionConfig) -> None:
        super().__init__()
        self.blocks = LayerList([VisionBlock(dtype=config.dtype, hidden_size=config.hidden_size) for _ in range(2)])

    def __call__(self, x: TensorValue) -> TensorValue:
        return self.blocks[1](self.blocks[0](x))
'''


@pytest.mark.needs_max
def test_a_tower_built_from_a_sub_config_keeps_its_dtype(tmp_path: Path) -> None:
    """The vision tower of a model built in bfloat16 whose vision config says float32 (qwen3_5's
    tower, the qwen3vl_moe sub-config it builds from) is built in float32, as V2 built it."""
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.tensor import default_dtype

    migrated = transform_source(V2_TOWER).code
    v2 = load_module("dtype_scopes_v2_tower", V2_TOWER, tmp_path)
    v3 = load_module("dtype_scopes_v3_tower", migrated, tmp_path)
    vision = v2.VisionConfig(DType.float32, 8)  # type: ignore[attr-defined]

    model2 = v2.Model(vision, DType.bfloat16)  # type: ignore[attr-defined]
    with F.lazy(), default_dtype(DType.bfloat16):  # (the model's dtype, as the V3 pipeline builds it)
        model3 = v3.Model(vision, DType.bfloat16)  # type: ignore[attr-defined]
    expected = sides.v2_signature(model2)
    assert {expected["vision.blocks.0.proj.weight"][1], expected["text.proj.weight"][1]} == {"float32", "bfloat16"}
    assert sides.v3_signature(model3) == expected
