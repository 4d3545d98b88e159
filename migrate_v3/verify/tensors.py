"""Host arrays for verify: seeded weights and inputs, checkpoints, outputs.

Everything is numpy until it is handed to max; bfloat16, which numpy lacks,
travels as uint16 bit patterns viewed as bfloat16 by a ``Buffer``.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from migrate_v3.verify.spec import Input

NUMPY_DTYPES = {
    "float32": np.float32, "float64": np.float64, "float16": np.float16,
    "int64": np.int64, "int32": np.int32, "int8": np.int8, "uint8": np.uint8,
    "uint32": np.uint32, "bool": np.bool_,
}


def _rng(seed: int, key: str) -> np.random.Generator:
    """One generator per name, so a value never depends on iteration order."""
    return np.random.default_rng([seed, zlib.crc32(key.encode())])


def _to_bf16_bits(values: np.ndarray) -> np.ndarray:
    bits = values.astype(np.float32).view(np.uint32)
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)  # round to nearest even
    return (rounded >> 16).astype(np.uint16)


def to_device_array(values: np.ndarray, dtype: str) -> Any:
    """A DLPack-capable array of ``dtype``; bfloat16 becomes a Buffer view."""
    if dtype == "bfloat16":
        from max.driver import Buffer
        from max.dtype import DType

        return Buffer.from_numpy(_to_bf16_bits(values)).view(DType.bfloat16)
    return np.ascontiguousarray(values.astype(NUMPY_DTYPES[dtype]))


def random_weight(key: str, shape: tuple[int, ...], dtype: str, seed: int) -> Any:
    """Seeded values with layer-plausible scale: norms near 1, matrices 1/sqrt(fan_in)."""
    rng = _rng(seed, key)
    if dtype in ("float32", "float64", "float16", "bfloat16"):
        leaf = key.rsplit(".", 1)[-1]
        if len(shape) <= 1 and ("weight" in leaf or "gamma" in leaf or "scale" in leaf):
            values = 1.0 + 0.1 * rng.standard_normal(shape)
        elif len(shape) <= 1:
            values = 0.1 * rng.standard_normal(shape)
        else:
            fan_in = int(np.prod(shape[1:])) or 1
            values = rng.standard_normal(shape) / np.sqrt(fan_in)
        return to_device_array(values, dtype)
    return to_device_array(rng.integers(0, 4, size=shape), dtype)


def random_state_dict(
    signature: Mapping[str, tuple[tuple[int, ...], str]], seed: int
) -> dict[str, Any]:
    return {k: random_weight(k, shape, dtype, seed) for k, (shape, dtype) in signature.items()}


def random_input(spec: Input, index: int, seed: int, dtype: str) -> Any:
    """Seeded input; ``spec.dtype == '$dtype'`` follows the run's dtype."""
    rng = _rng(seed, f"input{index}")
    resolved = dtype if spec.dtype == "$dtype" else spec.dtype
    if spec.fill is not None:
        values = np.full(spec.shape, spec.fill)
    elif resolved.startswith(("int", "uint")):
        values = rng.integers(int(spec.low), int(spec.high), size=spec.shape)
    elif resolved == "bool":
        values = rng.integers(0, 2, size=spec.shape)
    else:
        values = spec.scale * rng.standard_normal(spec.shape)
    return to_device_array(values, resolved)


def to_numpy(value: Any) -> tuple[np.ndarray, str]:
    """A host float/int array and its max dtype name, from a Buffer or Tensor."""
    from max.dtype import DType

    buffer = getattr(value, "driver_tensor", value)
    if hasattr(buffer, "is_host") and not buffer.is_host:
        from max.driver import CPU

        buffer = buffer.to(CPU())
    dtype = buffer.dtype
    name = str(dtype).replace("DType.", "")
    if dtype == DType.bfloat16:
        bits = buffer.view(DType.uint16).to_numpy().astype(np.uint32) << 16
        return bits.view(np.float32), name
    return np.asarray(buffer.to_numpy()), name


def load_checkpoint(path: Path) -> tuple[dict[str, Any], dict[str, tuple[tuple[int, ...], str]]]:
    """Tensors and signatures of a safetensors file or directory of shards."""
    from max.graph.weights import SafetensorWeights

    files = sorted(path.glob("*.safetensors")) if path.is_dir() else [path]
    if not files:
        raise FileNotFoundError(f"no .safetensors files in {path}")
    weights = SafetensorWeights(files)
    values: dict[str, Any] = {}
    signature: dict[str, tuple[tuple[int, ...], str]] = {}
    for name, entry in weights.items():
        data = entry.data()
        values[name] = data.data
        signature[name] = (
            tuple(int(d) for d in data.shape),
            str(data.dtype).replace("DType.", ""),
        )
    return values, signature
