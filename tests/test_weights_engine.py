"""The streaming contract: None while parts are parked, entries once complete."""

from __future__ import annotations

import numpy as np
import pytest

from migrate_v3.weights import Concat, Drop, LeftoverPartsError, Mapper, Rename, RuleSet, Stack
from migrate_v3.weights.engine import DuplicateNameError, UnmatchedNameError

CFG = {"num_hidden_layers": 2, "n_routed_experts": 3, "hidden_size": 4, "num_attention_heads": 1}


def rules() -> RuleSet:
    return RuleSet.for_config(CFG, [
        Rename(source="model.layers.{layer}.norm.weight", target="lm.layers.{layer}.norm.weight"),
        Concat(sources=("model.layers.{layer}.gate.weight", "model.layers.{layer}.up.weight"),
               target="lm.layers.{layer}.gate_up.weight"),
        Stack(source="model.layers.{layer}.experts.{expert}.w", target="lm.layers.{layer}.experts.w",
              over="expert"),
        Drop(source="model.layers.{layer}.inv_freq", reason="runtime"),
    ])


def t(*shape: int) -> np.ndarray:
    return np.ones(shape, np.float32)


def test_add_returns_none_until_group_complete_per_prefix() -> None:
    m = Mapper(rules())
    assert m.add("model.layers.0.gate.weight", t(2, 4)) is None
    assert m.add("model.layers.1.gate.weight", t(2, 4)) is None  # other layer: its own group
    out = m.add("model.layers.0.up.weight", t(2, 4))
    assert out is not None and set(out) == {"lm.layers.0.gate_up.weight"}
    assert out["lm.layers.0.gate_up.weight"].shape == (4, 4)
    renamed = m.add("model.layers.0.norm.weight", t(4))
    assert renamed is not None and list(renamed) == ["lm.layers.0.norm.weight"]
    assert m.add("model.layers.1.inv_freq", t(2)) == {}  # consumed, nothing produced
    for e in (2, 0):
        assert m.add(f"model.layers.1.experts.{e}.w", t(3, 4)) is None
    done = m.add("model.layers.1.experts.1.w", t(3, 4))
    assert done is not None and done["lm.layers.1.experts.w"].shape == (3, 3, 4)


def test_leftover_parts_error_lists_present_and_missing() -> None:
    m = Mapper(rules())
    m.add("model.layers.1.gate.weight", t(2, 4))
    m.add("model.layers.0.experts.0.w", t(3, 4))
    m.add("model.layers.0.experts.2.w", t(3, 4))
    with pytest.raises(LeftoverPartsError) as info:
        m.finish()
    err = info.value
    assert len(err.leftovers) == 2
    text = str(err)
    assert "model.layers.1.up.weight" in text  # the missing concat part, by name
    assert "model.layers.0.experts.1.w" in text  # the missing expert, by name
    assert "model.layers.0.experts.0.w" in text  # a present part
    stack = next(lo for lo in err.leftovers if lo.rule.rule.kind == "stack")
    assert stack.missing == ["model.layers.0.experts.1.w"]
    assert stack.bindings == {"layer": 0}


def test_finish_is_quiet_when_complete() -> None:
    m = Mapper(rules())
    m.add("model.layers.0.gate.weight", t(2, 4))
    m.add("model.layers.0.up.weight", t(2, 4))
    m.finish()


def test_unmatched_strict_and_lenient() -> None:
    with pytest.raises(UnmatchedNameError, match="model.other"):
        Mapper(rules()).add("model.other", t(1))
    lenient = Mapper(rules(), strict=False)
    assert lenient.add("model.other", t(1)) is None
    assert lenient.unmatched == ["model.other"]


def test_duplicate_input_rejected() -> None:
    m = Mapper(rules())
    m.add("model.layers.0.norm.weight", t(4))
    with pytest.raises(DuplicateNameError):
        m.add("model.layers.0.norm.weight", t(4))


def test_fired_counts_and_origin() -> None:
    rs = rules()
    m = Mapper(rs)
    m.add("model.layers.0.norm.weight", t(4))
    m.add("model.layers.1.norm.weight", t(4))
    assert m.fired[0] == 2 and m.fired[1] == 0
    assert m.origin["lm.layers.1.norm.weight"] == 0
    assert m.origin_of_input("model.layers.1.norm.weight") == 0
