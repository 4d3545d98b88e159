"""Input types the ladder traces a root with when neither its pipeline nor its own
``input_types()`` gives any (L4's harness, not the migration):

* a root whose entry point takes a paged KV cache beside input row offsets (a ragged decoder, a
  DFlash draft) is built as its class with a flat entry point and an ``input_types()``, the same
  types on both sides (:func:`migrate_v3.verify.auto.auto_case`, :mod:`migrate_v3.verify.kv_inputs`);
* a root that declares its inputs as an ``input_tree(kv_params)``, or whose V2 root declares
  them when the V2 load path never reached a graph, is traced with those
  (:func:`migrate_v3.verify.archbuild.compile_types_for`).

Nothing is compiled: staging the graphs is enough.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import Any

import pytest

from migrate_v3.verify import archbuild, auto, kv_inputs, sides


def _kv() -> Any:
    from max.dtype import DType
    from max.graph import DeviceRef
    from max.nn.kv_cache import MHAKVCacheParams

    return MHAKVCacheParams(
        dtype=DType.float32, n_kv_heads=2, head_dim=8, num_layers=1, devices=[DeviceRef.CPU()], page_size=16
    )


@dataclasses.dataclass
class DraftConfig:
    """A config with defaults that carries the KV cache parameters, as ``Llama3Config`` does."""

    hidden_size: int = 8
    kv_params: Any = dataclasses.field(default_factory=_kv)


def _v2_classes() -> tuple[type, type]:
    from max.dtype import DType
    from max.graph import DeviceRef
    from max.nn.kv_cache import KVCacheInputsPerDevice
    from max.nn.layer import Module
    from max.nn.linear import Linear

    class Draft(Module):
        def __init__(self, config: DraftConfig) -> None:
            super().__init__()
            self.proj = Linear(config.hidden_size, config.hidden_size, DType.float32, DeviceRef.CPU())

        def __call__(self, input_embeds: Any, kv_collection: Any, input_row_offsets: Any) -> Any:
            assert isinstance(kv_collection, KVCacheInputsPerDevice), type(kv_collection)
            assert list(input_row_offsets.shape) == ["input_row_offsets_len"]
            return self.proj(input_embeds)

    class Blocks(Draft):
        def __init__(self, config: DraftConfig, block_size: int) -> None:
            super().__init__(config)
            self.block_size = block_size

        def __call__(self, input_embeds: Any, kv_collection: Any, input_row_offsets: Any) -> Any:
            blocks = input_embeds.reshape((-1, self.block_size, input_embeds.shape[-1]))  # needs whole blocks
            return super().__call__(blocks.reshape((-1, input_embeds.shape[-1])), kv_collection, input_row_offsets)

    return Draft, Blocks


def _v3_class() -> type:
    from max.experimental.nn import Linear, Module
    from max.nn.kv_cache import KVCacheInputsPerDevice

    class Draft(Module[..., Any]):
        def __init__(self, config: DraftConfig, block_size: int = 0) -> None:
            super().__init__()
            self.proj = Linear(config.hidden_size, config.hidden_size, bias=False)

        # (V3 may name the offsets otherwise: the flat inputs are matched by position then)
        def forward(self, input_embeds: Any, kv_collection: Any, row_offsets: Any) -> Any:
            assert isinstance(kv_collection, KVCacheInputsPerDevice), type(kv_collection)
            return self.proj(input_embeds)

    return Draft


def test_a_draft_that_takes_a_paged_kv_cache_traces_through_flat_inputs_on_both_sides() -> None:
    v2_cls, _ = _v2_classes()
    v3_cls = _v3_class()
    made = auto.auto_case(v2_cls, v3_cls)
    assert not isinstance(made, str), made
    target = sides.make_target("cpu")
    v2 = sides.build_v2(made, v2_cls, target, "float32")
    v3 = sides.build_v3(made, v3_cls, target, "float32")
    assert type(v2).__name__ == type(v3).__name__ == "Draft"
    assert issubclass(type(v2), v2_cls) and issubclass(type(v3), v3_cls)
    # the weights and their names are the class's own
    assert set(sides.v2_signature(v2)) == set(sides.v3_signature(v3)) == {"proj.weight"}

    declared = auto.declared_input_types(v2)
    assert declared is not None, "no input types for a root that takes a paged KV cache"
    types, whose = declared
    assert whose == "Draft.input_types()"
    leaves = kv_inputs.kv_leaves(made.v2_kwargs["config"].kv_params)
    assert len(types) == 2 + len(leaves)
    assert [str(d) for d in types[0].shape] == ["total_seq_len", "8"]
    assert [str(d) for d in types[1].shape] == ["input_row_offsets_len"]
    assert kv_inputs.kv_slot(types, made.v2_kwargs["config"].kv_params) == 2  # the cache's inputs last

    staged = v3.trace(*types)  # V3: forward(*flat) unflattens the cache
    assert len(staged.graph.inputs) == len(types)
    graph = v2.trace(*types)  # V2: trace() adapts the flat graph inputs, as V2's Llama3 does
    assert len(graph.inputs) == len(types)
    # verify itself still does not compile it with seeded random inputs
    assert made.static_reason


def test_a_block_drafter_gets_whole_blocks_of_token_rows() -> None:
    _, v2_cls = _v2_classes()
    made = auto.auto_case(v2_cls, _v3_class())
    assert not isinstance(made, str), made
    target = sides.make_target("cpu")
    v2 = sides.build_v2(made, v2_cls, target, "float32")
    types, _ = auto.declared_input_types(v2) or ([], "")
    block = made.v2_kwargs["block_size"]
    assert [str(d) for d in types[0].shape] == [str(kv_inputs.BLOCKS * block), "8"]
    v2.trace(*types)  # (a symbolic total_seq_len does not reshape into blocks)


def test_only_a_ragged_decoder_gets_a_flat_layout() -> None:
    def ragged(self: Any, tokens: Any, kv_collection: Any, return_n_logits: Any, input_row_offsets: Any) -> Any: ...

    def no_offsets(self: Any, x: Any, kv_collection: Any) -> Any: ...

    def layer(self: Any, layer_idx: Any, x: Any, kv_collection: Any, input_row_offsets: Any) -> Any: ...

    layout = kv_inputs.ragged_layout(ragged)
    assert isinstance(layout, kv_inputs.FlatLayout)
    assert layout.heads == ["tokens", "return_n_logits", "input_row_offsets"]
    assert isinstance(kv_inputs.ragged_layout(no_offsets), str)
    assert isinstance(kv_inputs.ragged_layout(layer), str)  # a layer index has no input type
    assert kv_inputs.kv_params_in([1, "x"]) is None
    assert kv_inputs.kv_params_in([DraftConfig()]) is not None


def _tensor(*shape: Any) -> Any:
    from max.dtype import DType
    from max.graph import DeviceRef, TensorType

    return TensorType(DType.float32, list(shape), device=DeviceRef.CPU())


class _TreeRoot:
    """A V3 root that kept V2's ``input_tree`` but lost ``input_types`` (the V3 Llama3 it now
    subclasses has none)."""

    def input_tree(self, kv_params: Any, needs_hidden_state_input: bool = False) -> OrderedDict[str, object]:
        return OrderedDict(batch=OrderedDict(tokens=_tensor("total_seq_len")), kv=(_tensor("pages", 4),))


class _Bare:
    """A root that declares nothing."""


class _V2Root:
    def input_types(self, kv_params: Any) -> tuple[Any, ...]:
        assert kv_params == "kv"
        return (_tensor("total_seq_len"), _tensor("input_row_offsets_len"))


def _built(side: str, kv: Any = None) -> archbuild.Built:
    return archbuild.Built(side=side, arch_name="X", kv_params=kv)


def test_a_root_that_declares_an_input_tree_is_traced_with_its_leaves() -> None:
    types, source, fail = archbuild.compile_types_for(_TreeRoot(), _built("v3", "kv"), _built("v2", "kv"))
    assert fail is None and types is not None, fail
    assert source == "_TreeRoot.input_tree()"
    assert [str(t.shape[0]) for t in types] == ["total_seq_len", "pages"]


def test_the_v2_roots_declared_types_when_no_v2_graph_was_built() -> None:
    types, source, fail = archbuild.compile_types_for(_Bare(), _built("v3"), _built("v2", "kv"), root2=_V2Root())
    assert fail is None and types is not None, fail
    assert source == "the V2 root's _V2Root.input_types()"
    assert len(types) == 2
    types, _, fail = archbuild.compile_types_for(_Bare(), _built("v3"), _built("v2"), root2=_Bare())
    assert types is None and fail is not None and "no input_types()" in fail.error


class _Driver:
    """max's speculative drivers: ``input_types(kv_params=None)`` raises without the cache params."""

    def input_types(self, kv_params: Any = None) -> tuple[Any, ...]:
        if kv_params is None:
            raise ValueError("needs kv_params: pass them in or override signature_kv_params")
        return (_tensor("total_seq_len"),)


