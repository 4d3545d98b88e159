"""Constructor signature maps: V2 ``max.nn`` layer classes → ModuleV3 classes.

Facts were taken from ``inspect.signature`` on max 26.7.0 (``tests/test_knowledge.py``
re-checks every map against the installed package) and from the official
``*_modulev3`` ports. The ``layers`` codemod turns a V2 call into the V3 call by
binding the V2 arguments to ``v2_params`` and re-emitting them as keywords.
Nothing here imports ``max``: ``apply`` must run without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from migrate_v3.knowledge.ports import PORTS

E = "max.experimental.nn"
CL = "max.experimental.nn.common_layers"

#: Arguments that V3 layers take from ``default_dtype``/``default_device`` and
#: ``Module.to(device)`` instead. Dropping them is the documented migration.
PLACEMENT_ARGS = frozenset({"dtype", "device", "devices"})


@dataclass(frozen=True)
class LayerSpec:
    """How one V2 layer constructor maps onto its V3 class."""

    v2_name: str
    v3_module: str
    v3_name: str
    #: V2 parameters in positional order (``inspect.signature`` order).
    v2_params: tuple[str, ...]
    #: V2 keyword-only parameters.
    v2_kwonly: tuple[str, ...] = ()
    #: V3 parameters in declaration order (all are emitted as keywords).
    v3_params: tuple[str, ...] = ()
    #: V2 name → V3 name for arguments that were renamed.
    rename: dict[str, str] = field(default_factory=dict)
    #: V2 arguments dropped on purpose (placement, V2-only sharding flags).
    drop: frozenset[str] = PLACEMENT_ARGS
    #: V2 arguments with no V3 equivalent → TODO, unless passed as the V2 default.
    unsupported: dict[str, str] = field(default_factory=dict)
    #: V2 default (as source) of each unsupported argument: passing it is a no-op.
    v2_defaults: dict[str, str] = field(default_factory=dict)
    #: V3 argument → V2 default (source) to make explicit when the V2 call
    #: omitted it, because the V3 default differs (``bias`` of Linear).
    flipped: dict[str, str] = field(default_factory=dict)
    #: V3 arguments always added so V3 computes what V2 did (``keep_dtype``).
    always: dict[str, str] = field(default_factory=dict)
    #: V3 arguments with no V2 source: a person must supply them.
    required: dict[str, str] = field(default_factory=dict)
    #: V3 arguments with no V2 source that have one value reproducing V2:
    #: V3 argument → (value source, (module, name) to import, why).
    fill: dict[str, tuple[str, tuple[str, str], str]] = field(default_factory=dict)
    #: A note attached as a TODO to every rewritten call (behaviour that differs).
    caveat: str | None = None
    #: V3 argument → why the checkpoint keys change when a call passes it (anything but ``False``):
    #: an MV362 TODO there (the layer's weights live under other names than V2's)
    key_changes: dict[str, str] = field(default_factory=dict)
    #: For a subclass's spec (``subclass_spec``): the library layer whose calls its calls are.
    like: str | None = None


_LINEAR_PARAMS = (
    "in_dim",
    "out_dim",
    "dtype",
    "device",
    "has_bias",
    "quantization_encoding",
    "quant_config",
    "name",
    "clip_weight",
    "is_sharding",
)
_LINEAR_UNSUPPORTED = {
    "quantization_encoding": "quantization_encoding (GGUF/GPTQ) has no V3 layer",
    "name": "name= changed the V2 checkpoint key; V3 keys are attribute paths",
    "clip_weight": "clip_weight has no V3 argument: clip the weight in forward()",
    "is_sharding": "is_sharding is V2 sharding plumbing",
}
_LINEAR_DEFAULTS = {
    "quantization_encoding": "None",
    "name": "None",
    "clip_weight": "None",
    "is_sharding": "False",
    "quant_config": "None",
}
_ROPE_PARAMS = ("dim", "n_heads", "theta", "max_seq_len", "head_dim", "_freqs_cis", "interleaved")
_ROPE_V3 = ("dim", "n_heads", "theta", "max_seq_len", "device", "head_dim", "interleaved")
#: V2 rotary embeddings have no device: they build their tables on the CPU
#: (``DeviceRef.CPU()``) and attention moves them. V3 asks for a device.
_ROPE_FILL = {"device": ("CPU()", ("max.driver", "CPU"), "V2 built the rope tables on the CPU")}
_LLAMA3_ROPE_PORT = "max.pipelines.architectures.llama3_modulev3.layers.rotary_embedding"
_MOE_V2 = (
    "devices",
    "hidden_dim",
    "num_experts",
    "num_experts_per_token",
    "moe_dim",
    "num_logical_experts",
    "gate_cls",
    "mlp_cls",
    "shared_mlp_cls",
    "has_shared_experts",
    "shared_experts_dim",
    "ep_size",
    "dtype",
    "activation",
    "interleaved_gate_up",
    "pre_expert_norm_cls",
    "ep_batch_manager",
    "quant_config",
    "shared_experts_dtype",
    "shared_experts_quant_config",
    "is_sharding",
)
#: V3 ``CL.moe.MoE`` parameters; ``QuantizedMoE`` adds ``quant_config``.
_MOE_V3 = (
    "hidden_dim",
    "num_experts",
    "num_experts_per_token",
    "moe_dim",
    "gate_cls",
    "has_shared_experts",
    "shared_experts_dim",
)

_MOE_UNSUPPORTED = {
    p: f"{p} has no V3 MoE argument"
    for p in (
        "num_logical_experts",
        "mlp_cls",
        "shared_mlp_cls",
        "ep_size",
        "activation",
        "interleaved_gate_up",
        "pre_expert_norm_cls",
        "ep_batch_manager",
        "quant_config",
        "shared_experts_dtype",
        "shared_experts_quant_config",
        "is_sharding",
    )
}
_MOE_DEFAULTS = {
    "num_logical_experts": "None",
    "mlp_cls": "MLP",
    "shared_mlp_cls": "None",
    "ep_size": "1",
    "activation": "None",
    "interleaved_gate_up": "False",
    "pre_expert_norm_cls": "None",
    "ep_batch_manager": "None",
    "quant_config": "None",
    "shared_experts_dtype": "None",
    "shared_experts_quant_config": "None",
    "is_sharding": "False",
}

def _rope(name: str, module: str, *, scaling: bool = False) -> LayerSpec:
    """A rotary embedding: same class name and arguments in V2 and V3, plus V3's ``device``."""
    extra = ("scaling_params",) if scaling else ()
    return LayerSpec(
        name,
        module,
        name,
        (*_ROPE_PARAMS, *extra),
        v3_params=(*_ROPE_V3, *extra),
        unsupported={"_freqs_cis": "_freqs_cis: V3 computes freqs_cis itself"},
        v2_defaults={"_freqs_cis": "None"},
        fill=_ROPE_FILL,
    )


