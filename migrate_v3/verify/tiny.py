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

import copy
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
    "vocab_size_per_layer_input": 256,  # per-layer embeddings (Gemma 3n/4): one row per token id
    "draft_vocab_size": 256,  # a speculative draft's (pruned) vocabulary: the whole tiny one
    # mixture of experts
    "n_routed_experts": 4, "num_experts": 4, "num_local_experts": 4, "num_experts_per_tok": 2,
    "n_shared_experts": 1, "n_group": 1, "topk_group": 1,
    # multi-head latent attention
    "q_lora_rank": 32, "o_lora_rank": 32, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
    "v_head_dim": 16, "qk_head_dim": 16, "index_head_dim": 16, "index_n_heads": 2,
    "index_topk": 16,
    # state-space and linear attention
    "ssm_state_size": 16, "mamba_num_heads": 4, "mamba_head_dim": 16, "n_groups": 1,
    "linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
}
#: Per model type, widths its kernels insist on that :data:`SMALL` breaks (set last, over the
#: small ones): deepseek_v4's KV cache quantizes each head's non-rotary part
#: (``head_dim - qk_rope_head_dim``) in blocks of 64 (``KV_QUANT_BLOCK``), so 16 - 8 stops its trace.
MODEL_WIDTHS: dict[str, dict[str, int]] = {
    "deepseek_v4": {"head_dim": 72},
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


def _shrunk(values: dict[str, Any], tower: bool = False) -> dict[str, Any]:
    """The overrides for one (sub-)config's ``to_dict()``.

    A ``tower`` (a ``*_config`` sub-config: vision, audio) with as many key/value heads as
    query heads keeps that (its attention kernels may need it); a top-level config is given
    grouped-query attention (:data:`SMALL`), so the grouping is exercised.
    """
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, bool):
            continue
        if key in SMALL and isinstance(value, int) and value > SMALL[key]:
            out[key] = SMALL[key]
        elif _SUBCONFIG.match(key) and isinstance(value, dict):
            out[key] = {**value, **_shrunk(value, tower=True)}
    for heads, kv in (("num_attention_heads", "num_key_value_heads"), ("num_heads", "num_kv_heads")):
        if tower and isinstance(values.get(heads), int) and values.get(kv) == values[heads]:
            out[kv] = out.get(heads, values[heads])
    layers = values.get("num_hidden_layers") or values.get("num_layers")
    if isinstance(layers, int) and layers > LAYERS:
        n = out.get("num_hidden_layers", out.get("num_layers", LAYERS))
        for key, value in values.items():
            if isinstance(value, (list, str)) and len(value) == layers and key not in out:
                out[key] = _pick_layers(value, n)
    _merged_patches(values, out)
    vocab = out.get("vocab_size", values.get("vocab_size"))
    if isinstance(vocab, int):
        taken = 0
        for key, value in values.items():
            if _TOKEN_ID.match(key) and isinstance(value, int) and not isinstance(value, bool) and value >= vocab:
                taken += 1
                out[key] = vocab - taken
    return out


