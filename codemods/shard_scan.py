"""What a V2 class's sharding machinery says, read from its source (no rewriting).

V2 spreads one decision over three places: a ``sharding_strategy`` setter
that assigns each child a ``ShardingStrategy`` (its tensor-parallel branch
is the layout), ``shard(devices)`` that clones the module per device, and
the parent's ``self.x_shards = self.x.shard(devices)`` plus per-device loops
in ``__call__``. The ``sharding`` codemod needs all three before it rewrites
any of them, so this module reads a class once, on the original tree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import libcst as cst

from codemods.args import bind, source
from codemods.base import nodes_of
from codemods.resolve import dotted
from migrate_v3.knowledge.layers import CONTAINER_NAMES
from migrate_v3.knowledge.sharding import PREDICATES, STRATEGIES

Qualname = Callable[[cst.BaseExpression], "str | None"]

#: Calls that clone a module per device with per-device head counts: a class
#: whose ``shard()`` uses one computes with local sizes in its forward.
HEAD_SPLITTERS = frozenset({"num_heads_for_device", "_compute_shard_range"})


def _calls_head_splitter(call: cst.CSTNode) -> bool:
    """A call of one of them (``x.num_heads_for_device(...)`` too; not a name in a comment)."""
    func = call.func if isinstance(call, cst.Call) else None
    name = func.attr if isinstance(func, cst.Attribute) else func
    return isinstance(name, cst.Name) and name.value in HEAD_SPLITTERS


def strategy_kind(expr: cst.BaseExpression, qualname: Qualname) -> str | None:
    """``ShardingStrategy.rowwise(n)`` → ``"rowwise"`` (any known factory), else None."""
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Attribute):
        return None
    qual = qualname(expr.func)
    name = expr.func.attr.value
    if qual is None or not qual.startswith("max.") or ".ShardingStrategy." not in qual + ".":
        return None
    return name if name in STRATEGIES else None


def body_statements(node: cst.CSTNode, *, into_defs: bool = False) -> Iterator[cst.BaseSmallStatement]:
    """Every small statement under ``node``'s statement bodies (not in nested classes, nor in
    nested defs unless ``into_defs``: a class's methods, for one).

    Walks statement fields by name (``body``, ``orelse``, ``handlers``...):
    libcst's generic ``children`` costs a visitor per node.
    """
    todo: list[object] = [node]
    while todo:
        cur = todo.pop()
        if isinstance(cur, cst.SimpleStatementLine | cst.SimpleStatementSuite):
            yield from cur.body
        elif isinstance(cur, cst.IndentedBlock):
            todo.extend(reversed(cur.body))
        elif cur is not node and (isinstance(cur, cst.ClassDef) or (isinstance(cur, cst.FunctionDef) and not into_defs)):
            continue
        elif isinstance(cur, cst.CSTNode):
            for attr in ("finalbody", "orelse", "body"):
                sub = getattr(cur, attr, None)
                if isinstance(sub, cst.CSTNode):
                    todo.append(sub)
            todo.extend(getattr(cur, "handlers", ()))
            todo.extend(getattr(cur, "cases", ()))


def local_strategies(func: cst.FunctionDef, qualname: Qualname) -> dict[str, str]:
    """Names a function binds to ``ShardingStrategy.<factory>(...)``: name → factory."""
    out: dict[str, str] = {}
    for small in body_statements(func.body):
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target = small.targets[0].target
            kind = strategy_kind(small.value, qualname)
            if isinstance(target, cst.Name) and kind is not None:
                out[target.value] = kind
    return out


def assigned(small: cst.BaseSmallStatement) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """``t = v`` or ``t: T = v`` → (t, v)."""
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        return small.targets[0].target, small.value
    if isinstance(small, cst.AnnAssign) and small.value is not None:
        return small.target, small.value
    return None


def strategy_assignment(small: cst.BaseSmallStatement) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """``<target>.sharding_strategy = <value>`` → (target, value)."""
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        if isinstance(target, cst.Attribute) and target.attr.value == "sharding_strategy":
            return target.value, small.value
    return None


def self_attribute(expr: cst.BaseExpression) -> str | None:
    """``self.<attr>`` → ``attr`` (None for anything else)."""
    name = dotted(expr)
    return name[5:] if name is not None and name.startswith("self.") and name.count(".") == 1 else None


def shard_call(expr: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """``<module>.shard(<devices>)`` (or ``list(...)`` of it), or ``[<module>] * n`` (the one
    module on every device: a stateless one) → the module expression."""
    nested = _per_device_lists(expr)
    if nested is not None:
        return nested
    if (
        isinstance(expr, cst.BinaryOperation)
        and isinstance(expr.operator, cst.Multiply)
        and isinstance(expr.left, cst.List)
        and len(expr.left.elements) == 1
        and not isinstance(expr.left.elements[0], cst.StarredElement)
    ):
        return expr.left.elements[0].value
    if (
        isinstance(expr, cst.Call)
        and dotted(expr.func) in ("list", "tuple")
        and len(expr.args) == 1
        and expr.args[0].keyword is None
        and not expr.args[0].star
    ):
        expr = expr.args[0].value
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value == "shard"
        and len(expr.args) == 1
        and expr.args[0].keyword is None
    ):
        return expr.func.value
    return None


def _per_device_lists(expr: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """``[[m.shard(devices)[i] for m in MODULES] for i in range(n)]`` (per device, that device's
    clone of each module) → ``MODULES``: in V3 every device's list is the one list of modules."""
    if not (isinstance(expr, cst.ListComp) and isinstance(expr.elt, cst.ListComp)):
        return None
    outer, inner = expr.for_in, expr.elt.for_in
    if outer.inner_for_in is not None or inner.inner_for_in is not None or outer.ifs or inner.ifs:
        return None
    index, module, elt = outer.target, inner.target, expr.elt.elt
    if not (
        isinstance(index, cst.Name) and isinstance(module, cst.Name)
        and isinstance(elt, cst.Subscript) and len(elt.slice) == 1
        and isinstance(elt.slice[0].slice, cst.Index) and dotted(elt.slice[0].slice.value) == index.value
    ):
        return None
    clone = shard_call(elt.value)
    return inner.iter if clone is not None and dotted(clone) == module.value else None


