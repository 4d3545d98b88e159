"""V2 ``.shard(devices)`` per-device weights == the V3 placements' local shards, statically.

For the same tiny config, the V2 module (its ``ShardingStrategy`` per weight,
as ``.shard(devices)`` slices them) and the migrated V3 module (built under
``default_device`` of a CPU ``DeviceMesh``; ``Tensor.local_shards``) must
give every parameter the same name and the same shape on every device. No
kernels run: V2 shapes come from staging each strategy in an empty graph,
V3 shapes from the placements. Covered: each rewritten pattern of
``fixtures/sharding`` and the distributed decoders of max's mistral and
llama3 packages and its dense Qwen3 (tensor parallel in the one class), at
tp = 2 and 4; the migrated DistributedMistral and Qwen3 (and a Qwen3 block)
also stage (``Module.trace``) on the mesh.

V2 distributed layers open accelerator handles at construction (``Allreduce``)
and refuse CPU devices (tensor-parallel attention), so the V2 side is built
with GPU ``DeviceRef``s (no device is touched: nothing compiles) and a CPU
stand-in for the handles, scoped to the construction.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from migrate_v3.apply import apply_paths
from tests.migrated_archs import migrated_archs

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "sharding"
Shapes = dict[str, list[tuple[int, ...]]]


@contextlib.contextmanager
def cpu_accelerator_handles() -> Iterator[None]:
    """V2 ``Allreduce`` asks for ``Accelerator(id)`` at construction; hand it the CPU (test-only)."""
    import max.nn.comm.allreduce as allreduce
    from max.driver import CPU

    real = allreduce.Accelerator
    allreduce.Accelerator = lambda id=0: CPU()
    try:
        yield
    finally:
        allreduce.Accelerator = real


def v2_device_shapes(module: Any, n: int) -> Shapes:
    """Per device, each weight's shape as V2's ``.shard(devices)`` gives it.

    A weight's strategy is what ``Weight.shard`` applies on each device; it is
    staged in an empty graph to read the slice's shape. V2's
    ``VocabParallelEmbedding`` slices its weight itself, ``ceil(vocab / n)`` rows a device.
    """
    from max.graph import Graph
    from max.nn.embedding import VocabParallelEmbedding

    vocab: dict[str, Any] = {}

    def walk(prefix: str, mod: Any) -> None:
        if isinstance(mod, VocabParallelEmbedding):
            vocab[f"{prefix}weight"] = mod
        for name, child in mod.sublayers.items():
            walk(f"{prefix}{name}.", child)

    walk("", module)
    out: Shapes = {}
    for name, weight in module.raw_state_dict().items():
        shape = tuple(int(d) for d in weight.shape)
        if name in vocab:
            size = vocab[name].shard_size
            rows = [max(0, min(size * (i + 1), shape[0]) - size * i) for i in range(n)]
            out[name] = [(r, *shape[1:]) for r in rows]
            continue
        strategy = weight.sharding_strategy
        assert strategy is not None, f"{name}: V2 gives it no device placement"
        shapes = []
        for i in range(n):
            with Graph(f"shard_{i}"):
                shapes.append(tuple(int(d) for d in strategy(weight, i).shape))
        out[name] = shapes
    return out


def _mesh(n: int) -> Any:
    from max.driver import CPU
    from max.experimental.sharding import DeviceMesh

    return DeviceMesh(tuple(CPU() for _ in range(n)), (n,), ("tp",))


def v3_build(factory: Any, n: int) -> Any:
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.tensor import default_device, default_dtype

    with F.lazy(), default_device(_mesh(n)), default_dtype(DType.float32):
        return factory()


def v3_device_shapes(module: Any) -> Shapes:
    from migrate_v3.weights.target import device_shapes

    return device_shapes(module)


def assert_same(v2: Shapes, v3: Shapes) -> None:
    assert sorted(v3) == sorted(v2), "global parameter names"
    diffs = {k: (v2[k], v3[k]) for k in v2 if v2[k] != v3[k]}
    assert not diffs, diffs


# -- the rewritten patterns (fixtures/sharding) ------------------------------------------------


PATTERN_FILES = ("layers", "block", "heads", "attention", "per_device_math")


@pytest.fixture(scope="module")
def patterns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ModuleType, ModuleType]]:
    """``fixtures/sharding`` inputs as package ``shard_v2``, their expected V3 files as ``shard_v3``."""
    root = tmp_path_factory.mktemp("shard_patterns")
    for pkg, suffix in (("shard_v2", "input"), ("shard_v3", "expected")):
        (root / pkg).mkdir()
        (root / pkg / "__init__.py").write_text("")
        for name in PATTERN_FILES:
            shutil.copy(FIXTURES / f"{name}.{suffix}.py", root / pkg / f"{name}.py")
    sys.path.insert(0, str(root))
    for pkg in ("shard_v2", "shard_v3"):
        for name in PATTERN_FILES:
            importlib.import_module(f"{pkg}.{name}")
    yield importlib.import_module("shard_v2"), importlib.import_module("shard_v3")
    sys.path.remove(str(root))
    for mod in [m for m in sys.modules if m.split(".")[0] in ("shard_v2", "shard_v3")]:
        del sys.modules[mod]


def _v2_tp(module: Any, n: int) -> Any:
    from max.graph import ShardingStrategy

    module.sharding_strategy = ShardingStrategy.tensor_parallel(n)
    return module


@pytest.mark.needs_max
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("case", ["GatedMLP", "BiasedMLP", "Projection"])
def test_layer_setter_placements(patterns: tuple[ModuleType, ModuleType], case: str, n: int) -> None:
    """A layer's tensor-parallel setter branch == its V3 placements in ``__init__``."""
    from max.dtype import DType
    from max.graph import DeviceRef

    v2_mod, v3_mod = patterns
    args: dict[str, tuple[Any, ...]] = {
        "GatedMLP": (8, 16, DType.float32, DeviceRef.CPU()),
        "BiasedMLP": (8, 16, DType.float32, DeviceRef.CPU(), False),
        "Projection": (8, DType.float32, DeviceRef.CPU()),
    }
    v2 = _v2_tp(getattr(v2_mod.layers, case)(*args[case]), n)
    v3 = v3_build(lambda: getattr(v3_mod.layers, case)(*args[case]), n)
    assert_same(v2_device_shapes(v2, n), v3_device_shapes(v3))


