"""Tiny configurations, derived from ``transformers``, for building a model on CPU.

A real architecture is configured from its Hugging Face ``config.json``; to
build one in seconds on a CPU, both the model ladder (``bench/ladder.py``)
and ``verify`` take the ``transformers`` config class of the architecture's
model type, shrink it by field name (at most 2 layers, narrow widths, a small
vocabulary, few experts), and feed that to the architecture's own config
class. Nothing here is specific to one architecture: the field names are the
ones ``transformers`` uses across its config classes.

Three ways in:

* :func:`model_types` — the ``transformers`` model type of a Hugging Face
  architecture name (``LlamaForCausalLM`` -> ``llama``), of a package name or
  of a config class name;
* :func:`tiny_hf_config` — the shrunk ``PretrainedConfig`` of a model type;
* :func:`fill_config` — an instance of any config class with defaults
  (dataclass or pydantic model) whose fields take the tiny values of the same
  name; :func:`checkpoint_dir` / :func:`pipeline_config` — a directory with
  the tiny ``config.json`` and an empty checkpoint, and the ``PipelineConfig``
  a MAX pipeline model is built from.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

#: Layer counts: every per-model depth becomes at most this.
LAYERS = 2
#: Field name -> tiny value. Widths keep ``hidden = heads * head_dim`` (64 = 4 * 16).
SMALL: dict[str, int] = {
    # depth
    "num_hidden_layers": LAYERS, "num_layers": LAYERS, "n_layers": LAYERS, "n_layer": LAYERS,
    "num_decoder_layers": LAYERS, "num_encoder_layers": LAYERS, "encoder_layers": LAYERS,
    "decoder_layers": LAYERS, "depth": LAYERS, "first_k_dense_replace": 1,
    # widths
    "hidden_size": 64, "d_model": 64, "n_embd": 64, "embed_dim": 64, "dim": 64,
    "intermediate_size": 128, "d_ff": 128, "ffn_dim": 128, "intermediate_size_mlp": 128,
    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
    "moe_shared_expert_intermediate_size": 32,
    "head_dim": 16, "d_kv": 16, "num_attention_heads": 4, "num_heads": 4, "n_head": 4,
    "num_key_value_heads": 2, "num_kv_heads": 2,
    "out_hidden_size": 64, "projection_dim": 64, "projector_input_dim": 64,
    "projector_output_dim": 64, "vision_output_dim": 64,
    # vocabulary and positions
    "vocab_size": 256, "max_position_embeddings": 128, "original_max_position_embeddings": 128,
    # mixture of experts
    "n_routed_experts": 4, "num_experts": 4, "num_local_experts": 4, "num_experts_per_tok": 2,
    "n_shared_experts": 1, "n_group": 1, "topk_group": 1,
    # multi-head latent attention
    "q_lora_rank": 32, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
    "v_head_dim": 16, "qk_head_dim": 16, "index_head_dim": 16, "index_n_heads": 2,
    "index_topk": 16,
    # state-space and linear attention
    "ssm_state_size": 16, "mamba_num_heads": 4, "mamba_head_dim": 16, "n_groups": 1,
    "linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
}
#: Sub-config attributes (``text_config``, ``vision_config``, ...) are shrunk too.
_SUBCONFIG = re.compile(r".*_config$")
_TOKEN_ID = re.compile(r".*_(token_id|token_index|id)$")
#: The largest width or count a tiny config may keep (checked by :func:`too_big`).
LIMIT = 256


@functools.lru_cache(maxsize=1)
def _auto_names() -> dict[str, set[str]]:
    """Hugging Face class name -> model types, from ``transformers``' auto mappings."""
    out: dict[str, set[str]] = {}
    try:
        auto = importlib.import_module("transformers.models.auto.modeling_auto")
    except ImportError:
        return out
    for attr, mapping in vars(auto).items():
        if not attr.endswith("_MAPPING_NAMES") or not isinstance(mapping, Mapping):
            continue
        for model_type, names in mapping.items():
            for name in names if isinstance(names, (list, tuple)) else [names]:
                out.setdefault(str(name), set()).add(str(model_type))
    return out


