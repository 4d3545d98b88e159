"""MV363 — tied embeddings: one copy of the shared weight, the transpose in forward().

V2 aliases the output head to the embedding (``set_shared_weight`` or
``lm_head.weight = embed_tokens.weight``); a V3 module has no aliasing, and
``compile(weights=...)`` binds every parameter by attribute path, so a tied
head would need a second copy. As in ``llama3_modulev3``: the head is created
only when not tied and forward multiplies by the embedding's transpose.
Recognised inside one class: ``self.H = <call>`` in ``__init__`` and, later in
``__init__``, the alias (alone or as the only statement of an ``if`` without
``else``); every ``self.H(x)`` in the class is rewritten. In a subclass of V2
``Transformer`` (which apply replaces by its V3 port), the local alias
``output.set_shared_weight("weight", embedding.weight)`` becomes ``output =
None``: the port computes ``norm(h) @ embed_tokens.weight.T`` when it has no
head. Other aliases get a TODO.

A head built with V2's ``tied_weight=self.E.weight`` (``ColumnParallelLinear``,
alone or as ``self.E.weight if C else None``) is ``None`` where it is tied, and
the class gets an ``H`` property that reads it as a function of the embedding's
weight, so every call of it (in the class, in a mixin, through a helper it is
passed to) computes V2's ``x @ E.weight.T`` and the checkpoint needs no head
tensor. The function is made when the head is read, from the module that reads
it: ``Module.compile`` traces a *copy* of the module holding the checkpoint's
weights, and a function stored in ``__init__`` would keep reading the original
module's (random) weight:

    self.lm_head = ColumnParallelLinear(..., tied_weight=(self.embed_tokens.weight if tie else None))
    →  if tie:
           self.lm_head = None  # tied: ...
       else:
           self.lm_head = ColumnParallelLinear(...)
       ...
       @property
       def lm_head(self) -> Any:  # None set: lambda x: x @ self.embed_tokens.weight.T
       @lm_head.setter
       def lm_head(self, head: Any) -> None: ...

    self.lm_head = Linear(...)
    if config.tie_word_embeddings:
        self.lm_head.set_shared_weight("weight", self.embed_tokens.weight)
    →  self.tie_word_embeddings = config.tie_word_embeddings
       if self.tie_word_embeddings:
           self.lm_head = None
       else:
           self.lm_head = Linear(...)
    ...  self.lm_head(h)  →  (h @ self.embed_tokens.weight.T if self.lm_head is None else self.lm_head(h))
    ...  f(h, head=self.lm_head)  →  f(h, head=((lambda x: x @ self.embed_tokens.weight.T) if self.lm_head is None else self.lm_head))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, cast

import libcst as cst

from codemods.args import self_attr, source
from codemods.base import TODO_PREFIX, Codemod, FileState, attach_todos, nodes_of
from migrate_v3.knowledge.layers import LAYERS, v2_symbol

_FLAG = "tie_word_embeddings"
_Node = TypeVar("_Node", bound=cst.CSTNode)


@dataclass
class _Tie:
    head: str
    embedding: str
    #: index of ``self.head = ...`` and of the alias statement in ``__init__``
    create: int
    alias: int
    condition: cst.BaseExpression | None



def _embedding_weight(node: cst.BaseExpression) -> str | None:
    """``self.E.weight`` → ``E``."""
    if isinstance(node, cst.Attribute) and node.attr.value == "weight":
        return self_attr(node.value)
    return None


def _shared_weight_call(stmt: cst.BaseStatement) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(H, E) of a statement ``H.set_shared_weight("weight", E.weight)``."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
        return None
    call = small.value
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "set_shared_weight" and len(call.args) == 2):
        return None
    name, weight = call.args[0].value, call.args[1].value
    if not (isinstance(name, cst.SimpleString) and name.evaluated_value == "weight"):
        return None
    if not (isinstance(weight, cst.Attribute) and weight.attr.value == "weight"):
        return None
    return func.value, weight.value


def _alias(stmt: cst.BaseStatement) -> tuple[str, str] | None:
    """(head, embedding) of ``self.H.set_shared_weight("weight", self.E.weight)`` / ``self.H.weight = self.E.weight``."""
    shared = _shared_weight_call(stmt)
    if shared is not None:
        head, emb = self_attr(shared[0]), self_attr(shared[1])
        return (head, emb) if head and emb else None
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        if isinstance(target, cst.Attribute) and target.attr.value == "weight":
            head, emb = self_attr(target.value), _embedding_weight(small.value)
            if head and emb:
                return head, emb
    return None


def _find_tie(init: cst.FunctionDef) -> _Tie | None:
    if not isinstance(init.body, cst.IndentedBlock):
        return None
    created: dict[str, int] = {}
    for i, stmt in enumerate(init.body.body):
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
            assign = stmt.body[0]
            if len(assign.targets) == 1 and isinstance(assign.value, cst.Call):
                head = self_attr(assign.targets[0].target)
                if head:
                    created[head] = i
        condition: cst.BaseExpression | None = None
        inner = stmt
        if isinstance(stmt, cst.If) and stmt.orelse is None and isinstance(stmt.body, cst.IndentedBlock) and len(stmt.body.body) == 1:
            condition, inner = stmt.test, stmt.body.body[0]
        found = _alias(inner)
        if found is not None and found[0] in created:
            return _Tie(found[0], found[1], created[found[0]], i, condition)
    return None


def _local_alias(stmt: cst.SimpleStatementLine) -> str | None:
    """``H`` of ``H.set_shared_weight("weight", E.weight)`` with local names H and E."""
    shared = _shared_weight_call(stmt)
    if shared is not None and isinstance(shared[0], cst.Name) and isinstance(shared[1], cst.Name):
        return shared[0].value
    return None


_TIED_KEYWORD = "tied_weight"


def _tied_weight(stmt: cst.BaseStatement) -> tuple[str, str, cst.BaseExpression | None, cst.Call] | None:
    """(H, E, condition, call) of ``self.H = X(..., tied_weight=self.E.weight)`` or of
    ``tied_weight=(self.E.weight if C else None)`` (condition C)."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Call)):
        return None
    head = self_attr(small.targets[0].target)
    arg = next((a for a in small.value.args if a.keyword is not None and a.keyword.value == _TIED_KEYWORD), None)
    if head is None or arg is None:
        return None
    value = arg.value
    if isinstance(value, cst.IfExp) and isinstance(value.orelse, cst.Name) and value.orelse.value == "None":
        embedding = _embedding_weight(value.body)
        return (head, embedding, value.test, small.value) if embedding else None
    embedding = _embedding_weight(value)
    return (head, embedding, None, small.value) if embedding else None


