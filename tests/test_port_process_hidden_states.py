"""``process_hidden_states`` (``migrate_v3/knowledge/ports/process_hidden_states.py``): V2's
``Transformer._process_hidden_states`` for a subclass of max's ModuleV3 ``Llama3TextModel``
(an EAGLE draft embeds and fuses its input itself, then calls it).

Compiled on CPU (two small graphs, one paged-KV prefill each): max's own ``Llama3TextModel``
and a subclass whose ``forward`` embeds and calls the port, both under max's ``Llama3`` wrapper,
same weights, ALL logits and ALL_NORMALIZED hidden states (max's VARIABLE path stages its offsets
with ``ops.range``, a graph value its compile refuses as an output, so it cannot be the reference). The port's
tuple equals the ModuleV3Outputs fields in V2's order: a port that skipped a layer, the final
norm or the head, or laid the tuple out otherwise, fails here.
"""

from __future__ import annotations

import numpy as np
import pytest

PROMPT = np.array([3, 1, 4, 1, 5, 9, 2], dtype=np.int64)


@pytest.mark.slow
def test_process_hidden_states_runs_the_text_model_after_its_embedding() -> None:
    from max.driver import CPU, Buffer
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.tensor import Tensor, default_dtype
    from max.graph import DeviceRef
    from max.nn.kv_cache import MHAKVCacheParams
    from max.nn.transformer import ReturnHiddenStates, ReturnLogits
    from max.pipelines.architectures.llama3_modulev3.llama3 import Llama3, Llama3TextModel
    from max.pipelines.architectures.llama3_modulev3.model_config import Llama3Config
    from max.pipelines.lib.interfaces.batch_processor import modulev3_ragged_kv_symbolic_inputs

    from migrate_v3.knowledge.ports.process_hidden_states import process_hidden_states
    from migrate_v3.verify.kv_inputs import runtime_kv_inputs

    kv = MHAKVCacheParams(dtype=DType.float32, n_kv_heads=2, head_dim=8, num_layers=2,
                          devices=[DeviceRef.CPU()], page_size=16)
    config = Llama3Config(
        hidden_size=16, num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=2,
        rope_theta=10000.0, rope_scaling_params=None, max_seq_len=64, intermediate_size=32,
        interleaved_rope_weights=False, vocab_size=32, dtype=DType.float32, kv_params=kv,
        attention_multiplier=8**-0.5, embedding_multiplier=1.0, residual_multiplier=1.0,
        devices=[DeviceRef.CPU()], rms_norm_eps=1e-5, clip_qkv=None, tie_word_embeddings=False,
        return_logits=ReturnLogits.ALL, return_hidden_states=ReturnHiddenStates.ALL_NORMALIZED,
    )

    class Ported(Llama3TextModel):
        def forward(self, tokens: Tensor, kv_collection: object, return_n_logits: Tensor,  # type: ignore[override]
                    input_row_offsets: Tensor) -> tuple[Tensor, ...]:
            return process_hidden_states(self, self.embed_tokens(tokens), kv_collection, return_n_logits,
                                         input_row_offsets)

    with F.lazy(), default_dtype(DType.float32):
        official = Llama3(config, kv)
        ported = Llama3(config, kv)
        ported.language_model = Ported(config)
    official.to(CPU())
    ported.to(CPU())
    rng = np.random.default_rng(0)
    weights = {name: (rng.standard_normal(tuple(int(d) for d in p.shape)) * 0.3).astype(np.float32)
               for name, p in official.parameters}
    assert {name for name, _ in ported.parameters} == set(weights)
    types = modulev3_ragged_kv_symbolic_inputs(kv_params=kv, device_refs=[DeviceRef.CPU()])

    def run(model: object) -> object:
        compiled = model.compile(*types, weights=weights)  # type: ignore[attr-defined]
        return compiled(Buffer.from_numpy(PROMPT), Buffer.from_numpy(np.array([2], dtype=np.int64)),
                        Buffer.from_numpy(np.array([0, len(PROMPT)], dtype=np.uint32)),
                        *runtime_kv_inputs(kv, PROMPT))

    want = run(official)
    got = run(ported)
    fields = (want.next_token_logits, want.logits, want.logit_offsets, want.hidden_states)  # type: ignore[attr-defined]
    assert len(got) == 4  # type: ignore[arg-type]
    for expected, actual in zip(fields, got, strict=True):  # type: ignore[call-overload]
        e, a = expected.driver_tensor.to_numpy(), actual.driver_tensor.to_numpy()
        assert e.shape == a.shape
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
    assert want.logits.driver_tensor.to_numpy().shape == (len(PROMPT), 32)  # type: ignore[attr-defined]
