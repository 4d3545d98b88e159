"""What to build and feed for each class: the verify spec.

A spec is either a Python file defining ``CASES: dict[str, Case]`` (or a
function ``cases() -> dict[str, Case]``), or a ``[tool.migrate-v3.verify]``
table in a pyproject.toml. Both sides usually take different constructor
arguments (V2 layers take ``dtype``/``device``), so a case builds each side
separately; the ``DTYPE``/``DEVICE``/``DEVICES`` placeholders are resolved
per side by :func:`resolve`.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


class _Placeholder:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


DTYPE = _Placeholder("DTYPE")
DEVICE = _Placeholder("DEVICE")
DEVICES = _Placeholder("DEVICES")
_TOML_PLACEHOLDERS = {"$dtype": DTYPE, "$device": DEVICE, "$devices": DEVICES}


@dataclass(frozen=True)
class BuildContext:
    """Per-run values a builder may need: a max ``DType`` and ``DeviceRef``."""

    dtype: Any
    device: Any


@dataclass
class Input:
    """One seeded random input. ``dims`` gives the compile type's dims
    (names make a dim symbolic); ``shape`` is what is actually fed."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    dims: tuple[int | str, ...] | None = None
    low: float = 0.0
    high: float = 1.0
    scale: float = 1.0
    fill: float | None = None

    def compile_dims(self) -> tuple[int | str, ...]:
        return self.dims if self.dims is not None else tuple(self.shape)


Builder = Callable[[type, BuildContext], Any]


@dataclass
class Case:
    """How to construct both sides of one class pair and what to feed them.

    Either give ``v2``/``v3`` builders, or ``args``/``kwargs`` shared by both
    sides plus ``v2_args``/``v2_kwargs`` (and ``v3_*``) appended per side.
    ``key_map`` maps a V2 checkpoint key to its V3 path (a weight adapter).
    ``greedy`` marks a text model: input 0 is token ids, output 0 is
    next-token logits, so a greedy decode loop can be compared.
    """

    inputs: list[Input]
    v2: Builder | None = None
    v3: Builder | None = None
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    v2_args: Sequence[Any] = ()
    v2_kwargs: Mapping[str, Any] = field(default_factory=dict)
    v3_args: Sequence[Any] = ()
    v3_kwargs: Mapping[str, Any] = field(default_factory=dict)
    dtype: str | None = None
    tolerance: tuple[float, float] | None = None
    key_map: Callable[[str], str] | None = None
    greedy: bool = False
    source: str = "spec"
    #: why no inputs could be made: both sides are built and checked statically only
    static_reason: str = ""

    def build(self, side: str, cls: type, ctx: BuildContext) -> Any:
        builder = self.v2 if side == "v2" else self.v3
        if builder is not None:
            return builder(cls, ctx)
        extra_args = self.v2_args if side == "v2" else self.v3_args
        extra_kwargs = self.v2_kwargs if side == "v2" else self.v3_kwargs
        args = [resolve(a, ctx) for a in (*self.args, *extra_args)]
        kwargs = {k: resolve(v, ctx) for k, v in {**self.kwargs, **extra_kwargs}.items()}
        return cls(*args, **kwargs)


def resolve(value: Any, ctx: BuildContext) -> Any:
    """Replace DTYPE/DEVICE/DEVICES placeholders with this run's values."""
    if value is DTYPE:
        return ctx.dtype
    if value is DEVICE:
        return ctx.device
    if value is DEVICES:
        return [ctx.device]
    return value


@dataclass
class Spec:
    """Cases by class name, plus run-wide defaults from the spec."""

    cases: dict[str, Case] = field(default_factory=dict)
    dtype: str | None = None
    only: list[str] | None = None
    pairs: dict[str, str] = field(default_factory=dict)


def load_spec(path: Path) -> Spec:
    """Load a ``.py`` spec or the verify table of a ``.toml`` file."""
    if path.suffix == ".toml":
        return _spec_from_toml(path)
    module_name = f"_migrate_v3_spec_{abs(hash(str(path.resolve())))}"
    loader_spec = importlib.util.spec_from_file_location(module_name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise ValueError(f"cannot load spec file {path}")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[module_name] = module
    loader_spec.loader.exec_module(module)
    cases = getattr(module, "CASES", None)
    if cases is None and callable(getattr(module, "cases", None)):
        cases = module.cases()
    if not isinstance(cases, dict):
        raise ValueError(f"{path}: define CASES: dict[str, Case] or cases() -> dict")
    for case in cases.values():
        case.source = f"spec {path.name}"
    return Spec(
        cases=dict(cases),
        dtype=getattr(module, "DTYPE_NAME", None),
        only=getattr(module, "ONLY", None),
        pairs=dict(getattr(module, "PAIRS", {})),
    )


def find_pyproject_spec(*roots: Path) -> Path | None:
    """The nearest pyproject.toml above any root that has a verify table."""
    for root in roots:
        for d in [root, *root.resolve().parents]:
            candidate = d / "pyproject.toml"
            if candidate.is_file():
                if _verify_table(candidate) is not None:
                    return candidate
                break
    return None


def _verify_table(path: Path) -> dict[str, Any] | None:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    table = data.get("tool", {}).get("migrate-v3", {}).get("verify")
    return table if isinstance(table, dict) else None


def _toml_value(value: Any) -> Any:
    if isinstance(value, str):
        return _TOML_PLACEHOLDERS.get(value, value)
    if isinstance(value, list):
        return [_toml_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _toml_value(v) for k, v in value.items()}
    return value


def _spec_from_toml(path: Path) -> Spec:
    table = _verify_table(path)
    if table is None:
        raise ValueError(f"{path}: no [tool.migrate-v3.verify] table")
    cases: dict[str, Case] = {}
    for name, raw in table.get("classes", {}).items():
        inputs = [
            Input(
                shape=tuple(i["shape"]),
                dtype=i.get("dtype", "float32"),
                dims=tuple(i["dims"]) if "dims" in i else None,
                low=i.get("low", 0.0),
                high=i.get("high", 1.0),
                scale=i.get("scale", 1.0),
                fill=i.get("fill"),
            )
            for i in raw.get("inputs", [])
        ]
        tol = raw.get("tolerance")
        cases[name] = Case(
            inputs=inputs,
            args=_toml_value(raw.get("args", [])),
            kwargs=_toml_value(raw.get("kwargs", {})),
            v2_args=_toml_value(raw.get("v2_args", [])),
            v2_kwargs=_toml_value(raw.get("v2_kwargs", {})),
            v3_args=_toml_value(raw.get("v3_args", [])),
            v3_kwargs=_toml_value(raw.get("v3_kwargs", {})),
            dtype=raw.get("dtype"),
            tolerance=(float(tol[0]), float(tol[1])) if tol else None,
            greedy=bool(raw.get("greedy", False)),
            source=f"pyproject {path}",
        )
    return Spec(
        cases=cases,
        dtype=table.get("dtype"),
        only=table.get("only"),
        pairs=dict(table.get("pairs", {})),
    )
