"""HF Llama-family checkpoint -> MAX 26.7 `llama3_modulev3` parameter names.

Target names were read off the real module (`factories.llama3`): the V3 root
`Llama3` holds `language_model = Llama3TextModel(...)`, so every name gains
`language_model.` (as `llama3_modulev3/weight_adapters.py` does with
`model.` -> `language_model.` and `lm_head` -> `language_model.lm_head`).
With `tie_word_embeddings` the module has no `lm_head` (it multiplies by
`embed_tokens.weight.T`), so a stored `lm_head.weight` is dropped. The
stacked variant (`stacked_qkv` / `stacked_mlp`, used for Phi-3-style models)
fuses q||k||v into `qkv_proj` and gate||up into `gate_up_proj`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..layers import text_config
from ..rules import Concat, Drop, Rename, Rule

_L = "model.layers.{layer}"
_T = "language_model.layers.{layer}"


def rules(config: Mapping[str, Any], *, stacked: bool | None = None) -> list[Rule]:
    """Rules for this config; `stacked` defaults to the config's stacked_qkv flag."""
    cfg = text_config(config)
    stacked_qkv = bool(cfg.get("stacked_qkv", False)) if stacked is None else stacked
    stacked_mlp = bool(cfg.get("stacked_mlp", False)) if stacked is None else stacked
    params = "{param:weight|bias}" if cfg.get("attention_bias") else "weight"
    out: list[Rule] = [
        Rename(source="model.embed_tokens.weight", target="language_model.embed_tokens.weight",
               placement="replicated"),
        Rename(source="model.norm.weight", target="language_model.norm.weight", placement="replicated"),
        Rename(source=f"{_L}.{{norm:input_layernorm|post_attention_layernorm}}.weight",
               target=f"{_T}.{{norm}}.weight", placement="replicated"),
        Rename(source=f"{_L}.self_attn.o_proj.weight", target=f"{_T}.self_attn.o_proj.weight", placement="row"),
        Rename(source=f"{_L}.mlp.down_proj.weight", target=f"{_T}.mlp.down_proj.weight", placement="row"),
        Drop(source=f"{_L}.self_attn.rotary_emb.inv_freq", reason="RoPE tables are computed, not loaded",
             optional=True),
    ]
    if cfg.get("tie_word_embeddings"):
        out.append(Drop(source="lm_head.weight", optional=True,
                        reason="tied embeddings: the V3 module computes logits with embed_tokens.weight.T"))
    else:
        out.append(Rename(source="lm_head.weight", target="language_model.lm_head.weight", placement="column"))
    if stacked_qkv:
        kv = "num_key_value_heads*head_dim"
        out.append(Concat(
            sources=tuple(f"{_L}.self_attn.{p}.{params}" for p in ("q_proj", "k_proj", "v_proj")),
            target=f"{_T}.self_attn.qkv_proj.{params}",
            sizes=("num_attention_heads*head_dim", kv, kv), placement="column",
        ))
    else:
        out.append(Rename(source=f"{_L}.self_attn.{{proj:q_proj|k_proj|v_proj}}.{params}",
                          target=f"{_T}.self_attn.{{proj}}.{params}", placement="column"))
    if stacked_mlp:
        out.append(Concat(sources=(f"{_L}.mlp.gate_proj.weight", f"{_L}.mlp.up_proj.weight"),
                          target=f"{_T}.mlp.gate_up_proj.weight", placement="column"))
    else:
        out.append(Rename(source=f"{_L}.mlp.{{proj:gate_proj|up_proj}}.weight",
                          target=f"{_T}.mlp.{{proj}}.weight", placement="column"))
    return out
