"""Against the real MAX 26.7 V3 modules: templates, emitted adapters, plans, compile, full size."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import max.pipelines.architectures.deepseekV3_modulev3.weight_adapters as max_ds_adapter
import numpy as np
import pytest
from click.testing import CliRunner
from max.driver import Buffer
from max.dtype import DType
from max.graph import DeviceRef, Shape, TensorType
from max.graph.weights import WeightData

from migrate_v3.weights import RuleSet, TypedArray, map_all
from migrate_v3.weights.adapter import emit_adapter
from migrate_v3.weights.check import run_check
from migrate_v3.weights.cli import weights
from migrate_v3.weights.factories import deepseek_v3, llama3
from migrate_v3.weights.sources import iter_tensors, load_checkpoint, write_safetensors
from migrate_v3.weights.synth import deepseek_v3_meta, llama_meta, random_tensors
from migrate_v3.weights.target import Target, build_module, module_params
from migrate_v3.weights.templates import get_template

pytestmark = pytest.mark.needs_max

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "weights"
DS_CFG = json.loads((FIX / "tiny_deepseek_v3.json").read_text())
LLAMA_CFG = json.loads((FIX / "tiny_llama.json").read_text())


def bf16_variant(cfg: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in cfg.items() if k != "quantization_config"}
    out["torch_dtype"] = "bfloat16"
    return out


def check_against_module(template: str, cfg: dict[str, Any], ckpt: dict[str, Any], factory: Any) -> tuple[Any, Any]:
    rs = RuleSet.for_config(cfg, get_template(template).rules(cfg))
    module = build_module(factory, cfg, ckpt)
    target = Target(module_params(module), "module")
    return rs, run_check(rs, ckpt, target)


@pytest.mark.parametrize("variant", ["fp8", "bf16"])
def test_deepseek_template_matches_the_real_module(variant: str) -> None:
    cfg = DS_CFG if variant == "fp8" else bf16_variant(DS_CFG)
    ckpt = deepseek_v3_meta(cfg)
    rs, res = check_against_module("deepseek-v3", cfg, ckpt, deepseek_v3)
    assert res.ok, (res.unconsumed, res.missing, res.unexpected, res.mismatches, res.never_fired)
    assert res.n_target == len(ckpt) - sum(map(len, res.explained_absent.values()))
    # MTP (layer 4 of a 4-layer model) moved to its own namespace, renumbered from 0.
    mtp = {n for names in res.explained_absent.values() for n in names}
    assert "mtp.layers.0.eh_proj.weight" in mtp and "mtp.layers.0.mlp.experts.7.down_proj.weight" + (
        ".data" if variant == "fp8" else "") in mtp
    # Dense layer 0 got the dense-MLP rules, MoE layer 1 the router.
    fired = {cr.rule.outputs()[0] for cr in rs.rules if cr.index not in {c.index for c in res.never_fired_optional}}
    assert any("{layer:main&dense}.mlp.down_proj" in t for t in fired)


def test_deepseek_checkpoint_with_a_wrong_shape_is_caught() -> None:
    ckpt = dict(deepseek_v3_meta(DS_CFG))
    from migrate_v3.weights.tensors import TensorMeta

    ckpt["model.layers.2.self_attn.kv_b_proj.weight"] = TensorMeta((256, 128), "float8_e4m3fn")
    _, res = check_against_module("deepseek-v3", DS_CFG, ckpt, deepseek_v3)
    assert [m.name for m in res.mismatches] == ["language_model.layers.2.self_attn.kv_b_proj.data"]


@pytest.mark.parametrize("template, stacked, tied", [("llama", False, False), ("llama-stacked", True, False),
                                                      ("llama", False, True)])
def test_llama_templates_match_the_real_module(template: str, stacked: bool, tied: bool) -> None:
    cfg = {**LLAMA_CFG, "tie_word_embeddings": tied}
    ckpt = llama_meta(cfg, "float32")
    if tied:  # some tied checkpoints still store lm_head; the rule drops it
        ckpt["lm_head.weight"] = ckpt["model.embed_tokens.weight"]
    _, res = check_against_module(template, cfg, ckpt, lambda c, checkpoint=None: llama3(c, checkpoint,
                                                                                          stacked=stacked))
    assert res.ok, (res.unconsumed, res.missing, res.unexpected, res.mismatches)
    assert bool(res.dropped) == tied


def test_cli_fixture_names_are_the_real_llama_module() -> None:
    from tests.test_weights_cli import v3_names

    params = module_params(build_module(llama3, LLAMA_CFG))
    got = {n: {"shape": list(p.meta.shape or ()), "dtype": p.meta.dtype} for n, p in params.items()}
    assert got == v3_names()


def wd(t: TypedArray, name: str) -> WeightData:
    buf = Buffer.from_numpy(np.ascontiguousarray(t.array))
    dt = DType[t.dtype]
    if buf.dtype != dt:
        buf = buf.view(dt, t.array.shape)
    return WeightData(buf, name, dt, Shape(t.array.shape))


class _Weights:
    """The slice of max.graph.weights.Weights an adapter uses."""

    def __init__(self, w: WeightData) -> None:
        self._w = w

    def data(self) -> WeightData:
        return self._w


def load_emitted(rs: RuleSet, tmp_path: Path, name: str) -> Any:
    path = tmp_path / f"{name}.py"
    path.write_text(emit_adapter(rs, name))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_emitted_adapter_equals_max_own_deepseek_adapter(tmp_path: Path) -> None:
    rs = RuleSet.for_config(DS_CFG, get_template("deepseek-v3").rules(DS_CFG))
    gen = load_emitted(rs, tmp_path, "ds_adapter")
    tensors = random_tensors(deepseek_v3_meta(DS_CFG), seed=1)
    state = {n: _Weights(wd(t, n)) for n, t in tensors.items()}
    hf = types.SimpleNamespace(**DS_CFG)
    ours = gen.convert_safetensor_state_dict(state, hf, None)
    theirs = max_ds_adapter.convert_safetensor_state_dict(state, hf)
    assert set(ours) == set(theirs)
    assert all(ours[k] is theirs[k] for k in ours)
    with pytest.raises(KeyError, match="no weight rule matches"):
        gen.convert_safetensor_state_dict({**state, "model.extra.weight": state["lm_head.weight"]}, hf)


def test_emitted_adapter_runs_many_to_one_rules(tmp_path: Path) -> None:
    cfg = {**LLAMA_CFG, "torch_dtype": "bfloat16"}
    rs = RuleSet.for_config(cfg, get_template("llama-stacked").rules(cfg))
    gen = load_emitted(rs, tmp_path, "llama_adapter")
    tensors = random_tensors(llama_meta(cfg), seed=2)
    out = gen.convert_safetensor_state_dict({n: _Weights(wd(t, n)) for n, t in tensors.items()}, cfg)
    expected = map_all(rs, tensors.items())
    assert set(out) == set(expected)
    qkv = "language_model.layers.1.self_attn.qkv_proj.weight"
    assert out[qkv].dtype == DType.bfloat16 and tuple(out[qkv].shape) == expected[qkv].shape
    got = Buffer.from_dlpack(out[qkv].data).view(DType.uint16).to_numpy()
    assert got.tobytes() == expected[qkv].array.tobytes()


_PLANS = """
import json, sys
from click.testing import CliRunner
from migrate_v3.weights.cli import weights
for extra in (["--tp", "2"], ["--tp", "2", "--ep", "2"]):
    res = CliRunner().invoke(weights, ["plan", "--config", sys.argv[1], "--format", "json", *extra])
    assert res.exit_code == 0, res.output
    print(json.dumps(json.loads(res.output)))
