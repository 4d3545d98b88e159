"""The bundled tinylm, migrated by ``apply``, computes what V2 computes (CPU, float32).

One V2 compile and one V3 compile (~1 min each on CPU): marked slow.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from migrate_v3.apply_cmd import apply

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "fixtures" / "models"


@pytest.fixture
def both_packages(tmp_path: Path) -> Iterator[tuple[object, object]]:
    out = tmp_path / "out"
    result = CliRunner().invoke(apply, [str(MODELS / "tinylm"), "--out", str(out)])
    assert result.exit_code == 1, result.output  # the docstrings that call it V2 (MV304)
    migrated = out / "tinylm_modulev3" / "model.py"
    todos = [line for line in migrated.read_text().splitlines() if "TODO(migrate-v3)" in line]
    assert todos and all("MV304" in line for line in todos)  # prose only: the code is migrated
    sys.path[:0] = [str(MODELS), str(out)]
    try:
        yield importlib.import_module("tinylm.model"), importlib.import_module("tinylm_modulev3.model")
    finally:
        sys.path.remove(str(MODELS))
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m.split(".")[0] in ("tinylm", "tinylm_modulev3")]:
            del sys.modules[name]


@pytest.mark.slow
def test_migrated_run_matches_v2(both_packages: tuple[object, object]) -> None:
    from max.driver import Buffer
    from max.dtype import DType
    from max.graph import DeviceRef

    v2, v3 = both_packages
    config = v2.TinyLMConfig()  # type: ignore[attr-defined]
    rng = np.random.default_rng(0)
    shapes = v2.TinyLM(config, DType.float32, DeviceRef.CPU()).raw_state_dict()  # type: ignore[attr-defined]
    state_dict = {
        name: rng.standard_normal([int(d) for d in w.shape]).astype(np.float32) * 0.5
        for name, w in shapes.items()
    }
    tokens = rng.integers(0, config.vocab_size, size=(2, 5), dtype=np.int64)

    expected = v2.run(config, state_dict, Buffer.from_numpy(tokens))  # type: ignore[attr-defined]
    got = v3.run(v3.TinyLMConfig(), state_dict, Buffer.from_numpy(tokens))  # type: ignore[attr-defined]

    assert isinstance(got, Buffer)
    expected_np, got_np = expected.to_numpy(), got.to_numpy()
    assert got_np.shape == expected_np.shape == (2, config.vocab_size)
    np.testing.assert_allclose(got_np, expected_np, rtol=1e-4, atol=1e-5)