@pytest.mark.needs_max
def test_biased_row_parallel_layer_stays_replicated(patterns: tuple[ModuleType, ModuleType]) -> None:
    """MAX 26.7's row_parallel shards a 1-D bias on axis 1 (and then cannot trace): a biased
    row-parallel layer keeps its module Replicated — every device holds every weight whole."""
    from max.dtype import DType
    from max.graph import DeviceRef

    _, v3_mod = patterns
    v3 = v3_build(lambda: v3_mod.layers.BiasedMLP(8, 16, DType.float32, DeviceRef.CPU(), True), 2)
    shapes = v3_device_shapes(v3)
    assert shapes["fc1.weight"] == [(16, 8), (16, 8)] and shapes["fc2.bias"] == [(8,), (8,)]


@pytest.mark.needs_max
@pytest.mark.parametrize("n", [2, 4])
def test_parent_block_places_and_stages(patterns: tuple[ModuleType, ModuleType], n: int) -> None:
    """A parent that set strategies, kept per-device clones and allreduced: same shards, and the
    rewritten forward (one call per module, Replicated transfers) stages on the mesh."""
    from max.dtype import DType
    from max.experimental.sharding import DeviceMapping, TensorLayout
    from max.graph import DeviceRef

    v2_mod, v3_mod = patterns
    gpus = [DeviceRef.GPU(i) for i in range(n)]
    with cpu_accelerator_handles():
        v2 = v2_mod.block.Block(8, 16, gpus)
    v3 = v3_build(lambda: v3_mod.block.Block(8, 16, gpus), n)
    assert_same(v2_device_shapes(v2, n), v3_device_shapes(v3))
    x = TensorLayout(DType.float32, [3, 8], DeviceMapping.replicated(_mesh(n)))
    v3.trace(x, x)


@pytest.mark.needs_max
@pytest.mark.parametrize("n", [2, 4])
def test_arithmetic_on_per_device_lists_stages(patterns: tuple[ModuleType, ModuleType], n: int) -> None:
    """``[o * k for o in outs]`` over a per-device list became ``outs * k``: same shards, and the
    forward stages on the mesh (a comprehension over one distributed Tensor would not)."""
    from max.dtype import DType
    from max.experimental.sharding import DeviceMapping, TensorLayout
    from max.graph import DeviceRef

    v2_mod, v3_mod = patterns
    gpus = [DeviceRef.GPU(i) for i in range(n)]
    with cpu_accelerator_handles():
        v2 = v2_mod.per_device_math.ScaledBlock(8, 16, 0.5, gpus)
    v3 = v3_build(lambda: v3_mod.per_device_math.ScaledBlock(8, 16, 0.5, gpus), n)
    assert_same(v2_device_shapes(v2, n), v3_device_shapes(v3))
    x = TensorLayout(DType.float32, [3, 8], DeviceMapping.replicated(_mesh(n)))
    v3.trace(x, x)


