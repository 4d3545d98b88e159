"""A sibling's V2 layer subclass that its official variant renamed (max's gemma3
``ScaledWordEmbedding``, a ``VocabParallelEmbedding``; gemma3_modulev3's ``ScaledEmbedding``, a
V3 one taking the same ``embed_scale``): a user's package importing it gets the variant's class,
built with V3 arguments and called without signal buffers. Checked on the real packages: the
migrated module constructs under ``F.lazy()``, has V2's parameter names and shapes, and traces."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tests.migrated_archs import migrated_archs
from tests.test_sharding_shapes import cpu_accelerator_handles

USER = '''\
from collections.abc import Sequence

from max.dtype import DType
from max.graph import BufferValue, DeviceRef, TensorValue
from max.nn.layer import Module

from ..gemma3.layers.scaled_word_embedding import ScaledWordEmbedding


class Text(Module):
    def __init__(self, vocab: int, hidden: int, devices: list[DeviceRef]) -> None:
        super().__init__()
        self.embed_tokens = ScaledWordEmbedding(vocab, hidden, DType.float32, devices, embed_scale=hidden**0.5)

    def __call__(self, tokens: TensorValue, signal_buffers: Sequence[BufferValue]) -> TensorValue:
        return self.embed_tokens(tokens, signal_buffers)[0]
'''


def Root(text: object) -> object:  # noqa: N802 - a class made once max is importable
    """A root over ``text`` whose forward takes the tokens only (no signal buffers to trace with)."""
    from max.experimental.nn import Module
    from max.experimental.tensor import Tensor

    class _Root(Module[[Tensor], Tensor]):
        def __init__(self) -> None:
            super().__init__()
            self.text = text

        def forward(self, tokens: Tensor) -> Tensor:
            return self.text(tokens, [])

    return _Root()


@pytest.mark.needs_max
def test_a_renamed_sibling_layer_is_imported_as_its_variant_and_traces(tmp_path: Path) -> None:
    from max.dtype import DType
    from max.experimental import functional as F
    from max.graph import DeviceRef, TensorType

    written = {"user/__init__.py": "", "user/text.py": USER}
    with migrated_archs(tmp_path, "twin_pkg", ["gemma3", "gemma3_modulev3"], ["user"], written):
        out = (tmp_path / "twin_pkg" / "user_modulev3" / "text.py").read_text()
        assert "import (\n    ScaledEmbedding as ScaledWordEmbedding,\n)" in out
        assert "ScaledWordEmbedding(vocab_size=vocab, dim=hidden, embed_scale=hidden**0.5)" in out
        assert "self.embed_tokens(tokens)" in out and "signal_buffers)" not in out.split("def forward")[1]
        with cpu_accelerator_handles():  # (V2's VocabParallelEmbedding builds an Allreduce)
            v2 = importlib.import_module("twin_pkg.user.text").Text(16, 8, [DeviceRef.CPU()])
        v3_module = importlib.import_module("twin_pkg.user_modulev3.text")
        with F.lazy():
            v3 = v3_module.Text(16, 8, [DeviceRef.CPU()])
        twin = importlib.import_module("twin_pkg.gemma3_modulev3.layers.scaled_word_embedding").ScaledEmbedding
        assert type(v3.embed_tokens) is twin and v3.embed_tokens.embed_scale == 8**0.5
        v3_names = {name: tuple(int(d) for d in t.shape) for name, t in v3.parameters}
        assert v3_names == {name: tuple(int(d) for d in w.shape) for name, w in v2.raw_state_dict().items()}
        assert v3_names == {"embed_tokens.weight": (16, 8)}
        Root(v3).trace(TensorType(DType.int64, ["tokens"], DeviceRef.CPU()))