def _registered() -> Mapping[str, Any]:
    """``transformers``' config registry, with MAX's own shims registered first."""
    try:
        importlib.import_module("max.pipelines.architectures.hf_config_shims")
    except ImportError:
        pass
    from transformers import CONFIG_MAPPING

    return CONFIG_MAPPING


def model_types(*names: str) -> list[str]:
    """Candidate model types for Hugging Face architecture, package or config class names.

    In order: the auto mappings (``LlamaForCausalLM`` -> ``llama``), a name that
    is itself a registered model type (``umt5``), a registered config class of
    the same name (``UMT5Config``). Empty when none is known.
    """
    registry = _registered()
    auto = _auto_names()
    found: list[str] = []
    for name in names:
        bare = name.removesuffix("_ModuleV3")
        for candidate in (
            *sorted(auto.get(bare, ())),
            bare if bare in registry else "",
            bare.lower() if bare.lower() in registry else "",
        ):
            if candidate and candidate not in found:
                found.append(candidate)
    if not found:  # last resort, slower: import every config class to match names
        by_class = {cls.__name__: mt for mt, cls in _items(registry)}
        found = [by_class[n] for n in names if n in by_class]
    return found


def _items(registry: Mapping[str, Any]) -> Iterable[tuple[str, Any]]:
    for key in list(registry.keys()):
        try:
            yield key, registry[key]
        except Exception:  # noqa: BLE001 - a config class that fails to import is skipped
            continue


def _pick_layers(values: list[Any] | str, n: int) -> list[Any] | str:
    """``n`` entries of a per-layer list, distinct kinds first (sliding + full attention)."""
    seq = list(values)
    picked: list[int] = []
    for i, v in enumerate(seq):
        if v not in [seq[j] for j in picked]:
            picked.append(i)
    for i in range(len(seq)):
        if len(picked) >= n:
            break
        if i not in picked:
            picked.append(i)
    kept = [seq[i] for i in sorted(picked[:n])]
    return "".join(kept) if isinstance(values, str) else kept