LAYERS: dict[str, LayerSpec] = {
    s.v2_name: s
    for s in [
        LayerSpec(
            "Linear",
            E,
            "Linear",
            _LINEAR_PARAMS,
            v3_params=("in_dim", "out_dim", "bias", "quant_config"),
            rename={"has_bias": "bias"},
            unsupported=_LINEAR_UNSUPPORTED,
            v2_defaults=_LINEAR_DEFAULTS,
            flipped={"bias": "False"},
        ),
        LayerSpec(
            "ColumnParallelLinear",
            f"{CL}.linear",
            "ColumnParallelLinear",
            ("in_dim", "out_dim", "dtype", "devices", "tied_weight"),
            # the Linear arguments its **kwargs passes on
            v2_kwonly=("has_bias", "quantization_encoding", "quant_config", "name", "clip_weight"),
            v3_params=("in_dim", "out_dim", "bias", "quant_config"),
            rename={"has_bias": "bias"},
            unsupported={"tied_weight": "tied_weight: tie in forward() instead", **_LINEAR_UNSUPPORTED},
            v2_defaults={"tied_weight": "None", **_LINEAR_DEFAULTS},
            flipped={"bias": "False"},
            caveat="V2 ColumnParallelLinear allgathered its output; V3 leaves it sharded "
            "(add F.allgather(y, tensor_axis=-1) where the gathered output is needed)",
        ),
        LayerSpec(
            "Embedding",
            E,
            "Embedding",
            ("vocab_size", "hidden_dim", "dtype", "device", "quantization_encoding", "name"),
            v3_params=("vocab_size", "dim"),
            rename={"hidden_dim": "dim"},
            unsupported={k: _LINEAR_UNSUPPORTED[k] for k in ("quantization_encoding", "name")},
            v2_defaults={"quantization_encoding": "None", "name": "None"},
        ),
        LayerSpec(
            "VocabParallelEmbedding",
            f"{CL}.embedding",
            "VocabParallelEmbedding",
            ("vocab_size", "hidden_dim", "dtype", "devices", "quantization_encoding", "name"),
            v3_params=("vocab_size", "dim"),
            rename={"hidden_dim": "dim"},
            unsupported={k: _LINEAR_UNSUPPORTED[k] for k in ("quantization_encoding", "name")},
            v2_defaults={"quantization_encoding": "None", "name": "None"},
            caveat="V3 VocabParallelEmbedding is called as (indices) with no signal_buffers",
        ),
        # RMSNorm is special-cased by the layers codemod: the V3 class depends on
        # weight_offset and multiply_before_cast (see RMSNORM_VARIANTS).
        LayerSpec(
            "RMSNorm",
            f"{E}.norm",
            "RMSNorm",
            ("dim", "dtype", "eps", "weight_offset", "multiply_before_cast"),
            v3_params=("dim", "eps"),
        ),
        LayerSpec(
            "LayerNorm",
            f"{E}.norm",
            "LayerNorm",
            ("dims", "devices", "dtype", "eps", "use_bias"),
            v3_params=("dim", "eps", "keep_dtype", "elementwise_affine", "use_bias"),
            rename={"dims": "dim"},
            always={"keep_dtype": "False"},
        ),
        LayerSpec(
            "ConstantLayerNorm",
            f"{E}.norm",
            "LayerNorm",
            ("dims", "device", "dtype", "eps"),
            v3_params=("dim", "eps", "keep_dtype", "elementwise_affine", "use_bias"),
            rename={"dims": "dim"},
            always={"keep_dtype": "False", "elementwise_affine": "False"},
        ),
        LayerSpec(
            "GroupNorm",
            f"{E}.norm",
            "GroupNorm",
            ("num_groups", "num_channels", "eps", "affine", "device"),
            v3_params=("num_groups", "num_channels", "eps", "affine"),
        ),
        LayerSpec(
            "Conv2d",
            E,
            "Conv2d",
            (
                "kernel_size",
                "in_channels",
                "out_channels",
                "dtype",
                "stride",
                "padding",
                "dilation",
                "num_groups",
                "device",
                "has_bias",
                "permute",
                "name",
            ),
            v3_params=(
                "kernel_size",
                "in_channels",
                "out_channels",
                "dtype",
                "stride",
                "padding",
                "dilation",
                "num_groups",
                "has_bias",
                "permute",
                "name",
            ),
            # V3 Conv2d takes a dtype (official ports pass it): a conv keeps the dtype V2 gave it
            drop=frozenset({"device", "devices"}),
        ),
        LayerSpec(
            "MLP",
            f"{CL}.mlp",
            "MLP",
            (
                "dtype",
                "quantization_encoding",
                "hidden_dim",
                "feed_forward_length",
                "devices",
                "linear_cls",
                "has_bias",
                "activation_function",
                "quant_config",
                "swiglu_limit",
                "is_sharding",
            ),
            v3_params=("hidden_dim", "feed_forward_length", "bias", "activation_function"),
            rename={"has_bias": "bias"},
            unsupported={
                "quantization_encoding": _LINEAR_UNSUPPORTED["quantization_encoding"],
                "linear_cls": "linear_cls: V3 MLP always uses Column/RowParallelLinear",
                "quant_config": "quant_config: use common_layers.quant_linear.QuantizedMLP",
                "swiglu_limit": "swiglu_limit has no V3 MLP argument",
                "is_sharding": _LINEAR_UNSUPPORTED["is_sharding"],
            },
            v2_defaults={
                "quantization_encoding": "None",
                "linear_cls": "Linear",
                "quant_config": "None",
                "swiglu_limit": "0.0",
                "is_sharding": "False",
            },
        ),
        _rope("RotaryEmbedding", f"{CL}.rotary_embedding"),
        _rope("YarnRotaryEmbedding", f"{CL}.rotary_embedding", scaling=True),
        _rope("Llama3RotaryEmbedding", _LLAMA3_ROPE_PORT, scaling=True),
        _rope("LongRoPERotaryEmbedding", _LLAMA3_ROPE_PORT, scaling=True),
        LayerSpec(
            "MoEGate",
            f"{CL}.moe",
            "MoEGate",
            ("devices", "hidden_dim", "num_experts", "num_experts_per_token", "dtype", "is_sharding", "linear_cls"),
            v3_params=("hidden_dim", "num_experts", "num_experts_per_token"),
            unsupported={
                "is_sharding": _LINEAR_UNSUPPORTED["is_sharding"],
                "linear_cls": "linear_cls has no V3 MoEGate argument",
            },
            v2_defaults={"is_sharding": "False", "linear_cls": "Linear"},
        ),
        LayerSpec(
            "MoE",
            f"{CL}.moe",
            "MoE",
            _MOE_V2,
            v3_params=_MOE_V3,
            unsupported=_MOE_UNSUPPORTED,
            v2_defaults=_MOE_DEFAULTS,
        ),
        LayerSpec(
            "MoEQuantized",
            f"{CL}.quant_moe",
            "QuantizedMoE",
            _MOE_V2,
            v3_params=(*_MOE_V3, "quant_config"),
            unsupported={k: v for k, v in _MOE_UNSUPPORTED.items() if k != "quant_config"},
            v2_defaults=_MOE_DEFAULTS,
        ),
        LayerSpec(
            "AttentionWithRope",
            f"{CL}.attention",
            "AttentionWithRope",
            (),
            v2_kwonly=(
                "rope",
                "sharding_strategy",
                "num_attention_heads",
                "num_key_value_heads",
                "hidden_size",
                "kv_params",
                "devices",
                "dtype",
                "linear_cls",
                "stacked_qkv",
                "scale",
                "has_bias",
                "quant_config",
                "clip_qkv",
                "use_qk_norm",
                "rms_norm_eps",
                "mask_variant",
                "sliding_window",
                "_fuse_rope_and_store",
            ),
            v3_params=(
                "rope",
                "num_attention_heads",
                "num_key_value_heads",
                "hidden_size",
                "kv_params",
                "layer_idx",
                "scale",
                "has_bias",
                "stacked_qkv",
                "clip_qkv",
                "use_qk_norm",
                "rms_norm_eps",
            ),
            unsupported={
                "sharding_strategy": "sharding_strategy: V3 shards by tensor placement",
                "linear_cls": "linear_cls has no V3 attention argument",
                "quant_config": "quant_config: V3 AttentionWithRope is not quantized",
                "mask_variant": "mask_variant: V3 AttentionWithRope is causal only",
                "sliding_window": "sliding_window: V3 AttentionWithRope has none",
                "_fuse_rope_and_store": "_fuse_rope_and_store has no V3 argument",
            },
            v2_defaults={
                "sharding_strategy": "None",
                "linear_cls": "Linear",
                "quant_config": "None",
                "mask_variant": "MHAMaskVariant.CAUSAL_MASK",
                "sliding_window": "None",
                "_fuse_rope_and_store": "True",
            },
            required={"layer_idx": "layer_idx= moves to the V3 constructor (V2 passed it at call time)"},
            key_changes={"use_qk_norm": "V3 holds the q/k norm weights as q_norm_weight, k_norm_weight (V2's RMSNorm "
                         "children: q_norm.weight, k_norm.weight): rename those checkpoint keys in the weight adapter"},
            caveat="V3 AttentionWithRope.forward(x, kv_collection, input_row_offsets=...) "
            "takes no layer_idx/freqs_cis: update the call site",
        ),
        LayerSpec(
            "HyperConnection",
            E,
            "HyperConnection",
            ("hidden_size", "hc_mult", "device", "dtype"),
            v2_kwonly=("hc_sinkhorn_iters", "hc_eps", "rms_norm_eps"),
            v3_params=("hidden_size", "hc_mult", "hc_sinkhorn_iters", "hc_eps", "rms_norm_eps"),
        ),
    ]
}

