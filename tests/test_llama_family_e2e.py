"""Llama-family decoders end to end: max 26.7's ``llama3`` and ``olmo2`` (which imports ``llama3``).

Both V2 packages are copied into a temp package ``archs/`` and migrated in
one ``apply`` run (no hand edit). Each migrated package must import,
register ``<Name>_ModuleV3``, and its language model (``Llama3``, ``Olmo2``)
must build under ``F.lazy()``, compile on CPU with the V3 ragged paged-KV
input types (``modulev3_ragged_kv_symbolic_inputs``, what
``ModuleV3PipelineModelWithKVCache`` compiles with) and the V2 model's state
dict, and give V2's next-token logits for a 7-token prefill through a real
``PagedKVCacheManager`` on CPU.

What MAX 26.7 allows on CPU for a paged KV cache (measured here and in
``bench/kv_cpu_probe.py``): ``MHAKVCacheParams`` with ``devices=[CPU]`` and
float32, ``PagedKVCacheManager`` over an ``InferenceSession(devices=[CPU()])``,
``claim``/``alloc``/``runtime_inputs`` and a prefill through the fused
``rope_split_store_ragged`` + ``flash_attention_ragged`` kernels all work.

Four compiles (V2 and V3 graph per case): ~2-6 min each the first time on
a shared 2-core CPU, cached after.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from migrate_v3.verify.kv_inputs import runtime_kv_inputs
from tests.migrated_archs import migrated_archs

PROMPT = np.array([1, 2, 3, 4, 5, 6, 7], dtype=np.int64)


@pytest.fixture(scope="module")
def archs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """``archs/{llama3,olmo2}`` copied from max and migrated together, importable as ``archs``."""
    names = ("olmo2", "llama3")
    with migrated_archs(tmp_path_factory.mktemp("llama_family"), "archs", names, names) as pkg:
        yield pkg


def _config_args(kv: object, tied: bool) -> dict[str, object]:
    from max.dtype import DType
    from max.graph import DeviceRef

    return dict(
        hidden_size=16, num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=2,
        rope_theta=10000.0, rope_scaling_params=None, max_seq_len=64, intermediate_size=32,
        interleaved_rope_weights=False, vocab_size=32, dtype=DType.float32, kv_params=kv,
        attention_multiplier=8**-0.5, embedding_multiplier=1.0, residual_multiplier=1.0,
        devices=[DeviceRef.CPU()], rms_norm_eps=1e-5, model_quantization_encoding=None,
        quantization_config=None, clip_qkv=None, tie_word_embeddings=tied,
    )


def _kv_inputs(kv: object) -> list[object]:
    """A fresh paged cache on CPU, one 7-token request claimed: its runtime inputs."""
    return runtime_kv_inputs(kv, PROMPT)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "cls", "registered", "tied"),
    [
        # olmo2: its own attention/blocks on the Transformer port, separate lm_head
        ("olmo2", "Olmo2", "Olmo2ForCausalLM_ModuleV3", False),
        # llama3: TransformerBlock port + V3 AttentionWithRope, tied embeddings (one weight copy);
        # the untied llama3 was also measured equal (max |diff| 0.0) but costs two more compiles
        ("llama3", "Llama3", "LlamaForCausalLM_ModuleV3", True),
    ],
)
def test_migrated_decoder_matches_v2_logits(
    archs: ModuleType, name: str, cls: str, registered: str, tied: bool
) -> None:
    from max.driver import CPU, Buffer
    from max.dtype import DType
    from max.engine import InferenceSession
    from max.experimental import functional as F
    from max.experimental.tensor import default_dtype
    from max.graph import DeviceRef
    from max.nn.kv_cache import MHAKVCacheParams
    from max.pipelines.architectures.llama3.model_config import Llama3Config as V2Config
    from max.pipelines.lib import SupportedArchitecture
    from max.pipelines.lib.interfaces.batch_processor import modulev3_ragged_kv_symbolic_inputs

    # the migrated package imports and registers under the V3 name
    pkg = importlib.import_module(f"archs.{name}_modulev3")
    arch = importlib.import_module(f"archs.{name}_modulev3.arch")
    entries = [v for k, v in vars(arch).items() if k.endswith("_modulev3_arch")]
    assert len(entries) == 1 and isinstance(entries[0], SupportedArchitecture)
    assert entries[0].name == registered
    assert any(v is entries[0] for v in vars(pkg).values())  # exported by the package
    model_v3 = importlib.import_module(f"archs.{name}_modulev3.{name}")
    config_v3 = importlib.import_module("archs.llama3_modulev3.model_config")
    assert Path(str(model_v3.__file__)).is_relative_to(Path(str(pkg.__file__)).parent)
    v2_cls = getattr(importlib.import_module(f"max.pipelines.architectures.{name}.{name}"), cls)

    kv = MHAKVCacheParams(
        dtype=DType.float32, n_kv_heads=2, head_dim=8, num_layers=2, devices=[DeviceRef.CPU()], page_size=16
    )
    with F.lazy(), default_dtype(DType.float32):
        model = getattr(model_v3, cls)(config_v3.Llama3Config(**_config_args(kv, tied)))
    model.to(CPU())
    shapes = {name: tuple(int(d) for d in p.shape) for name, p in model.parameters}

    v2 = v2_cls(V2Config(**_config_args(kv, tied)))
    assert set(shapes) == set(v2.state_dict())  # same checkpoint names, no adapter needed
    assert ("lm_head.weight" in shapes) is not tied
    rng = np.random.default_rng(0)
    weights = {k: (rng.standard_normal(s) * 0.2).astype(np.float32) for k, s in sorted(shapes.items())}

    compiled = model.compile(*modulev3_ragged_kv_symbolic_inputs(kv_params=kv, device_refs=[DeviceRef.CPU()]), weights=weights)
    tokens = Buffer.from_numpy(PROMPT)
    n_logits = Buffer.from_numpy(np.array([1], dtype=np.int64))
    offsets = Buffer.from_numpy(np.array([0, len(PROMPT)], dtype=np.uint32))
    got = compiled(tokens, n_logits, offsets, *_kv_inputs(kv))
    got_np = got[0].driver_tensor.to_numpy()

    v2.load_state_dict(weights, weight_alignment=1)
    graph = v2.trace(*v2.input_types(kv))
    v2_model = InferenceSession(devices=[CPU()]).load(graph, weights_registry=v2.state_dict())
    expected = v2_model.execute(tokens, offsets, n_logits, *_kv_inputs(kv))[0].to_numpy()

    assert expected.shape == got_np.shape == (1, 32)
    assert np.isfinite(expected).all() and np.abs(expected).max() > 1e-3
    np.testing.assert_allclose(got_np, expected, rtol=1e-5, atol=1e-6)
