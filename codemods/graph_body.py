"""MV383, for a V2 pipeline model that builds its graph by hand: ``_build_graph_for_compile``.

A V2 ``GraphPipelineModelWithKVCache`` builds the root, loads its weights and
opens ``with Graph(name, input_types=T) as g:`` whose body turns the flat
``g.inputs`` into what the root's ``__call__`` takes (unpacks them, unflattens
the KV cache, reorders) and calls the root. The ModuleV3 base instead calls
``_instantiate_module`` under ``F.lazy()`` and compiles what it returns with
``_get_compile_input_types``, so the root's ``forward`` must take those flat
inputs itself. The official ports wrap the root in a module that does it
(``llama3_modulev3.Llama3``); a wrapper prefixes every weight name, so here the
graph body becomes the ``forward`` of a subclass of the root instead (weight
names unchanged):

* ``<Root>FlatInputs(Root)``: ``__init__(pipeline_model, *args, **kwargs)``
  keeps the pipeline model, ``forward(self, *inputs)`` is the graph body with
  ``g.inputs`` → ``inputs``, ``root(...)`` → ``super().forward(...)``,
  ``root.x`` → ``self.x``, the pipeline's ``self.x`` → ``self.pipeline_model.x``,
  ``v.tensor`` of a graph value → ``v`` and ``g.output(...)`` → ``return ...``;
* ``_instantiate_module(self, cfg)``: the statements before the graph that are
  not about weights, the root built as its subclass, its input types ``T`` kept
  for ``_get_compile_input_types``, ``root.to(self.devices[0])``;
* the weights: ``root.load_state_dict(sd)`` / ``w = root.state_dict()`` go
  (the V3 base compiles with the state dict); ``x = f(sd)`` loaded instead of
  ``sd`` becomes ``_prepare_state_dict``; any other weight statement is named
  in a TODO (the V3 base binds only what the state dict holds).

The method is left alone (with its MV380 TODOs) unless all of it has that
shape: one top-level ``with Graph``, the root a plain call, the body reading
no local of the method but the root and simple ``x = self...`` values.

A method that only picks a builder of the class by the number of devices
(``if len(self.devices) > 1: return self._tp_graph(...)`` then ``return
self._single_graph(...)``) is read as the one-device builder inlined
(:func:`dispatched`): V3 runs one module on a device mesh, so the per-device
graph V2 built for several devices is named in a TODO, not migrated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import libcst as cst

from codemods.args import is_docstring, source
from codemods.args import small_statement as _small
from codemods.base import TODO_PREFIX, nodes_of, todo_comments
from migrate_v3.knowledge.ops import GRAPH_VALUE

METHOD = "_build_graph_for_compile"
#: attributes whose use marks a statement as weight handling
_WEIGHT_ATTRS = frozenset({"load_state_dict", "state_dict", "raw_state_dict"})


@dataclass
class GraphBody:
    """What one ``_build_graph_for_compile`` becomes."""

    instantiate: cst.FunctionDef
    #: the class defined before the pipeline model: the root taking the flat inputs
    subclass: cst.ClassDef
    prepare: cst.FunctionDef | None = None
    todos: list[str] = field(default_factory=list)
    #: rule codes of the graph body's TODOs that the move made untrue (``.tensor``, unflatten in forward)
    resolved: set[str] = field(default_factory=set)


class _Names(cst.CSTVisitor):
    """The variable names an expression or statement mentions (not attribute or keyword names)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False


def _names(node: cst.CSTNode) -> set[str]:
    visitor = _Names()
    node.visit(visitor)
    return visitor.names