#: V3 class chosen for V2 ``RMSNorm(weight_offset=…, multiply_before_cast=…)``,
#: keyed by the literal values. ``None`` = the V2 default was used.
#: ``MultiplyBeforeCastRMSNorm`` is emitted into the module (see ``RMSNORM_HELPER``)
#: because V3 has no class with V2's default numerics.
RMSNORM_VARIANTS: dict[tuple[str, str], str] = {
    ("0", "False"): "RMSNorm",
    ("0", "True"): "MultiplyBeforeCastRMSNorm",
    ("1", "True"): "GemmaRMSNorm",
}
RMSNORM_HELPER_NAME = "MultiplyBeforeCastRMSNorm"
RMSNORM_HELPER = f'''

class {RMSNORM_HELPER_NAME}(RMSNorm):
    """V3 RMSNorm with V2's default numerics (multiply_before_cast=True); added by migrate-v3."""

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm(x, self.weight, self.eps, multiply_before_cast=True)
'''
#: A V3 layer that names some weights apart from V2 (``LayerSpec.key_changes``) → the class emitted into
#: the module that keeps V2's names (the checkpoint needs no rename), and the V3 names it keeps them for.
#: ``AttentionWithRope(use_qk_norm=True)``: V3 holds ``q_norm_weight``/``k_norm_weight`` where V2's
#: ``RMSNorm`` children held ``q_norm.weight``/``k_norm.weight``; its forward reads the properties.
KEY_KEEPERS: dict[str, tuple[str, str]] = {
    "AttentionWithRope": ("AttentionWithRopeV2Names", """

class QKNormWeight(Module[..., Any]):
    \"\"\"One q/k norm weight of an AttentionWithRopeV2Names, named as the checkpoint names it
    (``q_norm.weight``); added by migrate-v3.\"\"\"

    def __init__(self, weight: Tensor) -> None:
        super().__init__()
        self.weight = weight


class AttentionWithRopeV2Names(AttentionWithRope):
    \"\"\"V3 AttentionWithRope whose q/k norm weights keep V2's names (``q_norm.weight``, ``k_norm.weight``;
    V3's own are ``q_norm_weight``, ``k_norm_weight``), so V2's checkpoint keys load as they are; added by
    migrate-v3.\"\"\"

    @property
    def q_norm_weight(self) -> Tensor:
        return self.q_norm.weight

    @q_norm_weight.setter
    def q_norm_weight(self, weight: Tensor) -> None:
        self.q_norm = QKNormWeight(weight)

    @property
    def k_norm_weight(self) -> Tensor:
        return self.k_norm.weight

    @k_norm_weight.setter
    def k_norm_weight(self, weight: Tensor) -> None:
        self.k_norm = QKNormWeight(weight)
"""),
}

