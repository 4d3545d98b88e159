"""What MAX 26.7 allows on CPU for a paged KV cache: build + compile a tiny Llama3 (ModuleV3).

    python bench/kv_cpu_probe.py

Stages, each reported ok / the exception: KVCacheParams on CPU, the official
``llama3_modulev3.Llama3`` built under ``F.lazy()``, the V3 ragged KV input
types, ``compile(weights=...)`` with random float32 weights. One compile.
"""

from __future__ import annotations

import time
import traceback

import numpy as np


def stage(name: str, fn):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    try:
        out = fn()
    except BaseException as exc:  # noqa: BLE001 - the probe reports every failure
        print(f"[FAIL] {name} ({time.perf_counter() - t0:.1f}s): {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}")
        traceback.print_exc(limit=-3)
        raise SystemExit(1) from None
    print(f"[ok]   {name} ({time.perf_counter() - t0:.1f}s)")
    return out


def main() -> None:
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.tensor import default_dtype
    from max.graph import DeviceRef
    from max.nn.kv_cache import MHAKVCacheParams
    from max.pipelines.architectures.llama3_modulev3.llama3 import Llama3
    from max.pipelines.architectures.llama3_modulev3.model_config import Llama3Config
    from max.pipelines.lib.interfaces.batch_processor import modulev3_ragged_kv_symbolic_inputs

    dev = DeviceRef.CPU()
    kv = stage("MHAKVCacheParams(float32, CPU, page_size=16)", lambda: MHAKVCacheParams(
        dtype=DType.float32, n_kv_heads=2, head_dim=8, num_layers=1, devices=[dev], page_size=16))
    print("       kv params:", {k: getattr(kv, k) for k in ("n_kv_heads", "head_dim", "page_size", "cache_strategy") if hasattr(kv, k)})
    cfg = Llama3Config(
        hidden_size=16, num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=1, rope_theta=10000.0,
        rope_scaling_params=None, max_seq_len=64, intermediate_size=32, interleaved_rope_weights=False,
        vocab_size=32, dtype=DType.float32, kv_params=kv, attention_multiplier=8 ** -0.5,
        embedding_multiplier=1.0, residual_multiplier=1.0, devices=[dev], rms_norm_eps=1e-5,
    )

    def build():  # type: ignore[no-untyped-def]
        with F.lazy(), default_dtype(DType.float32):
            model = Llama3(cfg, kv)
        model.to(CPU())
        return model

    model = stage("build Llama3 under F.lazy() + .to(CPU())", build)
    types = stage("modulev3_ragged_kv_symbolic_inputs(CPU)", lambda: modulev3_ragged_kv_symbolic_inputs(kv_params=kv, device_refs=[dev]))
    for t in types:
        print("       input:", t)
    rng = np.random.default_rng(0)
    weights = {name: rng.standard_normal([int(d) for d in p.shape]).astype(np.float32) * 0.1
               for name, p in dict(model.parameters).items()}
    print(f"       {len(weights)} parameters")
    compiled = stage("model.compile(*types, weights=...) on CPU", lambda: model.compile(*types, weights=weights))

    from max import tree
    from max.driver import Buffer
    from max.engine import InferenceSession
    from max.pipelines.context import TextContext, TokenBuffer
    from max.pipelines.kv_cache import PagedKVCacheManager
    from max.pipelines.modeling.types import RequestID

    manager = stage("PagedKVCacheManager on CPU (8 pages)", lambda: PagedKVCacheManager(
        params=kv, session=InferenceSession(devices=[CPU()]), total_num_pages=8, max_batch_size=2))
    prompt = np.array([1, 2, 3, 4, 5], dtype=np.int64)
    ctx = TextContext(request_id=RequestID(), max_length=64, tokens=TokenBuffer(prompt))

    def kv_inputs() -> list[Buffer]:
        manager.claim(ctx)
        manager.alloc(ctx)
        return list(tree.leaves(manager.runtime_inputs([[ctx]])))

    leaves = stage("claim/alloc/runtime_inputs", kv_inputs)
    args = [
        Buffer.from_numpy(prompt),
        Buffer.from_numpy(np.array([1], dtype=np.int64)),
        Buffer.from_numpy(np.array([0, len(prompt)], dtype=np.uint32)),
        *leaves,
    ]
    out = stage("run the compiled model once (prefill, 5 tokens)", lambda: compiled(*args))
    logits = out.next_token_logits.driver_tensor.to_numpy()
    print("       next_token_logits:", logits.shape, logits.dtype, "finite:", bool(np.isfinite(logits).all()))


if __name__ == "__main__":
    main()
