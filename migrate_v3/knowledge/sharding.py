"""V2 sharding strategies → V3 placements, as data (max 26.7).

V2 cuts a weight per device with a ``ShardingStrategy`` (``max.graph.weight``)
and builds one module per device with ``.shard(devices)``; V3 builds one
module whose weights carry a placement on a ``DeviceMesh`` (``col_parallel`` /
``row_parallel`` in ``max.experimental.nn.common_layers.linear``) and inserts
the collectives an op needs. The two name their axes oppositely: V2
``rowwise`` slices ``weight[start:end]`` (axis 0, the output rows of a
``[out, in]`` Linear weight), which V3 calls ``col_parallel`` (``Sharded(0)``:
the output columns of ``x @ W.T``). ``tests/test_sharding_facts.py`` re-checks
every entry against the installed classes; nothing here imports ``max``.
"""

from __future__ import annotations

from dataclasses import dataclass

CL_LINEAR = "max.experimental.nn.common_layers.linear"


@dataclass(frozen=True)
class StrategyFact:
    """What one ``ShardingStrategy.<factory>(...)`` becomes in V3."""

    #: The tensor axis V2 slices (``ShardingStrategy.sharded_axis``); None: nothing sliced.
    v2_axis: int | None
    #: The V3 function that places a Linear-like layer that way (``col_parallel``), or None.
    v3_function: str | None
    #: The action when no V3 function applies: "drop" (V3's default is what V2 did) or "todo".
    otherwise: str
    #: Why (the rewrite's message, or the TODO's).
    why: str


#: ``ShardingStrategy`` factory name → its V3 form.
STRATEGIES: dict[str, StrategyFact] = {
    "rowwise": StrategyFact(0, "col_parallel", "", "V2 rowwise slices weight rows (axis 0) = V3 col_parallel"),
    "columnwise": StrategyFact(1, "row_parallel", "", "V2 columnwise slices weight columns (axis 1) = V3 row_parallel"),
    "head_aware_columnwise": StrategyFact(
        1,
        "row_parallel",
        "",
        "V2 head_aware_columnwise slices columns by head = V3 row_parallel "
        "(equal shards when num_heads divides by the device count)",
    ),
    "replicate": StrategyFact(None, None, "drop", "V2 replicate = V3's default placement (Replicated)"),
    "tensor_parallel": StrategyFact(
        None, None, "drop", "V2 tensor_parallel delegates to the module, which V3 places at construction"
    ),
    "stacked_qkv": StrategyFact(
        0,
        None,
        "todo",
        "stacked_qkv: V2 shards each of q/k/v by head; a V3 Sharded(0) placement on the fused weight "
        "splits its rows contiguously, which differs: keep separate q/k/v Linears and col_parallel each",
    ),
    "gate_up": StrategyFact(
        None,
        None,
        "todo",
        "gate_up: V2 shards the gate and up halves separately; no single V3 placement does that: "
        "keep separate gate/up weights and col_parallel each",
    ),
    "segmented": StrategyFact(
        None, None, "todo", "segmented: no single V3 placement shards segments separately; split the weight"
    ),
    "axiswise": StrategyFact(
        None,
        None,
        "todo",
        "axiswise(axis, n): place the weight with w.to(DeviceMapping(mesh, (Sharded(axis),)))",
    ),
    "expert_parallel": StrategyFact(
        None,
        None,
        "todo",
        "expert parallel: V3 MoE places experts on an 'ep' mesh axis (deepseekV3_modulev3 EP path); "
        "not migrated mechanically",
    ),
}

#: Names of V2 ``ShardingStrategy`` predicates → the factory each tests for.
PREDICATES: dict[str, str] = {
    "is_rowwise": "rowwise",
    "is_colwise": "columnwise",
    "is_head_aware_colwise": "head_aware_columnwise",
    "is_replicate": "replicate",
    "is_stacked_qkv": "stacked_qkv",
    "is_tensor_parallel": "tensor_parallel",
    "is_expert_parallel": "expert_parallel",
    "is_gate_up": "gate_up",
    "is_segmented": "segmented",
    "is_axiswise": "axiswise",
}

#: The V3 tensor-axis placement each ``v3_function`` gives a Linear weight ``[out, in]``.
V3_WEIGHT_AXIS: dict[str, int] = {"col_parallel": 0, "row_parallel": 1}

#: V2 distributed library classes → their V3 form (an official class, or a migrate-v3 port).
DISTRIBUTED_CLASSES: dict[str, str] = {
    "DistributedTransformerBlock": "port: the TransformerBlock port (V3 runs one block on distributed Tensors)",
    "DistributedTransformer": "port: knowledge/ports/distributed_transformer.py",
    "TensorParallelAttentionWithRope": "port: knowledge/ports/tensor_parallel_attention.py",
    "VocabParallelEmbedding": f"official: {CL_LINEAR.rsplit('.', 1)[0]}.embedding.VocabParallelEmbedding",
    "ColumnParallelLinear": f"official: {CL_LINEAR}.ColumnParallelLinear",
}

#: Kernels that run once per device on distributed inputs (``F.functional`` without a
#: sharding rule, ``common_layers.functional_kernels``): kernel → (its main input's
#: parameter name, that parameter's position, how to label the output's placement).
#: "same": the output is laid out like the input (``rebind_mapping(x.mapping)``);
#: "cols": the output's last axis holds each device's heads (``NamedMapping(mesh, (None, TP))``).
#: A tensor-parallel module passes them its per-device head count (``n_heads // n_devices``),
#: as gemma3/gemma4/nemotron_h ``_modulev3`` do.
PER_DEVICE_KERNELS: dict[str, tuple[str, int, str]] = {
    "rope_split_store_ragged": ("qkv", 1, "same"),
    "flash_attention_ragged": ("input", 1, "same"),
    "fused_qk_ragged_rope": ("input", 1, "same"),
    "fused_qkv_ragged_matmul": ("input", 1, "cols"),
    "flash_attention_gpu": ("q", 0, "same"),
}