def _other_reads(cls: cst.ClassDef, head: str) -> bool:
    """``cls`` reads ``self.<head>`` other than by calling it, passing it or setting it."""
    nodes = nodes_of(cls.body, (cst.Call, cst.Arg, cst.AssignTarget, cst.Attribute))
    handled = {
        id(n.func) if isinstance(n, cst.Call) else id(n.value) if isinstance(n, cst.Arg) else id(n.target)
        for n in nodes if isinstance(n, cst.Call | cst.Arg | cst.AssignTarget)
    }
    return any(isinstance(n, cst.Attribute) and self_attr(n) == head and id(n) not in handled for n in nodes)


def _without_tied_weight(call: cst.Call) -> cst.Call:
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value == _TIED_KEYWORD)]
    last = call.args[-1] if call.args else None
    if args and last is not None and last.keyword is not None and last.keyword.value == _TIED_KEYWORD:
        args[-1] = args[-1].with_changes(comma=last.comma)  # (its trailing comma, if any)
    return call.with_changes(args=args)


def _tied_head(tie: _Tie, untied: cst.SimpleStatementLine) -> cst.BaseStatement:
    """``self.H = None`` (under ``if C:``, ``untied`` in the ``else``): the ``H`` property
    (:func:`_head_property`) computes with the embedding's weight."""
    tied = cst.parse_statement(
        f"self.{tie.head} = None"
        f"  # tied: V3 has no weight aliasing (V2's {_TIED_KEYWORD}=); the {tie.head} property computes with "
        f"self.{tie.embedding}.weight\n"
    )
    if tie.condition is None:
        return tied.with_changes(leading_lines=untied.leading_lines)
    branch = cst.parse_statement(f"if {source(tie.condition)}:\n    pass\nelse:\n    pass\n")
    assert isinstance(branch, cst.If) and isinstance(branch.orelse, cst.Else)
    return branch.with_changes(
        leading_lines=untied.leading_lines,
        body=branch.body.with_changes(body=[tied]),
        orelse=branch.orelse.with_changes(body=branch.orelse.body.with_changes(body=[untied.with_changes(leading_lines=[])])),
    )


