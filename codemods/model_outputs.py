"""MV342 — indexing what an official ModuleV3 text model returns.

max's official ports of text models (``llama3_modulev3``'s ``Llama3TextModel``
and ``Llama3``...: ``knowledge.layers.MODEL_OUTPUTS``, checked against max)
return a ``ModuleV3Outputs`` (``next_token_logits``, ``logits``,
``logit_offsets``, ``hidden_states``) where V2's returned a tuple whose length
followed its return modes. Code that indexes the result of calling one (a
speculative adapter's ``outputs = self.target(...)`` then ``outputs[1]``)
raises ``TypeError: 'ModuleV3Outputs' object is not subscriptable`` at trace
time. Which field an index meant depends on those modes, known only when the
model runs, so the call is bridged: ``outputs_as_v2_tuple(self.X, self.X(...))``
(a port added to the module) lays the fields out as V2's tuple for the modes
the model was given. Recognised: ``self.X(...)`` where ``__init__`` set
``self.X`` to a parameter annotated with such a class of a sibling whose
variant is the official port, its result indexed directly or bound to a name
the method only indexes; a name also read otherwise (``outputs.logits``) keeps
the call as it is, and the statement that indexes gets a TODO naming the fields.

    outputs = self.target(tokens, kv, n_logits, offsets)   # target: Llama3
    return Verified(logits=outputs[1], hidden=outputs[3])
    →  outputs = outputs_as_v2_tuple(self.target, self.target(tokens, kv, n_logits, offsets))
       return Verified(logits=outputs[1], hidden=outputs[3])
"""

from __future__ import annotations

import libcst as cst

from codemods.args import self_attr, small_statement
from codemods.base import Codemod, FileState, nodes_of
from codemods.ports import add_port
from migrate_v3.knowledge.layers import MODEL_OUTPUTS

#: the port that lays a ``ModuleV3Outputs`` out as V2's tuple
BRIDGE = "outputs_as_v2_tuple"

_CLASSES = frozenset(c for names in MODEL_OUTPUTS.values() for c in names)


def official_text_model(codemod: Codemod, expr: cst.BaseExpression) -> tuple[str, str] | None:
    """(variant module, class) when ``expr`` names a sibling's class whose variant here is max's
    official port and one of its text models (``MODEL_OUTPUTS``): ``("llama3_modulev3.llama3",
    "Llama3")`` for ``..llama3.llama3.Llama3``; else None."""
    qualname = codemod.qualname(expr) or ""
    ctx = codemod.state.context
    dots = len(qualname) - len(qualname.lstrip("."))
    if dots:
        if dots != ctx.package_depth + 2:
            return None
        qualname = qualname[dots:]
    elif qualname.startswith(ctx.architectures_package + "."):
        qualname = qualname[len(ctx.architectures_package) + 1:]
    else:
        return None
    package, _, rest = qualname.partition(".")
    module, _, name = rest.rpartition(".")
    variant = ctx.v3_packages.get(package)
    if variant is None or not module:
        return None
    v3_module = f"{variant}.{module}"
    if name in MODEL_OUTPUTS.get(v3_module, ()) and name in ctx.v3_exports.get(v3_module, frozenset()):
        return v3_module, name
    return None


class ModelOutputs(Codemod):
    PREFIX = "MV342"

    @classmethod
    def applies(cls, source: str) -> bool:
        return "self." in source and any(name in source for name in _CLASSES)

    def __init__(self, state: FileState) -> None:
        super().__init__(state)
        #: per enclosing class: attribute → "<variant>'s <Class>"
        self.held: list[dict[str, str]] = []
        #: ids of (original) statements that index what such a call returned → the class called
        self.flagged: dict[int, str] = {}
        #: ids of (original) calls whose result is only indexed: bridged
        self.bridged: set[int] = set()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        init = next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        held: dict[str, str] = {}
        if init is not None:
            params = {
                p.name.value: found for p in (*init.params.params, *init.params.kwonly_params)
                if p.annotation is not None and (found := self._official(p.annotation.annotation)) is not None
            }
            for assign in nodes_of(init.body, (cst.Assign,)):
                assert isinstance(assign, cst.Assign)
                attr = self_attr(assign.targets[0].target) if len(assign.targets) == 1 else None
                if attr is not None and isinstance(assign.value, cst.Name) and assign.value.value in params:
                    held[attr] = params[assign.value.value]
        self.held.append(held)

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.held.pop()
        return updated

    def _official(self, annotation: cst.BaseExpression) -> str | None:
        """``"llama3_modulev3's Llama3"`` when ``annotation`` names a sibling's class whose variant
        here is max's official port and returns ``ModuleV3Outputs``; else None."""
        found = official_text_model(self, annotation)
        return f"{found[0].partition('.')[0]}'s {found[1]}" if found is not None else None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        held = self.held[-1] if self.held else {}
        if not held:
            return
        lines = nodes_of(node.body, (cst.SimpleStatementLine,))
        bound: dict[str, str] = {}  # local → the class whose call it holds
        calls: dict[str, list[int]] = {}  # local → the calls bound to it
        targets: set[int] = set()  # the Names those calls are bound to
        for stmt in lines:
            small = small_statement(stmt)
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                called = self._called(small.value, held)
                if called is not None:
                    local = small.targets[0].target.value
                    bound[local] = called
                    calls.setdefault(local, []).append(id(small.value))
                    targets.add(id(small.targets[0].target))
        indexed: dict[int, str] = {}  # ids of the Names indexed → the local they name
        for stmt in lines:  # (the statement that indexes: where the trace fails)
            for sub in nodes_of(stmt, (cst.Subscript,)):
                assert isinstance(sub, cst.Subscript)
                if isinstance(sub.value, cst.Name) and sub.value.value in bound:
                    indexed[id(sub.value)] = sub.value.value
                elif self._called(sub.value, held) is not None:
                    self.bridged.add(id(sub.value))  # (indexed where it is called)
        other: set[str] = set()  # locals also read otherwise than indexed: left, with the TODO
        for name in nodes_of(node.body, (cst.Name,)):
            assert isinstance(name, cst.Name)
            if name.value in bound and id(name) not in targets and id(name) not in indexed:
                other.add(name.value)
        for local in bound.keys() - other:
            self.bridged.update(calls[local])
        for stmt in lines:
            for sub in nodes_of(stmt, (cst.Subscript,)):
                if isinstance(sub, cst.Subscript) and isinstance(sub.value, cst.Name) and indexed.get(id(sub.value)) in other:
                    self.flagged[id(stmt)] = bound[sub.value.value]

    def _called(self, value: cst.BaseExpression, held: dict[str, str]) -> str | None:
        if isinstance(value, cst.Call):
            attr = self_attr(value.func)
            return held.get(attr) if attr is not None else None
        return None

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if id(node) in self.flagged:
            self._todo(self.flagged[id(node)])

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if id(original) not in self.bridged:
            return updated
        add_port(self.state, BRIDGE, "MV342")
        self.rewrote(original, "MV342", f"{BRIDGE}: the ModuleV3Outputs laid out as V2's tuple, which the caller indexes")
        return cst.Call(func=cst.Name(BRIDGE), args=[cst.Arg(updated.func, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(updated)])

    def _todo(self, called: str) -> None:
        self.todo(
            "MV342",
            f"{called} returns ModuleV3Outputs, not V2's tuple: read its fields (next_token_logits, logits, "
            "logit_offsets, hidden_states) instead of indexing (V2's tuple held them in that order, logits and "
            "offsets only with VARIABLE/ALL logits)",
        )
