"""Automatic cases for classes whose constructors take only simple values.

A constructor qualifies when each parameter without a default is a dtype, a
device, an int/float/bool, or a config dataclass whose fields all have
defaults. Input shapes are guessed from parameter names (``tokens`` → ids,
else ``[batch, seq, hidden]``) and the module's own first weight. Anything
else yields a reason, which ``verify`` lists as a skip.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any

from migrate_v3.verify.spec import DEVICE, DEVICES, DTYPE, Case, Input

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


def _simple_value(name: str, ann: Any) -> tuple[bool, Any]:
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
    if isinstance(ann, type) and dataclasses.is_dataclass(ann):
        try:
            return True, ann()
        except TypeError:
            return False, None
    return False, None


def constructor_values(cls: type) -> dict[str, Any] | str:
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
        ok, value = _simple_value(param.name, ann)
        if not ok:
            shown = getattr(ann, "__name__", ann)
            return (
                f"constructor parameter {param.name!r} ({shown}) is neither a simple value nor "
                "a config with defaults; give this class a case in the spec"
            )
        values[param.name] = value
    return values


def _v3_values(cls: type, v2_values: dict[str, Any]) -> dict[str, Any] | str:
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
            if (
                isinstance(ann, type)
                and dataclasses.is_dataclass(ann)
                and dataclasses.is_dataclass(value)
                and not isinstance(value, ann)
            ):
                value = ann(**{f.name: getattr(value, f.name) for f in dataclasses.fields(ann)})
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
        if dataclasses.is_dataclass(value):
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
        vocab = getattr(value, "vocab_size", None) if dataclasses.is_dataclass(value) else None
        if isinstance(vocab, int):
            return vocab
    return None


def auto_case(
    v2_cls: type, v3_cls: type, first_weight: tuple[int, ...] | None = None
) -> Case | str:
    """A case built from constructor signatures, or why there is none."""
    v2_values = constructor_values(v2_cls)
    if isinstance(v2_values, str):
        return v2_values
    v3_values = _v3_values(v3_cls, v2_values)
    if isinstance(v3_values, str):
        return v3_values
    params = list(inspect.signature(v2_cls.__call__).parameters.values())[1:]
    inputs: list[Input] = []
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            return f"__call__ takes *{param.name}; give this class a case in the spec"
        if param.default is not param.empty:
            continue
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
    greedy = len(inputs) == 1 and inputs[0].dtype == "int64"
    return Case(
        inputs=inputs,
        v2_kwargs=v2_values,
        v3_kwargs=v3_values,
        greedy=greedy,
        source="auto",
    )
