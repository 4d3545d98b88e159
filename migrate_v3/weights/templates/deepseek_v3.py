"""HF DeepSeek-V3 checkpoint -> MAX 26.7 `deepseekV3_modulev3` parameter names.

Target names were read off the real module built lazily (see
`factories.deepseek_v3`) and agree with MAX's own
`deepseekV3_modulev3/weight_adapters.py`:
  * `model.` -> `language_model.`, `lm_head.` -> `language_model.lm_head.`;
  * MLA projections are raw tensors on the attention module: FP8
    `self_attn.q_a_proj.weight` -> `self_attn.q_a_proj.data` and its
    `weight_scale_inv` companion -> `self_attn.q_a_proj.weight_scale_inv`
    (bf16: `self_attn.q_a_proj`); `kv_a_layernorm.weight` ->
    `kv_a_proj_layernorm` (a bare gamma tensor);
  * Linear-backed projections (o_proj, MLP, experts) hold an FP8BlockTensor:
    `.weight` -> `.weight.data`, `.weight_scale_inv` -> `.weight.weight_scale_inv`;
  * the MoE router: `mlp.gate.weight` -> `mlp.gate.gate_score.weight`.
Layer kinds come from the config: dense layers (`first_k_dense_replace`,
`moe_layer_freq`) get the dense-MLP rules, MoE layers the router/expert
rules, and MTP layers (index >= `num_hidden_layers`) move to their own
`mtp.layers.<i - num_hidden_layers>.` namespace. MAX 26.7 has no MTP module
(its adapter deletes these names, TODO E2EOPT-673), so those rules carry
`absent_ok`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..layers import text_config
from ..rules import Rename, Rule

_MTP_ABSENT = (
    "MTP layer: MAX 26.7 deepseekV3_modulev3 has no MTP module; its weight adapter "
    "deletes layer num_hidden_layers (TODO E2EOPT-673)"
)


def _layer_rules(fp8: bool, q_lora: bool) -> list[tuple[str, str, str, str]]:
    """(layer kind, checkpoint suffix, module suffix, placement) inside one decoder layer."""
    raw = ".data" if fp8 else ""
    rows: list[tuple[str, str, str, str]] = [
        ("all", "{norm:input_layernorm|post_attention_layernorm}.weight", "{norm}.weight", "replicated"),
        ("all", "self_attn.kv_a_layernorm.weight", "self_attn.kv_a_proj_layernorm", "replicated"),
        ("all", "self_attn.kv_a_proj_with_mqa.weight", f"self_attn.kv_a_proj_with_mqa{raw}", "replicated"),
        ("all", "self_attn.kv_b_proj.weight", f"self_attn.kv_b_proj{raw}", "column"),
        ("all", "self_attn.o_proj.weight", f"self_attn.o_proj.weight{raw}", "row"),
    ]
    if q_lora:
        rows += [
            ("all", "self_attn.q_a_proj.weight", f"self_attn.q_a_proj{raw}", "replicated"),
            ("all", "self_attn.q_a_layernorm.weight", "self_attn.q_a_layernorm.weight", "replicated"),
            ("all", "self_attn.q_b_proj.weight", f"self_attn.q_b_proj{raw}", "column"),
        ]
    else:
        rows.append(("all", "self_attn.q_proj.weight", f"self_attn.q_proj{raw}", "column"))
    mlp = ".weight.data" if fp8 else ".weight"
    rows += [
        ("dense", "mlp.{proj:gate_proj|up_proj}.weight", "mlp.{proj}" + mlp, "column"),
        ("dense", "mlp.down_proj.weight", "mlp.down_proj" + mlp, "row"),
        ("moe", "mlp.gate.weight", "mlp.gate.gate_score.weight", "replicated"),
        ("moe", "mlp.gate.e_score_correction_bias", "mlp.gate.e_score_correction_bias", "replicated"),
        ("moe", "mlp.shared_experts.{proj:gate_proj|up_proj}.weight", "mlp.shared_experts.{proj}" + mlp, "column"),
        ("moe", "mlp.shared_experts.down_proj.weight", "mlp.shared_experts.down_proj" + mlp, "row"),
        ("moe", "mlp.experts.{expert}.{proj:gate_proj|up_proj}.weight",
         "mlp.experts.{expert}.{proj}" + mlp, "expert:column"),
        ("moe", "mlp.experts.{expert}.down_proj.weight", "mlp.experts.{expert}.down_proj" + mlp, "expert:row"),
    ]
    if fp8:
        rows += [
            ("all", "self_attn.kv_a_proj_with_mqa.weight_scale_inv",
             "self_attn.kv_a_proj_with_mqa.weight_scale_inv", "replicated"),
            ("all", "self_attn.kv_b_proj.weight_scale_inv", "self_attn.kv_b_proj.weight_scale_inv", "column"),
            ("all", "self_attn.o_proj.weight_scale_inv", "self_attn.o_proj.weight.weight_scale_inv", "row"),
            ("dense", "mlp.{proj:gate_proj|up_proj}.weight_scale_inv", "mlp.{proj}.weight.weight_scale_inv", "column"),
            ("dense", "mlp.down_proj.weight_scale_inv", "mlp.down_proj.weight.weight_scale_inv", "row"),
            ("moe", "mlp.shared_experts.{proj:gate_proj|up_proj}.weight_scale_inv",
             "mlp.shared_experts.{proj}.weight.weight_scale_inv", "column"),
            ("moe", "mlp.shared_experts.down_proj.weight_scale_inv",
             "mlp.shared_experts.down_proj.weight.weight_scale_inv", "row"),
            ("moe", "mlp.experts.{expert}.{proj:gate_proj|up_proj}.weight_scale_inv",
             "mlp.experts.{expert}.{proj}.weight.weight_scale_inv", "expert:column"),
            ("moe", "mlp.experts.{expert}.down_proj.weight_scale_inv",
             "mlp.experts.{expert}.down_proj.weight.weight_scale_inv", "expert:row"),
        ]
        if q_lora:
            rows += [
                ("all", "self_attn.q_a_proj.weight_scale_inv", "self_attn.q_a_proj.weight_scale_inv", "replicated"),
                ("all", "self_attn.q_b_proj.weight_scale_inv", "self_attn.q_b_proj.weight_scale_inv", "column"),
            ]
        else:
            rows.append(("all", "self_attn.q_proj.weight_scale_inv", "self_attn.q_proj.weight_scale_inv", "column"))
    return rows


_MTP_EXTRAS = (
    "enorm.weight",
    "hnorm.weight",
    "eh_proj.weight",
    "embed_tokens.weight",
    "shared_head.norm.weight",
    "shared_head.head.weight",
)


def rules(config: Mapping[str, Any]) -> list[Rule]:
    """Rules for this config (FP8 when `quantization_config.quant_method == "fp8"`)."""
    cfg = text_config(config)
    fp8 = (cfg.get("quantization_config") or {}).get("quant_method") == "fp8"
    q_lora = cfg.get("q_lora_rank") is not None
    out: list[Rule] = [
        Rename(source="model.embed_tokens.weight", target="language_model.embed_tokens.weight",
               placement="vocab"),
        Rename(source="model.norm.weight", target="language_model.norm.weight", placement="replicated"),
        Rename(source="lm_head.weight", target="language_model.lm_head.weight", placement="column"),
    ]
    for kind, src, dst, placement in _layer_rules(fp8, q_lora):
        dom = "" if kind == "all" else f"&{kind}"
        out.append(Rename(source=f"model.layers.{{layer:main{dom}}}.{src}",
                          target=f"language_model.layers.{{layer:main{dom}}}.{dst}", placement=placement))
        out.append(Rename(source=f"model.layers.{{layer:mtp{dom}}}.{src}",
                          target=f"mtp.layers.{{layer:mtp{dom}}}.{dst}", placement=placement,
                          absent_ok=_MTP_ABSENT, optional=True))
    for extra in _MTP_EXTRAS:
        out.append(Rename(source=f"model.layers.{{layer:mtp}}.{extra}", target=f"mtp.layers.{{layer:mtp}}.{extra}",
                          absent_ok=_MTP_ABSENT, optional=True, placement="replicated"))
    return out
