"""Whole max 26.7 packages migrated by ``apply`` (no hand edit), then built and run.

* mpnet: the whole ``mpnet/`` package is migrated, the migrated top-level
  ``MPNetModel`` is compiled on CPU with the V2 model's state dict and run
  against V2 ``MPNetModel`` (Graph + ``InferenceSession``) on the same inputs.
* llama3: the whole ``llama3/`` package is migrated; the migrated package
  imports, registers ``LlamaForCausalLM_ModuleV3`` and its root ``Llama3``
  has the V3 ``forward(tokens, return_n_logits, input_row_offsets, *kv)``.
  The migrated ``Llama3`` is compiled and run against V2 logits in
  ``tests/test_llama_family_e2e.py``.

Two compiles for mpnet (one V2 graph, one V3 graph), ~6 min first time on a
shared 2-core CPU, ~15 s cached: marked slow.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest

from migrate_v3.apply import apply_paths
from tests.migrated_archs import architectures


def _migrate(name: str, tmp_path: Path) -> Path:
    """Copy max's ``name/`` package to tmp and ``apply`` it; returns the out dir."""
    src = tmp_path / "v2" / name
    shutil.copytree(architectures() / name, src, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "out"
    report = apply_paths([src], out=out, force=False, diff=False, jobs=1)
    assert not report.errors and not any(f.error for f in report.files), report.errors
    assert (out / f"{name}_modulev3" / "__init__.py").is_file()
    return out


@pytest.fixture
def migrated(tmp_path: Path) -> Iterator[object]:
    """``migrated(name)`` → the migrated ``<name>_modulev3`` package, imported from the out dir."""
    paths: list[str] = []
    tops: list[str] = []

    def load(name: str) -> ModuleType:
        out = _migrate(name, tmp_path)
        sys.path.insert(0, str(out))
        paths.append(str(out))
        tops.append(f"{name}_modulev3")
        pkg = importlib.import_module(f"{name}_modulev3")
        assert Path(pkg.__file__).is_relative_to(out)  # not max's official port
        return pkg

    yield load
    for p in paths:
        sys.path.remove(p)
    for mod in [m for m in sys.modules if m.split(".")[0] in tops]:
        del sys.modules[mod]


# --- mpnet -----------------------------------------------------------------

MPNET_HF = SimpleNamespace(
    vocab_size=32, hidden_size=16, num_attention_heads=2, intermediate_size=32,
    hidden_act="gelu", layer_norm_eps=1e-5, max_position_embeddings=16,
    relative_attention_num_buckets=8, num_hidden_layers=2, pad_token_id=1,
)


def _mpnet_config(device: object) -> SimpleNamespace:
    """Stands in for MPNetConfig (which needs a pipeline config to construct)."""
    from max.dtype import DType

    return SimpleNamespace(
        huggingface_config=MPNET_HF, pool_embeddings=False, max_seq_len=16,
        dtype=DType.float32, device=device,
    )


def _mpnet_inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    ids = rng.integers(2, MPNET_HF.vocab_size, size=(2, 6), dtype=np.int64)
    mask = np.ones((2, 6), dtype=np.float32)
    ids[1, 4:] = MPNET_HF.pad_token_id  # a padded row: exercises position ids and the mask
    mask[1, 4:] = 0.0
    return ids, mask


def _run_mpnet_v2(state: dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    from max.driver import CPU, Buffer
    from max.engine import InferenceSession
    from max.graph import DeviceRef, Graph
    from max.pipelines.architectures.mpnet.graph import MPNetModel

    model = MPNetModel(_mpnet_config(DeviceRef.CPU()))  # type: ignore[arg-type]
    model.load_state_dict(state)
    with Graph("mpnet_v2", input_types=model.input_types()) as graph:
        graph.output(model(*(x.tensor for x in graph.inputs)))
    session = InferenceSession(devices=[CPU()])
    compiled = session.load(graph, weights_registry=model.state_dict())
    (out,) = compiled.execute(Buffer.from_numpy(ids), Buffer.from_numpy(mask))
    return out.to_numpy()  # type: ignore[union-attr]


def _mpnet_state(rng: np.random.Generator) -> dict[str, np.ndarray]:
    from max.graph import DeviceRef
    from max.pipelines.architectures.mpnet.graph import MPNetModel

    shapes = MPNetModel(_mpnet_config(DeviceRef.CPU())).raw_state_dict()  # type: ignore[arg-type]
    return {
        name: rng.standard_normal([int(d) for d in w.shape]).astype(np.float32) * 0.5
        for name, w in shapes.items()
    }


@pytest.mark.slow
def test_mpnet_whole_package_matches_v2(migrated) -> None:  # type: ignore[no-untyped-def]
    from max.driver import CPU, Buffer
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.tensor import default_dtype
    from max.graph import DeviceRef

    pkg = migrated("mpnet")
    graph_v3 = importlib.import_module(f"{pkg.__name__}.graph")
    state = _mpnet_state(np.random.default_rng(0))
    ids, mask = _mpnet_inputs()

    with F.lazy(), default_dtype(DType.float32):
        model = graph_v3.MPNetModel(_mpnet_config(DeviceRef.CPU()))
    model.to(CPU())
    v3_shapes = {name: tuple(int(d) for d in t.shape) for name, t in model.parameters}
    assert v3_shapes == {name: w.shape for name, w in state.items()}  # same keys, no prefix

    compiled = model.compile(*model.input_types(), weights=state)
    got = compiled(Buffer.from_numpy(ids), Buffer.from_numpy(mask))
    got_np = (got if isinstance(got, Buffer) else got.driver_tensor).to_numpy()

    expected = _run_mpnet_v2(state, ids, mask)
    assert expected.shape == got_np.shape == (2, 6, MPNET_HF.hidden_size)
    assert np.isfinite(expected).all()
    np.testing.assert_allclose(got_np, expected, rtol=1e-4, atol=1e-5)


# --- llama3 ----------------------------------------------------------------


@pytest.mark.slow
def test_llama3_whole_package_imports_and_registers(migrated) -> None:  # type: ignore[no-untyped-def]
    """Imports + registration + the migrated root ``forward``; no compile (see module docstring)."""
    import inspect

    from max.pipelines.lib import SupportedArchitecture

    pkg = migrated("llama3")
    arch = importlib.import_module(f"{pkg.__name__}.arch")
    model = importlib.import_module(f"{pkg.__name__}.model")
    llama3 = importlib.import_module(f"{pkg.__name__}.llama3")

    registered = pkg.llama_modulev3_arch
    assert registered is arch.llama_modulev3_arch
    assert isinstance(registered, SupportedArchitecture)
    assert registered.name == "LlamaForCausalLM_ModuleV3"
    assert registered.pipeline_model is model.Llama3Model  # the migrated one, not max's port
    assert registered.config is importlib.import_module(f"{pkg.__name__}.model_config").Llama3Config

    params = inspect.signature(llama3.Llama3.forward).parameters
    assert [(p.name, p.kind) for p in params.values()] == [
        ("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        ("tokens", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        ("return_n_logits", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        ("input_row_offsets", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        ("variadic_args", inspect.Parameter.VAR_POSITIONAL),
    ]
