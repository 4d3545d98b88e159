"""Rule codes: one code per kind of rewrite, shared by ``check`` and ``apply``.

A code is ``MV3`` + two digits; the tens digit names the concern (``MV34x`` =
layer constructors), like ruff's and TorchFix's rule families. Each rule says
whether ``apply`` fixes it automatically (``auto``), only with ``--unsafe``
(``unsafe``), or needs a person (``manual``), and carries a one-line
before/after example that ``tests/test_rules.py`` finds in the fixtures.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple


class Fix(str, Enum):
    """How a finding gets fixed."""

    AUTO = "auto"
    UNSAFE = "unsafe"
    MANUAL = "manual"


class Rule(NamedTuple):
    code: str
    name: str
    fix: Fix
    summary: str
    before: str
    after: str


def _r(code: str, name: str, fix: Fix, summary: str, before: str, after: str) -> Rule:
    return Rule(code, name, fix, summary, before, after)


A, U, M = Fix.AUTO, Fix.UNSAFE, Fix.MANUAL

RULES: dict[str, Rule] = {
    r.code: r
    for r in sorted([
        # MV30x: general
        _r("MV300", "uncovered-v2-symbol", M, "a V2 symbol that no rule covers: migrate it by hand",
           "from max.nn import clamp", "# TODO(migrate-v3): MV300 max.nn.clamp has no V3 rule"),
        _r("MV301", "depends-on-v2-package", M, "imports another package's V2 module: migrate that package first",
           "from ..llama3.model_config import Llama3Config", "from ..llama3_modulev3.model_config import Llama3Config"),
        _r("MV302", "star-import", M, "star import from a V2 namespace hides which names are used",
           "from max.nn import *", "# TODO(migrate-v3): MV302 replace the star import with explicit V3 imports"),
        _r("MV304", "v2-prose", M, "a docstring of migrated code still calls it V2: prose is not rewritten, describe the ModuleV3 code",
           "\"\"\"Layers written against the V2 API.\"\"\"", "# TODO(migrate-v3): MV304 the docstring calls this code V2"),
        # MV31x: imports
        _r("MV310", "v2-import", A, "V2 import replaced by its V3 home",
           "from max.nn import Linear", "from max.experimental.nn import Linear"),
        _r("MV311", "legacy-namespace", A, "import from an older namespace (max.nn.legacy, max.nn.module_v3, "
           "26.1's max.nn/max.tensor/max.functional)",
           "from max.nn.module_v3 import Linear", "from max.experimental.nn import Linear"),
        _r("MV312", "renamed-in-26-7", A, "a name of an older max release that 26.7 has under another name "
           "or home (the same object: a re-export or alias in a release)",
           "from max.kv_cache import PagedKVCacheManager", "from max.pipelines.kv_cache import PagedKVCacheManager"),
        _r("MV313", "gone-in-26-7", M, "a name of an older max release that 26.7 does not have: the TODO "
           "names what replaced it, when the releases' source shows it",
           "from max.driver import Tensor", "# TODO(migrate-v3): MV313 max.driver.Tensor is gone in max 26.7"),
        # MV32x: module interface
        _r("MV320", "module-base", A, "V2 Module base becomes Module[[arg types], return type]",
           "class Wrap(Module):", "class Wrap(Module[[Tensor], Tensor]):"),
        _r("MV321", "call-to-forward", A, "__call__ becomes forward",
           "def __call__(self, x: TensorValue) -> TensorValue:", "def forward(self, x: Tensor) -> Tensor:"),
        _r("MV322", "missing-super-init", A, "__init__ of a Module subclass must call super().__init__()",
           "def __init__(self, dim: int) -> None:", "super().__init__()"),
        _r("MV323", "spec-driver-bridge", A, "a V2 speculative-decoding driver subclass splits: the driver takes the "
           "target and draft, a ModuleV3 module builds and holds them and builds the driver per trace",
           "class UnifiedBlock(BlockDriver[TensorValue, TensorValue]):", "class UnifiedBlockDriver(BlockDriver[Tensor, Tensor]):"),
        # MV33x: tensor types
        _r("MV330", "tensor-type", A, "TensorValue/BufferValue/TensorValueLike become Tensor",
           "x: TensorValue", "x: Tensor"),
        _r("MV331", "graph-value-type", M, "Value/Type/graph-value plumbing has no V3 counterpart in forward()",
           "def raw(v: Value) -> None:", "# TODO(migrate-v3): MV331 Value annotation: forward() receives Tensors, not graph values"),
        # MV34x: layer constructors
        _r("MV340", "layer-constructor", A, "V2 layer constructor rewritten to the V3 signature (keywords, no dtype/device)",
           "Embedding(vocab_size, hidden_dim, dtype, device)", "Embedding(vocab_size=vocab_size, dim=hidden_dim)"),
        _r("MV341", "flipped-default", A, "a default that differs in V3 made explicit so behaviour is unchanged",
           "Linear(in_dim, out_dim, dtype, device)", "Linear(in_dim=in_dim, out_dim=out_dim, bias=False)"),
        _r("MV342", "argument-without-v3", M, "a constructor argument with no V3 equivalent, or that apply "
           "cannot map (*args/**kwargs, a factory's arguments)",
           "Linear(4, 4, dtype, device, clip_weight=1.0)", "# TODO(migrate-v3): MV342 Linear(clip_weight=...) has no V3 equivalent"),
        _r("MV344", "layer-subclass", A, "a subclass of a V2 layer: its super().__init__(...) arguments get the "
           "layer's V3 map (an RMSNorm subclass gets the V3 variant with its numerics as base), __call__ becomes forward",
           "super().__init__(vocab_size, hidden_dim, dtype, device)",
           "super().__init__(vocab_size=vocab_size, dim=hidden_dim)"),
        _r("MV345", "layer-subclass-by-hand", M, "a subclass of a V2 layer whose __init__ passes */** or no "
           "arguments to super().__init__(...): apply cannot map them",
           "super().__init__(*args, **kwargs)",
           "# TODO(migrate-v3): MV345 super().__init__(...) of a V2 Linear uses */** or unknown arguments"),
        _r("MV346", "keyword-dict", A, "a local dict of V2 layer keywords (it holds dtype/device) splatted into calls: "
           "its keywords are written into each call, so the layer's V3 map applies",
           "self.up_proj = Linear(in_dim=4, out_dim=8, **common)",
           "self.up_proj = Linear(in_dim=4, out_dim=8, bias=has_bias)"),
        _r("MV343", "layer-without-v3", M, "a V2 layer class with no V3 class: port it locally "
           "(apply adds its own V3 ports of Transformer and the distributed decoder classes; a q/k/v StackedLinear "
           "becomes QKVLinear)",
           "return DataParallelAttentionWithRope(", "# TODO(migrate-v3): MV343 DataParallelAttentionWithRope has no V3 class"),
        # MV35x: containers
        _r("MV350", "layer-list", A, "LayerList(...) becomes ModuleList([...]) (one iterable)",
           "LayerList(blocks)", "ModuleList(blocks)"),
        _r("MV351", "sequential", A, "V2 Sequential(list) becomes the V3 form that keeps keys and call semantics",
           "Sequential([blocks[0], blocks[1]])", "Sequential(blocks[0], blocks[1])"),
        _r("MV352", "layer-list-usage", M, "code relies on LayerList being callable or on .layers",
           "for block in self.blocks.layers:", "for block in self.blocks:"),
        # MV36x: parameters
        _r("MV360", "weight-parameter", A, "Weight(...) attribute becomes a Tensor parameter of the same shape",
           "Weight(\"weight\", DType.float32, [4], DeviceRef.CPU())", "Tensor.zeros([4], dtype=DType.float32)"),
        _r("MV361", "weight-name-changes-key", M, "Weight name= differs from the attribute path: checkpoint keys change",
           "self.filter = Weight(\"weight\"", "# TODO(migrate-v3): MV361 checkpoint key \"weight\" becomes 'filter'"),
        _r("MV363", "tied-embeddings", A, "a head aliased to the embedding is created only when untied; forward uses the transpose",
           "self.lm_head.set_shared_weight(\"weight\", self.embed_tokens.weight)", "(h @ self.embed_tokens.weight.T if self.lm_head is None else self.lm_head(h))"),
        # MV37x: ops
        _r("MV370", "op-to-functional", A, "ops.X becomes F.X (same signature)",
           "ops.reshape(x, [1, -1])", "F.reshape(x, [1, -1])"),
        _r("MV371", "op-semantics-changed", M, "an op call whose F form means something else and that apply cannot carry over "
           "exactly (an axis computed at run time, where None meant the last axis): rewrite it by hand",
           "ops.max(x, axis=pick_axis(x))", "# TODO(migrate-v3): MV371 ops.max(axis=...): None means all axes in F.max"),
        _r("MV372", "op-without-functional", A, "an op with no F form is wrapped with F.functional(...)",
           "ops.buffer_load(buf)", "F.functional(ops.buffer_load)(buf)"),
        _r("MV373", "graph-value-api", M, "TensorValue-only API (TensorValue(x), .rebind, .tensor, .buffer...); "
           "x.to(DeviceRef.X()) is rewritten to x.to(DeviceRef.X().to_device()), next(inputs).buffer to "
           "next(inputs)._graph_value",
           "graph.inputs[0].tensor", "# TODO(migrate-v3): MV373 .tensor: forward() already receives Tensors"),
        # MV38x: graph construction and pipeline models
        _r("MV380", "graph-construction", M, "explicit Graph(...) construction becomes F.lazy() + model.compile()",
           "with Graph(\"m\", input_types=types) as graph:", "# TODO(migrate-v3): MV380 build under F.lazy() and call model.compile(*input_types, weights=...)"),
        _r("MV381", "session-load", M, "session.load(graph, weights_registry=...) becomes compile(weights=state_dict)",
           "session.load(graph, weights_registry=model.state_dict())", "# TODO(migrate-v3): MV381 use compiled = model.compile(*types, weights=state_dict)"),
        _r("MV382", "v2-compile-api", M, "V2 Module.compile/trace, GraphSpec, state_dict/load_state_dict",
           "model.load_state_dict(sd)", "# TODO(migrate-v3): MV382 .load_state_dict(): pass weights=state_dict to model.compile() instead"),
        _r("MV383", "pipeline-model-base", A, "V2 PipelineModel bases become ModuleV3 pipeline bases (graph_specs → _instantiate_module)",
           "class M(PipelineModel[object]):", "class M(ModuleV3PipelineModel[object]):"),
        # MV38x: KV cache
        _r("MV384", "kv-unflatten", M, "KV-cache inputs are unflattened in forward(), not in trace()",
           "self.kv_params.unflatten_kv_inputs(iter(kv_inputs))", "# TODO(migrate-v3): MV384 unflatten_kv_inputs: unflatten KV inputs in the root module's forward()"),
        _r("MV385", "paged-cache-values", M, "max.nn PagedCacheValues is the V2 alias; V3 uses common_layers.kv_cache",
           "from max.nn.kv_cache import KVCacheParams, PagedCacheValues", "# TODO(migrate-v3): MV385 PagedCacheValues from max.nn is the V2 input alias"),
        # MV39x: sharding
        # manual, like MV343: apply rewrites the patterns the official ports show, check cannot tell those sites apart
        _r("MV390", "sharding-strategy", M, "ShardingStrategy/.shard(devices) become placements on a DeviceMesh "
           "(V2 rowwise = V3 col_parallel); apply rewrites the known patterns, the rest gets a TODO",
           "self.gate.sharding_strategy = ShardingStrategy.rowwise(strategy.num_devices)", "col_parallel(self.gate)"),
        _r("MV391", "explicit-collective", M, "per-device loops, forward_sharded_layers and Allreduce become one call "
           "on a distributed Tensor and a Replicated transfer; other collectives and Signals get a TODO",
           "forward_sharded_layers(self.norm_shards, xs)", "self.norm(xs)"),
        _r("MV392", "tensor-parallel-heads", M, "a module cloned per device with its own head counts stays Replicated; "
           "sharding it needs local head counts in its kernels",
           "sharded_num_heads = num_heads_for_device(", "# TODO(migrate-v3): MV392 tensor parallel attention"),
        # MV36x: weights
        _r("MV362", "weight-adapter", M, "checkpoint names must follow the V3 attribute paths (weight_adapters.py)",
           "new_name = name.removeprefix(\"model.\")", "# TODO(migrate-v3): MV362 V3 keys are attribute paths from the root module"),
        # MV30x: registration
        _r("MV303", "registration", A, "arch.py registers the V3 variant as <Name>_ModuleV3",
           "llama_arch = SupportedArchitecture(name=\"LlamaForCausalLM\",", "llama_modulev3_arch = SupportedArchitecture(name=\"LlamaForCausalLM_ModuleV3\","),
    ], key=lambda rule: rule.code)
}


def matches(code: str, prefixes: tuple[str, ...]) -> bool:
    """True when ``code`` starts with any of ``prefixes`` (ruff's --select semantics)."""
    return any(code.startswith(p) for p in prefixes)
