"""The V3 port of V2 ``StackedMoE`` (``migrate_v3/knowledge/ports/stacked_moe.py``).

No graph is compiled: each case builds the V2 layer and its port (under
``F.lazy()``) from the same arguments and checks the V3 parameters against
the V2 weights (names, shapes, dtypes: a float32 router beside bfloat16
experts), with the V3 ``MoEGate`` and with a gate subclass that kept V2's
``devices``/``dtype`` parameters; one case stages the port's graph
(``Module.trace``: the routing and grouped-matmul kernels, no compile).
"""

from __future__ import annotations

from typing import Any

import pytest

from migrate_v3.verify import sides
from migrate_v3.verify.align import align_keys


def _kwargs(**extra: Any) -> dict[str, Any]:
    from max.graph import DeviceRef

    return {"devices": [DeviceRef.CPU()], "hidden_dim": 32, "num_experts": 4, "num_experts_per_token": 2,
            "moe_dim": 16, **extra}


def _cases() -> list[dict[str, Any]]:
    from max.dtype import DType
    from max.nn.moe import GateUpFormat

    return [
        {"has_bias": True, "gate_up_format": GateUpFormat.INTERLEAVED},
        {"has_shared_experts": True, "shared_experts_dim": 16, "router_dtype": DType.float32},
    ]


@pytest.mark.parametrize("case", [0, 1])
@pytest.mark.parametrize("v2_style_gate", [False, True])
def test_stacked_moe_port_has_v2_weights(case: int, v2_style_gate: bool) -> None:
    from max.experimental import functional as F
    from max.experimental.nn.common_layers.moe import MoEGate
    from max.nn.moe import MoEGate as V2MoEGate
    from max.nn.moe import StackedMoE as V2StackedMoE

    from migrate_v3.knowledge.ports.stacked_moe import StackedMoE

    class Gate(MoEGate):
        """A migrated V2 gate subclass: V3 base, V2 parameters."""

        def __init__(self, devices: Any, hidden_dim: int, num_experts: int, num_experts_per_token: int,
                     dtype: Any) -> None:
            super().__init__(hidden_dim=hidden_dim, num_experts=num_experts,
                             num_experts_per_token=num_experts_per_token)

    kwargs = _kwargs(**_cases()[case])
    v2 = V2StackedMoE(gate_cls=V2MoEGate, **kwargs)
    with F.lazy():
        v3 = StackedMoE(gate_cls=Gate if v2_style_gate else MoEGate, **kwargs)
    signature2 = sides.v2_signature(v2)
    assert align_keys(signature2, sides.v3_signature(v3)).ok
    assert "experts.gate_up_proj" in signature2


def test_stacked_moe_port_traces() -> None:
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.nn.common_layers.moe import MoEGate
    from max.graph import DeviceRef, TensorType

    from migrate_v3.knowledge.ports.stacked_moe import StackedMoE

    with F.lazy():
        moe = StackedMoE(gate_cls=MoEGate, **_kwargs(**_cases()[0]))
    layout = moe.trace(TensorType(DType.bfloat16, ["seq", 32], device=DeviceRef.CPU())).out_layouts[0]
    assert (str(layout.dtype), [str(d) for d in layout.shape]) == ("DType.bfloat16", ["seq", "32"])


def test_stacked_moe_port_refuses_quantization() -> None:
    from max.experimental.nn.common_layers.moe import MoEGate

    from migrate_v3.knowledge.ports.stacked_moe import StackedMoE

    with pytest.raises(NotImplementedError, match="unquantized"):
        StackedMoE(gate_cls=MoEGate, quant_config=object(), **_kwargs())
