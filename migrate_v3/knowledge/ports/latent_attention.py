from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from math import sqrt
from typing import Any

from max.driver import CPU
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.nn.common_layers.functional_kernels import (
    flare_mla_prefill_plan,
    mla_decode_graph,
    mla_prefill_decode_graph,
    mla_prefill_graph,
)
from max.experimental.nn.common_layers.multi_latent_attention import MLAPrefillMetadata
from max.experimental.nn.norm import RMSNorm
from max.experimental.tensor import Tensor, default_dtype
from max.nn.attention import MHAMaskVariant


class MLAWeight(Module[[], Tensor]):
    """One latent-attention weight, keyed ``<attribute>.weight`` as the checkpoint keys it; added by migrate-v3."""

    def __init__(self, weight: Tensor) -> None:
        self.weight = weight

    def forward(self) -> Tensor:
        return self.weight


def _in_dtype(dtype: DType | None) -> AbstractContextManager[Any]:
    """Build under ``dtype`` when the caller gave one, else under the default dtype."""
    return default_dtype(dtype) if dtype is not None else nullcontext()


class LatentAttentionWithRope(Module[..., Tensor]):
    """V3 port of V2 ``max.nn.attention.LatentAttentionWithRope``; added by migrate-v3.

    Same constructor, call (``layer_idx`` first, as a tensor) and checkpoint
    names as V2: ``q_a_proj.weight``, ``q_a_layernorm.weight``,
    ``q_b_proj.weight`` (or ``q_proj.weight``), ``kv_a_proj_with_mqa.weight``,
    ``kv_a_layernorm.weight``, ``kv_b_proj.weight``, ``o_proj.weight``. The
    bare V2 ``Weight`` attributes are one-weight children here (read them as
    ``self.q_a_proj.weight``; ``kv_a_proj_layernorm`` is the child
    ``kv_a_layernorm``), so the names need no weight-adapter rule, unlike V3's
    ``common_layers.multi_latent_attention.LatentAttentionWithRope``. The
    weights get V2's dtypes (``dtype``, ``norm_dtype``, ``o_proj_dtype``; the
    default dtype when None) and the scale is ``rope.compute_scale(scale)`` as
    in V2. Single device: ``devices`` beyond one, a ``linear_cls`` other than
    ``Linear`` and V2 sharding are refused, not ported.
    """

    def __init__(
        self,
        *,
        rope: Any,
        num_attention_heads: int,
        num_key_value_heads: int,
        hidden_size: int,
        kv_params: Any,
        dtype: DType | None = None,
        devices: Any = None,
        linear_cls: Any = None,
        o_proj_dtype: DType | None = None,
        o_proj_quant_config: Any = None,
        scale: float | None = None,
        q_lora_rank: int | None = None,
        kv_lora_rank: int = 512,
        qk_nope_head_dim: int = 128,
        qk_rope_head_dim: int = 64,
        v_head_dim: int = 128,
        buffer_size: int = 16384,
        graph_mode: str | None = None,
        norm_dtype: DType | None = None,
    ) -> None:
        role = graph_mode or "auto"
        if role not in ("prefill", "decode", "auto"):
            raise ValueError(f"Invalid graph_mode '{role}'. Use 'prefill', 'decode', or 'auto'.")
        if devices is not None and len(devices) > 1:
            raise NotImplementedError("the migrate-v3 port of LatentAttentionWithRope is single-device")
        if linear_cls is not None and getattr(linear_cls, "__name__", "") != "Linear":
            raise NotImplementedError(f"the migrate-v3 port of LatentAttentionWithRope builds o_proj as a "
                                      f"Linear, not {linear_cls!r}")
        self.graph_mode = role
        self.rope = rope
        self.n_heads = num_attention_heads
        self.kv_params = kv_params
        self.num_key_value_heads = num_key_value_heads
        self.hidden_size = hidden_size
        self.q_lora_rank = q_lora_rank
        self.kv_lora_rank = kv_lora_rank
        self.qk_nope_head_dim = qk_nope_head_dim
        self.qk_rope_head_dim = qk_rope_head_dim
        self.qk_head_dim = qk_nope_head_dim + qk_rope_head_dim
        self.v_head_dim = v_head_dim
        self.cache_head_dim = kv_lora_rank + qk_rope_head_dim
        self.BUFFER_TOK_SIZE = buffer_size
        self._scale = scale if scale is not None else sqrt(1.0 / self.qk_head_dim)
        self.scale = rope.compute_scale(self._scale)
        norm_dtype = norm_dtype or dtype
        with _in_dtype(dtype):
            if q_lora_rank is not None:
                self.q_a_proj = MLAWeight(Tensor.zeros([q_lora_rank, hidden_size]))
                with _in_dtype(norm_dtype):
                    self.q_a_layernorm = RMSNorm(dim=q_lora_rank, eps=1e-6)
                self.q_b_proj = MLAWeight(Tensor.zeros([self.n_heads * self.qk_head_dim, q_lora_rank]))
            else:
                self.q_proj = MLAWeight(Tensor.zeros([self.n_heads * self.qk_head_dim, hidden_size]))
            with _in_dtype(norm_dtype):
                self.kv_a_layernorm = MLAWeight(Tensor.ones([kv_lora_rank]))
            self.kv_a_proj_with_mqa = MLAWeight(Tensor.zeros([self.cache_head_dim, hidden_size]))
            self.kv_b_proj = MLAWeight(
                Tensor.zeros([self.n_heads * (qk_nope_head_dim + v_head_dim), kv_lora_rank])
            )
            with _in_dtype(o_proj_dtype):
                self.o_proj = Linear(
                    in_dim=self.n_heads * v_head_dim,
                    out_dim=hidden_size,
                    bias=False,
                    quant_config=o_proj_quant_config,
                )

    def create_mla_prefill_metadata(self, input_row_offsets: Any, kv_collection: Any) -> Any:
        """The prefill planning metadata the MLA prefill kernels need."""
        return self._prefill_metadata(input_row_offsets, kv_collection)

    def _prefill_metadata(self, input_row_offsets: Tensor, kv_collection: Any) -> MLAPrefillMetadata:
        layer_idx = F.constant(0, DType.uint32, device=CPU())
        buffer_row_offsets, cache_offsets, buffer_lengths = flare_mla_prefill_plan(
            self.kv_params, input_row_offsets, kv_collection, layer_idx, self.BUFFER_TOK_SIZE, max_chunks=1
        )
        return MLAPrefillMetadata(
            buffer_row_offsets=buffer_row_offsets, cache_offsets=cache_offsets, buffer_lengths=buffer_lengths
        )

    @property
    def _kv_b_proj_weight(self) -> Tensor:
        return self.kv_b_proj.weight.T.reshape([self.kv_lora_rank, self.n_heads, -1])

    @property
    def w_uk(self) -> Tensor:
        """Decode K-projection weights, ``[H, qk_nope_dim, kv_rank]``."""
        return self._kv_b_proj_weight[..., : self.qk_nope_head_dim].transpose(0, 1)

    @property
    def w_uv(self) -> Tensor:
        """Decode V-projection weights, ``[H, kv_rank, v_dim]``."""
        return self._kv_b_proj_weight[..., self.qk_nope_head_dim :].permute([1, 2, 0])

    @property
    def w_k(self) -> Tensor:
        """Prefill K-projection weights, ``[H*qk_nope_dim, kv_rank]``."""
        w_uk_base = self._kv_b_proj_weight[..., : self.qk_nope_head_dim]
        return w_uk_base.permute([1, 2, 0]).reshape([-1, self.kv_lora_rank])

    @property
    def wqkv(self) -> Tensor:
        """``q_a_proj`` (or ``q_proj``) and ``kv_a_proj_with_mqa`` concatenated."""
        q = self.q_a_proj if self.q_lora_rank is not None else self.q_proj
        return F.concat([q.weight, self.kv_a_proj_with_mqa.weight])

    def forward(
        self,
        layer_idx: Tensor,
        x: Tensor,
        kv_collection: Any,
        freqs_cis: Tensor,
        input_row_offsets: Tensor,
        mla_prefill_metadata: MLAPrefillMetadata | None = None,
    ) -> Tensor:
        qkv = x @ self.wqkv.T
        xq, kv = qkv.split([self.q_lora_rank or self.n_heads * self.qk_head_dim, self.cache_head_dim], axis=1)
        if self.q_lora_rank is not None:
            xq = self.q_a_layernorm(xq) @ self.q_b_proj.weight.T
        xq = xq.reshape([-1, self.n_heads, self.qk_head_dim])
        freqs_cis = F.cast(freqs_cis, xq.dtype).to(xq.device)
        attn: dict[str, Any] = {
            "q": xq,
            "kv": kv,
            "input_row_offsets": input_row_offsets,
            "freqs_cis": freqs_cis,
            "kv_norm_gamma": self.kv_a_layernorm.weight,
            "kv_params": self.kv_params,
            "kv_collection": kv_collection,
            "layer_idx": layer_idx,
            "epsilon": 1e-6,
            "mask_variant": MHAMaskVariant.CAUSAL_MASK,
            "scale": self.scale,
            "v_head_dim": self.v_head_dim,
        }
        if self.graph_mode in ("prefill", "auto"):
            meta = mla_prefill_metadata or self._prefill_metadata(input_row_offsets, kv_collection)
            attn["buffer_row_offsets"] = meta.buffer_row_offsets
            attn["cache_offsets"] = meta.cache_offsets
            attn["buffer_length"] = meta.buffer_lengths.to(CPU())
            attn["w_k"] = self.w_k
            attn["w_uv"] = self.w_uv
        if self.graph_mode in ("decode", "auto"):
            attn["w_uk"] = self.w_uk
            attn["w_uv"] = self.w_uv
            assert kv_collection.attention_dispatch_metadata is not None
            attn["scalar_args"] = kv_collection.attention_dispatch_metadata
            assert kv_collection.mla_num_partitions is not None
            attn["num_partitions_scalar"] = kv_collection.mla_num_partitions
        if self.graph_mode == "prefill":
            result = mla_prefill_graph(**attn)
        elif self.graph_mode == "decode":
            result = mla_decode_graph(**attn)
        else:
            result = mla_prefill_decode_graph(**attn)
        result = result.rebind_mapping(xq.mapping)
        return self.o_proj(result.reshape([result.shape[0], self.n_heads * self.v_head_dim]))


