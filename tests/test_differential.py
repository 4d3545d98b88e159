"""Differential tests: real max 26.7 V2 modules, migrated by the tool, same numerics.

For each family the V2 source files are copied into a package in
``tmp_path``, migrated by the tool's ``apply`` (``apply_paths``, which writes
the sibling ``<name>_modulev3`` package) and handed to ``verify`` with no
hand edit in between: the same seeded random state dict on both sides, V2
through a Graph + session, V3 through ``F.lazy()`` + ``compile(weights=...)``.
Only root classes compile, one graph per side. Families: the bundled tinylm,
mpnet (embeddings, self-attention, encoder layer), bert (same plus pooling),
olmo2's decoder MLP + norm, gemma3's MLP + its RMSNorm subclass (the
``super().__init__`` map and the GemmaRMSNorm base), the Wan VAE norm + conv,
idefics3's vision MLP: 14 distinct graphs.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

import pytest

from migrate_v3.apply import ApplyReport, apply_paths
from migrate_v3.verify import run_verify
from migrate_v3.verify.report import VerifyReport

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "verify"


def _arch() -> Path:
    import max.pipelines.architectures as archs

    return Path(archs.__file__).parent


def migrate(
    name: str, sources: Iterable[tuple[Path, str]], tmp_path: Path
) -> tuple[Path, Path, ApplyReport]:
    """Copy V2 files into tmp/<name>; ``apply`` writes tmp/<name>_modulev3."""
    v2 = tmp_path / name
    v2.mkdir(parents=True)
    (v2 / "__init__.py").write_text("")
    for src, rel in sources:
        (v2 / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, v2 / rel)
    report = apply_paths([v2])
    assert not report.errors and not any(f.error for f in report.files), report.errors
    return v2, tmp_path / f"{name}_modulev3", report


def assert_passes(report: VerifyReport, root: str, n_outputs: int = 1) -> None:
    cls = report.by_name(root)
    assert cls.status == "pass", cls.causes
    assert len(cls.outputs) == n_outputs and all(o.passed for o in cls.outputs)
    assert cls.alignment is not None and cls.alignment.ok
    assert report.exit_code == 0, report.to_json()


def _spec_file(tmp_path: Path, table: str) -> Path:
    spec = tmp_path / f"spec_{table}.py"
    spec.write_text(
        f"import sys\nsys.path.insert(0, {str(FIXTURES / 'differential')!r})\n"
        f"import specs\nCASES = specs.{table}\n"
    )
    return spec


@pytest.mark.slow
def test_tinylm_example_package(tmp_path: Path) -> None:
    src = ROOT / "fixtures" / "models" / "tinylm"
    v2, v3, applied = migrate("tinylm", [(p, p.name) for p in sorted(src.glob("*.py"))], tmp_path)
    report = run_verify(v2, v3, apply_report=applied, mypy=False, greedy=3)  # automatic mode: no spec
    assert_passes(report, "TinyLM")
    tiny = report.by_name("TinyLM")
    assert tiny.greedy is not None and tiny.greedy.passed


@pytest.mark.slow
def test_mpnet_embeddings_self_attention_encoder_layer(tmp_path: Path) -> None:
    src = _arch() / "mpnet"
    v2, v3, applied = migrate("mpnet", [(src / f, f) for f in ("graph.py", "model_config.py")], tmp_path)
    report = run_verify(v2, v3, apply_report=applied, spec=FIXTURES / "specs" / "mpnet.py", mypy=False)
    assert_passes(report, "MPNetModel")
    for inner in ("MPNetEmbeddings", "MPNetSelfAttention", "MPNetLayer"):
        assert report.by_name(inner).status == "skipped"  # compiled inside MPNetModel


@pytest.mark.slow
def test_olmo2_decoder_mlp_and_norm(tmp_path: Path) -> None:
    v2, v3, applied = migrate(
        "olmo2", [(FIXTURES / "differential" / "olmo2_mlp_block.py", "mlp_block.py")], tmp_path
    )
    report = run_verify(v2, v3, apply_report=applied, spec=_spec_file(tmp_path, "OLMO2"),
                        mypy=False)
    assert_passes(report, "Olmo2MLPBlock")


@pytest.mark.slow
def test_gemma3_mlp_and_rmsnorm_subclass(tmp_path: Path) -> None:
    """gemma3's own ``Gemma3RMSNorm(RMSNorm)`` (``super().__init__(..., weight_offset=1)``) migrated as is."""
    v2, v3, applied = migrate(
        "gemma3",
        [(_arch() / "gemma3" / "layers" / "rms_norm.py", "rms_norm.py"),
         (FIXTURES / "differential" / "gemma3_mlp_block.py", "mlp_block.py")],
        tmp_path,
    )
    assert "class Gemma3RMSNorm(GemmaRMSNorm):" in (v3 / "rms_norm.py").read_text()
    report = run_verify(v2, v3, apply_report=applied, spec=_spec_file(tmp_path, "GEMMA3"), mypy=False,
                        only=["Gemma3MLPBlock"])
    assert_passes(report, "Gemma3MLPBlock")


@pytest.mark.slow
def test_autoencoder_vae_norm_conv_block(tmp_path: Path) -> None:
    src = _arch() / "autoencoders"
    v2, v3, applied = migrate(
        "autoencoders",
        [(src / "vae.py", "vae.py"), (src / "model_config.py", "model_config.py"),
         (FIXTURES / "differential" / "vae_block.py", "block.py")],
        tmp_path,
    )
    report = run_verify(v2, v3, apply_report=applied, spec=_spec_file(tmp_path, "VAE"), mypy=False,
                        only=["NormConvBlock"])
    assert_passes(report, "NormConvBlock")


@pytest.mark.slow
def test_idefics3_vision_mlp(tmp_path: Path) -> None:
    src = _arch() / "idefics3"
    v2, v3, applied = migrate(
        "idefics3",
        [(src / "vision_model" / "encoder.py", "vision_model/encoder.py"),
         (src / "vision_model" / "attention.py", "vision_model/attention.py"),
         (src / "model_config.py", "model_config.py")],
        tmp_path,
    )
    report = run_verify(v2, v3, apply_report=applied, spec=_spec_file(tmp_path, "IDEFICS3"), mypy=False,
                        only=["Idefics3VisionMLP"])
    assert_passes(report, "Idefics3VisionMLP")


@pytest.mark.slow
def test_bert_embeddings_encoder_and_pooling(tmp_path: Path) -> None:
    src = _arch() / "bert"
    v2, v3, applied = migrate("bert", [(src / f, f) for f in ("graph.py", "model_config.py")], tmp_path)
    report = run_verify(v2, v3, apply_report=applied, spec=FIXTURES / "specs" / "bert.py", mypy=False)
    assert_passes(report, "BertModel")