def _merged_patches(values: dict[str, Any], out: dict[str, Any]) -> None:
    """A model that merges ``scale_factor`` x ``scale_factor`` patches (a pixel shuffle, idefics3)
    needs the patches per side of its towers' images a multiple of it: ``transformers``' own
    defaults (224 / 32 = 7 per side, factor 2) are not, and the reshape fails. Each tower's
    ``image_size`` in ``out`` is rounded up to the next such size."""
    factor = values.get("scale_factor")
    if not isinstance(factor, int) or isinstance(factor, bool) or factor < 2:
        return
    for sub in out.values():
        image, patch = (sub.get("image_size"), sub.get("patch_size")) if isinstance(sub, dict) else (None, None)
        if isinstance(image, int) and isinstance(patch, int) and patch > 0 and (image // patch) % factor:
            sub["image_size"] = patch * factor * -(-(image // patch) // factor)


def tiny_hf_config(model_type: str, architectures: Iterable[str] = ()) -> Any:
    """The ``transformers`` config of ``model_type``, shrunk; ``architectures`` set if given.

    A declared sub-config (``vision_config``, ...) that defaults to ``None`` is
    given its own class's defaults, so multimodal models get every tower
    (unless the model type's own validation refuses those defaults: then it
    keeps its own).
    """
    registry = _registered()
    cls = registry[model_type]
    plain = cls().to_dict()
    defaults = dict(plain)
    for key, sub in (getattr(cls, "sub_configs", None) or {}).items():
        if defaults.get(key) is None and isinstance(sub, type) and hasattr(sub, "to_dict"):
            defaults[key] = sub().to_dict()  # every tower the model type declares, built
    values = {**defaults, **_shrunk(defaults)}
    try:
        config = cls(**values)
    except Exception:  # noqa: BLE001 - a strict config refusing a tower's class defaults
        if defaults == plain:
            raise
        try:  # the values its own validation code insists on, then as it is
            config = cls(**_accepted(values, validator_requirements(cls)))
        except Exception:  # noqa: BLE001
            config = cls(**{**plain, **_shrunk(plain)})
    for key, value in _shrunk(config.to_dict()).items():  # what __post_init__ derived
        if not _SUBCONFIG.match(key):
            setattr(config, key, value)
    if architectures:
        config.architectures = list(architectures)
    return config


def validator_requirements(cls: type) -> list[tuple[str, tuple[str, Any]]]:
    """What a config class's own code raises unless it holds: ``(field, ("value", v))`` for
    ``if x.field != v: raise`` (``is not v`` too), ``(field, ("field", other))`` for
    ``if x.field != x.other: raise``; read from the source of ``cls`` and its bases (not
    ``PretrainedConfig``'s, which every config shares)."""
    import ast
    import inspect

    from transformers import PretrainedConfig

    out: list[tuple[str, tuple[str, Any]]] = []
    for klass in getattr(cls, "__mro__", (cls,)):
        if klass in PretrainedConfig.__mro__:
            continue
        try:
            tree = ast.parse(inspect.getsource(klass).lstrip())
        except (OSError, TypeError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.If) and any(isinstance(n, ast.Raise) for n in node.body)):
                continue
            terms = node.test.values if isinstance(node.test, ast.BoolOp) else [node.test]
            for term in terms:
                if not (isinstance(term, ast.Compare) and len(term.ops) == 1
                        and isinstance(term.ops[0], (ast.NotEq, ast.IsNot)) and isinstance(term.left, ast.Attribute)):
                    continue
                right = term.comparators[0]
                if isinstance(right, ast.Constant):
                    out.append((term.left.attr, ("value", right.value)))
                elif isinstance(right, ast.Attribute) and ast.unparse(right.value) == ast.unparse(term.left.value):
                    out.append((term.left.attr, ("field", right.attr)))
    return list(dict.fromkeys(out))


def _accepted(values: dict[str, Any], requirements: list[tuple[str, tuple[str, Any]]]) -> dict[str, Any]:
    """``values`` (a config's keyword arguments, sub-configs as dicts) with each field
    :func:`validator_requirements` names set as required, in every (sub-)config that has it."""
    out = copy.deepcopy(values)
    for table in [out, *(v for k, v in out.items() if _SUBCONFIG.match(k) and isinstance(v, dict))]:
        for name, (kind, want) in requirements:
            if name not in table:
                continue
            if kind == "value":
                table[name] = want
            elif want in table:
                table[name] = table[want]
    return out


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


def restore_sub_configs(loaded: Any, written: Any) -> list[str]:
    """Give ``loaded`` (a config read back from ``config.json``) the ``*_config`` sub-config
    objects of ``written`` (the config the file was written from) that came back as plain
    dicts: a sub-config its class does not declare (:func:`fill_missing` takes one from a
    sibling model type) is read back as a dict. The names restored."""
    done = []
    for key, value in vars(written).items() if written is not None else ():
        if _SUBCONFIG.match(key) and hasattr(value, "to_dict") and isinstance(getattr(loaded, key, None), dict):
            setattr(loaded, key, copy.deepcopy(value))
            done.append(key)
    return done


def widen(config: Any, widths: Mapping[str, int]) -> list[str]:
    """Set each of ``widths`` that ``config`` or one of its sub-configs has (``text_config``);
    the ``path=value``s set. A width of 0 stays 0: a part the model has none of (a NoPE model's
    ``qk_rope_head_dim``, which its code may refuse unless zero, :attr:`ConfigReads.required`),
    and already a whole number (none) of blocks."""
    done: list[str] = []
    for where, cfg in [("", config), *((f"{k}.", v) for k, v in _sub_configs(config).items())]:
        for name, value in widths.items():
            current = getattr(cfg, name, None) if cfg is not None else None
            if isinstance(current, int) and not isinstance(current, bool) and current != 0 and current != value:
                setattr(cfg, name, value)
                done.append(f"{where}{name}={value}")
    return done


def restore_numbers(loaded: Any, written: Any) -> list[str]:
    """Give ``loaded`` (a config read back from ``config.json``) and its sub-configs each number
    of ``written`` that came back as a list or tuple of that number (``patch_size=14`` read back as
    ``(14, 14)``): a config class whose ``__post_init__`` widens a number to a pair undoes
    :func:`fill_reads` making it the one number the package's own config declares. The
    ``path``s restored."""
    done: list[str] = []
    pairs = [("", loaded, written)]
    pairs += [(k, getattr(loaded, k, None), v) for k, v in _sub_configs(written).items()] if written is not None else []
    for where, back, given in pairs:
        if back is None or given is None or not hasattr(back, "__dict__"):
            continue
        for name, value in vars(given).items():
            now = vars(back).get(name)
            if (isinstance(value, (int, float)) and not isinstance(value, bool) and isinstance(now, (list, tuple))
                    and now and all(v == value and not isinstance(v, bool) for v in now)):
                setattr(back, name, value)
                done.append(f"{where + '.' if where else ''}{name}")
    return done


#: How many tokens a speculative draft proposes per step, unless the architecture says otherwise.
SPECULATIVE_TOKENS = 2


def pipeline_config(model_dir: Path, weights: Path, encoding: str, max_length: int = 64,
                    accelerator: bool = False, speculative: str | None = None, hf_config: Any = None,
                    settings: Mapping[str, Any] | None = None, draft_width: Any = None) -> Any:
    """The ``PipelineConfig`` a pipeline model takes, for a local tiny checkpoint on CPU.

    ``accelerator``: the model's device spec says GPU 0 (the devices the
    pipeline is handed stay CPU): for load paths that refuse a CPU spec
    before building anything, so the graph is built with GPU device refs.
    ``speculative``: a speculative method (``eagle``, ``dflash``, ...); the
    draft model is the same tiny checkpoint (what a fused target + draft
    architecture is configured from). ``hf_config``: the config ``config.json``
    was written from (:func:`restore_sub_configs`). ``settings``: ``section.field``
    -> value set on the pipeline config's sections (:func:`asked_setting`). ``draft_width``: the
    architecture's ``checkpoint_draft_width`` (a checkpoint that fixes how many tokens its draft
    proposes: a DSpark block): the speculative token count is what it says of the tiny checkpoint,
    asked as ``PipelineConfig.from_args`` asks it, with :data:`SPECULATIVE_TOKENS` as the user's
    count; that count when it gives none or refuses it.

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
        device_specs=[DeviceSpec.accelerator() if accelerator else DeviceSpec.cpu()], max_length=max_length,
    )
    restore_sub_configs(model.huggingface_config, hf_config)
    restore_numbers(model.huggingface_config, hf_config)
    given = _settings(PipelineConfig, settings)
    if speculative is None:
        return PipelineConfig.model_construct(models=ModelManifest({"main": model}), **given)
    from max.pipelines.speculative.config import SpeculativeConfig

    draft = model.model_copy(deep=True)
    asked = SpeculativeConfig(speculative_method=speculative, num_speculative_tokens=SPECULATIVE_TOKENS)
    try:
        width = draft_width(asked, model.huggingface_config, draft.huggingface_config) if callable(draft_width) else None
    except Exception:  # noqa: BLE001 - a width it refuses: the count it is asked with (its load path says why)
        width = None
    return PipelineConfig.model_construct(
        models=ModelManifest({"main": model, "draft": draft}),
        speculative=SpeculativeConfig(speculative_method=speculative,
                                      num_speculative_tokens=width or SPECULATIVE_TOKENS), **given,
    )


def _settings(cls: Any, settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """``model_construct`` arguments of pydantic model ``cls`` with ``section.field`` values set:
    each named section its default with those fields changed (nothing validated, as
    ``model_construct`` validates nothing)."""
    out: dict[str, Any] = {}
    for path, value in (settings or {}).items():
        section, _, name = path.rpartition(".")
        if not section:
            out[name] = value
            continue
        current = out.get(section) or cls.model_fields[section].get_default(call_default_factory=True)
        out[section] = current.model_copy(update={name: value})
    return out


#: A command-line flag an error names (``--enable-structured-output``); ``--no-x`` turns something off.
_FLAG = re.compile(r"(?<![\w-])--(?!no-)(?P<flag>[a-z][a-z0-9]*(?:-[a-z0-9]+)*)\b")


def asked_setting(error: str, config: Any) -> str | None:
    """The ``section.field`` of a pipeline config (``sampling.enable_structured_output``) that a
    load path's error names as a command-line flag (``--enable-structured-output``), when that
    field is a bool that is off in ``config``: what the load path asks to be turned on."""
    sections = [("", config)] + [(name, getattr(config, name, None)) for name in type(config).model_fields]
    for found in _FLAG.finditer(error):
        name = found.group("flag").replace("-", "_")
        for where, section in sections:
            fields = getattr(type(section), "model_fields", None)
            if isinstance(fields, Mapping) and name in fields and getattr(section, name, None) is False:
                return f"{where}.{name}" if where else name
    return None


def speculative_method(package_dir: Path) -> str | None:
    """The speculative method a package is built for, when its own code reads the draft model
    or the speculative config: the method named in the package's name (``unified_dflash_llama3``
    -> ``dflash``), else the first MAX knows."""
    import ast
    import typing

    reads = False
    for path in sorted(package_dir.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        if any(isinstance(n, ast.Attribute) and n.attr in ("draft_model", "speculative") for n in ast.walk(tree)):
            reads = True
            break
    if not reads:
        return None
    try:
        from max.pipelines.speculative.config import SpeculativeMethod
    except ImportError:
        return None
    methods = sorted(typing.get_args(SpeculativeMethod), key=len, reverse=True)  # dflash2 before dflash
    words = package_dir.name.lower()
    return next((m for m in methods if m in words), typing.get_args(SpeculativeMethod)[0] if methods else None)


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
    source = {**_aliases(hf_config, [k for k in fields if k not in source]), **source}
    values = {k: v for k, v in {**source, **(extra or {})}.items() if k in fields}
    if "dtype" in values and isinstance(values["dtype"], str):
        values.pop("dtype")  # a torch dtype name, not a max DType
    for name in [k for k, has_default in fields.items() if not has_default and k not in values]:
        found, value = _typed_value(cls, name, hf_config, values)
        if found:
            values[name] = value
    missing = [k for k, has_default in fields.items() if not has_default and k not in values]
    if missing:
        raise TypeError(f"{cls.__name__}: no tiny value for required field(s) {', '.join(missing)}")
    return cls(**values)


def _aliases(hf_config: Any, names: Iterable[str]) -> dict[str, Any]:
    """The values of ``names`` that ``hf_config`` gives under another name, which ``to_dict()``
    leaves out: a property of its class (``transformers`` 5's ``rope_scaling`` is its
    ``rope_parameters``) or an ``attribute_map`` entry (``num_local_experts``); None values left out.
    What a pipeline model reading ``huggingface_config.rope_scaling`` gets."""
    cls = type(hf_config)
    mapped = getattr(cls, "attribute_map", None)
    out: dict[str, Any] = {}
    for name in names:
        if not (isinstance(getattr(cls, name, None), property) or (isinstance(mapped, Mapping) and name in mapped)):
            continue
        try:
            value = getattr(hf_config, name)
        except Exception:  # noqa: BLE001 - a property that fails gives nothing
            continue
        if value is not None:
            out[name] = copy.deepcopy(value)
    return out


#: required ``int`` fields of a config that a tiny checkpoint does not have, by how their name
#: ends: a parallelism degree of one (one device), a width multiplier of two (the least that
#: multiplies: eagle's ``fc_input_multiplier`` asserts at least 2)
_COUNTS = {"_degree": 1, "_multiplier": 2}


def _typed_value(cls: type, name: str, hf_config: Any, values: Mapping[str, Any]) -> tuple[bool, Any]:
    """A value for required field ``name`` of config class ``cls`` that the tiny ``transformers``
    config lacks, from its annotation: a ``DType`` (float32, or the ``dtype`` given), the CPU as its
    devices, a ``KVCacheParams`` of the tiny config's heads and layers on the CPU (multi-head
    attention's for the base class), ``max_seq_len``,
    a degree or a multiplier (:data:`_COUNTS`), a value :func:`derived` gives (a draft's
    ``target_layer_ids``), a tiny width (:data:`SMALL`), None for an optional field, 1.0 for a
    float factor or scale; (False, None) for any other (it names itself)."""
    import typing

    from max.dtype import DType
    from max.graph import DeviceRef
    from max.nn.kv_cache import KVCacheParams, MHAKVCacheParams

    try:
        ann = typing.get_type_hints(cls).get(name)
    except Exception:  # noqa: BLE001 - an annotation naming what the module imports only to type-check
        return False, None
    dtype = values.get("dtype") if isinstance(values.get("dtype"), DType) else DType.float32
    if ann is DType:
        return True, dtype
    if name == "devices" or ann == list[DeviceRef]:
        return True, [DeviceRef.CPU()]
    if isinstance(ann, type) and issubclass(ann, KVCacheParams):
        heads = getattr(hf_config, "num_attention_heads", None)
        head_dim = getattr(hf_config, "head_dim", None) or (hf_config.hidden_size // heads if heads else None)
        layers = _depth(hf_config)
        if not isinstance(head_dim, int):
            return False, None
        if ann in (KVCacheParams, MHAKVCacheParams):  # (the base stages no cache inputs: a draft's MHA one)
            kv_heads = getattr(hf_config, "num_key_value_heads", None) or heads
            return True, MHAKVCacheParams(dtype=dtype, head_dim=head_dim, num_layers=layers,
                                          devices=[DeviceRef.CPU()], n_kv_heads=kv_heads)
        return True, KVCacheParams(dtype=dtype, head_dim=head_dim, num_layers=layers, devices=[DeviceRef.CPU()])
    if ann is int and name == "max_seq_len":
        return True, 128
    count = next((n for end, n in _COUNTS.items() if name.endswith(end)), None) if ann is int else None
    if count is not None:
        return True, count
    found, value = derived(name, hf_config)  # (a draft's target_layer_ids, mask_token_id)
    if found:
        return True, value
    if name in SMALL:
        return True, SMALL[name]
    args = typing.get_args(ann)
    if type(None) in args:  # (an optional window, a default-less ``int | None``: none)
        return True, None
    if ann is float and name.endswith(("_factor", "_scale")):  # (the one that changes nothing)
        return True, 1.0
    return False, None


def arch_config(cls: type, hf_config: Any, max_length: int = 64, encoding: str | None = None) -> Any:
    """A MAX arch config (``ArchConfig.initialize``) for a tiny checkpoint of ``hf_config`` on CPU.

    What the pipeline model's ``initialize`` step gives (its ``finalize``, which
    needs the checkpoint and arch-specific arguments, is not run: the fields it
    sets keep their defaults, except a field ``initialize`` left None that
    ``finalize`` reads from the Hugging Face config under the same name,
    ``rms_norm_eps``: it gets that value). ``encoding`` (a dtype name), else float32
    when the class supports it.
    """
    import tempfile

    supported = set(getattr(cls, "SUPPORTED_ENCODINGS", ()) or ())
    encoding = encoding or next((e for e in ("float32", "bfloat16") if e in supported),
                                str(getattr(cls, "DEFAULT_ENCODING", "float32")))
    with tempfile.TemporaryDirectory() as tmp:
        model_dir, weights = checkpoint_dir(hf_config, Path(tmp))
        config = cls.initialize(pipeline_config(model_dir, weights, encoding, max_length),  # type: ignore[attr-defined]
                                max_seq_len=max_length)
    read = _finalize_reads(type(config))
    for name, has_default in (_field_defaults(type(config)) or {}).items():
        value = getattr(hf_config, name, None)
        if name in read and has_default and getattr(config, name, 0) is None and isinstance(value, (int, float, str)):
            setattr(config, name, value)
    return config


def _finalize_reads(cls: type) -> set[str]:
    """The Hugging Face config fields ``cls.finalize`` reads (``huggingface_config.rms_norm_eps``)."""
    import ast

    from migrate_v3.verify.pysource import parsed

    finalize = getattr(cls, "finalize", None)
    tree = parsed(finalize) if finalize is not None else None
    if tree is None:
        return set()
    return {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            and _HF_RECEIVER.fullmatch(n.value.id)}


#: Receivers whose attribute reads are Hugging Face config reads (``huggingface_config.X``,
#: ``hf_config.X``, ``text_config.X``, ``hf_vision_config.X``, ...), not MAX's own configs.
_HF_RECEIVER = re.compile(r"(hf|huggingface)\w*|\w*(text|vision|audio|llm|language|encoder|decoder)_config",
                          re.IGNORECASE)
#: Per-name values of Hugging Face fields that are not plain widths, shaped by :data:`SMALL`
#: (``mrope_section`` splits ``head_dim // 2`` = 8 rotary pairs over time, height, width).
SHAPED: dict[str, Any] = {
    "mrope_section": [2, 3, 3], "n_heads": SMALL["num_attention_heads"], "rope_theta": 10000.0,
    # rope parameters a non-default rope type reads (``rope_scaling["factor"]``, ...): identity scaling
    "factor": 1.0, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
    "original_max_position_embeddings": SMALL["original_max_position_embeddings"],
    # a speculative draft's block: the 2 speculative tokens of tiny.pipeline_config, plus one
    "block_size": 3,
    # a draft's attention window: as long as the tiny context (every key visible)
    "sliding_window": SMALL["max_position_embeddings"],
    # the label a loss skips: PyTorch's cross-entropy default, the value multimodal HF configs give it
    "ignore_index": -100,
    # a block-local short convolution (a draft's): 2 taps, within the block of 3 above; its channels
    # share coefficients in groups that divide the tiny widths (64 hidden, 16 per head)
    "conv_kernel_size": 2, "conv_group_size": 16,
    # a low-rank candidate scorer: a rank as narrow as a head, the top 2 candidates (as experts per token)
    "selector_rank": SMALL["head_dim"], "selector_top_k": SMALL["num_experts_per_tok"],
}


#: Widths of an FP8 block-scaled checkpoint, set over the small ones where a config has them: each
#: quantized matmul's contracted width (``hidden_size``, the LoRA ranks, ``heads * v_head_dim`` of
#: ``o_proj``, the MLPs' inner widths) a whole number of 128-wide blocks, or its scales have no block
#: (``a_scales`` of shape ``[0, ...]``: glm5_1's trace stopped so).
FP8_WIDTHS: dict[str, int] = {
    "hidden_size": 128, "intermediate_size": 256, "moe_intermediate_size": 128,
    "q_lora_rank": 128, "kv_lora_rank": 128, "o_lora_rank": 128, "v_head_dim": 32,
    # (a sparse-attention indexer quantizes its heads' keys in blocks of 128 too, and its rotary
    # part is half of them: deepseekV3_2's indexer refuses any other)
    "index_head_dim": 128, "qk_rope_head_dim": 64,
}
#: The quantization config of an FP8 block-scaled checkpoint (DeepSeek-V3's format), for
#: architectures that build only quantized: the one block size MAX's FP8 parser accepts; as
#: DeepSeek-V3's ``config.json`` has it, with its float8 format (``fmt``), which some parsers check.
FP8_BLOCK_SCALED: dict[str, Any] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                    "weight_block_size": [128, 128]}


def fp8_scale_names(renamed: bool = True, layers: int = LAYERS) -> list[str]:
    """The weight scales an FP8 block-scaled checkpoint has for each layer's MLP (its
    ``down_proj``), read before any module is built: which layers are quantized is found from them
    (glm5_next's parser refuses a checkpoint declaring FP8 with none). ``renamed``: as MAX's layers
    name them (``weight_scale``: the names a load path sees without its weight adapter, which
    renames them), else as DeepSeek-V3's checkpoint does (``weight_scale_inv``)."""
    suffix = "weight_scale" if renamed else "weight_scale_inv"
    return [f"layers.{i}.mlp.down_proj.{suffix}" for i in range(layers)]


@dataclasses.dataclass
class ConfigReads:
    """What an architecture's code reads from its Hugging Face config, found statically.

    ``attrs``: receiver kind ("" for the top-level config, else the sub-config
    word: ``text``, ``vision``, ...) -> attribute names read on it (``hf.X``,
    ``getattr(hf, "X")`` without a default, ``helper(hf, "X")``); ``keys``:
    attribute -> the string keys subscripted on it (``rope_scaling["mrope_section"]``);
    ``defaults``: field name -> the default of a same-named field of the
    package's own dataclass configs (what the architecture assumes when absent).
    """

    attrs: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    keys: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    defaults: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: field name -> the one value the code accepts (``if rope_type != "yarn": raise``; an integer:
    #: ``if self.qk_rope_head_dim != 0: raise``; a flag: ``if bool(getattr(cfg, "moe", False)): raise``;
    #: a list every entry of which must be one value: :class:`Each`)
    required: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: fields the code also reads with its own default or only asks about (``getattr(hf, "X", 0)``,
    #: ``hasattr``): optional, never added (a dense model stays dense)
    optional: set[str] = dataclasses.field(default_factory=set)
    #: field name -> an empty value of its declared container type, for a field with no default
    #: (``deepstack_visual_indexes: list[int]`` -> ``[]``)
    empty: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: fields the package's own configs declare as one number (``patch_size: int``): a
    #: ``transformers`` config that gives a list of equal entries (``[14, 14]``) is read as that number
    scalars: set[str] = dataclasses.field(default_factory=set)
    #: the layer kinds the package names (module constants ``SPARSE = "sparse_attention"``)
    layer_kinds: set[str] = dataclasses.field(default_factory=set)
    #: parameter name -> the literal default a function of the package gives a parameter of that
    #: name (``def __init__(self, init_pos_emb_height: int = 64)``): what a layer assumes when
    #: not told, used after :attr:`defaults`
    param_defaults: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: field name -> the literal default the code reads it with (``getattr(hf, "x", [2, 2])``):
    #: what it assumes of a checkpoint without the field, used before :attr:`defaults`
    read_defaults: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: fields the code raises without, though it reads them with a default (``x = getattr(hf, "x", None)``
    #: then ``if x is None: raise`` or ``assert x is not None``): not optional (:func:`package_reads`)
    needed: set[str] = dataclasses.field(default_factory=set)
    #: fields the code reads as a number with no default (``int(getattr(cfg, "x"))``, ``float(hf.x)``):
    #: None is no value of theirs
    numbers: set[str] = dataclasses.field(default_factory=set)


def _receiver(node: Any, aliases: Mapping[str, str] | None = None) -> str | None:
    """The sub-config word of a config-read receiver ("" for the top level), None if not one.

    ``aliases``: local names bound to a receiver in the same file (``config = huggingface_config``).
    """
    import ast

    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    if isinstance(node, ast.Name) and aliases and node.id in aliases:
        return aliases[node.id]
    if name is None or not _HF_RECEIVER.fullmatch(name):
        return None
    word = re.search(r"(text|vision|audio|llm|language|encoder|decoder)_config", name, re.IGNORECASE)
    return word.group(1).lower() if word else ""


def config_reads(sources: Iterable[Path]) -> ConfigReads:
    """Scan ``sources`` (``.py`` files) for the Hugging Face config fields they read."""
    import ast

    out = ConfigReads()
    defaulted: dict[str, str] = {}  # field read with a default of the code's own -> its receiver kind
    for path in sources:
        try:
            tree = ast.parse(Path(path).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and (kind := _receiver(node.value)) is not None):
                aliases[node.targets[0].id] = kind
        bound: dict[str, str] = {}  # local name -> the config field it holds (``types = list(hf.layer_types)``)
        ambiguous: set[str] = set()  # (a name bound to two fields in the file holds neither)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and (held := _field_read(node.value, aliases)) is not None):
                if bound.get(node.targets[0].id, held) != held:
                    ambiguous.add(node.targets[0].id)
                bound[node.targets[0].id] = held
        for name in ambiguous:
            bound.pop(name)
        for node in tree.body:  # module constants naming a layer kind
            named, constant = ((node.targets[0], node.value) if isinstance(node, ast.Assign) and len(node.targets) == 1
                               else (node.target, node.value) if isinstance(node, ast.AnnAssign) else (None, None))
            if (isinstance(named, ast.Name) and named.id.lstrip("_").isupper() and isinstance(constant, ast.Constant)
                    and isinstance(constant.value, str) and re.fullmatch(r"[a-z_]*_attention", constant.value)):
                out.layer_kinds.add(constant.value)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                kind = _receiver(node.value, aliases)
                if kind is not None and not node.attr.startswith("_"):
                    out.attrs.setdefault(kind, set()).add(node.attr)
            elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute):
                key = node.slice
                owner = node.value.value  # any config: MAX's own configs keep the HF dict as it is
                owner_name = getattr(owner, "id", getattr(owner, "attr", ""))
                if (str(owner_name).lower().endswith(("config", "cfg")) and isinstance(key, ast.Constant)
                        and isinstance(key.value, str)):
                    out.keys.setdefault(node.value.attr, set()).add(key.value)
            elif isinstance(node, ast.Call) and node.args:
                if (isinstance(node.func, ast.Name) and node.func.id in ("int", "float") and len(node.args) == 1
                        and (number := _numeric_read(node.args[0], aliases)) is not None):
                    out.numbers.add(number)
                kind = _receiver(node.args[0], aliases)
                second = node.args[1] if len(node.args) > 1 else None
                field_name = second.value if isinstance(second, ast.Constant) else None
                called = node.func.id if isinstance(node.func, ast.Name) else ""
                if kind is None or not isinstance(field_name, str) or not field_name.isidentifier():
                    continue
                if called == "hasattr" or (called == "getattr" and len(node.args) > 2):
                    out.optional.add(field_name)  # the code only asks, or has its own default
                    defaulted.setdefault(field_name, kind)
                    if called == "getattr":
                        found, value = _declared_default(node.args[2])
                        if found and value:  # (0, "", None: the code's "absent", not a value)
                            out.read_defaults.setdefault(field_name, value)
                    continue
                out.attrs.setdefault(kind, set()).add(field_name)
            elif isinstance(node, ast.If) and any(isinstance(n, ast.Raise) for n in node.body):
                for name, value in _refused(node.test, aliases, bound):
                    out.required.setdefault(name, value)
                if (absent := _refused_absent(node.test, aliases, bound)) is not None:
                    out.needed.add(absent)
            elif isinstance(node, ast.Assert) and (present := _asserted_present(node.test, aliases, bound)):
                out.needed.add(present)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                positional = [*args.posonlyargs, *args.args]
                pairs = [*zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True),
                         *((a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None)]
                for arg, default in pairs:
                    if isinstance(default, ast.Constant) and default.value is not None:
                        out.param_defaults.setdefault(arg.arg, default.value)
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and ast.unparse(node.annotation) in ("int", "float")):
                out.scalars.add(node.target.id)
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                found, value = _declared_default(node.value)
                if found:
                    out.defaults.setdefault(node.target.id, value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                kind_of = re.match(r"(list|Sequence|tuple|dict|Mapping)\b", ast.unparse(node.annotation))
                if kind_of:
                    empty: Any = {"list": [], "Sequence": [], "tuple": [], "dict": {}, "Mapping": {}}[kind_of.group(1)]
                    out.empty.setdefault(node.target.id, empty)
    for name in out.needed:  # read with a default that is no value: read as any field is
        out.attrs.setdefault(defaulted.get(name, ""), set()).add(name)
    return out


@dataclasses.dataclass(frozen=True)
class Each:
    """A required value of a list field: every entry this literal (``if any(t != "full_attention"
    for t in layer_types): raise``)."""

    entry: Any


def _field_read(node: Any, aliases: Mapping[str, str] | None) -> str | None:
    """The config field an expression reads as it is: ``hf.x``, ``helper(cfg, "x")`` (:func:`_call_read`),
    either through ``list``/``tuple`` or ``or <default>``; None for anything else."""
    import ast

    while True:
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            node = node.values[0]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple")
              and len(node.args) == 1 and not node.keywords):
            node = node.args[0]
        else:
            break
    if isinstance(node, ast.Attribute) and _receiver(node.value, aliases) is not None:
        return node.attr
    read = _call_read(node, aliases)
    return read[0] if read else None


def _refused_entries(term: Any, aliases: Mapping[str, str] | None,
                     bound: Mapping[str, str] | None) -> tuple[str, Each] | None:
    """``(field, Each(literal))`` of a raising ``any(v != "literal" for v in field)`` (or
    ``not all(v == "literal" ...)``), the field read directly or through a local bound to its read."""
    import ast

    negated = isinstance(term, ast.UnaryOp) and isinstance(term.op, ast.Not)
    call = term.operand if negated else term
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
            and call.func.id == ("all" if negated else "any") and len(call.args) == 1
            and isinstance(gen := call.args[0], ast.GeneratorExp) and len(gen.generators) == 1):
        return None
    loop = gen.generators[0]
    test = gen.elt
    if not (isinstance(loop.target, ast.Name) and not loop.ifs and isinstance(test, ast.Compare)
            and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq if negated else ast.NotEq)
            and isinstance(test.left, ast.Name) and test.left.id == loop.target.id
            and isinstance(literal := test.comparators[0], ast.Constant) and isinstance(literal.value, str)):
        return None
    name = bound.get(loop.iter.id) if isinstance(loop.iter, ast.Name) and bound else None
    name = name or _field_read(loop.iter, aliases)
    return (name, Each(literal.value)) if name else None


