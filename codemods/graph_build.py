"""Recognise the V2 "build a Graph, load it in a session" pattern (analysis only).

The MV380/381 rewrite is only safe when the whole pattern is there, so this
module reads the ORIGINAL module once and returns a :class:`GraphPlan`: which
statements of which function body become ``F.lazy()`` + ``model.compile``,
which ``session.load(...)`` / ``.execute(...)`` sites follow, and why a
``Graph(...)`` that did not match was left alone (that reason goes in its
TODO). ``codemods.graph_compile`` applies the plan; keeping the matching here
keeps the codemod's hooks short. Nodes are keyed by ``id()`` of the original
tree, which the engine keeps alive for the whole traversal.

The recognised builder (all statements at the top level of one function body):

    model = X(...)                      →  with F.lazy()[, default_dtype(d)]:
                                               model = X(...)
    model.load_state_dict(sd)           →  model.to(dev.to_device())
    with Graph(n, input_types=[t0, t1]) as g:
        g.output(model(g.inputs[0].tensor, g.inputs[1].tensor))
                                        →  g = model.compile(t0, t1, weights=sd)

Also recognised: ``input_types=`` any expression (``compile(*types, ...)``; the model must then
take every input: ``model(*(v.tensor for v in g.inputs))``), the output bound first
(``out = model(...)`` then ``g.output(out)``, ``g.output(*out)`` or both under
``isinstance(out, tuple)``), ``load_state_dict`` with V2's default ``strict=True`` or the
keywords V3 has no slot for (``weight_alignment``), ``r = model.state_dict()`` kept for
``weights_registry=r``, several builders in one body, and a loaded model stored in an
attribute or an annotated name (it gets the compiled graph's engine ``Model``, V2's type).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from codemods.args import source
from codemods.base import nodes_of

#: the qualified names of V2 ``Graph``
GRAPH = ("max.graph.Graph", "max.graph.graph.Graph")
_TENSOR_TYPE = ("max.graph.TensorType", "max.graph.type.TensorType")
_DEVICE_REF = ("max.graph.DeviceRef", "max.graph.type.DeviceRef")
_DTYPE = ("max.dtype.DType", "max.dtype.dtype.DType")

Qualname = Callable[[cst.BaseExpression], "str | None"]


@dataclass
class Builder:
    """One recognised V2 graph build inside a function body."""

    model: str
    weights: cst.BaseExpression
    #: the input types as ``compile``'s positional arguments (source text; ``*types`` for a non-literal)
    input_args: list[str]
    graph: str
    #: index in the body of ``model = X(...)``, ``model.load_state_dict``, ``with Graph``
    construct: int
    load: int
    with_graph: int
    #: ``default_dtype(...)`` argument and ``model.to(...)`` argument, when known
    dtype: cst.BaseExpression | None
    device: cst.BaseExpression | None
    #: number of graph outputs (None: unknown)
    outputs: int | None
    #: index of ``r = model.state_dict()`` between the load and the Graph, and ``r``'s source (-1, None: none)
    registry: int = -1
    registry_name: str | None = None
    #: with no dtype argument: the config the model is built from (``default_dtype`` of its ``dtype``)
    config: cst.BaseExpression | None = None
    #: ids of the ``with Graph(...)`` statement and call, and of the ``session.load`` calls and graph
    #: names that consume the graph (see :func:`_drop_stray`)
    with_id: int = 0
    call_id: int = 0
    loads: list[int] = field(default_factory=list)
    uses: set[int] = field(default_factory=set)


@dataclass
class Compiled:
    """A name bound to a compiled model: how many outputs it returns."""

    outputs: int | None


@dataclass
class GraphPlan:
    """What ``graph_compile`` rewrites in one module (keys: ids of original nodes)."""

    #: IndentedBlock id → the builders in that body, in order
    builders: dict[int, list[Builder]] = field(default_factory=dict)
    #: FunctionDef id → True when its return annotation's ``Graph`` becomes CompiledCallable
    returns_compiled: set[int] = field(default_factory=set)
    #: ``session.load(g, weights_registry=m.state_dict())`` Call id → what replaces it (``g`` or ``g.engine_model``)
    loads: dict[int, str] = field(default_factory=dict)
    #: value (``c.execute(...)`` or ``c.execute(...)[i]``) of a Return/Assign → (i or None, output count)
    executes: dict[int, tuple[int | None, int]] = field(default_factory=dict)
    #: original node ids whose V2 TODOs are superseded by the rewrite
    handled: set[int] = field(default_factory=set)
    #: ``with Graph`` Call id → why it was not rewritten
    reasons: dict[int, str] = field(default_factory=dict)
    #: ``c.execute(...)`` Call ids on a compiled model whose output count is unknown
    unknown_executes: set[int] = field(default_factory=set)


def plan_module(module: cst.Module, qualname: Qualname) -> GraphPlan:
    """Find every builder, then the session.load/execute sites that consume them."""
    plan = GraphPlan()
    functions = [f for f in _walk_functions(module.body)]
    forwards = _forward_arity(module, qualname)
    #: function name → (position of the compiled graph in its return tuple or -1, position of model, outputs)
    exported: dict[str, tuple[int, int, int | None]] = {}
    for func in functions:
        builders = _match_builders(func, qualname, forwards, plan)
        if not builders or not isinstance(func.body, cst.IndentedBlock):
            continue
        plan.builders[id(func.body)] = builders
        for builder in builders:
            ret = _returned(func, builder)
            if ret is not None:
                exported[func.name.value] = ret
                if func.returns is not None and _mentions(func.returns.annotation, qualname, GRAPH):
                    plan.returns_compiled.add(id(func))
    for func in functions:
        _match_consumers(func, plan, exported)
    for func in functions:
        _drop_stray(func, plan)
    return plan


def _drop_stray(func: cst.FunctionDef, plan: GraphPlan) -> None:
    """Unplan a builder whose graph this function uses otherwise than by a matched
    ``session.load(g, weights_registry=...)`` or its final ``return`` (flux2's
    ``self._load_graph(graph, ...)`` wants a V2 Graph), up to the next builder of that name:
    its TODOs stay."""
    builders = plan.builders.get(id(func.body), [])
    if not builders or not isinstance(func.body, cst.IndentedBlock):
        return
    body = list(func.body.body)
    last = _expr_stmt(body[-1])
    kept: list[Builder] = []
    for b in builders:
        end = min((o.with_graph for o in builders if o.with_graph > b.with_graph and o.graph == b.graph), default=len(body))
        stray = next((
            stmt for stmt in body[b.with_graph + 1:end]
            if not (stmt is body[-1] and isinstance(last, cst.Return))
            and any(_is_name(n, b.graph) and id(n) not in b.uses for n in nodes_of(stmt, (cst.Name,)))  # type: ignore[arg-type]
        ), None)
        if stray is None:
            kept.append(b)
            continue
        plan.reasons[b.call_id] = "the graph is used otherwise than by session.load(g, weights_registry=...) or a return"
        plan.handled.difference_update({b.call_id, b.with_id, *b.loads})
        for load in b.loads:
            plan.loads.pop(load, None)
    plan.builders[id(func.body)] = kept


def _walk_functions(body: object) -> list[cst.FunctionDef]:
    """Every function definition, in source (pre-)order: a walk over statements only.

    Definitions are statements, so expressions are never entered (a
    ``CSTVisitor`` over the whole tree costs about a full traversal).
    """
    found: list[cst.FunctionDef] = []
    for stmt in body:  # type: ignore[attr-defined]
        _visit_functions(stmt, found)
    return found


def _visit_functions(node: cst.CSTNode, found: list[cst.FunctionDef]) -> None:
    """(A module-level function: a recursive closure is a reference cycle per call.)"""
    if isinstance(node, cst.FunctionDef):
        found.append(node)
    block = getattr(node, "body", None)
    if isinstance(block, cst.IndentedBlock):
        for stmt in block.body:
            _visit_functions(stmt, found)
    for part in (*getattr(node, "handlers", ()), *getattr(node, "cases", ())):
        _visit_functions(part, found)
    for name in ("orelse", "finalbody"):
        tail = getattr(node, name, None)
        if isinstance(tail, cst.CSTNode):
            _visit_functions(tail, found)


def _forward_arity(module: cst.Module, qualname: Qualname) -> dict[str, int | None]:
    """Class name → number of outputs of its ``__call__``/``forward`` (from the return annotation)."""
    out: dict[str, int | None] = {}
    for stmt in module.body:
        if not isinstance(stmt, cst.ClassDef) or not isinstance(stmt.body, cst.IndentedBlock):
            continue
        for item in stmt.body.body:
            if isinstance(item, cst.FunctionDef) and item.name.value in ("__call__", "forward"):
                out[stmt.name.value] = _arity(item.returns.annotation if item.returns else None)
    return out


def _arity(ann: cst.BaseExpression | None) -> int | None:
    if ann is None:
        return None
    if isinstance(ann, cst.Subscript) and isinstance(ann.value, cst.Name) and ann.value.value in ("tuple", "Tuple"):
        elements = ann.slice
        if any(isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.Ellipsis) for e in elements):
            return None
        return len(elements)
    name = ann.value if isinstance(ann, cst.Name) else ann.attr.value if isinstance(ann, cst.Attribute) else None
    return 1 if name in ("TensorValue", "Tensor", "BufferValue") else None


def _mentions(node: cst.CSTNode, qualname: Qualname, targets: tuple[str, ...]) -> bool:
    return any(isinstance(n, cst.Name) and qualname(n) in targets for n in nodes_of(node, (cst.Name,)))


def _expr_stmt(stmt: cst.BaseStatement) -> cst.BaseSmallStatement | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        return stmt.body[0]
    return None


def _assign_call(stmt: cst.BaseStatement) -> tuple[str, cst.Call] | None:
    """``name = call(...)`` → (name, call)."""
    small = _expr_stmt(stmt)
    if (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
        and isinstance(small.value, cst.Call)
    ):
        return small.targets[0].target.value, small.value
    return None


def _method_call(node: cst.BaseExpression | None, method: str) -> tuple[str, cst.Call] | None:
    """``obj.method(...)`` with ``obj`` a Name → (obj, call)."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == method:
        if isinstance(node.func.value, cst.Name):
            return node.func.value.value, node
    return None