#: A V2 layer whose V3 class lacks some of its arguments, which a subclass emitted into the module
#: takes → (that class, the arguments, what to import, its code): ``AttentionWithRope(mask_variant=...,
#: sliding_window=...)`` (V3's is causal only; a DFlash draft attends to its whole block, NULL_MASK).
#: Its forward is V3's (max 26.7), the mask and window given to the kernel as V2 gave them
#: (``tests/test_knowledge.py`` compares it with the installed forward).
MASK_PORTS: dict[str, tuple[str, frozenset[str], tuple[tuple[str, str], ...], str]] = {
    "AttentionWithRope": ("MaskedAttentionWithRope", frozenset({"mask_variant", "sliding_window"}), (
        ("max.driver", "CPU"), ("max.dtype", "DType"), ("max.nn.attention", "MHAMaskVariant"),
        ("max.experimental.nn.common_layers.functional_kernels", "flash_attention_ragged"),
        ("max.experimental.nn.common_layers.functional_kernels", "rope_split_store_ragged"),
        ("max.experimental.nn.norm", "rms_norm"), ("max.experimental.tensor", "Tensor"), ("typing", "Any"),
    ), '\n\nclass MaskedAttentionWithRope(AttentionWithRope):\n    """V3 AttentionWithRope with V2\'s ``mask_variant`` and ``sliding_window`` (V3\'s is causal only):\n    the same weights, its forward with the flash-attention kernel given this mask and window, as\n    V2\'s passed them; added by migrate-v3."""\n\n    def __init__(\n        self,\n        *,\n        mask_variant: MHAMaskVariant = MHAMaskVariant.CAUSAL_MASK,\n        sliding_window: int | None = None,\n        **kwargs: Any,\n    ) -> None:\n        super().__init__(**kwargs)\n        self.mask_variant = mask_variant\n        self.sliding_window = sliding_window\n\n    def forward(\n        self,\n        x: Tensor,\n        kv_collection: Any,\n        **kwargs: Any,\n    ) -> Tensor:\n        """V3 AttentionWithRope.forward (max 26.7) with this layer\'s mask and window."""\n        total_seq_len = x.shape[0]\n\n        layer_idx = F.constant(self.layer_idx, DType.uint32, device=CPU())\n\n        # clip_qkv clamps the fused weight; clamp commutes with the q||k||v row\n        # concat, so this equals clamping q/k/v separately.\n        if self.clip_qkv:\n            weight = F.clip(\n                self.qkv_proj.fused_weight, -self.clip_qkv, self.clip_qkv\n            )\n            qkv = x @ weight.T + self.qkv_proj.fused_bias\n        else:\n            qkv = self.qkv_proj(x)\n\n        if self.use_qk_norm:\n            head_dim = self.kv_params.head_dim\n            q_dim = self.n_heads * head_dim\n            kv_dim = self.num_key_value_heads * head_dim\n            x_q, x_k, x_v = qkv.split([q_dim, kv_dim, kv_dim], axis=-1)\n\n            x_q = x_q.reshape((-1, self.n_heads, head_dim))\n            x_q = rms_norm(x_q, self.q_norm_weight, self.rms_norm_eps)\n            x_q = x_q.reshape((-1, q_dim))\n\n            x_k = x_k.reshape((-1, self.num_key_value_heads, head_dim))\n            x_k = rms_norm(x_k, self.k_norm_weight, self.rms_norm_eps)\n            x_k = x_k.reshape((-1, kv_dim))\n\n            qkv = F.concat([x_q, x_k, x_v], axis=-1)\n\n        # Fused rope + split + KV store.\n        rope = self.rope\n        freqs_cis = F.cast(rope.freqs_cis, qkv.dtype).to(qkv.device)\n        xq = rope_split_store_ragged(\n            kv_params=self.kv_params,\n            qkv=qkv,\n            input_row_offsets=kwargs["input_row_offsets"],\n            freqs_cis=freqs_cis,\n            kv_collection=kv_collection,\n            layer_idx=layer_idx,\n            n_heads=self.n_heads,\n            interleaved=rope.interleaved,\n        ).rebind_mapping(qkv.mapping)\n        xq = xq.reshape((-1, self.n_heads, self.kv_params.head_dim))\n\n        attn_out = flash_attention_ragged(\n            self.kv_params,\n            input=xq,\n            kv_collection=kv_collection,\n            layer_idx=layer_idx,\n            input_row_offsets=kwargs["input_row_offsets"],\n            mask_variant=self.mask_variant,\n            local_window_size=-1 if self.sliding_window is None else self.sliding_window,\n            scale=self.scale,\n        ).rebind_mapping(xq.mapping)\n        attn_out = F.reshape(attn_out, shape=[total_seq_len, self.q_weight_dim])\n        return self.o_proj(attn_out)\n'),
}

