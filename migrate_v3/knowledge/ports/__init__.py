"""V3 ports of V2 library classes that have no V3 class, injected by ``apply``.

Each module here is real, importable ModuleV3 code (tested against the V2
class numerically) whose constructor, call signature and attribute names —
hence checkpoint names — are those of the V2 class. ``apply`` never imports
these files: :func:`port_source` reads one as text, its ``from X import Y``
lines become the migrated file's imports and its class is added to the
migrated module, so migrated code does not depend on migrate-v3 at runtime.
A port that builds on another imports it from this package
(``from migrate_v3.knowledge.ports.logits_postprocess import logits_postprocess``):
``apply`` adds that port too instead of the import.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

#: V2 ``max.nn`` class (or function) name → the module in this package that ports it; a V2 layer
#: method V3's class lacks (``V2_ONLY_METHODS``) is ported as a function of the layer of its name.
PORTS: dict[str, str] = {
    "Transformer": "transformer",
    "TransformerBlock": "transformer_block",
    "DistributedTransformer": "distributed_transformer",
    "DistributedTransformerBlock": "distributed_transformer_block",
    "TensorParallelAttentionWithRope": "tensor_parallel_attention",
    "DistributedLogitsPostprocessMixin": "distributed_logits",
    "SigmoidTopKRouter": "sigmoid_router",
    "Conv1D": "conv1d",
    "LatentAttentionWithRope": "latent_attention",
    "TensorParallelLatentAttentionWithRope": "latent_attention",
    "DataParallelLatentAttentionWithRope": "latent_attention",
    "StackedMoE": "stacked_moe",
    "StackedLinear": "stacked_linear",
    "logits_postprocess": "logits_postprocess",
    "LogitsPostprocessMixin": "logits_mixin",
    "MultiheadAttention": "multihead_attention",
    "forward_sequential_layers": "sequential_layers",
    "Identity": "identity",
    "materialize_kv_from_hidden": "materialize_kv",
    # not a V2 class: what a pipeline that keeps V2's GraphSpecs loads them with (``PipelineModels``)
    "load_graph_specs": "graph_specs",
    # not a V2 class: what a call of max's ModuleV3 text model whose result is indexed is wrapped in
    "outputs_as_v2_tuple": "model_outputs",
    # V2 Transformer._process_hidden_states, for a subclass of max's ModuleV3 Llama3TextModel
    "process_hidden_states": "process_hidden_states",
}


#: the port a bridged pipeline loads its V2 GraphSpecs with (``PipelineModels`` adds it; ``check``
#: does not report the V2 names it keeps in a class that calls it)
LOAD_GRAPH_SPECS = "load_graph_specs"


def port_owner(name: str) -> str:
    """The first V2 class ported by the module that ports ``name``: its code is added once, under that name."""
    return next(n for n, module in PORTS.items() if module == PORTS[name])


@cache
def port_source(name: str) -> str:
    """The text of the port of V2 class ``name`` (imports included)."""
    return (Path(__file__).parent / f"{PORTS[name]}.py").read_text(encoding="utf-8")