def _refused(test: Any, aliases: Mapping[str, str] | None = None,
             bound: Mapping[str, str] | None = None) -> list[tuple[str, Any]]:
    """``(name, literal)`` of each ``name != "literal"`` in a raising ``if``'s test (and-ed terms too),
    and of each ``x.name != 0`` (a part the architecture has none of: ``qk_rope_head_dim`` of a
    model without rotary embeddings, which the tiny widths would give one). A field read through
    a call on a config (``int(getattr(cfg, "name", 0)) != 0``, any ``helper(cfg, "name")``:
    :func:`_call_read`) counts as ``x.name``; so does a flag it refuses on or off: ``if
    bool(read): raise`` (a read whose default is ``False``, a config's attribute ``hf.flag``)
    wants ``False``, ``if not bool(read): raise`` wants ``True`` (:func:`fill_reads` sets a
    wanted flag only where the config's value is a bool)."""
    import ast

    terms = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    out: list[tuple[str, Any]] = []
    for term in terms:
        found = _refused_flag(term, aliases) or _refused_entries(term, aliases, bound)
        if found is not None:
            out.append(found)
            continue
        if not (isinstance(term, ast.Compare) and len(term.ops) == 1 and isinstance(term.ops[0], ast.NotEq)):
            continue
        left, right = term.left, term.comparators[0]
        read = _call_read(left, aliases)
        name = left.id if isinstance(left, ast.Name) else left.attr if isinstance(left, ast.Attribute) else (
            read[0] if read else None)
        if name and isinstance(right, ast.Constant) and isinstance(right.value, str):
            out.append((name, right.value))
        elif ((isinstance(left, ast.Attribute) or read) and name and isinstance(right, ast.Constant)
              and isinstance(right.value, int) and not isinstance(right.value, bool) and right.value == 0):
            # (zero only: a part the architecture has not; ``x.ndim != 4`` checks a tensor, not a config)
            out.append((name, right.value))
    return out


