from __future__ import annotations

from typing import Any

from max.experimental import functional as F
from max.experimental.nn import Module
from max.experimental.nn.common_layers.attention import AttentionWithRope
from max.experimental.sharding import DeviceMapping
from max.experimental.tensor import Tensor


class DistributedTransformerBlock(Module[..., Tensor]):
    """V3 port of V2 ``max.nn.transformer.DistributedTransformerBlock``; added by migrate-v3.

    Same constructor, call convention and attribute names (so the same weight
    names) as V2, but ONE block: V3 runs it on Tensors placed on the device
    mesh (the MLP and attention place their own weights) instead of a clone per
    device; V2's allreduce of the MLP output is a Replicated transfer.
    ``devices`` and ``signal_buffers`` are accepted and unused.
    """

    def __init__(self, attention: Any, mlp: Any, attention_norm: Any, mlp_norm: Any, devices: Any = None) -> None:
        super().__init__()
        self.self_attn = attention
        self.mlp = mlp
        self.input_layernorm = attention_norm
        self.post_attention_layernorm = mlp_norm

    def forward(
        self,
        layer_idx: Tensor,
        xs: Tensor,
        signal_buffers: Any,
        kv_collections: Any,
        freqs_cis: Tensor,
        input_row_offsets: Tensor,
    ) -> Tensor:
        normed = self.input_layernorm(xs)
        if isinstance(self.self_attn, AttentionWithRope):
            attn_out = self.self_attn(normed, kv_collections, input_row_offsets=input_row_offsets)
        else:
            attn_out = self.self_attn(
                layer_idx, normed, signal_buffers, kv_collections, freqs_cis=freqs_cis,
                input_row_offsets=input_row_offsets,
            )
        hs = xs + F.transfer_to(attn_out, DeviceMapping.replicated(attn_out.mesh))
        mlp_out = self.mlp(self.post_attention_layernorm(hs))
        return hs + F.transfer_to(mlp_out, DeviceMapping.replicated(mlp_out.mesh))
