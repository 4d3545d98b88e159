"""The codemods of ``migrate-v3 apply`` and the one order they run in.

Each codemod is one concern with one rule-code prefix (see its docstring).
They run in a single traversal (``codemods.base.Engine``): at every node the
hooks run in this order, so e.g. ``ops`` sees the original ``ops.X`` names,
``module_interface`` sees annotations already rewritten by ``tensor_types``,
and ``imports`` (on the whole module) sees what everything else used. Only
``import_order`` (which lays out the import statements the rewrites touched)
and ``residual`` (comments only) run after it.
"""

from __future__ import annotations

from codemods.base import Codemod
from codemods.batch_processors import BatchProcessors
from codemods.containers import Containers
from codemods.dead_locals import DeadLocals
from codemods.dependencies import Dependencies, SiblingCalls
from codemods.dtype_scopes import DtypeScopes
from codemods.graph_compile import GraphCompile
from codemods.identical_branches import IdenticalBranches
from codemods.import_order import ImportOrder, NeutralImportOrder
from codemods.imports import Imports
from codemods.keyword_dicts import KeywordDicts
from codemods.kv_cache import KVCache
from codemods.layer_calls import LayerCalls
from codemods.layer_methods import LayerMethods
from codemods.layer_norm_affine import LayerNormAffine
from codemods.layers import LayerConstructors
from codemods.model_outputs import ModelOutputs
from codemods.module_interface import ModuleInterface
from codemods.ops import Ops
from codemods.parameters import Parameters
from codemods.pipeline_model import PipelineModels
from codemods.ports import Ports
from codemods.registration import Registration
from codemods.residual import Residual
from codemods.self_imports import SelfImports
from codemods.sharding import Sharding, ShardingClasses
from codemods.signal_inputs import SignalInputs
from codemods.spec_drivers import SpecDrivers
from codemods.tensor_types import TensorTypes
from codemods.tied_embeddings import TiedEmbeddings
from codemods.weight_adapters import WeightAdapters

ORDER: list[type[Codemod]] = [
    GraphCompile,  # MV380-382: Graph + session.load → F.lazy() + model.compile()
    PipelineModels,  # MV383: V2 PipelineModel classes → ModuleV3 pipeline bases and hooks
    BatchProcessors,  # MV383: V2 single-replica batch processors → the ModuleV3 one (V3 input order)
    SignalInputs,  # MV391: V2's signal buffer graph inputs go (V3 compile adds them; forward never reads them)
    KVCache,  # MV38x: flag KV-cache plumbing (TODO only)
    Sharding,  # MV39x: strategies → placements, per-device clones/loops → one module (TODO what has no V3 form)
    Parameters,  # MV36x: Weight(...) → Tensor.zeros(...)
    WeightAdapters,  # MV362: flag checkpoint key renames (TODO only)
    TiedEmbeddings,  # MV363: tied lm_head → embed_tokens.weight.T in forward()
    KeywordDicts,  # MV346: a local dict of V2 layer keywords splatted into calls → keywords in each call
    LayerConstructors,  # MV34x: V2 layer calls → V3 keyword calls
    DtypeScopes,  # MV342: a layer V2 built in a dtype of its own (no norm) → its statement under default_dtype
    LayerCalls,  # MV342: calls of layers whose V3 forward takes fewer arguments (signal_buffers go; one Tensor, not a list)
    LayerMethods,  # MV342: calls of V2 layer methods the V3 class lacks (their port, or a TODO)
    ModelOutputs,  # MV342: indexing what an official ModuleV3 text model returns (TODO only)
    Ports,  # MV343: V2 library bases with no V3 class → migrate-v3's V3 port, added to the module
    Containers,  # MV35x: LayerList/Sequential
    Ops,  # MV37x: ops.X → F.X, graph-value APIs
    TensorTypes,  # MV33x: TensorValue → Tensor
    ModuleInterface,  # MV32x: Module[[...], ...], forward, super().__init__()
    SpecDrivers,  # MV323: a V2 spec-decode driver subclass → a ModuleV3 module over the driver built per trace
    DeadLocals,  # clean-up: locals and function-level imports only the dropped V2 arguments used
    IdenticalBranches,  # MV391 clean-up: an if/else whose branches the rewrites made equal → one branch
    ShardingClasses,  # MV390: a class's sharding_strategy setter / shard() → placements in __init__
    SelfImports,  # MV301: absolute imports of the package itself → relative
    Dependencies,  # MV301: sibling V2 packages → their _modulev3 variants
    SiblingCalls,  # MV301: calls of sibling classes whose V3 constructor differs
    LayerNormAffine,  # MV341: V2 Llama3's weightless layer_norm made explicit on the V3 model/config classes
    Registration,  # MV303: arch.py / __init__.py registration names
    Imports,  # MV31x: imports follow what the code now uses
    ImportOrder,  # MV310: drop imports the rewrites left unused; lay out and place the touched ones as isort would
    NeutralImportOrder,  # the same, on neutral files whose imports a neutral codemod moves (never with ImportOrder)
    Residual,  # safety net, after the imports settle: TODO on every V2 site check still sees (comments only)
]

__all__ = ["ORDER", "Codemod"]
