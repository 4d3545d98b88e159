"""The tiny configs shared by the ladder and verify: small, consistent, from transformers."""

from __future__ import annotations

import copy
import dataclasses

import pytest
from max.nn.kv_cache import KVCacheParams

from migrate_v3.verify import tiny


def test_model_types_from_architecture_package_and_config_names() -> None:
    assert tiny.model_types("LlamaForCausalLM") == ["llama"]
    assert tiny.model_types("Qwen2ForCausalLM_ModuleV3") == ["qwen2"]  # a migrated name
    assert "umt5" in tiny.model_types("umt5")  # a package named after its model type
    assert tiny.model_types("NoSuchThingForCausalLM") == []


@pytest.mark.parametrize("model_type", ["llama", "gemma3", "deepseek_v3", "qwen2_5_vl", "umt5", "gpt_oss", "gemma4"])
def test_tiny_configs_are_small(model_type: str) -> None:
    config = tiny.tiny_hf_config(model_type, ["X"])
    assert tiny.too_big(config) == []
    assert config.architectures == ["X"]
    text = getattr(config, "text_config", None) or config
    layers = getattr(text, "num_hidden_layers", None) or getattr(text, "num_layers", None)
    assert layers is not None and layers <= tiny.LAYERS
    per_layer = getattr(text, "layer_types", None)
    assert per_layer is None or len(per_layer) == layers
    assert getattr(text, "vocab_size_per_layer_input", 0) <= tiny.LIMIT  # Gemma 4's per-layer embeddings


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


def test_a_strict_config_refusing_a_towers_class_defaults_gets_the_values_its_validation_insists_on() -> None:
    # gemma4_assistant's text_config defaults to None; Gemma4TextConfig's own defaults fail its validation
    # (``if text_config.hidden_size_per_layer_input != 0: raise``, ...): those fields take what it insists on
    config = tiny.tiny_hf_config("gemma4_assistant", ["Gemma4AssistantForCausalLM"])
    assert tiny.too_big(config) == []
    text = config.text_config
    assert text is not None and text.hidden_size_per_layer_input == 0 and text.enable_moe_block is False
    assert text.num_kv_shared_layers == text.num_hidden_layers == tiny.LAYERS


def test_validator_requirements_are_read_from_the_config_classes_own_raising_ifs() -> None:
    from transformers import PretrainedConfig

    class Strict(PretrainedConfig):
        def validate_tower(self) -> None:
            if self.sub_config.width != 0:
                raise ValueError("width must be 0")
            if self.sub_config.shared is not False or self.sub_config.kept != self.sub_config.depth:
                raise ValueError("no sharing; every layer kept")
            if self.sub_config.free != 3:
                pass  # no raise: not a requirement

    assert tiny.validator_requirements(Strict) == [
        ("width", ("value", 0)), ("shared", ("value", False)), ("kept", ("field", "depth"))]
    values = {"sub_config": {"width": 8, "shared": True, "kept": 0, "depth": 2}, "other": 1}
    assert tiny._accepted(values, tiny.validator_requirements(Strict)) == {
        "sub_config": {"width": 0, "shared": False, "kept": 2, "depth": 2}, "other": 1}


def _package(root, name: str, files: dict[str, str]):  # type: ignore[no-untyped-def]
    pkg = root / name
    pkg.mkdir(parents=True)
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    return pkg


_CONFIG_CODE = '''
from dataclasses import dataclass, field

@dataclass
class MyConfig:
    route_norm: bool = True
    ratios: list[int] = field(default_factory=list)
    indexes: list[int]
    label: str = field(default="x")

def _required(huggingface_config, name):
    return getattr(huggingface_config, name)

def initialize(huggingface_config, hf_vision_config, config):
    a = huggingface_config.hidden_size
    b = huggingface_config.rope_theta
    c = getattr(huggingface_config, "ratios")
    d = getattr(huggingface_config, "optional_thing", None)
    e = _required(huggingface_config, "route_norm")
    f = hf_vision_config.patch_size
    i = huggingface_config.vision_config.indexes
    cfg = huggingface_config
    j = cfg.through_an_alias
    g = config.rope_scaling["mrope_section"]
    h = huggingface_config._private
    if config.hidden_act != "silu":
        raise ValueError("silu only")
    rope_type = config.rope_scaling and config.rope_scaling.get("rope_type")
    if rope_type and rope_type != "yarn":
        raise ValueError("yarn only")
    if config.other != "kept":
        print("not a raise")
'''


