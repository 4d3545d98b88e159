"""Runtime inputs for a graph that reads a paged KV cache, from MAX's own cache manager.

Seeded random numbers are fine for tokens and activations, not for a KV
cache's lookup table and lengths: the kernels index pages with them, and the
run dies (SIGSEGV seen in the V2 reference). A real ``PagedKVCacheManager`` on
CPU with one claimed request of ``PROMPT_LENGTH`` tokens gives inputs the
kernels accept; the other inputs of a ragged decoder (its tokens, row offsets
and ``return_n_logits``) are made to agree with that request. V2 and V3 take
those inputs in different orders, so each side's list is built from its own
input types, the same values by role.
"""

from __future__ import annotations

from typing import Any

#: tokens of the one request both sides run (the generic feed's size for a symbolic dim)
PROMPT_LENGTH = 6


def kv_leaves(kv: Any) -> list[Any]:
    """The input types ``kv`` adds to a graph, flattened as the graph takes them."""
    from max import tree

    return list(tree.leaves(kv.get_symbolic_inputs()))


def kv_slot(types: list[Any], kv: Any) -> int | None:
    """Where ``kv``'s inputs start in ``types`` (same kind, dtype and rank, in order), or None."""
    want = kv_leaves(kv)

    def same(a: Any, b: Any) -> bool:
        return type(a) is type(b) and a.dtype == b.dtype and len(a.shape) == len(b.shape)

    for start in range(len(types) - len(want) + 1):
        if all(same(types[start + i], w) for i, w in enumerate(want)):
            return start
    return None


def runtime_kv_inputs(kv: Any, tokens: Any) -> list[Any]:
    """A fresh paged cache on CPU with one request of ``tokens`` claimed: its runtime inputs."""
    from max import tree
    from max.driver import CPU
    from max.engine import InferenceSession
    from max.pipelines.context import TextContext, TokenBuffer
    from max.pipelines.kv_cache import PagedKVCacheManager
    from max.pipelines.modeling.types import RequestID

    manager = PagedKVCacheManager(
        params=kv, session=InferenceSession(devices=[CPU()]), total_num_pages=8, max_batch_size=2
    )
    ctx = TextContext(request_id=RequestID(), max_length=int(kv.page_size) * 4, tokens=TokenBuffer(tokens))
    manager.claim(ctx)
    manager.alloc(ctx)
    return list(tree.leaves(manager.runtime_inputs([[ctx]])))


def _role(t: Any) -> str | None:
    """A ragged decoder's own input, by its first dimension's name."""
    if len(t.shape) != 1:
        return None
    name = str(t.shape[0])
    if name == "total_seq_len":
        return "tokens"
    if "row_offsets" in name:
        return "offsets"
    if name == "return_n_logits":
        return "n_logits"
    return None


def kv_feed(types: list[Any], kv: Any, vocab: int, seed: int,
            generic: Any) -> list[Any] | None:
    """Inputs for ``types`` (one side's, in its order) when they hold ``kv``'s inputs; else None.

    ``generic(types, vocab, seed)`` feeds the inputs that are neither the KV
    cache's nor a ragged decoder's own; the same call on the other side gives
    the same values, as long as both list those inputs in the same order.
    """
    import numpy as np

    start = kv_slot(types, kv)
    if start is None:
        return None
    end = start + len(kv_leaves(kv))
    rng = np.random.default_rng(seed)
    tokens = rng.integers(1, max(2, vocab - 1), size=PROMPT_LENGTH).astype(np.int64)
    by_role: dict[str, Any] = {
        "tokens": tokens,
        "offsets": np.array([0, PROMPT_LENGTH], dtype=np.uint32),
        "n_logits": np.array([1], dtype=np.int64),
    }
    others = [t for i, t in enumerate(types) if not start <= i < end and _role(t) is None]
    fed_others = iter(generic(others, vocab, seed))
    out: list[Any] = []
    for i, t in enumerate(types):
        if i == start:
            out.extend(runtime_kv_inputs(kv, tokens))
        elif start < i < end:
            continue
        elif (role := _role(t)) is not None:
            dtype = str(t.dtype).replace("DType.", "")
            out.append(by_role[role].astype(dtype))
        else:
            out.append(next(fed_others))
    return out
