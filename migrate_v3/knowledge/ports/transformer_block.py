from __future__ import annotations

from typing import Any

from max.experimental import functional as F
from max.experimental.nn import Module
from max.experimental.nn.common_layers.attention import AttentionWithRope
from max.experimental.tensor import Tensor


class TransformerBlock(Module[..., Tensor]):
    """V3 port of V2 ``max.nn.transformer.TransformerBlock``; added by migrate-v3.

    Same constructor, call convention and attribute names (so the same weight
    names) as V2. V3 ``AttentionWithRope`` takes its layer index and rope at
    construction and is called as ``(x, kv_collection, input_row_offsets=)``;
    any other attention module is called the V2 way.
    """

    def __init__(
        self,
        attention: Any,
        mlp: Any,
        attention_norm: Any,
        mlp_norm: Any,
        residual_multiplier: float = 1.0,
    ) -> None:
        super().__init__()
        self.self_attn = attention
        self.mlp = mlp
        self.input_layernorm = attention_norm
        self.post_attention_layernorm = mlp_norm
        self.residual_multiplier = residual_multiplier

    def forward(
        self,
        layer_idx: Tensor,
        x: Tensor,
        kv_collection: Any,
        freqs_cis: Tensor,
        input_row_offsets: Tensor,
    ) -> Tensor:
        normed = self.input_layernorm(x)
        if isinstance(self.self_attn, AttentionWithRope):
            attn_out = self.self_attn(normed, kv_collection, input_row_offsets=input_row_offsets)
        else:
            attn_out = self.self_attn(
                layer_idx, normed, kv_collection, freqs_cis=freqs_cis, input_row_offsets=input_row_offsets
            )
        if self.residual_multiplier != 1.0:
            attn_out = attn_out * F.constant(self.residual_multiplier, x.dtype, device=x.device)
        h = x + attn_out
        mlp = self.mlp(self.post_attention_layernorm(h))
        if self.residual_multiplier != 1.0:
            mlp = mlp * F.constant(self.residual_multiplier, x.dtype, device=x.device)
        return h + mlp
