from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from max import tree
from max.experimental.nn import Module


def forward_sequential_layers(
    layers: Sequence[Module[..., Any]],
    *,
    inputs_for_layer: Callable[[int, Any], Sequence[Any]],
    initial_hidden_states: Any,
    on_layer_output: Callable[[int, Any], None] | None = None,
    subgraph_layer_groups: list[list[int]] | None = None,
    name_for_subgraph: Callable[[int], str] | None = None,
    weight_prefix_for_layer: Callable[[int], str] | None = None,
    layer_ids: Sequence[int] | None = None,
) -> Any:
    """V3 port of V2 ``max.nn.transformer.forward_sequential_layers``; added by migrate-v3.

    Calls each layer on ``inputs_for_layer(index, hidden)`` in order. Hidden states
    given as a list stay a list whatever a layer returns, as in V2 (one distributed
    Tensor, where the migration made V2's per-device list one, stays that). V2 could stage groups of
    layers as shared subgraphs, an optimization of the same computation that V3 does
    not need (``name_for_subgraph`` and ``weight_prefix_for_layer`` go unused); a
    grouped layer still sees its inputs in the structure of its group's first call,
    as V2's subgraph rebuilt them.
    """
    del name_for_subgraph, weight_prefix_for_layer
    ids = range(len(layers)) if layer_ids is None else layer_ids
    group_of = {i: g for g, members in enumerate(subgraph_layer_groups or []) for i in members}
    structure: dict[int, Any] = {}
    h = initial_hidden_states
    as_list = isinstance(h, list)
    for layer_idx, layer in zip(ids, layers, strict=True):
        values = inputs_for_layer(layer_idx, h)
        group = group_of.get(layer_idx)
        if group is not None:
            treedef = structure.setdefault(group, tree.flatten(values)[1])
            values = tree.unflatten(treedef, iter(tree.leaves(values)))
        result = layer(*values)
        if as_list:  # (V2's _call_layer_directly)
            result = list(result) if isinstance(result, tuple) else result if isinstance(result, list) else [result]
        h = result
        if on_layer_output is not None:
            on_layer_output(layer_idx, h)
    return h
