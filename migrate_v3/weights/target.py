"""The mapping's target: a V3 module's parameter tree, or a plain name list.

ModuleV3 resolves `compile(weights=...)` by attribute path and silently
ignores extra keys, so the only trustworthy target is the real module's
`.parameters`. Building it under `F.lazy()` costs no weight memory (every
`Tensor.zeros` stays unrealised), which is what makes a 671B-parameter
check possible on a laptop. `max` is imported only here, lazily.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .sources import read_names
from .tensors import TensorMeta


class TargetError(RuntimeError):
    """The target module could not be imported or built."""


@dataclass(frozen=True)
class Placement:
    """Where a parameter lives on the device mesh.

    kind: replicated | sharded | device (whole tensor on one mesh device,
    as ExpertParallelMoE places experts) | unknown.
    """

    kind: str
    axis: int | None = None
    device: int | None = None
    mesh_size: int = 1
    shard_shapes: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class TargetParam:
    name: str
    meta: TensorMeta
    placement: Placement | None = None


@dataclass
class Target:
    params: dict[str, TargetParam]
    source: str
    notes: list[str] = field(default_factory=list)


def load_factory(spec: str) -> Callable[..., Any]:
    """`pkg.mod:factory` -> the callable."""
    mod_name, sep, attr = spec.partition(":")
    if not sep or not mod_name or not attr:
        raise TargetError(f"--module must look like pkg.mod:factory, got {spec!r}")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise TargetError(f"cannot import {mod_name}: {exc}") from exc
    obj: Any = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise TargetError(f"{mod_name} has no attribute {attr}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise TargetError(f"{spec} is not callable")
    return obj


def build_module(
    factory: Callable[..., Any],
    config: Mapping[str, Any],
    checkpoint: Mapping[str, TensorMeta] | None = None,
    **options: Any,
) -> Any:
    """Call `factory(config, [checkpoint=], [tp=], [ep=])` under `F.lazy()`.

    A factory without a `tp` parameter (a migrated module's constructor, say)
    is built under `default_device` of a `tp`-CPU mesh: V3 modules place their
    own weights on the mesh they are built on, so the plan reads those placements.
    """
    from contextlib import nullcontext

    from max.experimental import functional as F

    params = inspect.signature(factory).parameters
    kwargs: dict[str, Any] = {}
    if "checkpoint" in params:
        kwargs["checkpoint"] = checkpoint
    tp = options.get("tp") or 1
    mesh_scope: Any = nullcontext()
    for key, value in options.items():
        if key in params:
            kwargs[key] = value
        elif key == "tp" and tp > 1:
            mesh_scope = _cpu_mesh_scope(tp)
        elif value not in (None, 1):
            raise TargetError(f"factory does not accept {key}=")
    with F.lazy(), mesh_scope:
        return factory(dict(config), **kwargs)


def _cpu_mesh_scope(tp: int) -> Any:
    from max.driver import CPU
    from max.experimental.sharding import DeviceMesh
    from max.experimental.tensor import default_device

    return default_device(DeviceMesh(tuple(CPU() for _ in range(tp)), (tp,), ("tp",)))


def module_params(module: Any) -> dict[str, TargetParam]:
    """Names, shapes, dtypes and placements of a (lazily built) V3 module."""
    out: dict[str, TargetParam] = {}
    for name, tensor in module.parameters:
        shape = tuple(int(d) for d in tensor.shape)
        dtype = getattr(tensor.dtype, "name", str(tensor.dtype))
        out[name] = TargetParam(name, TensorMeta(shape, dtype), _placement(tensor))
    return out


def device_shapes(module: Any) -> dict[str, list[tuple[int, ...]]]:
    """Each parameter's shape on each device of its mesh (a Replicated one: the whole shape on each)."""
    out: dict[str, list[tuple[int, ...]]] = {}
    for name, tensor in module.parameters:
        out[name] = [tuple(int(d) for d in shard.shape) for shard in tensor.local_shards]
    return out


def _placement(tensor: Any) -> Placement | None:
    mapping = getattr(tensor, "mapping", None)
    if mapping is None:
        return None
    devices = list(mapping.mesh.devices)
    placements = list(mapping.placements)
    if len(placements) != 1:
        return Placement("unknown", mesh_size=len(devices))
    p = placements[0]
    kind = type(p).__name__
    if len(devices) == 1:
        dev = devices[0]
        label = getattr(dev, "label", "")
        return Placement("device", device=int(dev.id), mesh_size=1) if label != "cpu" else Placement(
            "host", mesh_size=1
        )
    if kind == "Replicated":
        return Placement("replicated", mesh_size=len(devices))
    if kind == "Sharded":
        shards = tuple(tuple(int(d) for d in s.shape) for s in tensor.local_shards)
        return Placement("sharded", axis=int(p.axis), mesh_size=len(devices), shard_shapes=shards)
    return Placement("unknown", mesh_size=len(devices))


def load_module_target(
    spec: str,
    config: Mapping[str, Any],
    checkpoint: Mapping[str, TensorMeta] | None = None,
    **options: Any,
) -> Target:
    """Build `spec` lazily and read its parameter tree."""
    factory = load_factory(spec)
    try:
        module = build_module(factory, config, checkpoint, **options)
    except TargetError:
        raise
    except Exception as exc:  # the factory runs arbitrary model code
        raise TargetError(f"building {spec} failed: {type(exc).__name__}: {exc}") from exc
    return Target(module_params(module), f"module {spec} (built under F.lazy())")


def load_names_target(path: Path) -> Target:
    """A text/JSON list of parameter names (shapes/dtypes if the JSON gives them)."""
    metas = read_names(path)
    return Target({n: TargetParam(n, m) for n, m in metas.items()}, f"names file {path}")