#: Any other ``RMSNorm(weight_offset=…, multiply_before_cast=…)`` (``(1, False)``, a value only known at
#: run time), or one whose ``dtype=`` is pinned (``norm_dtype``, ``DType.float32``): V3 has no class for
#: it, so this one is emitted into the module; it takes the V2 arguments as keywords, with V2's
#: defaults, and casts its weight to the input's dtype as V2's ``RMSNorm`` did.
RMSNORM_OFFSET_HELPER_NAME = "OffsetRMSNorm"
RMSNORM_OFFSET_HELPER = f'''

class {RMSNORM_OFFSET_HELPER_NAME}(RMSNorm):
    """V3 RMSNorm with V2's weight_offset, multiply_before_cast and weight dtype; added by migrate-v3.

    A ``dtype`` keeps the checkpoint's dtype for the weight (V2's ``dtype=``); as in V2, the weight
    is cast to the input's dtype where it is applied.
    """

    def __init__(
        self,
        dim: int,
        eps: float = 1e-6,
        *,
        weight_offset: float = 0.0,
        multiply_before_cast: bool = True,
        dtype: DType | None = None,
    ) -> None:
        super().__init__(dim, eps)
        if dtype is not None:
            self.weight = Tensor.ones([dim], dtype=dtype)
        self.weight_offset = weight_offset
        self.multiply_before_cast = multiply_before_cast

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm(
            x,
            self.weight.cast(x.dtype),
            self.eps,
            weight_offset=self.weight_offset,
            multiply_before_cast=self.multiply_before_cast,
        )
'''

