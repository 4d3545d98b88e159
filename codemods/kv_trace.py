"""Recognise the V2 ``trace()`` override that unflattens KV inputs (llama3/olmo2 shape).

Analysis and code generation for ``codemods.kv_cache``: V2 subclasses of a
``__call__``-providing base (``Transformer``) override ``trace`` with an
inner function over flat graph Values that unflattens the KV inputs and calls
``self(...)``. V3 compiles the root module's ``forward`` over flat Tensors in
the order of ``modulev3_ragged_kv_symbolic_inputs``: ``(tokens,
return_n_logits, input_row_offsets, *kv)``. The inner function becomes that
``forward``, calling ``super().forward(...)`` (the ported base's structured
forward), so the module tree, and with it every weight name, stays as in V2.

    def trace(self, *input_types, name=None, ...):
        def forward(tokens, input_row_offsets, return_n_logits, *kv_inputs):
            kv_collections = tree.leaves(self.kv_params.unflatten_kv_inputs(iter(kv_inputs)), leaf=...)
            return self(tokens.tensor, kv_collections[0], input_row_offsets=input_row_offsets.tensor, ...)
        return Graph(name, forward, input_types=input_types, ...)
    →  def forward(self, tokens: Tensor, return_n_logits: Tensor, input_row_offsets: Tensor, *variadic_args: Tensor):
           kv_collections = tree.leaves(self.kv_params.unflatten_kv_inputs(iter(x._graph_value for x in variadic_args)), leaf=...)
           return super().forward(tokens, kv_collections[0], input_row_offsets=input_row_offsets, ...)
"""

from __future__ import annotations

import re
from typing import Any

import libcst as cst

from codemods.args import is_docstring, source
from codemods.args import small_statement as _small
from codemods.base import TODO_PREFIX, attach_todos, nodes_of
from codemods.resolve import dotted
from codemods.shard_scan import is_none, not_none, one_per_device, per_device_element

V3_ORDER = ("tokens", "return_n_logits", "input_row_offsets")
_VARIADIC = "variadic_args"




def has_own_call(body: list[cst.BaseStatement]) -> bool:
    return any(isinstance(s, cst.FunctionDef) and s.name.value in ("__call__", "forward") for s in body)


def flat_forward(trace: cst.FunctionDef, tensor: str) -> cst.FunctionDef | str:
    """The V3 root ``forward`` replacing ``trace``, or why ``trace`` is not the pattern."""
    if not isinstance(trace.body, cst.IndentedBlock):
        return "trace() has no block body"
    stmts = [s for s in trace.body.body if not is_docstring(s)]
    if len(stmts) != 2 or not isinstance(stmts[0], cst.FunctionDef):
        return "trace() is more than an inner function and `return Graph(...)`"
    inner = stmts[0]
    if not _returns_graph_of(stmts[1], inner):
        return "trace() does not return Graph(name, <inner function>, ...)"
    params = [p.name.value for p in inner.params.params]
    star = inner.params.star_arg
    if sorted(params) != sorted(V3_ORDER) or not isinstance(star, cst.Param):
        return f"the inner function's inputs are not {', '.join(V3_ORDER)}, *kv"
    kv = star.name.value
    if not isinstance(inner.body, cst.IndentedBlock) or len(inner.body.body) != 2:
        return "the inner function is more than unflatten + `return self(...)`"
    unflatten, call_stmt = inner.body.body
    unflatten_small = _small(unflatten)
    if not isinstance(unflatten_small, cst.Assign):
        return "the KV inputs are not unflattened into a variable"
    unflatten_code = source(unflatten_small)
    if "unflatten_kv_inputs(" not in unflatten_code or unflatten_code.count(f"iter({kv})") != 1:
        return "the KV inputs are not unflattened with unflatten_kv_inputs(iter(kv))"
    call = _small(call_stmt)
    if not (isinstance(call, cst.Return) and isinstance(call.value, cst.Call) and source(call.value.func) == "self"):
        return "the inner function does not `return self(...)`"
    header = ", ".join(f"{p}: {tensor}" for p in V3_ORDER)
    template = cst.parse_statement(f"def forward(self, {header}, *{_VARIADIC}: {tensor}):\n    pass\n")
    assert isinstance(template, cst.FunctionDef)
    body = [s.with_changes(leading_lines=_no_todos(s)) for s in (unflatten, call_stmt)]
    # (the flat inputs replace the structured forward it calls: the override changes the signature on purpose)
    header_comment = cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(_IGNORE_OVERRIDE))
    new = inner.with_changes(
        params=template.params,
        whitespace_before_params=cst.SimpleWhitespace(""),
        body=inner.body.with_changes(body=body, header=header_comment),
        leading_lines=_no_todos(trace),
    )
    result = new.visit(_FlatInputs(kv, set(params)))
    assert isinstance(result, cst.FunctionDef)
    return result


