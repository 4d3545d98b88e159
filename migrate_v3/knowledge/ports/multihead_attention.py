from __future__ import annotations

from collections.abc import Sequence
from math import sqrt
from typing import Any

from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor
from max.graph import DeviceRef
from max.nn.attention.mask_config import MHAMaskVariant
from max.nn.kernels import flash_attention_gpu


class MultiheadAttention(Module[..., Tensor]):
    """V3 port of V2 ``max.nn.attention.multihead_attention.MultiheadAttention`` (single device); added by migrate-v3.

    Same constructor, attributes and overridable steps (``_init_weights``,
    ``_compute_qkv``, ``_apply_attention``, ``_forward_single``) as V2, so the
    same weight names: ``q_proj``/``k_proj``/``v_proj`` (V2's unfused
    ``StackedLinear`` left its own name out of theirs) or one ``qkv_proj``
    when ``stacked_qkv``, and ``o_proj``. ``dtype`` is the weights' dtype, as in V2.
    """

    def __init__(
        self,
        num_attention_heads: int,
        hidden_size: int,
        devices: Sequence[DeviceRef] | None = None,
        dtype: DType = DType.float32,
        scale: float | None = None,
        qkv_has_bias: bool = False,
        o_proj_has_bias: bool = False,
        stacked_qkv: bool = False,
    ) -> None:
        super().__init__()
        if hidden_size % num_attention_heads != 0:
            raise ValueError(
                f"hidden_size ({hidden_size}) must be divisible by num_attention_heads ({num_attention_heads})"
            )
        if devices is not None and len(devices) != 1:
            raise NotImplementedError("the migrate-v3 port of MultiheadAttention runs on one device")
        self.num_heads = num_attention_heads
        self.head_dim = hidden_size // num_attention_heads
        self.embed_dim = hidden_size
        self.devices = list(devices) if devices is not None else [DeviceRef.CPU()]
        self.is_distributed = False
        self.scale = scale if scale is not None else 1.0 / sqrt(self.head_dim)
        self.qkv_has_bias = qkv_has_bias
        self.o_proj_has_bias = o_proj_has_bias
        self.stacked_qkv = stacked_qkv
        self._init_weights(dtype)

    def _linear(self, in_dim: int, out_dim: int, bias: bool, dtype: DType) -> Linear:
        """A V3 ``Linear`` whose weights have ``dtype`` (V2's), not the default dtype."""
        linear = Linear(in_dim, out_dim, bias=bias)
        linear.weight = Tensor.zeros([out_dim, in_dim], dtype=dtype)
        if bias:
            linear.bias = Tensor.zeros([out_dim], dtype=dtype)
        return linear

    def _init_weights(self, dtype: DType) -> None:
        dim = self.embed_dim
        if self.stacked_qkv:
            self.qkv_proj = self._linear(dim, 3 * dim, self.qkv_has_bias, dtype)
        else:
            self.q_proj = self._linear(dim, dim, self.qkv_has_bias, dtype)
            self.k_proj = self._linear(dim, dim, self.qkv_has_bias, dtype)
            self.v_proj = self._linear(dim, dim, self.qkv_has_bias, dtype)
        self.o_proj = self._linear(dim, dim, self.o_proj_has_bias, dtype)

    def _compute_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        if self.stacked_qkv:
            q, k, v = F.split(self.qkv_proj(x), [self.embed_dim] * 3, axis=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        shape = (x.shape[0], x.shape[1], self.num_heads, self.head_dim)
        return q.reshape(shape), k.reshape(shape), v.reshape(shape)

    def _apply_attention(self, q: Tensor, k: Tensor, v: Tensor, **kwargs: Any) -> Tensor:
        mask_variant = kwargs.get("mask_variant", MHAMaskVariant.NULL_MASK)
        out = F.functional(flash_attention_gpu)(q, k, v, mask_variant=mask_variant, scale=self.scale)
        return out.reshape((q.shape[0], q.shape[1], self.num_heads * self.head_dim))

    def _forward_single(self, x: Tensor, **kwargs: Any) -> Tensor:
        q, k, v = self._compute_qkv(x)
        return self.o_proj(self._apply_attention(q, k, v, **kwargs))

    def forward(self, x: Tensor | list[Tensor], signal_buffers: Any = None, **kwargs: Any) -> Tensor:
        if isinstance(x, list):
            if len(x) != 1:
                raise ValueError(f"Single-device attention expects one input tensor, got {len(x)}")
            x = x[0]
        return self._forward_single(x, **kwargs)