_PER_DEVICE_VALUES = frozenset({"TensorValue", "BufferValue", "PagedCacheValues", "Tensor"})


def per_device_element(ann: cst.BaseExpression) -> cst.BaseExpression | None:
    """``list[TensorValue]`` / ``Sequence[BufferValue]`` → the element type (one value on the mesh in V3)."""
    if not isinstance(ann, cst.Subscript) or len(ann.slice) != 1:
        return None
    outer = dotted(ann.value) or ""
    inner = ann.slice[0].slice
    if outer.rsplit(".", 1)[-1] not in ("list", "Sequence", "List") or not isinstance(inner, cst.Index):
        return None
    name = dotted(inner.value) or ""
    return inner.value if name.rsplit(".", 1)[-1] in _PER_DEVICE_VALUES else None


def one_per_device_annotation(ann: cst.BaseExpression) -> cst.BaseExpression | None:
    """``list[TensorValue]`` → ``TensorValue``, ``list[TensorValue] | None`` → ``TensorValue | None``; else None."""
    one = per_device_element(ann)
    if one is not None or not (isinstance(ann, cst.BinaryOperation) and isinstance(ann.operator, cst.BitOr)):
        return one
    left, right = per_device_element(ann.left), per_device_element(ann.right)
    if left is not None and is_none(ann.right):
        return ann.with_changes(left=left)
    if right is not None and is_none(ann.left):
        return ann.with_changes(right=right)
    return None


def is_none(node: cst.BaseExpression) -> bool:
    """``node`` is the name ``None``."""
    return isinstance(node, cst.Name) and node.value == "None"


def not_none(ann: cst.BaseExpression) -> cst.BaseExpression:
    """``T | None`` → ``T``."""
    if isinstance(ann, cst.BinaryOperation) and isinstance(ann.operator, cst.BitOr):
        return ann.right if is_none(ann.left) else ann.left
    return ann


