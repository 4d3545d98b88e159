from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from max.engine import InferenceSession, Model
from max.experimental.nn import Module
from max.pipelines.lib.graph_specs import GraphSpec, compile_graphs, init_graphs


def load_graph_specs(session: InferenceSession, specs: Mapping[str, GraphSpec]) -> dict[str, Model]:
    """V2's ``compile_graphs`` + ``init_graphs`` for GraphSpecs that hold ModuleV3 modules; added by migrate-v3.

    V2 traces a spec's module with V2's ``Module.trace(module=...)``, which a
    ModuleV3 module does not take. A V3 module compiles on its own instead, with
    the spec's weights (under the module's own names) or, without them, the
    values it holds (what ``load_state_dict`` put there), and the pipeline gets
    the compiled callable's engine ``Model``: buffers in, Buffers out, as V2's
    graphs were. Specs of V2 modules still compile the V2 way (in their groups).
    """
    v2 = {role: spec for role, spec in specs.items() if not isinstance(spec.module, Module)}
    models = init_graphs(session, compile_graphs(session, v2), v2) if v2 else {}
    for role, spec in specs.items():
        if role in v2:
            continue
        module: Any = spec.module
        compiled = module.compile(
            *spec.input_types,
            weights=None if spec.weights is None else _own_weights(module, spec.weights),
            session=session,
            name=spec.name,
            custom_extensions=spec.custom_extensions,
            is_device_graph=spec.is_device_graph,
        )
        models[role] = compiled.engine_model
    return models


def _own_weights(module: Any, weights: Mapping[str, Any]) -> Mapping[str, Any]:
    """``weights`` keyed by ``module``'s parameter names: as they are when they hold every one, else
    the entries under the one prefix that holds them all (a checkpoint split by tower keeps the
    tower's prefix: ``vision_encoder.``). Else ``weights`` as they are:
    ``compile`` then names the parameter it finds no entry for."""
    names = [name for name, _ in module.parameters]
    if not names or all(name in weights for name in names):
        return weights
    first = names[0]
    for key in weights:
        prefix = key[: -len(first)]
        if key.endswith(first) and prefix.endswith(".") and all(prefix + name in weights for name in names):
            return {name: weights[prefix + name] for name in names}
    return weights
