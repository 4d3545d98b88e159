"""Built-in `--module` factories: the real MAX 26.7 V3 modules, built from an HF config.

Each factory mirrors what the MAX pipeline model does before `compile`
(`DeepseekV3Model._create_model_config` / `_instantiate_module`,
`Llama3Model`), minus weight loading: the quant config and the router-bias
dtype come from the checkpoint *metadata* when given, exactly as MAX reads
them from the state dict. Callers wrap the call in `F.lazy()`
(`target.build_module`). `tp > 1` builds on a virtual-GPU mesh (MAX's
virtual device mode) so placements are real `DeviceMapping`s.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any

from .tensors import TensorMeta


def _hf(config: Mapping[str, Any]) -> types.SimpleNamespace:
    return types.SimpleNamespace(**dict(config))


def _meta_state(checkpoint: Mapping[str, TensorMeta]) -> dict[str, Any]:
    """Just enough of a state dict (scales, biases) for MAX's quant-config parser."""
    from max.dtype import DType
    from max.graph import Shape

    out: dict[str, Any] = {}
    for name, meta in checkpoint.items():
        if ("weight_scale" in name or name.endswith(".bias")) and meta.dtype and meta.shape is not None:
            out[name] = types.SimpleNamespace(dtype=DType[meta.dtype], shape=Shape(meta.shape))
    return out


def _mesh(tp: int) -> Any:
    """A 1-D "tp" mesh: the host CPU for tp=1, else `tp` virtual accelerators."""
    from max import driver
    from max.experimental.sharding import DeviceMesh

    if tp <= 1:
        return DeviceMesh((driver.CPU(),), (1,), ("tp",))
    if not driver.is_virtual_device_mode() or driver.get_virtual_device_count() < tp:
        driver.set_virtual_device_api("cuda")
        driver.set_virtual_device_target_arch("sm_90")
        driver.set_virtual_device_count(tp)
    return DeviceMesh(tuple(driver.Accelerator(i) for i in range(tp)), (tp,), ("tp",))


def deepseek_v3(
    config: Mapping[str, Any],
    checkpoint: Mapping[str, TensorMeta] | None = None,
    tp: int = 1,
    ep: int = 1,
) -> Any:
    """`deepseekV3_modulev3.DeepseekV3` (root; parameters under `language_model.`)."""
    from max.dtype import DType
    from max.experimental.tensor import default_device, default_dtype
    from max.graph import DeviceRef
    from max.nn.kv_cache.cache_params import MLAKVCacheParams
    from max.pipelines.architectures.deepseekV3_modulev3.deepseekV3 import DeepseekV3
    from max.pipelines.architectures.deepseekV3_modulev3.model_config import DeepseekV3Config
    from max.pipelines.weights.quant import parse_quant_config

    hf = dict(config)
    quant = hf.get("quantization_config") or {}
    if checkpoint is not None:
        fp8 = any(n.endswith(".weight_scale_inv") for n in checkpoint)
    else:
        fp8 = quant.get("quant_method") == "fp8"
    dtype = DType.float8_e4m3fn if fp8 else DType[str(hf.get("torch_dtype", "bfloat16"))]
    state = _meta_state(checkpoint) if checkpoint is not None else {}
    if fp8 and not state:
        state = {"scale.weight_scale_inv": types.SimpleNamespace(dtype=DType.float32, shape=None)}
    quant_config = parse_quant_config(_hf(hf), state, dtype) if fp8 else None

    bias_dtype = DType.float32  # DeepSeek-V3 checkpoints store the router bias in fp32
    if checkpoint is not None:
        for name, meta in checkpoint.items():
            if name.endswith("e_score_correction_bias") and meta.dtype:
                bias_dtype = DType[meta.dtype]
                break

    mesh = _mesh(tp)
    devices = [DeviceRef.from_device(d) for d in mesh.devices]
    kv = MLAKVCacheParams(
        dtype=DType.bfloat16,
        head_dim=hf["kv_lora_rank"] + hf["qk_rope_head_dim"],
        num_layers=hf["num_hidden_layers"],
        devices=devices,
        num_q_heads=hf["num_attention_heads"],
    )
    fields = DeepseekV3Config.__dataclass_fields__
    kwargs = {k: hf[k] for k in fields if k in hf and k not in ("dtype", "devices", "kv_params")}
    ep_manager = None
    ep_config = None
    if ep > 1:
        ep_config, ep_manager = _ep(hf, tp, ep, quant_config, dtype)
    cfg = DeepseekV3Config(
        dtype=dtype,
        kv_params=kv,
        devices=devices,
        max_seq_len=int(hf.get("max_position_embeddings", 4096)),
        quant_config=quant_config,
        correction_bias_dtype=bias_dtype,
        mesh=mesh,
        ep_config=ep_config,
        **kwargs,
    )
    module_dtype = DType.bfloat16 if quant_config is not None else dtype
    with default_dtype(module_dtype), default_device(mesh):
        return DeepseekV3(cfg, kv, ep_manager)