def _bound(target: cst.BaseExpression) -> set[str]:
    """The names an assignment target binds (``a``, ``a, *b``; not ``a.x`` or ``a[i]``)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, cst.Tuple | cst.List):
        return {n for e in target.elements for n in _bound(e.value)}
    if isinstance(target, cst.StarredElement):
        return _bound(target.value)
    return set()


def _assigned(stmt: cst.CSTNode) -> set[str]:
    """Names a statement binds (assignment, ``for``, ``with ... as``, ``:=``)."""
    out: set[str] = set()
    for node in nodes_of(stmt, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.AsName, cst.NamedExpr)):
        if isinstance(node, cst.AsName):
            out |= _bound(node.name) if isinstance(node.name, cst.BaseExpression) else set()
        elif isinstance(node, cst.AssignTarget | cst.AnnAssign | cst.AugAssign | cst.For | cst.NamedExpr):
            out |= _bound(node.target)
    return out


def _uses_weights(stmt: cst.CSTNode, weight_names: set[str]) -> bool:
    if _names(stmt) & weight_names:
        return True
    return any(isinstance(a, cst.Attribute) and a.attr.value in _WEIGHT_ATTRS for a in nodes_of(stmt, (cst.Attribute,)))


def _graph_with(stmt: cst.CSTNode) -> tuple[str, cst.BaseExpression] | None:
    """``with Graph(name, input_types=T) as g:`` → (g, T)."""
    if not (isinstance(stmt, cst.With) and len(stmt.items) == 1 and isinstance(stmt.body, cst.IndentedBlock)):
        return None
    item = stmt.items[0]
    call = item.item
    if not (isinstance(call, cst.Call) and source(call.func).split(".")[-1] == "Graph"):
        return None
    if item.asname is None or not isinstance(item.asname.name, cst.Name):
        return None
    types = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "input_types"), None)
    if types is None and len(call.args) > 1 and call.args[1].keyword is None:
        types = call.args[1].value
    return (item.asname.name.value, types) if types is not None else None


def _returns_graph(stmt: cst.CSTNode, graph: str) -> bool:
    """``return g, weights``."""
    small = _small(stmt)
    return (
        isinstance(small, cst.Return) and isinstance(small.value, cst.Tuple) and len(small.value.elements) == 2
        and source(small.value.elements[0].value) == graph
    )


def _root(stmt: cst.CSTNode) -> tuple[str, cst.Call] | None:
    """``r = Root(...)`` / ``r: T = Root(...)`` with ``Root`` a plain name → (r, the call)."""
    small = _small(stmt)
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target, value = small.targets[0].target, small.value
    elif isinstance(small, cst.AnnAssign) and small.value is not None:
        target, value = small.target, small.value
    else:
        return None
    if isinstance(target, cst.Name) and isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
        return target.value, value
    return None


class _ToForward(cst.CSTTransformer):
    """The graph body as the subclass's ``forward`` (see the module docstring)."""

    def __init__(self, graph: str, root: str, inputs: str, values: set[str]) -> None:
        super().__init__()
        self.graph, self.root, self.inputs, self.values = graph, root, inputs, values

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        base = updated.value
        if isinstance(base, cst.Name):
            if base.value == self.graph and updated.attr.value == "inputs":
                return cst.Name(self.inputs)
            if base.value == "self":
                return updated.with_changes(value=cst.parse_expression("self.pipeline_model"))
            if base.value == self.root:
                return updated.with_changes(value=cst.Name("self"))
        if updated.attr.value == "tensor" and (
            (isinstance(base, cst.Name) and base.value in self.values)
            or (isinstance(base, cst.Call) and source(base.func) == "next")
        ):
            return base  # a graph input is a Tensor already
        if updated.attr.value == "buffer" and isinstance(base, cst.Call) and source(base.func) == "next":
            return updated.with_changes(attr=cst.Name(GRAPH_VALUE))  # a buffer input: a Tensor holding its BufferValue
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if isinstance(updated.func, cst.Name) and updated.func.value == self.root:
            return updated.with_changes(func=cst.parse_expression("super().forward"))
        return updated

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement:
        small = _small(updated)
        call = small.value if isinstance(small, cst.Expr) else None
        if not (isinstance(call, cst.Call) and source(call.func) == f"{self.graph}.output"):
            return updated
        args = call.args
        if len(args) == 1 and args[0].star in ("*", ""):
            value: cst.BaseExpression = args[0].value
        else:
            value = cst.Tuple([cst.Element(a.value) if not a.star else cst.StarredElement(a.value) for a in args])
        return updated.with_changes(body=[cst.Return(value=value)])


