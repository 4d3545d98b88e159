"""MV32x — the module surface: generic ``Module`` base, ``forward``, ``super().__init__()``.

For a subclass of the V2 ``Module`` (or ``Layer``): ``__call__`` becomes
``forward``; the base becomes ``Module[[arg types], return type]`` built from
``forward``'s (already rewritten) annotations — ``...`` when it takes
``*args``/``**kwargs``/keyword-only arguments, a parameter with a default, or a
parameter that a ``self.<child>(..., name=...)`` call in the file passes by
keyword (a ``[A, B]`` list is positional and required for mypy: ``m(x)`` that
omits the default, or ``m(x, mask=m)``, would be an error in correct code); bare ``Module`` when an annotation
is missing or names something not defined yet when the class is created
(a quoted forward reference, a ``TYPE_CHECKING``-only import);
``super().__init__()`` is added to an ``__init__`` that lacks it. In a subclass
of a V2 *layer* (``class X(RMSNorm)``) ``__call__`` becomes ``forward`` too
(``super().__call__(x)`` → ``super().forward(x)``); its ``__init__`` arguments
are mapped by ``layers``, and when they could not be, it is flagged. A subclass
of a V2 class migrate-v3 ports (``codemods.ports``) gets the same ``forward``
(but for one with its own ``trace()``, which ``kv_cache`` rewrites);
the port takes V2's ``__init__`` arguments as they are.

    class MLP(Module):                          →  class MLP(Module[[Tensor], Tensor]):
        def __call__(self, x: TensorValue) -> TensorValue:  →  def forward(self, x: Tensor) -> Tensor:
"""

from __future__ import annotations

import builtins

import libcst as cst

from codemods.args import is_docstring, source
from codemods.base import Codemod, nodes_of
from codemods.layers import defines_init
from codemods.resolve import import_bindings
from migrate_v3.knowledge.layers import (
    LAYERS,
    MODULE_HOME,
    MODULE_NAMES,
    V2_LIBRARY_MODULES,
    v2_symbol,
)
from migrate_v3.knowledge.ports import PORTS

_BUILTINS = frozenset(dir(builtins))


def _has_super_init(body: cst.BaseSuite) -> bool:
    if not isinstance(body, cst.IndentedBlock):
        return True
    for stmt in body.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Expr) and "super().__init__(" in source(small).replace(" ", ""):
                    return True
                if isinstance(small, cst.Expr) and ".__init__(self" in source(small).replace(" ", ""):
                    return True
    return False


def _root_names(node: cst.CSTNode) -> set[str] | None:
    """Names an annotation evaluates at runtime; None when it can't be evaluated."""
    collect = _RootNames()
    node.visit(collect)
    return collect.names if collect.ok else None


class _RootNames(cst.CSTVisitor):
    """(A class at module level: one defined per call is a reference cycle per call.)"""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()
        self.ok = True

    def visit_Name(self, n: cst.Name) -> None:
        self.names.add(n.value)

    def visit_Attribute(self, n: cst.Attribute) -> bool:
        n.value.visit(self)
        return False

    def visit_SimpleString(self, n: cst.SimpleString) -> None:
        self.ok = False