def _graph_with(stmt: cst.BaseStatement, qualname: Qualname) -> tuple[cst.With, cst.Call] | None:
    if isinstance(stmt, cst.With) and len(stmt.items) == 1:
        call = stmt.items[0].item
        if isinstance(call, cst.Call) and qualname(call.func) in GRAPH:
            return stmt, call
    return None


def _match_builders(
    func: cst.FunctionDef, qualname: Qualname, forwards: dict[str, int | None], plan: GraphPlan
) -> list[Builder]:
    if not isinstance(func.body, cst.IndentedBlock):
        return []
    body = list(func.body.body)
    candidates: list[tuple[cst.With, cst.Call, Builder]] = []
    for w_index, stmt in enumerate(body):
        graph_with = _graph_with(stmt, qualname)
        if graph_with is None:
            continue
        with_node, graph_call = graph_with
        result = _match_graph(body, w_index, with_node, graph_call, func, qualname, forwards)
        if isinstance(result, str):
            plan.reasons[id(graph_call)] = result
        else:
            candidates.append((with_node, graph_call, result))
    uses = Counter(i for _, _, b in candidates for i in _statements(b))
    found: list[Builder] = []
    for with_node, graph_call, b in candidates:
        if any(uses[i] > 1 for i in _statements(b)):  # (one model, two graphs: a person picks the compile)
            plan.reasons[id(graph_call)] = f"`{b.model}` is built and loaded for another Graph too"
            continue
        plan.handled.update({id(graph_call), id(with_node)})
        found.append(b)
    return found


