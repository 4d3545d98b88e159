"""MV391 — V2's signal buffer graph inputs: V3 ``compile`` adds them itself, not as ``forward`` inputs.

A V2 root declares one signal buffer per device among its graph inputs
(``signals=signal_inputs(devices)`` in ``input_tree()``,
``signals.input_types()`` in ``input_types()``) and reads them back in its
flat entry point (``[v.buffer for v in variadic_args[n : 2 * n]]``,
``[next(it).buffer for _ in range(n)]``). V3's ``Module.compile`` stages
the signal buffers as graph inputs of its own and hands them to the
collectives through the staging context; ``forward`` never sees them, and the
V3 pipeline's inputs have none. So, in a class that does both: the
declaration goes, the read becomes an empty list, and an input slice that
started after the signal buffers starts where they did.

    signals=signal_inputs(devices),                          →  (gone)
    signal_buffers = [v.buffer for v in args[n : 2 * n]]     →  signal_buffers: list[Any] = []
    kv = unflatten(iter(args[2 * n :]))                      →  kv = unflatten(iter(args[n:]))

A class that only declares them, or only reads them, is left to the TODOs.
"""

from __future__ import annotations

import re
from typing import TypeGuard

import libcst as cst

from codemods.args import source
from codemods.base import TODO_PREFIX, Codemod, nodes_of
from codemods.dead_locals import local_assignment, name_reads, pure_expression

_BUFFER_ATTRS = frozenset({"buffer", "_graph_value"})


def _is_signal_read(value: cst.BaseExpression) -> TypeGuard[cst.ListComp]:
    """``[x.buffer for x in ...]`` / ``[next(it).buffer for _ in range(n)]`` (bound to a ``signal`` name)."""
    return (
        isinstance(value, cst.ListComp)
        and isinstance(value.elt, cst.Attribute)
        and value.elt.attr.value in _BUFFER_ATTRS
        and value.for_in.inner_for_in is None
        and not value.for_in.ifs
    )


def _is_declaration(arg: cst.Arg) -> bool:
    """``signals=signal_inputs(...)`` in an input tree."""
    return (
        arg.keyword is not None
        and isinstance(arg.value, cst.Call)
        and source(arg.value.func).rsplit(".", 1)[-1] == "signal_inputs"
    )


class _Scan:
    """What a statement declares and reads of the signal buffers, and the names bound to ``Signals(...)``.

    A walk of the assignments, arguments and calls only (:func:`nodes_of`), not a visitor over every node.
    """

    def __init__(self, stmt: cst.CSTNode) -> None:
        self.reads = 0
        self.declarations = 0
        self.signals: set[str] = set()
        found = nodes_of(stmt, (cst.Assign, cst.Arg, cst.Call))
        for node in found:
            if isinstance(node, cst.Assign):
                self._assign(node)
            elif isinstance(node, cst.Arg):
                self._arg(node)
        for node in found:  # (after the ``Signals(...)`` bindings are known)
            if isinstance(node, cst.Call):
                self._call(node)

    def _assign(self, node: cst.Assign) -> None:
        target = node.targets[0].target if len(node.targets) == 1 else None
        if isinstance(target, cst.Name) and "signal" in target.value and _is_signal_read(node.value):
            self.reads += 1
        value = node.value
        if (
            isinstance(target, cst.Name)
            and isinstance(value, cst.Call)
            and source(value.func).rsplit(".", 1)[-1] == "Signals"
        ):
            self.signals.add(target.value)

    def _arg(self, node: cst.Arg) -> None:
        if _is_declaration(node):
            self.declarations += 1
        if node.keyword is not None and "signal" in node.keyword.value and _is_signal_read(node.value):
            self.reads += 1

    def _call(self, node: cst.Call) -> None:
        func = node.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "input_types"
            and isinstance(func.value, cst.Name)
            and func.value.value in self.signals
        ):
            self.declarations += 1


