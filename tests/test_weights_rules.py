"""Each rule kind forward and reverse, plus registration-time validation."""

from __future__ import annotations

import numpy as np
import pytest

from migrate_v3.weights import (
    Concat,
    Copy,
    Drop,
    FuseQKV,
    Merge,
    Rename,
    RuleOverlapError,
    RuleSet,
    Split,
    Stack,
    TensorMeta,
    TypedArray,
    UnfuseQKV,
    Unstack,
    map_all,
)
from migrate_v3.weights.exprs import evaluate
from migrate_v3.weights.patterns import PatternError
from migrate_v3.weights.rules import RuleError, rule_from_dict, rule_to_dict

CFG = {
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "hidden_size": 8,
    "n_routed_experts": 3,
    "first_k_dense_replace": 1,
    "num_nextn_predict_layers": 1,
}
RNG = np.random.default_rng(7)


def arr(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def roundtrip(rs: RuleSet, src: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Forward then reverse; asserts names and bytes come back; returns the forward map."""
    fwd = map_all(rs, src.items())
    back = map_all(rs.inverse(), fwd.items())
    assert set(back) == set(src)
    for name, value in src.items():
        assert back[name].tobytes() == value.tobytes(), name
        assert back[name].shape == value.shape
    return fwd


def test_rename_with_choices_and_typed_layer() -> None:
    rs = RuleSet.for_config(CFG, [
        Rename(source="model.layers.{layer}.{n:input_layernorm|post_attention_layernorm}.weight",
               target="lm.layers.{layer}.{n}.weight"),
    ])
    src = {"model.layers.2.input_layernorm.weight": arr(8), "model.layers.0.post_attention_layernorm.weight": arr(8)}
    fwd = roundtrip(rs, src)
    assert set(fwd) == {"lm.layers.2.input_layernorm.weight", "lm.layers.0.post_attention_layernorm.weight"}
    assert fwd["lm.layers.2.input_layernorm.weight"] is src["model.layers.2.input_layernorm.weight"]


def test_patterns_are_anchored_and_typed() -> None:
    rs = RuleSet.for_config(CFG, [Rename(source="model.layers.{layer}.w", target="lm.{layer}.w")])
    assert rs.find("model.layers.1.w") is not None
    assert rs.find("x.model.layers.1.w") is None  # anchored at the start
    assert rs.find("model.layers.1.w.extra") is None  # and at the end
    assert rs.find("model.layers.01.w") is None  # canonical integers only
    assert rs.find("model.layers.a.w") is None
    assert rs.find("model.layers.9.w") is None  # outside the config's layer domain (0..3)


def test_placeholder_must_fill_a_segment() -> None:
    with pytest.raises(PatternError, match="whole segment"):
        RuleSet.for_config(CFG, [Rename(source="model.layer{layer}.w", target="x.{layer}")])


def test_unknown_domain_rejected() -> None:
    with pytest.raises(PatternError, match="unknown domain"):
        RuleSet.for_config(CFG, [Rename(source="m.{layer:sparse}.w", target="x.{layer}")])


def test_placeholders_must_line_up() -> None:
    with pytest.raises(RuleError, match="placeholders differ"):
        RuleSet.for_config(CFG, [Rename(source="m.{layer}.{expert}.w", target="x.{layer}.w")])


def test_copy_and_merge_tie() -> None:
    rs = RuleSet.for_config(CFG, [Copy(source="model.embed.weight", targets=("lm.embed.weight", "lm.head.weight"))])
    src = {"model.embed.weight": arr(10, 8)}
    fwd = roundtrip(rs, src)
    assert set(fwd) == {"lm.embed.weight", "lm.head.weight"}
    merge = RuleSet.for_config(CFG, [Merge(sources=("a.weight", "b.weight"), target="c.weight")])
    with pytest.raises(RuleError, match="tied copies differ"):
        map_all(merge, [("a.weight", arr(2, 2)), ("b.weight", arr(2, 2))])


def test_drop_consumes_and_has_no_inverse() -> None:
    rs = RuleSet.for_config(CFG, [
        Drop(source="model.layers.{layer}.rotary_emb.inv_freq", reason="computed at runtime"),
        Rename(source="model.norm.weight", target="lm.norm.weight"),
    ])
    out = map_all(rs, [("model.layers.1.rotary_emb.inv_freq", arr(4)), ("model.norm.weight", arr(8))])
    assert set(out) == {"lm.norm.weight"}
    inv = rs.inverse()
    assert [cr.rule.kind for cr in inv.not_invertible] == ["drop"]
    with pytest.raises(RuleError, match="needs a reason"):
        RuleSet.for_config(CFG, [Drop(source="x.y", reason="")])


def test_stack_and_unstack_over_experts() -> None:
    rs = RuleSet.for_config(CFG, [
        Stack(source="model.layers.{layer:moe}.experts.{expert}.w", target="lm.layers.{layer}.experts.w",
              over="expert"),
    ])
    src = {f"model.layers.{layer}.experts.{e}.w": arr(5, 8) for layer in (1, 2) for e in range(3)}
    fwd = roundtrip(rs, src)
    assert fwd["lm.layers.2.experts.w"].shape == (3, 5, 8)
    np.testing.assert_array_equal(fwd["lm.layers.2.experts.w"][1], src["model.layers.2.experts.1.w"])
    # Unstack is the registered inverse kind, usable directly too.
    un = RuleSet.for_config(CFG, [Unstack(source="s.{layer}.w", target="t.{layer}.e.{expert}", over="expert")])
    parts = map_all(un, [("s.1.w", np.arange(6.0).reshape(3, 2))])
    assert sorted(parts) == ["t.1.e.0", "t.1.e.1", "t.1.e.2"]


def test_stack_needs_finite_domain() -> None:
    with pytest.raises(RuleError, match="finite domain"):
        RuleSet.for_config(CFG, [Stack(source="a.{i}.w", target="b.w", over="i")])


def test_concat_and_split_equal_and_sized() -> None:
    rs = RuleSet.for_config(CFG, [
        Concat(sources=("m.{layer}.gate", "m.{layer}.up"), target="t.{layer}.gate_up"),
        Concat(sources=("m.{layer}.q", "m.{layer}.k", "m.{layer}.v"), target="t.{layer}.qkv",
               sizes=("num_attention_heads*head_dim", "num_key_value_heads*head_dim",
                      "num_key_value_heads*head_dim")),
    ])
    src = {"m.0.gate": arr(6, 8), "m.0.up": arr(6, 8), "m.0.q": arr(8, 8), "m.0.k": arr(4, 8), "m.0.v": arr(4, 8)}
    fwd = roundtrip(rs, src)
    assert fwd["t.0.gate_up"].shape == (12, 8)
    assert fwd["t.0.qkv"].shape == (16, 8)
    np.testing.assert_array_equal(fwd["t.0.qkv"][8:12], src["m.0.k"])
    unsized = RuleSet.for_config(CFG, [Concat(sources=("a", "b"), target="c")])
    with pytest.raises(RuleError, match="explicit sizes"):
        map_all(unsized, [("a", arr(2, 3)), ("b", arr(4, 3))])
    split = RuleSet.for_config(CFG, [Split(source="c", targets=("a", "b"), axis=1)])
    out = map_all(split, [("c", arr(2, 6))])
    assert out["a"].shape == (2, 3) and out["b"].shape == (2, 3)


def test_fuse_qkv_is_head_interleaved_by_query_group() -> None:
    # 4 query heads, 2 kv heads, head_dim 2: rows of each head hold its id.
    h, g, d = 4, 2, 2
    q = np.repeat(np.arange(h), d)[:, None].astype(np.float32) * np.ones((1, 3), np.float32)
    k = np.repeat(100 + np.arange(g), d)[:, None].astype(np.float32) * np.ones((1, 3), np.float32)
    v = np.repeat(200 + np.arange(g), d)[:, None].astype(np.float32) * np.ones((1, 3), np.float32)
    rs = RuleSet.for_config({**CFG, "head_dim": d}, [
        FuseQKV(q="m.{layer}.q", k="m.{layer}.k", v="m.{layer}.v", target="t.{layer}.qkv"),
    ])
    fwd = roundtrip(rs, {"m.1.q": q, "m.1.k": k, "m.1.v": v})
    heads = fwd["t.1.qkv"][::d, 0].tolist()
    # group 0: q0 q1 k0 v0, group 1: q2 q3 k1 v1
    assert heads == [0, 1, 100, 200, 2, 3, 101, 201]
    un = RuleSet.for_config({**CFG, "head_dim": d}, [
        UnfuseQKV(source="t.{layer}.qkv", q="m.{layer}.q", k="m.{layer}.k", v="m.{layer}.v"),
    ])
    back = map_all(un, fwd.items())
    np.testing.assert_array_equal(back["m.1.k"], k)


def test_fuse_qkv_rejects_wrong_rows() -> None:
    rs = RuleSet.for_config(CFG, [FuseQKV(q="q", k="k", v="v", target="qkv")])
    with pytest.raises(RuleError, match="expected 8 rows"):
        map_all(rs, [("q", arr(6, 8)), ("k", arr(4, 8)), ("v", arr(4, 8))])


def test_metadata_mode_computes_shapes() -> None:
    rs = RuleSet.for_config(CFG, [
        Stack(source="e.{expert}.w", target="s.w", over="expert"),
        FuseQKV(q="q", k="k", v="v", target="qkv"),
    ])
    bf = "bfloat16"
    items = [(f"e.{i}.w", TensorMeta((5, 8), bf)) for i in range(3)]
    items += [("q", TensorMeta((8, 8), bf)), ("k", TensorMeta((4, 8), bf)), ("v", TensorMeta((4, 8), bf))]
    out = map_all(rs, items)
    assert out == {"s.w": TensorMeta((3, 5, 8), bf), "qkv": TensorMeta((16, 8), bf)}


def test_typed_arrays_keep_logical_dtype() -> None:
    rs = RuleSet.for_config(CFG, [Concat(sources=("a", "b"), target="c")])
    a = TypedArray(np.arange(4, dtype=np.uint16).reshape(2, 2), "bfloat16")
    b = TypedArray(np.arange(4, 8, dtype=np.uint16).reshape(2, 2), "bfloat16")
    out = map_all(rs, [("a", a), ("b", b)])["c"]
    assert isinstance(out, TypedArray) and out.dtype == "bfloat16" and out.shape == (4, 2)


def test_overlap_rejected_at_registration() -> None:
    rs = RuleSet.for_config(CFG, [Rename(source="model.layers.{layer}.mlp.w", target="a.{layer}")])
    with pytest.raises(RuleOverlapError, match="can match the same name"):
        rs.add(Rename(source="model.layers.2.mlp.w", target="b.2"))
    with pytest.raises(RuleOverlapError):
        rs.add(Rename(source="model.layers.{layer:moe}.{x:mlp|attn}.w", target="c.{layer}.{x}"))
    # Output side is checked too: two rules may not produce the same name.
    with pytest.raises(RuleOverlapError, match="output"):
        rs.add(Rename(source="other.{layer}.w", target="a.{layer}"))


def test_disjoint_layer_domains_do_not_overlap() -> None:
    rs = RuleSet.for_config(CFG, [
        Rename(source="model.layers.{layer:dense}.mlp.w", target="lm.layers.{layer}.dense.w"),
        Rename(source="model.layers.{layer:main&moe}.mlp.w", target="lm.layers.{layer}.moe.w"),
        Rename(source="model.layers.{layer:mtp&moe}.mlp.w", target="mtp.layers.{layer}.moe.w"),
    ])
    out = map_all(rs, [(f"model.layers.{i}.mlp.w", arr(2)) for i in range(4)])
    # dense = layer 0 (first_k_dense_replace=1); MoE 1, 2; layer 3 = MTP, renumbered 0 in its namespace.
    assert set(out) == {"lm.layers.0.dense.w", "lm.layers.1.moe.w", "lm.layers.2.moe.w", "mtp.layers.0.moe.w"}
    back = map_all(rs.inverse(), out.items())
    assert set(back) == {f"model.layers.{i}.mlp.w" for i in range(4)}


def test_layer_types_domain() -> None:
    cfg = {"num_hidden_layers": 4, "full_attention_interval": 2}
    rs = RuleSet.for_config(cfg, [
        Rename(source="model.layers.{layer:linear_attention}.input_layernorm.weight",
               target="lin.{layer}.norm"),
        Rename(source="model.layers.{layer:full_attention}.input_layernorm.weight",
               target="full.{layer}.norm"),
    ])
    out = map_all(rs, [(f"model.layers.{i}.input_layernorm.weight", arr(2)) for i in range(4)])
    assert set(out) == {"lin.0.norm", "full.1.norm", "lin.2.norm", "full.3.norm"}


def test_rule_json_roundtrip() -> None:
    rules = [
        Rename(source="a.{layer}", target="b.{layer}", note="n", placement="row"),
        Concat(sources=("x", "y"), target="z", sizes=(2, "hidden_size")),
        Stack(source="e.{expert}", target="s", over="expert", axis=1),
        Drop(source="d", reason="why", optional=True),
    ]
    for r in rules:
        assert rule_from_dict(rule_to_dict(r)) == r
    with pytest.raises(RuleError, match="unknown rule kind"):
        rule_from_dict({"kind": "teleport"})
    with pytest.raises(RuleError, match="unknown field"):
        rule_from_dict({"kind": "rename", "source": "a", "target": "b", "colour": 1})


def test_expressions() -> None:
    assert evaluate("num_key_value_heads*head_dim", {"num_key_value_heads": 2, "hidden_size": 8,
                                                     "num_attention_heads": 4}) == 4
    with pytest.raises(KeyError):
        evaluate("nope*2", {})
    with pytest.raises(ValueError):
        evaluate("__import__('os')", {})