def _shrunk(values: dict[str, Any]) -> dict[str, Any]:
    """The overrides for one (sub-)config's ``to_dict()``."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, bool):
            continue
        if key in SMALL and isinstance(value, int) and value > SMALL[key]:
            out[key] = SMALL[key]
        elif _SUBCONFIG.match(key) and isinstance(value, dict):
            out[key] = {**value, **_shrunk(value)}
    layers = values.get("num_hidden_layers") or values.get("num_layers")
    if isinstance(layers, int) and layers > LAYERS:
        n = out.get("num_hidden_layers", out.get("num_layers", LAYERS))
        for key, value in values.items():
            if isinstance(value, (list, str)) and len(value) == layers and key not in out:
                out[key] = _pick_layers(value, n)
    vocab = out.get("vocab_size", values.get("vocab_size"))
    if isinstance(vocab, int):
        taken = 0
        for key, value in values.items():
            if _TOKEN_ID.match(key) and isinstance(value, int) and not isinstance(value, bool) and value >= vocab:
                taken += 1
                out[key] = vocab - taken
    return out


def tiny_hf_config(model_type: str, architectures: Iterable[str] = ()) -> Any:
    """The ``transformers`` config of ``model_type``, shrunk; ``architectures`` set if given.

    A declared sub-config (``vision_config``, ...) that defaults to ``None`` is
    given its own class's defaults, so multimodal models get every tower.
    """
    registry = _registered()
    cls = registry[model_type]
    defaults = cls().to_dict()
    for key, sub in (getattr(cls, "sub_configs", None) or {}).items():
        if defaults.get(key) is None and isinstance(sub, type) and hasattr(sub, "to_dict"):
            defaults[key] = sub().to_dict()  # every tower the model type declares, built
    overrides = _shrunk(defaults)
    config = cls(**{**defaults, **overrides})
    for key, value in _shrunk(config.to_dict()).items():  # what __post_init__ derived
        if not _SUBCONFIG.match(key):
            setattr(config, key, value)
    if architectures:
        config.architectures = list(architectures)
    return config


def too_big(config: Any) -> list[str]:
    """Fields of a tiny config that are still large (a width the rules missed)."""
    data = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    out = []
    for key, value in data.items():
        if key in SMALL and isinstance(value, int) and not isinstance(value, bool) and value > LIMIT:
            out.append(f"{key}={value}")
        elif isinstance(value, dict) and _SUBCONFIG.match(key):
            out += [f"{key}.{item}" for item in too_big(value)]
    return out


def checkpoint_dir(hf_config: Any, directory: Path) -> tuple[Path, Path]:
    """Write ``config.json`` and an empty ``model.safetensors``: a checkpoint with no weights."""
    directory.mkdir(parents=True, exist_ok=True)
    hf_config.save_pretrained(str(directory))
    weights = directory / "model.safetensors"
    header = json.dumps({"__metadata__": {"format": "pt"}}).encode()
    header += b" " * (-len(header) % 8)
    weights.write_bytes(len(header).to_bytes(8, "little") + header)
    return directory, weights


def pipeline_config(model_dir: Path, weights: Path, encoding: str, max_length: int = 64) -> Any:
    """The ``PipelineConfig`` a pipeline model takes, for a local tiny checkpoint on CPU.

    The model config is a real ``MAXModelConfig`` (it reads ``config.json``
    like any local model); the pipeline config around it is built with
    pydantic's ``model_construct`` (its defaults, no registry resolution,
    which would look the architecture up by name).
    """
    from max.pipelines.lib import MAXModelConfig, PipelineConfig
    from max.pipelines.lib.device_specs import DeviceSpec
    from max.pipelines.lib.model_manifest import ModelManifest

    model = MAXModelConfig(
        model_path=str(model_dir), weight_path=[weights], quantization_encoding=encoding,
        device_specs=[DeviceSpec.cpu()], max_length=max_length,
    )
    return PipelineConfig.model_construct(models=ModelManifest({"main": model}))


def _field_defaults(cls: type) -> dict[str, Any] | None:
    """Field name -> has a default, for a dataclass or pydantic model; None otherwise."""
    if dataclasses.is_dataclass(cls):
        return {
            f.name: f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            for f in dataclasses.fields(cls) if f.init
        }
    fields = getattr(cls, "model_fields", None)
    if isinstance(fields, Mapping):
        return {name: not info.is_required() for name, info in fields.items()}
    return None


def fill_config(cls: type, hf_config: Any, extra: Mapping[str, Any] | None = None) -> Any:
    """An instance of config class ``cls`` with the tiny values of the fields it shares.

    ``cls`` must be a dataclass or pydantic model; a required field that the
    tiny config does not have (nor ``extra``) raises ``TypeError`` naming it.
    """
    fields = _field_defaults(cls)
    if fields is None:
        raise TypeError(f"{cls.__name__} is neither a dataclass nor a pydantic model")
    source = hf_config.to_dict() if hasattr(hf_config, "to_dict") else dict(hf_config)
    values = {k: v for k, v in {**source, **(extra or {})}.items() if k in fields}
    if "dtype" in values and isinstance(values["dtype"], str):
        values.pop("dtype")  # a torch dtype name, not a max DType
    missing = [k for k, has_default in fields.items() if not has_default and k not in values]
    if missing:
        raise TypeError(f"{cls.__name__}: no tiny value for required field(s) {', '.join(missing)}")
    return cls(**values)


def arch_config(cls: type, hf_config: Any, max_length: int = 64, encoding: str | None = None) -> Any:
    """A MAX arch config (``ArchConfig.initialize``) for a tiny checkpoint of ``hf_config`` on CPU.

    What the pipeline model's ``initialize`` step gives (its ``finalize``, which
    needs the checkpoint and arch-specific arguments, is not run: the fields it
    sets keep their defaults). ``encoding`` (a dtype name), else float32 when
    the class supports it.
    """
    import tempfile

    supported = set(getattr(cls, "SUPPORTED_ENCODINGS", ()) or ())
    encoding = encoding or next((e for e in ("float32", "bfloat16") if e in supported),
                                str(getattr(cls, "DEFAULT_ENCODING", "float32")))
    with tempfile.TemporaryDirectory() as tmp:
        model_dir, weights = checkpoint_dir(hf_config, Path(tmp))
        config = cls.initialize(pipeline_config(model_dir, weights, encoding, max_length),  # type: ignore[attr-defined]
                                max_seq_len=max_length)
    return config
