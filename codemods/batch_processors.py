"""MV383 — the V2 single-replica batch processor becomes the ModuleV3 one.

A V2 ``SingleReplicaRaggedBatchProcessor`` hands the compiled graph its
inputs in the V2 order ``(tokens, input_row_offsets, return_n_logits,
*signals, *kv)``; a ModuleV3 root (as ``kv_cache`` rewrites its ``trace``)
takes ``(tokens, return_n_logits, input_row_offsets, *kv)``, the order
``ModuleV3SingleReplicaBatchProcessor.get_symbolic_inputs`` gives and the V3
pipeline base compiles with. Kept on the V2 base, a V3 pipeline compiles the
root with its inputs swapped (``input_row_offsets`` int64 instead of uint32).

* the base → ``ModuleV3SingleReplicaBatchProcessor`` (type arguments kept);
* a ``get_symbolic_inputs`` override that only returns
  ``ragged_kv_symbolic_inputs(...)`` / ``modulev3_ragged_kv_symbolic_inputs(...)``
  goes (the V3 base gives the V3 order); any other gets a TODO;
* ``_include_signal_buffers`` goes (one device: no signal buffers);
* ``_make_inputs(..., signal_buffers)``: the V3 base never passes it, so the
  parameter goes and its uses become ``[]`` (``*signal_buffers`` and
  ``del signal_buffers`` go); any other parameter the V3 base does not pass
  gets a TODO.

    class B(SingleReplicaRaggedBatchProcessor[TextContext, "Inputs"]):
    →  class B(ModuleV3SingleReplicaBatchProcessor[TextContext, "Inputs"]):

A Graph-path ``RaggedBatchProcessor`` (DP/LoRA batching, no ModuleV3 twin)
keeps its base; its ``get_symbolic_inputs`` returning
``ragged_kv_symbolic_inputs(...)`` returns ``modulev3_ragged_kv_symbolic_inputs``
instead (another gets a TODO). A ``ModelInputs`` whose ``buffers`` returns
``(x.tokens, x.input_row_offsets, x.return_n_logits, *x.signal_buffers, ...)``
returns them in the V3 order, as ``pipeline_model`` does for ``execute``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import libcst as cst

from codemods.args import is_docstring, source
from codemods.base import TODO_PREFIX, Codemod, attach_todos
from codemods.dependencies import changes
from codemods.kv_trace import _small
from codemods.pipeline_model import v3_input_order

_V2 = "SingleReplicaRaggedBatchProcessor"
_RAGGED = "RaggedBatchProcessor"
_V3 = "ModuleV3SingleReplicaBatchProcessor"
_HOME = "max.pipelines.lib.interfaces.batch_processor"
#: the keyword arguments ModuleV3SingleReplicaBatchProcessor passes to ``_make_inputs``
_V3_MAKE_INPUTS = frozenset({"tokens", "input_row_offsets", "return_n_logits", "kv_cache_inputs"})
_SIGNALS = "signal_buffers"
_SYMBOLIC = frozenset({"ragged_kv_symbolic_inputs", "modulev3_ragged_kv_symbolic_inputs"})


class BatchProcessors(Codemod):
    PREFIX = "MV383"
    #: a batch processor file has no V2 layer code (a V3 package, olmo3, keeps the Graph-path
    #: base with the V3 order on purpose: check does not flag the base, apply rewrites it)
    NEUTRAL_OK = True

    @classmethod
    def applies(cls, source: str) -> bool:
        return _RAGGED in source or "def buffers" in source

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom:
        """``from ...batch_processor import SingleReplicaRaggedBatchProcessor`` names the V3 class
        (in place: a batch processor file is neutral, no import pass adds it)."""
        if original.module is None or source(original.module) != _HOME or isinstance(updated.names, cst.ImportStar):
            return updated
        names = [
            a.with_changes(name=cst.Name(_V3)) if isinstance(a.name, cst.Name) and a.name.value == _V2 and a.asname is None else a
            for a in updated.names
        ]
        if all(a is b for a, b in zip(names, updated.names, strict=True)):
            return updated  # (the same node: the report finds its line)
        return updated.with_changes(names=names)

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        if not isinstance(updated.body, cst.IndentedBlock):
            return updated
        if self._derives(original, _RAGGED):
            return self._ragged(original, updated)
        if self._derives(original, "ModelInputs") or any(
            isinstance(b.value, cst.Name) and b.value.value in changes(self.state).moved_classes for b in original.bases
        ):
            return self._inputs(original, updated)
        index = self._v2_base(original)
        if index is None:
            return updated
        bases = list(updated.bases)
        base = bases[index].value
        name = cst.Name(_V3)  # (its import: leave_ImportFrom renames the V2 one in place)
        new_base: cst.BaseExpression = name
        if isinstance(base, cst.Subscript):  # V3 is generic in (context, inputs) only: no arch config type
            types = list(base.slice[:2])
            types[-1] = types[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            new_base = base.with_changes(value=name, slice=types)
        bases[index] = bases[index].with_changes(value=new_base)
        self.rewrote(original, "MV383", f"{_V2} → {_V3}: inputs in the ModuleV3 order")
        body: list[cst.BaseStatement | None] = []  # None: a statement that goes
        for stmt in updated.body.body:
            small = _small(stmt)
            if isinstance(small, cst.Assign | cst.AnnAssign):
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                if any(isinstance(t, cst.Name) and t.value == "_include_signal_buffers" for t in targets):
                    body.append(None)
                    continue
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "get_symbolic_inputs":
                if self._only_symbolic(stmt):
                    body.append(None)
                    continue
                body.append(self._todo(stmt, (
                    f"get_symbolic_inputs: {_V3} gives (tokens, return_n_logits, input_row_offsets, *kv), "
                    "the order the V3 root's forward takes: drop this override or give that order"
                )))
                continue
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "_make_inputs":
                body.append(self._make_inputs(stmt))
                continue
            body.append(stmt)
        kept = _without(list(updated.body.body), body) or [cst.SimpleStatementLine([cst.Pass()])]
        return updated.with_changes(bases=bases, body=updated.body.with_changes(body=kept))

    def _derives(self, node: cst.ClassDef, name: str) -> bool:
        for arg in node.bases:
            expr = arg.value.value if isinstance(arg.value, cst.Subscript) else arg.value
            qual = self.qualname(expr)
            if qual and qual.startswith("max.pipelines") and qual.rsplit(".", 1)[1] == name:
                return True
        return False

    def _ragged(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        """A Graph-path ``RaggedBatchProcessor`` (DP/LoRA batching: no ModuleV3 twin): its
        ``get_symbolic_inputs`` gives the V3 order (``modulev3_ragged_kv_symbolic_inputs``)."""
        assert isinstance(updated.body, cst.IndentedBlock)
        body = []
        for stmt in updated.body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "get_symbolic_inputs":
                stmt = self._v3_symbolic(stmt)
            body.append(stmt)
        return updated.with_changes(body=updated.body.with_changes(body=body))

    def _v3_symbolic(self, func: cst.FunctionDef) -> cst.BaseStatement:
        stmts = [s for s in func.body.body if not is_docstring(s)] if isinstance(func.body, cst.IndentedBlock) else []
        ret = _small(stmts[0]) if len(stmts) == 1 else None
        call = ret.value if isinstance(ret, cst.Return) else None
        if isinstance(call, cst.Call) and source(call.func).rsplit(".", 1)[-1] == "modulev3_ragged_kv_symbolic_inputs":
            return func
        if not (isinstance(call, cst.Call) and source(call.func) == "ragged_kv_symbolic_inputs"
                and {a.keyword.value for a in call.args if a.keyword} == {"kv_params", "device_refs", "include_signal_buffers"}):
            return self._todo(func, code="MV382", message=(
                "get_symbolic_inputs: a ModuleV3 root takes (tokens, return_n_logits, input_row_offsets, *kv) "
                "(modulev3_ragged_kv_symbolic_inputs): give that order"
            ))
        name = self.state.import_name(_HOME, "modulev3_ragged_kv_symbolic_inputs")
        args = [a for a in call.args if a.keyword is not None and a.keyword.value != "include_signal_buffers"]
        args[-1] = args[-1].with_changes(comma=call.args[-1].comma)
        self.rewrote(func, "MV383", "ragged_kv_symbolic_inputs → modulev3_ragged_kv_symbolic_inputs (the V3 root's input order)")
        return func.visit(_Swap(call, call.with_changes(func=cst.Name(name), args=args)))  # type: ignore[return-value]

    def _inputs(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        """A ``ModelInputs`` whose ``buffers`` gives the V2 order → the V3 order (no signal buffers)."""
        assert isinstance(updated.body, cst.IndentedBlock)
        body = []
        for stmt in updated.body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "buffers":
                order = _V3Buffers()
                new = stmt.visit(order)
                if order.changed:
                    self.rewrote(_buffers(original) or original, "MV383", "buffers: the V3 root's input order (tokens, return_n_logits, input_row_offsets, *kv)")
                    stmt = new  # type: ignore[assignment]
            body.append(stmt)
        return updated.with_changes(body=updated.body.with_changes(body=body))

    def _v2_base(self, node: cst.ClassDef) -> int | None:
        for i, arg in enumerate(node.bases):
            expr = arg.value.value if isinstance(arg.value, cst.Subscript) else arg.value
            qual = self.qualname(expr)
            if qual and qual.startswith("max.pipelines") and qual.rsplit(".", 1)[1] == _V2:
                return i
        return None

    @staticmethod
    def _only_symbolic(func: cst.FunctionDef) -> bool:
        if not isinstance(func.body, cst.IndentedBlock):
            return False
        stmts = [s for s in func.body.body if not is_docstring(s)]
        ret = _small(stmts[0]) if len(stmts) == 1 else None
        return (
            isinstance(ret, cst.Return)
            and isinstance(ret.value, cst.Call)
            and source(ret.value.func).rsplit(".", 1)[-1] in _SYMBOLIC
        )

    def _todo(self, stmt: cst.BaseStatement, message: str, code: str = "MV383") -> cst.BaseStatement:
        result = attach_todos(stmt, [f"{TODO_PREFIX}{code} {message}"])
        return result if isinstance(result, cst.BaseStatement) else stmt

    def _make_inputs(self, func: cst.FunctionDef) -> cst.BaseStatement:
        params = func.params
        extra = [p.name.value for p in (*params.params, *params.kwonly_params) if p.name.value not in (*_V3_MAKE_INPUTS, "self")]
        if _SIGNALS not in extra:
            return self._flag_extra(func, extra)
        func = func.with_changes(params=params.with_changes(
            params=_drop_param(params.params), kwonly_params=_drop_param(params.kwonly_params)
        ))
        func = func.with_changes(body=func.body.visit(_NoSignals()))
        self.rewrote(func, "MV383", f"_make_inputs: {_V3} passes no signal_buffers (one device): []")
        rest = [e for e in extra if e != _SIGNALS]
        if _SIGNALS in _names(func.body):
            rest.append(_SIGNALS)
        return self._flag_extra(func, rest)

    def _flag_extra(self, func: cst.FunctionDef, extra: list[str]) -> cst.BaseStatement:
        if not extra:
            return func
        return self._todo(func, (
            f"_make_inputs: {_V3} passes only tokens, input_row_offsets, return_n_logits and "
            f"kv_cache_inputs; give {', '.join(extra)} a value here"
        ))


class _Swap(cst.CSTTransformer):
    def __init__(self, old: cst.CSTNode, new: cst.CSTNode) -> None:
        super().__init__()
        self.old, self.new = old, new

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> Any:
        return self.new if original is self.old else updated


class _V3Buffers(cst.CSTTransformer):
    """In a ``buffers`` method, each tuple or list that starts ``(self.tokens, self.input_row_offsets,
    self.return_n_logits, ...)`` gives them in the V3 order ``(self.tokens, self.return_n_logits,
    self.input_row_offsets, ...)``, and ``*self.signal_buffers`` goes from each (the V3 root takes
    none: one device). Whatever comes between them stays where it is."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = False

    def leave_Tuple(self, original: cst.Tuple, updated: cst.Tuple) -> cst.Tuple:
        elements = self._v3(updated.elements)
        if elements is None:
            return updated
        if len(elements) == 1 and isinstance(elements[0].comma, cst.MaybeSentinel):
            elements = [elements[0].with_changes(comma=cst.Comma())]  # (*kv,): still a tuple
        if not elements and not updated.lpar:
            return updated.with_changes(elements=[], lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return updated.with_changes(elements=elements)

    def leave_List(self, original: cst.List, updated: cst.List) -> cst.List:
        elements = self._v3(updated.elements)
        return updated if elements is None else updated.with_changes(elements=elements)

    def _v3(self, elements: Sequence[cst.BaseElement]) -> list[cst.BaseElement] | None:
        kept = [e for e in elements if not _is_self_signals(e)]
        if kept and len(kept) < len(elements) and elements[-1] is not kept[-1]:
            kept[-1] = kept[-1].with_changes(comma=elements[-1].comma)  # (the layout before the bracket)
        args = [cst.Arg(value=e.value, star="*" if isinstance(e, cst.StarredElement) else "", comma=e.comma) for e in kept]
        order = v3_input_order(args) if args else None
        if order is None and len(kept) == len(elements):
            return None
        self.changed = True
        if order is None:
            return kept
        return [
            cst.StarredElement(value=a.value, comma=a.comma) if a.star else cst.Element(value=a.value, comma=a.comma)
            for a in order
        ]


def _is_self_signals(element: cst.BaseElement) -> bool:
    """``*self.signal_buffers``."""
    value = element.value
    return (
        isinstance(element, cst.StarredElement)
        and isinstance(value, cst.Attribute)
        and value.attr.value == _SIGNALS
        and isinstance(value.value, cst.Name)
        and value.value.value == "self"
    )


def _buffers(node: cst.ClassDef) -> cst.FunctionDef | None:
    """``node``'s own ``buffers`` method (the original node: its position is the report's)."""
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    return next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == "buffers"), None)