def _no_todos(stmt: cst.CSTNode) -> list[cst.EmptyLine]:
    """Leading lines without migrate-v3 TODOs: the rewrite resolves what they flagged."""
    lines: list[cst.EmptyLine] = list(getattr(stmt, "leading_lines", ()))
    return [line for line in lines if line.comment is None or "TODO(migrate-v3)" not in line.comment.value]


class _FlatInputs(cst.CSTTransformer):
    """``iter(kv)`` → graph values of the variadic Tensors; ``self(...)`` → ``super().forward(...)``; ``p.tensor`` → ``p``."""

    def __init__(self, kv: str, names: set[str]) -> None:
        super().__init__()
        self.kv, self.names = kv, names

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = source(updated.func)
        if func == "iter" and len(updated.args) == 1 and source(updated.args[0].value) == self.kv:
            return cst.parse_expression(f"iter(x._graph_value for x in {_VARIADIC})")
        if func == "self":
            return updated.with_changes(func=cst.parse_expression("super().forward"))
        return updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        if updated.attr.value == "tensor" and isinstance(updated.value, cst.Name) and updated.value.value in self.names:
            return updated.value
        return updated


#: what a type checker is told of a flat forward that overrides the structured one it calls
_IGNORE_OVERRIDE = "# type: ignore[override]"
#: the name the class's own structured forward gets when the flat forward takes its place
STRUCTURED = "forward_unflattened"
#: TODOs a bridged trace() resolves: graph-value unwraps, Value annotations, unflatten outside forward()
_RESOLVED = ("MV373", "MV331", "MV384", "MV382", "MV380")
_UNFLATTENERS = ("unflatten_kv_inputs", "unflatten_basic_kv_tree")


