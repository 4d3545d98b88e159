"""The V2 graph builders of ``fixtures/graph_compile/input_types_expression`` compute, once
migrated by ``apply``'s pipeline, what V2 computes (CPU, float32).

Input types given as an expression (``compile(*types)``), ``m.state_dict()`` kept for the
registry, the output under ``isinstance(out, tuple)``, two builders in one body and loads
stored in attributes (``g.engine_model``, V2's engine ``Model``): three small graphs per side,
about a minute each to compile the first time: marked slow.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from migrate_v3.pipeline import transform_source

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "graph_compile" / "input_types_expression.input.py"


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_migrated_builders_match_v2(tmp_path: Path) -> None:
    from max.driver import CPU, Buffer
    from max.engine import InferenceSession

    migrated = transform_source(FIXTURE.read_text(), path=str(FIXTURE)).code
    assert "Graph(" not in migrated and "TODO(migrate-v3): MV38" in migrated  # (only the .to(device) notes)
    (tmp_path / "v3_builders.py").write_text(migrated)
    v2 = _load(FIXTURE, "v2_builders")
    v3 = _load(tmp_path / "v3_builders.py", "v3_builders")

    rng = np.random.default_rng(0)
    weights = [{"proj.weight": rng.standard_normal((4, 4)).astype(np.float32)} for _ in range(3)]
    x = rng.standard_normal((3, 4)).astype(np.float32)

    results = []
    for module in (v2, v3):
        component = module.Component(InferenceSession(devices=[CPU()]), [CPU()])
        one = component.load_model(weights[0]).execute(Buffer.from_numpy(x))[0]
        component.load_two(weights[1], weights[2])
        two = component.run(Buffer.from_numpy(x))
        assert isinstance(one, Buffer) and isinstance(two, Buffer)
        results.append((one.to_numpy(), two.to_numpy()))

    (v2_one, v2_two), (v3_one, v3_two) = results
    np.testing.assert_allclose(v2_one, x @ weights[0]["proj.weight"].T, rtol=1e-5, atol=1e-5)  # V2 itself is right
    np.testing.assert_allclose(v3_one, v2_one, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(v3_two, v2_two, rtol=1e-5, atol=1e-6)


def test_a_builder_without_a_dtype_argument_builds_in_the_configs_dtype(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``fixtures/graph_compile/config_dtype``: V2 built the embedding in ``config.dtype``; the
    migrated builder must too, or a bfloat16 checkpoint meets float32 parameters (qwen3's text
    encoder, built from ``self.config``, had its embedding in float32). No compile: the compile
    call records the parameters it is given."""
    from types import SimpleNamespace

    from max.dtype import DType
    from max.graph import DeviceRef

    source = FIXTURE.with_name("config_dtype.input.py")
    (tmp_path / "v3_config_dtype.py").write_text(transform_source(source.read_text(), path=str(source)).code)
    v3 = _load(tmp_path / "v3_config_dtype.py", "v3_config_dtype")
    seen: dict[str, DType] = {}

    def compile(self: object, *types: object, weights: object) -> object:
        seen.update({name: t.dtype for name, t in self.parameters})  # type: ignore[attr-defined]
        return SimpleNamespace(engine_model="engine")

    monkeypatch.setattr(v3.Encoder, "compile", compile)
    config = SimpleNamespace(vocab_size=8, hidden_size=4, dtype=DType.bfloat16, device=DeviceRef.CPU())
    component = v3.Component(config, session=None)
    assert component.load_model({}) == "engine"
    assert seen == {"embed_tokens.weight": DType.bfloat16}
    assert component.load_keyword({}, DType.float16) == "engine"
    assert seen == {"embed_tokens.weight": DType.float16}