"""


def test_plan_reads_tp_and_ep_placements_from_the_module() -> None:
    # A subprocess: MAX's virtual GPU devices are process-global.
    proc = subprocess.run([sys.executable, "-c", _PLANS, str(FIX / "tiny_deepseek_v3.json")],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    tp, ep = (json.loads(line) for line in proc.stdout.splitlines())
    total = sum(p.meta.nbytes or 0 for p in module_params(build_module(deepseek_v3, DS_CFG)).values())
    kinds = tp["bytes_by_kind"]
    assert tp["source"] == "read from the lazily built module"
    for kind in ("column", "row"):  # tiny FP8 scales split unevenly (1 row -> 1 + 0), as MAX does
        assert kinds[kind][0] > 0 and abs(kinds[kind][0] - kinds[kind][1]) < 0.01 * kinds[kind][0]
    # TensorParallelMoE keeps routed experts on the host: those come from rule hints, and say so.
    assert sum(tp["derived"].values()) == 3 * 8 * 3 * 2  # MoE layers x experts x projections x (data, scale)
    assert all("host" in why for why in tp["derived"])
    assert sum(tp["bytes_per_device"]) == total + kinds["replicated"][0]
    assert ep["derived"] == {}
    experts = ep["bytes_by_kind"]["expert"]
    assert experts[0] == experts[1] > 0
    assert sum(ep["bytes_per_device"]) == total + ep["bytes_by_kind"]["replicated"][0]


@pytest.mark.slow
def test_tiny_deepseek_real_tensors_compile_and_roundtrip(tmp_path: Path) -> None:
    """Random tensors -> safetensors -> forward map -> V3 compile on CPU -> reverse map."""
    tensors = random_tensors(deepseek_v3_meta(DS_CFG), seed=3)
    names = list(tensors)
    half = len(names) // 2
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors", {n: tensors[n] for n in names[:half]})
    write_safetensors(tmp_path / "model-00002-of-00002.safetensors", {n: tensors[n] for n in names[half:]})
    cfg_path = tmp_path / "config.json"
    cfg_path.write_text(json.dumps(DS_CFG))
    res = CliRunner().invoke(weights, ["check", "--checkpoint", str(tmp_path), "--config", str(cfg_path)])
    assert res.exit_code == 0, res.output

    rs = RuleSet.for_config(DS_CFG, get_template("deepseek-v3").rules(DS_CFG))
    items = [x for f in sorted(tmp_path.glob("*.safetensors")) for x in iter_tensors(f)]
    forward = map_all(rs, items)
    module = build_module(deepseek_v3, DS_CFG, load_checkpoint(tmp_path).entries)
    weights_in = {n: wd(t, n) for n, t in forward.items()}
    inputs: list[Any] = list(_symbolic_inputs(module))

    # MAX validates every weight against its parameter before tracing.
    missing = dict(weights_in)
    del missing["language_model.layers.2.mlp.experts.5.up_proj.weight.weight_scale_inv"]
    with pytest.raises(KeyError, match="experts.5.up_proj.weight.weight_scale_inv"):
        module.compile(*inputs, weights=missing)
    wrong = dict(weights_in)
    wrong["language_model.layers.0.self_attn.q_a_proj.data"] = weights_in["language_model.layers.0.self_attn.q_b_proj.data"]
    with pytest.raises(ValueError, match="not assignable"):
        module.compile(*inputs, weights=wrong)
    # With the mapped weights every check passes; the graph itself cannot be
    # compiled for CPU in MAX 26.7 (FP8 has no CPU support).
    try:
        module.compile(*inputs, weights=weights_in)
    except RuntimeError as exc:
        assert "f8e4m3fn data type is not supported on device 'cpu" in str(exc.__cause__)

    back = map_all(rs.inverse(), forward.items())
    assert list(sorted(back)) == sorted(names)
    for name, t in tensors.items():
        assert back[name].dtype == t.dtype and back[name].array.tobytes() == t.array.tobytes(), name


def _symbolic_inputs(module: Any) -> list[Any]:
    from max.pipelines.lib.interfaces.batch_processor import modulev3_ragged_kv_symbolic_inputs

    inputs = list(modulev3_ragged_kv_symbolic_inputs(kv_params=module.kv_params, device_refs=[DeviceRef.CPU()]))
    # DeepseekV3ModuleV3BatchProcessor inserts the host batch-context length after input_row_offsets.
    inputs.insert(3, TensorType(DType.int32, shape=[1], device=DeviceRef.CPU()))
    return inputs


@pytest.mark.slow
def test_full_size_deepseek_v3_check() -> None:
    """91,991 names vs deepseekV3_modulev3 built lazily from the real config, in its own process."""
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "weights_deepseek.py"), "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    numbers, report = data["numbers"], data["report"]
    print(json.dumps(numbers))
    assert numbers["checkpoint_names"] == 91_991
    assert numbers["module_parameters"] == 90_427
    counts = report["counts"]
    assert counts["unconsumed"] == counts["missing"] == counts["unexpected"] == 0
    assert counts["mismatches"] == counts["leftovers"] == counts["never_fired"] == 0
    assert counts["explained_absent"] == 1_564  # the MTP layer (61)
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss across fork+exec from this
    # (possibly large) pytest process; VmHWM is the child's own peak.
    assert numbers["vm_hwm_mib"] < 2048