def _statements(b: Builder) -> list[int]:
    """The body indices the builder rewrites besides its ``with Graph``."""
    return [i for i in (b.construct, b.load, b.registry) if i >= 0]


def _match_graph(
    body: list[cst.BaseStatement],
    w_index: int,
    with_node: cst.With,
    graph_call: cst.Call,
    func: cst.FunctionDef,
    qualname: Qualname,
    forwards: dict[str, int | None],
) -> Builder | str:
    """The builder around ``with Graph(...)``, or the reason it is not the pattern."""
    asname = with_node.items[0].asname
    if asname is None or not isinstance(asname.name, cst.Name):
        return "the Graph is not bound with `as g`"
    graph = asname.name.value
    options = [a.keyword.value for a in graph_call.args if a.keyword is not None and a.keyword.value != "input_types"]
    if options:
        return f"Graph() takes {', '.join(options)}=, which compile() is not given"
    before = body[:w_index]
    types = _input_types(graph_call, before)
    if types is None:
        return "the Graph has no input_types"
    input_args, literal = types
    model_call = _output_call(with_node, graph)
    if model_call is None:
        return "the Graph body is more than g.output(model(g.inputs[i]...))"
    if not isinstance(model_call.func, cst.Name):
        return "g.output() does not call a local model"
    model = model_call.func.value
    if not _takes_all_inputs(model_call, graph) and (
        literal is None or not _inputs_in_order(model_call, graph, len(literal))
    ):
        return "the model is not called with g.inputs[0..n-1] in order"
    construct = load = registry = -1
    registry_name: str | None = None
    weights: cst.BaseExpression | None = None
    ctor: cst.Call | None = None
    for i, stmt in enumerate(before):
        assigned = _assign_call(stmt)
        if assigned is not None and assigned[0] == model:
            construct, ctor, load, registry = i, assigned[1], -1, -1
        loaded = _method_call(getattr(_expr_stmt(stmt), "value", None), "load_state_dict")
        if loaded is not None and loaded[0] == model and construct >= 0:
            weights = _loaded_weights(loaded[1])
            if weights is None:
                return "load_state_dict() takes options that compile() has no slot for"
            load, registry = i, -1
        kept = _registry(stmt, model)
        if kept is not None and load >= 0:
            registry, registry_name = i, kept
    if ctor is None or construct < 0:
        return f"`{model}` is not constructed in this function"
    if load < 0 or weights is None:
        return f"`{model}.load_state_dict(...)` is not called before the Graph"
    ctor_name = ctor.func.value if isinstance(ctor.func, cst.Name) else None
    return Builder(
        model=model,
        weights=weights,
        input_args=input_args,
        graph=graph,
        construct=construct,
        load=load,
        with_graph=w_index,
        dtype=(dtype := _dtype_arg(ctor, func, qualname)),
        device=_device(before, literal, func, qualname),
        outputs=forwards.get(ctor_name or "", None),
        registry=registry,
        registry_name=registry_name if registry >= 0 else None,
        with_id=id(with_node),
        call_id=id(graph_call),
        config=_config_arg(ctor) if dtype is None else None,
    )


