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

import libcst as cst

from codemods.args import source

V3_ORDER = ("tokens", "return_n_logits", "input_row_offsets")
_VARIADIC = "variadic_args"




def _small(stmt: cst.CSTNode) -> cst.BaseSmallStatement | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        return stmt.body[0]
    return None


def _is_docstring(stmt: cst.CSTNode) -> bool:
    small = _small(stmt)
    return isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString | cst.ConcatenatedString)


def has_own_call(body: list[cst.BaseStatement]) -> bool:
    return any(isinstance(s, cst.FunctionDef) and s.name.value in ("__call__", "forward") for s in body)


def flat_forward(trace: cst.FunctionDef, tensor: str) -> cst.FunctionDef | str:
    """The V3 root ``forward`` replacing ``trace``, or why ``trace`` is not the pattern."""
    if not isinstance(trace.body, cst.IndentedBlock):
        return "trace() has no block body"
    stmts = [s for s in trace.body.body if not _is_docstring(s)]
    if len(stmts) != 2 or not isinstance(stmts[0], cst.FunctionDef):
        return "trace() is more than an inner function and `return Graph(...)`"
    inner = stmts[0]
    ret = _small(stmts[1])
    if not (
        isinstance(ret, cst.Return)
        and isinstance(ret.value, cst.Call)
        and len(ret.value.args) > 1
        and source(ret.value.args[1].value) == inner.name.value
    ):
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
    new = inner.with_changes(
        params=template.params,
        whitespace_before_params=cst.SimpleWhitespace(""),
        body=inner.body.with_changes(body=body),
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