def _ep(hf: Mapping[str, Any], tp: int, ep: int, quant_config: Any, dtype: Any) -> tuple[Any, Any]:
    from max.dtype import DType
    from max.nn.comm.ep import EPBatchManager, EPConfig

    if ep != tp:
        raise ValueError(f"the V3 module places experts over its own mesh: --ep must equal --tp ({tp})")
    cfg = EPConfig(
        dispatch_dtype=dtype if quant_config is not None else DType.bfloat16,
        combine_dtype=DType.bfloat16,
        hidden_size=hf["hidden_size"],
        top_k=hf["num_experts_per_tok"],
        n_experts=hf["n_routed_experts"],
        max_tokens_per_rank=128,
        n_gpus_per_node=tp,
        n_nodes=1,
        dispatch_quant_config=quant_config,
        fused_shared_expert=False,
    )
    return cfg, EPBatchManager(cfg)


def llama3(
    config: Mapping[str, Any],
    checkpoint: Mapping[str, TensorMeta] | None = None,
    tp: int = 1,
    stacked: bool = False,
) -> Any:
    """`llama3_modulev3.Llama3` (root; parameters under `language_model.`).

    `stacked=True` (or config key `stacked_qkv`/`stacked_mlp`) builds the fused
    `qkv_proj` / `gate_up_proj` variant MAX uses for Phi-3-style checkpoints.
    """
    from max.dtype import DType
    from max.experimental.tensor import default_dtype
    from max.graph import DeviceRef
    from max.nn.kv_cache.cache_params import MHAKVCacheParams
    from max.pipelines.architectures.llama3_modulev3.llama3 import Llama3
    from max.pipelines.architectures.llama3_modulev3.model_config import Llama3Config

    if tp > 1:
        raise ValueError("llama3_modulev3 is single-device (multi_gpu_supported=False)")
    hf = dict(config)
    dtype = DType[str(hf.get("torch_dtype", "float32"))]
    if checkpoint:
        first = next((m for n, m in checkpoint.items() if n.endswith("embed_tokens.weight")), None)
        if first is not None and first.dtype:
            dtype = DType[first.dtype]
    heads = hf["num_attention_heads"]
    head_dim = hf.get("head_dim") or hf["hidden_size"] // heads
    dev = [DeviceRef.CPU()]
    kv = MHAKVCacheParams(
        dtype=dtype, head_dim=head_dim, num_layers=hf["num_hidden_layers"], devices=dev,
        n_kv_heads=hf.get("num_key_value_heads", heads),
    )
    cfg = Llama3Config(
        hidden_size=hf["hidden_size"],
        num_attention_heads=heads,
        num_key_value_heads=hf.get("num_key_value_heads", heads),
        num_hidden_layers=hf["num_hidden_layers"],
        rope_theta=float(hf.get("rope_theta", 10000.0)),
        rope_scaling_params=None,
        max_seq_len=int(hf.get("max_position_embeddings", 2048)),
        intermediate_size=hf["intermediate_size"],
        interleaved_rope_weights=False,
        vocab_size=hf["vocab_size"],
        dtype=dtype,
        kv_params=kv,
        rms_norm_eps=hf.get("rms_norm_eps", 1e-5),
        attention_bias=bool(hf.get("attention_bias", False)),
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
        stacked_qkv=stacked or bool(hf.get("stacked_qkv", False)),
        stacked_mlp=stacked or bool(hf.get("stacked_mlp", False)),
        attention_multiplier=float(head_dim) ** -0.5,
        embedding_multiplier=1.0,
        residual_multiplier=1.0,
        devices=dev,
    )
    with default_dtype(dtype):
        return Llama3(cfg, kv)


def llama3_stacked(config: Mapping[str, Any], checkpoint: Mapping[str, TensorMeta] | None = None) -> Any:
    """`llama3` with fused `qkv_proj` and `gate_up_proj` parameters."""
    return llama3(config, checkpoint, stacked=True)