#: Conversions a config read is wrapped in before it is tested (``int(getattr(cfg, "x", 0))``).
_CONVERSIONS = ("int", "bool", "float", "str")


def _numeric_read(node: Any, aliases: Mapping[str, str] | None) -> str | None:
    """The field of a config read with no default of its own (``hf.x``, ``helper(cfg, "x")``), the
    argument of an ``int()``/``float()``; None for anything else."""
    import ast

    if isinstance(node, ast.Attribute) and _receiver(node.value, aliases) is not None:
        return node.attr
    read = _call_read(node, aliases)
    return read[0] if read and len(read[1].args) == 2 and not read[1].keywords else None


def _call_read(node: Any, aliases: Mapping[str, str] | None) -> tuple[str, Any] | None:
    """``(field, the call node)`` of a config field read through a call (``getattr(cfg, "x", 0)``,
    ``helper(hf_config, "x")``; the receiver a config as :func:`_receiver` knows one), through any
    :data:`_CONVERSIONS`; None for anything else."""
    import ast

    while (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CONVERSIONS
           and len(node.args) == 1 and not node.keywords):
        node = node.args[0]
    if not (isinstance(node, ast.Call) and len(node.args) >= 2 and _receiver(node.args[0], aliases) is not None):
        return None
    second = node.args[1]
    if isinstance(second, ast.Constant) and isinstance(second.value, str) and second.value.isidentifier():
        return second.value, node
    return None


