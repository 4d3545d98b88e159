"""The classes ``KEY_KEEPERS`` emits keep V2's weight names on V3's layer (no checkpoint rename).

No graph is compiled: V2's ``AttentionWithRope(use_qk_norm=True)`` and the emitted
``AttentionWithRopeV2Names`` built from the same sizes have the same parameter names, shapes and
dtypes, where V3's own ``AttentionWithRope`` names the q/k norm weights ``q_norm_weight``.
"""

from __future__ import annotations

from typing import Any

import pytest

from migrate_v3.knowledge.layers import KEY_KEEPERS
from migrate_v3.verify import sides


def _keeper(v2_name: str) -> Any:
    """The emitted class, defined as ``apply`` writes it into a module (with that module's imports)."""
    from max.experimental.nn import Module
    from max.experimental.nn.common_layers.attention import AttentionWithRope
    from max.experimental.tensor import Tensor

    name, code = KEY_KEEPERS[v2_name]
    namespace: dict[str, Any] = {"Any": Any, "Module": Module, "Tensor": Tensor, "AttentionWithRope": AttentionWithRope}
    exec(compile(code, f"<{name}>", "exec"), namespace)  # noqa: S102 - the tool's own template
    return namespace[name]


@pytest.mark.needs_max
def test_attention_with_qk_norm_keeps_v2_names() -> None:
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.nn.common_layers.attention import AttentionWithRope as V3Attention
    from max.experimental.nn.common_layers.rotary_embedding import RotaryEmbedding as V3Rope
    from max.experimental.tensor import default_dtype
    from max.graph import DeviceRef
    from max.nn.attention.attention_with_rope import AttentionWithRope as V2Attention
    from max.nn.kv_cache import MHAKVCacheParams
    from max.nn.rotary_embedding import RotaryEmbedding as V2Rope

    kv = MHAKVCacheParams(dtype=DType.float32, n_kv_heads=1, head_dim=8, num_layers=1, devices=[DeviceRef.CPU()], page_size=16)
    sizes = {"num_attention_heads": 2, "num_key_value_heads": 1, "hidden_size": 16, "kv_params": kv, "use_qk_norm": True}
    v2 = V2Attention(rope=V2Rope(dim=16, n_heads=2, theta=1e4, max_seq_len=64), dtype=DType.float32,
                     devices=[DeviceRef.CPU()], **sizes)
    keeper = _keeper("AttentionWithRope")
    with F.lazy(), default_dtype(DType.float32):
        rope = V3Rope(dim=16, n_heads=2, theta=1e4, max_seq_len=64, device=CPU())
        kept = keeper(rope=rope, layer_idx=0, **sizes)
        plain = V3Attention(rope=rope, layer_idx=0, **sizes)
    expected = sides.v2_signature(v2)
    assert "q_norm.weight" in expected and "q_norm_weight" in sides.v3_signature(plain)  # (the case is there)
    assert sides.v3_signature(kept) == expected
    assert kept.q_norm_weight is kept.q_norm.weight  # what V3's forward reads
