"""MV343 — V2 library classes with no V3 class that migrate-v3 ports itself.

A V2 base such as ``max.nn.transformer.Transformer`` has no ModuleV3
counterpart, but a subclass only relies on its constructor, its call and its
attribute names. ``migrate_v3/knowledge/ports/`` holds a V3 port of each
such class with exactly that surface (tested numerically against V2); this
codemod adds the port's class to the migrated module, with its imports, and
points the base (a direct call, or a class picked by assignment, ``cls = X``) at
it, so the V2 import becomes unused.

    from max.nn.transformer import Transformer
    class Olmo2(Transformer): ...
    →  class Transformer(Module[..., tuple[Tensor, ...]]): ...   # added by migrate-v3
       class Olmo2(Transformer): ...
"""

from __future__ import annotations

import re
from functools import cache

import libcst as cst

from codemods.base import Codemod, FileState
from codemods.resolve import import_bindings, module_name
from migrate_v3.knowledge.layers import MODULE_HOME, NO_V3_CLASS, v2_symbol
from migrate_v3.knowledge.ports import PORTS, port_owner, port_source

_OWN = "migrate_v3.knowledge.ports."


@cache
def _split(name: str) -> tuple[tuple[tuple[str, str, str | None], ...], str, tuple[str, ...]]:
    """A port's imports as (module, name, alias), the code of its definitions, and the
    other ports it builds on (its imports from this package, which migrated code cannot have)."""
    module = cst.parse_module(port_source(name))
    imports: list[tuple[str, str, str | None]] = []
    needs: list[str] = []
    defs: list[cst.SimpleStatementLine | cst.BaseCompoundStatement] = []
    for stmt in module.body:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
        if isinstance(small, cst.ImportFrom) and small.module is not None:
            mod = module_name(small.module)
            if mod == "__future__":
                continue
            for local, target in import_bindings(small):
                imported = target.rsplit(".", 1)[1]
                if mod.startswith(_OWN):
                    needs.append(imported)
                else:
                    imports.append((mod, imported, None if local == imported else local))
        else:
            defs.append(stmt)
    return tuple(imports), cst.Module(body=defs).code, tuple(needs)


def calls_the_v3_way(port: str, module: str, name: str) -> bool:
    """True when the port of V2 class ``port`` calls an argument that is a V3 ``module.name``
    with that class's V3 call convention.

    A port imports a V3 layer class only to dispatch on it
    (``isinstance(self.self_attn, AttentionWithRope)`` in ``TransformerBlock``),
    so a layer of that class passed straight to the port's constructor needs no
    call-site change: the port's ``forward`` is that call site.
    """
    imports, _, _ = _split(port)
    return any(m == module and n == name for m, n, _ in imports)


def add_port(state: FileState, symbol: str, rule: str) -> None:
    """Add the port of ``symbol`` (and the ports it builds on) to the module, once; the addition is
    reported under ``rule``, the rule that needed it."""
    imports, code, needs = _split(symbol)
    for need in needs:  # defined ahead of the port that uses it
        add_port(state, need, rule)
    state.needed_imports.update(imports)
    owner = port_owner(symbol)
    state.helpers[owner] = code
    state.helper_rules.setdefault(owner, rule)
    if owner != symbol:
        state.helpers.setdefault(symbol, "")  # defined by its owner's code


class Ports(Codemod):
    PREFIX = "MV343"

    @classmethod
    def applies(cls, source: str) -> bool:
        return any(name in source for name in PORTS) or (
            "isinstance(" in source and any(name in source for name in NO_V3_CLASS))

    def _port(self, node: cst.CSTNode, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        symbol = v2_symbol(self.qualname(expr))
        if symbol not in PORTS:
            return None
        self._add(symbol)
        self.rewrote(node, "MV343", f"{symbol} has no V3 class: added migrate-v3's V3 port of it")
        return expr if isinstance(expr, cst.Name) and expr.value == symbol else cst.Name(symbol)

    def _add(self, symbol: str) -> None:
        add_port(self.state, symbol, "MV343")

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        bases = list(updated.bases)
        changed = False
        for i, (old, new) in enumerate(zip(original.bases, updated.bases, strict=True)):
            ported = self._port(original, old.value) if old.keyword is None else None
            if ported is not None:
                bases[i] = new.with_changes(value=ported)
                changed = True
        return updated.with_changes(bases=bases) if changed else updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if not updated.func.deep_equals(original.func):
            return updated  # an earlier codemod mapped it to a V3 class (StackedLinear of q/k/v → QKVLinear)
        ported = self._port(original, original.func)
        return updated.with_changes(func=ported) if ported is not None else updated

    def leave_Assert(self, original: cst.Assert, updated: cst.Assert) -> cst.Assert:
        """``assert isinstance(x, TransformerBlock)`` of a V2 class with no V3 class that this file
        does not port (it builds none): no V3 module is one, so the assert would always fail (an
        official port's layers are its own classes). It asserts a V3 ``Module`` instead, with a TODO."""
        test, old = updated.test, original.test
        if not (isinstance(test, cst.Call) and isinstance(old, cst.Call) and isinstance(test.func, cst.Name)
                and test.func.value == "isinstance" and len(test.args) == 2 and len(old.args) == 2):
            return updated
        symbol = v2_symbol(self.qualname(old.args[1].value))
        if symbol is None or (symbol not in PORTS and symbol not in NO_V3_CLASS) or self._built_here(symbol):
            return updated  # (built here: ported, or kept as V2 with its TODO, which the assert then holds for)
        module = self.state.import_name(MODULE_HOME, "Module")
        self.todo("MV343", f"assert isinstance(..., {symbol}) → Module: V2 {symbol} has no V3 class and no "
                           f"V3 module is one; assert the V3 class this object really is")
        self.rewrote(original, "MV343", f"isinstance(..., {symbol}) → isinstance(..., Module)")
        return updated.with_changes(test=test.with_changes(
            args=[test.args[0], test.args[1].with_changes(value=cst.Name(module))]))

    def _built_here(self, symbol: str) -> bool:
        """The file calls, subclasses or picks ``symbol``: this codemod adds its port (or, with no
        port, the V2 class stays with its TODO), which ``isinstance`` then checks (by text: the
        hooks that add it may come later in the file)."""
        source = self.state.source
        return bool(re.search(rf"\b{symbol}\(|^class\s+\w+\s*\([^)]*\b{symbol}\b|=\s*{symbol}\s*$",
                              source, re.M))

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        """``cls = TensorParallelLatentAttentionWithRope`` (a class picked, called later): the port."""
        if not isinstance(original.value, cst.Name | cst.Attribute):
            return updated
        ported = self._port(original, original.value)
        return updated.with_changes(value=ported) if ported is not None else updated
