"""The port of V2 ``forward_sequential_layers`` keeps V2's contract: hidden states given as a
list stay a list whatever a layer returns (V2's ``_call_layer_directly``: deepseekV4 passes
``[h]`` and reads ``hs[0]`` of blocks that return one value); one value stays one value (where
the migration made V2's per-device list one distributed Tensor); a layer of a subgraph group
gets its inputs in the structure of the group's first call, as V2's subgraph rebuilt them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

PORT = Path(__file__).resolve().parent.parent / "migrate_v3" / "knowledge" / "ports" / "sequential_layers.py"


def _port() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sequential_layers_port", PORT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _add_one(x: Any) -> Any:
    assert not isinstance(x, list), "a layer got a list where V2 gave it one value"
    return x + 1


@pytest.mark.needs_max
def test_a_list_of_hidden_states_stays_a_list() -> None:
    out = _port().forward_sequential_layers(
        [_add_one, _add_one], inputs_for_layer=lambda i, hs: [hs[0]], initial_hidden_states=[1]
    )
    assert out == [3]


@pytest.mark.needs_max
def test_one_hidden_value_stays_one_value() -> None:
    out = _port().forward_sequential_layers([_add_one, _add_one], inputs_for_layer=lambda i, h: [h],
                                            initial_hidden_states=1)
    assert out == 3


@pytest.mark.needs_max
def test_a_grouped_layer_gets_its_group_structure() -> None:
    # the first layer of the group returns a one-element list (V2's subgraph path made every
    # output one): the next layers of the group still get one value, in the first call's structure
    def listed(x: Any) -> list[Any]:
        return [_add_one(x)]

    out = _port().forward_sequential_layers(
        [listed, listed, listed], inputs_for_layer=lambda i, h: [h], initial_hidden_states=1,
        subgraph_layer_groups=[[0, 1, 2]],
    )
    assert out == [4]
    with pytest.raises(AssertionError, match="got a list"):  # (ungrouped, V2 called it on the list too)
        _port().forward_sequential_layers([listed, listed], inputs_for_layer=lambda i, h: [h], initial_hidden_states=1)