def one_per_device(params: cst.Parameters, names: set[str] | None = None) -> cst.Parameters:
    """``xs: list[TensorValue]`` → ``xs: TensorValue`` (one distributed value in V3; ``| None`` kept), for
    every parameter annotated as a per-device list, or only those in ``names``."""
    def one(p: cst.Param) -> cst.Param:
        if (names is not None and p.name.value not in names) or p.annotation is None:
            return p
        ann = one_per_device_annotation(p.annotation.annotation)
        return p if ann is None else p.with_changes(annotation=p.annotation.with_changes(annotation=ann))

    return params.with_changes(params=[one(p) for p in params.params], kwonly_params=[one(p) for p in params.kwonly_params])


@dataclass(frozen=True)
class ShardHelper:
    """A module-level function that only returns ``.shard(devices)`` clones of its parameters."""

    params: tuple[str, ...]
    #: the parameter each returned element clones, in order (one element: not a tuple)
    clones: tuple[str, ...]

    def sources(self, call: cst.Call) -> list[cst.BaseExpression] | None:
        """The argument expressions of ``call`` that the returned clones stand for."""
        bound = bind(call, self.params)
        if bound is None or any(name not in bound.args for name in self.clones):
            return None
        return [bound.args[name].value for name in self.clones]


def shard_helpers(module: cst.Module) -> dict[str, ShardHelper]:
    """``def f(mlp, norm, devices): ...; return mlp.shard(devices), norm.shard(devices)`` → f.

    A class that unpacks such a call into ``self.<x>_shards`` attributes holds
    clones of the modules passed in, as ``self.x_shards = self.x.shard(devices)`` does.
    """
    out: dict[str, ShardHelper] = {}
    for stmt in module.body:
        if not isinstance(stmt, cst.FunctionDef):
            continue
        params = tuple(p.name.value for p in (*stmt.params.posonly_params, *stmt.params.params))
        returns = [s for s in body_statements(stmt.body) if isinstance(s, cst.Return)]
        if len(returns) != 1 or returns[0].value is None:
            continue
        value = returns[0].value
        elts = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
        clones = [shard_call(e) for e in elts]
        names = tuple(c.value for c in clones if isinstance(c, cst.Name) and c.value in params)
        if len(names) == len(elts):
            out[stmt.name.value] = ShardHelper(params, names)
    return out


def computes_on(elt: cst.BaseExpression, name: str) -> bool:
    """``name`` occurs in ``elt`` only as a value computed with: an operand (``h * k``, ``-h``), a
    call argument (``f(h)``) or a method's receiver (``h.cast(t)``); never read for an attribute
    (``h.device``) or as the whole element. Such an element means the same on one distributed Tensor."""
    if isinstance(elt, cst.Name):
        return False
    check = _ComputesOn(name)
    elt.visit(check)
    return check.ok and check.uses > 0


