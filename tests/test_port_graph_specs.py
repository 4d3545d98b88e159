"""``load_graph_specs`` (``migrate_v3/knowledge/ports/graph_specs.py``): what a pipeline that keeps
V2's GraphSpecs loads them with (``codemods.pipeline_model``'s bridge).

Compiled on CPU (three small graphs), as the bridged ``load_graphs`` does it: a ModuleV3 module
built under ``F.lazy()`` and loaded with ``load_state_dict``, in a GraphSpec without ``weights=``;
another, not loaded, whose GraphSpec's weights carry a tower prefix (``tower.weight``, as a
checkpoint V2 split by tower does); and a V2 module in a GraphSpec of its own. Each role's engine
``Model`` takes Buffers and returns Buffers (what V2's base and ``execute`` use), and computes
``x @ W.T`` with its own weights: a port that compiled a V3 module with its random initial
values, ignored the prefixed weights, or handed back the compiled callable instead of the engine
model, fails here. V2's own ``compile_graphs`` refuses the V3 spec (the reason the bridge exists).
"""

from __future__ import annotations

import numpy as np
import pytest

IN, OUT = 4, 3


@pytest.mark.slow
def test_load_graph_specs_compiles_v3_and_v2_specs_into_engine_models() -> None:
    from max.driver import CPU, Buffer
    from max.dtype import DType
    from max.engine import InferenceSession
    from max.experimental import functional as F
    from max.experimental.nn import Linear
    from max.experimental.tensor import default_dtype
    from max.graph import DeviceRef, TensorType
    from max.nn import Linear as V2Linear
    from max.pipelines.lib.graph_specs import GraphSpec, compile_graphs

    from migrate_v3.knowledge.ports.graph_specs import load_graph_specs

    rng = np.random.default_rng(0)
    w3 = rng.standard_normal((OUT, IN)).astype(np.float32)
    w2 = rng.standard_normal((OUT, IN)).astype(np.float32)
    w_tower = rng.standard_normal((OUT, IN)).astype(np.float32)
    x = rng.standard_normal((2, IN)).astype(np.float32)
    x_type = TensorType(DType.float32, [2, IN], device=DeviceRef.CPU())

    with F.lazy(), default_dtype(DType.float32):
        v3 = Linear(IN, OUT, bias=False)
        v3.to(CPU())
        v3.load_state_dict({"weight": w3})
        tower = Linear(IN, OUT, bias=False)
        tower.to(CPU())
    v2 = V2Linear(IN, OUT, DType.float32, DeviceRef.CPU())
    v2.load_state_dict({"weight": w2})
    specs = {
        "v3": GraphSpec(v3, "v3_linear", [x_type]),  # type: ignore[arg-type]
        "tower": GraphSpec(tower, "tower_linear", [x_type],  # type: ignore[arg-type]
                           weights={"tower.weight": w_tower, "head.weight": w2}),
        "v2": GraphSpec(v2, "v2_linear", [x_type]),
    }
    session = InferenceSession(devices=[CPU()])

    with pytest.raises(TypeError):  # V2's path traces with module=..., which V3's trace lacks
        compile_graphs(session, {"v3": specs["v3"]})

    models = load_graph_specs(session, specs)
    assert set(models) == {"v3", "tower", "v2"}
    for role, weight in (("v3", w3), ("tower", w_tower), ("v2", w2)):
        (out,) = models[role].execute(Buffer.from_numpy(x))
        assert isinstance(out, Buffer)
        np.testing.assert_allclose(out.to_numpy(), x @ weight.T, rtol=1e-5, atol=1e-5)