def _refused_absent(test: Any, aliases: Mapping[str, str] | None, bound: Mapping[str, str]) -> str | None:
    """The config field a raising test refuses to be absent: ``x is None`` or ``not x`` of a read
    (``getattr(hf, "x", None)``) or of a local bound to one."""
    import ast

    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        subject = test.operand
    elif (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is)
          and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None):
        subject = test.left
    else:
        return None
    if isinstance(subject, ast.Name):
        return bound.get(subject.id)
    return _field_read(subject, aliases)


def _asserted_present(test: Any, aliases: Mapping[str, str] | None, bound: Mapping[str, str]) -> str | None:
    """The config field an ``assert`` insists is there: ``assert x is not None`` or ``assert x`` of a read
    or of a local bound to one (as :func:`_refused_absent` refuses its absence)."""
    import ast

    subject = test
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None):
        subject = test.left
    if isinstance(subject, ast.Name):
        return bound.get(subject.id)
    return _field_read(subject, aliases) if isinstance(subject, ast.Call) else None


def _refused_flag(term: Any, aliases: Mapping[str, str] | None) -> tuple[str, bool] | None:
    """``(field, wanted)`` of a raising test that is a config flag itself (``bool(read)``, a read
    with a ``False`` default) or its negation: the flag must be the other way."""
    import ast

    negated = isinstance(term, ast.UnaryOp) and isinstance(term.op, ast.Not)
    inner = term.operand if negated else term
    if isinstance(inner, ast.Attribute) and _receiver(inner.value, aliases) is not None:
        return inner.attr, negated  # ``if llm_config.tie_word_embeddings: raise`` (applied to a bool only)
    converted = isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "bool"
    read = _call_read(inner, aliases)
    if read is None:
        return None
    name, call = read
    default = call.args[2] if len(call.args) > 2 else None
    if converted or (isinstance(default, ast.Constant) and default.value is False):
        return name, negated
    return None


def _declared_default(node: Any) -> tuple[bool, Any]:
    """The value of a field's default: a literal, ``field(default=literal)`` or
    ``field(default_factory=list|dict|tuple)``."""
    import ast

    if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "field":
        for kw in node.keywords:
            if kw.arg == "default":
                return _declared_default(kw.value)
            if kw.arg == "default_factory" and isinstance(kw.value, ast.Name) and kw.value.id in (
                    "list", "dict", "tuple"):
                return True, {"list": [], "dict": {}, "tuple": ()}[kw.value.id]
        return False, None
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return False, None


def _sub_configs(config: Any) -> dict[str, Any]:
    """The ``*_config`` sub-configs of a config, by attribute name (``text_config`` first)."""
    found = {k: v for k, v in vars(config).items() if _SUBCONFIG.match(k) and hasattr(v, "to_dict")}
    return dict(sorted(found.items(), key=lambda kv: kv[0] != "text_config"))


def _fill_value(name: str, config: Any, reads: ConfigReads) -> tuple[bool, Any]:
    """A value for field ``name`` missing on ``config``: a sub-config's (not its None, for a field the code
    reads as a number, :attr:`ConfigReads.numbers`), a tiny width, the
    package's own default for a field of that name (the one it reads the field with,
    ``getattr(hf, name, default)``, else a config field's, else a function
    parameter's when it is a number no larger than :data:`LIMIT`); (False, None) when there is none.
    ``layer_types`` of a package that names its layer kinds and no ``full_attention`` (the
    kind :func:`derived` gives) cycles through its kinds."""
    for holder in (config, *_sub_configs(config).values()):
        if holder is not config and name in vars(holder) and not (
                getattr(holder, name) is None and name in reads.numbers):  # (a None the code cannot convert)
            return True, getattr(holder, name)
        for table in [v for v in vars(holder).values() if isinstance(v, dict)]:
            if name in table and table[name] is not None:  # transformers 5 keeps rope_theta in rope_parameters
                return True, table[name]
    if name in SMALL:
        return True, SMALL[name]
    if name == "layer_types" and (kinds := _own_layer_kinds(config, reads)) is not None:
        return True, kinds
    found, value = derived(name, config)
    if found:
        return True, value
    if name in reads.read_defaults:
        return True, copy.deepcopy(reads.read_defaults[name])
    if name in reads.defaults and reads.defaults[name] is not None:
        return True, reads.defaults[name]
    if name in reads.empty:
        return True, copy.deepcopy(reads.empty[name])
    value = reads.param_defaults.get(name)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= LIMIT:
        return True, value  # a layer's own default for a parameter of that name, if tiny
    return False, None