@pytest.mark.needs_max
def test_per_device_head_clones_stay_replicated(patterns: tuple[ModuleType, ModuleType]) -> None:
    """MV392: no placement where V2 cloned with per-device head counts (the kernels would need them)."""
    from max.dtype import DType
    from max.graph import DeviceRef

    _, v3_mod = patterns
    v3 = v3_build(lambda: v3_mod.heads.HeadAttention(4, 2, DType.float32, [DeviceRef.CPU()]), 2)
    assert all(len(set(s)) == 1 for s in v3_device_shapes(v3).values())


def _attention(module: ModuleType, n_devices: int, rope: Any) -> Any:
    from max.dtype import DType
    from max.graph import DeviceRef

    return module.attention.Attention(rope, 4, 16, _kv([DeviceRef.CPU()] * n_devices), DType.float32, [DeviceRef.CPU()])


@pytest.mark.needs_max
@pytest.mark.parametrize("n", [2, 4])
def test_head_split_attention_places_and_stages(patterns: tuple[ModuleType, ModuleType], n: int) -> None:
    """V2 cloned the attention per device with its own head count; V3 places q/k/v/o, gives the
    kernels ``n_heads // kv_collection.n_devices`` and rebinds their outputs: same shards, and it
    stages on the mesh with a KV collection per device."""
    from max import tree
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.nn import Module
    from max.experimental.nn.common_layers.kv_cache import PagedCacheValues
    from max.experimental.nn.common_layers.rotary_embedding import RotaryEmbedding as V3Rope
    from max.experimental.sharding import DeviceMapping, TensorLayout
    from max.graph import DeviceRef, TensorType
    from max.nn.rotary_embedding import RotaryEmbedding as V2Rope

    v2_mod, v3_mod = patterns
    v2 = _v2_tp(_attention(v2_mod, n, V2Rope(16, 4, 10000.0, 64, head_dim=4)), n)
    mesh = _mesh(n)
    rope = v3_build(lambda: V3Rope(16, 4, 10000.0, 64, device=CPU(), head_dim=4), 1)
    v3 = v3_build(lambda: _attention(v3_mod, n, rope), n)
    assert_same(v2_device_shapes(v2, n), v3_device_shapes(v3))
    kv_params = v3.kv_params

    class Root(Module[..., Any]):
        def __init__(self) -> None:
            super().__init__()
            self.attn = v3

        def forward(self, x: Any, input_row_offsets: Any, *kv: Any) -> Any:
            per_device = kv_params.unflatten_kv_inputs(iter(t._graph_value for t in kv))
            collection = PagedCacheValues.from_upstream(per_device, DeviceMapping.replicated(mesh))
            layer = F.constant(0, DType.uint32, device=CPU())
            return self.attn(layer, x, collection, rope.freqs_cis.to(mesh), input_row_offsets.to(mesh))

    x = TensorLayout(DType.float32, ["tokens", 16], DeviceMapping.replicated(mesh))
    offsets = TensorType(DType.uint32, ["offsets"], DeviceRef.CPU())
    Root().trace(x, offsets, *tree.leaves(kv_params.get_symbolic_inputs()))


# -- max's distributed decoders ----------------------------------------------------------------


@pytest.fixture(scope="module")
def archs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """max's ``mistral``, ``llama3`` and ``qwen3`` copied into package ``sharchs`` and migrated in one apply run."""
    names = ("mistral", "llama3", "qwen3")
    with migrated_archs(tmp_path_factory.mktemp("shard_archs"), "sharchs", names, names) as pkg:
        yield pkg


def _kv(devices: list[Any]) -> Any:
    from max.dtype import DType
    from max.nn.kv_cache import MHAKVCacheParams

    return MHAKVCacheParams(dtype=DType.float32, n_kv_heads=4, head_dim=4, num_layers=2, devices=devices, page_size=16)


def _mistral_args(devices: list[Any]) -> dict[str, Any]:
    from max.dtype import DType

    return dict(
        hidden_size=16, num_attention_heads=4, num_key_value_heads=4, num_hidden_layers=2, head_dim=4,
        vocab_size=32, rope_theta=10000.0, max_seq_len=64, rms_norm_eps=1e-5, feed_forward_length=32,
        dtype=DType.float32, kv_params=_kv(devices), attention_multiplier=0.5, devices=devices,
    )


