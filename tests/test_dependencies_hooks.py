"""``codemods.dependencies.V2_GRAPH_HOOKS`` is read off the installed max: the methods V2's
``LlamaModelBase`` has that V3's ``Llama3Model`` lacks or calls with other parameters. A
subclass overriding one keeps the V2 base; any other method moves with it onto the V3 base."""

from __future__ import annotations

import inspect

from codemods.dependencies import _MODULE_HOOKS, V2_GRAPH_HOOKS


def _methods(cls: type) -> dict[str, inspect.Signature | None]:
    out: dict[str, inspect.Signature | None] = {}
    for klass in cls.__mro__:
        if not klass.__module__.startswith("max."):
            continue
        for name, value in vars(klass).items():
            if name in out or not callable(value) or isinstance(value, type) or name.startswith("__"):
                continue
            try:
                out[name] = inspect.signature(value)
            except (TypeError, ValueError):
                out[name] = None
    return out


def test_v2_graph_hooks_are_what_the_v3_base_does_not_call_alike() -> None:
    from max.pipelines.architectures.llama3.model import LlamaModelBase
    from max.pipelines.architectures.llama3_modulev3.model import Llama3Model

    v2, v3 = _methods(LlamaModelBase), _methods(Llama3Model)
    differ = {
        n for n, sig in v2.items()
        if n not in v3 or (sig is not None and v3[n] is not None and list(sig.parameters) != list(v3[n].parameters))  # type: ignore[union-attr]
    }
    # graph_specs and _init_distributed_runtime are rewritten (PipelineModels), the rest must keep the V2 base
    assert differ - _MODULE_HOOKS <= V2_GRAPH_HOOKS
    assert "load_model" in differ and "_build_graph_for_compile" in differ
