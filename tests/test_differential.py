"""Differential tests: real max 26.7 V2 modules, migrated by the tool, same numerics.

For each family the V2 source files are copied into a package in
``tmp_path``, migrated by the tool's ``apply`` (``apply_paths``, which writes
the sibling ``<name>_modulev3`` package) and handed to ``verify`` with no
hand edit in between: the same seeded random state dict on both sides, V2
through a Graph + session, V3 through ``F.lazy()`` + ``compile(weights=...)``.
Only root classes compile. Families: the bundled tinylm, mpnet (embeddings,
self-attention, encoder layer), bert (same plus pooling), olmo2's decoder MLP +
norm, gemma3's MLP + its RMSNorm subclass (the ``super().__init__`` map and
the GemmaRMSNorm base), the Wan VAE norm + conv, idefics3's vision MLP, two V2 ``Conv1D`` and V2 ``StackedLinear`` other than q/k/v (the tool's ports),
blocks run by ``forward_sequential_layers`` with V2 subgraphs (the tool's port).

Every family is migrated and verified in one ``run_verify_many`` call (a
module fixture), so their roots share one compiled graph per side (a cold
MAX compile costs minutes per graph whatever its size: 14 graphs became 2);
tinylm's greedy check needs its own runner and compiles alone (the same
graphs as ``test_apply_verify``). Each test reads its family's report, and a
family that breaks the shared graph is compiled alone, so it is still named.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from migrate_v3.apply import ApplyReport, apply_paths
from migrate_v3.verify.report import VerifyReport
from migrate_v3.verify.runner import run_verify_many

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



def _families(tmp_path: Path) -> dict[str, tuple[Path, Path, dict[str, Any]]]:
    """Each family migrated: name -> (v2, v3, verify options)."""
    arch = _arch()
    out: dict[str, tuple[Path, Path, dict[str, Any]]] = {}

    def add(name: str, sources: Iterable[tuple[Path, str]], **options: Any) -> None:
        v2, v3, applied = migrate(name, sources, tmp_path / name)
        out[name] = (v2, v3, {"apply_report": applied, "mypy": False, **options})

    tinylm = ROOT / "fixtures" / "models" / "tinylm"
    add("tinylm", [(p, p.name) for p in sorted(tinylm.glob("*.py"))], greedy=3)  # automatic mode: no spec
    add("mpnet", [(arch / "mpnet" / f, f) for f in ("graph.py", "model_config.py")],
        spec=FIXTURES / "specs" / "mpnet.py")
    add("olmo2", [(FIXTURES / "differential" / "olmo2_mlp_block.py", "mlp_block.py")],
        spec=_spec_file(tmp_path, "OLMO2"))
    add("gemma3", [(arch / "gemma3" / "layers" / "rms_norm.py", "rms_norm.py"),
                   (FIXTURES / "differential" / "gemma3_mlp_block.py", "mlp_block.py")],
        spec=_spec_file(tmp_path, "GEMMA3"), only=["Gemma3MLPBlock"])
    add("autoencoders", [(arch / "autoencoders" / "vae.py", "vae.py"),
                         (arch / "autoencoders" / "model_config.py", "model_config.py"),
                         (FIXTURES / "differential" / "vae_block.py", "block.py")],
        spec=_spec_file(tmp_path, "VAE"), only=["NormConvBlock"])
    vision = arch / "idefics3" / "vision_model"
    add("idefics3", [(vision / "encoder.py", "vision_model/encoder.py"),
                     (vision / "attention.py", "vision_model/attention.py"),
                     (arch / "idefics3" / "model_config.py", "model_config.py")],
        spec=_spec_file(tmp_path, "IDEFICS3"), only=["Idefics3VisionMLP"])
    add("bert", [(arch / "bert" / f, f) for f in ("graph.py", "model_config.py")],
        spec=FIXTURES / "specs" / "bert.py")
    add("conv1d", [(FIXTURES / "differential" / "conv1d_block.py", "block.py")],
        spec=_spec_file(tmp_path, "CONV1D"))
    add("stacked_linear", [(FIXTURES / "differential" / "stacked_linear_block.py", "block.py")],
        spec=_spec_file(tmp_path, "STACKED_LINEAR"))
    return out


@pytest.fixture(scope="module")
def verified(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, VerifyReport]]:
    """Every family verified in one run_verify_many call: name -> (v3 package, report)."""
    families = _families(tmp_path_factory.mktemp("families"))
    reports = run_verify_many(list(families.values()))
    return {name: (v3, report) for (name, (_, v3, _)), report in zip(families.items(), reports, strict=True)}


@pytest.mark.slow
def test_tinylm_example_package(verified: dict[str, tuple[Path, VerifyReport]]) -> None:
    _, report = verified["tinylm"]
    assert_passes(report, "TinyLM")
    tiny = report.by_name("TinyLM")
    assert tiny.greedy is not None and tiny.greedy.passed


@pytest.mark.slow
def test_mpnet_embeddings_self_attention_encoder_layer(verified: dict[str, tuple[Path, VerifyReport]]) -> None:
    _, report = verified["mpnet"]
    assert_passes(report, "MPNetModel")
    for inner in ("MPNetEmbeddings", "MPNetSelfAttention", "MPNetLayer"):
        assert report.by_name(inner).status == "skipped"  # compiled inside MPNetModel


@pytest.mark.slow
def test_olmo2_decoder_mlp_and_norm(verified: dict[str, tuple[Path, VerifyReport]]) -> None:
    """Also a norm whose weight keeps its own dtype (bfloat16 in a float32 block): OffsetRMSNorm(dtype=)."""
    v3, report = verified["olmo2"]
    assert "OffsetRMSNorm(dim=hidden_size, eps=eps, multiply_before_cast=False, dtype=DType.bfloat16)" in (
        v3 / "mlp_block.py"
    ).read_text()
    assert_passes(report, "Olmo2MLPBlock")


@pytest.mark.slow
def test_gemma3_mlp_and_rmsnorm_subclass(verified: dict[str, tuple[Path, VerifyReport]]) -> None:
    """gemma3's own ``Gemma3RMSNorm(RMSNorm)`` (``super().__init__(..., weight_offset=1)``) migrated as is."""
    v3, report = verified["gemma3"]
    assert "class Gemma3RMSNorm(GemmaRMSNorm):" in (v3 / "rms_norm.py").read_text()
    assert_passes(report, "Gemma3MLPBlock")