#: keywords of V2's ``Module.load_state_dict`` that V3's lacks → why dropping them is right
#: (``tests/test_knowledge.py`` checks both signatures)
V2_LOAD_KEYWORDS = {
    "weight_alignment": "V3 loads take no alignment",
    "override_quantization_encoding": "V3 loads copy each tensor into its parameter as the layer declares it",
}


def _loaded_weights(call: cst.Call) -> cst.BaseExpression | None:
    """``m.load_state_dict(sd[, strict=True][, weight_alignment=...])`` → ``sd``: what
    ``compile(weights=...)`` takes. ``strict=True`` is V2's default, and V3's compile raises on
    a parameter with no weight too; ``strict=False`` (a partial checkpoint) has no such slot."""
    args = call.args
    if not args or args[0].keyword is not None or args[0].star:
        return None
    for arg in args[1:]:
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword == "strict" and isinstance(arg.value, cst.Name) and arg.value.value == "True":
            continue
        if keyword not in V2_LOAD_KEYWORDS:
            return None
    return args[0].value


def _registry(stmt: cst.BaseStatement, model: str) -> str | None:
    """``r = model.state_dict()`` → ``r``'s source (a name or ``self.attr``), kept for ``weights_registry=r``."""
    small = _expr_stmt(stmt)
    if not isinstance(small, cst.Assign) or len(small.targets) != 1:
        return None
    target = small.targets[0].target
    called = _method_call(small.value, "state_dict")
    if called is None or called[0] != model or called[1].args or not isinstance(target, cst.Name | cst.Attribute):
        return None
    return source(target)