def _llama3_args(devices: list[Any]) -> dict[str, Any]:
    from max.dtype import DType

    return dict(
        hidden_size=16, num_attention_heads=4, num_key_value_heads=4, num_hidden_layers=2,
        rope_theta=10000.0, rope_scaling_params=None, max_seq_len=64, intermediate_size=32,
        interleaved_rope_weights=False, vocab_size=32, dtype=DType.float32, kv_params=_kv(devices),
        attention_multiplier=0.5, embedding_multiplier=1.0, residual_multiplier=1.0, devices=devices,
        rms_norm_eps=1e-5, model_quantization_encoding=None, quantization_config=None, clip_qkv=None,
        tie_word_embeddings=False,
    )


def _qwen3_args(devices: list[Any]) -> dict[str, Any]:
    """Dense Qwen3 (one class for one device and tensor parallel), with grouped-query heads:
    8 query heads of ``kv_params.head_dim`` 4 (q_proj 32 wide on a 16-wide model), 4 KV heads."""
    return {**_llama3_args(devices), "num_attention_heads": 8}


DECODERS = {
    # arch: (module with the distributed class, class, config module, config class, config args)
    "mistral": ("distributed_mistral", "DistributedMistral", "model_config", "MistralConfig", _mistral_args),
    "llama3": ("distributed_llama", "DistributedLlama3", "model_config", "Llama3Config", _llama3_args),
    "qwen3": ("qwen3", "Qwen3", "model_config", "Qwen3Config", _qwen3_args),
}


def _decoders(archs: ModuleType, arch: str, n: int) -> tuple[Any, Any]:
    from max.graph import DeviceRef

    mod, cls, cfg_mod, cfg_cls, cfg_args = DECODERS[arch]
    v2_pkg = f"max.pipelines.architectures.{arch}"
    v3_pkg = f"{archs.__name__}.{arch}_modulev3"
    gpus = [DeviceRef.GPU(i) for i in range(n)]
    with cpu_accelerator_handles():
        config = getattr(importlib.import_module(f"{v2_pkg}.{cfg_mod}"), cfg_cls)(**cfg_args(gpus))
        v2 = getattr(importlib.import_module(f"{v2_pkg}.{mod}"), cls)(config)
    cpus = [DeviceRef.CPU() for _ in range(n)]
    v3_config = getattr(importlib.import_module(f"{v3_pkg}.{cfg_mod}"), cfg_cls)(**cfg_args(cpus))
    v3_cls = getattr(importlib.import_module(f"{v3_pkg}.{mod}"), cls)
    return v2, v3_build(lambda: v3_cls(v3_config), n)


@pytest.mark.needs_max
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("arch", sorted(DECODERS))
def test_distributed_decoder_shards(archs: ModuleType, arch: str, n: int) -> None:
    v2, v3 = _decoders(archs, arch, n)
    v2_shapes = v2_device_shapes(v2, n)
    assert_same(v2_shapes, v3_device_shapes(v3))
    sharded = [k for k, s in v2_shapes.items() if len(set(s)) == 1 and math.prod(s[0]) < math.prod(v2.raw_state_dict()[k].shape)]
    assert len(sharded) >= 10, "the comparison covers sharded weights, not only replicated ones"


@pytest.mark.needs_max
@pytest.mark.parametrize("n", [2, 4])
def test_migrated_distributed_mistral_stages_on_a_cpu_mesh(archs: ModuleType, n: int) -> None:
    """``Module.trace`` (the front half of compile) with the V3 ragged KV inputs, the KV
    collections wrapped onto the mesh the way the official ports do (``from_upstream``)."""
    from max.experimental.nn import Module
    from max.experimental.nn.common_layers.kv_cache import PagedCacheValues
    from max.experimental.sharding import DeviceMapping
    from max.graph import DeviceRef
    from max.pipelines.lib.interfaces.batch_processor import modulev3_ragged_kv_symbolic_inputs

    _, v3 = _decoders(archs, "mistral", n)
    kv_params = _kv([DeviceRef.CPU() for _ in range(n)])
    mesh = _mesh(n)

    class Root(Module[..., Any]):
        def __init__(self) -> None:
            super().__init__()
            self.model = v3

        def forward(self, tokens: Any, return_n_logits: Any, input_row_offsets: Any, *kv: Any) -> Any:
            per_device = kv_params.unflatten_kv_inputs(iter(x._graph_value for x in kv))
            collections = PagedCacheValues.from_upstream(per_device, DeviceMapping.replicated(mesh))
            return self.model(tokens, None, collections, return_n_logits, input_row_offsets)

    staged = Root().trace(*modulev3_ragged_kv_symbolic_inputs(kv_params=kv_params, device_refs=kv_params.devices))
    assert "mo.constant.external" in str(staged)


