"""Layer and expert domains derived from a Hugging Face config.

Rules never hard-code a layer count: they name a domain (`{layer:moe}`,
`{layer:mtp}`, `{layer:linear_attention}`) and the domain is computed here
from the config, so the same template serves a 4-layer test model and the
61-layer DeepSeek-V3. Checkpoint layer numbering is global (the DeepSeek MTP
layer is `model.layers.61`); the `mtp` domain carries base
`num_hidden_layers` so a relative (target-side) pattern numbers it from 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .patterns import Domains, IntDomain


def text_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The language-model part of a config (multimodal configs nest it)."""
    inner = config.get("text_config")
    if isinstance(inner, Mapping):
        return {**config, **inner}
    return dict(config)


def num_layers(cfg: Mapping[str, Any]) -> int:
    for key in ("num_hidden_layers", "n_layer", "num_layers"):
        if isinstance(cfg.get(key), int):
            return int(cfg[key])
    raise KeyError("config has no num_hidden_layers")


def num_mtp_layers(cfg: Mapping[str, Any]) -> int:
    for key in ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers"):
        if isinstance(cfg.get(key), int):
            return int(cfg[key])
    return 0


def num_experts(cfg: Mapping[str, Any]) -> int:
    for key in ("n_routed_experts", "num_experts", "num_local_experts"):
        if isinstance(cfg.get(key), int) and cfg[key] > 0:
            return int(cfg[key])
    return 0


def is_moe_layer(cfg: Mapping[str, Any], i: int) -> bool:
    """Whether layer `i` has a routed-expert MLP (DeepSeek, MCA-list and Qwen conventions)."""
    if num_experts(cfg) == 0:
        return False
    freq = cfg.get("moe_layer_freq", 1)
    if isinstance(freq, list):
        return bool(freq[i]) if i < len(freq) else True
    if "decoder_sparse_step" in cfg or "mlp_only_layers" in cfg:
        step = int(cfg.get("decoder_sparse_step", 1) or 1)
        return i not in set(cfg.get("mlp_only_layers", []) or []) and (i + 1) % step == 0
    first_dense = int(cfg.get("first_k_dense_replace", 0) or 0)
    return i >= first_dense and i % int(freq or 1) == 0


def layer_types(cfg: Mapping[str, Any], n: int) -> list[str] | None:
    """Per-layer attention types (`layer_types` list or `full_attention_interval`)."""
    types = cfg.get("layer_types")
    if isinstance(types, list) and len(types) >= n:
        return [str(t) for t in types[:n]]
    interval = cfg.get("full_attention_interval")
    if isinstance(interval, int) and interval > 0:
        return ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n)]
    return None


def layer_sets(config: Mapping[str, Any]) -> dict[str, tuple[frozenset[int], int]]:
    """Domain name -> (members, base): layer, main, mtp, dense, moe, expert, layer types.

    Plain data (stdlib only) so emitted adapters can embed this function.
    """
    cfg = text_config(config)
    n = num_layers(cfg)
    n_mtp = num_mtp_layers(cfg)
    every = range(n + n_mtp)
    sets: dict[str, tuple[frozenset[int], int]] = {
        "layer": (frozenset(every), 0),
        "main": (frozenset(range(n)), 0),
        "mtp": (frozenset(range(n, n + n_mtp)), n),
        "moe": (frozenset(i for i in every if is_moe_layer(cfg, i)), 0),
        "dense": (frozenset(i for i in every if not is_moe_layer(cfg, i)), 0),
    }
    if num_experts(cfg):
        sets["expert"] = (frozenset(range(num_experts(cfg))), 0)
    types = layer_types(cfg, n)
    if types:
        for kind in sorted(set(types)):
            sets[kind] = (frozenset(i for i, t in enumerate(types) if t == kind), 0)
    return sets


def domains_from_config(config: Mapping[str, Any]) -> Domains:
    """`layer_sets` as pattern Domains."""
    return Domains({name: IntDomain(members, base) for name, (members, base) in layer_sets(config).items()})
