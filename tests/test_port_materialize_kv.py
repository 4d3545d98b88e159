"""The V3 port of V2 ``AttentionWithRope.materialize_kv_from_hidden``
(``migrate_v3/knowledge/ports/materialize_kv.py``), a method V3's layer lacks.

Compiled on CPU (two small graphs): the V2 layer's method and the port on a V3
``AttentionWithRope`` with the same weights write the same K/V into a paged
cache of MAX's own cache manager, for the same hidden states. The cache's
blocks are zeroed before each run, so a port that wrote nothing, or wrote
elsewhere, differs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

HIDDEN = 16
TOKENS = 5


def _kv() -> Any:
    from max.dtype import DType
    from max.graph import DeviceRef
    from max.nn.kv_cache import MHAKVCacheParams

    return MHAKVCacheParams(dtype=DType.float32, n_kv_heads=1, head_dim=8, num_layers=1,
                            devices=[DeviceRef.CPU()], page_size=16)


def _sizes(kv: Any) -> dict[str, Any]:
    return {"num_attention_heads": 2, "num_key_value_heads": 1, "hidden_size": HIDDEN, "kv_params": kv,
            "use_qk_norm": True}


def _input_types(kv: Any) -> list[Any]:
    from max.dtype import DType
    from max.graph import DeviceRef, TensorType

    from migrate_v3.verify.kv_inputs import kv_leaves

    return [
        TensorType(DType.float32, ["total_seq_len", HIDDEN], device=DeviceRef.CPU()),
        TensorType(DType.uint32, ["input_row_offsets_len"], device=DeviceRef.CPU()),
        *kv_leaves(kv),
    ]


def _run(execute: Any, kv: Any, hidden: np.ndarray) -> np.ndarray:
    """The cache's blocks after ``execute(*inputs)``, from zero."""
    from max.driver import Buffer

    from migrate_v3.verify.kv_inputs import runtime_kv_inputs

    cache = runtime_kv_inputs(kv, np.arange(1, TOKENS + 1, dtype=np.int64))
    blocks = cache[0].to_numpy()  # (a view: the run writes into it)
    blocks[...] = 0
    offsets = np.array([0, TOKENS], dtype=np.uint32)
    execute(Buffer.from_numpy(hidden), Buffer.from_numpy(offsets), *cache)
    return blocks.copy()


@pytest.mark.slow
def test_port_writes_the_kv_the_v2_method_writes() -> None:
    from max import tree
    from max.driver import CPU
    from max.dtype import DType
    from max.engine import InferenceSession
    from max.experimental import functional as F
    from max.experimental.nn import Module
    from max.experimental.nn.common_layers.attention import AttentionWithRope as V3Attention
    from max.experimental.nn.common_layers.rotary_embedding import RotaryEmbedding as V3Rope
    from max.experimental.tensor import Tensor, default_dtype
    from max.graph import DeviceRef, Graph, ops
    from max.nn.attention.attention_with_rope import AttentionWithRope as V2Attention
    from max.nn.kv_cache import KVCacheInputsPerDevice
    from max.nn.rotary_embedding import RotaryEmbedding as V2Rope

    from migrate_v3.knowledge.ports.materialize_kv import materialize_kv_from_hidden

    kv = _kv()
    rope = {"dim": HIDDEN, "n_heads": 2, "theta": 1e4, "max_seq_len": 64}
    v2 = V2Attention(rope=V2Rope(**rope), dtype=DType.float32, devices=[DeviceRef.CPU()], **_sizes(kv))
    rng = np.random.default_rng(0)
    weights = {k: (rng.standard_normal([int(d) for d in w.shape]) * 0.3).astype(np.float32)
               for k, w in v2.raw_state_dict().items()}
    v2.load_state_dict(weights, weight_alignment=1)

    def collection(values: Any) -> Any:
        return tree.leaves(kv.unflatten_kv_inputs(iter(values)), leaf=KVCacheInputsPerDevice)[0]

    with Graph("materialize_v2", input_types=_input_types(kv)) as graph:
        hidden, offsets, *cache = graph.inputs
        v2.materialize_kv_from_hidden(
            layer_idx=ops.constant(0, DType.uint32, device=DeviceRef.CPU()), hidden=hidden.tensor,
            kv_collection=collection(cache), freqs_cis=v2.rope.freqs_cis, input_row_offsets=offsets.tensor,
        )
        graph.output(hidden.tensor)
    model2 = InferenceSession(devices=[CPU()]).load(graph, weights_registry=v2.state_dict())

    class Materialize(Module[..., Tensor]):
        def __init__(self, attention: V3Attention) -> None:
            super().__init__()
            self.attention = attention

        def forward(self, hidden: Tensor, offsets: Tensor, *cache: Tensor) -> Tensor:
            materialize_kv_from_hidden(
                self.attention, F.constant(0, DType.uint32, device=CPU()), hidden,
                collection(x._graph_value for x in cache), self.attention.rope.freqs_cis, offsets,
            )
            return hidden

    with F.lazy(), default_dtype(DType.float32):
        v3 = Materialize(V3Attention(rope=V3Rope(**rope, device=CPU()), layer_idx=0, **_sizes(kv)))
    renamed = {"q_norm.weight": "q_norm_weight", "k_norm.weight": "k_norm_weight"}
    weights3 = {f"attention.{renamed.get(k, k)}": v for k, v in weights.items()}
    assert set(weights3) >= {k for k, _ in v3.parameters if not k.startswith("attention.rope.")}
    compiled = v3.compile(*_input_types(kv), weights={**weights3, **{
        k: p for k, p in v3.parameters if k.startswith("attention.rope.")}})

    hidden = rng.standard_normal([TOKENS, HIDDEN]).astype(np.float32)
    expected = _run(model2.execute, kv, hidden)
    got = _run(compiled, kv, hidden)
    assert np.abs(expected).max() > 1e-2  # the V2 method wrote the request's K/V
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