def test_config_reads_finds_what_the_code_reads_from_the_hugging_face_config(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pkg = _package(tmp_path, "arch", {"model_config.py": _CONFIG_CODE})
    reads = tiny.config_reads(tiny.package_sources(pkg))
    assert {"hidden_size", "rope_theta", "ratios", "route_norm"} <= reads.attrs[""]
    assert "optional_thing" not in reads.attrs[""] and "optional_thing" in reads.optional
    assert "through_an_alias" in reads.attrs[""]  # getattr with its own default
    assert "_private" not in reads.attrs[""]
    assert reads.attrs["vision"] == {"patch_size", "indexes"}
    assert reads.empty["indexes"] == []
    assert reads.keys["rope_scaling"] == {"mrope_section"}
    assert reads.required == {"hidden_act": "silu", "rope_type": "yarn"}  # not "other": no raise
    assert reads.defaults["route_norm"] is True and reads.defaults["ratios"] == [] and reads.defaults["label"] == "x"


def test_fill_reads_gives_a_config_the_fields_its_code_reads(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pkg = _package(tmp_path, "arch", {"model_config.py": _CONFIG_CODE})
    reads = tiny.config_reads(tiny.package_sources(pkg))
    config = tiny.tiny_hf_config("qwen2_5_vl")  # composite: hidden_size lives in text_config
    assert not hasattr(config, "route_norm")
    done = tiny.fill_reads(config, reads)
    assert config.hidden_size == config.text_config.hidden_size == 64  # a composite read as if flat
    assert config.rope_theta == config.text_config.rope_parameters["rope_theta"]  # transformers 5 moved it
    assert config.route_norm is True and config.ratios == []  # the package's own defaults
    assert config.vision_config.indexes == []  # an empty value of the declared type: no default
    assert config.text_config.rope_parameters["rope_type"] == "yarn"  # the one value the code accepts
    assert config.text_config.rope_scaling["mrope_section"] == tiny.SHAPED["mrope_section"]
    assert any(item.startswith("route_norm=") for item in done)
    assert tiny.fill_reads(config, reads) == []  # what is there is kept: a second fill adds nothing


def test_fill_reads_keeps_what_the_config_has(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pkg = _package(tmp_path, "arch", {"m.py": "def f(huggingface_config):\n    return huggingface_config.vocab_size\n"})
    config = tiny.tiny_hf_config("llama")
    config.vocab_size = 200
    # only transformers 4's rope_theta attribute, mirrored from rope_parameters; vocab_size stays
    assert tiny.fill_reads(config, tiny.config_reads(tiny.package_sources(pkg))) == ["rope_theta=10000.0"]
    assert config.vocab_size == 200
    optional = _package(tmp_path, "dense", {"m.py": "def f(huggingface_config):\n"
                                              "    return huggingface_config.num_experts\n"
                                              "def g(huggingface_config):\n"
                                              "    return getattr(huggingface_config, 'num_experts', 0)\n"})
    assert "num_experts" not in " ".join(tiny.fill_reads(config, tiny.config_reads(tiny.package_sources(optional))))
    assert not hasattr(config, "num_experts")  # read with a default elsewhere: a dense model stays dense


def test_a_package_with_no_model_type_takes_its_siblings(tmp_path) -> None:  # type: ignore[no-untyped-def]
    arch = 'from x import SupportedArchitecture\na = SupportedArchitecture(name="LlamaForCausalLM")\n'
    _package(tmp_path, "llama3", {"arch.py": arch, "model.py": ""})
    _package(tmp_path, "eagle_llama3", {"arch.py": 'b = SupportedArchitecture(name="LlamaForCausalLMEagle")\n',
                                        "model.py": "from ..llama3.model import X\n"})
    fused = _package(tmp_path, "unified_eagle_llama3", {
        "arch.py": 'c = SupportedArchitecture(name="UnifiedEagleLlama3ForCausalLM")\n',
        "model.py": "from ..eagle_llama3.model import Y\nfrom ..llama3 import Z\n",
        "layers/x.py": "from ...llama3.model import W\n"})
    assert sorted(tiny.sibling_packages(fused)) == ["eagle_llama3", "llama3"]
    assert tiny.model_types(*tiny.registered_names(fused)) == []
    assert tiny.sibling_model_types(fused) == ["llama"]  # looked through eagle_llama3
    assert [p.parent.name for p in tiny.package_sources(fused)].count("llama3") == 2  # transitively


def test_the_speculative_method_comes_from_a_package_that_reads_the_draft(tmp_path) -> None:  # type: ignore[no-untyped-def]
    reads = "def f(pipeline_config):\n    return pipeline_config.draft_model\n"
    assert tiny.speculative_method(_package(tmp_path, "unified_dflash2_x", {"m.py": reads})) == "dflash2"
    assert tiny.speculative_method(_package(tmp_path, "unified_mtp_x", {"m.py": reads})) == "mtp"
    assert tiny.speculative_method(_package(tmp_path, "plain", {"m.py": "x = 1\n"})) is None


def test_a_fill_the_configs_own_validation_refuses_is_undone() -> None:
    class Strict:
        def __init__(self) -> None:
            self.layer_types: list[str] = []

        def validate(self) -> None:
            depth = vars(self).get("num_hidden_layers")
            if depth is not None and depth != len(self.layer_types):
                raise ValueError("num_hidden_layers must equal the number of layer_types")

    reads = tiny.ConfigReads(attrs={"": {"num_hidden_layers", "vocab_size"}})
    config = Strict()
    assert tiny.fill_reads(config, reads) == ["vocab_size=256"]
    assert "num_hidden_layers" not in vars(config)


def test_the_config_field_a_load_path_stops_on_is_read_from_its_error() -> None:
    assert tiny.missing_field("AttributeError: 'CLIPVisionConfig' object has no attribute 'rope_theta'") == (
        "CLIPVisionConfig", ("rope_theta",), None)
    assert tiny.missing_field("ValueError: vision_config not found in huggingface_config") == (
        "", ("vision_config",), None)
    assert tiny.missing_field("ValueError: DFlash draft HF config is missing ``dflash_config.mask_token_id``.") == (
        "", ("dflash_config", "mask_token_id"), None)
    assert tiny.missing_field("ValueError: DSpark Gemma4 drafter requires attention_k_eq_v=true.") == (
        "", ("attention_k_eq_v",), True)  # the value it asks for
    assert tiny.missing_field("ValueError: Expected a speculators checkpoint with speculators_model_type='dspark', "
                              "got None.") == ("", ("speculators_model_type",), "dspark")
    assert tiny.missing_field("ValueError: DFlash2 draft HF config declares no ``dflash_config.block_size``.") == (
        "", ("dflash_config", "block_size"), None)
    assert tiny.missing_field("ValueError: mrope_section [2, 3, 3] must sum to 2") is None


def test_a_missing_field_is_added_where_the_error_says_with_a_value_that_follows_the_config() -> None:
    reads = tiny.ConfigReads()
    config = tiny.tiny_hf_config("llama")
    assert tiny.fill_missing(config, "", ("dflash_config", "mask_token_id"), reads) == (
        "dflash_config.mask_token_id=255")  # a token id: the last of the tiny vocabulary
    assert tiny.fill_missing(config, "", ("dflash_config", "target_layer_ids"), reads) == (
        "dflash_config.target_layer_ids=[0, 1]")  # every layer of the tiny depth
    assert config.dflash_config == {"mask_token_id": 255, "target_layer_ids": [0, 1]}
    assert tiny.fill_missing(config, "LlamaModel", ("norm_method",), reads) is None  # not a config: no fill
    assert tiny.fill_missing(config, "", ("attention_k_eq_v",), reads, wanted=True) == "attention_k_eq_v=True"
    # a tower with no sibling model type to take it from (no package): not made up
    assert tiny.fill_missing(config, "", ("vision_config",), reads) is None and "vision_config" not in vars(config)
    composite = tiny.tiny_hf_config("llava")
    vision = type(composite.vision_config).__name__
    assert tiny.fill_missing(composite, vision, ("rope_theta",), reads) == "vision_config.rope_theta=10000.0"
    assert composite.vision_config.rope_theta == 10000.0 and "rope_theta" not in vars(composite)


def test_a_decoder_config_a_draft_reads_under_its_own_name_is_the_language_tower() -> None:
    """A speculators draft reads its layers' geometry from ``transformer_layer_config``, and says
    it is missing without quoting the name: it is the config's language tower (its ``text_config``
    when it has one, else the flat config itself)."""
    found = tiny.missing_field("ValueError: DSpark speculators config is missing transformer_layer_config.")
    assert found == ("", ("transformer_layer_config",), None)
    assert tiny.missing_field("ValueError: the config is missing a value") is None  # no field's name
    reads = tiny.ConfigReads()
    composite = tiny.tiny_hf_config("gemma4")
    assert tiny.fill_missing(composite, "", ("transformer_layer_config",), reads) is not None
    layers = composite.transformer_layer_config
    assert type(layers) is type(composite.text_config) and layers is not composite.text_config
    assert layers.vocab_size == 256 and layers.num_hidden_layers == 2
    flat = tiny.tiny_hf_config("llama")
    assert tiny.fill_missing(flat, "", ("transformer_layer_config",), reads) is not None
    assert flat.transformer_layer_config.hidden_size == 64
    assert not any(k.endswith("_config") for k in vars(flat.transformer_layer_config))
    other = tiny.tiny_hf_config("llama")  # a tower of another kind is not the decoder
    assert tiny.fill_missing(other, "", ("audio_config",), reads) is None


def test_a_field_the_load_path_refuses_as_zero_is_missing_and_gets_its_tiny_value() -> None:
    error = ("ValueError: DSpark draft_vocab_size must be in (0, vocab_size]. Got draft_vocab_size=0 "
             "vocab_size=256.")
    assert tiny.missing_field(error) == ("", ("draft_vocab_size",), None)
    assert tiny.missing_field("ValueError: DSpark block_size must be >= 2, got 1.") is None  # a value, not none
    config = tiny.tiny_hf_config("llama")
    assert tiny.fill_missing(config, "", ("draft_vocab_size",), tiny.ConfigReads()) == "draft_vocab_size=256"
    error = ("ValueError: DSpark aux_hidden_state_layer_ids use the vLLM eagle convention (input of target "
             "layer j) and must all be >= 1. Got (0, 1).")
    assert tiny.missing_field(error) == ("", ("aux_hidden_state_layer_ids",), tiny.Without(0))
    composite = tiny.tiny_hf_config("gemma4")  # (its towers lack the field: the config itself has it)
    composite.aux_hidden_state_layer_ids = [0, 1]
    assert tiny.fill_missing(composite, "", ("aux_hidden_state_layer_ids",), tiny.ConfigReads(),
                             wanted=tiny.Without(0))
    assert composite.aux_hidden_state_layer_ids == [1, 2]  # as many ids, none 0


def test_an_fp8_checkpoint_has_a_scale_for_each_layers_mlp_as_its_load_path_names_it() -> None:
    assert tiny.fp8_scale_names() == ["layers.0.mlp.down_proj.weight_scale", "layers.1.mlp.down_proj.weight_scale"]
    assert tiny.fp8_scale_names(renamed=False, layers=1) == ["layers.0.mlp.down_proj.weight_scale_inv"]


def test_derived_fields_follow_the_widths_of_their_config() -> None:
    config = tiny.tiny_hf_config("llama")
    assert tiny.derived("mrope_section", config) == (True, [2, 3, 3])  # head_dim 16: 8 rotary pairs
    config.partial_rotary_factor = 0.25  # a quarter of head_dim rotates: 2 pairs
    assert tiny.derived("mrope_section", config) == (True, [0, 1, 1])
    assert tiny.derived("layer_types", config) == (True, ["full_attention", "full_attention"])
    assert tiny.derived("no_rule_for_this", config) == (False, None)


def test_a_tower_without_grouped_query_attention_keeps_none() -> None:
    config = tiny.tiny_hf_config("gemma4")  # its vision tower has as many key/value heads as query heads
    assert config.vision_config.num_key_value_heads == config.vision_config.num_attention_heads == 4
    assert config.text_config.num_key_value_heads == 2  # the decoder is given grouped-query attention


def test_a_per_layer_list_the_load_path_says_is_short_gets_one_entry_per_layer() -> None:
    found = tiny.missing_field("ValueError: compress_ratios has 0 entries but the model has 2 layers")
    assert found == ("", ("compress_ratios",), tiny.PerLayer(2))
    config = tiny.tiny_hf_config("llama")
    config.compress_ratios = []
    assert tiny.fill_missing(config, *found[:2], tiny.ConfigReads(), wanted=found[2]) == "compress_ratios=[0, 0]"
    assert config.compress_ratios == [0, 0]  # no entries to repeat: the neutral entry
    assert tiny.per_layer([4, 128], 3) == [4, 128, 4]  # entries it has are kept, in order


def test_a_sub_config_read_back_as_a_dict_gets_the_written_object_again() -> None:
    written = tiny.tiny_hf_config("llama")  # LlamaConfig declares no vision_config
    written.vision_config = tiny.tiny_hf_config("llava").vision_config
    loaded = tiny.tiny_hf_config("llama")
    loaded.vision_config = written.vision_config.to_dict()  # what config.json gives back
    assert tiny.restore_sub_configs(loaded, written) == ["vision_config"]
    assert type(loaded.vision_config) is type(written.vision_config)
    assert loaded.vision_config is not written.vision_config  # a copy: the loaded config's own
    assert tiny.restore_sub_configs(loaded, written) == []  # an object already: left alone


def test_a_list_of_equal_entries_where_the_package_declares_one_number_becomes_that_number(tmp_path) -> None:  # type: ignore[no-untyped-def]
    code = ("from dataclasses import dataclass\n@dataclass\nclass VisionConfig:\n    patch_size: int\n"
            "    image_size: int = 448\n")
    pkg = _package(tmp_path, "vl", {"model_config.py": code})
    reads = tiny.package_reads(pkg)
    assert {"patch_size", "image_size"} <= reads.scalars
    config = tiny.tiny_hf_config("llava")
    config.vision_config.patch_size, config.vision_config.image_size = [14, 14], [448, 336]
    done = tiny.fill_reads(config, reads)
    assert config.vision_config.patch_size == 14 and "vision_config.patch_size=14 (was [14, 14])" in done
    assert config.vision_config.image_size == [448, 336]  # not one number: left as it is


def test_a_sub_config_no_sibling_has_is_made_from_the_fields_the_package_reads_on_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    code = ("def build(huggingface_config):\n    v = huggingface_config.vision_config\n"
            "    return (huggingface_config.vision_config.vt_hidden_size, huggingface_config.vision_config.patch_size,"
            " huggingface_config.vision_config.num_hidden_layers, huggingface_config.vision_config.pos_grid)\n"
            "from dataclasses import dataclass\n@dataclass\nclass VisionConfig:\n    patch_size: int = 14\n")
    pkg = _package(tmp_path, "vl", {"model_config.py": code})
    reads = tiny.package_reads(pkg)
    config = tiny.tiny_hf_config("llama")  # declares no vision_config, and no sibling to take one from
    done = tiny.fill_missing(config, "", ("vision_config",), reads, pkg)
    assert done is not None and done.startswith("vision_config=")
    vision = config.vision_config
    assert (vision.vt_hidden_size, vision.patch_size, vision.num_hidden_layers) == (64, 14, tiny.LAYERS)
    assert not hasattr(vision, "pos_grid")  # no value follows: left missing, the load path says so
    assert tiny.fill_missing(tiny.tiny_hf_config("llama"), "", ("audio_config",), reads, pkg) is None  # none read


def test_layer_types_of_a_package_with_kinds_of_its_own_take_one_of_each(tmp_path) -> None:  # type: ignore[no-untyped-def]
    reader = "def f(huggingface_config):\n    return huggingface_config.layer_types\n"
    code = 'LINEAR_ATTENTION = "linear_attention"\nSPARSE_ATTENTION = "deepseek_sparse_attention"\n' + reader
    reads = tiny.package_reads(_package(tmp_path, "hybrid", {"model_config.py": code}))
    assert reads.layer_kinds == {"linear_attention", "deepseek_sparse_attention"}
    config = tiny.tiny_hf_config("llama")  # no layer_types of its own
    tiny.fill_reads(config, reads)
    assert config.layer_types == ["deepseek_sparse_attention", "linear_attention"]  # every kind, in 2 layers
    plain = tiny.package_reads(_package(tmp_path, "gemma", {"m.py": 'FULL = "full_attention"\n'
                                                                   'SLIDING = "sliding_attention"\n' + reader}))
    config = tiny.tiny_hf_config("llama")
    tiny.fill_reads(config, plain)
    assert config.layer_types == ["full_attention"] * tiny.LAYERS  # a package that knows full attention: as before


def test_a_missing_table_the_code_subscripts_is_a_dict_of_its_keys_valued_as_fields(tmp_path) -> None:  # type: ignore[no-untyped-def]
    code = ('def f(huggingface_config):\n    return huggingface_config.other_setting["num_key_value_heads"], '
            'huggingface_config.other_setting["head_dim"], huggingface_config.other_setting["unknowable"]\n')
    reads = tiny.package_reads(_package(tmp_path, "hybrid", {"model_config.py": code}))
    config = tiny.tiny_hf_config("llama")
    done = tiny.fill_missing(config, "", ("other_setting",), reads)
    assert done is not None and config.other_setting == {"head_dim": 16, "num_key_value_heads": 2}


def test_a_missing_field_the_configs_own_validation_refuses_is_not_added() -> None:
    config = tiny.tiny_hf_config("gemma4_assistant")  # its text_config must have no per-layer inputs
    config.text_config = None
    text = tiny.tiny_hf_config("gemma4").text_config  # a sibling's, with per-layer inputs
    assert text.hidden_size_per_layer_input
    assert tiny.fill_missing(config, "", ("text_config",), tiny.ConfigReads(), wanted=text) is None
    assert config.text_config is None and tiny._valid(config)  # config.json can still be written


def test_a_field_takes_the_default_the_code_reads_it_with_then_a_layers_parameter_default(tmp_path) -> None:  # type: ignore[no-untyped-def]
    code = ("def f(hf_vision_config):\n"
            "    a = getattr(hf_vision_config, 'merge_kernel_size', [2, 2])\n"
            "    b = getattr(hf_vision_config, 'pos_h', 0)\n"  # 0: the code's "absent", not a value
            "    return a, b, hf_vision_config.pos_h, hf_vision_config.grid\n"
            "class Embed:\n"
            "    def __init__(self, pos_h: int = 64, grid: int = 100000, *, scale: float = 0.5) -> None:\n"
            "        pass\n")
    reads = tiny.package_reads(_package(tmp_path, "vl", {"layers.py": code}))
    assert reads.read_defaults == {"merge_kernel_size": [2, 2]}
    assert reads.param_defaults == {"pos_h": 64, "grid": 100000, "scale": 0.5}
    config = tiny.tiny_hf_config("llama")
    assert tiny._fill_value("merge_kernel_size", config, reads) == (True, [2, 2])
    assert tiny._fill_value("pos_h", config, reads) == (True, 64)  # the layer's own default
    assert tiny._fill_value("grid", config, reads) == (False, None)  # not tiny: no value
    assert tiny._fill_value("ignore_index", config, reads) == (True, -100)


def test_a_missing_language_tower_is_the_flat_config_itself() -> None:
    config = tiny.tiny_hf_config("llama")  # a flat language model's config; the code reads text_config
    config.vision_config = tiny.tiny_hf_config("llava").vision_config
    done = tiny.fill_missing(config, "", ("text_config",), tiny.ConfigReads())
    assert done is not None and done.startswith("text_config=")
    text = config.text_config
    assert type(text) is type(config) and text is not config and text.hidden_size == config.hidden_size
    assert not hasattr(text, "vision_config")  # the tower has no towers of its own
    # a field then missing on the tower (the config itself has it) is added to the tower
    config.moe_layer_freq = 1
    assert tiny.fill_missing(config, "LlamaConfig", ("moe_layer_freq",), tiny.ConfigReads(),
                             wanted=1) == "text_config.moe_layer_freq=1"
    assert tiny.fill_missing(tiny.tiny_hf_config("llava"), "", ("llm_config",), tiny.ConfigReads()) is None


def test_a_list_the_load_path_says_must_not_contain_an_entry_loses_it() -> None:
    error = "NotImplementedError: DFlash dflash_config.target_layer_ids must not contain 0 for the current impl"
    owner, path, wanted = tiny.missing_field(error) or ("", (), None)
    assert (owner, path, wanted) == ("", ("dflash_config", "target_layer_ids"), tiny.Without(0))
    config = tiny.tiny_hf_config("llama")
    config.dflash_config = {"target_layer_ids": [0, 1]}
    assert tiny.fill_missing(config, owner, path, tiny.ConfigReads(), wanted=wanted) == (
        "dflash_config.target_layer_ids=[1, 2]")
    assert tiny.fill_missing(config, owner, path, tiny.ConfigReads(), wanted=wanted) is None  # nothing to drop


def test_a_list_of_indices_losing_an_entry_keeps_its_length() -> None:
    """The load path also checks the count (one target layer id per draft layer: 2): the dropped
    index is replaced by the next one after the largest, not left out."""
    assert tiny._without([0, 1], 0) == [1, 2]
    assert tiny._without([0], 0) == [1]
    assert tiny._without([3, 0, 1], 1) == [3, 0, 4]
    assert tiny._without(["sliding", "full"], "full") == ["sliding"]  # not indices: just dropped


def test_layer_types_read_with_a_fallback_of_the_codes_own_still_take_one_of_each_kind(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``getattr(text_config, "layer_types", None)`` falls back to a period rule (every 4th layer
    sparse) that 2 layers lose a kind by: each language (sub-)config is told the package's kinds."""
    code = ('LINEAR_ATTENTION = "linear_attention"\nSPARSE_ATTENTION = "deepseek_sparse_attention"\n'
            "def f(text_config):\n    layer_types = getattr(text_config, 'layer_types', None)\n"
            "    return layer_types or ['deepseek_sparse_attention' if i % 4 == 3 else 'linear_attention'\n"
            "                           for i in range(text_config.num_hidden_layers)]\n")
    reads = tiny.package_reads(_package(tmp_path, "hybrid", {"model_config.py": code}))
    assert "layer_types" in reads.optional
    config = tiny.tiny_hf_config("llava")  # a language tower (text_config) and a vision one
    config.text_config.layer_types = None
    done = tiny.fill_reads(config, reads)
    assert config.text_config.layer_types == ["deepseek_sparse_attention", "linear_attention"]
    assert "text_config.layer_types=['deepseek_sparse_attention', 'linear_attention']" in done
    assert getattr(config.vision_config, "layer_types", None) is None  # a tower without layers of those kinds
    plain = tiny.package_reads(_package(tmp_path, "dense", {"m.py": "def f(text_config):\n"
                                                           "    return getattr(text_config, 'layer_types', None)\n"}))
    config = tiny.tiny_hf_config("llama")
    config.layer_types = None
    tiny.fill_reads(config, plain)
    assert config.layer_types is None  # a package with no kinds of its own: optional stays optional


def test_a_number_a_config_class_widens_to_a_pair_on_loading_is_given_back() -> None:
    """InternVL's vision config turns ``patch_size=14`` into ``(14, 14)`` on loading ``config.json``;
    the package's own config declares one number (fill_reads made it 14), so the loaded one is 14."""
    written = tiny.tiny_hf_config("internvl")
    written.vision_config.patch_size = 14
    written.vision_config.image_size = 448
    loaded = copy.deepcopy(written)
    loaded.vision_config.patch_size, loaded.vision_config.image_size = (14, 14), [448, 336]
    assert tiny.restore_numbers(loaded, written) == ["vision_config.patch_size"]
    assert loaded.vision_config.patch_size == 14
    assert loaded.vision_config.image_size == [448, 336]  # not a pair of that number: left as it is
    assert tiny.restore_numbers(loaded, written) == []


def test_a_block_local_convolution_and_a_candidate_selector_get_values_that_fit_the_tiny_widths() -> None:
    """A draft's ``dflash_config`` must declare them; a config dataclass's 0 (its "unset") would
    divide by zero: the convolution's taps fit the block, its channel groups divide the widths."""
    reads = tiny.ConfigReads(defaults={"conv_group_size": 0, "conv_kernel_size": 0, "selector_top_k": 0})
    config = tiny.tiny_hf_config("llama")
    values = {n: tiny._fill_value(n, config, reads)[1]
              for n in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k", "block_size")}
    assert 1 <= values["conv_kernel_size"] <= values["block_size"]
    assert config.hidden_size % values["conv_group_size"] == 0 and values["conv_group_size"] > 0
    assert values["selector_rank"] > 0 and 0 < values["selector_top_k"] <= config.vocab_size


def test_a_field_the_code_refuses_unless_zero_is_zero(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``if self.qk_rope_head_dim != 0: raise`` (a model without rotary embeddings): the tiny width
    8 is made 0; a tensor's ``x.ndim != 4`` is not a config field's requirement."""
    code = ("class C:\n    def __post_init__(self):\n        if self.qk_rope_head_dim != 0:\n"
            "            raise ValueError('NoPE')\n        if self.x.ndim != 4:\n            raise ValueError\n")
    reads = tiny.package_reads(_package(tmp_path, "nope", {"model_config.py": code}))
    assert reads.required == {"qk_rope_head_dim": 0}
    config = tiny.tiny_hf_config("deepseek_v3")
    assert config.qk_rope_head_dim == 8
    assert "qk_rope_head_dim=0" in tiny.fill_reads(config, reads)
    assert config.qk_rope_head_dim == 0


def test_the_fp8_block_scaled_config_is_deepseek_v3s_with_its_float8_format() -> None:
    assert tiny.FP8_BLOCK_SCALED == {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                     "weight_block_size": [128, 128]}


def test_an_fp8_checkpoints_contracted_widths_are_whole_blocks_on_the_config_and_its_towers() -> None:
    """glm5_1's FP8 trace stopped on ``a_scales`` of shape ``[0, ...]``: a 64-wide K has no
    128-wide block. Each width a config (or a sub-config) has is set; one it lacks is not added."""
    from types import SimpleNamespace

    text = SimpleNamespace(hidden_size=64, kv_lora_rank=16, to_dict=dict)
    config = SimpleNamespace(hidden_size=64, q_lora_rank=32, index_head_dim=16, qk_rope_head_dim=8, text_config=text)
    done = tiny.widen(config, tiny.FP8_WIDTHS)
    assert (config.hidden_size, config.q_lora_rank, text.hidden_size, text.kv_lora_rank) == (128, 128, 128, 128)
    assert config.qk_rope_head_dim * 2 == config.index_head_dim == 128  # (the indexer's rotary half)
    assert not hasattr(config, "moe_intermediate_size") and "text_config.hidden_size=128" in done
    block = tiny.FP8_BLOCK_SCALED["weight_block_size"][0]
    contracted = ("hidden_size", "intermediate_size", "moe_intermediate_size", "q_lora_rank", "kv_lora_rank",
                  "o_lora_rank", "index_head_dim")
    assert all(tiny.FP8_WIDTHS[n] % block == 0 for n in contracted)
    assert tiny.FP8_WIDTHS["v_head_dim"] * tiny.SMALL["num_attention_heads"] % block == 0  # o_proj's K


@pytest.mark.needs_max
def test_a_checkpoint_name_an_adapter_flattens_from_a_convolution_is_given_as_one(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A patch embedding MAX builds as a Linear is a Conv2d/Conv3d in the checkpoint: the adapter
    unpacks 4 (5) axes and flattens; given 2 it raises. The name is given with 1-wide kernel axes."""
    from typing import Any

    from migrate_v3.verify import archbuild

    def adapter(state_dict: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in state_dict.items():
            o, i, t, h, w = v.data().shape  # a Conv3d's (a 2-axis weight: ValueError)
            out[k] = _Shaped((int(o), int(i) * int(t) * int(h) * int(w)))  # (only its shape is compared)
        return out

    v2: archbuild.Signature = {"vision.patch_embed.proj.weight": ((8, 12), "float32")}
    names = archbuild.checkpoint_names((adapter, None), v2, {}, None, None, tmp_path)
    assert names == {"vision.patch_embed.proj.weight": ((8, 12, 1, 1, 1), "float32")}


@dataclasses.dataclass
class _Shaped:
    shape: tuple[int, ...]
    dtype: str = "float32"


@pytest.mark.needs_max
def test_a_setting_the_load_path_names_as_a_flag_is_found_and_turned_on(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model_dir, weights = tiny.checkpoint_dir(tiny.tiny_hf_config("llama", ["LlamaForCausalLM"]), tmp_path)
    plain = tiny.pipeline_config(model_dir, weights, "float32")
    error = ("ValueError: X needs the bitmask input. Exporting turns it on and --no-sampler-grammar turns it off; "
             "elsewhere it follows --enable-structured-output (or a tool parser)")
    assert tiny.asked_setting(error, plain) == "sampling.enable_structured_output"
    assert tiny.asked_setting("ValueError: try --no-sampler-grammar or --not-a-setting", plain) is None
    on = tiny.pipeline_config(model_dir, weights, "float32", speculative="eagle",
                              settings={"sampling.enable_structured_output": True})
    assert on.sampling.enable_structured_output and on.needs_bitmask_constraints
    assert not plain.sampling.enable_structured_output  # the default section is not shared
    assert tiny.asked_setting(error, on) is None  # on already


def test_a_tower_whose_patches_are_merged_by_a_scale_factor_gets_a_multiple_of_it_per_side() -> None:
    """idefics3's pixel shuffle merges 2 x 2 patches; transformers' defaults give 224 / 32 = 7 a
    side, and its vision trace stopped on the reshape. The image size is rounded up (256: 8 a side);
    one that already fits is kept, and a model without a scale factor is left alone."""
    config = tiny.tiny_hf_config("idefics3")
    vision = config.vision_config
    assert (vision.image_size // vision.patch_size) % config.scale_factor == 0
    assert vision.image_size == 256
    out = {"vision_config": {"image_size": 64, "patch_size": 16}}
    tiny._merged_patches({"scale_factor": 2}, out)
    assert out["vision_config"]["image_size"] == 64
    out = {"vision_config": {"image_size": 224, "patch_size": 32}}
    tiny._merged_patches({}, out)
    assert out["vision_config"]["image_size"] == 224


@pytest.mark.needs_max
def test_a_configs_required_fields_a_tiny_checkpoint_lacks_are_given_by_their_type(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """eagle_common's draft configs require ``norm_dtype``, ``kv_params``, ``data_parallel_degree``
    and ``fc_input_multiplier``, which no ``transformers`` config has: each gets a tiny value by its
    annotation (and a name ending the known way); any other required field still names itself."""
    from max.dtype import DType
    from max.graph import DeviceRef

    (tmp_path / "draft_configs.py").write_text(
        "from __future__ import annotations\n\n"
        "from dataclasses import dataclass\n\n"
        "from max.dtype import DType\nfrom max.graph import DeviceRef\nfrom max.nn.kv_cache import KVCacheParams\n\n\n"
        "@dataclass\nclass DraftConfig:\n    hidden_size: int\n    norm_dtype: DType\n    kv_params: KVCacheParams\n"
        "    devices: list[DeviceRef]\n    data_parallel_degree: int\n    fc_input_multiplier: int\n    max_seq_len: int\n\n\n"
        "@dataclass\nclass Other:\n    hidden_size: int\n    window: int\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import draft_configs  # type: ignore[import-not-found]

    hf = tiny.tiny_hf_config("llama")
    config = tiny.fill_config(draft_configs.DraftConfig, hf)
    assert config.norm_dtype == DType.float32 and config.devices == [DeviceRef.CPU()]
    assert (config.data_parallel_degree, config.fc_input_multiplier, config.max_seq_len) == (1, 2, 128)
    assert config.kv_params.head_dim == hf.hidden_size // hf.num_attention_heads
    assert config.kv_params.num_layers == hf.num_hidden_layers
    with pytest.raises(TypeError, match="no tiny value for required field"):
        tiny.fill_config(draft_configs.Other, hf)


@pytest.mark.needs_max
def test_an_arch_config_field_initialize_leaves_none_takes_the_hugging_face_value_of_its_name() -> None:
    """llama3's ``Llama3Config.initialize`` leaves ``rms_norm_eps`` None (``finalize`` reads it from
    the Hugging Face config): dflash_llama3's draft refused such a config. The tiny one has it."""
    from max.pipelines.architectures.llama3.model_config import Llama3Config

    hf = tiny.tiny_hf_config("llama")
    config = tiny.arch_config(Llama3Config, hf)
    assert config.rms_norm_eps == hf.rms_norm_eps is not None


def test_a_zero_width_is_not_widened_to_whole_fp8_blocks() -> None:
    """glm5_next is NoPE (``if self.qk_rope_head_dim != 0: raise``): fill_reads made it 0, and the
    FP8 widths must not make it 64 again. Zero is a part the model has none of (and no blocks)."""
    from types import SimpleNamespace

    config = SimpleNamespace(hidden_size=64, qk_rope_head_dim=0)
    done = tiny.widen(config, tiny.FP8_WIDTHS)
    assert config.qk_rope_head_dim == 0 and config.hidden_size == 128
    assert done == ["hidden_size=128"]


def test_fill_config_takes_a_field_the_hugging_face_config_gives_under_another_name() -> None:
    """transformers 5 keeps ``rope_scaling`` as a property over ``rope_parameters``, which
    ``to_dict()`` leaves out: eagle_common's draft config (``rope_scaling: dict | None = None``)
    got None and its V2 draft refused to build a yarn RoPE. ``attribute_map`` names count too."""
    @dataclasses.dataclass
    class Draft:
        hidden_size: int
        rope_scaling: dict | None = None  # type: ignore[type-arg]
        num_local_experts: int | None = None

    hf = tiny.tiny_hf_config("deepseek_v3")
    assert "rope_scaling" not in hf.to_dict() and "num_local_experts" not in hf.to_dict()
    made = tiny.fill_config(Draft, hf)
    assert made.rope_scaling == hf.rope_parameters and "rope_theta" in made.rope_scaling
    assert made.num_local_experts == hf.n_routed_experts
    made.rope_scaling["rope_theta"] = -1.0
    assert hf.rope_parameters["rope_theta"] != -1.0  # a copy: the tiny config is not changed through it


_FLAGS_CODE = '''
def _get(obj, name, default=None):
    return getattr(obj, name, default)


def from_config(huggingface_config):
    cfg = huggingface_config
    if not bool(_get(cfg, "attention_k_eq_v")):
        raise ValueError("needs k == v")
    if bool(_get(cfg, "enable_moe_block", False)):
        raise ValueError("no MoE")
    if int(_get(cfg, "hidden_size_per_layer_input", 0)) != 0:
        raise ValueError("no per-layer inputs")
    if _get(cfg, "hidden_size") != 7:
        raise ValueError("not a config requirement: a number other than 0")
    kinds = list(_get(cfg, "layer_types") or [])
    if any(kind != "full_attention" for kind in kinds):
        raise ValueError("full attention only")
    return int(_get(cfg, "max_position_embeddings"))


def build(llm_config):
    if llm_config.tie_word_embeddings:
        raise ValueError("tied embeddings unsupported")
'''


def test_what_the_code_refuses_through_a_helper_read_a_flag_or_a_list_is_read_as_required(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """unified_dspark_gemma4_12b reads its checkpoint through ``_get(cfg, "x", default)`` and refuses
    flags and lists (internvl: ``if llm_config.tie_word_embeddings: raise``): each is a requirement."""
    reads = tiny.package_reads(_package(tmp_path, "flags", {"draft.py": _FLAGS_CODE}))
    assert reads.required == {"attention_k_eq_v": True, "enable_moe_block": False, "hidden_size_per_layer_input": 0,
                              "layer_types": tiny.Each("full_attention"), "tie_word_embeddings": False}
    assert "max_position_embeddings" in reads.numbers and "hidden_size" not in reads.numbers


def test_fill_reads_sets_a_required_flag_and_every_entry_of_a_required_list(tmp_path) -> None:  # type: ignore[no-untyped-def]
    reads = tiny.package_reads(_package(tmp_path, "flags", {"draft.py": _FLAGS_CODE}))
    config = tiny.tiny_hf_config("gemma3")
    text = config.text_config
    text.attention_k_eq_v, text.enable_moe_block, text.hidden_size_per_layer_input = False, True, 256
    text.tie_word_embeddings = True
    assert len(set(text.layer_types)) == 2  # sliding + full
    done = tiny.fill_reads(config, reads)
    assert (text.attention_k_eq_v, text.enable_moe_block, text.hidden_size_per_layer_input) == (True, False, 0)
    assert text.layer_types == ["full_attention"] * text.num_hidden_layers and not text.tie_word_embeddings
    assert "text_config.layer_types=['full_attention', 'full_attention']" in done
    assert text.hidden_size == 64  # (only a zero is a number the code requires)


def test_a_field_read_with_a_default_the_code_then_raises_without_is_not_optional(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``max_pos = getattr(hf, "max_position_embeddings", None)`` then ``assert max_pos is not None``
    (or ``if max_pos is None: raise``): a default that is no value, so the field is filled."""
    code = ('def a(huggingface_config):\n    max_pos = getattr(huggingface_config, "max_position_embeddings", None)\n'
            '    assert max_pos is not None, "missing"\n    return max_pos\n\n'
            'def b(hf_config):\n    w = getattr(hf_config, "sliding_window", None)\n    if w is None:\n'
            '        raise ValueError("missing")\n\n'
            'def c(hf_config):\n    return getattr(hf_config, "num_experts", None)\n')
    reads = tiny.package_reads(_package(tmp_path, "needs", {"m.py": code}))
    assert reads.needed == {"max_position_embeddings", "sliding_window"}
    assert "num_experts" in reads.optional  # (None there means a dense model: optional still)
    assert not {"max_position_embeddings", "sliding_window"} & reads.optional
    config = tiny.tiny_hf_config("gemma3")
    assert not hasattr(config, "max_position_embeddings")  # composite: the text tower has it
    tiny.fill_reads(config, reads)
    assert config.max_position_embeddings == config.text_config.max_position_embeddings


def test_a_sub_configs_none_is_no_value_for_a_field_the_code_reads_as_a_number(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``int(_get(cfg, "num_global_key_value_heads"))`` on the top level of gemma4's composite config,
    whose text tower holds None: the top level takes the package's own default, not None."""
    code = ('from dataclasses import dataclass\n\n@dataclass\nclass C:\n    num_global_key_value_heads: int = 2\n\n'
            'def f(huggingface_config):\n    return int(getattr(huggingface_config, "num_global_key_value_heads"))\n'
            'def g(huggingface_config):\n    return huggingface_config.final_logit_softcapping\n')
    reads = tiny.package_reads(_package(tmp_path, "numbers", {"m.py": code}))
    config = tiny.tiny_hf_config("gemma4")
    assert config.text_config.num_global_key_value_heads is None
    config.text_config.final_logit_softcapping = None
    tiny.fill_reads(config, reads)
    assert config.num_global_key_value_heads == 2
    assert config.final_logit_softcapping is None  # (not read as a number: the tower's None is its value)


@pytest.mark.needs_max
def test_the_speculative_token_count_is_what_the_architecture_says_its_checkpoint_drafts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A DSpark draft drafts at every slot of its trained block (``block_size`` 3, not 2 + 1): the
    architecture says so through ``checkpoint_draft_width``, asked as ``PipelineConfig.from_args``
    asks it (no count set); a fused package registers it on its draft's entry of the same model."""
    import sys
    import types
    from typing import Any

    from migrate_v3.verify import archbuild

    model_dir, weights = tiny.checkpoint_dir(tiny.tiny_hf_config("llama", ["LlamaForCausalLM"]), tmp_path)
    asked: list[Any] = []

    def width(speculative: Any, target: Any, draft: Any) -> int:
        asked.append((speculative.num_speculative_tokens, target.vocab_size, draft.vocab_size))
        return 3

    assert tiny.pipeline_config(model_dir, weights, "float32", speculative="dspark").speculative.draft_width == 2
    made = tiny.pipeline_config(model_dir, weights, "float32", speculative="dspark", draft_width=width)
    assert made.speculative.draft_width == 3 and asked == [(2, 256, 256)]

    def refuses(speculative: Any, target: Any, draft: Any) -> int:
        raise ValueError("--num-speculative-tokens=2 is not supported")  # (deepseekV4 on its tiny checkpoint)

    kept = tiny.pipeline_config(model_dir, weights, "float32", speculative="dspark", draft_width=refuses)
    assert kept.speculative.draft_width == tiny.SPECULATIVE_TOKENS

    from max.pipelines.lib import SupportedArchitecture

    model_module = types.ModuleType("fake_fused_pkg.model")
    model = type("FusedModel", (), {"__module__": model_module.__name__})
    arch = types.ModuleType("fake_fused_pkg.arch")

    def entry(name: str, drafts: Any = None) -> Any:
        made = SupportedArchitecture.__new__(SupportedArchitecture)
        object.__setattr__(made, "__dict__", {"name": name, "pipeline_model": model, "checkpoint_draft_width": drafts})
        return made

    target, draft = entry("Target"), entry("Draft", width)
    arch.target, arch.draft = target, draft  # type: ignore[attr-defined]
    sys.modules[arch.__name__] = arch
    try:
        assert archbuild.draft_width(target) is width and archbuild.draft_width(draft) is width
        assert archbuild.draft_width(entry("Alone")) is width  # (the same model: its package's draft entry)
        other = entry("Other")
        other.__dict__["pipeline_model"] = type("OtherModel", (), {"__module__": "elsewhere.model"})
        assert archbuild.draft_width(other) is None
    finally:
        del sys.modules[arch.__name__]


def test_a_draft_no_arch_registers_takes_the_model_types_of_the_packages_that_import_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """dflash_kimi_k25 imports no sibling and registers nothing: it is configured as the fused
    package that builds it is (unified_dflash_kimi_k25, through its own siblings)."""
    _package(tmp_path, "llama3", {"arch.py": 'a = SupportedArchitecture(name="LlamaForCausalLM")\n', "model.py": ""})
    draft = _package(tmp_path, "dflash_x", {"dflash_x.py": "from max.nn import Linear\n"})
    _package(tmp_path, "unified_dflash_x", {
        "arch.py": 'c = SupportedArchitecture(name="UnifiedDflashX")\n',
        "model.py": "from ..dflash_x.dflash_x import D\nfrom ..llama3 import Z\n"})
    _package(tmp_path, "other", {"model.py": "from ..llama3 import Z\n"})  # (imports no draft)
    assert tiny.sibling_model_types(draft) == []
    assert tiny.importer_model_types(draft) == ["llama"]


@dataclasses.dataclass
class _Draft:
    """A draft's config (dflash_mimo_v2's kind): fields no transformers config has."""

    hidden_size: int
    target_layer_ids: list[int]
    mask_token_id: int
    sliding_window: int
    local_window: int | None
    attention_value_scale: float
    kv_params: KVCacheParams


def test_a_drafts_required_fields_no_transformers_config_has_get_tiny_values_by_name_and_type() -> None:
    """Layer ids every target layer, a token id the last of the vocabulary, a window as long as
    the tiny context, an optional field None, a float scale 1.0, and the base ``KVCacheParams`` a multi-head one (the base stages no
    cache inputs). Any other required field still names itself (the test above)."""
    from max.nn.kv_cache import MHAKVCacheParams

    filled = tiny.fill_config(_Draft, tiny.tiny_hf_config("llama"))
    assert filled.target_layer_ids == list(range(tiny.LAYERS)) and filled.mask_token_id == 255
    assert filled.sliding_window == 128 and filled.local_window is None and filled.attention_value_scale == 1.0
    assert isinstance(filled.kv_params, MHAKVCacheParams) and filled.kv_params.n_kv_heads == 2