class _OneDeviceLatentAttention(LatentAttentionWithRope):
    """The distributed variants' per-device-list call, on one device: lists in, a list out; or, from a
    caller whose per-device lists became one Tensor (MV391), that Tensor in and one out (any argument
    still a list gives its one device's value)."""

    def create_mla_prefill_metadata(self, input_row_offsets: Any, kv_collection: Any) -> Any:
        """One metadata per device, as the distributed variants return them."""
        return [self._prefill_metadata(r, kv) for r, kv in zip(input_row_offsets, kv_collection, strict=True)]

    def forward(  # type: ignore[override]
        self,
        layer_idx: Tensor,
        xs: Any,
        signal_buffers: Any,
        kv_collections: Any,
        freqs_cis: Any,
        input_row_offsets: Any,
        mla_prefill_metadata: Any = None,
    ) -> Any:
        listed = isinstance(xs, list | tuple)
        if listed and len(xs) != 1:
            raise NotImplementedError(f"the migrate-v3 port of {type(self).__name__} is single-device")
        meta = _one(mla_prefill_metadata) if mla_prefill_metadata else None
        out = super().forward(layer_idx, _one(xs), _one(kv_collections), _one(freqs_cis), _one(input_row_offsets), meta)
        return [out] if listed else out


def _one(value: Any) -> Any:
    """One device's value: the first of a per-device list, else the value itself."""
    return value[0] if isinstance(value, list | tuple) else value


class TensorParallelLatentAttentionWithRope(_OneDeviceLatentAttention):
    """V3 port of V2 ``TensorParallelLatentAttentionWithRope`` on one device; added by migrate-v3.

    Same constructor (``skip_allreduce`` too), per-device-list call and weight
    names as V2; one device's all-reduce is the identity, so it is not built.
    """

    def __init__(self, *, skip_allreduce: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.skip_allreduce = skip_allreduce


class DataParallelLatentAttentionWithRope(_OneDeviceLatentAttention):
    """V3 port of V2 ``DataParallelLatentAttentionWithRope`` on one device; added by migrate-v3.

    Same constructor, per-device-list call and weight names as V2.
    """