def bridged_forward(
    trace: cst.FunctionDef, body: list[cst.BaseStatement], unlisted: set[str] | None = None
) -> cst.FunctionDef | str:
    """For a class with its own ``forward``: the V3 flat ``forward`` replacing ``trace``, or why not.

    The inner function over flat graph Values becomes ``forward(self, <its inputs>)`` over Tensors
    in the same order (``input_types()`` stays right): ``.tensor`` unwraps go, ``.buffer`` and the
    KV inputs handed to ``unflatten_*`` become the graph values of the Tensors (``x._graph_value``,
    as the official ports bridge them), and ``self(...)`` calls the class's own forward, renamed
    :data:`STRUCTURED`. The statements before the inner function come along.

    A per-device list the own forward only passes on whole (V2's one list per input, V3's one
    distributed value) is passed as one: KV caches through ``PagedCacheValues.from_upstream``, a
    list of one input's per-device copies (``[v for v in args[a:b]]``) as its first. ``unlisted``
    gets the names of those own-forward parameters (their annotations lose the list).
    """
    if not isinstance(trace.body, cst.IndentedBlock):
        return "trace() has no block body"
    own = [s for s in body if isinstance(s, cst.FunctionDef) and s.name.value in ("forward", "__call__")]
    if len(own) != 1 or own[0].name.value != "forward":
        return f"the class has its own __call__: rename it {STRUCTURED}() and call it from the flat forward()"
    if any(isinstance(s, cst.FunctionDef) and s.name.value == STRUCTURED for s in body):
        return f"the class already has a {STRUCTURED}()"
    stmts = [s for s in trace.body.body if not is_docstring(s)]
    if len(stmts) < 2 or not isinstance(stmts[-2], cst.FunctionDef):
        return "trace() does not end with an inner function and `return Graph(...)`"
    inner = stmts[-2]
    if not _returns_graph_of(stmts[-1], inner):
        return "trace() does not return Graph(name, <inner function>, ...)"
    pre = stmts[:-2]
    own_params = {p.name.value for p in (*trace.params.params, *trace.params.kwonly_params)} - {"self"}
    star = trace.params.star_arg
    if isinstance(star, cst.Param):
        own_params.add(star.name.value)
    if any(not isinstance(s, cst.SimpleStatementLine) for s in pre) or any(
        _uses_names(s, own_params) for s in pre
    ):
        return "trace() computes more than values of self before the inner function"
    if not isinstance(inner.body, cst.IndentedBlock) or inner.params.kwonly_params or inner.params.star_kwarg:
        return "the inner function is not over positional graph inputs"
    if f"self.{STRUCTURED}" in source(inner) or "self(" not in source(inner):
        return "the inner function does not call self(...)"
    params = inner.params
    tensor = cst.Annotation(cst.Name("Tensor"))
    first = params.params[0] if params.params else params.star_arg
    comma = first.comma if isinstance(first, cst.Param) and isinstance(first.comma, cst.Comma) else cst.MaybeSentinel.DEFAULT
    new_params = params.with_changes(
        params=[cst.Param(cst.Name("self"), comma=comma), *(p.with_changes(annotation=tensor) for p in params.params)],
        star_arg=params.star_arg.with_changes(annotation=tensor) if isinstance(params.star_arg, cst.Param) else params.star_arg,
    )
    new_body = [*pre, *inner.body.body]
    new_body = [s.with_changes(leading_lines=_without(s, _RESOLVED)) for s in new_body]
    new = inner.with_changes(
        name=cst.Name("forward"),
        params=new_params,
        body=inner.body.with_changes(body=new_body),
        leading_lines=_without(trace, _RESOLVED),
    )
    bridge = _Bridge()
    result = new.visit(bridge)
    assert isinstance(result, cst.FunctionDef)
    if bridge.buffers:
        result = result.visit(_SignalLayout())
    assert isinstance(result, cst.FunctionDef)
    lists = _whole_lists(own[0])
    caches = {**_one_value_params(own[0], "PagedCacheValues"), **{k: v for k, v in lists.items() if v == "PagedCacheValues"}}
    one_cache = _OneCache(caches, _mapping_of(body, result))
    if caches:
        result = result.visit(one_cache)
    assert isinstance(result, cst.FunctionDef)
    ones = {k for k, v in {**lists, **_one_value_params(own[0], "Tensor", "TensorValue")}.items()
            if v in ("Tensor", "TensorValue")}
    copies = _FirstCopy(ones, result)
    result = result.visit(copies)
    assert isinstance(result, cst.FunctionDef)
    if unlisted is not None:
        named = [p.name.value for p in own[0].params.params[1:]]
        unlisted.update(named[k] if isinstance(k, int) else k for k in (*one_cache.keys, *copies.keys) if k in lists)
    return result


def unlist(own: cst.FunctionDef, names: set[str]) -> cst.FunctionDef:
    """``kv: Sequence[PagedCacheValues]`` → ``kv: PagedCacheValues`` for the parameters in ``names``."""
    return own.with_changes(params=one_per_device(own.params, names))


def _whole_lists(own: cst.FunctionDef) -> dict[int | str, str]:
    """The own forward's per-device list parameters (``kv: Sequence[PagedCacheValues]``) that its
    body only passes on whole as call arguments, by position (after self) and by name → the
    element type's name."""
    out: dict[int | str, str] = {}
    names = [n.value for n in nodes_of(own.body, (cst.Name,)) if isinstance(n, cst.Name)]
    args = [a for a in nodes_of(own.body, (cst.Arg,)) if isinstance(a, cst.Arg)]
    for k, p in enumerate(own.params.params[1:]):
        one = per_device_element(p.annotation.annotation) if p.annotation is not None else None
        name = p.name.value
        if one is None:
            continue
        whole = sum(1 for a in args if isinstance(a.value, cst.Name) and a.value.value == name and not a.star)
        keywords = sum(1 for a in args if a.keyword is not None and a.keyword.value == name)
        if whole and names.count(name) == whole + keywords:
            out[k] = out[name] = (dotted(one) or "").rsplit(".", 1)[-1]
    return out