def _own_layer_kinds(config: Any, reads: ConfigReads) -> list[str] | None:
    """``layer_types`` of a package whose layers are of its own kinds (linear + sparse attention, no
    ``full_attention``): its kinds in turn, one of each first; None for any other package."""
    if not reads.layer_kinds or "full_attention" in reads.layer_kinds:
        return None
    kinds = sorted(reads.layer_kinds)
    return [kinds[i % len(kinds)] for i in range(_depth(config))]


def _depth(config: Any) -> int:
    """The layer count of a (sub-)config (its ``num_hidden_layers``, else :data:`LAYERS`)."""
    for name in ("num_hidden_layers", "num_layers", "n_layers"):
        value = vars(config).get(name) if hasattr(config, "__dict__") else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return LAYERS


def _rotary_pairs(config: Any) -> int | None:
    """Half the rotary dimension of a config: ``head_dim`` (or hidden / heads) times its
    ``partial_rotary_factor`` (an attribute or a ``rope_parameters`` entry), halved."""
    own = vars(config) if hasattr(config, "__dict__") else {}
    head_dim = own.get("head_dim")
    if not isinstance(head_dim, int) and isinstance(own.get("hidden_size"), int) and own.get("num_attention_heads"):
        head_dim = own["hidden_size"] // own["num_attention_heads"]
    if not isinstance(head_dim, int):
        return None
    factor = own.get("partial_rotary_factor")
    for table in [v for v in own.values() if isinstance(v, dict)]:
        factor = factor if factor is not None else table.get("partial_rotary_factor")
    return int(head_dim * float(factor if factor is not None else 1.0)) // 2


def derived(name: str, config: Any) -> tuple[bool, Any]:
    """A value for field ``name`` that follows the other fields of ``config``, else :data:`SHAPED`'s.

    ``mrope_section`` splits the rotary pairs (:func:`_rotary_pairs`) over time, height and width
    (later axes take the remainder: 8 -> [2, 3, 3]); ``layer_types`` is one ``full_attention``
    per layer; ``rope_parameters`` the default rope with the config's ``rope_theta``;
    ``*_layer_ids`` every layer index; a token id (``mask_token_id``) the last id of
    the vocabulary. (False, None) when there is no rule for the name.
    """
    if name == "mrope_section" and (pairs := _rotary_pairs(config)):
        base, rest = divmod(pairs, 3)
        return True, [base + (1 if i >= 3 - rest else 0) for i in range(3)]
    if name == "layer_types":
        return True, ["full_attention"] * _depth(config)
    if name == "rope_parameters":  # transformers 5's rope table, from the config's own theta
        theta = vars(config).get("rope_theta") if hasattr(config, "__dict__") else None
        return True, {"rope_type": "default", "rope_theta": theta if theta is not None else SHAPED["rope_theta"]}
    if name.endswith(("_layer_ids", "_layer_indices")):
        return True, list(range(_depth(config)))
    vocab = vars(config).get("vocab_size") if hasattr(config, "__dict__") else None
    if _TOKEN_ID.match(name) and "token" in name and isinstance(vocab, int):
        return True, vocab - 1
    if name in SHAPED:
        return True, SHAPED[name]
    return False, None


#: What a load path says when the config lacks a field: ``'XConfig' object has no attribute 'f'``,
#: ``f not found in huggingface_config``, ``missing ``a.b```` (or ``missing a_b``, a field's name as
#: it is, not quoted); or wants one value of it:
#: ``requires f=true``, ``expected ... f='x', got None``; or refuses its absence: ``f must be in (0, n].
#: Got f=0``.
_MISSING = (
    re.compile(r"AttributeError: '(?P<owner>\w+)' object has no attribute '(?P<path>\w+)'"),
    re.compile(r"\b(?P<path>\w+) (?:not found|is missing|missing) (?:in|from) (?:the )?"
               r"(?:hugging ?face|hf)_?config", re.IGNORECASE),
    re.compile(r"config (?:is missing|declares no) `+(?P<path>[\w.]+)`+", re.IGNORECASE),
    re.compile(r"config (?:is missing|declares no) (?P<path>[a-z]\w*_\w*(?:\.\w+)*)\b", re.IGNORECASE),
    re.compile(r"\brequires (?P<path>\w+)=(?P<value>true|false)\b", re.IGNORECASE),
    re.compile(r"\b(?P<path>\w+)='(?P<value>[\w.-]+)', got None\b"),
    # a field read with a default of none (0) that the code then refuses: ``x must be in (0, n]. Got x=0``
    re.compile(r"\b(?P<path>[a-z]\w*) must be (?:in \(0\b|positive|> ?0\b|>= ?1\b)[^;]*?\bgot (?P=path)=(?:0|None)\b",
               re.IGNORECASE),
)


#: What a load path says of a per-layer list that is shorter than the layer count:
#: ``compress_ratios has 0 entries but the model has 2 layers``.
_SHORT_LIST = re.compile(r"\b(?P<path>\w+) has \d+ (?:entries|items|values|elements)\b[^.;]*?"
                         r"\b(?P<layers>\d+) (?:hidden |decoder )?layers\b")


@dataclasses.dataclass(frozen=True)
class PerLayer:
    """The value a load path wants of a per-layer list: one entry per layer (:func:`per_layer`)."""

    layers: int


def per_layer(current: Any, layers: int) -> list[Any]:
    """A per-layer list of ``layers`` entries: ``current``'s entries repeated in order, or
    zeros (the neutral entry: no ratio, no window, layer kind 0) when it has none."""
    seq = list(current) if isinstance(current, (list, tuple)) else []
    return [seq[i % len(seq)] for i in range(layers)] if seq else [0] * layers


@dataclasses.dataclass(frozen=True)
class Without:
    """The value a load path wants of a list it says must not contain ``entry``: the list without it."""

    entry: Any


def _without(entries: list[Any], entry: Any) -> list[Any]:
    """``entries`` without ``entry``; a list of indices (``target_layer_ids``) keeps its length, the
    dropped entries replaced by the next indices after its largest: its length is a count the
    load path checks too (one id per draft layer), its entries are positions ([0, 1] -> [1, 2])."""
    value = [v for v in entries if v != entry]
    if entries and all(isinstance(v, int) and not isinstance(v, bool) for v in [*entries, entry]):
        following = max([*value, entry]) + 1
        while len(value) < len(entries):
            value.append(following)
            following += 1
    return value


#: ``dflash_config.target_layer_ids must not contain 0``
_MUST_NOT_CONTAIN = re.compile(r"\b(?P<path>\w+(?:\.\w+)?) must not contain (?P<entry>-?\d+)\b")
#: ``aux_hidden_state_layer_ids use the vLLM eagle convention (...) and must all be >= 1``: no entry 0
_MUST_ALL_BE_POSITIVE = re.compile(r"\b(?P<path>[a-z]\w*_(?:ids|indices|indexes))\b[^;]*?\bmust all be (?:>= ?1|positive)\b",
                                   re.IGNORECASE)


def missing_field(error: str) -> tuple[str, tuple[str, ...], Any] | None:
    """(owner class name or "", dotted path, the value the error asks for or None) of the config
    field a load path's error says is missing or wants; a per-layer list it says is short
    wants :class:`PerLayer`, a list it says must not contain an entry (or must all be at least 1: no 0)
    :class:`Without`."""
    short = _SHORT_LIST.search(error)
    if short:
        return "", (short.group("path"),), PerLayer(int(short.group("layers")))
    refused = _MUST_NOT_CONTAIN.search(error)
    if refused:
        return "", tuple(refused.group("path").split(".")), Without(int(refused.group("entry")))
    positive = _MUST_ALL_BE_POSITIVE.search(error)
    if positive:  # (every entry at least 1: none of them 0)
        return "", tuple(positive.group("path").split(".")), Without(0)
    for pattern in _MISSING:
        found = pattern.search(error)
        if found:
            groups = found.groupdict()
            value = groups.get("value")
            wanted = {"true": True, "false": False}.get(value.lower(), value) if value is not None else None
            return groups.get("owner") or "", tuple(groups["path"].split(".")), wanted
    return None


