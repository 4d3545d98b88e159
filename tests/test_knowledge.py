"""The layer signature maps (``knowledge/layers.py``) against the installed max 26.7.

``apply`` runs without max, so its facts are data; this test re-derives them
from ``inspect.signature`` on the real V2 and V3 classes, so a map that
names a parameter a class does not have (or in the wrong position) fails.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from migrate_v3.knowledge.layers import CALL_MOVES, LAYERS, STACKED_LINEAR_PARAMS, LayerSpec


@cache
def _v2_classes() -> dict[str, Any]:
    """Every public class defined under max.nn (V2), by name."""
    import max.nn

    found: dict[str, Any] = {}
    for info in pkgutil.walk_packages(max.nn.__path__, "max.nn."):
        if info.name.startswith(("max.nn.module_v3", "max.nn.legacy")):
            continue
        try:
            mod = importlib.import_module(info.name)
        except Exception:  # noqa: BLE001, S112 - optional submodules (GPU-only) may not import
            continue
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and obj.__module__.startswith("max.nn."):
                found.setdefault(name, obj)
    return found


def _params(cls: Any) -> list[inspect.Parameter]:
    return list(inspect.signature(cls.__init__).parameters.values())[1:]


def _accepted(cls: Any) -> set[str]:
    """Keyword names ``cls(...)`` accepts, following ``**kwargs`` up the MRO."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        params = _params(klass)
        names |= {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return names


@pytest.mark.parametrize("spec", list(LAYERS.values()), ids=lambda s: s.v2_name)
def test_layer_spec_matches_installed_classes(spec: LayerSpec) -> None:
    v2 = _v2_classes()[spec.v2_name]
    v2_params = _params(v2)
    positional = [p.name for p in v2_params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    assert list(spec.v2_params) == positional[: len(spec.v2_params)], "V2 positional order"
    v2_names = _accepted(v2)
    assert set(spec.v2_kwonly) <= v2_names

    v3 = getattr(importlib.import_module(spec.v3_module), spec.v3_name)
    v3_names = _accepted(v3)
    assert set(spec.v3_params) <= v3_names, "V3 parameters the map emits"
    assert set(spec.flipped) | set(spec.always) | set(spec.fill) | set(spec.required) <= v3_names
    assert set(spec.rename) <= v2_names and set(spec.unsupported) <= v2_names


def test_stacked_linear_parameters() -> None:
    positional = [p.name for p in _params(_v2_classes()["StackedLinear"])]
    assert list(STACKED_LINEAR_PARAMS) == positional


def test_every_auto_layer_symbol_has_an_argument_map() -> None:
    """``check`` calls a max.nn constructor or container ``auto`` only when ``apply`` can rewrite
    its calls: it has a LayerSpec, a function home, or is a container or the Module base."""
    from migrate_v3.knowledge import symbols as K
    from migrate_v3.knowledge.layers import CONTAINERS, FUNCTIONS, LAYERS, MODULE_NAMES

    mapped = set(LAYERS) | set(FUNCTIONS) | set(CONTAINERS) | set(MODULE_NAMES)
    auto = {name for name, sym in K.NN_SYMBOLS.items() if sym.code in {"MV320", "MV340", "MV350", "MV351"}}
    assert auto - mapped == set()
    assert {"Linear", "RMSNorm", "AttentionWithRope"} <= auto


def test_attribute_renames_match_installed_classes() -> None:
    """Each V2 attribute ``ATTRIBUTE_RENAMES`` rewrites exists on the V2 layer and its V3
    name on the V3 class (both built here: V3 under ``F.lazy()``), and the V2 name does not."""
    from max.dtype import DType
    from max.experimental import functional as F

    from migrate_v3.knowledge.layers import ATTRIBUTE_RENAMES

    for name, renames in ATTRIBUTE_RENAMES.items():
        spec = LAYERS[name]
        v2 = _v2_classes()[name](kernel_size=1, in_channels=1, out_channels=1, dtype=DType.float32)
        with F.lazy():
            v3 = getattr(importlib.import_module(spec.v3_module), spec.v3_name)(
                kernel_size=1, in_channels=1, out_channels=1
            )
        for old, new in renames.items():
            assert hasattr(v2, old) and not hasattr(v2, new)
            assert hasattr(v3, new) and not hasattr(v3, old)


def test_functional_twins_are_the_tensor_forms_beside_their_v2_functions() -> None:
    """Each ``FUNCTIONAL_TWINS`` entry: the V2 function and its twin live in one module, and
    the twin is ``F.functional`` of that very function (it takes and returns Tensors)."""
    from migrate_v3.knowledge.ops import FUNCTIONAL_TWINS

    for qual, twin in FUNCTIONAL_TWINS.items():
        module, _, name = qual.rpartition(".")
        mod = importlib.import_module(module)
        wrapped = getattr(mod, twin)
        assert callable(wrapped)
        assert inspect.signature(wrapped).parameters.keys() == inspect.signature(getattr(mod, name)).parameters.keys()
        assert wrapped is not getattr(mod, name) and getattr(wrapped, "__wrapped__", None) is getattr(mod, name)


def test_optional_attributes_are_none_on_a_v2_linear_and_absent_on_a_v3_one() -> None:
    """What ``getattr(x, name, None)`` relies on for each ``OPTIONAL_ATTRIBUTES`` name."""
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.nn import Linear as V3Linear
    from max.graph import DeviceRef
    from max.nn.linear import Linear as V2Linear

    from migrate_v3.knowledge.layers import OPTIONAL_ATTRIBUTES

    v2 = V2Linear(8, 8, DType.float32, DeviceRef.CPU())
    with F.lazy():
        v3 = V3Linear(8, 8)
    for name in OPTIONAL_ATTRIBUTES:
        assert getattr(v2, name) is None
        assert not hasattr(v3, name)


def test_v2_library_modules_are_v2_modules_and_no_v3_ones() -> None:
    """Every ``V2_LIBRARY_MODULES`` class is a V2 ``max.nn`` Module in the installed max, not a ModuleV3."""
    from max.experimental.nn import Module as ModuleV3
    from max.nn.layer import Module as ModuleV2

    from migrate_v3.knowledge.layers import V2_LIBRARY_MODULES

    for qualname in V2_LIBRARY_MODULES:
        module, name = qualname.rsplit(".", 1)
        cls = getattr(importlib.import_module(module), name)
        assert issubclass(cls, ModuleV2) and not issubclass(cls, ModuleV3), qualname


def test_tensor_generics_default_to_graph_values() -> None:
    """``TENSOR_GENERICS`` (MV323's annotations in a SequentialDriver adapter): each class of the
    speculative package has that many type parameters, each defaulting to a graph-value type; and
    ``Verified``'s second (its logits) does too, its first having no default."""
    import max.pipelines.speculative as spec
    from max.graph import BufferValue, TensorValue, Value

    from codemods.spec_drivers import TENSOR_GENERICS

    graph = {TensorValue, BufferValue, Value[Any]}
    modules = [importlib.import_module(f"max.pipelines.speculative.{m}") for m in ("driver", "spec_input_types")]
    for name, count in TENSOR_GENERICS.items():
        cls = next(getattr(m, name) for m in modules if hasattr(m, name))
        assert len(cls.__parameters__) == count and all(p.__default__ in graph for p in cls.__parameters__), name
    hidden, logits = spec.spec_target.Verified.__parameters__
    assert logits.__default__ is TensorValue and not hidden.has_default()


def test_model_mixins_declare_v2_models() -> None:
    """Each ``MODEL_MIXINS`` class declares ``model: Model`` (V2's compiled model), which V3 pipeline
    bases declare otherwise."""
    from max.pipelines.lib import ModuleV3PipelineModelWithKVCache

    from migrate_v3.knowledge.layers import MODEL_MIXINS

    v3 = ModuleV3PipelineModelWithKVCache.__annotations__.get("model")
    assert v3 is not None and "Model" not in v3
    for qualname in MODEL_MIXINS:
        module, name = qualname.rsplit(".", 1)
        assert getattr(importlib.import_module(module), name).__annotations__["model"] == "Model", qualname


def test_model_outputs_are_the_official_classes_whose_forward_returns_them() -> None:
    """``MODEL_OUTPUTS`` is exactly the classes of max's ``*_modulev3`` ports whose ``forward`` is
    annotated to return ``ModuleV3Outputs`` (found by parsing every port module), and each imports."""
    import ast

    import max.pipelines.architectures as archs

    from migrate_v3.knowledge.layers import MODEL_OUTPUTS

    root = Path(archs.__file__).parent
    found: dict[str, set[str]] = {}
    for path in sorted(root.glob("*_modulev3/**/*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and any(
                isinstance(m, ast.FunctionDef) and m.name == "forward" and m.returns is not None
                and ast.unparse(m.returns) == "ModuleV3Outputs" for m in node.body
            ):
                found.setdefault(".".join(path.relative_to(root).with_suffix("").parts), set()).add(node.name)
    assert {k: set(v) for k, v in MODEL_OUTPUTS.items()} == found
    for module, names in MODEL_OUTPUTS.items():
        loaded = importlib.import_module(f"max.pipelines.architectures.{module}")
        assert all(hasattr(loaded, name) for name in names), module


def test_dropped_load_keywords_are_v2_only() -> None:
    """The ``load_state_dict`` keywords apply drops are V2's and not V3's."""
    from max.experimental.nn import Module as ModuleV3
    from max.nn.layer import Module as ModuleV2

    from codemods.graph_build import V2_LOAD_KEYWORDS

    v2 = inspect.signature(ModuleV2.load_state_dict).parameters
    v3 = inspect.signature(ModuleV3.load_state_dict).parameters
    for keyword in V2_LOAD_KEYWORDS:
        assert keyword in v2 and keyword not in v3, keyword


def test_a_tensor_device_is_a_driver_device_equal_to_a_device_ref_only_through_from_device() -> None:
    """Why Ops compares ``DeviceRef.from_device(x.device)`` (MV373): V2's ``x.device`` was a
    DeviceRef; a V3 Tensor's is a driver Device, which never equals one."""
    from max.driver import CPU
    from max.experimental.tensor import Tensor
    from max.graph import DeviceRef

    device = Tensor.zeros([2]).device
    assert isinstance(device, CPU)
    assert device != DeviceRef.CPU()
    assert DeviceRef.from_device(device) == DeviceRef.CPU()


@pytest.mark.parametrize("name", sorted(CALL_MOVES))
def test_call_moves_match_the_installed_call_signatures(name: str) -> None:
    """``CALL_MOVES`` (``codemods.layer_calls``): V2 ``__call__``'s parameters, V3 ``forward``'s
    positional ones, and the keywords V3 reads from ``**kwargs``."""
    move = CALL_MOVES[name]
    v2 = _v2_classes()[name]
    assert [p.name for p in list(inspect.signature(v2.__call__).parameters.values())[1:]] == list(move.v2)
    v3 = getattr(importlib.import_module(LAYERS[name].v3_module), LAYERS[name].v3_name)
    params = list(inspect.signature(v3.forward).parameters.values())[1:]
    assert [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD] == list(move.positional)
    assert any(p.kind is p.VAR_KEYWORD for p in params)
    body = inspect.getsource(v3.forward)
    for keyword in move.keywords:
        assert f'kwargs["{keyword}"]' in body


def test_v3_module_attributes_are_those_of_the_installed_module() -> None:
    from max.experimental.nn import Module

    from migrate_v3.knowledge.layers import V3_MODULE_ATTRIBUTES

    assert {a for a in dir(Module) if not a.startswith("_")} == V3_MODULE_ATTRIBUTES


@pytest.mark.parametrize("qualified", sorted(__import__("migrate_v3.knowledge.ops", fromlist=["x"]).GRAPH_FUNCTIONS))
def test_graph_functions_are_max_nn_functions_over_single_graph_values(qualified: str) -> None:
    """``knowledge.ops.GRAPH_FUNCTIONS`` (wrapped with ``F.functional`` at a call, MV372): each path
    names a function whose hints take a graph value, none a list of them."""
    import re

    module, _, name = qualified.rpartition(".")
    func = getattr(importlib.import_module(module), name)
    assert inspect.isfunction(func)
    text = " ".join(str(p.annotation) for p in inspect.signature(func).parameters.values())
    assert re.search(r"\b(TensorValue|BufferValue|TensorValueLike)\b", text)
    assert not re.search(r"(list|Sequence|Iterable)\[[^\]]*(TensorValue|BufferValue)", text)


def test_a_graph_function_wrapped_with_functional_runs_on_tensors() -> None:
    from max.experimental import functional as F
    from max.experimental.tensor import Tensor
    from max.nn.clamp import clamp

    out = F.functional(clamp)(Tensor.ones([2]) * 3.0, min=-1.0, max=1.0)
    assert [float(v) for v in out.to_numpy()] == [1.0, 1.0]


def test_mask_ports_forward_is_the_installed_v3_forward_but_for_the_mask() -> None:
    """``MASK_PORTS``' emitted forward is max 26.7's ``AttentionWithRope.forward`` line for line,
    except the kernel's mask (V3's causal constant → the layer's) and window, and the annotations."""
    from max.experimental.nn.common_layers.attention import AttentionWithRope

    from migrate_v3.knowledge.layers import MASK_PORTS

    ours = MASK_PORTS["AttentionWithRope"][3]
    ours = ours[ours.index("    def forward("):].splitlines()
    window = [line for line in ours if "local_window_size=" in line]
    assert [w.strip() for w in window] == ["local_window_size=-1 if self.sliding_window is None else self.sliding_window,"]
    ours.remove(window[0])
    theirs = inspect.getsource(AttentionWithRope.forward).splitlines()
    assert len(ours) == len(theirs)
    assert [(a.strip(), b.strip()) for a, b in zip(theirs, ours, strict=True) if a != b] == [
        ("kv_collection: PagedCacheValues,", "kv_collection: Any,"),
        ("**kwargs,", "**kwargs: Any,"),
        ('"""Computes attention over the input tensor using the KV cache."""',
         '"""V3 AttentionWithRope.forward (max 26.7) with this layer\'s mask and window."""'),
        ("mask_variant=MHAMaskVariant.CAUSAL_MASK,", "mask_variant=self.mask_variant,"),
    ]


def test_v2_only_methods_are_on_the_v2_layer_and_not_on_its_v3_class() -> None:
    """``V2_ONLY_METHODS`` (MV342's TODO on a call of one): each V2 layer has the method, its V3
    class (``LAYERS``) does not, and no other public method of the V2 layer is missing in V3 but
    ``shard`` (MV390's)."""
    import max.nn as nn2
    from max.nn.layer import Module as V2Module

    from migrate_v3.knowledge.layers import LAYERS, V2_ONLY_METHODS

    for name, methods in V2_ONLY_METHODS.items():
        v2 = getattr(nn2, name)
        spec = LAYERS[name]
        v3 = getattr(importlib.import_module(spec.v3_module), spec.v3_name)
        for method in methods:
            assert callable(getattr(v2, method, None)), (name, method)
            assert not hasattr(v3, method), (name, method)
    for name, spec in LAYERS.items():
        v2 = getattr(nn2, name, None)
        if v2 is None:
            continue
        v3 = getattr(importlib.import_module(spec.v3_module), spec.v3_name)
        public = {m for m in dir(v2) if not m.startswith("_") and callable(getattr(v2, m, None))} - set(dir(V2Module))
        missing = {m for m in public if not hasattr(v3, m)} - {"shard"}
        assert missing == set(V2_ONLY_METHODS.get(name, {})), name


def test_v2_model_methods_are_v2_transformer_methods_the_official_text_models_lack() -> None:
    """``V2_MODEL_METHODS`` (LayerMethods ports a call of one on ``self``): V2's ``Transformer``
    has each method, and no text model of the listed official modules (``MODEL_OUTPUTS``) does."""
    from max.nn.transformer import Transformer

    from migrate_v3.knowledge.layers import MODEL_OUTPUTS, V2_MODEL_METHODS
    from migrate_v3.knowledge.ports import PORTS

    for method, modules in V2_MODEL_METHODS.items():
        assert callable(getattr(Transformer, method, None)), method
        assert method.lstrip("_") in PORTS, method
        for module in modules:
            loaded = importlib.import_module(f"max.pipelines.architectures.{module}")
            for name in MODEL_OUTPUTS[module]:
                assert not hasattr(getattr(loaded, name), method), (module, name, method)


def test_buffer_inputs_reach_forward_as_tensors_holding_buffer_values() -> None:
    """MV373 rewrites ``next(inputs).buffer`` to ``next(inputs)._graph_value``: a BufferType input of a
    traced V3 module is a Tensor whose graph value is V2's BufferValue (a TensorType one's is not)."""
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.nn import Module
    from max.experimental.tensor import Tensor
    from max.graph import BufferType, BufferValue, DeviceRef, TensorType, TensorValue, ops

    from migrate_v3.knowledge.ops import GRAPH_VALUE

    seen: list[tuple[type, type]] = []

    class Reader(Module[..., Tensor]):
        def forward(self, x: Tensor, pool: Tensor) -> Tensor:
            value = getattr(pool, GRAPH_VALUE)
            seen.append((type(pool), type(value)))
            return x + Tensor.from_graph_value(ops.buffer_load(value))

    with F.lazy():
        reader = Reader()
    cpu = DeviceRef.CPU()
    reader.trace(TensorType(DType.float32, [4], cpu), BufferType(DType.float32, [4], cpu))
    assert seen == [(Tensor, BufferValue)]
    assert not issubclass(BufferValue, TensorValue)
