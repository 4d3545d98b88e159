"""MV35x — ``LayerList``/``Sequential`` → ``ModuleList``/``Sequential``.

V2 ``LayerList(layers)`` takes one sequence and, when called, chains its
layers; V3 ``ModuleList(iterable)`` is a ``list`` and is not callable. V2
``Sequential(layers)`` takes a list; V3 ``Sequential(*modules)`` takes varargs
(``Sequential([a, b])`` would nest every key under ``0.``). Both V2 and V3
name children by index, so checkpoint keys are unchanged. A LayerList that
the class calls becomes a V3 ``Sequential`` (a callable ModuleList); ``.layers``
on a container attribute is dropped (the container *is* the list).

    self.layers = LayerList(layers)   →  self.layers = ModuleList(layers)
    self.block = Sequential([a, b])   →  self.block = Sequential(a, b)
"""

from __future__ import annotations

import re

import libcst as cst

from codemods.args import self_attr
from codemods.base import Codemod
from migrate_v3.knowledge.layers import CONTAINER_MODULE, CONTAINERS, v2_symbol

_CALLED_ATTR = re.compile(r"self\.(\w+)\(")



class Containers(Codemod):
    PREFIX = "MV35"

    @classmethod
    def applies(cls, source: str) -> bool:
        return "LayerList" in source or "Sequential" in source

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        #: per class: attribute → V2 container kind
        self.classes: list[dict[str, str]] = []
        #: ``self.x`` targets of the assignments being visited
        self.targets: list[str | None] = []
        #: attributes called as ``self.x(...)`` anywhere in the file (a cheap,
        #: file-wide over-approximation: it only picks Sequential over ModuleList)
        self.called = set(_CALLED_ATTR.findall(self.state.source))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append({})

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.classes.pop()
        return updated

    def visit_Assign(self, node: cst.Assign) -> None:
        attr = self_attr(node.targets[0].target) if len(node.targets) == 1 else None
        self.targets.append(attr)

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        self.targets.pop()
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        kind = v2_symbol(self.qualname(original.func))
        if kind not in CONTAINERS:
            return updated
        args = updated.args
        if len(args) != 1 or args[0].star or (args[0].keyword is not None and args[0].keyword.value != "layers"):
            self.todo("MV350", f"{kind}(...) with unexpected arguments: V3 containers take one iterable / varargs")
            return updated
        target = self.targets[-1] if self.targets else None
        if target is not None and self.classes:
            self.classes[-1][target] = kind
        arg = args[0].with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)
        if kind == "LayerList" and (target is None or target not in self.called):
            name = self.state.import_name(CONTAINER_MODULE, "ModuleList")
            self.rewrote(original, "MV350", "LayerList(...) → ModuleList(...)")
            return updated.with_changes(func=cst.Name(name), args=[arg])
        name = self.state.import_name(CONTAINER_MODULE, "Sequential")
        value = arg.value
        if isinstance(value, cst.List | cst.Tuple) and value.elements:
            new_args = [
                cst.Arg(
                    value=el.value,
                    comma=el.comma,
                    star="*" if isinstance(el, cst.StarredElement) else "",
                )
                for el in value.elements
            ]
            call = updated.with_changes(func=cst.Name(name), args=new_args)
        else:
            call = updated.with_changes(func=cst.Name(name), args=[arg.with_changes(star="*")])
        why = "it is called like a function" if kind == "LayerList" else "varargs keep checkpoint keys"
        self.rewrote(original, "MV351", f"{kind}(seq) → Sequential(*seq): {why}")
        return call

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        # self.<container>.layers → self.<container>
        if original.attr.value != "layers" or not self.classes:
            return updated
        attr = self_attr(original.value)
        if attr is not None and attr in self.classes[-1]:
            self.rewrote(original, "MV352", f"self.{attr}.layers → self.{attr} (V3 containers are lists)")
            return updated.value
        return updated