class _Drop(cst.CSTTransformer):
    """Drop the declarations and the reads; shift the slices that followed the read ones."""

    def __init__(self, signals: set[str]) -> None:
        self.signals = signals
        self.shifts: dict[tuple[str, str], cst.BaseExpression | None] = {}  # (seq, old start) → new start
        self.dropped: list[str] = []
        self.annotated = False  # a ``list[Any]`` annotation was written
        self.counts: set[str] = set()  # the names that counted the buffers (``n_devices``)

    def _empty(self, value: cst.ListComp) -> cst.List:
        it = value.for_in.iter
        self.counts.update(re.findall(r"[A-Za-z_]\w*", source(it)))
        if isinstance(it, cst.Subscript) and isinstance(it.value, cst.Name) and len(it.slice) == 1:
            sl = it.slice[0].slice
            if isinstance(sl, cst.Slice) and sl.upper is not None and sl.step is None:
                self.shifts[(it.value.value, source(sl.upper))] = sl.lower
        return cst.List([])

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.BaseSmallStatement:
        target = updated.targets[0].target if len(updated.targets) == 1 else None
        if isinstance(target, cst.Name) and "signal" in target.value and _is_signal_read(original.value):
            self.dropped.append(source(original.value))
            self.annotated = True
            return cst.AnnAssign(target=target, annotation=cst.Annotation(cst.parse_expression("list[Any]")),
                                 value=self._empty(original.value))
        if isinstance(target, cst.Name) and isinstance(updated.value, cst.List) and not updated.value.elements \
                and not (isinstance(original.value, cst.List) and not original.value.elements):
            # ``types = signals.input_types()`` became ``types = []``: say what it holds
            self.annotated = True
            return cst.AnnAssign(target=target, annotation=cst.Annotation(cst.parse_expression("list[Any]")),
                                 value=updated.value)
        return updated

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg | cst.RemovalSentinel:
        if updated.star == "*" and _empty_list(updated.value):
            return cst.RemoveFromParent()
        if original.keyword is not None and "signal" in original.keyword.value and _is_signal_read(original.value):
            self.dropped.append(source(original.value))
            return updated.with_changes(value=self._empty(original.value))
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = updated.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "input_types"
            and isinstance(func.value, cst.Name)
            and func.value.value in self.signals
            and not updated.args
        ):
            self.dropped.append(source(original))
            return cst.List([])
        if any(_is_declaration(a) for a in updated.args):
            self.dropped.extend(source(a) for a in updated.args if _is_declaration(a))
            args = [a for a in updated.args if not _is_declaration(a)]
            if args:
                args[-1] = args[-1].with_changes(comma=updated.args[-1].comma)
            return updated.with_changes(args=args)
        return updated


    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        """A TODO on how to read the buffers (``.buffer``) is stale where the read went."""
        if updated is original or not updated.leading_lines:
            return updated
        lines = [
            line for line in updated.leading_lines
            if line.comment is None or not (line.comment.value.startswith(TODO_PREFIX) and ".buffer" in line.comment.value)
        ]
        return updated.with_changes(leading_lines=lines)


    def leave_Tuple(self, original: cst.Tuple, updated: cst.Tuple) -> cst.BaseExpression:
        """``(*a, *signals.input_types(), *b)``: the emptied element goes."""
        kept = [e for e in updated.elements if not (isinstance(e, cst.StarredElement) and _empty_list(e.value))]
        if len(kept) == len(updated.elements) or not kept:
            return updated
        kept[-1] = kept[-1].with_changes(comma=updated.elements[-1].comma)
        return updated.with_changes(elements=kept)


def _empty_list(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.List) and not node.elements


class _Shift(cst.CSTTransformer):
    def __init__(self, shifts: dict[tuple[str, str], cst.BaseExpression | None]) -> None:
        self.shifts = shifts

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        if not isinstance(updated.value, cst.Name) or len(updated.slice) != 1:
            return updated
        sl = updated.slice[0].slice
        if not isinstance(sl, cst.Slice) or sl.lower is None:
            return updated
        key = (updated.value.value, source(sl.lower))
        if key not in self.shifts:
            return updated
        lower = self.shifts[key]
        if lower is None and sl.upper is None and sl.step is None:
            return updated.value  # ``args[:]``: the whole sequence
        new = sl.with_changes(lower=lower)
        return updated.with_changes(slice=[updated.slice[0].with_changes(slice=new)])


def _slices(node: cst.CSTNode, shifts: dict[tuple[str, str], cst.BaseExpression | None]) -> bool:
    """``node`` holds a slice :class:`_Shift` moves (a cheap walk, before a transform)."""
    seqs = {seq for seq, _ in shifts}
    for sub in nodes_of(node, (cst.Subscript,)):
        assert isinstance(sub, cst.Subscript)
        if isinstance(sub.value, cst.Name) and sub.value.value in seqs and len(sub.slice) == 1:
            sl = sub.slice[0].slice
            if isinstance(sl, cst.Slice) and sl.lower is not None and (sub.value.value, source(sl.lower)) in shifts:
                return True
    return False