class ModuleInterface(Codemod):
    PREFIX = "MV32"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        #: per enclosing class: is it a V2 Module subclass? ("layer": a subclass of a V2 layer)
        self.classes: list[bool | str] = []
        #: names bound at module level so far (runtime-available in class bases)
        self.available: set[str] = set(_BUILTINS) | {"None"}
        self.depth = 0
        self.forward: list[cst.FunctionDef | None] = []
        self.module: cst.Module | None = None
        self._keywords: set[str] | None = None

    def keywords_to_children(self) -> set[str]:
        """Keyword names of every ``self.<attr>(...)`` call in the file (computed on first use)."""
        if self._keywords is None:
            self._keywords = set()
            for call in nodes_of(self.module, (cst.Call,)) if self.module is not None else ():
                assert isinstance(call, cst.Call)
                func = call.func
                if isinstance(func, cst.Subscript):
                    func = func.value
                if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
                    self._keywords.update(a.keyword.value for a in call.args if a.keyword is not None)
        return self._keywords

    def visit_Module(self, node: cst.Module) -> None:
        self.module = node
        for stmt in node.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Import | cst.ImportFrom):
                        self.available.update(local for local, _ in import_bindings(small))
            elif isinstance(stmt, cst.Try):
                for inner in stmt.body.body:
                    if isinstance(inner, cst.SimpleStatementLine):
                        for small in inner.body:
                            if isinstance(small, cst.Import | cst.ImportFrom):
                                self.available.update(local for local, _ in import_bindings(small))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        is_module: bool | str = False
        for base in node.bases:
            value = base.value.value if isinstance(base.value, cst.Subscript) else base.value
            qual = self.qualname(value)
            if qual in V2_LIBRARY_MODULES:
                self.todo("MV320", f"{node.name.value} subclasses {qual.rsplit('.', 1)[1]}, a V2 Module with no "
                          f"ModuleV3 form in max 26.7: {V2_LIBRARY_MODULES[qual]}")
            symbol = v2_symbol(self.qualname(base.value))
            if symbol in MODULE_NAMES:
                is_module = True
            elif symbol in LAYERS and not is_module:
                is_module = "layer"
            elif symbol in PORTS and not is_module and not _defines(node, "trace"):
                # a V2 class migrate-v3 ports (codemods.ports): a layer with V2's arguments (a root
                # with its own trace() is kv_cache's: it renames its __call__ with the trace)
                is_module = "port"
        self.classes.append(is_module)
        self.forward.append(None)

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        is_module = self.classes.pop()
        forward = self.forward.pop()
        if not self.classes:
            self.available.add(original.name.value)
        if is_module == "port":
            return updated
        if is_module == "layer":
            if defines_init(original) and id(original) not in self.state.layer_inits:
                symbols = [s for s in (v2_symbol(self.qualname(b.value)) for b in original.bases) if s in LAYERS]
                self.todo(
                    "MV345",
                    f"subclass of V2 {symbols[0]}: its __init__ does not call super().__init__(...) with "
                    "arguments migrate-v3 could map: make them follow the V3 class",
                )
            return updated
        if not is_module:
            return updated
        bases = []
        for orig_base, base in zip(original.bases, updated.bases, strict=True):
            symbol = v2_symbol(self.qualname(orig_base.value))
            if symbol in MODULE_NAMES:
                name = self.state.import_name(MODULE_HOME, "Module")
                generic = self._generic(forward)
                new_value: cst.BaseExpression = cst.Name(name)
                if generic is not None:
                    new_value = cst.parse_expression(f"{name}[{generic}]")
                    self.rewrote(original, "MV320", f"class {original.name.value}(Module[{generic}])")
                else:
                    self.rewrote(original, "MV320", f"class {original.name.value}(Module)")
                base = base.with_changes(value=new_value)
            bases.append(base)
        return updated.with_changes(bases=bases)

    def _generic(self, forward: cst.FunctionDef | None) -> str | None:
        if forward is None or forward.returns is None:
            return None
        params = forward.params
        positional = [*params.posonly_params, *params.params][1:]  # drop self
        variadic = (
            isinstance(params.star_arg, cst.Param)
            or params.star_kwarg is not None
            or bool(params.kwonly_params)
            or any(p.default is not None for p in positional)
            or any(p.name.value in self.keywords_to_children() for p in positional)
        )
        types: list[str] = []
        for p in positional:
            if p.annotation is None:
                return None
            types.append(source(p.annotation.annotation))
        ret = forward.returns.annotation
        requested = {alias or name for _, name, alias in self.state.needed_imports}
        for node in [*(p.annotation.annotation for p in positional if p.annotation), ret]:
            names = _root_names(node)
            if names is None or not names <= self.available | requested:
                return None
        ret_src = source(ret)
        if variadic:
            return f"..., {ret_src}"
        return f"[{', '.join(types)}], {ret_src}"

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.depth += 1

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``super().__call__(x)`` in a layer subclass → ``super().forward(x)`` (its ``__call__`` is ``forward`` now)."""
        func = updated.func
        if (
            self.classes
            and self.classes[-1] in ("layer", "port")
            and isinstance(func, cst.Attribute)
            and func.attr.value == "__call__"
            and isinstance(func.value, cst.Call)
            and isinstance(func.value.func, cst.Name)
            and func.value.func.value == "super"
        ):
            self.rewrote(original, "MV321", "super().__call__ → super().forward")
            return updated.with_changes(func=func.with_changes(attr=cst.Name("forward")))
        return updated

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.depth -= 1
        if self.depth == 0 and not self.classes:
            self.available.add(original.name.value)
        in_module_class = bool(self.classes) and self.classes[-1] and self.depth == 0
        if not in_module_class:
            return updated
        name = original.name.value
        if self.classes[-1] in ("layer", "port") and name != "__call__":
            return updated
        if name == "__call__":
            self.rewrote(original, "MV321", "__call__ → forward")
            updated = updated.with_changes(name=cst.Name("forward"))
            self.forward[-1] = updated
        elif name == "forward":
            self.forward[-1] = updated
        elif name == "__init__" and not _has_super_init(updated.body):
            self.rewrote(original, "MV322", "super().__init__() added")
            body = updated.body
            assert isinstance(body, cst.IndentedBlock)
            stmts = list(body.body)
            at = 1 if stmts and is_docstring(stmts[0]) else 0
            stmts.insert(at, cst.parse_statement("super().__init__()\n"))
            updated = updated.with_changes(body=body.with_changes(body=stmts))
        return updated


def _defines(node: cst.ClassDef, name: str) -> bool:
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else []
    return any(isinstance(stmt, cst.FunctionDef) and stmt.name.value == name for stmt in body)
