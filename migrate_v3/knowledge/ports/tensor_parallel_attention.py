from __future__ import annotations

from math import sqrt
from typing import Any

from max.driver import CPU
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.nn.common_layers.functional_kernels import (
    flash_attention_ragged,
    rope_split_store_ragged,
)
from max.experimental.nn.common_layers.linear import col_parallel, row_parallel
from max.experimental.sharding import DeviceMapping
from max.experimental.tensor import Tensor
from max.nn.attention import MHAMaskVariant


class TensorParallelAttentionWithRope(Module[..., Tensor]):
    """V3 port of V2 ``max.nn.attention.TensorParallelAttentionWithRope``; added by migrate-v3.

    Same constructor, call convention and weight names (``q_proj``/``k_proj``/
    ``v_proj``/``o_proj``) as V2. One module on the mesh instead of one clone
    per device: q/k/v are ``col_parallel`` (V2 rowwise), o is ``row_parallel``
    (V2 head-aware columnwise: equal when the head counts divide by the device
    count), the kernels get each device's head count, and the output is
    reduced to Replicated as V2's allreduce did. ``signal_buffers`` are
    accepted and unused. Stacked q/k/v, q/k norm and quantization are not ported.
    """

    def __init__(
        self,
        *,
        rope: Any,
        num_attention_heads: int,
        num_key_value_heads: int,
        hidden_size: int,
        kv_params: Any,
        devices: Any = None,
        dtype: Any = None,
        linear_cls: Any = None,
        stacked_qkv: bool = False,
        scale: float | None = None,
        has_bias: bool = False,
        quant_config: Any = None,
        clip_qkv: float | None = None,
        use_qk_norm: bool = False,
        rms_norm_eps: float = 1e-6,
        mask_variant: MHAMaskVariant = MHAMaskVariant.CAUSAL_MASK,
        sliding_window: int | None = None,
    ) -> None:
        super().__init__()
        if stacked_qkv or use_qk_norm or quant_config is not None:
            raise NotImplementedError("the migrate-v3 port supports separate q/k/v, no q/k norm, no quantization")
        self.rope = rope
        self.n_heads = num_attention_heads
        self.kv_params = kv_params
        self.has_bias = has_bias
        self.clip_qkv = clip_qkv
        self.mask_variant = mask_variant
        self.sliding_window = sliding_window
        self.scale = scale if scale is not None else sqrt(1.0 / kv_params.head_dim)
        self.q_weight_dim = kv_params.head_dim * num_attention_heads
        kv_weight_dim = kv_params.head_dim * num_key_value_heads
        self.q_proj = col_parallel(Linear(hidden_size, self.q_weight_dim, bias=has_bias))
        self.k_proj = col_parallel(Linear(hidden_size, kv_weight_dim, bias=has_bias))
        self.v_proj = col_parallel(Linear(hidden_size, kv_weight_dim, bias=has_bias))
        self.o_proj = row_parallel(Linear(self.q_weight_dim, hidden_size, bias=False))

    def forward(
        self,
        layer_idx: Tensor,
        x: Tensor,
        signal_buffers: Any,
        kv_collection: Any,
        freqs_cis: Tensor,
        input_row_offsets: Tensor,
    ) -> Tensor:
        n_devices = kv_collection.n_devices
        wqkv = F.concat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight], axis=0)
        if self.clip_qkv:
            wqkv = F.clip(wqkv, -self.clip_qkv, self.clip_qkv)
        qkv = x @ wqkv.T
        if self.has_bias:
            qkv = qkv + F.concat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias], axis=0)
        layer = F.constant(layer_idx, DType.uint32, device=CPU()) if isinstance(layer_idx, int) else layer_idx
        xq = rope_split_store_ragged(
            kv_params=self.kv_params,
            qkv=qkv,
            input_row_offsets=input_row_offsets,
            freqs_cis=F.cast(freqs_cis, qkv.dtype),
            kv_collection=kv_collection,
            layer_idx=layer,
            n_heads=self.n_heads // n_devices,
            interleaved=self.rope.interleaved,
        ).rebind_mapping(qkv.mapping)
        xq = xq.reshape((-1, self.n_heads, self.kv_params.head_dim))
        extra = {} if self.sliding_window is None else {"local_window_size": self.sliding_window}
        attn = flash_attention_ragged(
            self.kv_params,
            input=xq,
            kv_collection=kv_collection,
            layer_idx=layer,
            input_row_offsets=input_row_offsets,
            mask_variant=self.mask_variant,
            scale=self.scale,
            **extra,
        ).rebind_mapping(xq.mapping)
        out = self.o_proj(attn.reshape((-1, self.q_weight_dim)))
        return F.transfer_to(out, DeviceMapping.replicated(out.mesh))
