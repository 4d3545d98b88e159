"""Runtime inputs for a graph that reads a paged KV cache, from MAX's own cache manager.

Seeded random numbers are fine for tokens and activations, not for a KV
cache's lookup table and lengths: the kernels index pages with them, and the
run dies (SIGSEGV seen in the V2 reference). A real ``PagedKVCacheManager`` on
CPU with one claimed request of ``PROMPT_LENGTH`` tokens (a block drafter's
``BLOCKS`` requests of one block each, its rows) gives inputs the
kernels accept; the other inputs of a ragged decoder (its tokens, row offsets
and ``return_n_logits``) are made to agree with that request. V2 and V3 take
those inputs in different orders, so each side's list is built from its own
input types, the same values by role.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
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


def runtime_kv_inputs(kv: Any, tokens: Any, *more: Any) -> list[Any]:
    """A fresh paged cache on CPU with a request of ``tokens`` (and one of each of ``more``)
    claimed: its runtime inputs."""
    from max import tree
    from max.driver import CPU
    from max.engine import InferenceSession
    from max.pipelines.context import TextContext, TokenBuffer
    from max.pipelines.kv_cache import PagedKVCacheManager
    from max.pipelines.modeling.types import RequestID

    manager = PagedKVCacheManager(
        params=kv, session=InferenceSession(devices=[CPU()]), total_num_pages=8, max_batch_size=max(2, 1 + len(more))
    )
    batch = []
    for request in (tokens, *more):
        ctx = TextContext(request_id=RequestID(), max_length=int(kv.page_size) * 4, tokens=TokenBuffer(request))
        manager.claim(ctx)
        manager.alloc(ctx)
        batch.append(ctx)
    return list(tree.leaves(manager.runtime_inputs([batch])))


def _block_rows(types: list[Any]) -> int | None:
    """The token rows of a block drafter's inputs (:func:`flat_types`: its first input, tokens or
    activations, has a static first dim of ``BLOCKS`` whole blocks), or None: its batch is then
    ``BLOCKS`` requests of one block each, so that the cache's row offsets cover every row the
    kernels read. (Only the first input: another static input, a table, says nothing of the rows.)"""
    first = types[0] if types else None
    dim = str(first.shape[0]) if first is not None and len(first.shape) in (1, 2) else ""
    return int(dim) if dim.isdigit() and int(dim) > 1 and int(dim) % BLOCKS == 0 else None


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
    rows = _block_rows(types[:start])
    lengths = [rows // BLOCKS] * BLOCKS if rows else [PROMPT_LENGTH]
    requests = [rng.integers(1, max(2, vocab - 1), size=n).astype(np.int64) for n in lengths]
    by_role: dict[str, Any] = {
        "tokens": np.concatenate(requests),
        "offsets": np.cumsum([0, *lengths]).astype(np.uint32),
        "n_logits": np.array([1], dtype=np.int64),
    }

    def role(t: Any) -> str | None:  # (a block drafter's token ids: its whole rows)
        found = _role(t)
        if found is None and rows and [str(d) for d in t.shape] == [str(rows)] and "int" in str(t.dtype):
            return "tokens"
        return found

    others = [t for i, t in enumerate(types) if not start <= i < end and role(t) is None]
    fed_others = iter(generic(others, vocab, seed))
    out: list[Any] = []
    for i, t in enumerate(types):
        if i == start:
            out.extend(runtime_kv_inputs(kv, *requests))
        elif start < i < end:
            continue
        elif (found := role(t)) is not None:
            dtype = str(t.dtype).replace("DType.", "")
            out.append(by_role[found].astype(dtype))
        else:
            out.append(next(fed_others))
    return out


# --- a root that takes a paged KV cache: traced through flat inputs, as its pipeline would -------
#
# A ragged decoder's ``__call__``/``forward`` takes the KV cache as one structured argument (a
# ``PagedCacheValues``) beside its row offsets; a graph takes flat inputs. MAX's pipelines give such
# a module a flat entry point: V2's ``Llama3.trace`` adapts the graph's flat inputs (the KV leaves
# last, unflattened by the KV params), V3's ``Llama3.forward(tokens, ..., *variadic_args)`` does the
# same in ``forward``. :func:`flat_kv_class` gives a class that entry point and an ``input_types()``
# (the flat types), on either side, without touching its weights or their names.

#: a parameter that is the KV cache (``kv_collection``, ``kv_cache``, ``kv_caches``, ``kv``)
_KV_PARAM = re.compile(r"(?:^|_)kv(?:_(?:collection|cache|inputs?)s?)?$", re.I)
#: per-batch inputs of a ragged decoder, by parameter name: the canonical graph input
#: (``max.pipelines.lib.interfaces.batch_processor.ragged_batch_inputs``'s names and dims)
_ROW_OFFSETS = re.compile(r"row_offsets$")
TOKEN_NAMES = {"tokens", "input_ids", "ids", "token_ids", "input_tokens"}
#: requests of a block drafter's batch (:func:`flat_types`)
BLOCKS = 2


@dataclass(frozen=True)
class FlatLayout:
    """Where each required parameter of a KV-taking entry point sits among the flat inputs.

    ``roles`` holds one ``(parameter, role)`` per required positional parameter, in the
    signature's order; role is ``kv``, ``tokens``, ``row_offsets``, ``return_n_logits`` or
    ``hidden`` (activations, ``[total_seq_len, hidden]``). The flat inputs are the non-KV ones in
    that order, then the KV cache's leaves (the order MAX's ragged decoders take them in).
    """

    roles: tuple[tuple[str, str], ...]

    @property
    def heads(self) -> list[str]:
        return [name for name, role in self.roles if role != "kv"]


def _required(fn: Any) -> list[inspect.Parameter] | None:
    try:
        params = list(inspect.signature(fn).parameters.values())[1:]
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    return [p for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def is_kv_param(name: str) -> bool:
    return _KV_PARAM.search(name) is not None


def ragged_layout(fn: Any) -> FlatLayout | str:
    """The flat layout of ``fn`` (an unbound ``__call__``/``forward``), or why it has none.

    It has one when its required parameters are one KV cache, input row offsets and otherwise
    token ids, ``return_n_logits`` or activations: a ragged decoder, whose activations are
    ``[total_seq_len, hidden]``. Anything else it needs (a layer index, rotary tables) has
    no input type to give.
    """
    params = _required(fn)
    if params is None:
        return "its entry point takes *args"
    roles: list[tuple[str, str]] = []
    for p in params:
        if is_kv_param(p.name):
            role = "kv"
        elif _ROW_OFFSETS.search(p.name):
            role = "row_offsets"
        elif p.name in TOKEN_NAMES:
            role = "tokens"
        elif p.name == "return_n_logits":
            role = "return_n_logits"
        elif re.search(r"cache|offsets|signal|layer_idx|freqs|position", p.name, re.I):
            return f"input {p.name!r} is runtime state with no input type of a ragged batch"
        else:
            role = "hidden"
        roles.append((p.name, role))
    found = [role for _, role in roles]
    if found.count("kv") != 1 or "row_offsets" not in found:
        return "not one KV cache beside input row offsets (no ragged batch to lay out)"
    return FlatLayout(tuple(roles))


def kv_params_in(values: Any) -> Any:
    """The KV cache parameters among constructor values (or a config's ``kv_params``), or None:
    an object that gives a cache's symbolic inputs and unflattens them."""

    def usable(obj: Any) -> bool:
        return callable(getattr(obj, "get_symbolic_inputs", None)) and callable(
            getattr(obj, "unflatten_kv_inputs", None))

    for value in values:
        if usable(value):
            return value
        try:
            held = getattr(value, "kv_params", None)
        except Exception:  # noqa: BLE001 - a config property that needs more than the tiny config
            held = None
        if usable(held):
            return held
    return None


def flat_types(layout: FlatLayout, kv: Any, device: Any, dtype: Any, hidden: int | None,
               block_size: int | None = None) -> list[Any]:
    """The flat input types of ``layout``: its per-batch inputs as MAX's ragged batch declares
    them (``total_seq_len`` tokens, ``input_row_offsets_len`` offsets, ``return_n_logits`` on the
    CPU), activations ``[total_seq_len, hidden]`` in ``dtype``, then the KV cache's inputs.

    With a ``block_size`` (a block drafter: every request a block of that many tokens, as
    MAX's block driver lays out its draft batch, and reshapes the rows into blocks), the token
    rows are two whole blocks, ``2 * block_size`` (a graph input's dim cannot be an expression
    such as ``batch_size * block_size``).
    """
    from max.dtype import DType
    from max.graph import DeviceRef, TensorType

    rows: Any = BLOCKS * block_size if block_size else "total_seq_len"
    types: list[Any] = []
    for name, role in layout.roles:
        if role == "kv":
            continue
        if role == "tokens":
            types.append(TensorType(DType.int64, [rows], device=device))
        elif role == "row_offsets":
            types.append(TensorType(DType.uint32, ["input_row_offsets_len"], device=device))
        elif role == "return_n_logits":
            types.append(TensorType(DType.int64, ["return_n_logits"], device=DeviceRef.CPU()))
        else:
            if hidden is None:
                raise ValueError(f"no hidden size for input {name!r}")
            types.append(TensorType(dtype, [rows, hidden], device=device))
    return [*types, *kv_leaves(kv)]


def _arranged(layout: FlatLayout, params: list[inspect.Parameter], heads: list[Any], kv: Any) -> list[Any]:
    """Arguments for ``params`` (the side's own entry point) from the flat heads and the KV
    collection: by name where the side's parameter is named as one in ``layout``, else the next
    unused head in order."""
    by_name = dict(zip(layout.heads, heads, strict=True))
    unused = [n for n in layout.heads if n not in {p.name for p in params}]
    out: list[Any] = []
    for p in params:
        if is_kv_param(p.name):
            out.append(kv)
        elif p.name in by_name:
            out.append(by_name[p.name])
        elif unused:
            out.append(by_name[unused.pop(0)])
        else:
            raise TypeError(f"no flat input for parameter {p.name!r}")
    return out


def _collection(kv: Any, leaves: Any) -> Any:
    """The first device's KV collection from the flat KV inputs (as MAX's ``Llama3`` takes it)."""
    from max import tree
    from max.nn.kv_cache import KVCacheInputsPerDevice

    return tree.leaves(kv.unflatten_kv_inputs(iter(leaves)), leaf=KVCacheInputsPerDevice)[0]


#: the class attribute holding the KV cache parameters of a :func:`flat_kv_class`
FLAT_KV_PARAMS = "_migrate_v3_kv_params"


def flat_kv_class(cls: type, layout: FlatLayout, kv: Any, types: list[Any]) -> type:
    """``cls`` (a V2 or V3 module class) with the flat entry point of :class:`FlatLayout` and an
    ``input_types()`` returning ``types``; same name, same module, same weights.

    V2 (``max.nn`` ``Module``): ``trace(*types)`` adapts the graph's flat inputs to ``__call__``.
    V3: ``forward(*inputs)`` (or ``__call__``, when the class defines its own) takes the flat
    inputs and calls the class's own with the KV collection unflattened from the last ones.
    """
    heads = len(layout.heads)

    def input_types(self: Any) -> list[Any]:
        return list(types)

    namespace: dict[str, Any] = {"input_types": input_types, "__module__": cls.__module__,
                                 "__qualname__": cls.__qualname__, "__doc__": cls.__doc__,
                                 FLAT_KV_PARAMS: kv}  # (what L5 feeds the cache inputs from: kv_feed)
    from max.nn.layer import Module as V2Module

    if issubclass(cls, V2Module):
        call_params = _required(cls.__call__) or []

        def trace(self: Any, *input_types: Any, name: str | None = None, module: Any = None,
                  custom_extensions: Any = (), is_device_graph: bool = False) -> Any:
            from max.graph import Graph

            def flat(*inputs: Any) -> Any:
                args = _arranged(layout, call_params, [v.tensor for v in inputs[:heads]],
                                 _collection(kv, inputs[heads:]))
                return self(*args)

            return Graph(cls.__qualname__ if name is None else name, flat, input_types=input_types,
                         custom_extensions=list(custom_extensions), module=module, is_device_graph=is_device_graph)

        namespace["trace"] = trace
    else:
        from max.experimental.nn import Module as V3Module

        entry = "__call__" if cls.__call__ is not V3Module.__call__ else "forward"
        original = getattr(cls, entry)
        params = _required(original) or []

        def forward(self: Any, *inputs: Any) -> Any:
            leaves = [x._graph_value for x in inputs[heads:]]  # (as MAX's V3 Llama3 unflattens them)
            return original(self, *_arranged(layout, params, list(inputs[:heads]), _collection(kv, leaves)))

        namespace[entry] = forward
    return type(cls.__name__, (cls,), namespace)
