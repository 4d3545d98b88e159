"""MV363's ``tied_weight=`` rule on real MAX: the migrated head has V2's weight names, tied or not,
and the module stages (``Module.trace``: no compile). The tied product itself, ``x @ E.weight.T``,
is V2's ``ColumnParallelLinear(tied_weight=E.weight)`` by definition (one weight, transposed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrate_v3.pipeline import transform_source
from tests.migrated_archs import load_module

ROOT = Path(__file__).resolve().parent.parent
CASE = ROOT / "fixtures" / "tied_embeddings" / "tied_weight.input.py"


@pytest.mark.parametrize("tie", [True, False])
def test_a_tied_weight_head_has_v2s_weight_names_and_stages(tmp_path: Path, tie: bool) -> None:
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.tensor import TensorType
    from max.graph import DeviceRef

    v2 = load_module(f"tied_v2_{tie}", CASE.read_text(), tmp_path)
    v3 = load_module(f"tied_v3_{tie}", transform_source(CASE.read_text()).code, tmp_path)

    names2 = sorted(v2.LM(16, 8, tie, True, [DeviceRef.CPU()]).state_dict())
    with F.lazy():
        model = v3.LM(vocab=16, hidden=8, tie=tie, last=True, devices=[DeviceRef.CPU()])
    names3 = sorted(name for name, _ in model.parameters)
    assert names3 == names2 == (["embed_tokens.weight"] if tie else ["embed_tokens.weight", "lm_head.weight"])

    model.to(CPU())
    model.trace(TensorType(DType.int64, ["tokens"], DeviceRef.CPU()))


def test_a_tied_head_computes_with_the_compiled_weights(tmp_path: Path) -> None:
    """Compiled with a checkpoint, the tied head multiplies by *that* embedding weight.

    ``Module.compile`` traces a copy of the module that holds the checkpoint's weights; a head
    stored in ``__init__`` as a function of ``self`` would keep reading the original module's
    (random, lazily initialised) weight — it traces, and computes nonsense (gemma3's L5 did).
    """
    import numpy as np
    from max.driver import CPU, Buffer
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.tensor import TensorType
    from max.graph import DeviceRef

    v3 = load_module("tied_v3_compiled", transform_source(CASE.read_text()).code, tmp_path)
    with F.lazy():
        model = v3.LM(vocab=16, hidden=8, tie=True, last=True, devices=[DeviceRef.CPU()])
    model.to(CPU())
    weight = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    compiled = model.compile(TensorType(DType.int64, ["tokens"], DeviceRef.CPU()),
                             weights={"embed_tokens.weight": weight})
    tokens = np.array([3, 0, 15, 7], dtype=np.int64)
    out = compiled(Buffer.from_numpy(tokens))
    got = np.from_dlpack(out[0] if isinstance(out, tuple | list) else out)
    np.testing.assert_allclose(got, weight[tokens] @ weight.T, rtol=1e-5, atol=1e-5)
