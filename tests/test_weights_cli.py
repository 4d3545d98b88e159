"""`weights` click group: exit codes 0 / 1 / 2, text and JSON output, rule files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from migrate_v3.weights.cli import weights
from migrate_v3.weights.sources import write_safetensors
from migrate_v3.weights.synth import llama_meta, random_tensors
from migrate_v3.weights.tensors import TensorMeta

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "weights"
LLAMA_CFG = FIXTURES / "tiny_llama.json"

# What llama3_modulev3 (MAX 26.7) declares for tiny_llama.json, read off the
# lazily built module (test_weights_max.py checks this list against it).
V3_LAYER = [
    ("self_attn.q_proj.weight", (64, 64)), ("self_attn.k_proj.weight", (32, 64)),
    ("self_attn.v_proj.weight", (32, 64)), ("self_attn.o_proj.weight", (64, 64)),
    ("mlp.gate_proj.weight", (128, 64)), ("mlp.down_proj.weight", (64, 128)),
    ("mlp.up_proj.weight", (128, 64)), ("input_layernorm.weight", (64,)),
    ("post_attention_layernorm.weight", (64,)),
]


def v3_names() -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {
        "language_model.embed_tokens.weight": {"shape": [256, 64], "dtype": "float32"},
        "language_model.norm.weight": {"shape": [64], "dtype": "float32"},
        "language_model.lm_head.weight": {"shape": [256, 64], "dtype": "float32"},
    }
    for i in range(2):
        for suffix, shape in V3_LAYER:
            out[f"language_model.layers.{i}.{suffix}"] = {"shape": list(shape), "dtype": "float32"}
    return out


@pytest.fixture()
def ckpt(tmp_path: Path) -> Path:
    cfg = json.loads(LLAMA_CFG.read_text())
    d = tmp_path / "ckpt"
    d.mkdir()
    write_safetensors(d / "model.safetensors", random_tensors(llama_meta(cfg, "float32")))
    return d


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(weights, list(args))
    return res.exit_code, res.output


def names_file(tmp_path: Path, names: dict[str, dict[str, object]]) -> Path:
    p = tmp_path / "target.json"
    p.write_text(json.dumps(names))
    return p


def test_clean_check_exits_0(ckpt: Path, tmp_path: Path) -> None:
    code, out = run("check", "--checkpoint", str(ckpt), "--config", str(LLAMA_CFG),
                    "--names", str(names_file(tmp_path, v3_names())))
    assert code == 0, out
    assert "checkpoint keys no rule consumed: 0" in out
    assert "template llama" in out  # guessed from model_type
    assert out.rstrip().endswith("OK")


def test_problems_exit_1_and_are_listed(ckpt: Path, tmp_path: Path) -> None:
    names = v3_names()
    del names["language_model.layers.1.mlp.up_proj.weight"]
    names["language_model.layers.0.self_attn.q_proj.bias"] = {"shape": [64], "dtype": "float32"}
    names["language_model.norm.weight"]["dtype"] = "bfloat16"
    code, out = run("check", "--checkpoint", str(ckpt), "--config", str(LLAMA_CFG),
                    "--names", str(names_file(tmp_path, names)), "--format", "json")
    assert code == 1
    data = json.loads(out)
    assert data["ok"] is False
    assert data["counts"]["missing"] == 1 and data["missing"][0]["pattern"].endswith("q_proj.bias")
    assert data["counts"]["unexpected"] == 1
    assert data["unexpected"][0]["pattern"] == "language_model.layers.1.mlp.up_proj.weight"
    assert data["counts"]["mismatches"] == 1
    assert data["mismatches"][0]["expected"]["dtype"] == "bfloat16"


def test_never_fired_rule_is_a_problem(tmp_path: Path, ckpt: Path) -> None:
    rules = [
        {"kind": "rename", "source": "model.{rest:embed_tokens|norm}.weight", "target": "language_model.{rest}.weight"},
        {"kind": "rename", "source": "lm_head.weight", "target": "language_model.lm_head.weight"},
        {"kind": "rename", "source": "model.layers.{layer}.{a:self_attn|mlp}.{p:q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj}.weight",
         "target": "language_model.layers.{layer}.{a}.{p}.weight"},
        {"kind": "rename", "source": "model.layers.{layer}.{n:input_layernorm|post_attention_layernorm}.weight",
         "target": "language_model.layers.{layer}.{n}.weight"},
        {"kind": "drop", "source": "model.layers.{layer}.self_attn.rotary_emb.inv_freq", "reason": "old checkpoints"},
    ]
    rf = tmp_path / "rules.json"
    rf.write_text(json.dumps({"rules": rules}))
    code, out = run("check", "--checkpoint", str(ckpt), "--config", str(LLAMA_CFG), "--rules", str(rf),
                    "--names", str(names_file(tmp_path, v3_names())))
    assert code == 1
    assert "rules that never fired: 1" in out and "inv_freq" in out
    rules[-1]["optional"] = True
    rf.write_text(json.dumps(rules))
    code, out = run("check", "--checkpoint", str(ckpt), "--config", str(LLAMA_CFG), "--rules", str(rf),
                    "--names", str(names_file(tmp_path, v3_names())))
    assert code == 0, out
    assert "(+1 optional)" in out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--checkpoint", "/nonexistent/x.safetensors"], "no such file"),
        (["--template", "llama", "--rules", "r.json"], "not both"),
        (["--module", "nocolon"], "pkg.mod:factory"),
        (["--module", "no_such_pkg_xyz:f"], "cannot import"),
    ],
)
def test_usage_and_io_errors_exit_2(ckpt: Path, extra: list[str], message: str) -> None:
    args = ["check", "--checkpoint", str(ckpt), "--config", str(LLAMA_CFG), *extra]
    code, out = run(*args)
    assert code == 2, out
    assert message in out


def test_bad_config_and_unknown_model_type_exit_2(tmp_path: Path, ckpt: Path) -> None:
    bad = tmp_path / "c.json"
    bad.write_text("{")
    assert run("check", "--checkpoint", str(ckpt), "--config", str(bad), "--names", "x")[0] == 2
    other = tmp_path / "o.json"
    other.write_text(json.dumps({**json.loads(LLAMA_CFG.read_text()), "model_type": "mamba"}))
    code, out = run("check", "--checkpoint", str(ckpt), "--config", str(other), "--names", "x")
    assert code == 2 and "no template" in out
    assert run("check", "--config", str(other))[0] == 2  # click usage error


def test_stacked_template_reports_concat_shapes(tmp_path: Path, ckpt: Path) -> None:
    names = {k: v for k, v in v3_names().items() if not any(
        s in k for s in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"))}
    for i in range(2):
        names[f"language_model.layers.{i}.self_attn.qkv_proj.weight"] = {"shape": [128, 64], "dtype": "float32"}
        names[f"language_model.layers.{i}.mlp.gate_up_proj.weight"] = {"shape": [256, 64], "dtype": "float32"}
    code, out = run("check", "--checkpoint", str(ckpt), "--config", str(LLAMA_CFG), "--template", "llama-stacked",
                    "--names", str(names_file(tmp_path, names)))
    assert code == 0, out


def test_templates_listed() -> None:
    code, out = run("templates")
    assert code == 0 and "deepseek-v3" in out and "llama" in out


def test_names_only_index_skips_shapes(tmp_path: Path) -> None:
    cfg = json.loads(LLAMA_CFG.read_text())
    index = {"weight_map": {n: "absent.safetensors" for n in llama_meta(cfg)}}
    p = tmp_path / "model.safetensors.index.json"
    p.write_text(json.dumps(index))
    code, out = run("check", "--checkpoint", str(p), "--config", str(LLAMA_CFG),
                    "--names", str(names_file(tmp_path, v3_names())))
    assert code == 0, out
    assert "shapes not compared" in out
    assert TensorMeta(None, None).nbytes is None