#: V2 ``StackedLinear`` parameters (in order). Only the q/k/v form maps: V3
#: ``QKVLinear(in_dim, q_dim, kv_dim, bias=, stacked=)`` keeps unfused children
#: name-transparent as ``q_proj``/``k_proj``/``v_proj``, as V2 did.
STACKED_LINEAR_PARAMS = (
    "in_dim",
    "out_dims",
    "names",
    "dtype",
    "device",
    "stacked",
    "has_bias",
    "linear_cls",
    "quant_config",
    "clip_weight",
    "_is_sharding",
)
STACKED_LINEAR_DEFAULTS = {"linear_cls": "Linear", "quant_config": "None", "clip_weight": "None", "_is_sharding": "False"}
QKV_NAMES = '["q_proj", "k_proj", "v_proj"]'
QKV_LINEAR = (f"{CL}.linear", "QKVLinear")

#: Attributes a V2 layer has under another name in its V3 class (V2 ``Conv2d`` kept its
#: filter in ``filter``; V3 ``Conv2d`` in ``weight``): ``self.conv.filter`` reads follow.
ATTRIBUTE_RENAMES: dict[str, dict[str, str]] = {"Conv2d": {"filter": "weight"}}

#: Attributes every V2 ``Linear`` has (None unless its weight is quantized) that a V3 ``Linear``
#: sets only when quantized: V2's ``x.weight_scale is not None`` ("is it quantized?") reads them
#: with ``getattr(x, name, None)`` (``tests/test_knowledge.py`` checks both classes).
OPTIONAL_ATTRIBUTES = frozenset({"weight_scale", "input_scale", "weight_scale_2"})

#: V2 layer classes with no V3 class: a person ports them (MV343).
NO_V3_CLASS: dict[str, str] = {
    "DeepseekYarnRotaryEmbedding": "copy deepseekV2_modulev3/layers/rotary_embedding.py",
    "DynamicRotaryEmbedding": "port it locally",
    "StackedLinear": "only q/k/v StackedLinear maps to common_layers.linear.QKVLinear; use separate Linears",
    "Conv3D": "no V3 class: use F.conv3d in a local Module",
    "ConvTranspose1d": "no V3 class: use F.conv2d_transpose in a local Module",
    "WeightNormConvTranspose1d": "no V3 class: port it locally",
    "DataParallelAttentionWithRope": "port it locally",
    "GGUFQAttentionWithRope": "GGUF is not ported to V3",
    "GPTQAttentionWithRope": "GPTQ is not ported to V3",
    "MultiheadAttention": "port it locally",
    "GPTQLinear": "GPTQ is not ported to V3",
    "FusedMLP": "port it locally",
}

#: what every ModuleV3 ``Module`` has (max 26.7, ``dir(max.experimental.nn.Module)``): a subclass
#: reading one of these reads no V2 attribute
V3_MODULE_ATTRIBUTES = frozenset({
    "children", "compile", "descendants", "device", "forward", "load_state_dict", "local_parameters",
    "name_transparent", "parameters", "to", "trace",
})

#: public methods of V2 layers that their V3 class lacks (but ``shard``, MV390's) → what to do instead
#: (``tests/test_knowledge.py`` checks each against the installed max): a call of one gets a TODO
V2_ONLY_METHODS: dict[str, dict[str, str]] = {
    "AttentionWithRope": {
        "materialize_kv_from_hidden": (
            "project the hidden states with the layer's qkv_proj (q/k norms applied with its q_norm_weight/"
            "k_norm_weight) and store K/V with rope_split_store_ragged "
            "(max.experimental.nn.common_layers.functional_kernels), as V2's method does"
        ),
    },
    "MoE": {"eplb_weight_sources": "V3 MoE has no expert-parallel load balancing: keep the V2 MoE where it is needed"},
    "MoEQuantized": {
        "eplb_weight_sources": "V3 MoE has no expert-parallel load balancing: keep the V2 MoE where it is needed",
    },
}

#: max pipeline mixins that declare V2's ``model: Model`` (a pipeline model migrated onto a V3 base
#: keeps them): its ``model`` is annotated ``Any``, which both bases accept (``tests/test_knowledge.py``)
MODEL_MIXINS = frozenset({"max.pipelines.lib.pipeline_variants.unified_spec_decode_model._UnifiedSpecDecodeModelMixin"})