def _output_call(with_node: cst.With, graph: str) -> cst.Call | None:
    """The model call whose result the Graph outputs: ``g.output(m(...))``, ``g.output(*m(...))``, or
    ``out = m(...)`` then ``g.output(out)`` / ``g.output(*out)`` / both under ``isinstance(out, tuple)``."""
    if not isinstance(with_node.body, cst.IndentedBlock):
        return None
    stmts = list(with_node.body.body)
    if len(stmts) == 1:
        args = _output_args(stmts[0], graph)
        if args is not None and len(args) == 1 and isinstance(args[0].value, cst.Call):
            return args[0].value
        return None
    assigned = _assign_call(stmts[0]) if len(stmts) == 2 else None
    if assigned is None:
        return None
    name, call = assigned
    last = stmts[1]
    if isinstance(last, cst.If) and _is_tuple_test(last.test, name) and isinstance(last.orelse, cst.Else):
        branches = [last.body, last.orelse.body]
        outs = [_output_args(b.body[0], graph) if isinstance(b, cst.IndentedBlock) and len(b.body) == 1 else None
                for b in branches]
        stars = [o[0].star if o is not None and len(o) == 1 and _is_name(o[0].value, name) else None for o in outs]
        return call if stars == ["*", ""] else None
    out = _output_args(last, graph)
    return call if out is not None and len(out) == 1 and _is_name(out[0].value, name) else None


def _output_args(stmt: cst.BaseStatement, graph: str) -> list[cst.Arg] | None:
    out = _method_call(getattr(_expr_stmt(stmt), "value", None), "output")
    return list(out[1].args) if out is not None and out[0] == graph else None


def _is_name(node: cst.BaseExpression, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _is_tuple_test(test: cst.BaseExpression, name: str) -> bool:
    """``isinstance(name, tuple)``."""
    return (
        isinstance(test, cst.Call) and _is_name(test.func, "isinstance") and len(test.args) == 2
        and _is_name(test.args[0].value, name) and _is_name(test.args[1].value, "tuple")
    )


def _input_types(
    call: cst.Call, before: list[cst.BaseStatement]
) -> tuple[list[str], list[cst.BaseExpression] | None] | None:
    """(``compile``'s positional arguments, the literal list of types or None), or None without
    input types. A name bound to a literal list it is the last statement to touch counts as one."""
    arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == "input_types"), None)
    if arg is None and len(call.args) > 1 and call.args[1].keyword is None:
        arg = call.args[1]
    if arg is None:
        return None
    value = arg.value
    if isinstance(value, cst.List | cst.Tuple):
        texts = [("*" if isinstance(e, cst.StarredElement) else "") + source(e.value) for e in value.elements]
        literal: cst.List | cst.Tuple | None = value
    else:
        texts = [f"*{source(value)}"]
        literal = _bound_literal(value, before)
    if literal is None or any(isinstance(e, cst.StarredElement) for e in literal.elements):
        return texts, None
    return texts, [e.value for e in literal.elements]