def _head_property(tie: _Tie, any_name: str) -> list[cst.BaseStatement]:
    """The ``H`` property and setter: what was set, or (``None`` set: tied) the embedding's
    transpose of the module that reads it."""
    h, e = tie.head, tie.embedding
    code = (
        f"@property\n"
        f"def {h}(self) -> {any_name}:\n"
        f'    """The head; tied (None): x @ {e}.weight.T read from this module as compile() copies it."""\n'
        f'    head = self.__dict__.get("{h}")\n'
        f"    return head if head is not None else (lambda x: x @ self.{e}.weight.T)\n"
        f"\n"
        f"@{h}.setter\n"
        f"def {h}(self, head: {any_name}) -> None:\n"
        f'    self.__dict__["{h}"] = head\n'
    )
    module = cst.parse_module(code)
    return [stmt.with_changes(leading_lines=[cst.EmptyLine(indent=False)]) if isinstance(stmt, cst.FunctionDef) else stmt
            for stmt in module.body]


class _MaybeNone(cst.CSTTransformer):
    """``x = Linear(...)`` → ``x: Linear | None = Linear(...)``, the first binding of each name (a tie
    sets it to None later: a type checker then takes both)."""

    def __init__(self, names: set[str]) -> None:
        super().__init__()
        self.names = set(names)
        self.depth = 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.depth += 1
        return self.depth == 1  # (a nested function's locals are its own)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.depth -= 1
        return updated

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign | cst.AnnAssign:
        target = updated.targets[0].target if len(updated.targets) == 1 else None
        if not (isinstance(target, cst.Name) and target.value in self.names):
            return updated
        self.names.discard(target.value)
        value = updated.value
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)):
            return updated
        name = value.func.value
        spec = LAYERS.get(name)  # (a V2 layer's call becomes its V3 class's later: annotate with that)
        annotation = cst.parse_expression(f"{spec.v3_name if spec is not None else name} | None")
        return cst.AnnAssign(target=target, annotation=cst.Annotation(annotation), value=value)


