"""``SIBLING_RENAMES`` maps a V2 sibling layer to its official port's class of another name:
the two compute the same thing with the same weights (CPU, float32).

llama3's ``StackedMLP`` → ``llama3_modulev3.layers.mlp.LlamaStackedMLP`` (olmo2 imports it): one
V2 graph and one V3 graph, about a minute each to compile the first time: marked slow.
"""

from __future__ import annotations

import numpy as np
import pytest

from migrate_v3.knowledge.symbols import SIBLING_RENAMES


def test_the_stacked_mlp_rename_is_recorded() -> None:
    assert SIBLING_RENAMES["llama3.llama3.StackedMLP"] == "layers.mlp.LlamaStackedMLP"


@pytest.mark.slow
def test_llama_stacked_mlp_matches_v2_stacked_mlp() -> None:
    from max.driver import CPU, Buffer
    from max.dtype import DType
    from max.engine import InferenceSession
    from max.experimental import functional as F
    from max.experimental.tensor import default_dtype
    from max.graph import DeviceRef, Graph, TensorType
    from max.nn import Linear
    from max.pipelines.architectures.llama3.llama3 import StackedMLP
    from max.pipelines.architectures.llama3_modulev3.layers.mlp import LlamaStackedMLP

    hidden, ffn = 8, 12
    rng = np.random.default_rng(0)
    weights = {
        "gate_up_proj.weight": rng.standard_normal((2 * ffn, hidden)).astype(np.float32) * 0.3,
        "down_proj.weight": rng.standard_normal((hidden, ffn)).astype(np.float32) * 0.3,
    }
    x = rng.standard_normal((5, hidden)).astype(np.float32)
    cpu = DeviceRef.CPU()

    v2 = StackedMLP(DType.float32, None, hidden, ffn, [cpu], Linear)
    v2.load_state_dict(weights)
    with Graph("stacked_mlp_v2", input_types=[TensorType(DType.float32, ["n", hidden], device=cpu)]) as graph:
        graph.output(v2(graph.inputs[0].tensor))
    expected = InferenceSession(devices=[CPU()]).load(graph, weights_registry=v2.state_dict()).execute(
        Buffer.from_numpy(x))[0]

    with F.lazy(), default_dtype(DType.float32):
        v3 = LlamaStackedMLP(hidden_dim=hidden, feed_forward_length=ffn)
    assert {name for name, _ in v3.parameters} == set(weights)
    compiled = v3.compile(TensorType(DType.float32, ["n", hidden], device=cpu), weights=weights)
    got = compiled(Buffer.from_numpy(x))

    assert isinstance(expected, Buffer)
    np.testing.assert_allclose(got.driver_tensor.to_numpy(), expected.to_numpy(), rtol=1e-5, atol=1e-5)