def _bound_literal(value: cst.BaseExpression, before: list[cst.BaseStatement]) -> cst.List | cst.Tuple | None:
    """The literal list ``value`` (a name) was last bound to, when no later statement mentions it."""
    if not isinstance(value, cst.Name):
        return None
    for stmt in reversed(before):
        small = _expr_stmt(stmt)
        if (isinstance(small, cst.Assign) and len(small.targets) == 1 and _is_name(small.targets[0].target, value.value)
                and isinstance(small.value, cst.List | cst.Tuple)):
            return small.value
        if any(_is_name(n, value.value) for n in nodes_of(stmt, (cst.Name,))):  # type: ignore[arg-type]
            return None
    return None


def _takes_all_inputs(call: cst.Call, graph: str) -> bool:
    """``m(*g.inputs)`` or ``m(*(v.tensor for v in g.inputs))``: every input, in order."""
    if len(call.args) != 1 or call.args[0].star != "*" or call.args[0].keyword is not None:
        return False
    value = call.args[0].value
    if _is_inputs(value, graph):
        return True
    if not isinstance(value, cst.GeneratorExp | cst.ListComp):
        return False
    loop = value.for_in
    if loop.inner_for_in is not None or loop.ifs or not isinstance(loop.target, cst.Name) or not _is_inputs(loop.iter, graph):
        return False
    element = value.elt
    if isinstance(element, cst.Attribute) and element.attr.value in ("tensor", "buffer"):
        element = element.value
    return _is_name(element, loop.target.value)


def _is_inputs(node: cst.BaseExpression, graph: str) -> bool:
    return isinstance(node, cst.Attribute) and _is_name(node.value, graph) and node.attr.value == "inputs"


def _inputs_in_order(call: cst.Call, graph: str, n: int) -> bool:
    if len(call.args) != n:
        return False
    for i, arg in enumerate(call.args):
        value = arg.value
        if arg.keyword is not None or arg.star:
            return False
        if isinstance(value, cst.Attribute) and value.attr.value in ("tensor", "buffer"):
            value = value.value
        if not (
            isinstance(value, cst.Subscript)
            and _is_inputs(value.value, graph)
            and len(value.slice) == 1
            and isinstance(value.slice[0].slice, cst.Index)
            and isinstance(value.slice[0].slice.value, cst.Integer)
            and value.slice[0].slice.value.evaluated_value == i
        ):
            return False
    return True


def _param_annotation(func: cst.FunctionDef, name: str) -> cst.BaseExpression | None:
    for param in (*func.params.posonly_params, *func.params.params, *func.params.kwonly_params):
        if param.name.value == name and param.annotation is not None:
            return param.annotation.annotation
    return None


def _dtype_arg(ctor: cst.Call, func: cst.FunctionDef, qualname: Qualname) -> cst.BaseExpression | None:
    """The constructor's dtype argument: ``DType.x``, a parameter annotated ``DType`` or ``dtype=...``."""
    for arg in ctor.args:
        value = arg.value
        if isinstance(value, cst.Attribute) and qualname(value.value) in _DTYPE:
            return value
        if isinstance(value, cst.Name):
            ann = _param_annotation(func, value.value)
            if ann is not None and qualname(ann) in _DTYPE:
                return value
        if arg.keyword is not None and arg.keyword.value == "dtype":
            return value
    return None