@dataclass
class _Shape:
    """The parts of a recognised ``_build_graph_for_compile``."""

    graph: str
    types: cst.BaseExpression
    #: the ``with Graph`` body up to ``g.output(...)``, and the statements before the ``with``
    body: list[cst.BaseStatement]
    prelude: list[cst.BaseStatement]
    #: ``root = RootClass(...)``: the local, the class and the call
    root: str
    root_cls: str
    ctor: cst.Call


def _shape(stmts: list[cst.BaseStatement]) -> _Shape | None:
    """One top-level ``with Graph(...) as g:`` that ends in ``g.output(...)``, nothing after it but
    ``return g, w``, and a root built before it by a plain call that the body calls."""
    at = next((i for i, s in enumerate(stmts) if _graph_with(s) is not None), None)
    if at is None:
        return None
    with_stmt, (graph, types) = stmts[at], cast(tuple[str, cst.BaseExpression], _graph_with(stmts[at]))
    if not isinstance(with_stmt, cst.With) or not isinstance(with_stmt.body, cst.IndentedBlock):
        return None
    if any(not _returns_graph(s, graph) for s in stmts[at + 1:]):
        return None
    body = list(with_stmt.body.body)
    if body and _returns_graph(body[-1], graph):
        body = body[:-1]
    last = _small(body[-1]) if body else None
    if not (isinstance(last, cst.Expr) and isinstance(last.value, cst.Call) and source(last.value.func) == f"{graph}.output"):
        return None
    prelude = stmts[:at]
    called = {c.func.value for c in nodes_of(with_stmt.body, (cst.Call,)) if isinstance(c, cst.Call) and isinstance(c.func, cst.Name)}
    roots = [r for r in map(_root, prelude) if r is not None and r[0] in called]
    if not roots:
        return None
    root, ctor = roots[0]
    assert isinstance(ctor.func, cst.Name)
    return _Shape(graph, types, body, prelude, root, ctor.func.value, ctor)


def graph_body(func: cst.FunctionDef, pipeline: str, taken: set[str], any_: str) -> GraphBody | None:
    """``func`` (a pipeline model's ``_build_graph_for_compile``) rewritten, or None (left alone);
    ``taken``: the names the module already binds."""
    params = [p.name.value for p in func.params.params]
    if len(params) != 4 or params[0] != "self" or not isinstance(func.body, cst.IndentedBlock):
        return None
    _, session, state, cfg = params
    shape = _shape(list(func.body.body))
    if shape is None:
        return None
    # the prelude: weight statements go, the rest builds the module
    weight_names = {state}
    weights: list[cst.BaseStatement] = []
    kept: list[cst.BaseStatement] = []
    for stmt in shape.prelude:
        small = _small(stmt)
        if isinstance(small, cst.Del) and source(small.target) == session:
            continue
        if _uses_weights(stmt, weight_names):
            weights.append(stmt)
            weight_names |= _assigned(stmt)
            continue
        if session in _names(stmt):
            return None
        kept.append(stmt)
    if _names(shape.types) & (weight_names | {session}):
        return None
    copies = _copies(shape, kept, {session, state, cfg} | {n for s in shape.prelude for n in _assigned(s)})
    cls_name = next((n for n in (f"{shape.root_cls}FlatInputs", f"{pipeline.removesuffix('Model')}FlatInputs")
                     if n not in taken), None)
    if copies is None or cls_name is None:
        return None
    inputs = next(n for n in ("inputs", "graph_inputs_", "flat_inputs") if n not in _names(func))
    to_forward = _ToForward(shape.graph, shape.root, inputs, {n for s in shape.body for n in _assigned(s)} | {inputs})
    forward_body = [
        _without_stale_todos(cast(cst.BaseStatement, s.visit(to_forward)))
        for s in [*(c.with_changes(leading_lines=[]) for c in copies), *shape.body]
    ]
    resolved = _todo_codes(shape.body) - _todo_codes(forward_body)
    subclass = _subclass(cls_name, shape.root_cls, pipeline, inputs, forward_body, any_)
    # _instantiate_module: what built the module (a value only the graph body read is computed there now)
    rest = [s for s in kept if s not in copies]
    read_elsewhere = _names(shape.types) | {n for r in rest for n in _names(r)}
    built = [s.visit(_CtorAs(shape.ctor, cls_name)) for s in kept if s not in copies or _assigned(s) & read_elsewhere]
    root = shape.root
    tail = cst.parse_module(
        f"self._compile_input_types = tuple({source(shape.types)})\n{root}.to(self.devices[0])\nreturn {root}\n"
    ).body
    template = cst.parse_statement(f"def _instantiate_module(self, {cfg}: {any_}) -> {any_}:\n    pass\n")
    assert isinstance(template, cst.FunctionDef)
    instantiate = func.with_changes(
        name=cst.Name("_instantiate_module"),
        params=template.params,
        whitespace_before_params=template.whitespace_before_params,
        returns=template.returns,
        body=func.body.with_changes(body=[*built, *tail]),
        decorators=[d for d in func.decorators if source(d.decorator) == "override"],
    )
    prepare, todos = _weights(weights, root, state, cfg, any_)
    return GraphBody(instantiate=instantiate, subclass=subclass, prepare=prepare, todos=todos, resolved=resolved)


