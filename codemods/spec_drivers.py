"""MV323 — a V2 speculative-decoding driver subclass → a ModuleV3 module over a per-trace driver.

max 26.7's ``BlockDriver`` and ``SequentialDriver`` (``max.pipelines.speculative``)
are graph-API modules with no ModuleV3 form, but they drive ModuleV3 target and
draft models through ``TensorAdapter`` adapters, as the official
``unified_mtp_glm5_2_modulev3`` does. A V2 subclass builds its target and draft
in ``__init__`` and hands them to the driver, so the model's weights are the
driver's ``target.*``/``draft.*``. Migrated, the class splits in two:

- ``<Name>Driver``: the V2 class, whose ``__init__`` takes the target and draft
  instead of building them; its overrides (``input_types``,
  ``signature_kv_params``...) stay on the driver;
- ``<Name>``: a ModuleV3 ``Module`` with V2's ``__init__`` parameters. It builds
  the target and draft (the statements they need, in order), holds them as
  ``target`` and ``draft`` (V2's weight names) and builds the driver per trace
  in ``driver()``: compiling traces a copy of the module whose parameters are
  the graph's weights, and the driver must call that copy's layers.
  ``input_types``, ``decode_inputs`` and ``forward`` go through it. ``forward``
  takes what the driver's ``__call__`` does (named inputs), so it carries a TODO:
  a caller compiling the module with ``input_types()`` decodes the flat inputs
  first, as the pipeline model's graph body does.

A spec-decode adapter (a class with no base that has the methods of the
driver's target or proposer protocol, in a file that imports from
``max.pipelines.speculative``) subclasses ``TensorAdapter``: the driver then
hands it ``Tensor`` values, which its migrated code takes.

A driver whose target or draft is not a local or a parameter of ``__init__``
(``draft_model=model.mtp``), is bound more than once or under a condition, or
whose ``__init__`` takes ``*args``/``**kwargs``, keeps MV320's TODO.

    class Spec(BlockDriver[Tensor, Tensor]):    →  class SpecDriver(BlockDriver[Tensor, Tensor]):
        def __init__(self, config):                   def __init__(self, config, *, target, draft): ...
            target = Llama3(config.target)         class Spec(Module[..., tuple[Tensor, ...]]):
            ...                                        def driver(self) -> SpecDriver: ...
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

import libcst as cst

from codemods.args import is_docstring, small_statement, source
from codemods.base import TODO_PREFIX, Codemod, FileState, attach_todos, nodes_of
from migrate_v3.knowledge.layers import MODULE_HOME, V2_LIBRARY_MODULES

#: the driver bases (``V2_LIBRARY_MODULES`` of ``max.pipelines.speculative``)
DRIVERS = frozenset(q for q in V2_LIBRARY_MODULES if q.startswith("max.pipelines.speculative."))
_BLOCK_DRIVER = "max.pipelines.speculative.block_driver.BlockDriver"
#: generics of the speculative package whose type parameters default to graph values (``TypeVar(...,
#: default=TensorValue)``: ``tests/test_knowledge.py``) → how many there are
TENSOR_GENERICS = {"SequentialBatch": 3, "DraftStepInput": 1, "Proposed": 1, "DistributedInputs": 1,
                   "SpecDecodeGraphInputs": 3}
_ADAPTER_HOME = "max.pipelines.speculative.driver"
#: the driver's attributes for the two models, by the keyword that passes each
_ROLES = {"target_model": "target", "draft_model": "draft"}


@dataclass(frozen=True)
class Bridge:
    """How a driver subclass splits: its ``__init__``, the statement calling the driver's, and
    the locals (or parameters) holding the target and the draft, by role."""

    init: cst.FunctionDef
    super_call: cst.BaseStatement
    models: dict[str, str]  # role → local name
    params: list[str]


def splits(node: cst.ClassDef, qualname: Callable[[cst.BaseExpression], str | None],
           module_names: Collection[str]) -> Bridge | None:
    """How ``node`` splits when it subclasses a V2 driver, builds a model of its own plainly and
    its ``<Name>Driver`` name is free (``qualname`` resolves ``node``'s base expressions); else None."""
    bases = (b.value.value if isinstance(b.value, cst.Subscript) else b.value for b in node.bases)
    if not any(qualname(b) in DRIVERS for b in bases) or f"{node.name.value}Driver" in module_names:
        return None
    return bridge(node)


def bridge(node: cst.ClassDef) -> Bridge | None:
    """The split of a driver subclass ``node`` (None when its models are not built plainly)."""
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    init = next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
    if init is None or not isinstance(init.body, cst.IndentedBlock):
        return None
    p = init.params
    if isinstance(p.star_arg, cst.Param) or p.star_kwarg is not None:
        return None
    params = [x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)][1:]
    calls = [s for s in init.body.body if _super_init(s) is not None]
    if len(calls) != 1:
        return None
    call = _super_init(calls[0])
    assert call is not None
    models: dict[str, str] = {}
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in _ROLES:
            name = _model_name(arg.value)
            if name is None:
                return None
            models[_ROLES[arg.keyword.value]] = name
    if len(models) != len(_ROLES) or len(set(models.values())) != len(models):
        return None
    if all(name in params for name in models.values()):
        return None  # (nothing built here: the driver is the caller's, and so is a split)
    bound = _Bindings()
    init.body.visit(bound)
    for name in models.values():
        if bound.count.get(name, 0) != (0 if name in params else 1):
            return None
    before = list(init.body.body)[: list(init.body.body).index(calls[0])]
    if any(name not in params and not any(_binds(s) == {name} for s in before) for name in models.values()):
        return None  # (bound, but not by a plain statement of its own before the call)
    plan = Bridge(init, calls[0], models, params)
    chosen = _model_statements(plan)
    local = _Bindings()
    for stmt in before:
        stmt.visit(local)
    given = set().union(*(_binds(s) or set() for s in chosen))
    if any(name in local.count and name not in given for s in chosen for name in _reads(s)):
        return None  # (the models need a local bound under a condition or in a loop: no plain slice)
    return plan


