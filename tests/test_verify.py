"""verify on the bundled example: the hand port passes, broken ports fail by name.

Graphs compiled (distinct): TinyLM V2 + V3 (float32), eps-broken TinyLM V3,
OutputNorm V2 + V3 + broken V3 (bfloat16): six. The bias-flip and rename
ports fail at key alignment, before any compile; the eps and norm-dtype ports
are named by the static hyper-parameter check (the eps one also by numerics).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from migrate_v3.verify import run_verify
from migrate_v3.verify.report import VerifyReport
from migrate_v3.verify_cmd import verify

ROOT = Path(__file__).resolve().parent.parent
V2 = ROOT / "fixtures" / "models" / "tinylm"
V3 = ROOT / "fixtures" / "verify" / "tinylm_v3"
BROKEN = ROOT / "fixtures" / "verify" / "broken"


def broken_port(tmp_path: Path, name: str) -> Path:
    """The hand port with one file replaced by a deliberately broken one."""
    port = tmp_path / f"tinylm_{name}"
    shutil.copytree(V3, port, ignore=shutil.ignore_patterns("__pycache__"))
    for f in (BROKEN / name).glob("*.py"):
        shutil.copy(f, port / f.name)
    return port


@pytest.fixture(scope="module")
def good() -> VerifyReport:
    return run_verify(V2, V3, greedy=3)


@pytest.mark.slow
def test_hand_port_passes_numerics_keys_greedy_and_mypy(good: VerifyReport) -> None:
    assert good.exit_code == 0, good.to_json()
    tiny = good.by_name("TinyLM")
    assert tiny.status == "pass" and tiny.dtype == "float32"
    assert tiny.alignment is not None and tiny.alignment.ok
    assert tiny.alignment.checkpoint_keys == tiny.alignment.v3_parameters == 13
    [out] = tiny.outputs
    assert out.passed and out.shape == [2, 64] and out.max_abs < 1e-4
    assert tiny.greedy is not None and tiny.greedy.passed and len(tiny.greedy.v2_tokens[0]) == 3
    assert good.mypy is not None and good.mypy.error == ""
    assert good.mypy.v3_errors <= good.mypy.v2_errors
    assert good.graphs_compiled == 2


@pytest.mark.slow
def test_children_are_listed_as_skipped_with_a_reason(good: VerifyReport) -> None:
    for name in ("FeedForward", "Block", "OutputNorm"):
        c = good.by_name(name)
        assert c.status == "skipped" and "enclosing class TinyLM's graph" in c.reason


@pytest.mark.slow
def test_flipped_linear_bias_fails_at_key_alignment(tmp_path: Path) -> None:
    report = run_verify(V2, broken_port(tmp_path, "bias_flipped"), mypy=False)
    assert report.exit_code == 1
    tiny = report.by_name("TinyLM")
    assert tiny.status == "fail" and tiny.outputs == []  # not compiled
    assert tiny.alignment is not None
    missing = [i.key for i in tiny.alignment.issues if i.kind == "missing"]
    assert missing == ["layers.0.mlp.gate_proj.bias", "layers.1.mlp.gate_proj.bias"]
    assert any("bias=True" in c for c in tiny.causes)
    assert report.graphs_compiled == 0


@pytest.mark.slow
def test_renamed_attribute_orphaning_checkpoint_keys_fails_with_rename(tmp_path: Path) -> None:
    report = run_verify(V2, broken_port(tmp_path, "renamed_attr"), mypy=False)
    assert report.exit_code == 1
    tiny = report.by_name("TinyLM")
    assert tiny.alignment is not None
    unexpected = sorted(i.key for i in tiny.alignment.issues if i.kind == "unexpected")
    assert unexpected == ["norm.ln.bias", "norm.ln.weight"]
    assert [(s.kind, s.old, s.new, s.explains) for s in tiny.alignment.suggestions] == [
        ("rename", "ln", "layer_norm", 2)
    ]
    assert "suggestion: rename 'ln' -> 'layer_norm' (2 keys)" in tiny.causes


@pytest.mark.slow
def test_changed_eps_fails_and_names_the_norm(tmp_path: Path) -> None:
    report = run_verify(V2, broken_port(tmp_path, "eps_changed"), mypy=False)
    assert report.exit_code == 1
    tiny = report.by_name("TinyLM")
    assert tiny.status == "fail"
    eps = [(h.path, h.name, h.v2, h.v3) for h in tiny.hparams]
    assert eps == [("layers.0.norm", "eps", "1e-06", "1e-05"),
                   ("layers.1.norm", "eps", "1e-06", "1e-05")]
    assert any(c.startswith("layers.0.norm.eps: V2 1e-06 != V3 1e-05") for c in tiny.causes)
    assert not tiny.outputs[0].passed  # measured max rel error 6e-3 against rtol 1e-4


@pytest.mark.slow
def test_norm_in_the_wrong_dtype_fails_in_bfloat16(tmp_path: Path) -> None:
    ok = run_verify(V2, V3, only=["OutputNorm"], dtype="bfloat16", mypy=False)
    assert ok.exit_code == 0, ok.to_json()
    assert ok.by_name("OutputNorm").outputs[0].max_abs == 0.0
    bad = run_verify(V2, broken_port(tmp_path, "norm_dtype"), only=["OutputNorm"],
                     dtype="bfloat16", mypy=False)
    assert bad.exit_code == 1
    norm = bad.by_name("OutputNorm")
    assert norm.status == "fail"
    # Measured: on CPU both layer_norm variants give bit-identical bfloat16
    # outputs, so numerics alone would pass this port; the static semantic
    # check (api-map 10.3) is what fails it, and names the layer and the fix.
    assert norm.outputs[0].passed and norm.outputs[0].max_abs == 0.0
    assert [(h.path, h.name, h.severity) for h in norm.hparams] == [
        ("ln", "compute dtype", "error")
    ]
    assert any(c.startswith("ln.compute dtype: V2 float32 != V3 input dtype") for c in norm.causes)
    assert any("keep_dtype=False" in c for c in norm.causes)


@pytest.mark.slow
def test_wrong_dtype_norm_is_only_a_warning_in_float32(tmp_path: Path) -> None:
    report = run_verify(V2, broken_port(tmp_path, "norm_dtype"), mypy=False, compile=False)
    tiny = report.by_name("TinyLM")
    assert tiny.status == "pass"
    assert [(h.name, h.severity) for h in tiny.hparams] == [("compute dtype", "warning")]


@pytest.mark.slow
def test_cli_json_and_exit_codes(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(verify, [str(V2), str(V3), "--format", "json", "--no-mypy"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["exit_code"] == 0
    assert {c["name"]: c["status"] for c in data["classes"]}["TinyLM"] == "pass"

    result = runner.invoke(verify, [str(V2), str(broken_port(tmp_path, "bias_flipped")),
                                    "--no-mypy"])
    assert result.exit_code == 1
    assert "layers.0.mlp.gate_proj.bias" in result.output

    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "nothing.py").write_text("X = 1\n")
    result = runner.invoke(verify, [str(V2), str(empty), "--no-mypy", "--no-compile"])
    assert result.exit_code == 2
    assert "no V3 class of this name" in result.output


def _checkpoint(path: Path, extra: dict[str, object] | None = None) -> Path:
    """A safetensors file in V2 names with values unlike verify's own seed."""
    import numpy as np
    from safetensors.numpy import save_file

    from migrate_v3.verify.tensors import random_state_dict

    shapes = {
        "embed_tokens.weight": (64, 16), "norm.ln.weight": (16,), "norm.ln.bias": (16,),
        **{f"layers.{i}.{k}": s for i in range(2) for k, s in {
            "norm.weight": (16,), "mlp.gate_proj.weight": (32, 16),
            "mlp.up_proj.weight": (32, 16), "mlp.down_proj.weight": (16, 32),
            "mlp.down_proj.bias": (16,)}.items()},
    }
    values = random_state_dict({k: (s, "float32") for k, s in shapes.items()}, seed=1234)
    tensors = {k: np.asarray(v) for k, v in values.items()}
    tensors.update({k: np.asarray(v) for k, v in (extra or {}).items()})
    save_file(tensors, str(path))
    return path


