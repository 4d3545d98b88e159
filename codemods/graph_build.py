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
"""

from __future__ import annotations

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
    input_types: list[cst.BaseExpression]
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


@dataclass
class Compiled:
    """A name bound to a compiled model: how many outputs it returns."""

    outputs: int | None


@dataclass
class GraphPlan:
    """What ``graph_compile`` rewrites in one module (keys: ids of original nodes)."""

    #: IndentedBlock id → the builder in that body
    builders: dict[int, Builder] = field(default_factory=dict)
    #: FunctionDef id → True when its return annotation's ``Graph`` becomes CompiledCallable
    returns_compiled: set[int] = field(default_factory=set)
    #: ``session.load(g, weights_registry=m.state_dict())`` Call id → the graph name
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
        builder = _match_builder(func, qualname, forwards, plan)
        if builder is None or not isinstance(func.body, cst.IndentedBlock):
            continue
        plan.builders[id(func.body)] = builder
        ret = _returned(func, builder)
        if ret is not None:
            exported[func.name.value] = ret
            if func.returns is not None and _mentions(func.returns.annotation, qualname, GRAPH):
                plan.returns_compiled.add(id(func))
    for func in functions:
        _match_consumers(func, plan, exported)
    return plan


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


def _match_builder(
    func: cst.FunctionDef, qualname: Qualname, forwards: dict[str, int | None], plan: GraphPlan
) -> Builder | None:
    if not isinstance(func.body, cst.IndentedBlock):
        return None
    body = list(func.body.body)
    for w_index, stmt in enumerate(body):
        found = _graph_with(stmt, qualname)
        if found is None:
            continue
        with_node, graph_call = found
        result = _match_graph(body, w_index, with_node, graph_call, func, qualname, forwards)
        if isinstance(result, str):
            plan.reasons[id(graph_call)] = result
            continue
        plan.handled.update({id(graph_call), id(with_node)})
        return result
    return None


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
    types = _input_types(graph_call)
    if types is None:
        return "input_types is not a literal list"
    if not isinstance(with_node.body, cst.IndentedBlock) or len(with_node.body.body) != 1:
        return "the Graph body is more than g.output(model(g.inputs[i]...))"
    out = _method_call(getattr(_expr_stmt(with_node.body.body[0]), "value", None), "output")
    if out is None or out[0] != graph or len(out[1].args) != 1:
        return "the Graph body is more than g.output(model(g.inputs[i]...))"
    model_call = out[1].args[0].value
    if not isinstance(model_call, cst.Call) or not isinstance(model_call.func, cst.Name):
        return "g.output() does not call a local model"
    model = model_call.func.value
    if not _inputs_in_order(model_call, graph, len(types)):
        return "the model is not called with g.inputs[0..n-1] in order"
    construct = load = -1
    weights: cst.BaseExpression | None = None
    ctor: cst.Call | None = None
    for i, stmt in enumerate(body[:w_index]):
        assigned = _assign_call(stmt)
        if assigned is not None and assigned[0] == model:
            construct, ctor, load = i, assigned[1], -1
        loaded = _method_call(getattr(_expr_stmt(stmt), "value", None), "load_state_dict")
        if loaded is not None and loaded[0] == model and construct >= 0:
            args = loaded[1].args
            if len(args) != 1 or args[0].keyword is not None or args[0].star:
                return "load_state_dict() takes options that compile() has no slot for"
            load, weights = i, args[0].value
    if ctor is None or construct < 0:
        return f"`{model}` is not constructed in this function"
    if load < 0 or weights is None:
        return f"`{model}.load_state_dict(...)` is not called before the Graph"
    ctor_name = ctor.func.value if isinstance(ctor.func, cst.Name) else None
    return Builder(
        model=model,
        weights=weights,
        input_types=types,
        graph=graph,
        construct=construct,
        load=load,
        with_graph=w_index,
        dtype=_dtype_arg(ctor, func, qualname),
        device=_device(body[:w_index], types, func, qualname),
        outputs=forwards.get(ctor_name or "", None),
    )


def _input_types(call: cst.Call) -> list[cst.BaseExpression] | None:
    arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == "input_types"), None)
    if arg is None and len(call.args) > 1 and call.args[1].keyword is None:
        arg = call.args[1]
    if arg is None or not isinstance(arg.value, cst.List | cst.Tuple):
        return None
    if any(isinstance(e, cst.StarredElement) for e in arg.value.elements):
        return None
    return [e.value for e in arg.value.elements]


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
            and isinstance(value.value, cst.Attribute)
            and isinstance(value.value.value, cst.Name)
            and value.value.value.value == graph
            and value.value.attr.value == "inputs"
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
    """The constructor's dtype argument: ``DType.x`` or a parameter annotated ``DType``."""
    for arg in ctor.args:
        value = arg.value
        if isinstance(value, cst.Attribute) and qualname(value.value) in _DTYPE:
            return value
        if isinstance(value, cst.Name):
            ann = _param_annotation(func, value.value)
            if ann is not None and qualname(ann) in _DTYPE:
                return value
    return None


