"""MV384/MV385 — KV-cache plumbing: unflatten in the root forward(), Tensor-backed cache values.

V2 models unflatten the flat KV-cache graph inputs in an overridden
``trace()``; V3 compiles the root module's ``forward(self, tokens,
return_n_logits, input_row_offsets, *variadic_args)``, which does it (see
``codemods.kv_trace`` for the recognised llama3/olmo2 shape). Where a file
uses ``PagedCacheValues.from_upstream`` the name is imported from
``max.experimental.nn.common_layers.kv_cache`` (the ``max.nn`` name is the V2
input alias without ``from_upstream``); other uses keep a TODO.

    def trace(self, *input_types, ...): def forward(tokens, input_row_offsets, return_n_logits, *kv_inputs): ...
    →  def forward(self, tokens: Tensor, return_n_logits: Tensor, input_row_offsets: Tensor, *variadic_args: Tensor): ...

A root with its own ``__call__`` (now ``forward``) keeps V2's input order: the
inner function becomes the flat ``forward`` over Tensors and calls the own
one, renamed ``forward_unflattened`` (``codemods.kv_trace.bridged_forward``).
Without it, ``Module.trace`` would reach the V2 ``trace()`` and build a V2
Graph whose inputs are graph values, not Tensors.
"""

from __future__ import annotations

import re

import libcst as cst

from codemods.args import source
from codemods.base import TODO_PREFIX, Codemod, attach_todos
from codemods.kv_trace import (
    STRUCTURED,
    V3_CACHE,
    V3_ORDER,
    bridged_forward,
    flat_forward,
    has_own_call,
    unlist,
    v3_input_order,
)
from codemods.resolve import import_bindings

_UNFLATTEN = ("unflatten_kv_inputs", "unflatten_basic_kv_tree")
#: ``PagedCacheValues.from_upstream`` itself, not an alias such as ``MeshPagedCacheValues.from_upstream``
_FROM_UPSTREAM = re.compile(r"PagedCacheValues(?<![\w.]PagedCacheValues)\.from_upstream")
_V3_CACHE_HOME = "max.experimental.nn.common_layers.kv_cache"
_TENSOR_MODULE = "max.experimental.tensor"


