"""MV342 — calls of a layer whose V3 ``forward`` takes fewer arguments than V2's ``__call__``.

V2 ``VocabParallelEmbedding(indices, signal_buffers)`` returned one Tensor per
device; V3's ``forward(indices)`` returns one Tensor placed on the mesh. The
extra V2 arguments that carry no data (``signal_buffers``: allreduce
synchronisation) go; one that carries data stays, with a TODO. Recognised: a
subclass's ``super().forward(...)`` / ``super().__call__(...)``, and
``self.X(...)`` where ``__init__`` of the same class set ``self.X = <layer>(...)``.

A sibling's class whose V3 variant's ``forward`` lacks such a V2 parameter
(``FileState.call_drops``: gemma3's ``Gemma3TransformerBlock`` took
``signal_buffers`` third) is called without it: ``self.X(...)``, and ``layer(...)``
in ``for layer in self.layers`` (or ``enumerate(self.layers)``) where
``__init__`` built ``self.layers`` of that class.

A layer whose V3 ``forward`` takes less because the V3 layer holds the rest
(``CALL_MOVES``: V3 ``AttentionWithRope`` has its ``layer_idx`` and its rope's
``freqs_cis``) is called with what V3 reads, ``self.X(...)`` where ``__init__``
set ``self.X`` to one it builds or to a parameter annotated with its class (a
layer handed in):

    self.self_attn(layer_idx, h, kv, freqs_cis=f, input_row_offsets=r)
    →  self.self_attn(h, kv, input_row_offsets=r)

The result is one Tensor, not a list: ``layer(x, signal_buffers)[0]`` becomes
``layer(x)``, a following ``[E for v in r]`` over it
becomes ``E`` with ``r`` for ``v`` (and a ``list[T]`` return annotation of a
function that returns it becomes ``T``); any other use of ``r`` gets a TODO
on the call.

    result = super().forward(indices, signal_buffers)
    return [x * self.scale for x in result]
    →  result = super().forward(indices)
       return result * self.scale
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from codemods.args import as_keyword, bind, relayout, self_attr, source
from codemods.base import (
    TODO_PREFIX,
    Codemod,
    TransformContext,
    attach_todos,
    imports_siblings,
    nodes_of,
    without_comments,
)
from migrate_v3.knowledge.layers import CALL_DROPS, CALL_MOVES, CONTAINER_NAMES, v2_symbol


def _layer(qual: str | None) -> str | None:
    """The ``CALL_DROPS`` name of a max layer class (V2 or V3 home), else None."""
    if qual and qual.startswith("max."):
        name = qual.rsplit(".", 1)[1]
        if name in CALL_DROPS:
            return name
    return None



#: layers whose V2 ``__call__`` took a list per device (``[x]``): V3 takes the one Tensor
_SEQUENCE_INPUT = frozenset({"ColumnParallelLinear"})


def _is_super_call(func: cst.BaseExpression) -> bool:
    return (
        isinstance(func, cst.Attribute)
        and func.attr.value in ("forward", "__call__")
        and isinstance(func.value, cst.Call)
        and source(func.value.func) == "super"
    )


def _leaf_name(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


class LayerCalls(Codemod):
    PREFIX = "MV342"

    @classmethod
    def applies(cls, source: str) -> bool:
        return any(name in source for name in (*CALL_DROPS, *CALL_MOVES))

    @classmethod
    def applies_to(cls, source: str, context: TransformContext) -> bool:
        # (a sibling's subclass of one, imported as its variant's class: ``_layer_built``)
        return cls.applies(source) or (
            bool(context.library_bases or context.call_signatures) and imports_siblings(source))

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        #: per class being visited: its base layer (or None), attribute → layer
        self.classes: list[tuple[str | None, dict[str, str]]] = []
        #: per function being visited: result name of a rewritten call → its layer
        self.results: list[dict[str, str]] = []
        self.pending: list[str] = []  # the layer of a call just rewritten in the current statement
        #: per function: it returns a comprehension over a result, now one Tensor
        self.returns_one: list[bool] = []
        #: per function: result name → its uses that a comprehension rewrite consumed
        self.consumed: list[dict[str, int]] = []
        #: the calls rewritten here (ids): each returns one Tensor
        self.one_tensor: set[int] = set()
        #: per class: attribute → the ``call_drops`` class of the module (or of each module of the
        #: list) it holds; per ``for`` loop: its variable → that class (or None: no such loop)
        self.siblings: list[dict[str, str]] = []
        self.loops: list[tuple[str, str] | None] = []
        #: per class: attribute → the ``CALL_MOVES`` layer it holds
        self.moves: list[dict[str, str]] = []

    # --- where the layer is -----------------------------------------------------------

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        base = None
        for arg in node.bases:
            base = base or _layer(self.qualname(arg.value))
        attrs: dict[str, str] = {}
        siblings: dict[str, str] = {}
        moves: dict[str, str] = {}
        for stmt in node.body.body if isinstance(node.body, cst.IndentedBlock) else ():
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__":
                handed = self._handed_layers(stmt)
                appended = _appended_classes(stmt) if self.state.call_drops else {}
                local_layers = held_locals(stmt, self._layer_built)
                for assign in _assignments(stmt):
                    name = self_attr(assign.targets[0].target) if len(assign.targets) == 1 else None
                    layer = (self._layer_built(assign.value.func) if isinstance(assign.value, cst.Call)
                             else local_layers.get(assign.value.value) if isinstance(assign.value, cst.Name)
                             else None) if name else None
                    if name and layer:
                        attrs[name] = layer
                    # ``self.X = <moved layer>(...)`` or ``self.X = p`` (``p: <moved layer>``)
                    moved = (self._moved_layer(assign.value.func) if isinstance(assign.value, cst.Call)
                             else handed.get(assign.value.value) if isinstance(assign.value, cst.Name) else None)
                    if name and moved:
                        moves[name] = moved
                    built = _built_class(assign.value, appended) if name and self.state.call_drops else None
                    if name and built in self.state.call_drops:
                        siblings[name] = built
        self.classes.append((base, attrs))
        self.siblings.append(siblings)
        self.moves.append(moves)

    def _moved_layer(self, node: cst.BaseExpression) -> str | None:
        """The ``CALL_MOVES`` layer a class reference names (V2 home)."""
        symbol = v2_symbol(self.qualname(node))
        return symbol if symbol in CALL_MOVES else None

    def _handed_layers(self, init: cst.FunctionDef) -> dict[str, str]:
        """``init``'s parameters annotated with a ``CALL_MOVES`` layer (a layer handed in) → that layer."""
        return {
            p.name.value: layer for p in (*init.params.params, *init.params.kwonly_params)
            if p.annotation is not None and (layer := self._moved_layer(p.annotation.annotation)) is not None
        }

    def _moved_call(self, original: cst.Call, updated: cst.Call, layer: str) -> cst.Call:
        """``self.attn(layer_idx, x, kv, freqs_cis=f, input_row_offsets=r)`` → ``self.attn(x, kv,
        input_row_offsets=r)`` (``CALL_MOVES``); a call that does not bind gets a TODO."""
        move = CALL_MOVES[layer]
        bound = bind(updated, move.v2)
        if bound is None or not all(p in bound.args for p in (*move.positional, *move.keywords)):
            self.todo("MV342", f"V3 {layer} is called as ({', '.join(move.positional)}, "
                      f"{', '.join(f'{k}=' for k in move.keywords)}): {move.why}")
            return updated
        args = [bound.args[p].with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT) for p in move.positional]
        args += [as_keyword(bound.args[k], k) for k in move.keywords]
        gone = [p for p in bound.order if p not in move.positional and p not in move.keywords]
        self.rewrote(original, "MV342", f"V3 {layer}.forward takes no {', '.join(gone)}: {move.why}"
                     if gone else f"V3 {layer}.forward reads {', '.join(move.keywords)} as keywords")
        return updated.with_changes(args=relayout(updated.args, args))

    def visit_For(self, node: cst.For) -> None:
        it, target = node.iter, node.target
        var: cst.BaseExpression = target
        if isinstance(it, cst.Call) and source(it.func) == "enumerate" and len(it.args) == 1:
            it = it.args[0].value
            elements = target.elements if isinstance(target, cst.Tuple) else ()
            var = elements[1].value if len(elements) == 2 else target
        held = self.siblings[-1].get(self_attr(it) or "") if self.siblings else None
        self.loops.append((var.value, held) if held and isinstance(var, cst.Name) else None)

    def leave_For(self, original: cst.For, updated: cst.For) -> cst.For:
        self.loops.pop()
        return updated

    def _sibling_called(self, func: cst.BaseExpression) -> str | None:
        """The ``call_drops`` class of the module ``func`` calls: ``self.X`` or a loop's variable."""
        if isinstance(func, cst.Name):
            return next((loop[1] for loop in reversed(self.loops) if loop is not None and loop[0] == func.value), None)
        return self.siblings[-1].get(self_attr(func) or "") if self.siblings else None

    def _drop_no_data(self, original: cst.Call, updated: cst.Call, cls: str) -> cst.Call:
        """``layer(i, x, signal_buffers, kv, ...)`` → ``layer(i, x, kv, ...)`` (V3's forward has none)."""
        gone = self.state.call_drops[cls]
        dropped = [a for a in updated.args if not a.star and (
            a.keyword.value in gone if a.keyword is not None else _leaf_name(a.value) in gone)]
        if not dropped:
            return updated
        self.rewrote(original, "MV342", f"V3 {cls}.forward takes no {', '.join(sorted(gone))}")
        kept = [a for a in updated.args if all(a is not d for d in dropped)]
        return updated.with_changes(args=relayout(updated.args, kept))

    def _layer_built(self, func: cst.BaseExpression) -> str | None:
        """The ``CALL_DROPS`` layer a constructor call builds: a max layer, or a sibling's subclass
        of one imported as its variant's V3 class (``FileState.layer_substitutes``)."""
        spec = self.state.layer_substitutes.get(func.value) if isinstance(func, cst.Name) else None
        if spec is not None:
            return spec.like if spec.like in CALL_DROPS else None
        return _layer(self.qualname(func))

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.classes.pop()
        self.siblings.pop()
        self.moves.pop()
        return updated

    # --- the calls ----------------------------------------------------------------------

    def leave_Call(self, original: cst.Call, updated: cst.BaseExpression) -> cst.BaseExpression:
        if not self.classes or not isinstance(updated, cst.Call):
            return updated
        sibling = self._sibling_called(original.func) if self.state.call_drops else None
        if sibling is not None:
            return self._drop_no_data(original, updated, sibling)
        moved = self.moves[-1].get(self_attr(original.func) or "")
        if moved is not None:
            return self._moved_call(original, updated, moved)
        base, attrs = self.classes[-1]
        layer = base if base and _is_super_call(original.func) else attrs.get(self_attr(original.func) or "")
        if layer is None:
            return updated
        arity, no_data = CALL_DROPS[layer]
        positional = [a for a in updated.args if a.keyword is None and not a.star]
        extra = positional[arity:] + [a for a in updated.args if a.keyword is not None and a.keyword.value in no_data]
        if not extra:
            return updated
        keep = [a for a in extra if _leaf_name(a.value) not in no_data]
        if keep:
            self.todo("MV342", f"V3 {layer} is called as ({', '.join(['x'] * arity)}): "
                               f"{', '.join(source(a.value) for a in keep)} has no V3 place")
            return updated
        args = [a for a in updated.args if a not in extra]
        if args:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            first = args[0].value
            if layer in _SEQUENCE_INPUT and isinstance(first, cst.List) and len(first.elements) == 1:
                args[0] = args[0].with_changes(value=first.elements[0].value)  # [x] per device → x
        self.rewrote(original, "MV342", f"V3 {layer} takes no {', '.join(source(a.value) for a in extra)}")
        self.pending.append(layer)
        call = updated.with_changes(args=args)
        self.one_tensor.add(id(call))
        return call

    def leave_Subscript(self, original: cst.Subscript, updated: cst.BaseExpression) -> cst.BaseExpression:
        """``layer(x, signal_buffers)[0]``: V2's first device's Tensor is V3's one Tensor."""
        if not self.one_tensor or not isinstance(updated, cst.Subscript):
            return updated  # (an earlier codemod may have replaced the subscript)
        index = updated.slice[0].slice if len(updated.slice) == 1 else None
        if (
            id(updated.value) in self.one_tensor
            and isinstance(index, cst.Index)
            and isinstance(index.value, cst.Integer)
            and index.value.value == "0"
        ):
            self.pending.clear()  # used as one Tensor: no note
            self.rewrote(original, "MV342", f"{source(original.value)}[0] → the one Tensor V3 returns")
            return updated.value
        return updated

    # --- the result: one Tensor ---------------------------------------------------------

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.results.append({})
        self.returns_one.append(False)
        self.consumed.append({})

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        results = self.results.pop()
        if self.returns_one.pop() and updated.returns is not None:
            ann = updated.returns.annotation
            if isinstance(ann, cst.Subscript) and source(ann.value) == "list" and len(ann.slice) == 1:
                inner = ann.slice[0].slice
                if isinstance(inner, cst.Index):
                    updated = updated.with_changes(returns=updated.returns.with_changes(annotation=inner.value))
        consumed = self.consumed.pop()
        used = _uses(original.body) if results else {}
        done = {self._note(layer, name) for name, layer in results.items() if used.get(name, 0) <= consumed.get(name, 0)}
        if done:
            updated = updated.with_changes(body=updated.body.visit(_Unnote(done)))
        return updated

    @staticmethod
    def _note(layer: str, name: str) -> str:
        return (f"{TODO_PREFIX}MV342 V3 {layer} returns one Tensor (placed on the device mesh), "
                f"not V2's list per device: use {name} as one Tensor")

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement:
        if not self.pending:
            return updated
        layer = self.pending[-1]
        self.pending.clear()
        small = updated.body[0] if len(updated.body) == 1 else None
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
            return updated
        name = small.targets[0].target.value
        if self.results:
            self.results[-1][name] = layer
        result = attach_todos(updated, [self._note(layer, name)])
        return result if isinstance(result, cst.SimpleStatementLine) else updated

    def leave_Return(self, original: cst.Return, updated: cst.Return) -> cst.Return:
        comp = original.value
        if (
            self.consumed and isinstance(comp, cst.ListComp) and not isinstance(updated.value, cst.ListComp)
            and isinstance(comp.for_in.iter, cst.Name) and comp.for_in.iter.value in self.consumed[-1]
        ):
            self.returns_one[-1] = True
        return updated

    def leave_ListComp(self, original: cst.ListComp, updated: cst.BaseExpression) -> cst.BaseExpression:
        if not self.results or not isinstance(updated, cst.ListComp):
            return updated  # (an earlier codemod may have replaced the comprehension)
        comp = updated.for_in
        if comp.inner_for_in is not None or comp.ifs or comp.asynchronous is not None:
            return updated
        if not (isinstance(comp.iter, cst.Name) and comp.iter.value in self.results[-1] and isinstance(comp.target, cst.Name)):
            return updated
        self.rewrote(original, "MV342", f"[... for {comp.target.value} in {comp.iter.value}] → one Tensor")
        self.consumed[-1][comp.iter.value] = self.consumed[-1].get(comp.iter.value, 0) + 1
        return updated.elt.visit(_Rename(comp.target.value, comp.iter))  # type: ignore[return-value]