class _Holder:
    """migrate-v3's ModuleV3 holder of a driver: forwards ``input_types(*args, **kwargs)``."""

    def input_types(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        return _Driver().input_types(*args, **kwargs)


@pytest.mark.parametrize("root", [_Driver(), _Holder()], ids=["optional", "var-positional"])
def test_the_pipelines_kv_params_go_to_an_input_types_that_takes_them(root: Any) -> None:
    types, _, fail = archbuild.compile_types_for(root, _built("v3", "kv"), _built("v2"))
    assert fail is None and types is not None and len(types) == 1, fail
    types, _, fail = archbuild.compile_types_for(root, _built("v3"), _built("v2"))
    assert types is None and fail is not None and "needs kv_params" in fail.error


@pytest.mark.parametrize("attr", ["input_types", "input_tree"])
def test_a_declaring_method_that_raises_is_the_reason(attr: str) -> None:
    def broken(self: Any, kv_params: Any) -> Any:
        raise RuntimeError("needs the pipeline")

    root = type("Root", (), {attr: broken})()
    types, _, fail = archbuild.compile_types_for(root, _built("v3"), _built("v2"))
    assert types is None and fail is not None and "needs the pipeline" in fail.error


def test_a_replayed_root_is_built_in_the_dtype_most_of_its_v2_weights_have() -> None:
    """``archbuild.weights_dtype``: what the ladder replays a V3 root under when no config names a
    dtype (a V3 load path builds it under ``default_dtype(self.dtype)``, the model's)."""
    from max.dtype import DType
    from max.graph import DeviceRef
    from max.nn import Linear, RMSNorm
    from max.nn.layer import Module

    class Block(Module):
        def __init__(self) -> None:
            super().__init__()
            self.up = Linear(4, 8, DType.bfloat16, DeviceRef.CPU())
            self.down = Linear(8, 4, DType.bfloat16, DeviceRef.CPU())
            self.norm = RMSNorm(4, DType.float32)

        def __call__(self, x: Any) -> Any:
            return self.down(self.up(self.norm(x)))

    assert archbuild.weights_dtype(Block()) == DType.bfloat16
    assert archbuild.weights_dtype(object()) is None


def test_a_config_that_refuses_widths_in_part_blocks_is_made_again_with_whole_blocks(monkeypatch: Any) -> None:
    """``TinyConfigs``: an arch config whose ``initialize`` refuses a KV head width that is no whole
    number of quantization blocks (deepseekV3_2_nextn's indexer cache, blocks of 32) is made again
    with ``tiny.FP8_WIDTHS``."""
    from types import SimpleNamespace

    from migrate_v3.verify import tiny

    class Cfg:
        @classmethod
        def initialize(cls, *args: Any, **kwargs: Any) -> None: ...

    hf = SimpleNamespace(index_head_dim=16, kv_lora_rank=16, qk_rope_head_dim=8, hidden_size=32)

    def arch_config(cls: Any, config: Any, encoding: Any = None) -> Any:
        if config.index_head_dim % 32:
            raise ValueError("KVCache quantization granularity must evenly divide KV head dimension.")
        return ("built", config.index_head_dim)

    monkeypatch.setattr(tiny, "model_types", lambda *names: ["deepseek_v32"])
    monkeypatch.setattr(tiny, "tiny_hf_config", lambda model_type: hf)
    monkeypatch.setattr(tiny, "fill_config", lambda *a, **k: (_ for _ in ()).throw(TypeError("no tiny value")))
    monkeypatch.setattr(tiny, "arch_config", arch_config)
    assert auto.TinyConfigs(("nextn",), {})(Cfg) == ("built", 128)