class _ComputesOn(cst.CSTVisitor):
    """:func:`computes_on`'s walk (at module level: a class defined per call is a reference cycle)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.allowed: set[int] = set()
        self.uses = 0
        self.ok = True

    def is_it(self, node: cst.CSTNode) -> bool:
        return isinstance(node, cst.Name) and node.value == self.name

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        self.allowed.update(id(n) for n in (node.left, node.right) if self.is_it(n))

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        if self.is_it(node.expression):
            self.allowed.add(id(node.expression))

    def visit_Call(self, node: cst.Call) -> None:
        self.allowed.update(id(a.value) for a in node.args if not a.star and self.is_it(a.value))
        if isinstance(node.func, cst.Attribute) and self.is_it(node.func.value):
            self.allowed.add(id(node.func.value))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name:
            self.uses += 1
            self.ok = self.ok and id(node) in self.allowed

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)  # ``.name`` (the attribute itself) is not a reference
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        self.ok = False
        return False


def _names_moe(expr: cst.CSTNode) -> bool:
    """An annotation or callee naming an MoE class (``MoE``, ``MoEQuantized``, ``Qwen3VLMoE``, ``MLP | MoE``)."""
    return any(
        isinstance(node, cst.Name) and node.value.endswith(("MoE", "MoEQuantized")) for node in nodes_of(expr, (cst.Name,))
    )


def may_be_moe(where: str, func: cst.FunctionDef, cls: cst.ClassDef | None) -> bool:
    """``where`` (``self.mlp`` or a local of ``func``) may hold an MoE: its annotation, the class
    that builds it, the return annotation of the method that builds it, or the annotation of
    the parameter it was given says so. (V3's MoE needs another class under tensor parallelism.)"""
    methods = {f.name.value: f for f in cls.body.body if isinstance(f, cst.FunctionDef)} if cls is not None else {}
    if where.startswith("self.") and where.count(".") == 1:
        scopes = list(methods.values())
    elif where.isidentifier():
        scopes = [func]
    else:
        return False
    for scope in scopes:
        params = {p.name.value: p.annotation for p in scope.params.params}
        for small in body_statements(scope.body):
            if isinstance(small, cst.AnnAssign) and dotted(small.target) == where and _names_moe(small.annotation):
                return True
            found = assigned(small)
            if found is None or dotted(found[0]) != where:
                continue
            value = found[1]
            if isinstance(value, cst.Call):
                callee = dotted(value.func) or ""
                method = methods.get(callee[5:]) if callee.startswith("self.") else None
                if _names_moe(value.func) or (method is not None and method.returns is not None and _names_moe(method.returns)):
                    return True
            elif isinstance(value, cst.Name) and (ann := params.get(value.value)) is not None and _names_moe(ann):
                return True
    return False


def _one_line(node: cst.CSTNode) -> str:
    return " ".join(source(node).split())


def _is_setter(func: cst.FunctionDef) -> bool:
    return func.name.value == "sharding_strategy" and any(
        dotted(d.decorator) == "sharding_strategy.setter" for d in func.decorators
    )


def _is_getter(func: cst.FunctionDef) -> bool:
    return func.name.value == "sharding_strategy" and any(dotted(d.decorator) == "property" for d in func.decorators)


def _predicates(test: cst.BaseExpression) -> set[str]:
    """The ``ShardingStrategy`` factories an ``if`` test asks about (``s.is_replicate`` → replicate)."""
    return {
        PREDICATES[node.attr.value]
        for node in nodes_of(test, (cst.Attribute,))
        if isinstance(node, cst.Attribute) and node.attr.value in PREDICATES
    }


@dataclass
class Placement:
    """One V3 placement a setter's tensor-parallel branch implies."""

    target: str  # dotted, from ``self``
    function: str  # col_parallel | row_parallel
    axis: int  # the tensor axis V2 sliced (0 for col_parallel)
    tensor: bool  # the target is a weight tensor, not a Linear-like module
    kind: str  # the V2 factory it came from


@dataclass
class SetterPlan:
    """The V3 reading of one ``sharding_strategy`` setter."""

    placements: list[Placement] = field(default_factory=list)
    #: reasons a person must finish the layout (each becomes one TODO)
    todos: list[str] = field(default_factory=list)


def _branch_statements(body: cst.BaseSuite, param: str) -> Iterator[tuple[cst.BaseSmallStatement, str]]:
    """Small statements of a setter with the branch they sit in: tp | replicate | other | top."""
    return _walk_branch(body, "top")


# (module-level generators: recursive closures are a reference cycle per call)
def _walk_branch(suite: cst.BaseSuite, branch: str) -> Iterator[tuple[cst.BaseSmallStatement, str]]:
    if isinstance(suite, cst.SimpleStatementSuite):
        for small in suite.body:
            yield small, branch
        return
    assert isinstance(suite, cst.IndentedBlock)
    for stmt in suite.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                yield small, branch
        elif isinstance(stmt, cst.If):
            yield from _walk_if(stmt, branch)
        elif isinstance(stmt, cst.BaseCompoundStatement):
            for small in body_statements(stmt):
                yield small, "nested" if branch in ("top", "tp") else branch


def _walk_if(node: cst.If, branch: str) -> Iterator[tuple[cst.BaseSmallStatement, str]]:
    asked = _predicates(node.test)
    if "tensor_parallel" in asked:
        inner = "tp" if branch in ("top", "tp") else branch
    elif asked == {"replicate"}:
        inner = "replicate"
    elif asked:
        inner = "other"
    else:
        inner = "nested" if branch in ("top", "tp") else branch
    yield from _walk_branch(node.body, inner)
    orelse = node.orelse
    if isinstance(orelse, cst.If):
        yield from _walk_if(orelse, branch)
    elif isinstance(orelse, cst.Else):
        # ``if s.is_replicate: ... else: <tp>`` — the else of a replicate test is the TP layout
        yield from _walk_branch(orelse.body, "tp" if asked == {"replicate"} and branch in ("top", "tp") else inner)



def target_form(where: str, facts: ClassFacts, self_placing: set[str]) -> str | None:
    """How V3 places ``self.<x>``: linear | tensor | stacked | self (it places itself) | None (unknown)."""
    parts = where.split(".")
    if parts[0] != "self" or len(parts) < 2:
        return None
    root = parts[1]
    callee = facts.built_by.get(root, "")
    if callee in self_placing:
        return "self"
    if parts[-1] in ("weight", "bias") or (root in facts.tensors and len(parts) == 2):
        return "tensor"
    if len(parts) != 2:
        return None
    if root in facts.stacked:
        return "stacked"
    return "linear" if is_linear_like(callee) else None


def setter_plan(func: cst.FunctionDef, qualname: Qualname, facts: ClassFacts, self_placing: set[str]) -> SetterPlan:
    """The placements a setter's tensor-parallel branch (or unconditional body) assigns."""
    plan = SetterPlan()
    params = func.params.params
    param = params[1].name.value if len(params) > 1 else ""
    local = local_strategies(func, qualname)
    for small, branch in _branch_statements(func.body, param):
        found = strategy_assignment(small)
        if found is None or branch in ("replicate", "other"):
            continue
        target, value = found
        where = dotted(target)
        if isinstance(value, cst.Name) and value.value == param:
            continue  # the parent's strategy passed down: the child places itself
        kind = strategy_kind(value, qualname)
        if kind is None and isinstance(value, cst.Name):
            kind = local.get(value.value)
        if where is None or not where.startswith("self."):
            plan.todos.append(f"place {_one_line(target)} by hand (not a self attribute)")
            continue
        if kind is None:
            plan.todos.append(f"{where}: strategy {_one_line(value)} not recognised")
            continue
        fact = STRATEGIES[kind]
        axis = fact.v2_axis or 0
        if fact.v3_function is None:
            if fact.otherwise == "todo":
                plan.todos.append(f"{where}: {fact.why}")
            continue
        if branch == "nested":
            plan.todos.append(f"{where}: {kind} under a condition; place it with {fact.v3_function} where it holds")
            continue
        form = target_form(where, facts, self_placing)
        if form == "stacked":
            plan.placements += [
                Placement(f"{where}.{child}", fact.v3_function, axis, False, kind)
                for child in facts.stacked[where.split(".")[1]]
            ]
        elif form in ("linear", "tensor"):
            plan.placements.append(Placement(where, fact.v3_function, axis, form == "tensor", kind))
        elif form is None:
            plan.todos.append(f"{where}: {fact.why}, but {where} is not built as a Linear here: place its weights by hand")
    return plan


@dataclass
class ClassFacts:
    """One class's V2 sharding machinery."""

    setter: cst.FunctionDef | None = None
    getter: cst.FunctionDef | None = None
    shard: cst.FunctionDef | None = None
    #: ``self.<a>_shards`` → ``self.<b>`` (the one V3 module the list stood for)
    aliases: dict[str, str] = field(default_factory=dict)
    #: ``self`` attributes holding a V2 ``Allreduce``
    allreduces: set[str] = field(default_factory=set)
    #: ``self`` attributes built as tensors (``Weight(...)``)
    tensors: set[str] = field(default_factory=set)
    #: ``self`` attributes built as stacked q/k/v linears → their child names
    stacked: dict[str, list[str]] = field(default_factory=dict)
    #: ``self`` attributes built by a layer call that provably has no bias / that has one
    bias_free: set[str] = field(default_factory=set)
    biased: set[str] = field(default_factory=set)
    #: ``self`` attribute → the last name of the callee that built it (``Linear``, ``linear_cls``)
    built_by: dict[str, str] = field(default_factory=dict)
    #: ``shard()`` clones with per-device head counts
    head_split: bool = False
    #: assignments that unpack a shard helper's clones into aliased attributes (ids)
    helper_assigns: set[int] = field(default_factory=set)
    #: the statements of a per-device clone list built by hand (``clone_loop``): dropped (ids)
    clone_statements: set[int] = field(default_factory=set)
    #: of those, each loop (id) → the attribute its clones went into
    clone_loops: dict[int, str] = field(default_factory=dict)
    #: ``self.<a> = [L[i].shard(devices) for i in ...]`` (each module's clone list) → the module list
    #: attribute ``L`` is (``self.<a>[k]`` reads ``self.<b>[k]``)
    clone_lists: dict[str, str] = field(default_factory=dict)
    #: ``self`` attributes holding a list of V2 ``Allreduce``s
    allreduce_lists: set[str] = field(default_factory=set)

    def per_device(self) -> bool:
        """The class holds per-device clones or Allreduces (its calls take per-device lists)."""
        return bool(self.aliases or self.allreduces or self.clone_lists or self.allreduce_lists)


def _stacked_children(call: cst.Call) -> list[str] | None:
    """``StackedLinear(..., names=["q_proj", ...], stacked=False)`` → the names."""
    kwargs = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    names = kwargs.get("names")
    stacked = kwargs.get("stacked")
    if not isinstance(names, cst.List) or (stacked is not None and dotted(stacked) != "False"):
        return None
    out = []
    for el in names.elements:
        if not isinstance(el.value, cst.SimpleString):
            return None
        out.append(el.value.evaluated_value)
    return [n for n in out if isinstance(n, str)]


def _may_have_bias(call: cst.Call) -> bool:
    """A V2 layer call that may build a bias: ``has_bias=``/``bias=`` not literally False,
    or a fifth positional argument (``Linear(in, out, dtype, device, has_bias)``)."""
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in call.args) or len(positional) >= 5:
        return True
    for a in call.args:
        if a.keyword is not None and a.keyword.value in ("has_bias", "bias") and dotted(a.value) != "False":
            return True
    return False