def _super_init(stmt: cst.CSTNode) -> cst.Call | None:
    small = small_statement(stmt)
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        func = small.value.func
        if (isinstance(func, cst.Attribute) and func.attr.value == "__init__" and isinstance(func.value, cst.Call)
                and isinstance(func.value.func, cst.Name) and func.value.func.value == "super"):
            return small.value
    return None


def _model_name(value: cst.BaseExpression) -> str | None:
    """``target`` or ``cast(Any, target)`` → ``target``."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "cast" and len(value.args) == 2:
        value = value.args[1].value
    return value.value if isinstance(value, cst.Name) else None


class _Bindings(cst.CSTVisitor):
    """How often each name is bound (assignments, loop and ``with`` targets, walrus)."""

    def __init__(self) -> None:
        super().__init__()
        self.count: dict[str, int] = {}

    def _add(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.count[target.value] = self.count.get(target.value, 0) + 1
        elif isinstance(target, cst.Tuple | cst.List):
            for el in target.elements:
                self._add(el.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._add(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._add(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._add(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._add(node.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._add(node.target)


def _binds(stmt: cst.CSTNode) -> set[str] | None:
    """Names a plain assignment statement binds (None for any other statement)."""
    small = small_statement(stmt)
    targets: list[cst.BaseExpression] = []
    if isinstance(small, cst.Assign):
        targets = [t.target for t in small.targets]
    elif isinstance(small, cst.AnnAssign) and small.value is not None:
        targets = [small.target]
    else:
        return None
    if not all(isinstance(t, cst.Name) for t in targets):
        return None
    return {t.value for t in targets if isinstance(t, cst.Name)}


def _mutated(stmt: cst.CSTNode) -> str | None:
    """``target.x = ...`` → ``target``: the name whose attribute the statement sets."""
    small = small_statement(stmt)
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        t = small.targets[0].target
        if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name):
            return t.value.value
    return None


class _Reads(cst.CSTVisitor):
    """Names an expression reads (attribute names and keywords are not reads)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        if not isinstance(node.target, cst.Name):  # (``target.x = ...`` reads ``target``)
            node.target.visit(self)
        return False

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        node.annotation.visit(self)
        if node.value is not None:
            node.value.visit(self)
        return False


