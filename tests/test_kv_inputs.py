"""The KV-cache feed of the ladder's L5: real cache-manager inputs, each side in its own order.

No graph is compiled: the cache manager on CPU and the input types are enough.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from migrate_v3.verify.kv_inputs import PROMPT_LENGTH, kv_feed, kv_leaves, kv_slot


@pytest.fixture(scope="module")
def kv() -> Any:
    from max.dtype import DType
    from max.graph import DeviceRef
    from max.nn.kv_cache import MHAKVCacheParams

    return MHAKVCacheParams(
        dtype=DType.float32, n_kv_heads=2, head_dim=8, num_layers=2, devices=[DeviceRef.CPU()], page_size=16
    )


def _v3_types(kv: Any) -> list[Any]:
    from max.graph import DeviceRef
    from max.pipelines.lib.interfaces.batch_processor import modulev3_ragged_kv_symbolic_inputs

    return list(modulev3_ragged_kv_symbolic_inputs(kv_params=kv, device_refs=[DeviceRef.CPU()]))


def _v2_types(kv: Any) -> list[Any]:
    """V2's ragged decoder order: tokens, row offsets, return_n_logits, then the cache."""
    v3 = _v3_types(kv)
    return [v3[0], v3[2], v3[1], *v3[3:]]


def _no_generic(types: list[Any], vocab: int, seed: int) -> list[Any]:
    assert not types, types  # a ragged decoder has no other inputs
    return []


def test_the_cache_inputs_are_found_after_the_decoder_inputs(kv: Any) -> None:
    assert kv_slot(_v3_types(kv), kv) == 3
    assert kv_slot(_v2_types(kv), kv) == 3
    assert kv_slot(_v3_types(kv)[:3], kv) is None  # no cache: the generic feed runs
    assert len(kv_leaves(kv)) == len(_v3_types(kv)) - 3


def test_each_side_gets_the_same_request_in_its_own_order(kv: Any) -> None:
    from max.driver import Buffer

    v2 = kv_feed(_v2_types(kv), kv, 32, 1, _no_generic)
    v3 = kv_feed(_v3_types(kv), kv, 32, 1, _no_generic)
    assert v2 is not None and v3 is not None and len(v2) == len(v3) == len(_v3_types(kv))
    tokens2, offsets2, n_logits2 = v2[:3]
    tokens3, n_logits3, offsets3 = v3[:3]
    np.testing.assert_array_equal(tokens2, tokens3)
    assert tokens2.shape == (PROMPT_LENGTH,) and tokens2.dtype == np.int64 and 0 < tokens2.min() and tokens2.max() < 32
    assert offsets2.tolist() == offsets3.tolist() == [0, PROMPT_LENGTH] and offsets2.dtype == np.uint32
    assert n_logits2.tolist() == n_logits3.tolist() == [1]
    cache = v3[3:]
    assert all(isinstance(b, Buffer) for b in cache)
    # one request, nothing cached yet, its pages inside the cache's blocks
    lengths = cache[1].to_numpy()
    table = cache[2].to_numpy()
    assert lengths.tolist() == [0]
    assert table.shape[0] == 1 and 0 <= int(table[0, 0]) < cache[0].shape[0]
    assert int(cache[3].to_numpy()[0]) == PROMPT_LENGTH  # the longest prompt of the batch


def test_inputs_that_are_neither_go_to_the_generic_feed_in_order(kv: Any) -> None:
    from max.dtype import DType
    from max.graph import DeviceRef, TensorType

    extra = TensorType(DType.float32, ["hidden"], device=DeviceRef.CPU())
    seen: list[Any] = []

    def generic(types: list[Any], vocab: int, seed: int) -> list[Any]:
        seen.extend(types)
        return [np.full((3,), 0.5, dtype=np.float32) for _ in types]

    types = _v3_types(kv)
    fed = kv_feed([types[0], extra, *types[1:]], kv, 32, 1, generic)
    assert fed is not None and seen == [extra] and fed[1].tolist() == [0.5] * 3


def test_a_block_drafters_rows_are_its_batch_of_whole_blocks(kv: Any) -> None:
    """A block drafter's inputs are two whole blocks of static rows (``flat_types``): the cache
    gets two requests of one block each and the row offsets cover every row. One request of
    ``PROMPT_LENGTH`` tokens left 26 of dflash2_qwen3_5's 32 rows outside the batch, so its L5
    compared rows the attention kernels never wrote (max |diff| 6.92; 0 with this feed)."""
    from max.dtype import DType
    from max.graph import DeviceRef, TensorType

    rows = 32
    hidden = TensorType(DType.float32, [rows, 8], device=DeviceRef.CPU())
    tokens = TensorType(DType.int64, [rows], device=DeviceRef.CPU())
    offsets = TensorType(DType.uint32, ["input_row_offsets_len"], device=DeviceRef.CPU())
    cache = kv_leaves(kv)

    def generic(types: list[Any], vocab: int, seed: int) -> list[Any]:
        assert types == [hidden]
        return [np.zeros((rows, 8), dtype=np.float32)]

    fed = kv_feed([hidden, tokens, offsets, *cache], kv, 32, 1, generic)
    assert fed is not None
    assert fed[1].shape == (rows,) and fed[1].dtype == np.int64
    assert fed[2].tolist() == [0, rows // 2, rows]
    lengths = fed[4].to_numpy()
    assert lengths.tolist() == [0, 0]  # two requests, nothing cached yet
    assert int(fed[6].to_numpy()[0]) == rows // 2  # the longest prompt of the batch: one block


def test_a_static_input_that_is_not_the_first_says_nothing_of_the_rows(kv: Any) -> None:
    """gemma3's graph takes a static table beside its symbolic tokens: its feed stays one request
    of ``PROMPT_LENGTH`` tokens (a first try read the table's length as rows)."""
    from max.dtype import DType
    from max.graph import DeviceRef, TensorType

    table = TensorType(DType.float32, [64, 8], device=DeviceRef.CPU())
    types = _v3_types(kv)

    def generic(types: list[Any], vocab: int, seed: int) -> list[Any]:
        return [np.zeros((64, 8), dtype=np.float32) for _ in types]

    fed = kv_feed([types[0], table, *types[1:]], kv, 32, 1, generic)
    assert fed is not None and fed[0].shape == (PROMPT_LENGTH,) and fed[3].tolist() == [0, PROMPT_LENGTH]