def _has_bias(call: cst.Call) -> bool:
    return any(
        a.keyword is not None and a.keyword.value in ("has_bias", "bias") and dotted(a.value) == "True" for a in call.args
    )


def is_linear_like(callee: str) -> bool:
    """A callee that builds a Linear (``Linear``, ``ColumnParallelLinear``, a ``linear_cls`` parameter)."""
    return callee.endswith("Linear") and callee != "StackedLinear" or callee in ("linear_cls", "linear")


def setter_classes(module: cst.Module) -> set[str]:
    """Classes of a module that define a ``sharding_strategy`` setter: they place themselves in V3."""
    return {
        s.name.value
        for s in module.body
        if isinstance(s, cst.ClassDef)
        and any(isinstance(f, cst.FunctionDef) and _is_setter(f) for f in s.body.body)
    }


def row_targets_may_have_bias(placements: list[Placement], bias_free: set[str]) -> list[str]:
    """The row-parallel targets not provably bias-free (MAX 26.7's ``row_parallel`` cannot place a bias)."""
    out = []
    for p in placements:
        if p.function != "row_parallel" or p.tensor:
            continue
        parts = p.target.split(".")
        if len(parts) != 2 or parts[1] not in bias_free:
            out.append(p.target)
    return out


def class_facts(node: cst.ClassDef, qualname: Qualname, helpers: dict[str, ShardHelper] | None = None) -> ClassFacts:
    facts = ClassFacts()
    funcs = [s for s in node.body.body if isinstance(s, cst.FunctionDef)]
    for func in funcs:
        if _is_setter(func):
            facts.setter = func
        elif _is_getter(func):
            facts.getter = func
        elif func.name.value == "shard":
            facts.shard = func
            facts.head_split = any(_calls_head_splitter(call) for call in nodes_of(func, (cst.Call,)))
    for func in funcs:
        if func.name.value == "shard":
            continue
        bound: dict[str, str] = {}  # local name → self attribute it is stored in
        for small in body_statements(func.body):
            if not isinstance(small, cst.Assign) or len(small.targets) != 1:
                continue
            target = dotted(small.targets[0].target)
            if target is None or not target.startswith("self.") or target.count(".") != 1:
                continue
            attr = target[5:]
            if isinstance(small.value, cst.Name):
                bound[small.value.value] = attr
            elif (  # ``self.layers = LayerList(layers)``: the local list's modules are the attribute's
                isinstance(small.value, cst.Call) and (dotted(small.value.func) or "").rsplit(".", 1)[-1] in CONTAINER_NAMES
                and len(small.value.args) == 1 and isinstance(small.value.args[0].value, cst.Name)
            ):
                bound[small.value.args[0].value.value] = attr
            elif isinstance(small.value, cst.Call):
                if not _may_have_bias(small.value):
                    facts.bias_free.add(attr)
                elif _has_bias(small.value):
                    facts.biased.add(attr)
                callee = dotted(small.value.func) or ""
                facts.built_by.setdefault(attr, callee.rsplit(".", 1)[-1])
                qual = qualname(small.value.func) or ""
                last = callee.rsplit(".", 1)[-1]
                if last == "Allreduce" and qual.startswith("max.nn"):
                    facts.allreduces.add(attr)
                elif last == "Weight":
                    facts.tensors.add(attr)
                elif last == "StackedLinear":
                    children = _stacked_children(small.value)
                    if children:
                        facts.stacked[attr] = children
        if isinstance(func.body, cst.IndentedBlock):
            for stmt in func.body.body:
                if isinstance(stmt, cst.For):
                    clone_loop(func, stmt, facts)
        for small in body_statements(func.body):
            if helpers and _helper_aliases(small, helpers, bound, facts):
                continue
            found = assigned(small)
            if found is None:
                continue
            target, module = self_attribute(found[0]), shard_call(found[1])
            if target is None:
                continue
            if module is None:
                _list_facts(target, found[1], bound, qualname, facts)
                continue
            source = dotted(module)
            if (held := self_attribute(module)) is not None:
                facts.aliases[target] = held
            elif source is not None and source in bound:
                facts.aliases[target] = bound[source]
    return facts