@pytest.mark.slow
def test_real_checkpoint_with_weights_option(tmp_path: Path) -> None:
    ckpt = _checkpoint(tmp_path / "model.safetensors")
    report = run_verify(V2, V3, weights=ckpt, mypy=False)
    assert report.exit_code == 0, report.to_json()
    assert report.by_name("TinyLM").alignment.checkpoint_keys == 13  # type: ignore[union-attr]


@pytest.mark.slow
def test_checkpoint_key_no_v3_parameter_takes_fails(tmp_path: Path) -> None:
    import numpy as np

    ckpt = _checkpoint(tmp_path / "model.safetensors",
                       {"lm_head.weight": np.zeros((64, 16), np.float32)})
    report = run_verify(V2, V3, weights=ckpt, mypy=False)
    tiny = report.by_name("TinyLM")
    assert report.exit_code == 1 and tiny.status == "fail"
    assert [(i.kind, i.key) for i in tiny.alignment.issues] == [  # type: ignore[union-attr]
        ("unexpected", "lm_head.weight")
    ]
    assert all(o.passed for o in tiny.outputs)  # compile() alone would have said nothing


def _arch() -> Path:
    import max.pipelines.architectures as archs

    return Path(archs.__file__).parent


@pytest.mark.slow
def test_official_mpnet_port_passes() -> None:
    """MAX's own V2/V3 pair: same class names, same weight names, same numbers."""
    report = run_verify(_arch() / "mpnet" / "graph.py", _arch() / "mpnet_modulev3" / "graph.py",
                        spec=ROOT / "fixtures" / "verify" / "specs" / "mpnet.py", mypy=False)
    assert report.exit_code == 0, report.to_json()
    model = report.by_name("MPNetModel")
    assert model.alignment is not None and model.alignment.ok
    assert model.outputs[0].passed and model.outputs[0].shape == [2, 6, 16]


