"""Synthetic Hugging Face checkpoints (names, shapes, dtypes; optionally random bytes).

Real DeepSeek / Llama checkpoints are hundreds of GB; tests and benchmarks
need the same *names and shapes* for any config size. These follow the
public HF layouts (DeepSeek-V3 `README_WEIGHTS.md`: FP8 weights with a
128x128-block `weight_scale_inv`, MTP layers after the main stack); for the
full DeepSeek-V3 config the output equals the research helper's
`weight_name_patterns.json` expansion (checked in the tests).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .layers import is_moe_layer, num_layers, num_mtp_layers, text_config
from .tensors import DTYPES, TensorMeta, TypedArray


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def deepseek_v3_meta(config: Mapping[str, Any]) -> dict[str, TensorMeta]:
    """HF DeepSeek-V3 checkpoint metadata for `config` (FP8 if its quantization_config says so)."""
    c = text_config(config)
    qc = c.get("quantization_config") or {}
    fp8 = qc.get("quant_method") == "fp8"
    bm, bk = qc.get("weight_block_size", [128, 128]) if fp8 else (128, 128)
    bf = "bfloat16"
    h, v = c["hidden_size"], c["vocab_size"]
    heads = c["num_attention_heads"]
    nope, rope, vd = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    out: dict[str, TensorMeta] = {}

    def linear(name: str, rows: int, cols: int) -> None:
        out[f"{name}.weight"] = TensorMeta((rows, cols), "float8_e4m3fn" if fp8 else bf)
        if fp8:
            out[f"{name}.weight_scale_inv"] = TensorMeta((_ceil(rows, bm), _ceil(cols, bk)), "float32")

    def vec(name: str, n: int, dtype: str = bf) -> None:
        out[name] = TensorMeta((n,), dtype)

    out["model.embed_tokens.weight"] = TensorMeta((v, h), bf)
    vec("model.norm.weight", h)
    out["lm_head.weight"] = TensorMeta((v, h), bf)
    n = num_layers(c)
    for i in range(n + num_mtp_layers(c)):
        p = f"model.layers.{i}"
        vec(f"{p}.input_layernorm.weight", h)
        vec(f"{p}.post_attention_layernorm.weight", h)
        if c.get("q_lora_rank") is not None:
            linear(f"{p}.self_attn.q_a_proj", c["q_lora_rank"], h)
            vec(f"{p}.self_attn.q_a_layernorm.weight", c["q_lora_rank"])
            linear(f"{p}.self_attn.q_b_proj", heads * (nope + rope), c["q_lora_rank"])
        else:
            linear(f"{p}.self_attn.q_proj", heads * (nope + rope), h)
        linear(f"{p}.self_attn.kv_a_proj_with_mqa", c["kv_lora_rank"] + rope, h)
        vec(f"{p}.self_attn.kv_a_layernorm.weight", c["kv_lora_rank"])
        linear(f"{p}.self_attn.kv_b_proj", heads * (nope + vd), c["kv_lora_rank"])
        linear(f"{p}.self_attn.o_proj", h, heads * vd)
        if is_moe_layer(c, i):
            e, mi = c["n_routed_experts"], c["moe_intermediate_size"]
            out[f"{p}.mlp.gate.weight"] = TensorMeta((e, h), bf)
            vec(f"{p}.mlp.gate.e_score_correction_bias", e, "float32")
            for j in range(e):
                linear(f"{p}.mlp.experts.{j}.gate_proj", mi, h)
                linear(f"{p}.mlp.experts.{j}.up_proj", mi, h)
                linear(f"{p}.mlp.experts.{j}.down_proj", h, mi)
            si = c.get("n_shared_experts", 1) * mi
            linear(f"{p}.mlp.shared_experts.gate_proj", si, h)
            linear(f"{p}.mlp.shared_experts.up_proj", si, h)
            linear(f"{p}.mlp.shared_experts.down_proj", h, si)
        else:
            im = c["intermediate_size"]
            linear(f"{p}.mlp.gate_proj", im, h)
            linear(f"{p}.mlp.up_proj", im, h)
            linear(f"{p}.mlp.down_proj", h, im)
        if i >= n:
            vec(f"{p}.enorm.weight", h)
            vec(f"{p}.hnorm.weight", h)
            out[f"{p}.eh_proj.weight"] = TensorMeta((h, 2 * h), bf)
            out[f"{p}.embed_tokens.weight"] = TensorMeta((v, h), bf)
            vec(f"{p}.shared_head.norm.weight", h)
            out[f"{p}.shared_head.head.weight"] = TensorMeta((v, h), bf)
    return out


def llama_meta(config: Mapping[str, Any], dtype: str | None = None) -> dict[str, TensorMeta]:
    """HF Llama checkpoint metadata for `config`."""
    c = text_config(config)
    dt = dtype or str(c.get("torch_dtype", "bfloat16"))
    h, heads = c["hidden_size"], c["num_attention_heads"]
    kvh = c.get("num_key_value_heads", heads)
    hd = c.get("head_dim") or h // heads
    im = c["intermediate_size"]
    out = {"model.embed_tokens.weight": TensorMeta((c["vocab_size"], h), dt)}
    for i in range(num_layers(c)):
        p = f"model.layers.{i}"
        out[f"{p}.self_attn.q_proj.weight"] = TensorMeta((heads * hd, h), dt)
        out[f"{p}.self_attn.k_proj.weight"] = TensorMeta((kvh * hd, h), dt)
        out[f"{p}.self_attn.v_proj.weight"] = TensorMeta((kvh * hd, h), dt)
        out[f"{p}.self_attn.o_proj.weight"] = TensorMeta((h, heads * hd), dt)
        out[f"{p}.mlp.gate_proj.weight"] = TensorMeta((im, h), dt)
        out[f"{p}.mlp.up_proj.weight"] = TensorMeta((im, h), dt)
        out[f"{p}.mlp.down_proj.weight"] = TensorMeta((h, im), dt)
        out[f"{p}.input_layernorm.weight"] = TensorMeta((h,), dt)
        out[f"{p}.post_attention_layernorm.weight"] = TensorMeta((h,), dt)
    out["model.norm.weight"] = TensorMeta((h,), dt)
    if not c.get("tie_word_embeddings"):
        out["lm_head.weight"] = TensorMeta((c["vocab_size"], h), dt)
    return out


def random_tensors(metas: Mapping[str, TensorMeta], seed: int = 0) -> dict[str, TypedArray]:
    """Random bytes of the right shape and storage dtype for every entry.

    Float32 tensors get finite normal values (scales must be usable);
    bf16/fp8 get random bit patterns, which is all a byte round trip needs.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    out: dict[str, TypedArray] = {}
    for name, meta in metas.items():
        assert meta.shape is not None and meta.dtype is not None
        storage = DTYPES[meta.dtype][2]
        if storage.startswith("float"):
            arr = rng.standard_normal(meta.shape).astype(storage)
        else:
            arr = rng.integers(0, 2 ** (8 * DTYPES[meta.dtype][1]) - 1, size=meta.shape, dtype=storage)
        out[name] = TypedArray(arr, meta.dtype)
    return out