class _FirstCopy(cst.CSTTransformer):
    """A per-device list passed where the own forward takes one value (a list parameter it only
    passes on whole, or one annotated a single Tensor) → that one value (the per-device copies of
    one input are one distributed Tensor in V3): ``[v for v in args[a:b]]`` → ``args[a]``,
    ``[v for v in xs]`` → ``xs[0]``, ``ops.distributed_broadcast(x, signals)`` → ``x``; bound
    to a name first or passed as is."""

    def __init__(self, params: set[int | str], forward: cst.FunctionDef) -> None:
        super().__init__()
        self.params = params
        self.keys: list[int | str] = []
        self.names: dict[str, int | str] = {}
        for call in nodes_of(forward, (cst.Call,)):
            if isinstance(call, cst.Call) and source(call.func) == f"self.{STRUCTURED}":
                for k, arg in enumerate(call.args):
                    key: int | str = arg.keyword.value if arg.keyword is not None else k
                    if key in params and isinstance(arg.value, cst.Name) and not arg.star:
                        self.names[arg.value.value] = key

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        target = updated.targets[0].target if len(updated.targets) == 1 else None
        if not isinstance(target, cst.Name) or target.value not in self.names:
            return updated
        first = _first_of_copies(updated.value)
        if first is None:
            return updated
        self.keys.append(self.names[target.value])
        return updated.with_changes(value=first)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if source(updated.func) != f"self.{STRUCTURED}":
            return updated
        args = list(updated.args)
        for k, arg in enumerate(args):
            key: int | str = arg.keyword.value if arg.keyword is not None else k
            first = _first_of_copies(arg.value) if key in self.params and not arg.star else None
            if first is not None:
                args[k] = arg.with_changes(value=first)
                self.keys.append(key)
        return updated.with_changes(args=args)

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        """Ops' TODO for a ``distributed_broadcast`` this rewrote goes with the call."""
        if "distributed_broadcast" not in source(original) or "distributed_broadcast(" in source(updated.body[0]):
            return updated
        return updated.with_changes(leading_lines=[
            ln for ln in updated.leading_lines
            if ln.comment is None or "MV391 ops.distributed_broadcast" not in ln.comment.value
        ])


def _first_of_copies(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """``[v for v in args[a:b]]`` → ``args[a]`` (``args[0]`` for ``args[:b]``); ``[v for v in xs]``
    → ``xs[0]``; ``ops.distributed_broadcast(x, signals)`` (one copy per device) → ``x``."""
    if (
        isinstance(value, cst.Call) and (dotted(value.func) or "").split(".")[-1] == "distributed_broadcast"
        and value.args and value.args[0].keyword is None and not value.args[0].star
    ):
        return value.args[0].value
    if isinstance(value, cst.IfExp):  # (``None if v is None else [x for x in v["a"]]``: an optional input)
        branches = (value.body, value.orelse)
        nones = [is_none(b) for b in branches]
        if nones.count(True) != 1:
            return None
        first = _first_of_copies(branches[nones.index(False)])
        if first is None:
            return None
        return value.with_changes(orelse=first) if nones[0] else value.with_changes(body=first)
    if not isinstance(value, cst.ListComp):
        return None
    element = value.elt
    if isinstance(element, cst.Attribute) and element.attr.value == "tensor":
        element = element.value
    loop = value.for_in
    if loop.inner_for_in is not None or loop.ifs or not isinstance(loop.target, cst.Name):
        return None
    if not isinstance(element, cst.Name) or loop.target.value != element.value:
        return None
    sub = loop.iter
    if not isinstance(sub, cst.Subscript) or len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Slice):
        return cst.Subscript(sub, [cst.SubscriptElement(cst.Index(cst.Integer("0")))])
    if sub.slice[0].slice.step is not None:
        return None
    lower = sub.slice[0].slice.lower or cst.Integer("0")
    return cst.Subscript(sub.value, [cst.SubscriptElement(cst.Index(lower))])


