"""The tiny configs shared by the ladder and verify: small, consistent, from transformers."""

from __future__ import annotations

import dataclasses

import pytest

from migrate_v3.verify import tiny


def test_model_types_from_architecture_package_and_config_names() -> None:
    assert tiny.model_types("LlamaForCausalLM") == ["llama"]
    assert tiny.model_types("Qwen2ForCausalLM_ModuleV3") == ["qwen2"]  # a migrated name
    assert "umt5" in tiny.model_types("umt5")  # a package named after its model type
    assert tiny.model_types("NoSuchThingForCausalLM") == []


@pytest.mark.parametrize("model_type", ["llama", "gemma3", "deepseek_v3", "qwen2_5_vl", "umt5", "gpt_oss"])
def test_tiny_configs_are_small(model_type: str) -> None:
    config = tiny.tiny_hf_config(model_type, ["X"])
    assert tiny.too_big(config) == []
    assert config.architectures == ["X"]
    text = getattr(config, "text_config", None) or config
    layers = getattr(text, "num_hidden_layers", None) or getattr(text, "num_layers", None)
    assert layers is not None and layers <= tiny.LAYERS
    per_layer = getattr(text, "layer_types", None)
    assert per_layer is None or len(per_layer) == layers


def test_a_per_layer_list_keeps_one_of_each_kind_first() -> None:
    kinds = ["sliding_attention"] * 5 + ["full_attention"]
    assert tiny._pick_layers(kinds, 2) == ["sliding_attention", "full_attention"]
    assert tiny._pick_layers("MMM*M-", 2) == "M*"


def test_a_multimodal_config_gets_every_declared_tower() -> None:
    config = tiny.tiny_hf_config("gemma4")  # transformers' default has no vision tower
    assert config.vision_config is not None and tiny.too_big(config) == []


@dataclasses.dataclass
class _Config:
    hidden_size: int
    vocab_size: int
    eps: float = 1e-6


def test_fill_config_takes_the_fields_it_shares_and_names_what_is_missing() -> None:
    hf = tiny.tiny_hf_config("llama")
    filled = tiny.fill_config(_Config, hf)
    assert (filled.hidden_size, filled.vocab_size, filled.eps) == (64, 256, 1e-6)

    @dataclasses.dataclass
    class Needs:
        kv_params: object

    with pytest.raises(TypeError, match="no tiny value for required field"):
        tiny.fill_config(Needs, hf)