class KVCache(Codemod):
    PREFIX = "MV384"

    @classmethod
    def applies(cls, source: str) -> bool:
        return "unflatten" in source or "PagedCacheValues" in source

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom | cst.RemovalSentinel:
        for local, target in import_bindings(original):
            if not (target.startswith("max.nn") and target.endswith(".PagedCacheValues")):
                continue
            if (
                local == "PagedCacheValues"
                and _FROM_UPSTREAM.search(self.state.source)
                and not isinstance(updated.names, cst.ImportStar)
            ):
                self.state.import_name(_V3_CACHE_HOME, "PagedCacheValues")
                self.rewrote(original, "MV385", "PagedCacheValues (from_upstream) → common_layers.kv_cache")
                keep = [a for a in updated.names if _name(a) != local or a.asname is not None]
                if not keep:
                    return cst.RemovalSentinel.REMOVE
                keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                return updated.with_changes(names=keep, lpar=None, rpar=None) if len(keep) == 1 else updated.with_changes(names=keep)
            self.todo(
                "MV385",
                f"{local} from max.nn is the V2 input alias; V3 code uses "
                "max.experimental.nn.common_layers.kv_cache.PagedCacheValues (from_upstream)",
            )
        return updated

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        #: per enclosing function: is it a ``forward(self, ...)`` method (where V3 unflattens)?
        self.in_forward: list[bool] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        params = node.params.params
        self.in_forward.append(node.name.value == "forward" and bool(params) and params[0].name.value == "self")

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.in_forward.pop()
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = original.func
        if self.in_forward and self.in_forward[-1]:
            return updated  # already where V3 unflattens the KV inputs
        if isinstance(func, cst.Attribute) and func.attr.value in _UNFLATTEN:
            self.todo("MV384", f"{func.attr.value}: unflatten KV inputs in the root module's forward()")
        return updated

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        if not isinstance(updated.body, cst.IndentedBlock) or "unflatten" not in self.state.source:
            return updated  # (no trace() of this file unflattens: no need to print one to know)
        body = list(updated.body.body)
        for i, stmt in enumerate(body):
            if not (isinstance(stmt, cst.FunctionDef) and stmt.name.value == "trace"):
                continue
            code = source(stmt)
            bridged = has_own_call(body)
            # (a trace() that unflattens a tree of inputs other than KV ones: only beside the class's own forward)
            if "unflatten_" not in code and not ("unflatten(" in code and bridged):
                return updated
            result: cst.FunctionDef | str
            unlisted: set[str] = set()
            if bridged:
                result = _bridged(body, i, stmt, unlisted)
            else:
                result = flat_forward(stmt, "Tensor")
            if isinstance(result, str):
                note = (
                    f"{TODO_PREFIX}MV384 trace() not rewritten ({result}): V3 root forward(self, tokens, "
                    "return_n_logits, input_row_offsets, *variadic_args) unflattens the KV inputs"
                )
                todo = attach_todos(stmt, [note])
                body[i] = todo if isinstance(todo, cst.FunctionDef) else stmt
            elif bridged:
                self.state.import_name(_TENSOR_MODULE, "Tensor")
                if f"{V3_CACHE[2]}.from_upstream(" in source(result):
                    self.state.needed_imports.add(V3_CACHE)
                if "DeviceMapping." in source(result):
                    self.state.import_name("max.experimental.sharding", "DeviceMapping")
                self.rewrote(original, "MV384", f"trace() override → flat forward() calling the class's own, now {STRUCTURED}()")
                self._rewrote_with_trace(original, i, code)
                body = [_renamed(s, unlisted) for s in body]
                if unlisted:
                    self.rewrote(original, "MV391", f"{STRUCTURED}() takes one distributed value for the per-device "
                                 f"lists it passed on ({', '.join(sorted(unlisted))})")
                result, v2_order = v3_input_order(result)
                body[i] = result
                if v2_order is not None:
                    # V3's pipelines pass tokens, return_n_logits, input_row_offsets: the inputs follow
                    self.rewrote(original, "MV384", f"forward() reads its inputs in V3's order ({', '.join(V3_ORDER)})")
                    body = self._reorder_input_types(body, v2_order)
            else:
                self.state.import_name(_TENSOR_MODULE, "Tensor")
                self.rewrote(original, "MV384", "trace() override → root forward() unflattening the KV inputs")
                self._rewrote_with_trace(original, i, code)
                body[i] = result
                body = self._reorder_input_types(body, _inner_params(stmt))
            return updated.with_changes(body=updated.body.with_changes(body=body))
        return updated


    def _rewrote_with_trace(self, original: cst.ClassDef, index: int, code: str) -> None:
        """The V2 sites inside the trace() the new forward() replaced went with it: report them
        as rewritten (``check`` lists them; ``apply`` must not be silent about them)."""
        olds = original.body.body if isinstance(original.body, cst.IndentedBlock) else ()
        at: cst.CSTNode = olds[index] if index < len(olds) else original
        self.rewrote(at, "MV382", "trace() override → forward(); the model is compiled with model.compile()")
        self.rewrote(at, "MV380", "the Graph built in trace() → forward() on Tensors")
        if "Value" in code:  # (TensorValue too)
            self.rewrote(at, "MV331", "trace()'s graph-value annotations → Tensor")
        if ".tensor" in code:
            self.rewrote(at, "MV373", "trace()'s .tensor unwraps dropped: forward() receives Tensors")

    def _reorder_input_types(self, body: list[cst.BaseStatement], v2_order: list[str]) -> list[cst.BaseStatement]:
        """``input_types()`` returns the inputs in V2's order: put them in the new forward's order."""
        for k, stmt in enumerate(body):
            if not (isinstance(stmt, cst.FunctionDef) and stmt.name.value == "input_types"):
                continue
            new = _permuted_return(stmt, v2_order) or _permuted_result(stmt, v2_order)
            if new is None:
                note = (
                    f"{TODO_PREFIX}MV384 input_types() returns the inputs in V2's order ({', '.join(v2_order)}, *kv); "
                    f"forward() now takes {', '.join(V3_ORDER)}, *kv: reorder it"
                )
                todo = attach_todos(stmt, [note])
                body[k] = todo if isinstance(todo, cst.FunctionDef) else stmt
            elif new is not stmt:
                self.rewrote(stmt, "MV384", f"input_types() reordered to forward()'s {', '.join(V3_ORDER)}, *kv")
                body[k] = new
        return body