def v3_input_order(forward: cst.FunctionDef) -> tuple[cst.FunctionDef, list[str] | None]:
    """A flat ``forward`` that takes (or reads with ``next(it)``) ``tokens``, ``input_row_offsets``,
    ``return_n_logits`` in another order than V3's pipelines pass them: in :data:`V3_ORDER`, with
    the order it had (None when it already had V3's or is not that shape)."""
    params = list(forward.params.params)
    names = [p.name.value for p in params[1:4]]
    if sorted(names) == sorted(V3_ORDER) and names != list(V3_ORDER):
        by_name = {p.name.value: p for p in params[1:4]}
        moved = [by_name[n].with_changes(comma=params[1 + i].comma) for i, n in enumerate(V3_ORDER)]
        return forward.with_changes(params=forward.params.with_changes(params=[params[0], *moved, *params[4:]])), names
    if not isinstance(forward.body, cst.IndentedBlock):
        return forward, None
    stmts = list(forward.body.body)
    for i in range(len(stmts) - 2):
        reads = [_next_read(s) for s in stmts[i : i + 3]]
        if any(r is None for r in reads):
            continue
        order = [r for r in reads if r is not None]
        if sorted(order) != sorted(V3_ORDER) or order == list(V3_ORDER):
            continue
        statement_of = dict(zip(order, stmts[i : i + 3], strict=True))
        stmts[i : i + 3] = [
            statement_of[n].with_changes(leading_lines=stmts[i + k].leading_lines)  # type: ignore[attr-defined]
            for k, n in enumerate(V3_ORDER)
        ]
        return forward.with_changes(body=forward.body.with_changes(body=stmts)), order
    return forward, None


def _next_read(stmt: cst.BaseStatement) -> str | None:
    """``name = next(it)``: ``name``."""
    small = _small(stmt)
    if (
        isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
        and isinstance(small.value, cst.Call) and source(small.value.func) == "next" and len(small.value.args) == 1
    ):
        return small.targets[0].target.value
    return None


#: the V3 paged cache, imported under this name (the file may still import max.nn's V2 alias)
V3_CACHE = ("max.experimental.nn.common_layers.kv_cache", "PagedCacheValues", "MeshPagedCacheValues")
_MESH_TO = re.compile(r"\.to\((self(?:\.\w+)+\.mesh)\)")


def _one_value_params(own: cst.FunctionDef, *types: str) -> dict[int | str, str]:
    """The own forward's parameters annotated one value of ``types`` (``PagedCacheValues``: V3's
    one cache on the mesh), by position (after self) and by name → the annotation."""
    out: dict[int | str, str] = {}
    for k, p in enumerate(own.params.params[1:]):
        name = source(not_none(p.annotation.annotation)) if p.annotation is not None else ""
        if name in types:
            out[k] = out[p.name.value] = name
    return out


def _mapping_of(body: list[cst.BaseStatement], forward: cst.FunctionDef) -> str | None:
    """The DeviceMapping a per-device cache list becomes one on: Replicated on the mesh the class
    moves its inputs onto, else the tokens' (as max's ports do), else unknown."""
    mesh = _mesh_of(body)
    if mesh is not None:
        return f"DeviceMapping.replicated({mesh})"
    if any(p.name.value == "tokens" for p in forward.params.params):
        return "tokens.mapping"
    for call in nodes_of(forward, (cst.Call,)):  # the tokens it passes on: forward_unflattened(tokens=batch["tokens"])
        if isinstance(call, cst.Call) and source(call.func) == f"self.{STRUCTURED}":
            passed = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "tokens"), None)
            if passed is not None and not isinstance(passed, cst.Call):
                return f"{source(passed)}.mapping"
    return None


def _mesh_of(body: list[cst.BaseStatement]) -> str | None:
    """The mesh the class already moves its inputs onto (``x.to(self.<path>.mesh)``), if any."""
    for stmt in body:
        if isinstance(stmt, cst.FunctionDef):
            found = _MESH_TO.search(source(stmt))
            if found:
                return found.group(1)
    return None


class _OneCache(cst.CSTTransformer):
    """A per-device KV list passed where the own forward takes one cache →
    ``PagedCacheValues.from_upstream(list, mapping)`` (see :func:`_mapping_of`); a TODO when no
    mapping is known."""

    def __init__(self, params: dict[int | str, str], mapping: str | None) -> None:
        super().__init__()
        self.params, self.mapping = params, mapping
        self.keys: list[int | str] = []
        self.unknown = False

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if source(updated.func) != f"self.{STRUCTURED}":
            return updated
        args = list(updated.args)
        for k, arg in enumerate(args):
            key: int | str = arg.keyword.value if arg.keyword is not None else k
            if arg.star or key not in self.params or not isinstance(arg.value, cst.Name):
                continue
            if self.mapping is None:
                self.unknown = True
                continue
            cache = V3_CACHE[2]
            value = cst.parse_expression(f"{cache}.from_upstream({arg.value.value}, {self.mapping})")
            args[k] = arg.with_changes(value=value)
            self.keys.append(key)
        return updated.with_changes(args=args)

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        if self.unknown:
            self.unknown = False
            note = (
                f"{TODO_PREFIX}MV384 {STRUCTURED}() takes one PagedCacheValues (on the mesh): pass "
                "PagedCacheValues.from_upstream(<the per-device list>, DeviceMapping.replicated(<the model's mesh>))"
            )
            todo = attach_todos(updated, [note])
            assert isinstance(todo, cst.SimpleStatementLine)
            return todo
        return updated


