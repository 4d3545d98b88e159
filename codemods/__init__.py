"""The codemods of ``migrate-v3 apply`` and the one order they run in.

Each codemod is one concern with one rule-code prefix (see its docstring).
They run in a single traversal (``codemods.base.Engine``): at every node the
hooks run in this order, so e.g. ``ops`` sees the original ``ops.X`` names,
``module_interface`` sees annotations already rewritten by ``tensor_types``,
and ``imports`` (last, on the whole module) sees what everything else used.
"""

from __future__ import annotations

from codemods.base import Codemod
from codemods.containers import Containers
from codemods.dependencies import Dependencies
from codemods.graph_compile import GraphCompile
from codemods.imports import Imports
from codemods.kv_cache import KVCache
from codemods.layers import LayerConstructors
from codemods.module_interface import ModuleInterface
from codemods.ops import Ops
from codemods.parameters import Parameters
from codemods.registration import Registration
from codemods.sharding import Sharding
from codemods.tensor_types import TensorTypes

ORDER: list[type[Codemod]] = [
    GraphCompile,  # MV38x: flag Graph/session/state_dict sites (TODO only)
    KVCache,  # MV38x: flag KV-cache plumbing (TODO only)
    Sharding,  # MV39x: flag sharding/collectives (TODO only)
    Parameters,  # MV36x: Weight(...) → Tensor.zeros(...)
    LayerConstructors,  # MV34x: V2 layer calls → V3 keyword calls
    Containers,  # MV35x: LayerList/Sequential
    Ops,  # MV37x: ops.X → F.X, graph-value APIs
    TensorTypes,  # MV33x: TensorValue → Tensor
    ModuleInterface,  # MV32x: Module[[...], ...], forward, super().__init__()
    Dependencies,  # MV301: sibling V2 packages → their _modulev3 variants
    Registration,  # MV303: arch.py / __init__.py registration names
    Imports,  # MV31x: last — imports follow what the code now uses
]

__all__ = ["ORDER", "Codemod"]