_CONTAINERS = CONTAINER_NAMES | {"list"}


def _built_class(value: cst.BaseExpression, lists: dict[str, str]) -> str | None:
    """The class (a bare name) ``Cls(...)``, ``[Cls(...) for ...]`` or ``Container([Cls(...) ...])``
    builds, or ``Container(xs)`` of a local list ``lists`` knows (``xs.append(Cls(...))``)."""
    if isinstance(value, cst.Call) and source(value.func).rsplit(".", 1)[-1] in _CONTAINERS and len(value.args) == 1:
        value = value.args[0].value
    if isinstance(value, cst.Name):
        return lists.get(value.value)
    if isinstance(value, cst.ListComp):
        value = value.elt
    elif isinstance(value, cst.List) and value.elements:
        names = {_built_class(e.value, lists) for e in value.elements}
        return names.pop() if len(names) == 1 else None
    return value.func.value if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) else None


def _appended_classes(func: cst.FunctionDef) -> dict[str, str]:
    """Local lists of ``func`` that only ``xs.append(Cls(...))`` fills, all of one class → that class."""
    found: dict[str, set[str | None]] = {}
    for call in nodes_of(func, (cst.Call,)):
        if (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "append"
                and isinstance(call.func.value, cst.Name) and len(call.args) == 1):
            found.setdefault(call.func.value.value, set()).add(_built_class(call.args[0].value, {}))
    return {name: cls for name, classes in found.items() if len(classes) == 1 for cls in classes if cls is not None}


