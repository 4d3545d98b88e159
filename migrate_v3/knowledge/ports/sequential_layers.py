from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

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

    Calls each layer on ``inputs_for_layer(index, hidden)`` in order, as V2's
    direct path does. V2 could stage groups of layers as shared subgraphs, an
    optimization of the same computation; V3 stages each call, so
    ``subgraph_layer_groups``, ``name_for_subgraph`` and
    ``weight_prefix_for_layer`` are accepted and unused.
    """
    del subgraph_layer_groups, name_for_subgraph, weight_prefix_for_layer
    ids = range(len(layers)) if layer_ids is None else layer_ids
    h = initial_hidden_states
    for layer_idx, layer in zip(ids, layers, strict=True):
        h = layer(*inputs_for_layer(layer_idx, h))
        if on_layer_output is not None:
            on_layer_output(layer_idx, h)
    return h
