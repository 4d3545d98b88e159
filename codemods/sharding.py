"""MV39x — V2 sharding → V3 placements on a ``DeviceMesh``.

V2 sets a ``ShardingStrategy`` per layer, clones each module per device with
``.shard(devices)`` and loops over the clones in ``__call__``; V3 builds ONE
module under ``default_device(mesh)``, places its weights (``col_parallel`` /
``row_parallel``) and inserts the collectives the placements need. The rules
(facts in ``migrate_v3/knowledge/sharding.py``):

    self.q.sharding_strategy = ShardingStrategy.rowwise(n)     →  col_parallel(self.q)
    self.o.sharding_strategy = ShardingStrategy.columnwise(n)  →  row_parallel(self.o)
    self.norm.sharding_strategy = ShardingStrategy.replicate(n) → (removed: Replicated is V3's default)
    self.mlp.sharding_strategy = ShardingStrategy.tensor_parallel(n) → (removed: the module places itself)
    self.mlp_shards = self.mlp.shard(devices)                  → (removed)
    forward_sharded_layers(self.mlp_shards, xs)                →  self.mlp(xs)
    forward_moe_sharded_layers(self.mlp_shards, xs[, counters, layer_idx]) → self.mlp(xs)
    [s(x[i], kv[i]) for i, s in enumerate(self.attn_shards)]   →  self.attn(x, kv)
    [a[i] + b[i] for i in range(len(b))]                       →  a + b
    self.allreduce(xs, signal_buffers)       →  F.transfer_to(xs, DeviceMapping.replicated(xs.mesh))
    self.allreduce = Allreduce(num_accelerators=n)             → (removed)

and a class's own ``sharding_strategy`` property/setter and ``shard()``
method go, the setter's tensor-parallel layout becoming placements at the end
of ``__init__`` (V3 places at construction, as the official ports do). A
class whose ``shard()`` clones with per-device head counts keeps Replicated
weights (numerically the same) and gets a TODO: its kernels take local head
counts under tensor parallelism. What has no V3 form stays a precise TODO.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import libcst as cst

from codemods.args import source
from codemods.base import TODO_PREFIX, Codemod, FileState, nodes_of
from codemods.resolve import dotted
from codemods.shard_scan import (
    ClassFacts,
    Placement,
    SetterPlan,
    ShardHelper,
    body_statements,
    class_facts,
    computes_on,
    is_none,
    local_strategies,
    may_be_moe,
    not_none,
    one_per_device,
    one_per_device_annotation,
    per_device_element,
    row_targets_may_have_bias,
    self_attribute,
    setter_classes,
    setter_plan,
    shard_call,
    shard_helpers,
    strategy_assignment,
    strategy_kind,
    target_form,
)
from migrate_v3.knowledge.ports import PORTS
from migrate_v3.knowledge.sharding import CL_LINEAR, PER_DEVICE_KERNELS, STRATEGIES

_COLLECTIVE_CLASSES = {
    "Allreduce": "use F.allreduce_sum(t, mesh_axis=0) (or a Replicated F.transfer_to)",
    "Signals": "signal buffers are added by compile(); drop them",
}
_SHARD_HELPERS = ("forward_sharded_layers", "forward_sequential_layers", "shard")
_MESH_AXIS = "max.experimental.nn.common_layers.mesh_axis"

_REPLICATED_IMPORTS = {
    ("max.experimental", "functional", "F"),
    ("max.experimental.sharding", "DeviceMapping", None),
}


#: ``forward_moe_sharded_layers``'s expert-parallel arguments, by position after (shards, xs)
_EP_ARGS = ("eplb_counter_buffers", "layer_idx_per_device")


def _sharded_layers_call(qual: str | None, call: cst.Call) -> tuple[cst.BaseExpression, cst.BaseExpression, list[str]] | None:
    """``forward_sharded_layers(m, xs)`` or ``forward_moe_sharded_layers(m, xs[, counters, layer_idx])``:
    the module and input expressions and the expert-parallel arguments passed (not ``None``), or None."""
    if qual is None or any(a.star for a in call.args):
        return None
    positional = [a.value for a in call.args if a.keyword is None]
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    if len(positional) < 2 or not isinstance(positional[0], cst.Name | cst.Attribute):
        return None  # (``list(self.shards)``, a comprehension: no one module to call)
    if qual.endswith(".forward_sharded_layers"):
        return (positional[0], positional[1], []) if len(positional) == 2 and not keywords else None
    if not qual.endswith(".forward_moe_sharded_layers"):
        return None
    extra = dict(zip(_EP_ARGS, positional[2:], strict=False))
    if len(positional) > 2 + len(_EP_ARGS) or set(keywords) - set(_EP_ARGS) or set(extra) & set(keywords):
        return None
    extra.update(keywords)
    passed = [name for name, value in extra.items() if not is_none(value)]
    return positional[0], positional[1], passed


def _expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def placement_statement(state: FileState, where: str, function: str, axis: int, *, tensor: bool) -> cst.SimpleStatementLine:
    """``col_parallel(self.q)``, or for a weight tensor ``w = w.to(NamedMapping(w.mesh, (TP,)))``."""
    if tensor:
        spec = "(TP,)" if axis == 0 else "(None, TP)"
        state.needed_imports.add(("max.experimental.sharding", "NamedMapping", None))
        state.needed_imports.add((_MESH_AXIS, "TP", None))
        code = f"{where} = {where}.to(NamedMapping({where}.mesh, {spec}))"
    else:
        state.needed_imports.add((CL_LINEAR, function, None))
        code = f"{function}({where})"
    stmt = cst.parse_statement(code)
    assert isinstance(stmt, cst.SimpleStatementLine)
    return stmt


#: Calls whose argument is iterated as the clone list (the comprehension rules handle them).
_LIST_BUILTINS = frozenset({"enumerate", "zip", "len", "list", "tuple", "iter", "reversed", "sorted"})

def _loop_args(iterable: cst.BaseExpression) -> list[cst.BaseExpression]:
    """What a loop iterates: the lists ``zip``/``enumerate``/... take, or the iterable itself."""
    if isinstance(iterable, cst.Call) and dotted(iterable.func) in _LIST_BUILTINS:
        return [a.value for a in iterable.args if a.keyword is None and not a.star]
    return [iterable]


def per_device_params(func: cst.FunctionDef) -> set[str]:
    """Parameters annotated as a per-device tensor list (``xs: list[TensorValue]``, optional or keyword-only too)."""
    out: set[str] = set()
    for p in (*func.params.params, *func.params.kwonly_params):
        one = one_per_device_annotation(p.annotation.annotation) if p.annotation is not None else None
        if one is not None and (dotted(not_none(one)) or "").rsplit(".", 1)[-1] in ("TensorValue", "Tensor"):
            out.add(p.name.value)
    return out


def _only(line: cst.SimpleStatementLine) -> cst.BaseSmallStatement | None:
    return line.body[0] if len(line.body) == 1 else None


class _Subst(cst.CSTTransformer):
    """Replace names (``s`` → ``self.attn``) and strip ``n[i]`` → ``n`` for one index name ``i``."""

    def __init__(self, names: dict[str, cst.BaseExpression], index: str | None) -> None:
        super().__init__()
        self.names = names
        self.index = index
        self.ok = True

    def _indexed(self, node: cst.Subscript) -> bool:
        if self.index is None or len(node.slice) != 1:
            return False
        sl = node.slice[0].slice
        return isinstance(sl, cst.Index) and isinstance(sl.value, cst.Name) and sl.value.value == self.index

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        return not self._indexed(node)

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        if self._indexed(original):
            value = original.value.visit(self)
            assert isinstance(value, cst.BaseExpression)
            return value
        return updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if original.value in self.names:
            return self.names[original.value]
        if original.value == self.index:
            self.ok = False
        return updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        return updated.with_changes(attr=original.attr)  # ``.x`` is not a reference to ``x``

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)


def _embedding_mesh(facts: ClassFacts) -> str | None:
    """``self.<e>.weight.mesh`` of the class's ``VocabParallelEmbedding`` (a root's mesh), else of its
    ``Embedding`` (V3 places it on the model's device: every Tensor has a mesh), or None."""
    for kind in ("VocabParallelEmbedding", "Embedding"):
        for attr, callee in facts.built_by.items():
            if callee == kind:
                return f"self.{attr}.weight.mesh"
    return None


def _names_in(node: cst.CSTNode) -> set[str]:
    return {n.value for n in nodes_of(node, (cst.Name,)) if isinstance(n, cst.Name)}


def _bracketed(expr: cst.BaseExpression) -> cst.BaseExpression:
    """An element that spanned lines inside the comprehension's brackets keeps brackets of its own."""
    if "\n" in source(expr) and not expr.lpar:
        return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return expr


class _OntoMesh(cst.CSTTransformer):
    """``w.to(h.device)`` in ``[... for h in hs]`` → ``w.to(hs.mesh)``: V2's copy of ``w`` beside
    each device's ``h`` is, in V3, ``w`` on the mesh of the one distributed ``hs`` (replicated)."""

    def __init__(self, var: str, seq: str) -> None:
        super().__init__()
        self.var, self.seq = var, seq
        self.one_device = False  # a ``device=h.device`` became ``device=hs.device``

    def _device_of_var(self, node: cst.BaseExpression) -> bool:
        """``node`` is ``h.device`` (``h`` the comprehension's variable)."""
        return (isinstance(node, cst.Attribute) and node.attr.value == "device"
                and isinstance(node.value, cst.Name) and node.value.value == self.var)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        """``f(..., device=h.device)`` → ``device=hs.device`` (what ``f`` builds goes where ``hs`` is)."""
        value = updated.value
        if updated.keyword is not None and updated.keyword.value == "device" and self._device_of_var(value):
            assert isinstance(value, cst.Attribute)
            self.one_device = True
            return updated.with_changes(value=value.with_changes(value=cst.Name(self.seq)))
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = updated.func
        arg = updated.args[0] if len(updated.args) == 1 and updated.args[0].keyword is None else None
        if (
            isinstance(func, cst.Attribute) and func.attr.value == "to" and arg is not None
            and self._device_of_var(arg.value) and self.var not in _names_in(func.value)
        ):
            return updated.with_changes(args=[arg.with_changes(value=_expr(f"{self.seq}.mesh"))])
        return updated


def _substitute(elt: cst.BaseExpression, names: dict[str, cst.BaseExpression], index: str | None) -> cst.BaseExpression | None:
    sub = _Subst(names, index)
    out = elt.visit(sub)
    return out if sub.ok and isinstance(out, cst.BaseExpression) else None


class _ClassState:
    def __init__(self, facts: ClassFacts, plan: SetterPlan | None, node: cst.ClassDef | None = None) -> None:
        self.facts = facts
        self.plan = plan
        self.node = node
        self.mesh = _embedding_mesh(facts)
        self.dropped_methods = {
            id(f) for f in (facts.setter, facts.getter, facts.shard) if f is not None
        }


class Sharding(Codemod):
    PREFIX = "MV39"

    @classmethod
    def applies(cls, source: str) -> bool:
        return any(w in source for w in ("shard", "Shard", "Allreduce", "Signals"))

    def __init__(self, state: object) -> None:
        super().__init__(state)  # type: ignore[arg-type]
        self._classes: list[_ClassState] = []
        self._funcs: list[tuple[cst.FunctionDef, dict[str, str], bool]] = []  # (def, local strategies, dropped)
        self._placeable: list[bool] = []  # per function: col/row placements may be emitted here
        self._self_placing: set[str] = set()
        self._reads: list[tuple[int, bool]] = []  # per simple statement: it reads a clone list
        self._targets = 0  # depth inside assignment targets
        self._per_device: list[set[str]] = []  # per function: names bound to a per-device tensor list
        self._allreduce_locals: list[set[str]] = []  # per function: names bound to an entry of an Allreduce list
        self._distributed: set[int] = set()  # per-device expressions rewritten to one distributed Tensor
        self._one_element: set[int] = set()  # ids of ``list(xs)``/``tuple(xs)`` calls of one Tensor
        self._broadcast_done = False  # this statement's distributed_broadcast became a transfer
        self._helpers: dict[str, ShardHelper] = {}
        self._helper_uses: dict[str, int] = {}  # helper → references left (its def's name excluded)

    # -- scopes ---------------------------------------------------------------------

    def visit_Module(self, node: cst.Module) -> None:
        self._self_placing = setter_classes(node)
        self._helpers = shard_helpers(node)
        if self._helpers:
            names = [n.value for n in nodes_of(node, (cst.Name,)) if isinstance(n, cst.Name)]
            self._helper_uses = {h: names.count(h) - 1 for h in self._helpers}

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        """A private shard helper whose every call went with its clone attributes goes too."""
        gone = {h for h, left in self._helper_uses.items() if left == 0 and h.startswith("_")}
        if not gone:
            return updated
        for stmt in original.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value in gone:
                self.rewrote(stmt, "MV390", f"{stmt.name.value}: it only cloned modules per device; V3 has no clones")
        return updated.with_changes(body=[
            s for s in updated.body if not (isinstance(s, cst.FunctionDef) and s.name.value in gone)])

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        facts = class_facts(node, self.qualname, self._helpers)
        plan = setter_plan(facts.setter, self.qualname, facts, self._self_placing) if facts.setter else None
        self._classes.append(_ClassState(facts, plan, node))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        cls = self._classes[-1] if self._classes else None
        dropped = cls is not None and id(node) in cls.dropped_methods
        local = local_strategies(node, self.qualname)
        self._funcs.append((node, local, dropped))
        self._per_device.append(per_device_params(node))
        self._allreduce_locals.append(set())
        self._placeable.append(node.name.value == "__init__" and cls is not None and self._rows_bias_free(node, cls, local))

    def _rows_bias_free(self, func: cst.FunctionDef, cls: _ClassState, local: dict[str, str]) -> bool:
        """Every row-parallel target this ``__init__`` assigns is a layer it builds without a bias.

        Placements come in pairs (a column-parallel output feeds a row-parallel
        matmul), so one layer that cannot be placed keeps the whole function Replicated.
        """
        for small in body_statements(func.body):
            found = strategy_assignment(small)
            if found is None:
                continue
            target, value = found
            kind = strategy_kind(value, self.qualname) or (local.get(value.value) if isinstance(value, cst.Name) else None)
            if kind is None or STRATEGIES[kind].v3_function != "row_parallel":
                continue
            where = dotted(target) or ""
            if where.count(".") != 1 or not where.startswith("self.") or where[5:] not in cls.facts.bias_free:
                return False
        return True

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self._funcs.pop()
        self._placeable.pop()
        self._per_device.pop()
        self._allreduce_locals.pop()
        cls = self._cls()
        if cls is None or original.name.value != "__call__" or not cls.facts.per_device():
            return updated
        params = one_per_device(updated.params)
        returns = updated.returns
        if returns is not None and (one := per_device_element(returns.annotation)) is not None:
            returns = returns.with_changes(annotation=one)
        if params is not updated.params or returns is not updated.returns:
            self.rewrote(original, "MV391", "per-device lists in the signature: one distributed Tensor each")
        return updated.with_changes(params=params, returns=returns)

    def _in_dropped(self) -> bool:
        return any(dropped for _, _, dropped in self._funcs)

    def _cls(self) -> _ClassState | None:
        return self._classes[-1] if self._classes else None

    # -- statements -----------------------------------------------------------------

    def _clear_own_todos(self) -> None:
        if self.state.statement_todos:
            pending = self.state.statement_todos[-1]
            pending[:] = [t for t in pending if not t.startswith(f"{TODO_PREFIX}MV39")]

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.RemovalSentinel:
        if self._broadcast_done and self.state.statement_todos:  # ops' TODO for the call rewritten here
            self._broadcast_done = False
            pending = self.state.statement_todos[-1]
            pending[:] = [t for t in pending if not t.startswith(f"{TODO_PREFIX}MV391 ops.distributed_broadcast")]
        reads = False
        while self._reads:  # an earlier codemod that removed a statement skipped this hook for it
            owner, flag = self._reads.pop()
            if owner == id(original):
                reads = flag
                break
        cls = self._cls()
        if reads and cls is not None and not self._in_dropped():
            # only a statement that read a clone list pays for the walk; its updated
            # form decides (a rule on an expression may have replaced the read)
            for attr in sorted(_self_attributes(updated) & set(cls.facts.aliases)):
                self.todo("MV390", f"self.{attr}: V3 keeps no per-device clones; use self.{cls.facts.aliases[attr]} "
                          "(one module on the distributed Tensor) where a clone list was used")
        return self._statement(original, updated)  # after the TODO: a statement it removes clears it

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._reads.append((id(node), False))

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._targets += 1

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        """Note a statement that reads a clone list (``self.x_shards``)."""
        if (
            self._reads
            and not self._targets
            and isinstance(original.value, cst.Name)
            and original.value.value == "self"
            and self._classes
            and original.attr.value in self._classes[-1].facts.aliases
            and not self._in_dropped()
        ):
            self._reads[-1] = (self._reads[-1][0], True)
        return updated

    def _statement(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.RemovalSentinel:
        if self._in_dropped():
            return updated
        cls = self._cls()
        small = _only(original)
        if small is None:
            return updated
        now = _only(updated)
        if (
            isinstance(small, cst.Assign) and isinstance(small.value, cst.ListComp) and isinstance(now, cst.Assign)
            and len(now.targets) == 1 and isinstance(now.value, cst.Name)
            and isinstance(now.targets[0].target, cst.Name) and now.targets[0].target.value == now.value.value
        ):
            return cst.RemovalSentinel.REMOVE  # ``xs = [x for x in xs]`` became ``xs = xs``
        if cls is not None and id(small) in cls.facts.clone_statements:
            self._clear_own_todos()
            return cst.RemovalSentinel.REMOVE  # (reported at its loop)
        if cls is not None and id(small) in cls.facts.helper_assigns and isinstance(small, cst.Assign):
            helper = dotted(cast(cst.Call, small.value).func) or ""
            self._helper_uses[helper] -= 1
            self._clear_own_todos()
            self.rewrote(original, "MV390", f"{helper}(...) clones: V3 runs the one module of each on distributed "
                         "Tensors (no per-device clones)")
            return cst.RemovalSentinel.REMOVE
        found = strategy_assignment(small)
        if found is not None:
            return self._strategy_statement(original, updated, *found)
        if cls is None or not isinstance(small, cst.Assign | cst.AnnAssign):
            return updated
        local = self._allreduce_entry(cls, small)
        if local is not None:
            self._allreduce_locals[-1].add(local)
            self._clear_own_todos()
            self.rewrote(original, "MV391", "an entry of an Allreduce list: V3 reduces a Partial result by a Replicated transfer")
            return cst.RemovalSentinel.REMOVE
        target = dotted(small.targets[0].target) if isinstance(small, cst.Assign) else dotted(small.target)
        if target is None or not target.startswith("self.") or target.count(".") != 1:
            return updated
        attr = target[5:]
        value = small.value
        if attr in cls.facts.aliases and shard_call(value) is not None:
            self._clear_own_todos()
            self.rewrote(original, "MV390", f"self.{attr}: V3 runs the one module self.{cls.facts.aliases[attr]} "
                         "on distributed Tensors (no per-device clones)")
            return cst.RemovalSentinel.REMOVE
        if attr in cls.facts.clone_lists:
            self._clear_own_todos()
            self.rewrote(original, "MV390", f"self.{attr}: V3 runs each module of self.{cls.facts.clone_lists[attr]} "
                         "on distributed Tensors (no per-device clones)")
            return cst.RemovalSentinel.REMOVE
        if attr in cls.facts.allreduce_lists:
            self._clear_own_todos()
            self.rewrote(original, "MV391", "a list of Allreduces: V3 reduces a Partial result by a Replicated transfer")
            return cst.RemovalSentinel.REMOVE
        if isinstance(small, cst.Assign) and attr in cls.facts.allreduces:
            self._clear_own_todos()
            self.rewrote(original, "MV391", "Allreduce: V3 reduces a Partial result by a Replicated transfer")
            return cst.RemovalSentinel.REMOVE
        if attr == "_sharding_strategy" and (cls.facts.setter or cls.facts.getter):
            self.rewrote(original, "MV390", "_sharding_strategy: V3 places weights at construction")
            return cst.RemovalSentinel.REMOVE
        return updated

    def _strategy_statement(
        self,
        original: cst.SimpleStatementLine,
        updated: cst.SimpleStatementLine,
        target: cst.BaseExpression,
        value: cst.BaseExpression,
    ) -> cst.BaseStatement | cst.RemovalSentinel:
        kind = strategy_kind(value, self.qualname)
        if kind is None and isinstance(value, cst.Name) and self._funcs:
            kind = self._funcs[-1][1].get(value.value)
        if kind is None:
            return updated  # the flags in leave_AssignTarget/leave_Call say what is left
        fact = STRATEGIES[kind]
        where = source(target)
        cls = self._cls()
        form = target_form(where, cls.facts, self._self_placing) if cls is not None else None
        if fact.v3_function is not None and form == "self":
            self._clear_own_todos()
            self.rewrote(original, "MV390", f"{where}: its class places its own weights at construction in V3")
            return cst.RemovalSentinel.REMOVE
        if fact.v3_function is not None and (form not in ("linear", "tensor") or not (self._placeable and self._placeable[-1])):
            self._clear_own_todos()
            self.todo(
                "MV390",
                f"{where}: {fact.why}; place it with {fact.v3_function}({where}) in __init__ (with its row/column "
                "partner; MAX 26.7's row_parallel cannot place a bias)",
            )
            return updated
        if fact.v3_function is not None:
            self._clear_own_todos()
            stmt = placement_statement(self.state, where, fact.v3_function, fact.v2_axis or 0, tensor=form == "tensor")
            self.rewrote(original, "MV390", f"{where}: {fact.why}")
            return stmt.with_changes(leading_lines=updated.leading_lines)
        if kind == "tensor_parallel" and self._funcs and may_be_moe(where, self._funcs[-1][0], cls.node if cls else None):
            self._clear_own_todos()
            self.todo(
                "MV390",
                f"{where} may be an MoE: V3's MoE cannot run tensor parallel (on a mesh its stacked expert "
                "weights need a resharding it refuses); build common_layers.moe.TensorParallelMoE "
                "(quant_moe.TensorParallelMoE) when the mesh has several devices, then drop this line "
                "(deepseekV3_modulev3/layers/transformer_block.py)",
            )
            return updated
        if fact.otherwise == "drop":
            self._clear_own_todos()
            self.rewrote(original, "MV390", f"{where}: {fact.why}")
            return cst.RemovalSentinel.REMOVE
        self._clear_own_todos()
        self.todo("MV390", fact.why)
        return updated

    # -- expressions ----------------------------------------------------------------

    def idle_hooks(self) -> tuple[str, ...]:
        # (they only swap in what ``leave_Call`` marked: a ``list(xs)`` or ``tuple(xs)``)
        source_ = self.state.source
        return () if "list(" in source_ or "tuple(" in source_ else ("leave_Arg", "leave_Element", "leave_Return")

    def _one_tensor(self, node: cst.BaseExpression) -> str | None:
        """``node`` names a per-device list of a ``__call__`` whose lists V3 makes one Tensor (its
        name), or None. Iterating a Tensor indexes it 0, 1, 2... (it has no ``__iter__``): on a
        symbolic dimension that never ends while staging."""
        cls = self._cls()
        if (
            cls is None or self._in_dropped() or not cls.facts.per_device() or not self._funcs
            or self._funcs[-1][0].name.value != "__call__" or not isinstance(node, cst.Name)
        ):
            return None
        return node.value if node.value in self._per_device[-1] else None

    def _helper_list(self, node: cst.BaseExpression) -> str | None:
        """``node`` names a ``list[TensorValue]`` parameter of a module-level function (its name), or
        None: V2's per-device list, which a V3 forward that calls the function passes as one Tensor."""
        if self._classes or len(self._funcs) != 1 or not isinstance(node, cst.Name):
            return None
        return node.value if node.value in self._per_device[-1] else None

    def _iterated(self, iterable: cst.BaseExpression) -> None:
        """A TODO for a loop over one Tensor (``for x in xs``, ``zip(a, xs)``, ``enumerate(xs)``)."""
        args = _loop_args(iterable)
        name = next((n for a in args if (n := self._one_tensor(a)) is not None), None)
        if name is not None:
            self.todo("MV391", f"{name} was one value per device in V2 and is one distributed Tensor in V3: "
                      f"iterating it never ends while staging; use {name} itself")
            return
        if any(id(a) in self._distributed for a in args):  # (a broadcast or a fold rewritten above)
            self.todo("MV391", "this iterable was one value per device in V2 and is one distributed Tensor now "
                      "(rewritten here): iterating it indexes its first axis, or never ends while staging; "
                      "compute once on it")
            return
        name = next((n for a in args if (n := self._helper_list(a)) is not None), None)
        if name is not None:
            func = self._funcs[-1][0].name.value
            self.todo("MV391", f"{name} was V2's per-device list (list[TensorValue]); a V3 forward that calls "
                      f"{func} passes one distributed Tensor, and iterating it never ends while staging: "
                      f"make {func} take one Tensor")

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = dotted(original.func)
        if func in ("list", "tuple") and len(original.args) == 1 and original.args[0].keyword is None \
                and not original.args[0].star and (name := self._one_tensor(original.args[0].value)) is not None:
            self._one_element.add(id(original))
            self.rewrote(original, "MV391", f"{func}({name}) copied V2's per-device list; {name} is one distributed "
                         f"Tensor now (what takes it takes one): {name} itself")
        cls = self._cls()
        if cls is not None and not self._in_dropped():
            rewritten = self._call_rewrite(cls, original, updated)
            if rewritten is not None:
                return rewritten
        qual = self.qualname(original.func)
        gathered = self._allgather(original, updated, qual)
        if gathered is not None:
            return gathered
        sharded = _sharded_layers_call(qual, updated)
        if sharded is not None:
            module, x, ep = sharded
            self._ran_sharded(original, qual or "", ep, "V3 calls the one module m(x)")
            return cst.Call(func=module, args=[cst.Arg(value=x)])
        name = qual.rsplit(".", 1)[1] if qual and "." in qual else None
        if name in _COLLECTIVE_CLASSES and qual is not None and qual.startswith("max.nn"):
            self.todo("MV391", f"{name}: {_COLLECTIVE_CLASSES[name]}")
        elif qual is not None and qual.startswith("max.") and "ShardingStrategy" in qual:
            self.todo("MV390", "ShardingStrategy: V3 places weights on a DeviceMesh "
                      "(V2 rowwise = V3 col_parallel, V2 columnwise = V3 row_parallel)")
        elif name in _SHARD_HELPERS[:2] and name not in PORTS and qual is not None and qual.startswith("max.nn"):
            self.todo("MV390", f"{name}: V3 runs one module on one distributed Tensor")
        elif isinstance(original.func, cst.Attribute) and original.func.attr.value == "shard":
            self.todo("MV390", ".shard(devices): V3 has no per-device module lists; use placements")
        return updated

    def _ran_sharded(self, original: cst.Call, qual: str, ep: list[str], what: str) -> None:
        """Says what a ``forward_(moe_)sharded_layers`` call became; the expert-parallel
        arguments it passed get a TODO (V3's MoE has no expert parallelism)."""
        name = qual.rsplit(".", 1)[-1]
        self.rewrote(original, "MV391", f"{name}(m, x): {what}")
        self._distributed.add(id(original))
        if ep:
            self.todo("MV391", f"{name} also passed {', '.join(ep)}: V2 ran its expert-parallel path "
                      "(dispatch, local experts, combine) when the MoE had an EP batch manager; V3's MoE has no "
                      "expert parallelism and runs every expert where the Tensor is (the same result): drop them "
                      "or keep EP in V2")

    def _allgather(self, original: cst.Call, updated: cst.Call, qual: str | None) -> cst.BaseExpression | None:
        """``ops.allgather(xs, signal_buffers[, axis=a])`` of a per-device list this rule made one
        distributed Tensor → ``F.allgather(xs, tensor_axis=a)``: V2 concatenated the devices' values,
        V3 gathers the Tensor's shards the same way (V2's per-device list was its shards)."""
        if qual not in ("max.graph.ops.allgather", "max.graph.ops.allgather.allgather") or not self._per_device:
            return None
        positional = [a for a in updated.args if a.keyword is None and not a.star]
        keywords = {a.keyword.value: a for a in updated.args if a.keyword is not None}
        if len(positional) != 2 or set(keywords) - {"axis"} or any(a.star for a in updated.args):
            return None
        first = original.args[0].value
        if not (isinstance(first, cst.Name) and first.value in self._per_device[-1]):
            return None
        axis = source(keywords["axis"].value) if "axis" in keywords else "0"
        self.state.needed_imports.update(_REPLICATED_IMPORTS)
        self.rewrote(original, "MV391", "ops.allgather of a per-device list → F.allgather of the one distributed Tensor")
        self._distributed.add(id(original))
        return _expr(f"F.allgather({source(positional[0].value)}, tensor_axis={axis})")

    def _allreduce_entry(self, cls: _ClassState, small: cst.Assign | cst.AnnAssign) -> str | None:
        """``name = self.<allreduce list>[k]`` → ``name``."""
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
            return None
        value = small.value
        if isinstance(value, cst.Subscript) and self_attribute(value.value) in cls.facts.allreduce_lists:
            return small.targets[0].target.value
        return None

    def _is_allreduce(self, cls: _ClassState, func: cst.BaseExpression) -> bool:
        """``self.<Allreduce>``, ``self.<Allreduce list>[k]`` or a local bound to such an entry."""
        if isinstance(func, cst.Name):
            return any(func.value in names for names in self._allreduce_locals)
        if isinstance(func, cst.Subscript):
            return self_attribute(func.value) in cls.facts.allreduce_lists
        return self_attribute(func) in cls.facts.allreduces

    def _alias(self, cls: _ClassState, node: cst.BaseExpression) -> str | None:
        attr = self_attribute(node)
        return cls.facts.aliases.get(attr) if attr is not None else None

    def _call_rewrite(self, cls: _ClassState, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        qual = self.qualname(original.func) or ""
        mesh = cls.mesh
        if mesh is not None:
            rewritten = self._onto_mesh(original, updated, qual, mesh)
            if rewritten is not None:
                return rewritten
        sharded = _sharded_layers_call(qual, original)
        if sharded is not None and (module := self._alias(cls, sharded[0])) is not None:
            self._ran_sharded(original, qual, sharded[2], f"self.{module} runs on the distributed Tensor")
            now = _sharded_layers_call(qual, updated)  # (the input as rewritten below this call)
            assert now is not None
            return cst.Call(func=_expr(f"self.{module}"), args=[cst.Arg(value=now[1])])
        if (dotted(original.func) or "") not in _LIST_BUILTINS and any(
            self._alias(cls, a.value) is not None for a in original.args
        ):
            args = [
                a.with_changes(value=_expr(f"self.{alias}")) if (alias := self._alias(cls, o.value)) is not None else a
                for a, o in zip(updated.args, original.args, strict=True)
            ]
            self.rewrote(original, "MV390", "a clone list passed on: V3 passes the one module")
            return updated.with_changes(args=args)
        if self._is_allreduce(cls, original.func) and updated.args:
            value = updated.args[0].value
            if isinstance(value, cst.Name):
                self.state.needed_imports.update(_REPLICATED_IMPORTS)
                self.rewrote(original, "MV391", "Allreduce: a Replicated transfer sums the devices' Partial results")
                x = value.value
                self._distributed.add(id(original))
                return _expr(f"F.transfer_to({x}, DeviceMapping.replicated({x}.mesh))")
            self.todo("MV391", "Allreduce: bind the value to a name x, then F.transfer_to(x, DeviceMapping.replicated(x.mesh))")
        return None

    def _onto_mesh(self, original: cst.Call, updated: cst.Call, qual: str, mesh: str) -> cst.BaseExpression | None:
        """A root's per-device inputs, on the mesh of its vocab-parallel embedding:

            ops.distributed_broadcast(x.to(d), signal_buffers)  →  x.to(self.embed_tokens.weight.mesh)
        """
        positional = [a for a in updated.args if a.keyword is None and not a.star]
        if len(positional) != 2 or len(updated.args) != 2:
            return None
        # (the embedding's own call, self.embed_tokens(tokens, signal_buffers), is LayerCalls')
        if qual.startswith("max.") and qual.endswith(".distributed_broadcast"):
            value = positional[0].value
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "to":
                value = value.func.value
            self.rewrote(original, "MV391", "distributed_broadcast: a transfer to the mesh replicates the tensor")
            self._distributed.add(id(original))
            self._broadcast_done = True
            return cst.Call(func=cst.Attribute(value=value, attr=cst.Name("to")), args=[cst.Arg(value=_expr(mesh))])
        return None

    def leave_For(self, original: cst.For, updated: cst.For) -> cst.BaseStatement | cst.RemovalSentinel:
        self._iterated(original.iter)
        cls = self._cls()
        if cls is None or self._in_dropped():
            return updated
        if _emptied(original.body, updated.body) and original.orelse is None and _counting(original.iter):
            self.rewrote(original, "MV390", "a loop that only set strategies, with nothing left in it")
            return cst.RemovalSentinel.REMOVE
        if id(original) not in cls.facts.clone_loops:
            return updated
        alias = cls.facts.clone_loops[id(original)]
        self.rewrote(original, "MV390", f"per-device clones of self.{cls.facts.aliases[alias]} built by hand "
                     f"(self.{alias}): V3 runs the one module on distributed Tensors")
        return cst.RemovalSentinel.REMOVE

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        cls = self._cls()
        if cls is None or self._in_dropped():
            return updated
        module = self._alias(cls, original.value)
        if module is not None:
            self.rewrote(original, "MV390", f"one device's clone: V3 has the one module self.{module}")
            return _expr(f"self.{module}")
        listed = cls.facts.clone_lists.get(self_attribute(original.value) or "")
        if listed is not None:
            self.rewrote(original, "MV390", f"one module's clone list: V3 has the module itself, in self.{listed}")
            return updated.with_changes(value=_expr(f"self.{listed}"))
        return updated

    def leave_ListComp(self, original: cst.ListComp, updated: cst.ListComp) -> cst.BaseExpression:
        cls = self._cls()
        if cls is None:
            self._iterated(original.for_in.iter)  # (a module-level function's per-device list)
            return updated
        if self._in_dropped() or not cls.facts.per_device():
            return updated
        comp = updated.for_in
        if comp.inner_for_in is not None or comp.ifs:
            return updated
        folded = self._list_comp(cls, original, updated)
        if folded is updated:
            self._iterated(original.for_in.iter)
        else:
            self._folded_params(original.for_in.iter)
        return folded

    def _folded_params(self, iterable: cst.BaseExpression) -> None:
        """A TODO when a folded comprehension iterated a ``list[TensorValue]`` parameter of a method
        other than ``__call__``: only ``__call__``'s signature becomes one Tensor, so the method's
        callers still pass V2's per-device list where the fold now expects one distributed Tensor."""
        func = self._funcs[-1][0] if self._funcs else None
        if func is None or func.name.value == "__call__":
            return
        params = per_device_params(func)
        names = [a.value for a in _loop_args(iterable) if isinstance(a, cst.Name) and a.value in params]
        if names:
            listed = ", ".join(names)
            self.todo("MV391", f"{listed}: V2's per-device list parameter of {func.name.value} (list[TensorValue]), "
                      f"used here as one distributed Tensor: make {func.name.value} take one Tensor for {listed} "
                      "(and its callers pass one)")

    def _list_comp(self, cls: _ClassState, original: cst.ListComp, updated: cst.ListComp) -> cst.BaseExpression:
        """A comprehension over per-device lists or clones → the one computation (or ``updated``)."""
        comp = updated.for_in
        if isinstance(comp.iter, cst.Name):
            return self._one_list_comp(original, updated)
        if isinstance(comp.iter, cst.Attribute) and comp.iter.attr.value == "devices":
            return self._per_device_copies(cls, original, updated)
        if not isinstance(comp.iter, cst.Call):
            return updated
        it = comp.iter
        func = dotted(it.func)
        target = comp.target
        names: dict[str, cst.BaseExpression] = {}
        index: str | None = None
        if func == "enumerate" and len(it.args) == 1:
            module = self._alias(cls, it.args[0].value)
            if module is None or not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
                return updated
            i, s = (e.value for e in target.elements)
            if not (isinstance(i, cst.Name) and isinstance(s, cst.Name)):
                return updated
            names[s.value], index = _expr(f"self.{module}"), i.value
        elif func == "zip":
            lists = [a for a in it.args if a.keyword is None]
            elts = [e.value for e in target.elements] if isinstance(target, cst.Tuple) else []
            if not lists or len(elts) != len(lists) or not all(isinstance(e, cst.Name) for e in elts):
                return updated
            for var, arg in zip(elts, lists, strict=True):
                alias = self._alias(cls, arg.value)
                assert isinstance(var, cst.Name)
                if alias is not None:
                    names[var.value] = _expr(f"self.{alias}")
                elif isinstance(arg.value, cst.Name):
                    names[var.value] = arg.value  # another per-device list: one distributed Tensor now
                else:
                    return updated
        elif func == "range" and len(it.args) == 1 and isinstance(target, cst.Name):
            bound = it.args[0].value
            if not (isinstance(bound, cst.Call) and dotted(bound.func) == "len" and len(bound.args) == 1
                    and self._counts_devices(cls, bound.args[0].value)):
                return updated  # (``range(len(config.layer_ids))`` counts something else: distinct modules)
            index = target.value
        else:
            return updated
        result = _substitute(updated.elt, names, index)
        if result is None:
            return updated
        self.rewrote(original, "MV391", "per-device list: V3 computes once on the distributed Tensor")
        self._distributed.add(id(original))
        return _bracketed(result)

    def _counts_devices(self, cls: _ClassState, node: cst.BaseExpression) -> bool:
        """``node`` has one entry per device: the devices, a per-device tensor list of the
        function, or a module's per-device clones (``self.mlp_shards``)."""
        name = dotted(node) or ""
        return (
            name.rsplit(".", 1)[-1] == "devices"
            or (bool(self._per_device) and name in self._per_device[-1])
            or self._alias(cls, node) is not None
        )

    def _one_list_comp(self, original: cst.ListComp, updated: cst.ListComp) -> cst.BaseExpression:
        """``[h * k for h in hs]`` over a per-device tensor list → ``hs * k`` (one distributed Tensor);
        the copy ``[h for h in hs]`` → ``hs``."""
        comp = updated.for_in
        target, it = comp.target, comp.iter
        elt = updated.elt
        if isinstance(target, cst.Name) and isinstance(it, cst.Name) and ".device" in source(elt):
            onto = _OntoMesh(target.value, it.value)
            moved = elt.visit(onto)
            assert isinstance(moved, cst.BaseExpression)
            elt = moved
            if onto.one_device:
                self.todo("MV391", f"{it.value}.device stands for each device's {target.value}.device: right on one "
                          f"device; a value distributed over several has no one device (V3 raises): build on "
                          f"{it.value}.mesh there")
        copy = (  # (where the signature keeps its lists, a copy stays a list: only the forward's goes)
            isinstance(target, cst.Name) and isinstance(updated.elt, cst.Name) and updated.elt.value == target.value
            and bool(self._funcs) and self._funcs[-1][0].name.value == "__call__"
        )
        if not (
            isinstance(target, cst.Name)
            and isinstance(it, cst.Name)
            and self._per_device
            and it.value in self._per_device[-1]
            and (copy or computes_on(elt, target.value))
        ):
            return updated
        result = _substitute(elt, {target.value: it}, None)
        if result is None:
            return updated
        self.rewrote(original, "MV391", "per-device list: V3 computes once on the distributed Tensor")
        self._distributed.add(id(original))
        return _bracketed(result)

    def _per_device_copies(self, cls: _ClassState, original: cst.ListComp, updated: cst.ListComp) -> cst.BaseExpression:
        """``[t.to(d) for d in self.devices]`` → ``t.to(<the embedding's mesh>)`` (one Replicated Tensor)."""
        mesh = cls.mesh
        target, elt = updated.for_in.target, updated.elt
        if (
            mesh is None
            or not isinstance(target, cst.Name)
            or not isinstance(elt, cst.Call)
            or not isinstance(elt.func, cst.Attribute)
            or elt.func.attr.value != "to"
            or len(elt.args) != 1
            or dotted(_ref_of(elt.args[0].value)) != target.value
            or target.value in _names_in(elt.func.value)
        ):
            return updated
        self.rewrote(original, "MV391", "a copy per device: one Replicated Tensor on the mesh")
        self._distributed.add(id(original))
        return elt.with_changes(args=[cst.Arg(value=_expr(mesh))])

    def _element_of(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        """``list(xs)`` / ``tuple(xs)`` marked by ``leave_Call`` → ``xs`` (swapped in here: a Name is no
        Call for the codemods after this one); else ``updated`` itself."""
        if not self._one_element or id(original) not in self._one_element or not isinstance(updated, cst.Call) or len(updated.args) != 1:
            return updated
        return updated.args[0].value

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        value = self._element_of(original.value, updated.value)
        return updated if value is updated.value else updated.with_changes(value=value)

    def leave_Element(self, original: cst.Element, updated: cst.Element) -> cst.Element:
        value = self._element_of(original.value, updated.value)
        return updated if value is updated.value else updated.with_changes(value=value)

    def leave_Return(self, original: cst.Return, updated: cst.Return) -> cst.Return:
        if original.value is None or updated.value is None:
            return updated
        value = self._element_of(original.value, updated.value)
        return updated if value is updated.value else updated.with_changes(value=value)

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        """A name bound to a rewritten per-device expression holds one distributed Tensor from here on."""
        value = self._element_of(original.value, updated.value)
        if value is not updated.value:
            updated = updated.with_changes(value=value)
        if self._per_device and id(original.value) in self._distributed and len(original.targets) == 1:
            target = original.targets[0].target
            if isinstance(target, cst.Name):
                self._per_device[-1].add(target.value)
        return updated

    # -- classes --------------------------------------------------------------------

    def leave_AssignTarget(self, original: cst.AssignTarget, updated: cst.AssignTarget) -> cst.AssignTarget:
        self._targets -= 1
        target = original.target
        if isinstance(target, cst.Attribute) and target.attr.value == "sharding_strategy" and not self._in_dropped():
            self.todo("MV390", "sharding_strategy: use col_parallel()/row_parallel() from common_layers.linear")
        return updated

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self._classes.pop()
        return updated

    def leave_If(
        self, original: cst.If, updated: cst.If
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement] | cst.RemovalSentinel:
        """An ``if``/``else`` whose branches only chose a strategy or a clone list is gone with them."""
        orelse = updated.orelse
        if not _emptied(original.body, updated.body) and not isinstance(orelse, cst.Else):
            return self._unsharded_branch(original, updated, None) if orelse is None else updated
        else_empty = isinstance(orelse, cst.Else) and isinstance(original.orelse, cst.Else) and _emptied(
            original.orelse.body, orelse.body
        )
        if _emptied(original.body, updated.body) and (orelse is None or else_empty) and not _calls(original.test):
            self.rewrote(original, "MV390", "a branch on the sharding mode with nothing left in it")
            return cst.RemovalSentinel.REMOVE
        if else_empty:
            return updated.with_changes(orelse=None)
        if _emptied(original.body, updated.body) and isinstance(orelse, cst.Else):
            return self._unsharded_branch(original, updated, orelse.body)
        return updated

    def _unsharded_branch(
        self, original: cst.If, updated: cst.If, orelse: cst.BaseSuite | None
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        """``if x.sharding_strategy is not None: <gone> else: B`` → ``B``; ``if x.sharding_strategy is None: B`` → ``B``."""
        tests = _tests_strategy(original.test)
        if tests == "set" and orelse is not None:
            kept: cst.BaseSuite = orelse
        elif tests == "unset" and orelse is None:
            kept = updated.body
        else:
            return updated
        # V3 layers have no strategy: the unsharded branch is the one that runs
        self.rewrote(original, "MV390", "a branch on a layer's sharding_strategy: V3 keeps its unsharded branch")
        if isinstance(kept, cst.IndentedBlock):
            stmts: list[cst.BaseStatement] = list(kept.body)
        else:
            assert isinstance(kept, cst.SimpleStatementSuite)
            stmts = [cst.SimpleStatementLine(kept.body)]
        first = stmts[0]
        if isinstance(first, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            stmts[0] = first.with_changes(leading_lines=[*_without_todos(updated.leading_lines), *first.leading_lines])
        return cst.FlattenSentinel(stmts)


def _tests_strategy(test: cst.BaseExpression) -> str | None:
    """"set" for ``x.sharding_strategy is not None`` (or bare), "unset" for ``... is None``; no calls."""
    kind = "set"
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if not (isinstance(target.comparator, cst.Name) and target.comparator.value == "None"):
            return None
        if isinstance(target.operator, cst.Is):
            kind = "unset"
        elif not isinstance(target.operator, cst.IsNot):
            return None
        test = test.left
    if isinstance(test, cst.Attribute) and test.attr.value == "sharding_strategy" and not _calls(test):
        return kind
    return None


def _without_todos(lines: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """Comment lines but this tool's TODOs (the statement they were about is gone)."""
    return [line for line in lines if not (line.comment and line.comment.value.startswith(TODO_PREFIX.rstrip()))]


def _pass_only(body: cst.BaseSuite) -> bool:
    stmts = body.body
    return all(
        isinstance(s, cst.SimpleStatementLine) and all(isinstance(b, cst.Pass) for b in s.body) for s in stmts
    ) if isinstance(body, cst.IndentedBlock) else all(isinstance(b, cst.Pass) for b in body.body)


def _emptied(original: cst.BaseSuite, updated: cst.BaseSuite) -> bool:
    """The rewrites removed every statement of a block that had some."""
    return original is not updated and _pass_only(updated) and not _pass_only(original)


def _calls(expr: cst.BaseExpression) -> bool:
    return bool(nodes_of(expr, (cst.Call, cst.NamedExpr)))


#: builtins a loop may iterate through with no side effects
_COUNTING_CALLS = frozenset({"range", "len", "enumerate", "zip"})


def _counting(expr: cst.BaseExpression) -> bool:
    """No call but ``range``/``len``/``enumerate``/``zip`` (a loop over it can go when its body did)."""
    if nodes_of(expr, (cst.NamedExpr,)):
        return False
    return all(isinstance(c, cst.Call) and (dotted(c.func) or "") in _COUNTING_CALLS for c in nodes_of(expr, (cst.Call,)))


class ShardingClasses(Codemod):
    """A class's own V2 sharding machinery → placements in ``__init__`` (after ``module_interface``).

    Runs late so the hooks before it see the class's original bases.
    """

    PREFIX = "MV390"

    @classmethod
    def applies(cls, source: str) -> bool:
        return "def shard" in source or "sharding_strategy" in source

    def __init__(self, state: object) -> None:
        super().__init__(state)  # type: ignore[arg-type]
        self._classes: list[_ClassState] = []
        self._self_placing: set[str] = set()

    def visit_Module(self, node: cst.Module) -> None:
        self._self_placing = setter_classes(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        methods = {f.name.value for f in node.body.body if isinstance(f, cst.FunctionDef)}
        if methods & {"shard", "sharding_strategy"}:
            facts = class_facts(node, self.qualname)
            plan = setter_plan(facts.setter, self.qualname, facts, self._self_placing) if facts.setter else None
        else:
            facts, plan = ClassFacts(), None
        self._classes.append(_ClassState(facts, plan))

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        cls = self._classes.pop()
        if not cls.dropped_methods or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        body: list[cst.BaseStatement] = [s for s in updated.body.body if not self._is_dropped(cls, s)]
        if _mentions_strategy(body):
            self.todo("MV390", "the class still reads its sharding strategy; V3 has none (its weights carry placements)")
            return updated
        plan = cls.plan or SetterPlan()
        placements = plan.placements
        kernels: _PerDeviceKernels | None = None
        if placements and cls.facts.head_split and _calls_kernel(body):
            kernels = _PerDeviceKernels()
            rewritten_body = [s.visit(kernels) for s in body]
            if kernels.ok and kernels.calls:
                body = [s for s in rewritten_body if isinstance(s, cst.BaseStatement)]
                if kernels.named:
                    self.state.needed_imports.add(("max.experimental.sharding", "NamedMapping", None))
                    self.state.needed_imports.add((_MESH_AXIS, "TP", None))
                self.rewrote(original, "MV392", "tensor parallel: the kernels get each device's head count "
                             "(n_heads // kv_collection.n_devices) and their outputs' placements")
            else:
                kernels = None
        if placements and cls.facts.head_split and kernels is None:
            self.todo(
                "MV392",
                "tensor parallel attention: V2 gave each device a clone with its own head counts; kept Replicated "
                "(same numerics). To shard: " + ", ".join(f"{p.function}({p.target})" for p in placements)
                + " in __init__ and n_heads // kv_collection.n_devices in the kernels "
                "(gemma3_modulev3/layers/attention.py)",
            )
            placements = []
        for why in plan.todos:
            self.todo("MV390", why)
        biased = [p.target for p in placements if p.function == "row_parallel" and p.target[5:] in cls.facts.biased]
        if biased:
            self.todo(
                "MV390",
                f"{', '.join(biased)} has a bias, which MAX 26.7's row_parallel cannot place (it shards the 1-D bias "
                "on axis 1): kept the module Replicated (same numerics)",
            )
            placements = []
        if placements:
            placed = self._with_placements(body, placements, row_targets_may_have_bias(placements, cls.facts.bias_free))
            if placed is None:
                self.todo("MV390", "no __init__ to place " + ", ".join(p.target for p in placements) + " in")
                return updated
            body = placed
        bases = [
            b
            for o, b in zip(original.bases, updated.bases, strict=True)
            if (self.qualname(o.value) or "").rsplit(".", 1)[-1] != "Shardable"
        ]
        if bases and len(bases) != len(updated.bases):
            bases[-1] = bases[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        elif not bases:
            bases = list(updated.bases)
        self.rewrote(original, "MV390", "sharding_strategy/shard(): V3 places weights at construction")
        return updated.with_changes(bases=bases, body=updated.body.with_changes(body=body))

    def _is_dropped(self, cls: _ClassState, stmt: cst.BaseStatement) -> bool:
        if not isinstance(stmt, cst.FunctionDef):
            return False
        name = stmt.name.value
        return name == "shard" and cls.facts.shard is not None or name == "sharding_strategy"

    def _with_placements(
        self, body: list[cst.BaseStatement], placements: list[Placement], biased: list[str]
    ) -> list[cst.BaseStatement] | None:
        for n, stmt in enumerate(body):
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__":
                extra: list[cst.BaseStatement] = [
                    placement_statement(self.state, p.target, p.function, p.axis, tensor=p.tensor) for p in placements
                ]
                if biased:
                    extra = [_bias_guard(biased, extra)]
                    self.state.needed_imports.add(("max.experimental.tensor", "Tensor", None))
                inner = stmt.body
                assert isinstance(inner, cst.IndentedBlock)
                new = stmt.with_changes(body=inner.with_changes(body=[*inner.body, *extra]))
                return [*body[:n], new, *body[n + 1 :]]
        return None


def _calls_kernel(body: list[cst.BaseStatement]) -> bool:
    """Whether a call of ``PER_DEVICE_KERNELS`` is in ``body`` (without one, the rewriting
    walk of :class:`_PerDeviceKernels` changes nothing: skip it)."""
    return any(
        isinstance(call, cst.Call)
        and (call.func.attr.value if isinstance(call.func, cst.Attribute) else getattr(call.func, "value", None))
        in PER_DEVICE_KERNELS
        for stmt in body
        for call in nodes_of(stmt, (cst.Call,))
    )


class _PerDeviceKernels(cst.CSTTransformer):
    """A module that V2 cloned per device with local head counts, as one V3 module on the mesh.

    The kernels of ``PER_DEVICE_KERNELS`` run once per device: they get each
    device's head count (``n_heads=h`` → ``h // kv_collection.n_devices``) and
    their outputs get the input's placement back (``.rebind_mapping``), as the
    official gemma3/nemotron_h ports write it; ``.to(x.device)`` (one device)
    becomes ``.to(x.mesh)``. ``ok`` is False when a call does not name its KV
    collection or main input simply enough to do that.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ok = True
        self.calls = 0
        self.named = False

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = updated.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if name == "to" and len(updated.args) == 1 and isinstance(updated.func, cst.Attribute):
            arg = dotted(updated.args[0].value)
            if arg is not None and arg.endswith(".device") and arg.count(".") == 1:
                return updated.with_changes(args=[cst.Arg(value=_expr(arg[: -len(".device")] + ".mesh"))])
            return updated
        if name not in PER_DEVICE_KERNELS:
            return updated
        param, position, label = PER_DEVICE_KERNELS[name]
        keywords = {a.keyword.value: a for a in updated.args if a.keyword is not None}
        positional = [a for a in updated.args if a.keyword is None]
        main = keywords[param].value if param in keywords else (
            positional[position].value if len(positional) > position else None
        )
        main_name = dotted(main) if main is not None else None
        if main_name is None:
            self.ok = False
            return updated
        args = list(updated.args)
        if "n_heads" in keywords:
            kv = next(
                (
                    dotted(a.value)
                    for a in updated.args
                    if (a.keyword is not None and a.keyword.value == "kv_collection")
                    or (a.keyword is None and "kv_collection" in (dotted(a.value) or ""))
                ),
                None,
            )
            if kv is None:
                self.ok = False
                return updated
            heads = keywords["n_heads"]
            value = heads.value
            if not isinstance(value, cst.Name | cst.Attribute | cst.Integer):
                value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            local = cst.BinaryOperation(left=value, operator=cst.FloorDivide(), right=_expr(f"{kv}.n_devices"))
            args = [a.with_changes(value=local) if a is heads else a for a in args]
        self.calls += 1
        if label == "cols":
            self.named = True
            mapping = f"NamedMapping({main_name}.mesh, (None, TP))"
        else:
            mapping = f"{main_name}.mapping"
        call = updated.with_changes(args=args)
        return cst.Call(
            func=cst.Attribute(value=call, attr=cst.Name("rebind_mapping")), args=[cst.Arg(value=_expr(mapping))]
        )


def _bias_guard(biased: list[str], placements: list[cst.BaseStatement]) -> cst.If:
    """The placements, only when no row-parallel layer has a bias (else all stay Replicated)."""
    layers = ", ".join(biased) + ("," if len(biased) == 1 else "")
    code = (
        f'if not any(isinstance(getattr(m, "bias", None), Tensor) for m in ({layers})):\n'
        "    pass\n"
    )
    guard = cst.parse_statement(code)
    assert isinstance(guard, cst.If)
    comment = cst.EmptyLine(
        comment=cst.Comment("# MAX 26.7's row_parallel cannot place a bias: a biased layer keeps the module Replicated")
    )
    return guard.with_changes(leading_lines=[comment], body=guard.body.with_changes(body=placements))


def _self_attributes(node: cst.CSTNode) -> set[str]:
    """The ``x`` of every ``self.x`` read in ``node`` (assignment targets excluded)."""
    return {
        attr.attr.value
        for attr in nodes_of(node, (cst.Attribute,), skip=(cst.AssignTarget,))
        if isinstance(attr, cst.Attribute) and isinstance(attr.value, cst.Name) and attr.value.value == "self"
    }


def _mentions_strategy(body: list[cst.BaseStatement]) -> bool:
    return any(
        isinstance(node, cst.Attribute) and node.attr.value in ("sharding_strategy", "_sharding_strategy")
        and dotted(node.value) == "self"
        for stmt in body
        for node in nodes_of(stmt, (cst.Attribute,))
    )


def _ref_of(node: cst.BaseExpression) -> cst.BaseExpression:
    """``d`` for ``d.to_device()`` (``ops`` gave the DeviceRef a Device for V3's ``Tensor.to``), else ``node``."""
    if isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute) \
            and node.func.attr.value == "to_device":
        return node.func.value
    return node
