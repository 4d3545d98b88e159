"""Build, compile and run one class on each side.

V2: construct, ``load_state_dict``, trace a ``Graph``, ``session.load`` with
the state dict as weights registry, ``execute``. V3: construct under
``F.lazy()`` and ``default_dtype``, ``.to(device)``, ``compile(weights=...)``,
call. Only this module (and ``tensors``) touches ``max``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from migrate_v3.verify.spec import BuildContext, Case, Input
from migrate_v3.verify.tensors import random_input, to_numpy

Signature = dict[str, tuple[tuple[int, ...], str]]
Runner = Callable[[Sequence[Any]], list[Any]]


@dataclass(frozen=True)
class Target:
    """The device a run uses, in both spellings max needs."""

    ref: Any  # max.graph.DeviceRef
    device: Any  # max.driver.Device
    label: str


def make_target(spec: str) -> Target:
    """``cpu`` or ``gpu``/``gpu:N``; raises ValueError when no accelerator exists."""
    from max.driver import CPU, Accelerator, accelerator_count
    from max.graph import DeviceRef

    if spec == "cpu":
        return Target(DeviceRef.CPU(), CPU(), "cpu")
    kind, _, idx = spec.partition(":")
    if kind not in ("gpu", "accelerator"):
        raise ValueError(f"unknown device {spec!r} (use cpu or gpu[:N])")
    index = int(idx or 0)
    if accelerator_count() <= index:
        raise ValueError(f"device {spec!r} requested but {accelerator_count()} accelerators exist")
    return Target(DeviceRef.GPU(index), Accelerator(index), f"gpu:{index}")


def dtype_of(name: str) -> Any:
    from max.dtype import DType

    return getattr(DType, name)


def _name(dtype: Any) -> str:
    return str(dtype).replace("DType.", "")


def v2_base() -> type:
    from max.nn.layer import Module

    return Module


def v3_base() -> type:
    from max.experimental.nn import Module

    return Module


def _v2_shape(weight: Any) -> tuple[int, ...]:
    """A V2 weight's shape; a shard's shape needs a graph, so a copy gets a throwaway one."""
    try:
        return tuple(int(d) for d in weight.shape.static_dims)
    except ValueError:  # "no parent graph": a weight shard, shaped by its sharding strategy
        import copy

        from max.graph import Graph

        with Graph("migrate_v3_weight_shapes", input_types=[]):
            return tuple(int(d) for d in copy.copy(weight).shape.static_dims)


def v2_signature(module: Any) -> Signature:
    return {name: (_v2_shape(w), _name(w.dtype)) for name, w in module.raw_state_dict().items()}


def v3_signature(module: Any) -> Signature:
    """Each parameter ``compile`` asks the weights for: a tensor shared by two modules (tied
    embeddings) is named once, by its first path, as ``Module.compile`` names it."""
    seen: set[int] = set()
    out: Signature = {}
    for name, t in module.parameters:
        if id(t) not in seen:
            seen.add(id(t))
            out[name] = (tuple(int(d) for d in t.shape), _name(t.dtype))
    return out


def v3_linear_paths(module: Any) -> set[str]:
    """Attribute paths of the V3 Linear layers (root is ``""``)."""
    from max.experimental.nn import Linear

    from migrate_v3.verify.hparams import v3_modules

    return {path for path, m in v3_modules(module) if isinstance(m, Linear)}


def build_v2(case: Case, cls: type, target: Target, dtype: str) -> Any:
    return case.build("v2", cls, BuildContext(dtype_of(dtype), target.ref))


def build_v3(case: Case, cls: type, target: Target, dtype: str) -> Any:
    """Construct and move to the device under ``F.lazy()`` (random inits stay symbolic)."""
    from max.experimental import functional as F
    from max.experimental.tensor import default_dtype

    with F.lazy(), default_dtype(dtype_of(dtype)):
        module = case.build("v3", cls, BuildContext(dtype_of(dtype), target.ref))
        # moved while still lazy, as a pipeline's _instantiate_module does: an eager
        # .to() realises every random init, compiling interpreter kernels on the way
        return module.to(target.device)


def input_types(inputs: Sequence[Input], target: Target, dtype: str) -> list[Any]:
    from max.graph import TensorType

    return [
        TensorType(dtype_of(dtype if i.dtype == "$dtype" else i.dtype), list(i.compile_dims()),
                   device=target.ref)
        for i in inputs
    ]


def make_inputs(inputs: Sequence[Input], seed: int, dtype: str) -> list[Any]:
    return [random_input(spec, n, seed, dtype) for n, spec in enumerate(inputs)]


def to_buffers(arrays: Sequence[Any], target: Target) -> list[Any]:
    from max.driver import Buffer

    out = []
    for a in arrays:
        buf = a if isinstance(a, Buffer) else Buffer.from_dlpack(a)
        out.append(buf.to(target.device))
    return out


def flatten_outputs(value: Any) -> list[Any]:
    """Leaves of a returned pytree (tuple, list, dict, dataclass) in order."""
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in flatten_outputs(v)]
    if isinstance(value, dict):
        return [leaf for k in sorted(value) for leaf in flatten_outputs(value[k])]
    if hasattr(value, "__dataclass_fields__"):
        return [
            leaf for k in value.__dataclass_fields__ for leaf in flatten_outputs(getattr(value, k))
        ]
    if value is None:
        return []
    return [value]


def compile_v2(
    module: Any, weights: Mapping[str, Any], types: Sequence[Any], target: Target, session: Any
) -> Runner:
    """load_state_dict (strict), trace a Graph, session.load with the registry."""
    module.load_state_dict(dict(weights))
    graph = module.trace(*types)
    model = session.load(graph, weights_registry=module.state_dict())

    def run(arrays: Sequence[Any]) -> list[Any]:
        return [to_numpy(o) for o in model.execute(*to_buffers(arrays, target))]

    return run


def compile_v3(
    module: Any, weights: Mapping[str, Any], types: Sequence[Any], target: Target
) -> Runner:
    compiled = module.compile(*types, weights=dict(weights))

    def run(arrays: Sequence[Any]) -> list[Any]:
        return [to_numpy(o) for o in flatten_outputs(compiled(*to_buffers(arrays, target)))]

    return run


def new_session(target: Target) -> Any:
    from max.engine import InferenceSession

    return InferenceSession(devices=[target.device])