def _drop_param(params: Sequence[cst.Param]) -> list[cst.Param]:
    """``params`` without ``signal_buffers``; a new last one takes its comma (the layout before ``)``)."""
    kept = [p for p in params if p.name.value != _SIGNALS]
    if kept and params and params[-1].name.value == _SIGNALS:
        kept[-1] = kept[-1].with_changes(comma=params[-1].comma)
    return kept


def _without(old: list[cst.BaseStatement], new: Sequence[cst.BaseStatement | None]) -> list[cst.BaseStatement]:
    """The statements of ``new`` that stay (``None``: gone), each gone one's lines
    above it moved to the next that stays (at the top of a block, blank lines go)."""
    out: list[cst.BaseStatement] = []
    carry: list[cst.EmptyLine] = []
    for before, after in zip(old, new, strict=True):
        if after is None:
            carry.extend(getattr(before, "leading_lines", ()))
            continue
        if carry:
            own = list(getattr(after, "leading_lines", ()))
            lines = [*carry, *own] if out else [el for el in [*carry, *own] if el.comment is not None]
            if out and any(el.comment is None for el in own):
                lines = [el for el in carry if el.comment is not None] + own
            after = after.with_changes(leading_lines=lines)
            carry = []
        out.append(after)
    return out


def _names(node: cst.CSTNode) -> set[str]:
    collect = _Names()
    node.visit(collect)
    return collect.found


