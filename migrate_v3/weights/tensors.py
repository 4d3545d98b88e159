"""Tensor stand-ins the mapper moves around: metadata, numpy arrays, typed arrays.

The mapper must work on a 92k-name checkpoint index without touching weight
bytes, and on real tensors for round trips. Every rule therefore goes through
the few shape operations here, which accept a `TensorMeta` (shape/dtype only),
a plain `numpy.ndarray`, or a `TypedArray` (numpy storage plus a logical dtype
numpy lacks, such as bfloat16 or float8). numpy is imported lazily so that
metadata-only checks run without it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    import numpy as np

# Logical dtype name -> (safetensors code, itemsize in bytes, numpy storage dtype).
# Names follow max.dtype.DType member names.
DTYPES: dict[str, tuple[str, int, str]] = {
    "bool": ("BOOL", 1, "bool"),
    "uint8": ("U8", 1, "uint8"),
    "int8": ("I8", 1, "int8"),
    "uint16": ("U16", 2, "uint16"),
    "int16": ("I16", 2, "int16"),
    "uint32": ("U32", 4, "uint32"),
    "int32": ("I32", 4, "int32"),
    "uint64": ("U64", 8, "uint64"),
    "int64": ("I64", 8, "int64"),
    "float16": ("F16", 2, "float16"),
    "bfloat16": ("BF16", 2, "uint16"),
    "float32": ("F32", 4, "float32"),
    "float64": ("F64", 8, "float64"),
    "float8_e4m3fn": ("F8_E4M3", 1, "uint8"),
    "float8_e5m2": ("F8_E5M2", 1, "uint8"),
}
SAFETENSORS_TO_DTYPE: dict[str, str] = {code: name for name, (code, _, _) in DTYPES.items()}


def itemsize(dtype: str) -> int:
    """Bytes per element of a logical dtype (KeyError for unknown names)."""
    return DTYPES[dtype][1]


@dataclass(frozen=True)
class TensorMeta:
    """Shape and dtype without data; `None` means the source did not say."""

    shape: tuple[int, ...] | None
    dtype: str | None

    @property
    def nbytes(self) -> int | None:
        if self.shape is None or self.dtype is None or self.dtype not in DTYPES:
            return None
        return math.prod(self.shape) * itemsize(self.dtype)


@dataclass
class TypedArray:
    """A numpy storage array tagged with its logical dtype (e.g. bf16 kept as uint16)."""

    array: np.ndarray
    dtype: str

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.array.shape)


TensorLike = Union[TensorMeta, TypedArray, "np.ndarray"]


def meta_of(x: Any) -> TensorMeta:
    """Shape/dtype of any tensor-like value the mapper accepts."""
    if isinstance(x, TensorMeta):
        return x
    if isinstance(x, TypedArray):
        return TensorMeta(x.shape, x.dtype)
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    return TensorMeta(
        tuple(int(d) for d in shape) if shape is not None else None,
        _dtype_name(dtype) if dtype is not None else None,
    )


def _dtype_name(dtype: Any) -> str:
    name = getattr(dtype, "name", None) or str(dtype)
    return str(name).lower()


def _norm_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} out of range for rank {ndim}")
    return axis % ndim


def _common_dtype(parts: Sequence[TensorMeta], what: str) -> str | None:
    dtypes = {p.dtype for p in parts}
    if len(dtypes) != 1:
        raise ValueError(f"{what}: parts have different dtypes {sorted(map(str, dtypes))}")
    return dtypes.pop()


def _split_typed(xs: Sequence[Any]) -> tuple[list[Any], str | None]:
    """Unwrap TypedArrays to storage arrays; return the shared logical dtype."""
    if all(isinstance(x, TypedArray) for x in xs):
        dtypes = {x.dtype for x in xs}
        if len(dtypes) != 1:
            raise ValueError(f"parts have different dtypes {sorted(dtypes)}")
        return [x.array for x in xs], dtypes.pop()
    if any(isinstance(x, (TypedArray, TensorMeta)) for x in xs):
        raise TypeError("cannot mix tensor kinds within one rule")
    return list(xs), None


def _wrap(arr: np.ndarray, dtype: str | None) -> Any:
    return TypedArray(arr, dtype) if dtype is not None else arr


def stack(parts: Sequence[Any], axis: int = 0) -> Any:
    """Stack equally shaped parts along a new axis."""
    if all(isinstance(p, TensorMeta) for p in parts):
        shapes = {p.shape for p in parts}
        if len(shapes) != 1:
            raise ValueError(f"stack: parts have different shapes {sorted(map(str, shapes))}")
        shape = shapes.pop()
        dtype = _common_dtype(parts, "stack")
        if shape is None:
            return TensorMeta(None, dtype)
        ax = _norm_axis(axis, len(shape) + 1)
        return TensorMeta(shape[:ax] + (len(parts),) + shape[ax:], dtype)
    import numpy as np

    arrays, dtype = _split_typed(parts)
    return _wrap(np.stack(arrays, axis=axis), dtype)


def unstack(x: Any, axis: int = 0) -> list[Any]:
    """Inverse of `stack`: slices along `axis`, dropping that axis."""
    if isinstance(x, TensorMeta):
        if x.shape is None:
            raise ValueError("unstack needs a known shape")
        ax = _norm_axis(axis, len(x.shape))
        part = TensorMeta(x.shape[:ax] + x.shape[ax + 1 :], x.dtype)
        return [part] * x.shape[ax]
    import numpy as np

    (arr,), dtype = _split_typed([x])
    return [_wrap(np.ascontiguousarray(a), dtype) for a in np.moveaxis(arr, axis, 0)]


def concat(parts: Sequence[Any], axis: int = 0) -> Any:
    """Concatenate parts along an existing axis."""
    if all(isinstance(p, TensorMeta) for p in parts):
        dtype = _common_dtype(parts, "concat")
        shapes = [p.shape for p in parts]
        if any(s is None for s in shapes):
            return TensorMeta(None, dtype)
        first = shapes[0]
        assert first is not None
        ax = _norm_axis(axis, len(first))
        for s in shapes:
            assert s is not None
            if len(s) != len(first) or s[:ax] + s[ax + 1 :] != first[:ax] + first[ax + 1 :]:
                raise ValueError(f"concat: incompatible shapes {shapes} on axis {axis}")
        total = sum(s[ax] for s in shapes if s is not None)
        return TensorMeta(first[:ax] + (total,) + first[ax + 1 :], dtype)
    import numpy as np

    arrays, dtype = _split_typed(parts)
    return _wrap(np.concatenate(arrays, axis=axis), dtype)


def split(x: Any, sizes: Sequence[int], axis: int = 0) -> list[Any]:
    """Split along `axis` into pieces of the given sizes (must add up)."""
    shape = meta_of(x).shape
    if shape is None:
        raise ValueError("split needs a known shape")
    ax = _norm_axis(axis, len(shape))
    if sum(sizes) != shape[ax]:
        raise ValueError(f"split sizes {list(sizes)} do not add up to dim {shape[ax]}")
    if isinstance(x, TensorMeta):
        return [TensorMeta(shape[:ax] + (s,) + shape[ax + 1 :], x.dtype) for s in sizes]
    import numpy as np

    (arr,), dtype = _split_typed([x])
    bounds = list(np.cumsum(sizes)[:-1])
    return [_wrap(np.ascontiguousarray(p), dtype) for p in np.split(arr, bounds, axis=ax)]


def reshape(x: Any, shape: Sequence[int]) -> Any:
    """Reshape (one -1 allowed)."""
    if isinstance(x, TensorMeta):
        if x.shape is None:
            return x
        known = math.prod(d for d in shape if d != -1)
        total = math.prod(x.shape)
        resolved = tuple(total // known if d == -1 else d for d in shape)
        if math.prod(resolved) != total:
            raise ValueError(f"cannot reshape {x.shape} to {tuple(shape)}")
        return TensorMeta(resolved, x.dtype)
    (arr,), dtype = _split_typed([x])
    return _wrap(arr.reshape(tuple(shape)), dtype)


def same_bytes(a: Any, b: Any) -> bool:
    """True when two tensors have equal shape, dtype and bytes (metadata: shape/dtype)."""
    if isinstance(a, TensorMeta) or isinstance(b, TensorMeta):
        return meta_of(a) == meta_of(b)
    (x,), dx = _split_typed([a])
    (y,), dy = _split_typed([b])
    return bool(dx == dy and x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes())