def _reads(node: cst.CSTNode) -> set[str]:
    found = _Reads()
    node.visit(found)
    return found.names


class SpecDrivers(Codemod):
    PREFIX = "MV323"

    @classmethod
    def applies(cls, source: str) -> bool:
        return "max.pipelines.speculative" in source

    def __init__(self, state: FileState) -> None:
        super().__init__(state)
        self.depth = 0
        #: the file imports from the speculative package (where a class with a ``verify`` is an adapter)
        self.speculative = self.applies(state.source)
        #: inside a top-level adapter of the ``SequentialDriver`` (its annotations take Tensors)
        self.in_adapter = False

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.depth += 1
        if self.depth == 1:
            self.in_adapter = self.speculative and not node.bases and self._sequential_adapter(node)

    def leave_ClassDef(
        self, original: cst.ClassDef, updated: cst.ClassDef
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        self.depth -= 1
        if self.depth:
            return updated
        if self.in_adapter:
            self.in_adapter = False
            name = self.state.import_name(_ADAPTER_HOME, "TensorAdapter")
            self.rewrote(original, "MV323", f"spec-decode adapter {original.name.value} → a TensorAdapter (takes Tensors)")
            return updated.with_changes(bases=[cst.Arg(cst.Name(name))], lpar=cst.LeftParen(), rpar=cst.RightParen())
        if splits(original, self.qualname, self.state.module_names) is None:
            return updated
        new = bridge(updated)  # (the same statements, rewritten)
        if new is None:
            return updated
        self.rewrote(original, "MV323", f"{original.name.value} → a ModuleV3 module over {original.name.value}Driver, "
                     "the V2 driver built per trace")
        holder = self._holder(updated, new)
        if any(self.qualname(b.value.value if isinstance(b.value, cst.Subscript) else b.value) == _BLOCK_DRIVER
               for b in original.bases):
            todo = attach_todos(holder, [
                f"{TODO_PREFIX}MV323 max 26.7's BlockDriver calls its adapters with graph values (it has no "
                "TensorAdapter support, unlike SequentialDriver): the V3 target and draft get TensorValues from "
                "them; check that they run on those, or keep this model V2 until BlockDriver takes Tensor adapters"
            ])
            holder = todo if isinstance(todo, cst.ClassDef) else holder
        return cst.FlattenSentinel([self._driver(updated, new), holder])

    def _sequential_adapter(self, node: cst.ClassDef) -> bool:
        """A class with the methods of the ``SequentialDriver``'s target or proposer protocol (a
        target whose ``verify`` takes a ``BlockBatch`` is the ``BlockDriver``'s, which hands its
        adapters graph values whatever they subclass)."""
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        methods = {s.name.value: s for s in body if isinstance(s, cst.FunctionDef)}
        if {"prefill", "step"} <= methods.keys():
            return True
        verify = methods.get("verify")
        if verify is None or not verify.params.params[1:]:
            return False
        ann = verify.params.params[1].annotation
        return ann is None or not (self.qualname(ann.annotation) or "").endswith(".BlockBatch")

    def leave_Annotation(self, original: cst.Annotation, updated: cst.Annotation) -> cst.Annotation:
        """In a ``SequentialDriver`` adapter, the speculative generics whose parameters default to
        graph values take Tensors (``SequentialBatch`` → ``SequentialBatch[Tensor, Tensor, Tensor]``,
        ``Verified[h]`` → ``Verified[h, Tensor]``): the driver hands the adapter Tensors."""
        if not self.in_adapter:
            return updated
        new = updated.annotation.visit(_TensorGenerics(self, original.annotation))
        return updated.with_changes(annotation=new) if isinstance(new, cst.BaseExpression) else updated

    def _driver(self, cls: cst.ClassDef, plan: Bridge) -> cst.ClassDef:
        """The V2 class renamed, its ``__init__`` taking the models it built."""
        stmts = _statements(plan.init)
        slice_ = {id(s) for s in _model_statements(plan)}
        own = {m for m in plan.models.values() if m not in plan.params}
        models_made = {id(s) for s in stmts if (_binds(s) or set()) & own or _mutated(s) in plan.models.values()}
        # the module builds the models and sets their attributes; what else of the slice the rest
        # of the driver's __init__ does not read goes too
        dropped = {i for i in slice_ if i in models_made}
        while True:
            kept = [s for s in stmts if id(s) not in dropped]
            read = set().union(*(_reads(s) for s in kept))
            unused = {id(s) for s in kept if id(s) in slice_ and (_binds(s) or set()).isdisjoint(read)}
            if not unused:
                break
            dropped |= unused
        annotations = _annotations(cls)
        kwonly = [*plan.init.params.kwonly_params]
        for role, name in plan.models.items():
            if name in plan.params:
                continue
            ann = annotations.get(role)
            kwonly.append(cst.Param(cst.Name(name), cst.Annotation(ann) if ann is not None else None))
        params = plan.init.params.with_changes(kwonly_params=kwonly)
        if isinstance(params.star_arg, cst.MaybeSentinel):
            params = params.with_changes(star_arg=cst.ParamStar())
        init = _one_per_line(plan.init.with_changes(params=params, body=plan.init.body.with_changes(body=kept)))
        body = [init if s is plan.init else s for s in cls.body.body]
        return cls.with_changes(name=cst.Name(f"{cls.name.value}Driver"), body=cls.body.with_changes(body=body))

    def _holder(self, cls: cst.ClassDef, plan: Bridge) -> cst.ClassDef:
        """The ModuleV3 module: builds and holds the models, builds the driver per trace."""
        stmts = _statements(plan.init)
        at = stmts.index(plan.super_call)
        chosen = _model_statements(plan)
        after = [s for s in stmts[at + 1:] if _self_attribute_of_params(s, plan.params)]
        held = {*plan.models, "driver_arguments", *(a for s in after if (a := _self_attribute(s)) is not None)}
        forwarded = sorted({a for s in stmts[at + 1:] if (a := _self_attribute(s)) is not None} - held)
        module = self.state.import_name(MODULE_HOME, "Module")
        tensor = self.state.import_name("max.experimental.tensor", "Tensor")
        any_ = self.state.import_name("typing", "Any")
        driver = f"{cls.name.value}Driver"
        passed = ", ".join(f"{name}=self.{role}" for role, name in plan.models.items())
        annotations = _annotations(cls)
        lines = [f"{role}: {source(annotations[role])}\n" for role in plan.models if role in annotations]
        template = cst.parse_statement(
            f"class {cls.name.value}({module}[..., tuple[{tensor}, ...]]):\n"
            f'    """{_summary(cls)}\n\n'
            f"    The ModuleV3 module: it builds and holds the target and the draft (V2's weight names) and runs\n"
            f"    them through :class:`{driver}`, built per trace by :meth:`driver`.\n"
            '    """\n\n'
            + "".join(f"    {line}" for line in lines) + ("\n" if lines else "") +
            "    def __init__(self) -> None:\n"
            "        super().__init__()\n\n"
            f"    def driver(self) -> {driver}:\n"
            '        """The spec-decode driver over this module\'s target and draft.\n\n'
            "        Built per trace rather than held: compiling traces a copy of this module whose parameters\n"
            "        are the graph's weights, and the driver must call that copy's layers.\n"
            '        """\n'
            f"        return {driver}(**self.driver_arguments, {passed})\n\n"
            f"    def input_types(self, *args: {any_}, **kwargs: {any_}) -> {any_}:\n"
            "        return self.driver().input_types(*args, **kwargs)\n\n"
            f"    def decode_inputs(self, *args: {any_}, **kwargs: {any_}) -> {any_}:\n"
            "        return self.driver().decode_inputs(*args, **kwargs)\n\n"
            f"    def forward(self, *args: {any_}, **kwargs: {any_}) -> tuple[{tensor}, ...]:\n"
            f"        {TODO_PREFIX}MV323 forward takes what {driver}.__call__ takes (tokens, offsets and the rest "
            "by name), not the flat inputs input_types() declares: a caller compiling this module with those "
            "decodes them first (decode_inputs) and passes them by name, as the pipeline model's graph body does "
            "(migrate-v3 moves that body into a <Root>FlatInputs subclass when it rewrites the pipeline model; "
            "unified_mtp_glm5_2_modulev3 decodes in forward by hand)\n"
            "        return self.driver()(*args, **kwargs)\n"
            + "".join(
                f"\n    @property\n    def {a}(self) -> {any_}:\n"
                f'        """The driver\'s ``{a}`` (its ``__init__`` computes it)."""\n'
                f"        return self.driver().{a}\n"
                for a in forwarded
            )
        )
        assert isinstance(template, cst.ClassDef)
        tail = [
            *(cst.parse_statement(f"self.{role} = {name}\n") for role, name in plan.models.items()),
            *after,
            cst.parse_statement(_arguments_dict(plan.params, plan.models.values(), any_)),
        ]
        body = list(template.body.body)
        init = next(s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__")
        assert isinstance(init.body, cst.IndentedBlock)
        init = init.with_changes(
            params=plan.init.params,
            whitespace_before_params=plan.init.whitespace_before_params,
            returns=plan.init.returns,
            body=init.body.with_changes(body=[*init.body.body, *chosen, *tail]),
        )
        body = [init if isinstance(s, cst.FunctionDef) and s.name.value == "__init__" else s for s in body]
        return template.with_changes(
            body=template.body.with_changes(body=body),
            leading_lines=[cst.EmptyLine(), cst.EmptyLine()],
        )


def _arguments_dict(params: list[str], models: Collection[str], any_: str) -> str:
    """``self.driver_arguments = {...}``: the ``__init__`` parameters the driver takes besides the
    models, one per line when they do not fit on one (a holder's ``__init__`` is indented twice)."""
    items = [f'"{p}": {p}' for p in params if p not in models]
    head = f"self.driver_arguments: dict[str, {any_}] = {{"
    if len(head) + sum(len(i) + 2 for i in items) + 8 <= 100:
        return f"{head}{', '.join(items)}}}\n"
    return head + "".join(f"\n    {i}," for i in items) + "\n}\n"


def _statements(fn: cst.FunctionDef) -> list[cst.BaseStatement]:
    assert isinstance(fn.body, cst.IndentedBlock)  # (``bridge`` takes no other)
    return list(fn.body.body)


def _model_statements(plan: Bridge) -> list[cst.BaseStatement]:
    """The statements before the driver's ``__init__`` that build the models or set their
    attributes, and those binding what they read (a backward slice, in order)."""
    stmts = _statements(plan.init)
    needed = {m for m in plan.models.values() if m not in plan.params}
    chosen: list[cst.BaseStatement] = []
    for stmt in reversed(stmts[: stmts.index(plan.super_call)]):
        if (_binds(stmt) or set()) & needed or _mutated(stmt) in plan.models.values():
            chosen.insert(0, stmt)
            needed |= _reads(stmt)
    return chosen


def _one_per_line(fn: cst.FunctionDef) -> cst.FunctionDef:
    """``fn`` (a method) with its parameters one per line, as black lays out a signature that was
    already on several lines or is now too long for one (parameters were added)."""
    p = fn.params
    text = source(p)
    if p.posonly_params or ("\n" not in text and len(f"    def {fn.name.value}({text})") <= 88):
        return fn
    items: list[cst.Param | cst.ParamStar] = [*p.params]
    if isinstance(p.star_arg, cst.Param | cst.ParamStar):
        items.append(p.star_arg)
    items.extend(p.kwonly_params)
    if p.star_kwarg is not None:
        items.append(p.star_kwarg)
    laid = [_line_end(x, last=k == len(items) - 1) for k, x in enumerate(items)]
    at = len(p.params)
    has_star = isinstance(p.star_arg, cst.Param | cst.ParamStar)
    params = p.with_changes(
        params=laid[:at],
        star_arg=laid[at] if has_star else p.star_arg,
        kwonly_params=laid[at + has_star: at + has_star + len(p.kwonly_params)],
        star_kwarg=laid[-1] if p.star_kwarg is not None else None,
    )
    return fn.with_changes(params=params, whitespace_before_params=_newline("    ", None))


def _newline(indent: str, old: object) -> cst.ParenthesizedWhitespace:
    """A line break inside the parentheses, then ``indent`` past the method's own (a comment the
    line had is kept)."""
    first = old.first_line if isinstance(old, cst.ParenthesizedWhitespace) else cst.TrailingWhitespace()
    return cst.ParenthesizedWhitespace(first_line=first, empty_lines=[], indent=True, last_line=cst.SimpleWhitespace(indent))


def _line_end(item: cst.Param | cst.ParamStar, *, last: bool) -> cst.Param | cst.ParamStar:
    old = item.comma.whitespace_after if isinstance(item.comma, cst.Comma) else None
    comma = cst.Comma(whitespace_after=_newline("" if last else "    ", old))
    if isinstance(item, cst.Param):
        return item.with_changes(comma=comma, whitespace_after_param=cst.SimpleWhitespace(""))
    return item.with_changes(comma=comma)


def _annotations(cls: cst.ClassDef) -> dict[str, cst.BaseExpression]:
    """The class body's bare annotations (``target: Llama3``)."""
    found: dict[str, cst.BaseExpression] = {}
    for stmt in cls.body.body:
        small = small_statement(stmt)
        if isinstance(small, cst.AnnAssign) and small.value is None and isinstance(small.target, cst.Name):
            found[small.target.value] = small.annotation.annotation
    return found


def _summary(cls: cst.ClassDef) -> str:
    """The first line of the class's docstring, else its name."""
    first = cls.body.body[0] if cls.body.body else None
    if first is not None and is_docstring(first):
        small = small_statement(first)
        assert isinstance(small, cst.Expr)
        value = small.value
        if isinstance(value, cst.SimpleString):
            text = value.evaluated_value
            if isinstance(text, str) and text.strip():
                return text.strip().splitlines()[0].replace('"""', "'''")
    return f"{cls.name.value}."


def _self_attribute(stmt: cst.CSTNode) -> str | None:
    """``self.x = ...`` → ``x``."""
    small = small_statement(stmt)
    if isinstance(small, cst.Assign | cst.AnnAssign):
        t = small.targets[0].target if isinstance(small, cst.Assign) else small.target
        if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self":
            return t.attr.value
    return None


def _self_attribute_of_params(stmt: cst.CSTNode, params: list[str]) -> bool:
    """``self.config = config``: an attribute set from the parameters alone (the module keeps it too)."""
    small = small_statement(stmt)
    if not isinstance(small, cst.Assign) or len(small.targets) != 1:
        return False
    t = small.targets[0].target
    if not (isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self"):
        return False
    return _reads(small.value) <= {*params, "int", "float", "bool", "str", "list", "tuple", "dict", "len"}


class _TensorGenerics(cst.CSTTransformer):
    """Parameterizes the speculative generics of one annotation with ``Tensor`` (names resolved on
    the original annotation, whose nodes line up with the updated one's in order)."""

    def __init__(self, codemod: SpecDrivers, original: cst.BaseExpression) -> None:
        super().__init__()
        self.codemod = codemod
        self.tensor = codemod.state.import_name("max.experimental.tensor", "Tensor")
        names = [n for n in nodes_of(original, (cst.Name,)) if isinstance(n, cst.Name)]
        self.generic = {n.value for n in names if (q := codemod.qualname(n) or "").startswith(
            "max.pipelines.speculative.") and q.rsplit(".", 1)[1] in (*TENSOR_GENERICS, "Verified")}
        #: names already subscripted, or attribute names: left as they are
        self.subscripted: set[int] = set()

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self.subscripted.add(id(node.value))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.subscripted.add(id(node.attr))  # (an attribute's name is no generic to parameterize)

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        name = updated.value.value if isinstance(updated.value, cst.Name) else None
        if name == "Verified" and name in self.generic and len(updated.slice) == 1:
            return updated.with_changes(slice=[
                updated.slice[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                cst.SubscriptElement(cst.Index(cst.Name(self.tensor))),
            ])
        return updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        count = TENSOR_GENERICS.get(updated.value)
        if count is None or updated.value not in self.generic or id(original) in self.subscripted:
            return updated
        return cst.parse_expression(f"{updated.value}[{', '.join([self.tensor] * count)}]")