class _Names(cst.CSTVisitor):
    """(At module level: a class defined per call is a reference cycle per call.)"""

    def __init__(self) -> None:
        super().__init__()
        self.found: set[str] = set()

    def visit_Name(self, name: cst.Name) -> None:
        self.found.add(name.value)

    def visit_Arg(self, arg: cst.Arg) -> bool:
        arg.value.visit(self)  # the keyword is not a use
        return False


class _NoSignals(cst.CSTTransformer):
    """Uses of the ``signal_buffers`` parameter → ``[]`` (``*signal_buffers`` and ``del`` go)."""

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg | cst.RemovalSentinel:
        if isinstance(updated.value, cst.Name) and updated.value.value == _SIGNALS:
            if updated.star:
                return cst.RemovalSentinel.REMOVE
            return updated.with_changes(value=cst.List([]))
        return updated

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        stmts = list(updated.body)
        new = [None if _is_del_signals(s) else s for s in stmts]
        if all(s is not None for s in new):
            return updated
        return updated.with_changes(body=_without(stmts, new) or [cst.SimpleStatementLine([cst.Pass()])])


def _is_del_signals(stmt: cst.BaseStatement) -> bool:
    small = _small(stmt)
    return isinstance(small, cst.Del) and isinstance(small.target, cst.Name) and small.target.value == _SIGNALS