#: V2 ``Transformer`` methods a subclass calls on itself that max's ModuleV3 text models lack → the
#: official ports' modules whose text model runs its layers, norm and head as migrate-v3's port of
#: the method does (``tests/test_port_process_hidden_states.py`` compares it with ``Llama3TextModel``)
V2_MODEL_METHODS: dict[str, frozenset[str]] = {
    "_process_hidden_states": frozenset({"llama3_modulev3.llama3"}),
}

#: max's official ports whose text models' ``forward`` returns ``ModuleV3Outputs`` (V2's returned a
#: tuple): module → classes (``tests/test_knowledge.py`` checks them against the installed max)
MODEL_OUTPUTS: dict[str, frozenset[str]] = {
    "deepseekV2_modulev3.deepseekV2": frozenset({"DeepseekV2TextModel", "DeepseekV2"}),
    "deepseekV3_2_modulev3.deepseekV3_2": frozenset({"DeepseekV3_2"}),
    "deepseekV3_modulev3.deepseekV3": frozenset({"DeepseekV3TextModel", "DeepseekV3"}),
    "gemma3_modulev3.gemma3": frozenset({"Gemma3TextModel", "Gemma3"}),
    "gpt_oss_modulev3.gpt_oss": frozenset({"GptOssTextModel", "GptOss"}),
    "llama3_modulev3.llama3": frozenset({"Llama3TextModel", "Llama3"}),
    "nemotron_h_modulev3.nemotron_h": frozenset({"NemotronH"}),
    "olmo2_modulev3.olmo2": frozenset({"Olmo2TextModel", "Olmo2"}),
}

#: max library classes outside ``max.nn`` that are V2 Modules with no ModuleV3 form in max 26.7 → what
#: a subclass does instead (``tests/test_knowledge.py`` checks them against the installed max)
V2_LIBRARY_MODULES: dict[str, str] = {
    "max.pipelines.speculative.block_driver.BlockDriver": (
        "it drives ModuleV3 target/draft models through Tensor adapters; migrate-v3 splits a driver whose "
        "__init__ builds them in plain statements (MV323), not this one: hold them in a ModuleV3 Module and build "
        "the driver per trace in its forward (unified_mtp_glm5_2_modulev3 shows how)"
    ),
    "max.pipelines.speculative.driver.SequentialDriver": (
        "it drives ModuleV3 target/draft models through Tensor adapters; migrate-v3 splits a driver whose "
        "__init__ builds them in plain statements (MV323), not this one: hold them in a ModuleV3 Module and build "
        "the driver per trace in its forward (unified_mtp_glm5_2_modulev3 shows how)"
    ),
}

#: V2 layers whose V3 container builds them through a factory with V3 keywords only
#: (``MoE(gate_cls=...)`` calls ``gate_cls(hidden_dim=..., num_experts=..., num_experts_per_token=...)``):
#: a subclass's own ``__init__`` must not require the placement arguments V3 no longer passes.
FACTORY_BUILT: dict[str, str] = {"MoEGate": "MoE(gate_cls=...)"}
#: V2 containers with no V3 class that still build such a subclass the V2 way (with placement
#: arguments): a file that names one keeps the subclass's V2 parameters.
FACTORY_BUILT_BY_V2: dict[str, tuple[str, ...]] = {"MoEGate": ("StackedMoE",)}

#: V2 layer → the V2 layer whose V3 class also builds it once it takes a quantization config: V2
#: ``MoE(quant_config=q)`` quantizes its experts, which V3 ``MoE`` cannot, while V3 ``QuantizedMoE``
#: builds plain bf16 experts when ``q`` is None (deepseekV3_modulev3 uses it so on one device).
QUANTIZED_BY: dict[str, tuple[str, str]] = {"MoE": ("MoEQuantized", "quant_config")}

#: ``max.nn`` names another codemod flags with a more precise rule (no MV300).
FLAGGED_ELSEWHERE = frozenset(
    {"Allreduce", "Signals", "forward_sharded_layers", "forward_sequential_layers", "ShardingStrategy"}
)

#: V2 container classes (handled by the containers codemod).
CONTAINERS = {"LayerList": "ModuleList", "Sequential": "Sequential"}
#: the container classes of either side: their one argument holds the modules
CONTAINER_NAMES = frozenset({*CONTAINERS, *CONTAINERS.values()})
CONTAINER_MODULE = f"{E}.sequential"

#: V2 base/interface names that become the V3 Module.
MODULE_NAMES = frozenset({"Module", "Layer"})
MODULE_HOME = E

#: Functions with a V3 home under another module.
FUNCTIONS: dict[str, tuple[str, str]] = {
    "activation_function_from_name": (f"{CL}.activation", "activation_function_from_name"),
}


#: ``max.nn`` sub-namespaces that hold V3 code (older name of max.experimental.nn).
V3_ALIASES = ("max.nn.module_v3.",)


def v2_symbol(qualified: str | None) -> str | None:
    """The ``max.nn`` symbol a qualified name refers to (``max.nn.norm.RMSNorm`` → ``RMSNorm``)."""
    if qualified is None or not qualified.startswith("max.nn."):
        return None
    if qualified.startswith(V3_ALIASES):
        return None
    return qualified.rsplit(".", 1)[1]