def test_unsupported_classes_are_listed_with_reasons() -> None:
    """olmo2's layers take KV-cache inputs: no automatic case, each skip says why."""
    report = run_verify(_arch() / "olmo2" / "layers", _arch() / "olmo2_modulev3" / "layers",
                        mypy=False, compile=False)
    assert report.exit_code == 2  # nothing could be verified
    reasons = {c.name: c.reason for c in report.classes}
    assert set(reasons) == {"Olmo2Attention", "Olmo2TransformerBlock"}
    assert all(c.status == "skipped" and c.reason for c in report.classes)
    assert "give this class a case in the spec" in reasons["Olmo2TransformerBlock"]


def test_pyproject_spec_is_found_beside_the_port(tmp_path: Path) -> None:
    port = tmp_path / "tinylm_port"
    shutil.copytree(V3, port, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "pyproject.toml").write_text(
        '[tool.migrate-v3.verify]\n'
        'only = ["FeedForward"]\n'
        '[tool.migrate-v3.verify.classes.FeedForward]\n'
        'args = [16, 8]\n'
        'v2_args = ["$dtype", "$device"]\n'
        'inputs = [{ shape = [3, 16], dims = ["tokens", 16] }]\n'
    )
    report = run_verify(V2, port, mypy=False, compile=False)
    assert report.exit_code == 0, report.to_json()
    ff = report.by_name("FeedForward")
    assert ff.status == "pass" and ff.alignment is not None
    assert ff.alignment.checkpoint_keys == 4  # gate, up, down weight + down bias
    assert report.by_name("TinyLM").reason == "not selected (--only)"


@pytest.mark.slow  # mypy analyses max itself: ~70 s with a cold mypy cache
def test_leftover_v2_annotation_fails_on_mypy_only(tmp_path: Path) -> None:
    report = run_verify(V2, broken_port(tmp_path, "type_leftover"), compile=False)
    assert report.by_name("TinyLM").status == "pass"  # keys and hyper-parameters agree
    assert report.mypy is not None and report.mypy.error == ""
    assert report.mypy.v3_errors > report.mypy.v2_errors == 0
    assert [f.path.rsplit("/", 1)[-1] for f in report.mypy.v3_files] == ["layers.py"]
    assert report.exit_code == 1


def test_automatic_cases_from_constructor_signatures() -> None:
    from migrate_v3.verify.auto import auto_case
    from migrate_v3.verify.loader import load_side, module_classes
    from migrate_v3.verify.sides import v2_base, v3_base
    from migrate_v3.verify.spec import DEVICE, DTYPE

    v2 = module_classes(load_side(V2, "v2"), v2_base())
    v3 = module_classes(load_side(V3, "v3"), v3_base())
    ff = auto_case(v2["FeedForward"], v3["FeedForward"])
    assert not isinstance(ff, str)
    assert ff.v2_kwargs == {"hidden": 16, "ffn": 16, "dtype": DTYPE, "device": DEVICE}
    assert ff.v3_kwargs == {"hidden": 16, "ffn": 16}
    assert [(i.shape, i.dims) for i in ff.inputs] == [((2, 5, 16), ("batch", "seq", 16))]
    lm = auto_case(v2["TinyLM"], v3["TinyLM"])
    assert not isinstance(lm, str) and lm.greedy
    assert (lm.inputs[0].dtype, lm.inputs[0].high) == ("int64", 64)  # vocab from the config
