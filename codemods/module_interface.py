"""MV32x — the module surface: generic ``Module`` base, ``forward``, ``super().__init__()``.

For a subclass of the V2 ``Module`` (or ``Layer``): ``__call__`` becomes
``forward``; the base becomes ``Module[[arg types], return type]`` built from
``forward``'s (already rewritten) annotations — ``...`` when it takes
``*args``/``**kwargs``/keyword-only arguments, a parameter with a default, or
parameters a call in the package could pass by keyword (a ``[A, B]`` list is
positional and required for mypy: ``m(x)`` that omits the default, or
``m(x, mask=m)``, would be an error in correct code). A module is called through
attributes, locals, loop variables and other files (the pipeline model's
``encoder(pixel_values=...)``), so the call rarely shows its class: every call
but one of a class, a function or a method of ``self``'s class counts, for each
class whose parameters its arguments could bind to (``call_keywords``, which the
plan gathers per package). Bare ``Module`` when an annotation
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

import ast
import builtins
from collections.abc import Iterable

import libcst as cst

from codemods.args import is_docstring, source
from codemods.base import CallShape, Codemod
from codemods.layers import defines_init
from codemods.resolve import import_bindings, statement_blocks
from codemods.spec_drivers import splits
from migrate_v3.knowledge.layers import (
    LAYERS,
    MODULE_HOME,
    MODULE_NAMES,
    V2_LIBRARY_MODULES,
    module_kind,
    v2_symbol,
)

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
        #: this file's top-level classes that are modules (a later class may derive from one)
        self.module_names: set[str] = set()
        self._keywords: frozenset[CallShape] | None = None

    def keyword_calls(self) -> frozenset[CallShape]:
        """The package's calls that pass names by keyword (the plan's; without one, this file's)."""
        if self._keywords is None:
            known = self.state.context.call_keywords
            if known is None:
                try:
                    known = call_keywords([ast.parse(self.state.source)])
                except (SyntaxError, ValueError):
                    known = frozenset()
            self._keywords = known
        return self._keywords

    def visit_Module(self, node: cst.Module) -> None:
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
            if qual in V2_LIBRARY_MODULES and splits(node, self.qualname, self.state.module_names) is None:
                self.todo("MV320", f"{node.name.value} subclasses {qual.rsplit('.', 1)[1]}, a V2 Module with no "
                          f"ModuleV3 form in max 26.7: {V2_LIBRARY_MODULES[qual]}")
            kind = module_kind(v2_symbol(self.qualname(base.value)))
            if kind == "module":
                is_module = True
            elif kind == "layer" and not is_module:
                is_module = "layer"
            elif kind == "port" and not is_module and not _defines(node, "trace"):
                # a V2 class migrate-v3 ports (codemods.ports): a layer with V2's arguments (a root
                # with its own trace() is kv_cache's: it renames its __call__ with the trace)
                is_module = "port"
            elif not is_module and not _defines(node, "trace") and self._derived(base.value):
                is_module = "derived"
        if is_module and not self.classes:
            self.module_names.add(node.name.value)
        self.classes.append(is_module)
        self.forward.append(None)

    def _derived(self, base: cst.BaseExpression) -> bool:
        """``base`` is a class of this file, of the package or of a sibling that derives from a
        ``max`` module class (the plan's ``module_classes``): a module of the package's own."""
        if isinstance(base, cst.Name) and base.value in self.module_names:
            return True
        ctx = self.state.context
        if not ctx.module_classes:
            return False
        qualname = self.qualname(base) or ""
        if qualname.startswith("."):  # relative to the file's package
            dots = len(qualname) - len(qualname.lstrip("."))
            package = ctx.file_package.split(".") if ctx.file_package else []
            if dots - 1 > len(package):
                return False
            qualname = ".".join([*package[: len(package) - (dots - 1)], qualname[dots:]])
        elif qualname.startswith(ctx.architectures_package + "."):
            qualname = qualname[len(ctx.architectures_package) + 1:]
        return qualname in ctx.module_classes

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        is_module = self.classes.pop()
        forward = self.forward.pop()
        if not self.classes:
            self.available.add(original.name.value)
        if is_module in ("port", "derived"):
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
                generic = self._generic(forward, original.name.value)
                new_value: cst.BaseExpression = cst.Name(name)
                if generic is not None:
                    new_value = cst.parse_expression(f"{name}[{generic}]")
                    self.rewrote(original, "MV320", f"class {original.name.value}(Module[{generic}])")
                else:
                    self.rewrote(original, "MV320", f"class {original.name.value}(Module)")
                base = base.with_changes(value=new_value)
            bases.append(base)
        return updated.with_changes(bases=bases)

    def _generic(self, forward: cst.FunctionDef | None, cls: str) -> str | None:
        if forward is None or forward.returns is None:
            return None
        params = forward.params
        positional = [*params.posonly_params, *params.params][1:]  # drop self
        variadic = (
            isinstance(params.star_arg, cst.Param)
            or params.star_kwarg is not None
            or bool(params.kwonly_params)
            or any(p.default is not None for p in positional)
            or any(binds_by_keyword(call, cls, [p.name.value for p in positional]) for call in self.keyword_calls())
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
            and self.classes[-1] in ("layer", "port", "derived")
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
        if self.classes[-1] in ("layer", "port", "derived") and name != "__call__":
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


def call_keywords(trees: Iterable[ast.Module]) -> frozenset[CallShape]:
    """The calls in ``trees`` that pass a name by keyword and may call a module instance: all
    but calls of a name the module binds at top level or a builtin (a class, a function) or of
    an attribute of one (``F.gelu``, ``nn.Linear``), of ``super()``'s methods, of ``cls(...)``
    and of ``self.m``/``cls.m`` where the enclosing class defines ``m``."""
    found: set[CallShape] = set()
    for tree in trees:
        top = _top_level_names(tree) | _BUILTINS | {"cls"}
        # (a walk of its own: ``ast.NodeVisitor`` took 3x as long)
        stack: list[tuple[ast.AST, tuple[str, set[str]] | None]] = [(tree, None)]
        while stack:
            node, cls = stack.pop()
            if type(node) is ast.ClassDef:
                cls = (node.name, {s.name for s in node.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)})
            elif type(node) is ast.Call and node.keywords:
                shape = _shape(node, cls, top)
                if shape is not None:
                    found.add(shape)
            for name in node._fields:
                value = getattr(node, name, None)
                if type(value) is list:
                    stack.extend((v, cls) for v in value if isinstance(v, ast.AST) and type(v) not in _LEAVES)
                elif isinstance(value, ast.AST) and type(value) not in _LEAVES:
                    stack.append((value, cls))
    return frozenset(found)