def _bridged(
    body: list[cst.BaseStatement], at: int, trace: cst.FunctionDef, unlisted: set[str]
) -> cst.FunctionDef | str:
    """``bridged_forward``, unless another method calls ``self(...)`` (it would reach the flat forward)."""
    others = [s for k, s in enumerate(body) if k != at and isinstance(s, cst.FunctionDef)]
    if any("self(" in source(s) for s in others):
        return f"another method calls self(...): rename forward() to {STRUCTURED}() and call that"
    return bridged_forward(trace, body, unlisted)


def _renamed(stmt: cst.BaseStatement, unlisted: set[str]) -> cst.BaseStatement:
    """The class's own structured ``forward`` → :data:`STRUCTURED` (the flat forward takes its name),
    its ``unlisted`` parameters one value each."""
    if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "forward":
        return unlist(stmt, unlisted).with_changes(name=cst.Name(STRUCTURED))
    return stmt


def _inner_params(trace: cst.FunctionDef) -> list[str]:
    inner = next(s for s in trace.body.body if isinstance(s, cst.FunctionDef))
    return [p.name.value for p in inner.params.params]


def _permuted_return(func: cst.FunctionDef, v2_order: list[str]) -> cst.FunctionDef | None:
    """``return (a, b, c, *kv)`` with a..c in ``v2_order`` → the same tuple in ``V3_ORDER``; None if not that shape."""
    if not isinstance(func.body, cst.IndentedBlock) or not func.body.body:
        return None
    last = func.body.body[-1]
    if not (isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], cst.Return)):
        return None
    value = last.body[0].value
    if not isinstance(value, cst.Tuple) or len(value.elements) != len(v2_order) + 1:
        return None
    elements = list(value.elements)
    head, star = elements[:-1], elements[-1]
    if any(isinstance(e, cst.StarredElement) for e in head) or not isinstance(star, cst.StarredElement):
        return None
    by_name = dict(zip(v2_order, head, strict=True))
    if v2_order == list(V3_ORDER):
        return func
    reordered = [by_name[n].with_changes(comma=head[i].comma) for i, n in enumerate(V3_ORDER)]
    new_return = last.body[0].with_changes(value=value.with_changes(elements=[*reordered, star]))
    new_last = last.with_changes(body=[new_return])
    return func.with_changes(body=func.body.with_changes(body=[*func.body.body[:-1], new_last]))


def _permuted_result(func: cst.FunctionDef, v2_order: list[str]) -> cst.FunctionDef | None:
    """``return EXPR`` (any expression of the inputs in V2's order, such as
    ``tuple(tree.leaves(...))``) → the same inputs put in ``V3_ORDER`` by index."""
    if sorted(v2_order) != sorted(V3_ORDER) or not isinstance(func.body, cst.IndentedBlock) or not func.body.body:
        return None
    last = func.body.body[-1]
    if not (isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 and isinstance(last.body[0], cst.Return)):
        return None
    value = last.body[0].value
    if value is None:
        return None
    picks = ", ".join(f"v2_order_types[{v2_order.index(n)}]" for n in V3_ORDER)
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "tuple"):
        value = cst.Call(cst.Name("tuple"), [cst.Arg(value)])
    keep = cst.SimpleStatementLine(
        [cst.Assign([cst.AssignTarget(cst.Name("v2_order_types"))], value)], leading_lines=last.leading_lines
    )
    ret = cst.parse_statement(f"return ({picks}, *v2_order_types[{len(V3_ORDER)}:])")
    return func.with_changes(body=func.body.with_changes(body=[*func.body.body[:-1], keep, ret]))


def _name(alias: cst.ImportAlias) -> str:
    return source(alias.name)