def _config_arg(ctor: cst.Call) -> cst.BaseExpression | None:
    """``X(config)``, ``X(self.config, ...)``: the first positional argument when it names a value
    (a config, whose ``dtype`` V2's layers were built in, dropped with their ``dtype=`` in V3)."""
    first = ctor.args[0] if ctor.args else None
    if first is None or first.keyword is not None or first.star:
        return None
    return first.value if isinstance(first.value, cst.Name | cst.Attribute) else None


def _device(
    before: list[cst.BaseStatement], types: list[cst.BaseExpression] | None, func: cst.FunctionDef, qualname: Qualname
) -> cst.BaseExpression | None:
    """``dev.to_device()`` when every input type is a TensorType on the same DeviceRef ``dev``
    (a parameter annotated ``DeviceRef``, a ``DeviceRef.x(...)`` call or a local bound to one)."""
    if types is None:
        return None
    calls: list[cst.Call] = []
    bound = {a[0]: a[1] for a in (_assign_call(s) for s in before) if a is not None}
    for t in types:
        call = bound.get(t.value) if isinstance(t, cst.Name) else t
        if not isinstance(call, cst.Call) or qualname(call.func) not in _TENSOR_TYPE:
            return None
        calls.append(call)
    devices = {source(a.value) for c in calls for a in c.args if a.keyword and a.keyword.value == "device"}
    if len(devices) != 1 or any(not any(a.keyword and a.keyword.value == "device" for a in c.args) for c in calls):
        return None
    dev = next(a.value for a in calls[0].args if a.keyword and a.keyword.value == "device")
    made = bound.get(dev.value) if isinstance(dev, cst.Name) else dev
    if isinstance(dev, cst.Name) and made is None:
        ann = _param_annotation(func, dev.value)
        is_ref = ann is not None and qualname(ann) in _DEVICE_REF
    else:
        is_ref = isinstance(made, cst.Call) and isinstance(made.func, cst.Attribute) and qualname(made.func.value) in _DEVICE_REF
    if not is_ref:
        return None
    return cst.Call(func=cst.Attribute(value=dev, attr=cst.Name("to_device")))


def _returned(func: cst.FunctionDef, builder: Builder) -> tuple[int, int, int | None] | None:
    """(graph position or -1, model position or -1, outputs) of the builder's return statement."""
    assert isinstance(func.body, cst.IndentedBlock)
    last = _expr_stmt(func.body.body[-1])
    if not isinstance(last, cst.Return) or last.value is None:
        return None
    value = last.value
    names = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
    texts = [n.value if isinstance(n, cst.Name) else None for n in names]
    if builder.graph not in texts:
        return None
    single = not isinstance(value, cst.Tuple)
    graph_pos = -1 if single else texts.index(builder.graph)
    model_pos = texts.index(builder.model) if builder.model in texts and not single else -2
    return graph_pos, model_pos, builder.outputs


#: graph name → (model name, outputs, the name ``model.state_dict()`` was kept in)
_Graphs = dict[str, tuple[str | None, int | None, str | None]]


def _match_consumers(
    func: cst.FunctionDef, plan: GraphPlan, exported: dict[str, tuple[int, int, int | None]]
) -> None:
    """``session.load(g, weights_registry=m.state_dict())`` and ``c.execute(...)[i]`` in ``func``.

    A load bound to a plain name is the compiled model itself (its ``execute`` calls here are
    rewritten); one stored in an attribute or an annotated name is read elsewhere as V2's
    engine ``Model`` (``execute(*buffers)``), so it gets the compiled graph's ``engine_model``.
    """
    if not isinstance(func.body, cst.IndentedBlock):
        return
    graphs: _Graphs = {}
    starts = {b.with_graph: b for b in plan.builders.get(id(func.body), ())}
    owners: dict[str, Builder] = {}
    compiled: dict[str, int | None] = {}
    for i, stmt in enumerate(func.body.body):
        if i in starts:
            b = owners[starts[i].graph] = starts[i]
            graphs[b.graph] = (b.model, b.outputs, b.registry_name)
        _unpack_builder_call(stmt, exported, graphs)
        small = _expr_stmt(stmt)
        target = _single_target(small)
        value = getattr(small, "value", None)
        if target is not None and isinstance(value, cst.Call):
            load = _session_load(value, graphs)
            if load is not None:
                plan.handled.update({id(value), id(value.args[1].value)})
                owner = owners.get(load[0])
                if owner is not None:
                    owner.loads.append(id(value))
                    owner.uses.add(id(value.args[0].value))
                if isinstance(small, cst.Assign) and isinstance(target, cst.Name):
                    plan.loads[id(value)] = load[0]
                    compiled[target.value] = load[1]
                else:
                    plan.loads[id(value)] = f"{load[0]}.engine_model"
                continue
        if compiled:
            _executes(stmt, compiled, plan)