class _Unbind(cst.CSTTransformer):
    """``signals = Signals(...)`` statements whose name nothing reads any more."""

    def __init__(self, unused: set[str]) -> None:
        self.unused = unused

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.RemovalSentinel:
        small = updated.body[0] if len(updated.body) == 1 else None
        if (
            isinstance(small, cst.Assign)
            and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)
            and small.targets[0].target.value in self.unused
        ):
            return cst.RemoveFromParent()
        return updated


class _Uncount(cst.CSTTransformer):
    """A local that only counted the buffers (``n_devices = len(self.devices)``) and nothing reads now."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        if not isinstance(updated.body, cst.IndentedBlock):
            return updated
        code = source(updated)
        dead = set()
        for stmt in updated.body.body:
            assigned = local_assignment(stmt)
            if assigned is not None and assigned[0] in self.names and name_reads(code, assigned[0]) == 0 \
                    and (pure_expression(assigned[1], lambda n: None) or _is_len(assigned[1])):
                dead.add(id(stmt))
        if not dead:
            return updated
        body = [s for s in updated.body.body if id(s) not in dead]
        return updated.with_changes(body=updated.body.with_changes(body=body or [cst.SimpleStatementLine([cst.Pass()])]))


def _is_len(node: cst.BaseExpression) -> bool:
    """``len(<attribute chain or name>)``."""
    return (
        isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len"
        and len(node.args) == 1 and pure_expression(node.args[0].value, lambda n: None)
    )


class SignalInputs(Codemod):
    PREFIX = "MV391"

    @classmethod
    def applies(cls, source: str) -> bool:
        return ".buffer" in source and ("signal_inputs" in source or "Signals" in source)

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        if not isinstance(updated.body, cst.IndentedBlock):
            return updated
        # each statement (a method) scanned on its own: the ones that hold none of it stay as they are
        scans = [_Scan(stmt) for stmt in updated.body.body]
        if not any(s.reads for s in scans) or not any(s.declarations for s in scans):
            return updated
        signals = {n for s in scans for n in s.signals}
        drop = _Drop(signals)
        touched = [bool(s.reads or s.declarations or s.signals) for s in scans]
        body = [stmt.visit(drop) if hit else stmt for stmt, hit in zip(updated.body.body, touched, strict=True)]
        if drop.shifts:  # (an input slice may follow the read in any method)
            shift = _Shift(drop.shifts)
            shifted = [isinstance(s, cst.CSTNode) and _slices(s, drop.shifts) for s in body]
            body = [s.visit(shift) if hit and isinstance(s, cst.CSTNode) else s for s, hit in zip(body, shifted, strict=True)]
            touched = [a or b for a, b in zip(touched, shifted, strict=True)]
        passes: list[cst.CSTTransformer] = []
        if drop.counts:
            passes.append(_Uncount(drop.counts))
        text = "\n".join(source(s) for s, hit in zip(body, touched, strict=True) if hit and isinstance(s, cst.CSTNode))
        unused = {  # (a ``Signals(...)`` binding is a method's local: the methods that hold one tell)
            n for n in signals
            if len(re.findall(rf"\b{n}\b", text)) == len(re.findall(rf"\b{n} = ", text))
        }
        if unused:
            passes.append(_Unbind(unused))
        for one in passes:
            body = [s.visit(one) if hit and isinstance(s, cst.CSTNode) else s
                    for s, hit in zip(body, touched, strict=True)]
        # a method this rule did not change stays the same object (later hooks find it by identity)
        kept = [old if not hit or (isinstance(new, cst.CSTNode) and new.deep_equals(old)) else new
                for old, new, hit in zip(updated.body.body, body, touched, strict=True)]
        if drop.annotated:
            self.state.import_name("typing", "Any")
        self.rewrote(original, "MV373", f"{updated.name.value}: the .buffer reads of signal buffers went")
        self.rewrote(
            original, "MV391",
            f"{updated.name.value}: signal buffers are not forward inputs in V3 (compile adds them): "
            f"dropped {', '.join(drop.dropped)}",
        )
        return updated.with_changes(body=updated.body.with_changes(
            body=[s for s in kept if isinstance(s, cst.BaseStatement)]
        ))