def _list_facts(attr: str, value: cst.BaseExpression, bound: dict[str, str], qualname: Qualname, facts: ClassFacts) -> None:
    """``self.<attr> = [L[i].shard(devices) for i in ...]`` (``L`` the module list ``self.<b>`` holds)
    → ``clone_lists``; ``self.<attr> = [Allreduce(...) for _ in ...]`` → ``allreduce_lists``."""
    if not isinstance(value, cst.ListComp) or value.for_in.inner_for_in is not None or value.for_in.ifs:
        return
    elt, index = value.elt, value.for_in.target
    module = shard_call(elt)
    if (
        isinstance(module, cst.Subscript) and isinstance(index, cst.Name) and len(module.slice) == 1
        and isinstance(module.slice[0].slice, cst.Index) and dotted(module.slice[0].slice.value) == index.value
    ):
        held = self_attribute(module.value) or bound.get(dotted(module.value) or "")
        if held is not None:
            facts.clone_lists[attr] = held
    elif isinstance(elt, cst.Call) and (dotted(elt.func) or "").rsplit(".", 1)[-1] == "Allreduce" and (
        qualname(elt.func) or ""
    ).startswith("max.nn"):
        facts.allreduce_lists.add(attr)


def clone_loop(func: cst.FunctionDef, loop: cst.For, facts: ClassFacts) -> None:
    """A per-device clone list built by hand → an alias of the one module (its statements dropped)::

        w_shards = self.norm.weight.shard(devices)   # (the bias's too, maybe in a conditional expression)
        self.norm_list = []
        for device, w, b in zip(devices, w_shards, b_shards):
            ln = LayerNorm(...); ln.weight = w; ...
            self.norm_list.append(ln)

    Every list zipped is a local whose statement shards parts of the same ``self.<module>``; in V3
    the list is that one module (``self.norm_list`` reads become ``self.norm``)."""
    it = loop.iter
    if not (isinstance(it, cst.Call) and dotted(it.func) == "zip" and isinstance(loop.body, cst.IndentedBlock)
            and loop.orelse is None and loop.body.body):
        return
    last = loop.body.body[-1]
    call = last.body[0].value if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], cst.Expr) else None
    appended = dotted(call.func) if isinstance(call, cst.Call) else None
    if not (appended and appended.startswith("self.") and appended.endswith(".append") and appended.count(".") == 2):
        return
    attr = appended[5:-7]
    lists = [dotted(a.value) for a in it.args if a.keyword is None]
    shards: dict[str, tuple[int, str]] = {}  # local → (its statement's id, the module it shards parts of)
    start: int | None = None
    body = func.body.body if isinstance(func.body, cst.IndentedBlock) else ()
    for stmt in body:
        if stmt is loop:
            break
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        found = assigned(small) if small is not None else None
        if found is None:
            continue
        target = dotted(found[0])
        if target == f"self.{attr}" and isinstance(found[1], cst.List) and not found[1].elements:
            start = id(small)
            continue
        modules = {m for c in nodes_of(found[1], (cst.Call,))
                   if isinstance(c, cst.Call) and isinstance(c.func, cst.Attribute) and c.func.attr.value == "shard"
                   and (m := _module_of_part(c.func.value)) is not None}
        if target is not None and len(modules) == 1:
            shards[target] = (id(small), modules.pop())
    zipped = [shards[n] for n in lists if n in shards]
    modules = {m for _, m in zipped}
    others = [n for n in lists if n not in shards]
    if start is None or len(modules) != 1 or len(others) > 1 or any(n is None or n.rsplit(".", 1)[-1] != "devices"
                                                                       for n in others):
        return
    reads = [n.value for n in nodes_of(func.body, (cst.Name,)) if isinstance(n, cst.Name)]
    if any(reads.count(n) > 2 for n in lists if n in shards):
        return  # (a shard list another statement reads too: it stays, and so does the loop)
    facts.aliases[attr] = modules.pop()
    facts.clone_statements.update({start, id(loop), *(i for i, _ in zipped)})
    facts.clone_loops[id(loop)] = attr