@pytest.mark.needs_max
def test_weights_plan_reads_the_migrated_modules_placements(archs: ModuleType, tmp_path: Path) -> None:
    """``migrate-v3 weights plan --module`` on the migrated DistributedLlama3: built on a tp-CPU mesh,
    its own placements split the sharded bytes in half per device, none from rule hints."""
    import json
    import types

    from click.testing import CliRunner
    from max.graph import DeviceRef

    from migrate_v3.weights.cli import weights

    _, v3 = _decoders(archs, "llama3", 2)
    config_mod = importlib.import_module(f"{archs.__name__}.llama3_modulev3.model_config")
    model_mod = importlib.import_module(f"{archs.__name__}.llama3_modulev3.distributed_llama")
    factory = types.ModuleType("shard_plan_factory")
    factory.build = lambda config: model_mod.DistributedLlama3(  # type: ignore[attr-defined]
        config_mod.Llama3Config(**_llama3_args([DeviceRef.CPU(), DeviceRef.CPU()]))
    )
    sys.modules[factory.__name__] = factory
    try:
        hf = ROOT / "fixtures" / "weights" / "tiny_llama.json"
        args = ["plan", "--config", str(hf), "--template", "llama", "--module", "shard_plan_factory:build"]
        res = CliRunner().invoke(weights, [*args, "--tp", "2", "--format", "json"])
    finally:
        del sys.modules[factory.__name__]
    assert res.exit_code == 0, res.output
    plan = json.loads(res.output)
    assert plan["source"] == "read from the lazily built module" and plan["derived"] == {} and plan["unplaced"] == 0
    kinds = plan["bytes_by_kind"]
    assert kinds["column"][0] == kinds["column"][1] > 0 and kinds["row"][0] == kinds["row"][1] > 0
    from migrate_v3.weights.target import module_params

    expected = {"column": 0, "row": 0}
    for param in module_params(v3).values():
        if param.placement is not None and param.placement.kind == "sharded":
            kind = "column" if param.placement.axis == 0 else "row"
            expected[kind] += 4 * math.prod(param.placement.shard_shapes[0])  # float32, device 0's shard
    assert kinds["column"][0] == expected["column"] and kinds["row"][0] == expected["row"]