@dataclass
class Dispatch:
    """A ``_build_graph_for_compile`` that picks a builder by the number of devices."""

    #: the method with the one-device builder's body inlined
    inlined: cst.FunctionDef
    #: the one-device builder (inlined) and the builder(s) for several devices
    single: str
    multi: list[str]


class _Rename(cst.CSTTransformer):
    """Names (not attributes or keywords) → expressions: a builder's parameters → the call's arguments."""

    def __init__(self, names: dict[str, cst.BaseExpression]) -> None:
        super().__init__()
        self.names = names

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self.names.get(original.value, updated)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)


def _self_call(stmt: cst.CSTNode) -> cst.Call | None:
    """``return self._m(...)`` → the call."""
    small = _small(stmt)
    value = small.value if isinstance(small, cst.Return) else None
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and source(value.func.value) == "self":
        return value
    return None


def dispatched(func: cst.FunctionDef, class_body: list[cst.BaseStatement]) -> Dispatch | None:
    """``func`` as :class:`Dispatch` when its last statements are ``if <a test of the devices>:
    return self._a(...)`` and ``return self._b(...)`` (``_b`` a method of the class taking the
    arguments positionally or by name), else None."""
    if not isinstance(func.body, cst.IndentedBlock) or len(func.body.body) < 2:
        return None
    stmts = list(func.body.body)
    single, branch = _self_call(stmts[-1]), stmts[-2]
    if single is None or not isinstance(branch, cst.If) or branch.orelse is not None or "devices" not in source(branch.test):
        return None
    if not isinstance(branch.body, cst.IndentedBlock) or len(branch.body.body) != 1:
        return None
    multi = _self_call(branch.body.body[0])
    if multi is None:
        return None
    assert isinstance(single.func, cst.Attribute) and isinstance(multi.func, cst.Attribute)
    methods = {s.name.value: s for s in class_body if isinstance(s, cst.FunctionDef)}
    builder = methods.get(single.func.attr.value)
    if builder is None or not isinstance(builder.body, cst.IndentedBlock) or multi.func.attr.value not in methods:
        return None
    params = [p.name.value for p in builder.params.params][1:]
    if builder.params.star_arg is not cst.MaybeSentinel.DEFAULT or builder.params.kwonly_params or any(a.star for a in single.args):
        return None
    bound: dict[str, cst.BaseExpression] = {}
    positional = [a for a in single.args if a.keyword is None]
    if len(positional) > len(params):
        return None
    bound.update(zip(params, (a.value for a in positional), strict=False))
    bound.update({a.keyword.value: a.value for a in single.args if a.keyword is not None})
    if set(bound) != set(params):
        return None
    rename = _Rename({k: v for k, v in bound.items() if not (isinstance(v, cst.Name) and v.value == k)})
    prelude = stmts[:-2]
    inner = [cast(cst.BaseStatement, s.visit(rename)) for s in builder.body.body if not is_docstring(s)]
    # (an assert the method already made, ``assert isinstance(cfg, C)``, is not made twice)
    asserted = {source(a) for s in prelude if isinstance(a := _small(s), cst.Assert)}
    body = [*prelude, *(s for s in inner if not (isinstance(a := _small(s), cst.Assert) and source(a) in asserted))]
    return Dispatch(func.with_changes(body=func.body.with_changes(body=body)), builder.name.value, [multi.func.attr.value])


