"""Checkpoint sources read without tensor data (plus a tiny tensor reader/writer).

A check must run on a 600 GB checkpoint, or on just its index, on a laptop:
`load_checkpoint` returns names with shapes and dtypes from
`model.safetensors.index.json` (names only, unless the shards sit next to
it), safetensors headers (8-byte little-endian length + JSON, parsed here
without touching the data), a directory of either, a synthetic index
expanded from a `weight_name_patterns.json`, or a plain name list.
`iter_tensors` / `write_safetensors` handle real bytes for round trips.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .tensors import DTYPES, SAFETENSORS_TO_DTYPE, TensorMeta, TypedArray

_MAX_HEADER = 256 * 1024 * 1024


class SourceError(OSError):
    """A checkpoint file is missing or malformed."""


@dataclass
class Checkpoint:
    """Names (in file order) with metadata, plus where they came from."""

    entries: dict[str, TensorMeta]
    kind: str
    files: list[Path] = field(default_factory=list)


def read_header(path: Path) -> dict[str, dict[str, Any]]:
    """The raw safetensors header: name -> {dtype, shape, data_offsets}."""
    try:
        with open(path, "rb") as f:
            raw = f.read(8)
            if len(raw) != 8:
                raise SourceError(f"{path}: too short for a safetensors header")
            (n,) = struct.unpack("<Q", raw)
            if n > _MAX_HEADER:
                raise SourceError(f"{path}: header length {n} is implausible")
            blob = f.read(n)
    except OSError as exc:
        if isinstance(exc, SourceError):
            raise
        raise SourceError(f"{path}: {exc.strerror or exc}") from exc
    if len(blob) != n:
        raise SourceError(f"{path}: header truncated ({len(blob)} of {n} bytes)")
    try:
        header = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SourceError(f"{path}: header is not JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise SourceError(f"{path}: header is not a JSON object")
    header.pop("__metadata__", None)
    return header


def _meta(path: Path, name: str, info: Mapping[str, Any]) -> TensorMeta:
    code = info.get("dtype")
    if code not in SAFETENSORS_TO_DTYPE:
        raise SourceError(f"{path}: {name}: unknown dtype {code!r}")
    shape = info.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise SourceError(f"{path}: {name}: bad shape {shape!r}")
    return TensorMeta(tuple(shape), SAFETENSORS_TO_DTYPE[code])


def read_safetensors_meta(path: Path) -> dict[str, TensorMeta]:
    """Names, shapes and dtypes of one safetensors file, in data-offset order."""
    header = read_header(path)
    items = sorted(header.items(), key=lambda kv: tuple(kv[1].get("data_offsets", (0, 0))))
    return {name: _meta(path, name, info) for name, info in items}


def read_index(path: Path) -> Checkpoint:
    """`model.safetensors.index.json`: names; shapes too if the shards are present."""
    data = _load_json(path)
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict):
        raise SourceError(f"{path}: no weight_map")
    shards = sorted({str(v) for v in weight_map.values()})
    shard_paths = [path.parent / s for s in shards]
    if shard_paths and all(p.is_file() for p in shard_paths):
        metas: dict[str, TensorMeta] = {}
        for p in shard_paths:
            metas.update(read_safetensors_meta(p))
        missing = [n for n in weight_map if n not in metas]
        if missing:
            raise SourceError(f"{path}: {len(missing)} indexed names not in shards, e.g. {missing[0]}")
        return Checkpoint({n: metas[n] for n in weight_map}, "index+shards", [path, *shard_paths])
    return Checkpoint({str(n): TensorMeta(None, None) for n in weight_map}, "index", [path])


def expand_patterns(path: Path) -> Checkpoint:
    """A synthetic index from a `weight_name_patterns.json` ({L} layers, {E} experts)."""
    data = _load_json(path)
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise SourceError(f"{path}: no rows")
    entries: dict[str, TensorMeta] = {}
    for row in rows:
        meta = TensorMeta(tuple(row["shape"]), str(row["dtype"]))
        layers = _span(row.get("layers"))
        experts = _span(row.get("experts"))
        pattern = str(row["pattern"])
        for layer in layers:
            for expert in experts:
                name = pattern.replace("{L}", str(layer)).replace("{E}", str(expert))
                if name in entries:
                    raise SourceError(f"{path}: {name} generated twice")
                entries[name] = meta
    expected = data.get("expected_tensor_count")
    if isinstance(expected, int) and expected != len(entries):
        raise SourceError(f"{path}: expanded {len(entries)} names, file says {expected}")
    return Checkpoint(entries, "patterns", [path])


def _span(bounds: Any) -> range:
    if bounds is None:
        return range(0, 1)
    lo, hi = int(bounds[0]), int(bounds[1])
    return range(lo, hi + 1)


def read_names(path: Path) -> dict[str, TensorMeta]:
    """A plain name list: text (one per line, `#` comments), JSON list, or JSON
    object name -> {shape, dtype}."""
    text = _read_text(path)
    if path.suffix == ".json":
        data = _parse_json(path, text)
        if isinstance(data, list):
            return {str(n): TensorMeta(None, None) for n in data}
        if isinstance(data, dict):
            out: dict[str, TensorMeta] = {}
            for name, info in data.items():
                info = info if isinstance(info, dict) else {}
                shape = info.get("shape")
                out[str(name)] = TensorMeta(
                    tuple(shape) if isinstance(shape, list) else None,
                    str(info["dtype"]) if info.get("dtype") else None,
                )
            return out
        raise SourceError(f"{path}: expected a JSON list or object")
    return {
        line.strip(): TensorMeta(None, None)
        for line in text.splitlines()
        if line.strip() and not line.strip().startswith("#")
    }


def load_checkpoint(path: Path) -> Checkpoint:
    """Dispatch on what `path` is; see module docstring."""
    if not path.exists():
        raise SourceError(f"{path}: no such file or directory")
    if path.is_dir():
        index = path / "model.safetensors.index.json"
        if index.is_file():
            return read_index(index)
        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise SourceError(f"{path}: no model.safetensors.index.json or *.safetensors")
        entries: dict[str, TensorMeta] = {}
        for f in files:
            entries.update(read_safetensors_meta(f))
        return Checkpoint(entries, "safetensors", files)
    if path.name.endswith(".safetensors"):
        return Checkpoint(read_safetensors_meta(path), "safetensors", [path])
    if path.name.endswith(".index.json"):
        return read_index(path)
    if path.suffix == ".json":
        data = _load_json(path)
        if isinstance(data, dict) and "rows" in data:
            return expand_patterns(path)
        if isinstance(data, dict) and "weight_map" in data:
            return read_index(path)
    return Checkpoint(read_names(path), "names", [path])


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SourceError(f"{path}: {exc.strerror or exc}") from exc


def _parse_json(path: Path, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(f"{path}: invalid JSON: {exc}") from exc


def _load_json(path: Path) -> Any:
    return _parse_json(path, _read_text(path))


# -- real bytes (tiny checkpoints, round trips) ------------------------------


def iter_tensors(path: Path) -> Iterator[tuple[str, TypedArray]]:
    """(name, TypedArray) for each tensor of a safetensors file, in file order."""
    import numpy as np

    header = read_header(path)
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        base = 8 + n
        for name, info in sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"])):
            meta = _meta(path, name, info)
            assert meta.dtype is not None and meta.shape is not None
            start, end = info["data_offsets"]
            f.seek(base + start)
            buf = f.read(end - start)
            storage = np.dtype(DTYPES[meta.dtype][2]).newbyteorder("<")
            arr = np.frombuffer(buf, dtype=storage).reshape(meta.shape).copy()
            yield name, TypedArray(arr, meta.dtype)


def write_safetensors(path: Path, tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None) -> None:
    """Write tensors (TypedArray or ndarray) as one safetensors file."""
    import numpy as np

    header: dict[str, Any] = {}
    blobs: list[bytes] = []
    offset = 0
    for name, value in tensors.items():
        if isinstance(value, TypedArray):
            arr, dtype = value.array, value.dtype
        else:
            arr, dtype = np.asarray(value), np.asarray(value).dtype.name
        if dtype not in DTYPES:
            raise ValueError(f"{name}: dtype {dtype} has no safetensors code")
        data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": DTYPES[dtype][0], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = dict(metadata)
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for blob in blobs:
            f.write(blob)
