"""The V3 port of V2 ``LogitsPostprocessMixin`` (``migrate_v3/knowledge/ports/logits_mixin.py``).

No graph is compiled: the V2 head and a V3 head on the port, built from the
same sizes, are staged with the same input types; the port's outputs must be
Tensors (a staged V3 graph refuses V2's graph values) of V2's types.
"""

from __future__ import annotations

from typing import Any

import pytest


def _types() -> tuple[Any, ...]:
    from max.dtype import DType
    from max.graph import DeviceRef, TensorType

    cpu = DeviceRef.CPU()
    return (
        TensorType(DType.float32, ["seq", 8], device=cpu),
        TensorType(DType.uint32, ["offsets"], device=cpu),
        TensorType(DType.int64, [1], device=DeviceRef.CPU()),
    )


@pytest.mark.parametrize("how", ["LAST_TOKEN", "ALL"])
def test_logits_mixin_port_stages_v2_output_types(how: str) -> None:
    import numpy as np
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.nn import Linear as V3Linear
    from max.experimental.nn import Module as V3Module
    from max.graph import DeviceRef, Graph
    from max.nn import Linear, RMSNorm
    from max.nn.layer import Module
    from max.nn.transformer import ReturnLogits
    from max.nn.transformer.transformer import LogitsPostprocessMixin as V2Mixin

    from migrate_v3.knowledge.ports.logits_mixin import LogitsPostprocessMixin

    class V2Head(V2Mixin, Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = RMSNorm(8, DType.float32, 1e-6)
            self.lm_head = Linear(8, 16, DType.float32, DeviceRef.CPU())
            self.return_logits = ReturnLogits[how]

        def __call__(self, h: Any, offsets: Any, n: Any) -> Any:
            return self._postprocess_logits(h, offsets, n)

    class V3Head(LogitsPostprocessMixin, V3Module[..., tuple[Any, ...]]):
        def __init__(self) -> None:
            super().__init__()
            self.norm = lambda x: x
            self.lm_head = V3Linear(8, 16)
            self.return_logits = ReturnLogits[how]

        def forward(self, h: Any, offsets: Any, n: Any) -> tuple[Any, ...]:
            return self._postprocess_logits(h, offsets, n)

    v2 = V2Head()
    v2.load_state_dict({k: np.zeros([int(d) for d in w.shape], np.float32) for k, w in v2.raw_state_dict().items()})
    with Graph("v2", input_types=_types()) as graph:
        graph.output(*v2(*(i.tensor for i in graph.inputs)))
    want = [(str(t.dtype), [str(d) for d in t.shape]) for t in graph.output_types]
    with F.lazy():
        v3 = V3Head()
    got = [(str(t.dtype), [str(d) for d in t.shape]) for t in v3.trace(*_types()).out_layouts]
    assert got == want
    assert len(got) == (1 if how == "LAST_TOKEN" else 3)