def fill_missing(config: Any, owner: str, path: tuple[str, ...], reads: ConfigReads,
                 package_dir: Path | None = None, wanted: Any = None) -> str | None:
    """Give ``config`` the field a load path stopped on (:func:`missing_field`); the ``path=value``
    set, or None when ``owner`` is not this config nor one of its sub-configs, or no value follows.

    The value comes as for :func:`fill_reads` (a sub-config's, a tiny width, :func:`derived`, the
    package's defaults), or ``wanted`` (the value the error names); a missing ``*_config``
    sub-config is the same sub-config of a sibling package's model type (the model type the
    package builds on; one the config class does not declare comes back from ``config.json``
    as a dict, and :func:`pipeline_config` restores the object), else for a language tower
    the config itself (:func:`_language_tower`), else one made from the fields
    the package reads on it (:func:`_read_sub_config`); ``a.b`` sets key ``b`` of the
    dict ``a`` (made when absent); a per-layer list the error says is short
    (:class:`PerLayer`) gets one entry per layer; a table the code subscripts with string keys
    (``hf.attention_other_setting["num_attention_groups"]``) is a dict of those keys, each the
    config's own value of that name or valued as a missing field is.
    """
    holders = [h for h in [config, *_sub_configs(config).values()] if not owner or type(h).__name__ == owner]
    # of several of that class (a language tower copied from the config), the one lacking the field
    holder = next((h for h in holders if len(path) > 1 or not _has(h, path[0])), holders[0] if holders else None)
    if isinstance(wanted, Without) and len(path) == 1:  # a list to drop an entry of: the one that has it
        holder = next((h for h in holders if _has(h, path[0])), holder)
    if holder is None:
        return None
    *outer, name = path
    if len(outer) > 1:
        return None
    table: Any = holder
    if outer:
        table = getattr(holder, outer[0], None)
        if table is None:
            table = {}
            setattr(holder, outer[0], table)
    context = holder if isinstance(table, dict) else table
    value: Any
    if isinstance(wanted, PerLayer):
        ok, value = True, per_layer(table.get(name) if isinstance(table, dict) else getattr(table, name, None),
                                    wanted.layers)
    elif isinstance(wanted, Without):
        current = table.get(name) if isinstance(table, dict) else getattr(table, name, None)
        entries = list(current) if isinstance(current, (list, tuple)) else []
        value = _without(entries, wanted.entry)
        ok = bool(value) and value != entries
    elif wanted is not None:
        ok, value = True, wanted
    elif _SUBCONFIG.match(name) and not outer:
        # a tower its class does not declare comes back from config.json as a dict:
        # pipeline_config gives the loaded config this object (restore_sub_configs)
        ok, value = _sibling_sub_config(name, package_dir)
        if not ok:
            ok, value = _language_tower(name, holder)
        if not ok:
            ok, value = _read_sub_config(name, reads)
    else:
        ok, value = _fill_value(name, context, reads)
        if not ok and reads.keys.get(name):  # a table the code subscripts: its keys, valued as fields
            value = {k: getattr(context, k) if _has(context, k) else _fill_value(k, context, reads)[1]
                     for k in sorted(reads.keys[name])}
            value = {k: v for k, v in value.items() if v is not None}
            ok = bool(value)
    if not ok:
        return None
    if isinstance(table, dict):
        table[name] = value
    elif not _set_valid(config, table, name, value):
        return None  # the config's own validation refuses it (config.json could not be written)
    where = [] if holder is config else [next(k for k, v in _sub_configs(config).items() if v is holder)]
    shown = value.to_dict() if hasattr(value, "to_dict") else value
    return ".".join([*where, *path]) + f"={shown!r}"[:120]


def _sibling_sub_config(name: str, package_dir: Path | None) -> tuple[bool, Any]:
    """Sub-config ``name`` of the first sibling model type whose tiny config has it."""
    for model_type in sibling_model_types(package_dir) if package_dir is not None else []:
        try:
            sub = getattr(tiny_hf_config(model_type), name, None)
        except Exception:  # noqa: BLE001 - a model type whose config does not build is skipped
            continue
        if sub is not None and hasattr(sub, "to_dict"):
            return True, sub
    return False, None


#: The sub-config names of a language model tower (what ``getattr(hf, "text_config", hf)`` reads).
_LANGUAGE_TOWERS = ("text_config", "language_config", "llm_config")
#: Other names a decoder's own geometry is read under, as a sub-config: a draft's
#: ``transformer_layer_config`` (a speculators checkpoint nests its llama-style layers' config there).
_DECODER_CONFIG = re.compile(r"(decoder|(\w+_)?layers?)_config")


def _language_tower(name: str, config: Any) -> tuple[bool, Any]:
    """A copy of ``config`` without its sub-configs, as the missing language tower ``name``, when
    ``config`` is itself a language model's (it has a vocabulary and layers): the code reads a
    composite checkpoint's ``text_config`` where the model type's own config is flat. A decoder's
    config read under another name (:data:`_DECODER_CONFIG`: ``transformer_layer_config``) is the
    same: the config's own language tower (its ``text_config``) when it has one, else the config."""
    if not (name in _LANGUAGE_TOWERS or _DECODER_CONFIG.fullmatch(name)) or not hasattr(config, "to_dict"):
        return False, None
    towers = [v for k, v in _sub_configs(config).items() if k in _LANGUAGE_TOWERS]
    if name not in _LANGUAGE_TOWERS and towers:
        return True, copy.deepcopy(towers[0])
    own = vars(config)
    if not (isinstance(own.get("vocab_size"), int) and isinstance(own.get("num_hidden_layers"), int)):
        return False, None
    tower = copy.deepcopy(config)
    for key in [k for k in vars(tower) if _SUBCONFIG.match(k)]:
        delattr(tower, key)
    return True, tower


def _read_sub_config(name: str, reads: ConfigReads) -> tuple[bool, Any]:
    """Sub-config ``name`` (``vision_config``) made from the fields the package reads on it, each
    valued as :func:`fill_reads` values a field, or as the tiny width its name has after a
    short prefix (a tower's own ``vt_hidden_size``); (False, None) when the package reads none
    of it with a value."""
    from transformers import PretrainedConfig

    fields = reads.attrs.get(name.removesuffix("_config").lower(), set())
    sub = PretrainedConfig()
    given = 0
    for field_name in sorted(fields):
        if _has(sub, field_name) or field_name in reads.optional:
            continue
        ok, value = _fill_value(field_name, sub, reads)
        prefixed = re.fullmatch(r"[a-z]{1,3}_(\w+)", field_name)
        if not ok and prefixed and prefixed.group(1) in SMALL:
            ok, value = True, SMALL[prefixed.group(1)]
        if ok:
            setattr(sub, field_name, value)
            given += 1
    return (True, sub) if given else (False, None)


def _has(config: Any, name: str) -> bool:
    try:
        return getattr(config, name, None) is not None
    except Exception:  # noqa: BLE001 - a property that fails is as good as missing
        return False


def _valid(config: Any) -> bool:
    """The config's own validation passes (``transformers`` 5 strict configs); True without one."""
    for holder in (config, *_sub_configs(config).values()):
        check = getattr(holder, "validate", None)
        if callable(check):
            try:
                check()
            except Exception:  # noqa: BLE001 - any refusal counts
                return False
    return True


def _set_valid(config: Any, target: Any, name: str, value: Any) -> bool:
    """Set ``target.name``; undone (False) when it makes ``config`` fail its own validation."""
    missing = object()
    before = vars(target).get(name, missing)
    was_valid = _valid(config)
    setattr(target, name, value)
    if not was_valid or _valid(config):
        return True
    if before is missing:
        vars(target).pop(name, None)
    else:
        setattr(target, name, before)
    return False


def package_reads(package_dir: Path) -> ConfigReads:
    """:func:`config_reads` of a package and the siblings it imports (a config class it
    extends declares its defaults there); the package's own defaults come first. Optional
    fields are the ones the package itself reads with a default (a sibling reading a field
    with a default does not make it optional for a package that needs it), less those it raises
    without (:attr:`ConfigReads.needed`); so are the fields it declares as one number (a sibling's ``int`` says nothing of how this package reads it)."""
    reads = config_reads(package_sources(package_dir))
    own = config_reads(sorted(package_dir.rglob("*.py")))
    reads.optional, reads.scalars, reads.layer_kinds = own.optional - own.needed, own.scalars, own.layer_kinds
    return reads