def _device(
    before: list[cst.BaseStatement], types: list[cst.BaseExpression], func: cst.FunctionDef, qualname: Qualname
) -> cst.BaseExpression | None:
    """``dev.to_device()`` when every input type is a TensorType on the same DeviceRef ``dev``."""
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
    if isinstance(dev, cst.Name):
        ann = _param_annotation(func, dev.value)
        is_ref = ann is not None and qualname(ann) in _DEVICE_REF
    else:
        is_ref = isinstance(dev, cst.Call) and isinstance(dev.func, cst.Attribute) and qualname(dev.func.value) in _DEVICE_REF
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


def _match_consumers(
    func: cst.FunctionDef, plan: GraphPlan, exported: dict[str, tuple[int, int, int | None]]
) -> None:
    """``session.load(g, weights_registry=m.state_dict())`` and ``c.execute(...)[i]`` in ``func``."""
    if not isinstance(func.body, cst.IndentedBlock):
        return
    graphs: dict[str, tuple[str | None, int | None]] = {}  # graph name → (model name, outputs)
    builder = plan.builders.get(id(func.body))
    if builder is not None:
        graphs[builder.graph] = (builder.model, builder.outputs)
    compiled: dict[str, int | None] = {}
    for stmt in func.body.body:
        _unpack_builder_call(stmt, exported, graphs)
        assigned = _assign_call(stmt)
        if assigned is not None:
            load = _session_load(assigned[1], graphs)
            if load is not None:
                plan.loads[id(assigned[1])] = load[0]
                plan.handled.update({id(assigned[1]), id(assigned[1].args[1].value)})
                compiled[assigned[0]] = load[1]
                continue
        if compiled:
            _executes(stmt, compiled, plan)


def _unpack_builder_call(
    stmt: cst.BaseStatement, exported: dict[str, tuple[int, int, int | None]], graphs: dict[str, tuple[str | None, int | None]]
) -> None:
    small = _expr_stmt(stmt)
    if not isinstance(small, cst.Assign) or len(small.targets) != 1 or not isinstance(small.value, cst.Call):
        return
    func = small.value.func
    if not isinstance(func, cst.Name) or func.value not in exported:
        return
    graph_pos, model_pos, outputs = exported[func.value]
    target = small.targets[0].target
    if graph_pos == -1 and isinstance(target, cst.Name):
        graphs[target.value] = (None, outputs)
    elif isinstance(target, cst.Tuple) and all(isinstance(e.value, cst.Name) for e in target.elements):
        names = [e.value.value for e in target.elements]  # type: ignore[attr-defined]
        if 0 <= graph_pos < len(names):
            model = names[model_pos] if 0 <= model_pos < len(names) else None
            graphs[names[graph_pos]] = (model, outputs)


def _session_load(call: cst.Call, graphs: dict[str, tuple[str | None, int | None]]) -> tuple[str, int | None] | None:
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "load" and len(call.args) == 2):
        return None
    first, second = call.args
    if first.keyword is not None or not isinstance(first.value, cst.Name) or first.value.value not in graphs:
        return None
    model, outputs = graphs[first.value.value]
    registry = _method_call(second.value, "state_dict")
    if second.keyword is None or second.keyword.value != "weights_registry" or registry is None:
        return None
    if registry[0] != model or registry[1].args:
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
