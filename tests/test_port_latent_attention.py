"""The V3 ports of V2 ``LatentAttentionWithRope`` and its one-device TP/DP variants
(``migrate_v3/knowledge/ports/latent_attention.py``).

No graph is compiled: each case builds the V2 layer and its port (under
``F.lazy()``) from the same arguments and checks the V3 parameters against
the V2 weights (names, shapes, dtypes: ``norm_dtype`` differs from ``dtype``
here) and the attention scale (``rope.compute_scale``) against V2's.
"""

from __future__ import annotations

from typing import Any

import pytest

from migrate_v3.verify import sides
from migrate_v3.verify.align import align_keys


def _kwargs(q_lora_rank: int | None) -> dict[str, Any]:
    from max.dtype import DType
    from max.graph import DeviceRef
    from max.nn.kv_cache import KVCacheParams
    from max.nn.rotary_embedding import RotaryEmbedding

    return {
        "rope": RotaryEmbedding(dim=8, n_heads=4, theta=10000.0, max_seq_len=64),
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "hidden_size": 64,
        "kv_params": KVCacheParams(dtype=DType.bfloat16, head_dim=24, num_layers=1, devices=[DeviceRef.CPU()]),
        "dtype": DType.bfloat16,
        "norm_dtype": DType.float32,
        "devices": [DeviceRef.CPU()],
        "q_lora_rank": q_lora_rank,
        "kv_lora_rank": 16,
        "qk_nope_head_dim": 16,
        "qk_rope_head_dim": 8,
        "v_head_dim": 16,
    }


@pytest.mark.parametrize("q_lora_rank", [32, None])
def test_latent_attention_port_has_v2_weights_and_scale(q_lora_rank: int | None) -> None:
    from max.experimental import functional as F
    from max.nn.attention.multi_latent_attention import (
        LatentAttentionWithRope as V2LatentAttentionWithRope,
    )

    from migrate_v3.knowledge.ports.latent_attention import LatentAttentionWithRope

    v2 = V2LatentAttentionWithRope(**_kwargs(q_lora_rank))
    with F.lazy():
        v3 = LatentAttentionWithRope(**_kwargs(q_lora_rank))
    signature2, signature3 = sides.v2_signature(v2), sides.v3_signature(v3)
    assert align_keys(signature2, signature3).ok
    assert "kv_a_layernorm.weight" in signature3  # V2's key, not V3's kv_a_proj_layernorm
    assert v3.scale == v2.scale


def test_latent_attention_port_refuses_more_than_one_device() -> None:
    from max.graph import DeviceRef

    from migrate_v3.knowledge.ports.latent_attention import LatentAttentionWithRope

    kwargs = _kwargs(32) | {"devices": [DeviceRef.CPU(), DeviceRef.CPU()]}
    with pytest.raises(NotImplementedError, match="single-device"):
        LatentAttentionWithRope(**kwargs)


@pytest.mark.parametrize("name, extra", [("TensorParallelLatentAttentionWithRope", {"skip_allreduce": True}),
                                         ("DataParallelLatentAttentionWithRope", {})])
def test_one_device_distributed_ports_have_v2_weights(name: str, extra: dict[str, Any]) -> None:
    from max.experimental import functional as F
    from max.nn.attention import multi_latent_attention as v2_mla

    from migrate_v3.knowledge.ports import latent_attention
    from migrate_v3.verify.archbuild import cpu_comm

    with cpu_comm():  # V2's tensor-parallel variant opens an all-reduce at construction
        v2 = getattr(v2_mla, name)(**_kwargs(32), **extra)
    with F.lazy():
        v3 = getattr(latent_attention, name)(**_kwargs(32), **extra)
    assert align_keys(sides.v2_signature(v2), sides.v3_signature(v3)).ok


def test_one_device_port_takes_per_device_lists_or_the_one_tensor_a_collapsed_caller_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Lists in, a list out (V2's call); one value in, one out (a caller whose lists became one
    Tensor, with some arguments still lists): the single-device forward gets one device's values."""
    from migrate_v3.knowledge.ports import latent_attention

    seen: list[tuple[Any, ...]] = []

    def forward(self: Any, *args: Any) -> str:
        seen.append(args)
        return "out"

    monkeypatch.setattr(latent_attention.LatentAttentionWithRope, "forward", forward)
    port = object.__new__(latent_attention.DataParallelLatentAttentionWithRope)
    assert port.forward("i", ["x"], ["s"], ["kv"], ["f"], ["r"], ["m"]) == ["out"]
    assert port.forward("i", "x", ["s"], ["kv"], "f", ["r"]) == "out"
    assert seen == [("i", "x", "kv", "f", "r", "m"), ("i", "x", "kv", "f", "r", None)]
    with pytest.raises(NotImplementedError, match="single-device"):
        port.forward("i", ["x", "y"], [], [], [], [])