def _module_of_part(node: cst.BaseExpression) -> str | None:
    """``x`` of ``self.x.weight`` / ``self.x.bias`` (a module's own tensor), else None."""
    name = dotted(node) or ""
    parts = name.split(".")
    return parts[1] if len(parts) == 3 and parts[0] == "self" else None


def _helper_aliases(small: cst.BaseSmallStatement, helpers: dict[str, ShardHelper], bound: dict[str, str],
                    facts: ClassFacts) -> bool:
    """``(self.a_shards, self.b_shards) = helper(self.a, b, devices)`` → aliases a_shards → a, b_shards → b."""
    if not isinstance(small, cst.Assign) or len(small.targets) != 1 or not isinstance(small.value, cst.Call):
        return False
    helper = helpers.get(dotted(small.value.func) or "")
    sources = helper.sources(small.value) if helper is not None else None
    target = small.targets[0].target
    targets = [e.value for e in target.elements] if isinstance(target, cst.Tuple | cst.List) else [target]
    if sources is None or len(targets) != len(sources):
        return False
    pairs: dict[str, str] = {}
    for dest, src in zip(targets, sources, strict=True):
        name, source = dotted(dest), dotted(src)
        if name is None or not name.startswith("self.") or name.count(".") != 1 or source is None:
            return False
        if source.startswith("self.") and source.count(".") == 1:
            pairs[name[5:]] = source[5:]
        elif source in bound:
            pairs[name[5:]] = bound[source]
        else:
            return False
    facts.aliases.update(pairs)
    facts.helper_assigns.add(id(small))
    return True