@pytest.mark.needs_max
@pytest.mark.parametrize("n", [2, 4])
def test_migrated_qwen3_block_stages_on_a_cpu_mesh(archs: ModuleType, n: int) -> None:
    """A block of the migrated tensor-parallel Qwen3 (placed q/k/v/o and MLP, per-head q/k norms,
    Replicated transfers for V2's allreduces) stages on the mesh: the per-device kernels run once
    per device, each on its own slice of the fused q/k/v (V2's per-device head counts)."""
    import re

    from max import tree
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.nn import Module
    from max.experimental.nn.common_layers.kv_cache import PagedCacheValues
    from max.experimental.sharding import DeviceMapping, TensorLayout
    from max.graph import DeviceRef, TensorType

    _, v3 = _decoders(archs, "qwen3", n)
    kv_params = _kv([DeviceRef.CPU() for _ in range(n)])
    mesh = _mesh(n)
    block, rope = v3.layers[0], v3.rope

    class Root(Module[..., Any]):
        def __init__(self) -> None:
            super().__init__()
            self.block = block

        def forward(self, x: Any, input_row_offsets: Any, *kv: Any) -> Any:
            per_device = kv_params.unflatten_kv_inputs(iter(t._graph_value for t in kv))
            collection = PagedCacheValues.from_upstream(per_device, DeviceMapping.replicated(mesh))
            layer = F.constant(0, DType.uint32, device=CPU())
            return self.block(layer, x, collection, rope.freqs_cis.to(mesh), input_row_offsets.to(mesh), None)

    x = TensorLayout(DType.float32, ["tokens", 16], DeviceMapping.replicated(mesh))
    offsets = TensorType(DType.uint32, ["offsets"], DeviceRef.CPU())
    staged = str(Root().trace(x, offsets, *tree.leaves(kv_params.get_symbolic_inputs())))
    widths = re.findall(r'"mo\.rope_split_store\.ragged\.paged".*?: \(!mo\.tensor<\[tokens, (\d+)\]', staged)
    assert widths == [str((8 + 4 + 4) * 4 // n)] * n, widths  # (q + k + v heads) * head_dim, split n ways
    assert staged.count('"mo.mha.ragged.paged"') == n


@pytest.mark.needs_max
@pytest.mark.parametrize("n", [2, 4])
def test_migrated_qwen3_decoder_stages_on_a_cpu_mesh(archs: ModuleType, n: int) -> None:
    """The whole migrated Qwen3 (a hand-written tensor-parallel root: its vocab-parallel embedding
    without signal buffers, RoPE table and row offsets moved onto the embedding's mesh where V2
    copied and broadcast them per device) stages with the V3 ragged KV inputs; the logits come
    back Replicated, one kernel call per device and layer."""
    from max.experimental.nn import Module
    from max.experimental.nn.common_layers.kv_cache import PagedCacheValues
    from max.experimental.sharding import DeviceMapping
    from max.graph import DeviceRef
    from max.pipelines.lib.interfaces.batch_processor import modulev3_ragged_kv_symbolic_inputs

    _, v3 = _decoders(archs, "qwen3", n)
    kv_params = _kv([DeviceRef.CPU() for _ in range(n)])
    mesh = _mesh(n)
    placements: list[Any] = []

    class Root(Module[..., Any]):
        def __init__(self) -> None:
            super().__init__()
            self.model = v3

        def forward(self, tokens: Any, return_n_logits: Any, input_row_offsets: Any, *kv: Any) -> Any:
            per_device = kv_params.unflatten_kv_inputs(iter(x._graph_value for x in kv))
            collections = PagedCacheValues.from_upstream(per_device, DeviceMapping.replicated(mesh))
            # its structured forward (the flat forward() replaced trace(): it takes input_types())
            out = self.model.forward_unflattened(tokens, collections, return_n_logits, input_row_offsets, None)
            placements.extend(str(t.mapping) for t in out)
            return out

    staged = str(Root().trace(*modulev3_ragged_kv_symbolic_inputs(kv_params=kv_params, device_refs=kv_params.devices)))
    assert placements == [str(DeviceMapping.replicated(mesh))]
    assert staged.count('"mo.mha.ragged.paged"') == n * 2  # two layers


@pytest.mark.needs_max
def test_migrated_qwen3_decoder_stages_on_one_device(archs: ModuleType) -> None:
    """The single-device path keeps working: the migrated Qwen3 built on one CPU (not a mesh)
    stages through its own flat ``forward`` (the bridged V2 ``trace()``) with its own
    ``input_types()``: the RoPE table and row offsets move with ``.to(<embedding weight>.mesh)``,
    a one-device mesh for a single-device weight, and the KV list becomes one cache on it."""
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.tensor import default_device, default_dtype
    from max.graph import DeviceRef

    _, _, cfg_mod, cfg_cls, cfg_args = DECODERS["qwen3"]
    v3_pkg = f"{archs.__name__}.qwen3_modulev3"
    config = getattr(importlib.import_module(f"{v3_pkg}.{cfg_mod}"), cfg_cls)(**cfg_args([DeviceRef.CPU()]))
    v3_cls = importlib.import_module(f"{v3_pkg}.qwen3").Qwen3
    with F.lazy(), default_device(CPU()), default_dtype(DType.float32):
        v3 = v3_cls(config)
    weight = v3.embed_tokens.weight
    assert weight.mesh.num_devices == 1 and not weight.is_distributed
    staged = str(v3.trace(*v3.input_types(_kv([DeviceRef.CPU()]))))
    assert staged.count('"mo.mha.ragged.paged"') == 2  # two layers, one device


def test_migrated_qwen3_is_a_fixed_point(archs: ModuleType, tmp_path: Path) -> None:
    """Applying again to the migrated Qwen3 (its bridged flat forward, the aliased V3 cache beside
    max.nn's PagedCacheValues) changes nothing."""
    migrated = Path(archs.__file__).parent / "qwen3_modulev3"
    again = tmp_path / "qwen3"
    shutil.copytree(migrated, again, ignore=shutil.ignore_patterns("__pycache__"))
    report = apply_paths([again], out=tmp_path, jobs=1)
    assert not report.errors
    changed = [p.name for p in sorted(again.rglob("*.py"))
               if (tmp_path / "qwen3_modulev3" / p.relative_to(again)).read_text() != p.read_text()]
    assert not changed