def _returns_graph_of(stmt: cst.BaseStatement, inner: cst.FunctionDef) -> bool:
    """``stmt`` is ``return Graph(name, <inner>, ...)``."""
    ret = _small(stmt)
    return (
        isinstance(ret, cst.Return)
        and isinstance(ret.value, cst.Call)
        and len(ret.value.args) > 1
        and source(ret.value.args[1].value) == inner.name.value
    )


def _uses_names(node: cst.CSTNode, names: set[str]) -> bool:
    return any(n.value in names for n in nodes_of(node, (cst.Name,)))  # type: ignore[attr-defined]


def _without(stmt: cst.CSTNode, codes: tuple[str, ...]) -> list[cst.EmptyLine]:
    """Leading lines without the migrate-v3 TODOs of ``codes`` (what the rewrite resolves)."""
    lines: list[cst.EmptyLine] = list(getattr(stmt, "leading_lines", ()))
    return [
        line for line in lines
        if line.comment is None or not any(f"TODO(migrate-v3): {c} " in line.comment.value for c in codes)
    ]


class _Bridge(cst.CSTTransformer):
    """Flat graph Values → Tensors in the lifted body (see :func:`bridged_forward`); the
    TODOs this resolves go from every statement in it."""

    def __init__(self) -> None:
        super().__init__()
        self.buffers = False  # a .buffer (a V2 signal buffer input) became ._graph_value

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> Any:
        result = super().on_leave(original, updated)
        if isinstance(result, cst.SimpleStatementLine | cst.BaseCompoundStatement) and result.leading_lines:
            return result.with_changes(leading_lines=_without(result, _RESOLVED))
        return result

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = updated.func
        if isinstance(func, cst.Name) and func.value == "self":
            return updated.with_changes(func=cst.Attribute(cst.Name("self"), cst.Name(STRUCTURED)))
        if isinstance(func, cst.Attribute) and func.attr.value in _UNFLATTENERS and len(updated.args) == 1:
            arg = updated.args[0].value
            if (
                isinstance(arg, cst.Call)
                and source(arg.func) == "iter"
                and len(arg.args) == 1
                and not isinstance(arg.args[0].value, cst.GeneratorExp)
            ):
                values = cst.parse_expression(f"iter(x._graph_value for x in {source(arg.args[0].value)})")
                return updated.with_changes(args=[updated.args[0].with_changes(value=values)])
        return updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        if source(updated.value).startswith("self."):
            return updated
        if updated.attr.value == "tensor":
            return updated.value
        if updated.attr.value == "buffer":
            self.buffers = True
            return updated.with_changes(attr=cst.Name("_graph_value"))
        if updated.attr.value == "_graph_value" and source(updated.value).startswith("next("):
            self.buffers = True  # (MV373 rewrote next(...).buffer already)
        return updated


class _SignalLayout(cst.CSTTransformer):
    """The flat forward still reads V2's signal buffer inputs before the KV inputs: V3's
    pipeline inputs have none (``compile`` adds them), so say so where the KV inputs are read."""

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        if not any(f"{name}(" in source(updated) for name in _UNFLATTENERS):
            return updated
        note = (
            f"{TODO_PREFIX}MV391 the inputs keep V2's signal buffers ahead of the KV inputs (input_types()); "
            "V3 compile adds signal buffers itself and the V3 pipeline passes (tokens, return_n_logits, "
            "input_row_offsets, *kv): drop them from input_types() and from here"
        )
        todo = attach_todos(updated, [note])
        assert isinstance(todo, cst.SimpleStatementLine)
        return todo