def held_locals(init: cst.FunctionDef, layer_of: Callable[[cst.BaseExpression], str | None]) -> dict[str, str]:
    """``init``'s locals bound only to constructor calls of one layer (``layer_of`` the called
    class) → that layer (``embedding = VocabParallelEmbedding(...)`` before ``self.embed_tokens = embedding``)."""
    found: dict[str, set[str | None]] = {}
    for assign in _assignments(init):
        target = assign.targets[0].target if len(assign.targets) == 1 else None
        if isinstance(target, cst.Name):
            value = assign.value
            found.setdefault(target.value, set()).add(layer_of(value.func) if isinstance(value, cst.Call) else None)
    return {name: layer for name, layers in found.items() if len(layers) == 1 for layer in layers if layer is not None}


def held_as(init: cst.FunctionDef, local: str) -> str | None:
    """The attribute ``init`` stores local ``local`` in (``self.embed_tokens = embedding``), the last one."""
    held = [name for assign in _assignments(init) if len(assign.targets) == 1
            and isinstance(assign.value, cst.Name) and assign.value.value == local
            and (name := self_attr(assign.targets[0].target)) is not None]
    return held[-1] if held else None


def _assignments(node: cst.CSTNode) -> Iterator[cst.Assign]:
    """Every ``a = b`` statement under ``node``, nested blocks and definitions included, in source
    order (a later ``self.x = ...`` wins). Assignments are statements: expressions are not entered."""
    todo: list[object] = [node]
    while todo:
        cur = todo.pop()
        if isinstance(cur, cst.SimpleStatementLine | cst.SimpleStatementSuite):
            yield from (small for small in cur.body if isinstance(small, cst.Assign))
        elif isinstance(cur, cst.IndentedBlock):
            todo.extend(reversed(cur.body))
        elif isinstance(cur, cst.CSTNode):  # pushed last to first: popped in source order
            for attr in ("finalbody", "orelse"):
                sub = getattr(cur, attr, None)
                if isinstance(sub, cst.CSTNode):
                    todo.append(sub)
            todo.extend(reversed(getattr(cur, "handlers", ())))
            todo.extend(reversed(getattr(cur, "cases", ())))
            body = getattr(cur, "body", None)
            if isinstance(body, cst.CSTNode):
                todo.append(body)


