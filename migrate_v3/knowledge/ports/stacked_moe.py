from __future__ import annotations

from collections.abc import Callable
from inspect import signature
from typing import Any

from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn import Module
from max.experimental.nn.common_layers.functional_kernels import (
    grouped_matmul_ragged,
    moe_create_indices,
    moe_finalize,
)
from max.experimental.nn.common_layers.mlp import MLP
from max.experimental.tensor import Tensor, default_dtype


class StackedExperts(Module[[], tuple[Tensor, ...]]):
    """The stacked expert weights, keyed ``experts.<name>`` as the checkpoint keys them; added by migrate-v3."""

    def __init__(self, num_experts: int, hidden_dim: int, moe_dim: int, has_bias: bool) -> None:
        self.gate_up_proj = Tensor.zeros([num_experts, hidden_dim, 2 * moe_dim])
        self.down_proj = Tensor.zeros([num_experts, moe_dim, hidden_dim])
        if has_bias:
            self.gate_up_proj_bias = Tensor.zeros([num_experts, 2 * moe_dim])
            self.down_proj_bias = Tensor.zeros([num_experts, hidden_dim])

    def forward(self) -> tuple[Tensor, ...]:
        return self.gate_up_proj, self.down_proj


def _silu_gate(gate: Tensor, up: Tensor) -> Tensor:
    return F.silu(gate) * up


def _build_gate(gate_cls: Callable[..., Any], devices: Any, dtype: DType, **kwargs: Any) -> Any:
    """``gate_cls`` with the V3 keywords, plus ``devices``/``dtype`` when its constructor takes them
    (a gate subclass that kept its own signature)."""
    try:
        names = set(signature(gate_cls).parameters)
    except (TypeError, ValueError):
        names = set()
    extra = {k: v for k, v in (("devices", devices), ("dtype", dtype)) if k in names}
    return gate_cls(**kwargs, **extra)


class StackedMoE(Module[[Tensor], Tensor]):
    """V3 port of V2 ``max.nn.moe.StackedMoE`` (unquantized, one device); added by migrate-v3.

    Same constructor, call and checkpoint names as V2: ``experts.gate_up_proj``
    ``[num_experts, hidden_dim, 2 * moe_dim]``, ``experts.down_proj``, the
    optional ``experts.*_bias``, ``gate.*`` and ``shared_experts.*``. The
    experts take ``dtype`` (V2's default bfloat16), the gate ``router_dtype``
    or bfloat16, as in V2. Concatenated or interleaved gate/up (by the enum's
    name, so V2's ``GateUpFormat`` still works), ``gated_activation_fn`` on
    Tensors (SiLU gating by default), ``apply_router_weight_first``, shared
    experts. A ``quant_config``, ``mxfp8_activations`` or more than one device
    is refused, not ported; ``is_sharding`` is accepted (V2's ``shard()``
    plumbing) and builds the weights anyway.
    """

    def __init__(
        self,
        devices: Any,
        hidden_dim: int,
        num_experts: int,
        num_experts_per_token: int,
        moe_dim: int,
        gate_cls: Callable[..., Any],
        dtype: DType = DType.bfloat16,
        gate_up_format: Any = None,
        gated_activation_fn: Callable[[Tensor, Tensor], Tensor] | None = None,
        has_bias: bool = False,
        has_shared_experts: bool = False,
        shared_experts_dim: int = 0,
        quant_config: Any = None,
        apply_router_weight_first: bool = False,
        router_dtype: DType | None = None,
        mxfp8_activations: bool = False,
        is_sharding: bool = False,
    ) -> None:
        if quant_config is not None or mxfp8_activations:
            raise NotImplementedError("the migrate-v3 port of StackedMoE is unquantized")
        if devices is not None and len(devices) > 1:
            raise NotImplementedError("the migrate-v3 port of StackedMoE is single-device")
        self.hidden_dim = hidden_dim
        self.num_experts = num_experts
        self.num_experts_per_token = num_experts_per_token
        self.moe_dim = moe_dim
        self.dtype = dtype
        self.interleaved = getattr(gate_up_format, "name", gate_up_format) == "INTERLEAVED"
        self.gated_activation_fn = gated_activation_fn or _silu_gate
        self.has_bias = has_bias
        self.has_shared_experts = has_shared_experts
        self.apply_router_weight_first = apply_router_weight_first
        self.router_dtype = router_dtype
        gate_dtype = router_dtype or DType.bfloat16
        with default_dtype(gate_dtype):
            self.gate = _build_gate(
                gate_cls,
                devices,
                gate_dtype,
                hidden_dim=hidden_dim,
                num_experts=num_experts,
                num_experts_per_token=num_experts_per_token,
            )
        with default_dtype(dtype):
            if has_shared_experts:
                if shared_experts_dim <= 0:
                    raise ValueError("shared_experts_dim must be greater than 0")
                self.shared_experts = MLP(hidden_dim=hidden_dim, feed_forward_length=shared_experts_dim)
            self.experts = StackedExperts(num_experts, hidden_dim, moe_dim, has_bias)

    @property
    def gate_up_proj_transposed(self) -> Tensor:
        """The gate/up weights as ``[num_experts, out_features, in_features]``."""
        return self.experts.gate_up_proj.transpose(1, 2)

    @property
    def down_proj_transposed(self) -> Tensor:
        """The down weights as ``[num_experts, out_features, in_features]``."""
        return self.experts.down_proj.transpose(1, 2)

    def forward(self, x: Tensor) -> Tensor:
        router_input = x if self.router_dtype is None else x.cast(self.router_dtype)
        router_idx, router_weight = self.gate(router_input)
        router_idx_flat = F.reshape(router_idx, [-1])
        order, starts, restore, expert_ids, usage = moe_create_indices(
            F.cast(router_idx_flat, DType.int32), self.num_experts
        )
        states = F.gather(x, F.cast(order // self.num_experts_per_token, DType.int32), axis=0)
        if self.apply_router_weight_first:
            states = states * F.gather(router_weight.reshape([-1, 1]), order, axis=0).cast(x.dtype)
        experts_of_rows = F.gather(router_idx_flat, order, axis=0) if self.has_bias else None
        gate_up = grouped_matmul_ragged(states, self.gate_up_proj_transposed, starts, expert_ids, usage)
        if experts_of_rows is not None:
            gate_up = gate_up + F.gather(self.experts.gate_up_proj_bias, experts_of_rows, axis=0)
        if gate_up.dtype != DType.bfloat16:
            raise ValueError("Gate+Up output must be BF16 for activation")
        if self.interleaved:
            gate, up = gate_up[:, 0::2], gate_up[:, 1::2]
        else:
            gate, up = gate_up[:, : self.moe_dim], gate_up[:, self.moe_dim :]
        down = grouped_matmul_ragged(
            self.gated_activation_fn(gate, up), self.down_proj_transposed, starts, expert_ids, usage
        )
        if experts_of_rows is not None:
            down = down + F.gather(self.experts.down_proj_bias, experts_of_rows, axis=0)
        if self.apply_router_weight_first:  # the experts already applied the router weights
            router_weight = F.broadcast_to(
                F.constant(1, router_weight.dtype, device=router_weight.device), router_weight.shape
            )
        out = moe_finalize(down, restore, router_weight, x.dtype)
        if self.has_shared_experts:
            out = out + self.shared_experts(x)
        return out
