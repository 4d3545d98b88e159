"""Automatic cases for classes whose constructors take only simple values.

A constructor qualifies when each parameter without a default is a dtype, a
device, an int/float/bool, or a config class (dataclass or pydantic model):
one whose fields all have defaults, or one :mod:`migrate_v3.verify.tiny` can
fill from the ``transformers`` config of the package's model type, shrunk.
Input shapes are guessed from parameter names (``tokens`` → ids, else
``[batch, seq, hidden]``) and the module's own first weight. A ragged decoder
whose ``__call__`` takes a paged KV cache is built with a flat entry point and
the flat input types its pipeline would trace it with (:func:`_flat_kv`).
Anything else yields a reason, which ``verify`` lists as a skip.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from migrate_v3.verify import tiny
from migrate_v3.verify.spec import DEVICE, DEVICES, DTYPE, Case, Input

#: Makes an instance of a config class (or None): see :class:`TinyConfigs`.
ConfigMaker = Callable[[type], Any]

ID_NAMES = {"tokens", "input_ids", "ids", "indices", "token_ids", "input_tokens"}
DIM_NAMES = (
    "hidden", "hidden_size", "hidden_dim", "dim", "dims", "d_model", "in_dim", "in_features",
    "embed_dim", "n_embd", "input_dim", "num_channels", "in_channels", "channels",
)
BATCH, SEQ = 2, 5


def _hints(fn: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - unresolved annotations fall back to names
        return {}


def _is_type(ann: Any, name: str) -> bool:
    return getattr(ann, "__name__", None) == name or (isinstance(ann, str) and ann == name)


def _guess_int(name: str) -> int:
    lowered = name.lower()
    for part, value in (("vocab", 64), ("head", 2), ("layer", 1), ("group", 2),
                        ("kernel", 3), ("stride", 1), ("expert", 2), ("batch", BATCH)):
        if part in lowered:
            return value
    return 16


def _config_fields(cls: Any) -> list[str] | None:
    """Field names of a dataclass or pydantic model class; None for anything else."""
    if isinstance(cls, type) and dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls)]
    fields = getattr(cls, "model_fields", None) if isinstance(cls, type) else None
    return list(fields) if isinstance(fields, dict) else None


class TinyConfigs:
    """Config instances for constructor parameters, shrunk from ``transformers``.

    ``names`` hint the model type (the package's name); the config class's own
    name is tried too. ``dtype``/``device`` fields get the run's values. With
    the V2 ``package_dir``, a package with no model type of its own takes its
    siblings' and the config gets the fields the code reads (as the ladder's
    :func:`archbuild.tiny_checkpoint` does).
    """

    def __init__(self, names: tuple[str, ...], overrides: dict[str, Any], package_dir: Path | None = None) -> None:
        self.names = names
        self.overrides = overrides
        self.package_dir = package_dir
        self.why = ""

    def _types(self, *names: str) -> list[str]:
        types = tiny.model_types(*names)
        if not types and self.package_dir is not None:
            types = tiny.sibling_model_types(self.package_dir) or tiny.importer_model_types(self.package_dir)
        return types

    def _tiny(self, model_type: str) -> Any:
        config = tiny.tiny_hf_config(model_type)
        if self.package_dir is not None:
            tiny.fill_reads(config, tiny.package_reads(self.package_dir))
        return config

    def hf(self) -> Any:
        """The tiny ``transformers`` config itself (for a ``huggingface_config`` parameter)."""
        types = self._types(*self.names)
        if not types:
            self.why = f"no transformers config for {', '.join(self.names)}"
            return None
        return self._tiny(types[0])

    def __call__(self, cls: type) -> Any:
        if _is_hf_config(cls):
            return self.hf()
        types = self._types(*self.names, cls.__name__)
        if not types:
            self.why = f"no transformers config for {', '.join((*self.names, cls.__name__))}"
            return None
        hf = self._tiny(types[0])
        try:
            return tiny.fill_config(cls, hf, self.overrides)
        except Exception as exc:  # noqa: BLE001 - the reason becomes the skip reason
            self.why = f"{type(exc).__name__}: {exc}"
        if callable(getattr(cls, "initialize", None)):  # a MAX arch config: built as its pipeline builds it
            dtype = self.overrides.get("dtype")
            encoding = str(dtype).replace("DType.", "") if dtype else None
            try:
                return tiny.arch_config(cls, hf, encoding=encoding)
            except Exception as exc:  # noqa: BLE001
                self.why += f"; {cls.__name__}.initialize: {type(exc).__name__}: {exc}"
                if not _BLOCK_WIDTHS.search(str(exc)) or not tiny.widen(hf, tiny.FP8_WIDTHS):
                    return None
            try:  # (a KV cache quantized in blocks: widths that are whole blocks)
                return tiny.arch_config(cls, hf, encoding=encoding)
            except Exception as exc:  # noqa: BLE001
                self.why += f"; again with widths in whole blocks: {type(exc).__name__}: {exc}"
        return None


#: a config that refuses widths that are no whole number of quantization blocks (a quantized KV cache)
_BLOCK_WIDTHS = re.compile(r"granularity must evenly divide", re.I)  # (max 26.7's KVCacheParams)


def _is_hf_config(cls: Any) -> bool:
    """``transformers``' ``AutoConfig`` or a ``PretrainedConfig`` class."""
    return isinstance(cls, type) and any(
        c.__name__ in ("PretrainedConfig", "AutoConfig") and c.__module__.startswith("transformers")
        for c in cls.__mro__)