class _Rename(cst.CSTTransformer):
    """The comprehension's variable → the one Tensor (attribute and keyword names are not uses)."""

    def __init__(self, old: str, new: cst.BaseExpression) -> None:
        super().__init__()
        self.old = old
        self.new = new

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self.new if updated.value == self.old else updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)


def _uses(node: cst.CSTNode) -> dict[str, int]:
    """How often each name is read in ``node`` (assignment targets, attribute and keyword names are not reads)."""
    count = _Count()
    node.visit(count)
    return count.counts


class _Count(cst.CSTVisitor):
    """(At module level: a class defined per call is a reference cycle per call.)"""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}

    def visit_Name(self, name: cst.Name) -> None:
        self.counts[name.value] = self.counts.get(name.value, 0) + 1

    def visit_Attribute(self, attr: cst.Attribute) -> bool:
        attr.value.visit(self)
        return False

    def visit_Arg(self, arg: cst.Arg) -> bool:
        arg.value.visit(self)
        return False

    def visit_AssignTarget(self, target: cst.AssignTarget) -> bool:
        return not isinstance(target.target, cst.Name)


class _Unnote(cst.CSTTransformer):
    """Drop the one-Tensor notes whose result every use was rewritten for."""

    def __init__(self, notes: set[str]) -> None:
        super().__init__()
        self.notes = notes

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        return without_comments(updated, self.notes)