@pytest.mark.slow
def test_autoencoder_vae_norm_conv_block(verified: dict[str, tuple[Path, VerifyReport]]) -> None:
    assert_passes(verified["autoencoders"][1], "NormConvBlock")


@pytest.mark.slow
def test_idefics3_vision_mlp(verified: dict[str, tuple[Path, VerifyReport]]) -> None:
    assert_passes(verified["idefics3"][1], "Idefics3VisionMLP")


@pytest.mark.slow
def test_bert_embeddings_encoder_and_pooling(verified: dict[str, tuple[Path, VerifyReport]]) -> None:
    assert_passes(verified["bert"][1], "BertModel")


@pytest.mark.slow
def test_conv1d_port(verified: dict[str, tuple[Path, VerifyReport]]) -> None:
    """V2 ``Conv1D`` has no V3 class: the tool adds its port (``knowledge/ports``), same weights and numerics."""
    v3, report = verified["conv1d"]
    assert "class Conv1D(Module[[Tensor], Tensor]):" in (v3 / "block.py").read_text()
    assert_passes(report, "Conv1DBlock")


@pytest.mark.slow
def test_stacked_linear_port(verified: dict[str, tuple[Path, VerifyReport]]) -> None:
    """V2 ``StackedLinear`` other than q/k/v has no V3 class: the tool adds its port, same weights and numerics."""
    v3, report = verified["stacked_linear"]
    assert "class StackedLinear(TransparentModule[[Tensor], Tensor]):" in (v3 / "block.py").read_text()
    assert_passes(report, "StackedLinearBlock")


@pytest.mark.slow
def test_forward_sequential_layers_port(tmp_path: Path) -> None:
    """V2 staged the blocks as one shared subgraph; the port calls them in order: same outputs.

    Verified on its own graph: V2 finds a subgraph's weights by ``weight_prefix_for_layer``
    from the graph's root, which the shared graph of the other families moves.
    """
    v2, v3, applied = migrate(
        "sequential", [(ROOT / "fixtures" / "ports" / "sequential_layers.input.py", "decoder.py")], tmp_path
    )
    assert "def forward_sequential_layers(" in (v3 / "decoder.py").read_text()
    (report,) = run_verify_many([(v2, v3, {"apply_report": applied, "mypy": False, "only": ["Decoder"],
                                           "spec": _spec_file(tmp_path, "SEQUENTIAL")})])
    assert_passes(report, "Decoder")


@pytest.mark.slow
def test_the_families_share_one_graph_per_side(verified: dict[str, tuple[Path, VerifyReport]]) -> None:
    """The eight spec'd families' roots are compiled together; tinylm (greedy) alone."""
    shared = {name: [c.graph_shared_by for c in report.classes if c.compared == "numeric"]
              for name, (_, report) in verified.items()}
    assert shared == {"tinylm": [1], "mpnet": [8], "olmo2": [8], "gemma3": [8], "autoencoders": [8],
                      "idefics3": [8], "bert": [8], "conv1d": [8], "stacked_linear": [8]}
    assert all(report.graphs_compiled == 2 for _, report in verified.values())