def _simple_value(name: str, ann: Any, configs: ConfigMaker | None = None) -> tuple[bool, Any]:
    if name == "dtype" or _is_type(ann, "DType"):
        return True, DTYPE
    if name == "device" or _is_type(ann, "DeviceRef"):
        return True, DEVICE
    if name == "devices":
        return True, DEVICES
    if ann is int or _is_type(ann, "int"):
        return True, _guess_int(name)
    if ann is float or _is_type(ann, "float"):
        return True, 1e-5 if "eps" in name.lower() else 1.0
    if ann is bool or _is_type(ann, "bool"):
        return True, False
    if _is_hf_config(ann) and configs is not None:
        made = configs(ann)
        return made is not None, made
    if _config_fields(ann) is not None:
        # a tiny real config first: a config's defaults are often a full-size model
        made = configs(ann) if configs is not None else None
        if made is not None:
            return True, made
        try:
            return True, ann()
        except Exception:  # noqa: BLE001 - required fields and no tiny config
            return False, None
    return False, None


def constructor_values(cls: type, configs: ConfigMaker | None = None) -> dict[str, Any] | str:
    """Keyword arguments for ``cls`` or the reason none can be made."""
    init = cls.__init__  # type: ignore[misc]
    if init is object.__init__:
        return {}
    hints = _hints(init)
    values: dict[str, Any] = {}
    for param in list(inspect.signature(init).parameters.values())[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.default is not param.empty and param.name not in ("dtype", "device", "devices"):
            continue
        ann = hints.get(param.name, param.annotation)
        ok, value = _simple_value(param.name, ann, configs)
        if not ok:
            shown = getattr(ann, "__name__", ann)
            why = getattr(configs, "why", "") if _config_fields(ann) is not None else ""
            return (
                f"constructor parameter {param.name!r} ({shown}) is neither a simple value nor "
                "a config with defaults" + (f" (no tiny config: {why})" if why else "")
                + "; give this class a case in the spec"
            )
        values[param.name] = value
    return values


def v3_values(cls: type, v2_values: dict[str, Any]) -> dict[str, Any] | str:
    """Keyword arguments for the V3 class from the V2 ones (same names), or why not."""
    init = cls.__init__  # type: ignore[misc]
    if init is object.__init__:
        return {}
    hints = _hints(init)
    values: dict[str, Any] = {}
    for param in list(inspect.signature(init).parameters.values())[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.name in v2_values:
            value = v2_values[param.name]
            ann = hints.get(param.name)
            fields = _config_fields(ann)
            if (fields is not None and isinstance(ann, type)
                    and _config_fields(type(value)) is not None and not isinstance(value, ann)):
                # the V3 side's own copy of the config class: same fields, other class
                value = ann(**{f: getattr(value, f) for f in fields if hasattr(value, f)})
            values[param.name] = value
        elif param.default is param.empty:
            ok, value = _simple_value(param.name, hints.get(param.name, param.annotation))
            if not ok:
                return f"V3 constructor parameter {param.name!r} has no V2 counterpart"
            values[param.name] = value
    return values


def _hidden_dim(values: dict[str, Any], first_weight: tuple[int, ...] | None) -> int | None:
    for name in DIM_NAMES:
        if isinstance(values.get(name), int):
            return int(values[name])
    for value in values.values():
        if _config_fields(type(value)) is not None:
            for attr in ("hidden_size", "d_model", "dim", "n_embd"):
                if isinstance(getattr(value, attr, None), int):
                    return int(getattr(value, attr))
    if first_weight:
        return first_weight[0] if len(first_weight) == 1 else first_weight[-1]
    return None


def _vocab(values: dict[str, Any]) -> int | None:
    for name, value in values.items():
        if "vocab" in name and isinstance(value, int):
            return value
        vocab = getattr(value, "vocab_size", None) if _config_fields(type(value)) is not None else None
        if isinstance(vocab, int):
            return vocab
    return None


def auto_case(
    v2_cls: type, v3_cls: type, first_weight: tuple[int, ...] | None = None,
    configs: ConfigMaker | None = None,
) -> Case | str:
    """A case built from constructor signatures, or why there is none."""
    v2_values = constructor_values(v2_cls, configs)
    if isinstance(v2_values, str):
        return v2_values
    v3_kwargs = v3_values(v3_cls, v2_values)
    if isinstance(v3_kwargs, str):
        return v3_kwargs
    inputs = _inputs(v2_cls, v2_values, first_weight)
    if isinstance(inputs, str):  # both sides build: keys and hyper-parameters still compare
        case = Case(inputs=[], v2_kwargs=v2_values, v3_kwargs=v3_kwargs, source="auto", static_reason=inputs)
        return _flat_kv(case, v2_cls) or case
    greedy = len(inputs) == 1 and inputs[0].dtype == "int64"
    return Case(
        inputs=inputs,
        v2_kwargs=v2_values,
        v3_kwargs=v3_kwargs,
        greedy=greedy,
        source="auto",
    )


def _flat_kv(case: Case, v2_cls: type) -> Case | None:
    """``case`` with each side built as its class with a flat entry point
    (:func:`kv_inputs.flat_kv_class`), when ``__call__`` takes a paged KV cache as a ragged
    decoder does (:func:`kv_inputs.ragged_layout`) and the constructor values hold the cache's
    parameters (a config's ``kv_params``); else None. A constructor ``block_size`` makes it a
    block drafter, whose token rows are whole blocks (:func:`kv_inputs.flat_types`).

    Both sides then declare the same flat ``input_types()`` (the per-batch inputs of a ragged
    batch, then the cache's inputs from its parameters), what a pipeline traces such a module
    with; the case stays static for ``verify`` (``static_reason``): seeded random inputs do not
    make a KV cache a kernel can index.
    """
    from migrate_v3.verify import kv_inputs
    from migrate_v3.verify.spec import resolve

    layout = kv_inputs.ragged_layout(v2_cls.__call__)
    kv = kv_inputs.kv_params_in(case.v2_kwargs.values())
    if isinstance(layout, str) or kv is None:
        return None
    hidden = _hidden_dim(dict(case.v2_kwargs), None)
    block = case.v2_kwargs.get("block_size")
    block_size = block if isinstance(block, int) and not isinstance(block, bool) and block > 0 else None

    def builder(kwargs: dict[str, Any]) -> Callable[[type, Any], Any]:
        def build(cls: type, ctx: Any) -> Any:
            types = kv_inputs.flat_types(layout, kv, ctx.device, ctx.dtype, hidden, block_size)
            flat = kv_inputs.flat_kv_class(cls, layout, kv, types)
            return flat(**{k: resolve(v, ctx) for k, v in kwargs.items()})
        return build

    return dataclasses.replace(
        case, v2=builder(dict(case.v2_kwargs)), v3=builder(dict(case.v3_kwargs)),
        static_reason=f"{case.static_reason}: traced through the flat inputs of a ragged batch and its KV cache")


#: ``__call__`` parameters that are a KV cache or ragged-batch bookkeeping: no guessed shape fits.
_RUNTIME = re.compile(r"kv|cache|offsets|signal|return_n|layer_idx|freqs|position", re.I)


def _inputs(v2_cls: type, v2_values: dict[str, Any], first_weight: tuple[int, ...] | None) -> list[Input] | str:
    """Inputs guessed from ``__call__``'s parameters, or why there are none."""
    params = list(inspect.signature(v2_cls.__call__).parameters.values())[1:]
    inputs: list[Input] = []
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            return f"__call__ takes *{param.name}; give this class a case in the spec"
        if param.default is not param.empty:
            continue
        if _RUNTIME.search(param.name):
            return f"input {param.name!r} is runtime state (KV cache, offsets); give this class a case in the spec"
        if param.name in ID_NAMES:
            vocab = _vocab(v2_values)
            if vocab is None:
                return f"input {param.name!r} looks like token ids but no vocab size is known"
            inputs.append(Input((BATCH, SEQ), "int64", dims=("batch", "seq"), low=0, high=vocab))
        else:
            dim = _hidden_dim(v2_values, first_weight)
            if dim is None:
                return f"cannot infer the shape of input {param.name!r}; give it in the spec"
            inputs.append(Input((BATCH, SEQ, dim), "$dtype", dims=("batch", "seq", dim)))
    if not inputs:
        return "__call__ takes no tensor inputs"
    return inputs


#: Optional ``__call__`` parameters that are an attention mask over the token ids (``[batch, seq]``,
#: 1 = a real token): what callers of an encoder pass beside ``input_ids``.
MASK_NAMES = {"attention_mask", "mask", "input_mask", "padding_mask"}


def mask_inputs(v2_cls: type, inputs: list[Input]) -> list[Input]:
    """The optional attention masks of ``__call__``, shaped as the token ids of ``inputs``.

    Empty unless the first input is token ids and ``__call__`` takes an optional
    parameter named as a mask (:data:`MASK_NAMES`) right after the required ones:
    a module that builds its own bias without a mask may still need one (a
    kernel that insists on a mask of the batch's size).
    """
    if not inputs or inputs[0].dtype != "int64":
        return []
    params = list(inspect.signature(v2_cls.__call__).parameters.values())[1:]
    optional = [p for p in params if p.default is not p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
    ids = inputs[0]
    out: list[Input] = []
    for param in optional:
        if param.name not in MASK_NAMES:
            break
        out.append(Input(ids.shape, "int64", dims=ids.dims, fill=1.0))
    return out


def declared_input_types(module: Any, depth: int = 3) -> tuple[list[Any], str] | None:
    """The input types a built V2 module declares for its graph, and whose they are.

    A module's own ``input_types()`` (what its pipeline compiles it with), else
    those of the child its ``__call__`` hands its required inputs to first
    (``return self.decoder(z)``), up to ``depth`` children down; None when
    neither says.
    """
    own = getattr(module, "input_types", None)
    if callable(own):
        try:
            types = list(own())
        except Exception:  # noqa: BLE001 - an input_types() that needs more than the module
            types = []
        if types:
            return types, f"{type(module).__name__}.input_types()"
    if depth <= 0:
        return None
    child = _delegate(module)
    if child is None:
        return None
    name, sub = child
    found = declared_input_types(sub, depth - 1)
    if found is None:
        return None
    required = [p for p in list(inspect.signature(type(module).__call__).parameters.values())[1:]
                if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
    types, whose = found
    if len(types) < len(required):
        return None
    return types[:len(required)], f"{whose} (self.{name} takes {type(module).__name__}'s inputs)"


def _delegate(module: Any) -> tuple[str, Any] | None:
    """``(attribute, child)`` of the first ``self.<attribute>(...)`` call in ``__call__`` whose
    positional arguments begin with every required parameter, in order; None if there is none."""
    import ast

    from migrate_v3.verify.pysource import parsed

    call = type(module).__call__
    tree = parsed(call)
    if tree is None:
        return None
    required = [p.name for p in list(inspect.signature(call).parameters.values())[1:]
                if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
    if not required:
        return None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"):
            continue
        names = [a.id if isinstance(a, ast.Name) else None for a in node.args[:len(required)]]
        child = getattr(module, node.func.attr, None)
        if names == required and child is not None and callable(child) and not inspect.ismethod(child):
            return node.func.attr, child
    return None