#: nodes that hold no call: not pushed on ``call_keywords``' stack (most nodes of a tree are these)
_LEAVES = frozenset({ast.Name, ast.Constant, ast.Load, ast.Store, ast.Del, ast.alias, ast.Pass})


def _shape(call: ast.Call, cls: tuple[str, set[str]] | None, top: set[str] | frozenset[str]) -> CallShape | None:
    """``call``'s shape, or None when it passes nothing by keyword or calls no module."""
    keywords = frozenset(k.arg for k in call.keywords if k.arg is not None)
    func = call.func
    if not keywords or (
        isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls")
        and cls is not None and func.attr in cls[1]
    ):
        return None
    root = func
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Call) and isinstance(root.func, ast.Name) and root.func.id == "super":
        return None
    if isinstance(root, ast.Name) and root.id in top:
        return None
    positional = None if any(isinstance(a, ast.Starred) for a in call.args) else len(call.args)
    of = cls[0] if cls is not None and isinstance(func, ast.Name) and func.id == "self" else None
    return CallShape(positional, keywords, len(keywords) < len(call.keywords), of)


def binds_by_keyword(call: CallShape, cls: str, params: list[str]) -> bool:
    """Could ``call`` be a correct call of class ``cls`` whose forward takes ``params`` (all
    positional and required), some of them by keyword?"""
    if call.of is not None and call.of != cls:
        return False
    if call.positional is None:  # (a * spread: any number of positionals)
        return call.keywords <= set(params)
    rest = params[call.positional:]
    if call.positional > len(params) or not call.keywords <= set(rest):
        return False
    return call.spread or len(call.keywords) == len(rest)


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update(a.asname or a.name.split(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.If | ast.Try | ast.With):
            for block in statement_blocks(node):
                stack.extend(block)
    return names