def _single_target(small: cst.BaseSmallStatement | None) -> cst.BaseExpression | None:
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        return small.targets[0].target
    if isinstance(small, cst.AnnAssign) and small.value is not None:
        return small.target
    return None


def _unpack_builder_call(stmt: cst.BaseStatement, exported: dict[str, tuple[int, int, int | None]], graphs: _Graphs) -> None:
    small = _expr_stmt(stmt)
    if not isinstance(small, cst.Assign) or len(small.targets) != 1 or not isinstance(small.value, cst.Call):
        return
    func = small.value.func
    if not isinstance(func, cst.Name) or func.value not in exported:
        return
    graph_pos, model_pos, outputs = exported[func.value]
    target = small.targets[0].target
    if graph_pos == -1 and isinstance(target, cst.Name):
        graphs[target.value] = (None, outputs, None)
    elif isinstance(target, cst.Tuple) and all(isinstance(e.value, cst.Name) for e in target.elements):
        names = [e.value.value for e in target.elements]  # type: ignore[attr-defined]
        if 0 <= graph_pos < len(names):
            model = names[model_pos] if 0 <= model_pos < len(names) else None
            graphs[names[graph_pos]] = (model, outputs, None)


def _session_load(call: cst.Call, graphs: _Graphs) -> tuple[str, int | None] | None:
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "load" and len(call.args) == 2):
        return None
    first, second = call.args
    if first.keyword is not None or not isinstance(first.value, cst.Name) or first.value.value not in graphs:
        return None
    model, outputs, kept = graphs[first.value.value]
    if second.keyword is None or second.keyword.value != "weights_registry":
        return None
    registry = _method_call(second.value, "state_dict")
    if registry is not None:
        if registry[0] != model or registry[1].args:
            return None
    elif kept is None or not isinstance(second.value, cst.Name | cst.Attribute) or source(second.value) != kept:
        return None
    return first.value.value, outputs


def _executes(stmt: cst.BaseStatement, compiled: dict[str, int | None], plan: GraphPlan) -> None:
    """Plan ``return c.execute(...)[i]`` / ``x = c.execute(...)``; any other use gets a TODO."""
    small = _expr_stmt(stmt)
    value = small.value if isinstance(small, cst.Return | cst.Assign) else None
    index: int | None = None
    call = value
    if isinstance(value, cst.Subscript) and len(value.slice) == 1 and isinstance(value.slice[0].slice, cst.Index):
        literal = value.slice[0].slice.value
        if isinstance(literal, cst.Integer):
            index, call = literal.evaluated_value, value.value
    found = _method_call(call, "execute")
    if found is not None and found[0] in compiled and isinstance(value, cst.BaseExpression):
        outputs = compiled[found[0]]
        if outputs is not None and (index is None or 0 <= index < outputs):
            plan.executes[id(value)] = (index, outputs)
            plan.handled.add(id(found[1]))
            return

    for node in nodes_of(stmt, (cst.Call,)):
        hit = _method_call(node, "execute")  # type: ignore[arg-type]
        if hit is not None and hit[0] in compiled:
            plan.unknown_executes.add(id(node))