def module_kind(symbol: str | None) -> str | None:
    """What subclassing V2 ``max.nn`` symbol ``symbol`` (:func:`v2_symbol`) makes a class: ``"module"``
    (a V2 Module base), ``"layer"`` (a layer with a V3 class) or ``"port"`` (a V2 class migrate-v3
    ports, :mod:`migrate_v3.knowledge.ports`); None for anything else."""
    if symbol in MODULE_NAMES:
        return "module"
    if symbol in LAYERS:
        return "layer"
    if symbol in PORTS:
        return "port"
    return None


def is_module_class(qualified: str) -> bool:
    """``qualified`` names a ``max`` module class: a V2 module, layer or ported class
    (:func:`module_kind`), or V3's ``Module``, its containers or a V3 layer."""
    if qualified.startswith(V3_ALIASES) or qualified.startswith(f"{E}."):
        return qualified.rsplit(".", 1)[1] in _V3_MODULE_CLASSES
    return module_kind(v2_symbol(qualified)) is not None


#: V3's module classes by name: ``Module``, its containers and the V3 class of each mapped layer
_V3_MODULE_CLASSES = frozenset({"Module", "ModuleList", "Sequential", *(spec.v3_name for spec in LAYERS.values())})


#: V2 layer name → (positional arguments its V3 ``forward`` takes, V2 call arguments that carry
#: no data and go): the layers whose V2 ``__call__`` took more (``codemods.layer_calls``)
#: V2 call parameters that carry no data (allreduce synchronisation): a V3 ``forward`` without one
#: is called without it
NO_DATA_ARGS = frozenset({"signal_buffers"})
CALL_DROPS: dict[str, tuple[int, frozenset[str]]] = {
    "VocabParallelEmbedding": (1, frozenset({"signal_buffers"})),
    # V2 ``__call__(x: Sequence[TensorValue], signal_buffers)`` allgathered a list per device
    "ColumnParallelLinear": (1, frozenset({"signal_buffers"})),
}


@dataclass(frozen=True)
class CallMove:
    """A V2 layer call whose V3 ``forward`` takes less because the V3 layer holds the rest."""

    #: V2 ``__call__`` parameters, in order
    v2: tuple[str, ...]
    #: V3 ``forward``'s positional parameters (V2 names), then the ones it reads as keywords
    positional: tuple[str, ...]
    keywords: tuple[str, ...]
    #: why the other V2 arguments carry nothing V3 needs
    why: str


#: V2 layer name → how its calls map onto V3's ``forward`` (``codemods.layer_calls``)
CALL_MOVES: dict[str, CallMove] = {
    # V3 forward(x, kv_collection, **kwargs) reads kwargs["input_row_offsets"]
    "AttentionWithRope": CallMove(
        v2=("layer_idx", "x", "kv_collection", "freqs_cis", "input_row_offsets"),
        positional=("x", "kv_collection"),
        keywords=("input_row_offsets",),
        why="V3 AttentionWithRope holds its layer_idx (constructor) and takes freqs_cis from the rope it was built with",
    ),
}
#: of those, the layers whose ``caveat`` is about that call (stale where the calls are rewritten);
#: ColumnParallelLinear's is about its sharded output, which stays true
CALL_CAVEATS = frozenset({"VocabParallelEmbedding", *CALL_MOVES})


def subclass_spec(
    base: LayerSpec, v2_name: str, v2_init: tuple[str, ...], v3_name: str, v3_init: tuple[str, ...]
) -> LayerSpec | None:
    """How calls of ``v2_name`` (a V2 subclass of ``base``'s layer, ``__init__`` parameters
    ``v2_init`` as ``plan.init_signature`` gives them) map onto ``v3_name`` (a V3 subclass of
    ``base``'s V3 class): ``base``'s map, plus the parameters the subclass adds, kept by name.

    None unless the V3 class takes every parameter the V2 subclass adds (no data is lost) and
    each of its own comes from ``base``'s map or from those (gemma3's V2
    ``ScaledWordEmbedding(vocab_size, hidden_dim, dtype, devices, ..., embed_scale)`` and its
    variant's ``ScaledEmbedding(vocab_size, dim, embed_scale)``).
    """
    if {"*", "**"} & {*v2_init, *v3_init}:
        return None
    v2 = tuple(p.rstrip("=") for p in v2_init)
    v3 = tuple(p.rstrip("=") for p in v3_init)
    added = [p for p in v2 if p not in base.v2_params and p not in base.v2_kwonly]
    if any(p not in v3 for p in added) or any(p not in base.v3_params and p not in added for p in v3):
        return None
    return LayerSpec(
        v2_name,
        base.v3_module,
        v3_name,
        v2,
        v3_params=v3,
        rename={k: v for k, v in base.rename.items() if v in v3},
        drop=base.drop,
        unsupported={k: v for k, v in base.unsupported.items() if k in v2},
        v2_defaults=base.v2_defaults,
        flipped={k: v for k, v in base.flipped.items() if k in v3},
        always={k: v for k, v in base.always.items() if k in v3},
        caveat=base.caveat,
        like=base.v2_name,
    )
