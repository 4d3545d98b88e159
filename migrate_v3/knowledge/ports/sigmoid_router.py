from __future__ import annotations

from typing import Any

from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn.common_layers.functional_kernels import moe_router_group_limited
from max.experimental.nn.common_layers.moe import MoEGate
from max.experimental.tensor import Tensor, default_dtype


class SigmoidTopKRouter(MoEGate):
    """V3 port of V2 ``max.nn.moe.SigmoidTopKRouter``; added by migrate-v3.

    Same constructor, call and attribute names (so the same weight names) as
    V2. V3 ``MoE(gate_cls=...)`` builds its gate with the V3 keywords only, so
    V2's placement arguments (``devices``, ``dtype``, ``linear_cls``,
    ``is_sharding``) are optional here and unused but for the gate's dtype:
    ``gate_dtype``, else ``dtype``, else the default dtype. Routes as the
    official ``deepseekV3_modulev3`` router does with one expert group.
    """

    def __init__(
        self,
        devices: Any = None,
        hidden_dim: int | None = None,
        num_experts: int | None = None,
        num_experts_per_token: int | None = None,
        dtype: DType | None = None,
        norm_topk_prob: bool = True,
        gate_dtype: DType | None = None,
        correction_bias_dtype: DType = DType.float32,
        routed_scaling_factor: float = 1.0,
        linear_cls: Any = None,
        is_sharding: bool = False,
    ) -> None:
        if hidden_dim is None or num_experts is None or num_experts_per_token is None:
            raise TypeError("SigmoidTopKRouter needs hidden_dim, num_experts and num_experts_per_token")
        gate_dtype = gate_dtype or dtype
        if gate_dtype is None:
            super().__init__(hidden_dim=hidden_dim, num_experts=num_experts, num_experts_per_token=num_experts_per_token)
        else:
            with default_dtype(gate_dtype):
                super().__init__(
                    hidden_dim=hidden_dim, num_experts=num_experts, num_experts_per_token=num_experts_per_token
                )
        self.norm_topk_prob = norm_topk_prob
        self.gate_dtype = gate_dtype
        self.correction_bias_dtype = correction_bias_dtype
        self.routed_scaling_factor = routed_scaling_factor
        self.e_score_correction_bias = Tensor.zeros([num_experts], dtype=correction_bias_dtype)

    def _gate_logits(self, hidden_states: Tensor) -> Tensor:
        """The ``[seq_len, num_experts]`` router logits (subclasses compute them another way)."""
        return self.gate_score(hidden_states)

    def forward(self, hidden_states: Tensor) -> tuple[Tensor, Tensor]:
        """``(topk_idx, topk_weight)``, each ``[seq_len, num_experts_per_token]``."""
        logits = self._gate_logits(hidden_states)
        scores = F.sigmoid(logits.cast(self.correction_bias_dtype))
        topk_idx, topk_weight = moe_router_group_limited(
            scores,
            self.e_score_correction_bias,
            self.num_experts,
            self.num_experts_per_token,
            1,
            1,
            self.norm_topk_prob,
            self.routed_scaling_factor,
        )
        return topk_idx.rebind_mapping(scores.mapping), topk_weight.rebind_mapping(scores.mapping)
