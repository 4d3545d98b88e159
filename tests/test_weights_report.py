"""Grouped reports: 92k names must collapse into a few dozen lines."""

from __future__ import annotations

import json
from pathlib import Path

from migrate_v3.weights.check import run_check
from migrate_v3.weights.engine import map_all
from migrate_v3.weights.report import group_names, ranges, to_json, to_text
from migrate_v3.weights.ruleset import RuleSet
from migrate_v3.weights.sources import expand_patterns
from migrate_v3.weights.target import Target, TargetParam
from migrate_v3.weights.templates import get_template
from migrate_v3.weights.tensors import TensorMeta

DATA = Path("/work/shared/data/deepseek_v3")


def test_ranges() -> None:
    assert ranges([5, 0, 1, 2, 8, 7]) == "0-2,5,7-8"
    assert ranges([3]) == "3"


def test_group_names_collapses_indices() -> None:
    names = [f"l.{i}.experts.{e}.w" for i in (3, 4, 5, 9) for e in range(4)] + ["l.61.norm"]
    groups = group_names(names)
    assert [(g.pattern, g.count) for g in groups] == [("l.{3-5,9}.experts.{0-3}.w", 16), ("l.61.norm", 1)]


def test_full_size_report_is_grouped_and_finds_planted_problems() -> None:
    cfg = json.loads((DATA / "config.json").read_text())
    rs = RuleSet.for_config(cfg, get_template("deepseek-v3").rules(cfg))
    ckpt = expand_patterns(DATA / "weight_name_patterns.json").entries
    produced = map_all(rs, ckpt.items())
    params = {n: TargetParam(n, m) for n, m in produced.items() if not n.startswith("mtp.")}
    # Plant problems: the module lacks layer 5's routed experts, wants a bias nothing
    # provides, and declares one norm in float32.
    for name in [n for n in params if n.startswith("language_model.layers.5.mlp.experts.")]:
        del params[name]
    params["language_model.layers.7.self_attn.o_proj.bias"] = TargetParam(
        "language_model.layers.7.self_attn.o_proj.bias", TensorMeta((7168,), "bfloat16"))
    norm = "language_model.layers.9.input_layernorm.weight"
    params[norm] = TargetParam(norm, TensorMeta((7168,), "float32"))
    ckpt = dict(ckpt)
    ckpt["model.layers.3.self_attn.rotary_emb.inv_freq"] = TensorMeta((32,), "float32")

    res = run_check(rs, ckpt, Target(params, "names"))
    assert not res.ok
    assert res.unconsumed == ["model.layers.3.self_attn.rotary_emb.inv_freq"]
    assert res.missing == ["language_model.layers.7.self_attn.o_proj.bias"]
    assert len(res.unexpected) == 256 * 6
    assert [m.name for m in res.mismatches] == [norm]
    assert sum(map(len, res.explained_absent.values())) == 1564

    text = to_text(res, {"checkpoint": "patterns", "checkpoint_kind": "patterns", "target": "names",
                         "rules": "deepseek-v3"})
    assert len(text.splitlines()) < 120
    assert "language_model.layers.5.mlp.experts.{0-255}.gate_proj.weight.data" in text
    assert "produced 7168 bfloat16, module wants 7168 float32" in text
    data = to_json(res, {})
    assert data["counts"]["unexpected"] == 1536 and data["counts"]["missing"] == 1
    assert {g["count"] for g in data["unexpected"]} == {256}
    assert len(json.dumps(data)) < 60_000