def _copies(shape: _Shape, kept: list[cst.BaseStatement], method_locals: set[str]) -> list[cst.BaseStatement] | None:
    """The statements before the graph that the graph body reads a value of (``n = len(self.devices)``),
    to compute again at the top of ``forward``; None when it reads another local of the method."""
    own = {n for s in shape.body for n in _assigned(s)}
    copies: list[cst.BaseStatement] = []
    for free in sorted((_names(cst.IndentedBlock(body=shape.body)) & method_locals) - {shape.root, shape.graph} - own):
        copy = next((s for s in kept if _assigned(s) == {free}), None)
        small = _small(copy) if copy is not None else None
        if copy is None or not (isinstance(small, cst.Assign) and isinstance(small.targets[0].target, cst.Name)):
            return None
        if _names(small.value) & (method_locals - {"self"}):
            return None
        copies.append(copy)
    return copies


#: TODO lines the move makes untrue: a graph input is a Tensor in ``forward``
_STALE = (
    f"{TODO_PREFIX}MV373 .tensor", f"{TODO_PREFIX}MV373 .buffer", f"{TODO_PREFIX}MV380 ", f"{TODO_PREFIX}MV382 ",
    f"{TODO_PREFIX}MV384 unflatten_kv_inputs: unflatten KV inputs in the root module's forward()",
)


def _todo_codes(stmts: list[cst.BaseStatement]) -> set[str]:
    return {c[len(TODO_PREFIX):].split(" ", 1)[0] for s in stmts for c in todo_comments(s) if c.startswith(TODO_PREFIX)}


def _without_stale_todos(stmt: cst.BaseStatement) -> cst.BaseStatement:
    """``stmt`` without the MV373 ``.tensor``/``.buffer`` TODO once none is left, nor the Graph/compile
    ones, nor "unflatten in the root's forward" (it is there now)."""
    lines = getattr(stmt, "leading_lines", None)
    if not lines:
        return stmt
    attrs = {a.attr.value for a in nodes_of(stmt, (cst.Attribute,)) if isinstance(a, cst.Attribute)}
    keep = [
        line for line in lines
        if line.comment is None or not line.comment.value.startswith(_STALE)
        or ("tensor" in attrs and line.comment.value.startswith(_STALE[0]))
        or ("buffer" in attrs and line.comment.value.startswith(_STALE[1]))
    ]
    return stmt.with_changes(leading_lines=keep) if len(keep) != len(lines) else stmt