class TiedEmbeddings(Codemod):
    PREFIX = "MV363"

    @classmethod
    def applies(cls, source: str) -> bool:
        return "set_shared_weight" in source or ".weight = self." in source or f"{_TIED_KEYWORD}=" in source

    def __init__(self, state: FileState) -> None:
        super().__init__(state)
        #: per enclosing class: does it subclass V2 Transformer (ported by apply)?
        self.ported_base: list[bool] = []
        #: per enclosing class: the heads its methods build with ``tied_weight=``
        self.tied: list[list[_Tie]] = []
        #: id of a ``tied_weight=`` head statement / of its call → the tie
        self.tied_statements: dict[int, _Tie] = {}
        self.tied_calls: set[int] = set()
        #: per enclosing function: the locals a tie set to None (their first binding may be None too)
        self.nulled: list[set[str]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.nulled.append(set())

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        names = self.nulled.pop()
        return updated.visit(_MaybeNone(names)) if names else updated  # type: ignore[return-value]

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.ported_base.append(any(v2_symbol(self.qualname(b.value)) == "Transformer" for b in node.bases))
        self.tied.append([])

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        found = _tied_weight(node) if self.tied else None
        if found is not None:  # (the call loses tied_weight= before the layer rules see it)
            head, embedding, condition, call = found
            self.tied_statements[id(node)] = tie = _Tie(head, embedding, -1, -1, condition)
            self.tied_calls.add(id(call))
            self.tied[-1].append(tie)

    def _in_ported_transformer(self) -> bool:
        return bool(self.ported_base) and self.ported_base[-1]

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        tied = self.tied_statements.pop(id(original), None)
        if tied is not None:
            self.rewrote(original, "MV363", f"{_TIED_KEYWORD}: tied {tied.head} computes x @ {tied.embedding}.weight.T")
            if tied.condition is None and self.state.statement_todos:
                self.state.statement_todos[-1].clear()  # (the layer rules' notes on the call it replaces)
            return _tied_head(tied, updated)  # type: ignore[return-value]
        head = _local_alias(original) if self._in_ported_transformer() else None
        if head is None:
            return updated
        self.rewrote(original, "MV363", f"tied {head}: no head; the Transformer port uses embed_tokens.weight.T")
        if self.nulled:
            self.nulled[-1].add(head)
        new = cst.parse_statement(f"{head} = None  # tied: the V3 Transformer port computes h @ embed_tokens.weight.T\n")
        return new.with_changes(leading_lines=updated.leading_lines)  # type: ignore[return-value]

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if id(original) in self.tied_calls:
            self.tied_calls.discard(id(original))
            return _without_tied_weight(updated)
        func = original.func
        if isinstance(func, cst.Attribute) and func.attr.value == "set_shared_weight":
            if self._in_ported_transformer() and isinstance(func.value, cst.Name):
                return updated  # the statement is replaced (leave_SimpleStatementLine)
            self.todo(
                "MV363",
                "set_shared_weight: V3 has no weight aliasing; create the head only when not tied "
                "and use h @ embed_tokens.weight.T in forward()",
            )
        return updated

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.ported_base.pop()
        heads = self.tied.pop()
        if not isinstance(updated.body, cst.IndentedBlock):
            return updated
        if heads:  # the class's reads of such a head other than calls (``self.H.weight``) get a TODO
            for head in heads:
                if _other_reads(updated, head.head):  # (a transformer rebuilds every node: only then)
                    updated = updated.visit(_HeadCalls(head, calls=False))  # type: ignore[assignment]
            assert isinstance(updated.body, cst.IndentedBlock)
            any_name = self.state.import_name("typing", "Any")
            added: list[cst.BaseStatement] = []
            for head in {h.head: h for h in heads}.values():
                added.extend(_head_property(head, any_name))
            return updated.with_changes(body=updated.body.with_changes(body=[*updated.body.body, *added]))
        body = list(updated.body.body)
        for k, item in enumerate(body):
            if isinstance(item, cst.FunctionDef) and item.name.value == "__init__":
                tie = _find_tie(item)
                if tie is None:
                    return updated
                self.rewrote(original, "MV363", f"tied {tie.head} → {tie.embedding}.weight.T in forward()")
                body[k] = self._rewrite_init(item, tie)
                transformer = _HeadCalls(tie)
                body = [b.visit(transformer) if i != k else b for i, b in enumerate(body)]  # type: ignore[misc]
                return updated.with_changes(body=updated.body.with_changes(body=body))
        return updated

    def _rewrite_init(self, init: cst.FunctionDef, tie: _Tie) -> cst.FunctionDef:
        assert isinstance(init.body, cst.IndentedBlock)
        stmts: list[cst.BaseStatement] = list(init.body.body)
        create = stmts[tie.create]
        alias = stmts[tie.alias]
        if tie.condition is None:
            new_create: list[cst.BaseStatement] = []
        else:
            cond = source(tie.condition)
            flag = cst.parse_statement(f"self.{_FLAG} = {cond}\n").with_changes(
                leading_lines=getattr(create, "leading_lines", ())
            )
            branch = cst.parse_statement(f"if self.{_FLAG}:\n    self.{tie.head} = None\nelse:\n    pass\n")
            assert isinstance(branch, cst.If) and isinstance(branch.orelse, cst.Else)
            orelse_body = branch.orelse.body.with_changes(body=[create.with_changes(leading_lines=[])])
            new_create = [flag, branch.with_changes(orelse=branch.orelse.with_changes(body=orelse_body))]
        out: list[cst.BaseStatement] = []
        for i, stmt in enumerate(stmts):
            if i == tie.create:
                out.extend(new_create)
            elif stmt is not alias:
                out.append(stmt)
        return init.with_changes(body=init.body.with_changes(body=out))


class _HeadCalls(cst.CSTTransformer):
    """``self.H(x)`` → ``x @ self.E.weight.T`` (conditional when the tie is); ``self.H`` passed as
    an argument (a head a helper calls) → ``lambda x: x @ self.E.weight.T`` the same way. Any other
    read of ``self.H`` (``self.H.weight``, ``if self.H is None``) gets a TODO: the head is ``None``
    (or absent) when tied, so the statement now means something else."""

    def __init__(self, tie: _Tie, calls: bool = True) -> None:
        super().__init__()
        self.tie = tie
        #: rewrite the calls and arguments (False: the head stays callable when tied, they need nothing)
        self.calls = calls
        #: ids of the ``self.H`` nodes the call and argument rules replace
        self.handled: set[int] = set()
        #: per enclosing statement: whether it reads ``self.H`` some other way
        self.reads: list[bool] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.SimpleStatementLine | cst.BaseCompoundStatement):
            self.reads.append(False)
        elif isinstance(node, cst.AssignTarget) and self_attr(node.target) == self.tie.head:
            self.handled.add(id(node.target))  # (setting it is no read)
        elif isinstance(node, cst.Call) and self_attr(node.func) == self.tie.head:
            self.handled.add(id(node.func))
        elif isinstance(node, cst.Arg) and not node.star and self_attr(node.value) == self.tie.head:
            self.handled.add(id(node.value))
        elif isinstance(node, cst.Attribute) and id(node) not in self.handled and self_attr(node) == self.tie.head and self.reads:
            self.reads[-1] = True
        return super().on_visit(node)

    def on_leave(self, original_node: _Node, updated_node: _Node) -> _Node | cst.RemovalSentinel | cst.FlattenSentinel[_Node]:
        result = super().on_leave(original_node, updated_node)
        if isinstance(original_node, cst.SimpleStatementLine | cst.BaseCompoundStatement) and self.reads.pop() and isinstance(result, cst.CSTNode):
            now = (
                f"a function of self.{self.tie.embedding}.weight {'when tied' if self.tie.condition is not None else '(tied)'}"
                if not self.calls else "None when tied" if self.tie.condition is not None else "gone (tied)"
            )
            note = (
                f"{TODO_PREFIX}MV363 self.{self.tie.head} is {now}: "
                f"this read of it means something else now; use self.{self.tie.embedding}.weight.T for the tied head"
            )
            result = cast(_Node, attach_todos(result, [note]))
        return result

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if not self.calls or self_attr(updated.func) != self.tie.head or len(updated.args) != 1 or updated.args[0].keyword:
            return updated
        x = source(updated.args[0].value)
        tied = f"{x} @ self.{self.tie.embedding}.weight.T"
        if self.tie.condition is None:
            return cst.parse_expression(f"({tied})")
        head = source(updated)  # (None exactly when tied: the test narrows the head's type for mypy)
        return cst.parse_expression(f"({tied} if self.{self.tie.head} is None else {head})")

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        if not self.calls or self_attr(original.value) != self.tie.head or original.star:
            return updated
        tied = f"(lambda x: x @ self.{self.tie.embedding}.weight.T)"
        if self.tie.condition is not None:
            tied = f"({tied} if self.{self.tie.head} is None else self.{self.tie.head})"
        return updated.with_changes(value=cst.parse_expression(tied))
