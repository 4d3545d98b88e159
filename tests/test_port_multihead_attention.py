"""The V3 port of V2 ``MultiheadAttention`` (``migrate_v3/knowledge/ports/multihead_attention.py``).

No graph is compiled: the V2 layer and its port, built from the same
arguments, must have the same weights (names, shapes, dtypes: V2's unfused
``StackedLinear`` left ``qkv_proj`` out of the names) and stage graphs with
the same output type for the same input type.
"""

from __future__ import annotations

from typing import Any

import pytest

from migrate_v3.verify import sides
from migrate_v3.verify.align import align_keys


@pytest.mark.parametrize(
    "kwargs",
    [{"qkv_has_bias": True, "o_proj_has_bias": True}, {"stacked_qkv": True, "scale": 0.5}],
)
def test_multihead_attention_port_has_v2_weights_and_output_type(kwargs: dict[str, Any]) -> None:
    from max.dtype import DType
    from max.experimental import functional as F
    from max.graph import DeviceRef, TensorType
    from max.nn.attention.multihead_attention import MultiheadAttention as V2

    from migrate_v3.knowledge.ports.multihead_attention import MultiheadAttention

    v2 = V2(2, 8, dtype=DType.bfloat16, **kwargs)
    with F.lazy():
        v3 = MultiheadAttention(2, 8, dtype=DType.bfloat16, **kwargs)  # V2's dtype, not the default's
    signature2, signature3 = sides.v2_signature(v2), sides.v3_signature(v3)
    assert align_keys(signature2, signature3).ok
    assert ("qkv_proj.weight" in signature3) == bool(kwargs.get("stacked_qkv"))
    input_type = TensorType(DType.bfloat16, ["batch", "seq", 8], device=DeviceRef.CPU())
    for key, weight in v2.raw_state_dict().items():  # named by attribute path, as V2's trace needs
        weight.name = key
    out2 = v2.trace(input_type).output_types[0]
    out3 = v3.trace(input_type).out_layouts[0]
    assert (str(out3.dtype), [str(d) for d in out3.shape]) == (str(out2.dtype), [str(d) for d in out2.shape])


def test_multihead_attention_port_refuses_several_devices() -> None:
    from max.graph import DeviceRef

    from migrate_v3.knowledge.ports.multihead_attention import MultiheadAttention

    with pytest.raises(NotImplementedError, match="one device"):
        MultiheadAttention(2, 8, devices=[DeviceRef.GPU(0), DeviceRef.GPU(1)])