class _CtorAs(cst.CSTTransformer):
    """``r = Root(args)`` → ``r = RootFlatInputs(self, args)``."""

    def __init__(self, ctor: cst.Call, cls_name: str) -> None:
        super().__init__()
        self.ctor, self.cls_name = ctor, cls_name

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if original is self.ctor:
            first = cst.Arg(cst.Name("self"), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            return updated.with_changes(func=cst.Name(self.cls_name), args=[first, *updated.args])
        return updated


def _subclass(
    cls_name: str, root_cls: str, pipeline: str, inputs: str, body: list[cst.BaseStatement], any_: str
) -> cst.ClassDef:
    code = (
        f"class {cls_name}({root_cls}):\n"
        f'    """{root_cls} called with the flat graph inputs {pipeline} compiles it with.\n\n'
        f"    ``forward`` is the graph body {pipeline}.{METHOD} had (moved here by\n"
        f"    migrate-v3): ``self.pipeline_model`` is that pipeline model, ``super().forward`` the\n"
        f'    root\'s own forward; the weight names stay {root_cls}\'s."""\n\n'
        f"    def __init__(self, pipeline_model: {any_}, *args: {any_}, **kwargs: {any_}) -> None:\n"
        f"        super().__init__(*args, **kwargs)\n"
        f"        self.pipeline_model = pipeline_model\n\n"
        f"    def forward(self, *{inputs}: {any_}) -> {any_}:  # type: ignore[override]\n"
        f"        pass\n"
    )
    cls = cst.parse_statement(code)
    assert isinstance(cls, cst.ClassDef) and isinstance(cls.body, cst.IndentedBlock)
    forward = cls.body.body[-1]
    assert isinstance(forward, cst.FunctionDef) and isinstance(forward.body, cst.IndentedBlock)
    comments = [line for line in getattr(body[0], "leading_lines", ()) if line.comment is not None]
    first = body[0].with_changes(leading_lines=comments)
    forward = forward.with_changes(body=forward.body.with_changes(body=[first, *body[1:]]))
    return cls.with_changes(body=cls.body.with_changes(body=[*cls.body.body[:-1], forward]))


def _weights(
    weights: list[cst.BaseStatement], root: str, state: str, cfg: str, any_: str
) -> tuple[cst.FunctionDef | None, list[str]]:
    """The weight statements: gone when the V3 base's compile does the same, ``_prepare_state_dict``
    when the root loads a dict computed from the state dict, a TODO naming the rest."""
    loads = [s for s in weights if isinstance(c := getattr(_small(s), "value", None), cst.Call) and source(c.func) == f"{root}.load_state_dict"]
    registry = [
        s for s in weights
        if isinstance(small := _small(s), cst.Assign) and source(small.value) == f"{root}.state_dict()"
    ]
    loaded = source(loads[0].body[0].value.args[0].value) if len(loads) == 1 and loads[0].body[0].value.args else None  # type: ignore[attr-defined]
    rest = [s for s in weights if s not in loads and s not in registry]
    # (``self`` there is the pipeline model too; a statement reading what the root gave stays out)
    available, computed = {state}, {n for s in weights for n in _assigned(s)}
    prepared = []
    for stmt in rest:
        reads = _names(stmt) - _assigned(stmt)
        if root not in reads and reads & computed <= available:
            prepared.append(stmt)
            available |= _assigned(stmt)
    prepare = None
    if loaded is not None and loaded != state and prepared and loaded in {n for s in prepared for n in _assigned(s)}:
        body = [*prepared, *cst.parse_module(f"return {loaded}\n").body]
        func = cst.parse_statement(
            f"def _prepare_state_dict(self, {state}: dict[str, {any_}], {cfg}: {any_}) -> dict[str, {any_}]:\n    pass\n"
        )
        assert isinstance(func, cst.FunctionDef) and isinstance(func.body, cst.IndentedBlock)
        first = body[0].with_changes(leading_lines=[])
        prepare = func.with_changes(body=func.body.with_changes(body=[first, *body[1:]]))
        rest = [s for s in rest if s not in prepared]
    elif loaded != state:
        rest = weights
    if not rest:
        return prepare, []
    shown = "; ".join(" ".join(source(s.with_changes(leading_lines=[])).split()) for s in rest)
    todo = (
        f"{TODO_PREFIX}MV382 V2 prepared the weights with `{shown}`: the V3 base compiles with what "
        "_prepare_state_dict returns, by the root's parameter names; make it hold every weight the root needs"
    )
    return prepare, [todo]


def insert_subclasses(module: cst.Module, subclasses: dict[str, cst.ClassDef]) -> cst.Module:
    """Each subclass right before the class (by name) it was made for."""
    body: list[cst.BaseStatement] = []
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef) and stmt.name.value in subclasses:
            new = subclasses[stmt.name.value]
            body.append(new.with_changes(leading_lines=[*stmt.leading_lines]))
            stmt = stmt.with_changes(leading_lines=[cst.EmptyLine(indent=False), cst.EmptyLine(indent=False)])
        body.append(stmt)
    return module.with_changes(body=body)


__all__ = ["METHOD", "GraphBody", "graph_body", "insert_subclasses"]