def fill_reads(config: Any, reads: ConfigReads) -> list[str]:
    """Give ``config`` (and its sub-configs) the fields ``reads`` says the code reads and it lacks.

    A field the code also reads with a default of its own is optional and
    left out. A field read on the top-level config that a sub-config has (a composite
    config read as if flat) takes the sub-config's value; otherwise a tiny
    width (:data:`SMALL`), a shaped value (:data:`SHAPED`) or the package's own
    default for a field of that name; a field with none of them stays missing.
    Subscripted keys (``rope_scaling["mrope_section"]``) are added to the dict. A
    field the package's own config declares as one number that is a list of equal entries
    here (``patch_size=[14, 14]``) becomes that number.
    A field whose value the config's own validation refuses is left out.
    Returns the ``path=value`` items set.
    """
    subs = _sub_configs(config)
    done: list[str] = []
    for where, target in [("", config), *subs.items()]:
        # transformers 5 keeps rope_theta in rope_parameters; code written for 4.x (and MAX's
        # own helpers, which the scan does not see) reads it as an attribute
        own = vars(target).get("rope_parameters")
        source = own if isinstance(own, dict) and "rope_theta" in own else next(
            (sub.rope_parameters for sub in ([] if where else subs.values())
             if isinstance(vars(sub).get("rope_parameters"), dict) and "rope_theta" in sub.rope_parameters), None)
        if "rope_theta" not in vars(target) and source is not None:
            target.rope_theta = source["rope_theta"]
            done.append(f"{where + '.' if where else ''}rope_theta={source['rope_theta']!r}")
    for where, target in [("", config), *subs.items()]:
        for name in sorted(reads.scalars):  # [14, 14] where the package's own config says int
            value = vars(target).get(name)
            if (isinstance(value, (list, tuple)) and value and all(v == value[0] for v in value)
                    and isinstance(value[0], (int, float)) and not isinstance(value[0], bool)
                    and _set_valid(config, target, name, value[0])):
                done.append(f"{where + '.' if where else ''}{name}={value[0]!r} (was {list(value)!r})")
    targets: list[tuple[str, Any]] = [("", config)]
    for kind in sorted(k for k in reads.attrs if k):
        targets += [(key, sub) for key, sub in subs.items() if key.startswith(kind) or kind == "llm"]
    for where, target in targets:
        kind = next((k for k in reads.attrs if k and where.startswith(k)), "llm" if where else "")
        for name in sorted(reads.attrs.get(kind, set()) | (reads.attrs.get("", set()) if not where else set())):
            if _has(target, name) or name in reads.optional:
                continue
            ok, value = _fill_value(name, target, reads)
            if ok and _set_valid(config, target, name, value):
                done.append(f"{where + '.' if where else ''}{name}={value!r}")
    if "layer_types" in reads.optional and len(reads.layer_kinds) > 1:
        # read with a fallback of the code's own (every 4th layer sparse): at the tiny depth the
        # fallback may lose a kind the full-depth model has, so each language tower is told its kinds
        for where, target in [("", config), *((k, v) for k, v in subs.items() if k in _LANGUAGE_TOWERS)]:
            own = vars(target)
            if (_has(target, "layer_types") or not isinstance(own.get("num_hidden_layers"), int)
                    or (kinds := _own_layer_kinds(target, reads)) is None):
                continue
            if _set_valid(config, target, "layer_types", kinds):
                done.append(f"{where + '.' if where else ''}layer_types={kinds!r}")
    for name, literal in sorted(reads.required.items()):
        for where, target in [("", config), *subs.items()]:
            tables = [(name, target, getattr(target, name, None))]
            tables += [(k, v, v.get(name)) for k, v in vars(target).items() if isinstance(v, dict)]
            for label, holder, value in tables:
                want = literal
                if isinstance(literal, Each):  # every entry one value: as many entries as it has
                    if not isinstance(value, list) or all(v == literal.entry for v in value):
                        continue
                    want = [literal.entry] * len(value)
                if value != want and (isinstance(value, str) if isinstance(want, str) else
                                      isinstance(value, bool) if isinstance(want, bool) else
                                      isinstance(value, list) if isinstance(want, list) else (
                        isinstance(value, int) and not isinstance(value, bool))):
                    if isinstance(holder, dict):
                        holder[name] = want
                    else:
                        setattr(holder, name, want)
                    done.append(f"{where + '.' if where else ''}{label if label != name else ''}"
                                f"{'[' + repr(name) + ']' if label != name else name}={want!r}")
    for attr, keys in sorted(reads.keys.items()):
        holders = [(w, t) for w, t in [("", config), *subs.items()] if _has(t, attr)] or [("", config)]
        for where, target in holders:
            current = getattr(target, attr, None)
            if current is not None and not isinstance(current, dict):
                continue
            table = current if isinstance(current, dict) else {}
            added = {k: derived(k, target)[1] for k in sorted(keys) if derived(k, target)[0] and k not in table}
            if added:
                table.update(added)
                setattr(target, attr, table)
                done += [f"{where + '.' if where else ''}{attr}[{k!r}]={v!r}" for k, v in added.items()]
    return done


def sibling_packages(package_dir: Path) -> list[str]:
    """The sibling architecture packages ``package_dir`` imports (``from ..llama3 import``,
    ``max.pipelines.architectures.llama3``), in the order first met."""
    import ast

    found: list[str] = []
    parent = package_dir.parent
    for path in sorted(package_dir.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        depth = len(path.relative_to(package_dir).parts)  # 1: a module of the package itself
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            if node.level == depth + 1:
                name = node.module.split(".")[0]
            elif node.level == 0 and node.module.startswith("max.pipelines.architectures."):
                name = node.module.split(".")[3]
            else:
                continue
            if name != package_dir.name and (parent / name).is_dir() and name not in found:
                found.append(name)
    return found


def package_sources(package_dir: Path) -> list[Path]:
    """The ``.py`` files of a package and of every sibling package it imports, transitively."""
    seen = [package_dir.name]
    queue = [package_dir.name]
    while queue:
        for name in sibling_packages(package_dir.parent / queue.pop(0)):
            if name not in seen:
                seen.append(name)
                queue.append(name)
    return [p for name in seen for p in sorted((package_dir.parent / name).rglob("*.py"))]


def registered_names(package_dir: Path) -> list[str]:
    """The ``SupportedArchitecture(name=...)`` names a package's ``arch.py`` registers (static)."""
    import ast

    try:
        tree = ast.parse((package_dir / "arch.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return []
    return [kw.value.value for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", "")) == "SupportedArchitecture"
            for kw in node.keywords if kw.arg == "name" and isinstance(kw.value, ast.Constant)
            and isinstance(kw.value.value, str)]


def importer_model_types(package_dir: Path) -> list[str]:
    """Model types of the sibling packages that import a package with none of its own (a draft
    only a fused speculative package builds: dflash_kimi_k25 is configured from what
    unified_dflash_kimi_k25 is); importers whose name holds the package's come first."""
    parent = package_dir.parent
    importers = sorted((d for d in parent.iterdir() if d.is_dir() and d != package_dir and not d.name.startswith(("_", "."))
                        and package_dir.name in sibling_packages(d)),
                       key=lambda d: (package_dir.name not in d.name, d.name))
    found: list[str] = []
    for importer in importers:
        types = model_types(*registered_names(importer)) or sibling_model_types(importer)
        found += [t for t in types if t not in found]
    return found


def sibling_model_types(package_dir: Path) -> list[str]:
    """Model types of the sibling packages a package builds on (a draft or fused speculative
    package configured from its target's checkpoint).

    Siblings whose name is part of the package's name come first (longest
    first: ``unified_eagle_llama3`` -> ``llama3`` before ``eagle_llama3``), then
    the rest in import order; each gives the model types of the names its
    ``arch.py`` registers; a sibling with none is looked through to its own siblings.
    """
    direct = sibling_packages(package_dir)
    ordered = sorted(direct, key=lambda n: (n not in package_dir.name, -len(n) if n in package_dir.name else 0))
    found: list[str] = []
    seen = {package_dir.name}
    queue = list(ordered)
    while queue:
        name = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        types = model_types(*registered_names(package_dir.parent / name))
        found += [t for t in types if t not in found]
        if not types:
            queue += sibling_packages(package_dir.parent / name)
    return found
