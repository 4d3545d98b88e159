"""Checkpoint metadata readers: safetensors headers, index.json, patterns, name lists."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest

from migrate_v3.weights.sources import (
    SourceError,
    expand_patterns,
    iter_tensors,
    load_checkpoint,
    read_safetensors_meta,
    write_safetensors,
)
from migrate_v3.weights.synth import deepseek_v3_meta
from migrate_v3.weights.tensors import TensorMeta, TypedArray

DATA = Path("/work/shared/data/deepseek_v3")
PATTERNS = DATA / "weight_name_patterns.json"


def sample() -> dict[str, object]:
    return {
        "a.weight": TypedArray(np.arange(6, dtype=np.uint16).reshape(2, 3), "bfloat16"),
        "b.scale": np.linspace(0, 1, 4, dtype=np.float32),
        "c.fp8": TypedArray(np.arange(8, dtype=np.uint8).reshape(2, 4), "float8_e4m3fn"),
    }


def test_header_roundtrip_without_data(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    write_safetensors(path, sample())
    meta = read_safetensors_meta(path)
    assert meta == {
        "a.weight": TensorMeta((2, 3), "bfloat16"),
        "b.scale": TensorMeta((4,), "float32"),
        "c.fp8": TensorMeta((2, 4), "float8_e4m3fn"),
    }
    tensors = dict(iter_tensors(path))
    assert tensors["c.fp8"].array.tobytes() == np.arange(8, dtype=np.uint8).tobytes()
    assert tensors["b.scale"].dtype == "float32"


def test_reads_files_written_by_the_safetensors_package(tmp_path: Path) -> None:
    import safetensors.numpy as st
    from safetensors import safe_open

    path = tmp_path / "ref.safetensors"
    st.save_file({"x": np.zeros((3, 5), np.float16), "y": np.ones(7, np.int64)}, str(path))
    assert read_safetensors_meta(path) == {"x": TensorMeta((3, 5), "float16"), "y": TensorMeta((7,), "int64")}
    ours = tmp_path / "ours.safetensors"
    write_safetensors(ours, sample())
    with safe_open(str(ours), framework="numpy") as f:
        assert f.get_slice("a.weight").get_dtype() == "BF16"
        assert f.get_slice("c.fp8").get_shape() == [2, 4]


@pytest.mark.parametrize(
    "blob, message",
    [
        (b"\x01\x02", "too short"),
        (struct.pack("<Q", 1 << 40), "implausible"),
        (struct.pack("<Q", 10) + b"{}", "truncated"),
        (struct.pack("<Q", 4) + b"nope", "not JSON"),
        (struct.pack("<Q", 31) + b'{"x":{"dtype":"Q9","shape":[]}}', "unknown dtype"),
        (struct.pack("<Q", 32) + b'{"x":{"dtype":"F32","shape":[-1]}}'[:32], "not JSON"),
        (struct.pack("<Q", 34) + b'{"x":{"dtype":"F32","shape":[-1]}}', "bad shape"),
    ],
)
def test_malformed_headers(tmp_path: Path, blob: bytes, message: str) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(blob)
    with pytest.raises(SourceError, match=message):
        read_safetensors_meta(path)


def test_index_with_and_without_shards(tmp_path: Path) -> None:
    write_safetensors(tmp_path / "s1.safetensors", {"a.weight": sample()["a.weight"]})
    write_safetensors(tmp_path / "s2.safetensors", {"b.scale": sample()["b.scale"]})
    index = {"metadata": {}, "weight_map": {"a.weight": "s1.safetensors", "b.scale": "s2.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    ck = load_checkpoint(tmp_path)
    assert ck.kind == "index+shards"
    assert ck.entries["a.weight"] == TensorMeta((2, 3), "bfloat16")
    (tmp_path / "s2.safetensors").unlink()
    names_only = load_checkpoint(tmp_path / "model.safetensors.index.json")
    assert names_only.kind == "index"
    assert names_only.entries["b.scale"] == TensorMeta(None, None)


def test_directory_of_safetensors(tmp_path: Path) -> None:
    write_safetensors(tmp_path / "x-1.safetensors", {"a.weight": sample()["a.weight"]})
    write_safetensors(tmp_path / "x-2.safetensors", {"c.fp8": sample()["c.fp8"]})
    ck = load_checkpoint(tmp_path)
    assert ck.kind == "safetensors" and set(ck.entries) == {"a.weight", "c.fp8"}


def test_missing_path_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such file"):
        load_checkpoint(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="no model.safetensors.index.json"):
        load_checkpoint(tmp_path / "empty")


def test_name_lists(tmp_path: Path) -> None:
    (tmp_path / "n.txt").write_text("# comment\na.b\n\nc.d\n")
    assert list(load_checkpoint(tmp_path / "n.txt").entries) == ["a.b", "c.d"]
    (tmp_path / "n.json").write_text(json.dumps({"a.b": {"shape": [2], "dtype": "float32"}}))
    assert load_checkpoint(tmp_path / "n.json").entries == {"a.b": TensorMeta((2,), "float32")}


def test_deepseek_pattern_expansion_is_91991_names() -> None:
    ck = expand_patterns(PATTERNS)
    assert len(ck.entries) == 91_991
    total = sum(math.prod(m.shape or ()) for m in ck.entries.values())
    assert total == 684_531_386_000  # the figure SOURCE.md cross-checks against a public report
    assert ck.entries["model.layers.61.mlp.experts.255.down_proj.weight_scale_inv"] == TensorMeta(
        (56, 16), "float32"
    )
    assert "model.layers.2.mlp.experts.0.up_proj.weight" not in ck.entries  # layer 2 is dense


def test_pattern_expansion_checks_expected_count(tmp_path: Path) -> None:
    data = json.loads(PATTERNS.read_text())
    data["expected_tensor_count"] += 1
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(SourceError, match="expanded 91991 names"):
        expand_patterns(bad)


def test_synthetic_deepseek_meta_matches_pattern_file() -> None:
    cfg = json.loads((DATA / "config.json").read_text())
    assert deepseek_v3_meta(cfg) == expand_patterns(PATTERNS).entries
