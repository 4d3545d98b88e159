"""The V3 port of V2 ``Conv1D`` (``migrate_v3/knowledge/ports/conv1d.py``): construct, weights, trace.

No graph is compiled: each case builds the V2 layer and its port (under
``F.lazy()``) from the same arguments, checks the V3 parameters against the
V2 weights (names, shapes, dtypes) and stages both graphs with the same input
type, whose output types must agree. The whole-model case is max 26.7's
``whisper`` encoder (two ``Conv1D``), migrated by ``apply``.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from migrate_v3.apply import apply_paths
from migrate_v3.verify import sides
from migrate_v3.verify.align import align_keys


def _v2_output_type(module: Any, input_type: Any) -> tuple[str, list[str]]:
    """(dtype, shape) of the first output of the V2 module's traced Graph (float32 zero weights)."""
    import numpy as np

    module.load_state_dict(
        {k: np.zeros([int(d) for d in w.shape], np.float32) for k, w in module.raw_state_dict().items()}
    )
    out = module.trace(input_type).output_types[0]
    return str(out.dtype), [str(d) for d in out.shape]


def _v3_output_type(module: Any, input_type: Any) -> tuple[str, list[str]]:
    """(dtype, shape) of the first output of ``Module.trace`` (staged, not compiled)."""
    layout = module.trace(input_type).out_layouts[0]
    return str(layout.dtype), [str(d) for d in layout.shape]


@pytest.mark.parametrize(
    "kwargs, shape",
    [
        # (batch, length, in_channels); stride 2, asymmetric causal padding, bias
        ({"kernel_size": 3, "in_channels": 4, "out_channels": 6, "stride": 2, "padding": (2, 0), "has_bias": True},
         [2, 9, 4]),
        # PyTorch layout (batch, in_channels, length); groups and dilation, no bias
        ({"kernel_size": 3, "in_channels": 4, "out_channels": 6, "dilation": 2, "num_groups": 2, "padding": 1,
          "permute": True}, [2, 4, 9]),
    ],
)
def test_conv1d_port_has_v2_weights_and_output_type(kwargs: dict[str, Any], shape: list[int]) -> None:
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.tensor import default_dtype
    from max.graph import DeviceRef, TensorType
    from max.nn.conv import Conv1D as V2Conv1D

    from migrate_v3.knowledge.ports.conv1d import Conv1D

    v2 = V2Conv1D(dtype=DType.float32, device=DeviceRef.CPU(), **kwargs)
    with F.lazy(), default_dtype(DType.bfloat16):
        v3 = Conv1D(dtype=DType.float32, device=DeviceRef.CPU(), **kwargs)  # its dtype, not the default's
    assert align_keys(sides.v2_signature(v2), sides.v3_signature(v3)).ok
    assert v3.filter is v3.weight  # V2's attribute name still reads the filter
    input_type = TensorType(DType.float32, shape, device=DeviceRef.CPU())
    out2 = _v2_output_type(v2, input_type)
    out3 = _v3_output_type(v3, input_type)
    assert out3 == out2


def test_conv1d_port_refuses_a_name_that_changed_v2_checkpoint_keys() -> None:
    from migrate_v3.knowledge.ports.conv1d import Conv1D

    with pytest.raises(ValueError, match="attribute paths"):
        Conv1D(3, 4, 6, name="conv")


@pytest.fixture()
def whisper(tmp_path: Path) -> Any:
    """max 26.7's whisper encoder migrated by ``apply`` (V2 ``Conv1D`` → the port)."""
    import max.pipelines.architectures as archs

    pkg = tmp_path / "whisper_conv1d_case"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy(Path(archs.__file__).parent / "whisper" / "encoder.py", pkg / "encoder.py")
    report = apply_paths([pkg])
    assert not report.errors and not any(f.error for f in report.files), report.errors
    out = tmp_path / "whisper_conv1d_case_modulev3" / "encoder.py"
    assert "class Conv1D(Module[[Tensor], Tensor])" in out.read_text()
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module("whisper_conv1d_case_modulev3.encoder")
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n.startswith("whisper_conv1d_case")]:
            del sys.modules[name]


def test_migrated_whisper_encoder_has_v2_weights_and_traces(whisper: Any) -> None:
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.tensor import default_dtype
    from max.graph import DeviceRef, TensorType
    from max.pipelines.architectures.whisper.encoder import WhisperEncoder as V2Encoder
    from transformers import WhisperConfig

    config = WhisperConfig(d_model=16, encoder_layers=1, encoder_attention_heads=2, encoder_ffn_dim=32,
                           num_mel_bins=8, max_source_positions=4)
    config.n_heads = 2  # the V2 encoder reads it; transformers' config names it encoder_attention_heads
    v2 = V2Encoder(config, DType.float32, DeviceRef.CPU())
    with F.lazy(), default_dtype(DType.float32):
        v3 = whisper.WhisperEncoder(config, DType.float32, DeviceRef.CPU())
    alignment = align_keys(sides.v2_signature(v2), sides.v3_signature(v3))
    assert alignment.ok, alignment.issues[:3]
    assert {k for k in sides.v3_signature(v3) if k.startswith("conv")} == {
        "conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias"}
    # (batch, length, mel bins): V2 Conv1D's layout; stride 2 halves 8 frames to the 4 positions
    input_type = TensorType(DType.float32, ["batch", 8, 8], device=DeviceRef.CPU())
    assert _v3_output_type(v3, input_type) == _v2_output_type(v2, input_type) == ("DType.float32", ["batch", "4", "16"])
