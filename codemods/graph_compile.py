"""MV380/MV381/MV382 — explicit V2 Graph building becomes ``F.lazy()`` + ``model.compile()``.

The whole recognised pattern (see ``codemods.graph_build``) is rewritten: the
model is constructed under ``F.lazy()`` (and ``default_dtype`` when its dtype
argument is known), moved with ``model.to(ref.to_device())`` when the input
types name one DeviceRef, and compiled with the checkpoint that V2 passed to
``load_state_dict``. ``session.load(g, weights_registry=m.state_dict())``
becomes the compiled model itself and ``c.execute(...)[i]`` reads
``.driver_tensor`` so callers still get a ``Buffer``. Anything that does not
match exactly keeps a TODO saying why and showing the V3 shape (a left
``load_state_dict`` loses V2's ``weight_alignment=``, which V3's lacks).

    model = TinyLM(cfg, DType.float32, device)
    model.load_state_dict(sd)
    with Graph("m", input_types=[t]) as graph:
        graph.output(model(graph.inputs[0].tensor))
    →  with F.lazy(), default_dtype(DType.float32):
           model = TinyLM(cfg, DType.float32, device)
       model.to(device.to_device())
       graph = model.compile(t, weights=sd)
"""

from __future__ import annotations

import re

import libcst as cst

from codemods.args import source
from codemods.base import TODO_PREFIX, Codemod, attach_todos, nodes_of, prefilters_on
from codemods.graph_build import GRAPH, V2_LOAD_KEYWORDS, Builder, GraphPlan, plan_module
from migrate_v3.knowledge.ports import LOAD_GRAPH_SPECS

_STATE_DICT = {
    "load_state_dict": "pass weights=state_dict to model.compile() instead",
    "state_dict": "V3 modules have no state_dict(): compile(weights=...) takes the checkpoint",
    "raw_state_dict": "V3 modules have no raw_state_dict()",
}
#: MV382's note on a V2 ``GraphSpec(...)`` (``PipelineModels`` drops it where it bridges the spec)
GRAPH_SPEC_TODO = "GraphSpec: V3 compiles the module with model.compile()"


def state_dict_todo(method: str) -> str:
    """MV382's note on a call of the V2 module method ``method`` (``state_dict``...)."""
    return f".{method}(): {_STATE_DICT[method]}"


def is_bridged(node: cst.ClassDef) -> bool:
    """A pipeline class whose ``load_graphs`` compiles its GraphSpecs with ``load_graph_specs``
    (``PipelineModels._bridged``): its V2 GraphSpecs and base stay by design."""
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    return any(
        isinstance(s, cst.FunctionDef) and s.name.value == "load_graphs" and LOAD_GRAPH_SPECS in source(s.body) for s in body
    )


_V3_SHAPE = (
    "`with F.lazy(): model = X(...)`; `model.to(device)`; "
    "`compiled = model.compile(*input_types, weights=state_dict)`; `compiled(*inputs)` returns Tensors"
)
_TENSOR_MODULE = "max.experimental.tensor"
_COMPILATION_MODULE = "max.experimental.compilation"




def _stmt(code: str) -> cst.BaseStatement:
    return cst.parse_statement(code)


def _drop_own_todos(stmt: cst.BaseStatement) -> list[cst.EmptyLine]:
    """The statement's leading lines without the MV38x TODOs that the rewrite supersedes."""
    keep = []
    lines: list[cst.EmptyLine] = list(getattr(stmt, "leading_lines", ()))
    for line in lines:
        text = line.comment.value if line.comment is not None else ""
        if not text.startswith(f"{TODO_PREFIX}MV38"):
            keep.append(line)
    return keep


class GraphCompile(Codemod):
    PREFIX = "MV38"
    #: ``plan_module`` starts from a ``with <...Graph>(...)`` statement; a source
    #: without a ``with`` statement or the word ``Graph`` gets an empty plan.
    #: (Form feeds may indent a line; ``async with`` may continue a line.)
    PLAN_TRIGGER = re.compile(r"^[ \t\f]*(?:async\b.*)?with\b", re.M)

    @classmethod
    def applies(cls, source: str) -> bool:
        return any(w in source for w in ("Graph", "state_dict", "weights_registry", "PipelineModel", "trace"))

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.class_depth = 0
        self.plan = GraphPlan()
        #: ``m.raw_state_dict()`` calls whose dict is read for its keys only
        self.names_only: set[int] = set()

    def visit_Module(self, node: cst.Module) -> None:
        source = self.state.source
        if not prefilters_on() or ("Graph" in source and self.PLAN_TRIGGER.search(source)):
            self.plan = plan_module(node, self.qualname)

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.class_depth += 1
        return not is_bridged(node)  # (a bridged pipeline's GraphSpecs stay V2 by design)

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.class_depth -= 1
        return updated

    def visit_Call(self, node: cst.Call) -> None:
        """``m.raw_state_dict().keys()``: the names only (see :meth:`_parameter_names`)."""
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "keys" and not node.args:
            inner = func.value
            if (isinstance(inner, cst.Call) and not inner.args and isinstance(inner.func, cst.Attribute)
                    and inner.func.attr.value == "raw_state_dict"):
                self.names_only.add(id(inner))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value == "trace" and self.class_depth:
            self.todo("MV382", "trace() override: V3 unflattens inputs in forward() and compiles with model.compile()")

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        if id(original) not in self.plan.returns_compiled or updated.returns is None or original.returns is None:
            return updated
        local = {n.value for n in _names(original.returns) if self.qualname(n) in GRAPH}
        name = self.state.import_name(_COMPILATION_MODULE, "CompiledCallable")
        annotation = updated.returns.annotation.visit(_Rename(local, name))
        return updated.with_changes(returns=updated.returns.with_changes(annotation=annotation))

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        builders = self.plan.builders.get(id(original))
        if not builders or len(updated.body) != len(original.body):
            return updated
        out: list[cst.BaseStatement | None] = list(updated.body)
        for builder in builders:
            self.rewrote(original.body[builder.with_graph], "MV380", "Graph + session.load → F.lazy() + model.compile()")
            # the sites the rewrite resolves, under the codes check reports them with
            self.rewrote(original.body[builder.load], "MV382", ".load_state_dict(sd) → compile(weights=sd)")
            self.rewrote(original.body[builder.with_graph], "MV373", "g.inputs[i].tensor → compile(*input_types)")
            self._rewrite_builder(builder, list(updated.body), out)
        return updated.with_changes(body=[s for s in out if s is not None])

    def _rewrite_builder(self, b: Builder, body: list[cst.BaseStatement], out: list[cst.BaseStatement | None]) -> None:
        self.state.needed_imports.add(("max.experimental", "functional", "F"))
        contexts = ["F.lazy()"]
        if b.dtype is not None:
            contexts.append(f"default_dtype({source(b.dtype)})")
            self.state.import_name(_TENSOR_MODULE, "default_dtype")
        elif b.config is not None:  # (V2's layers took the config's dtype; V3's build in the default one)
            dtype = self.state.import_name("max.dtype", "DType")
            contexts.append(f'default_dtype(getattr({source(b.config)}, "dtype", None) or {dtype}.float32)')
            self.state.import_name(_TENSOR_MODULE, "default_dtype")
        construct = body[b.construct]
        lazy = _stmt(f"with {', '.join(contexts)}:\n    pass\n")
        assert isinstance(lazy, cst.With) and isinstance(lazy.body, cst.IndentedBlock)
        inner = construct.with_changes(leading_lines=[])
        out[b.construct] = lazy.with_changes(
            body=lazy.body.with_changes(body=[inner]), leading_lines=getattr(construct, "leading_lines", ())
        )
        args = [*b.input_args, f"weights={source(b.weights)}"]
        compile_stmt = _stmt(f"{b.graph} = {b.model}.compile({', '.join(args)})\n").with_changes(
            leading_lines=_drop_own_todos(body[b.with_graph])
        )
        if b.registry >= 0:  # (V2's m.state_dict() after a strict load: the checkpoint it loaded)
            out[b.registry] = _stmt(f"{b.registry_name} = {source(b.weights)}\n").with_changes(
                leading_lines=_drop_own_todos(body[b.registry])
            )
        load = body[b.load]
        todos: list[str] = []
        if b.device is not None:
            out[b.load] = _stmt(f"{b.model}.to({source(b.device)})\n").with_changes(
                leading_lines=_drop_own_todos(load)
            )
        else:
            out[b.load] = None
            todos.append(
                f"{TODO_PREFIX}MV380 call {b.model}.to(device) before compile(): "
                "the input types do not name one DeviceRef"
            )
        new_compile = attach_todos(compile_stmt, todos)
        out[b.with_graph] = new_compile if isinstance(new_compile, cst.BaseStatement) else compile_stmt

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        if id(original.value) in self.plan.loads:
            return updated.with_changes(value=self._loaded(original.value))
        return updated.with_changes(value=self._execute(original.value, updated.value))

    def leave_AnnAssign(self, original: cst.AnnAssign, updated: cst.AnnAssign) -> cst.AnnAssign:
        if original.value is not None and id(original.value) in self.plan.loads:
            return updated.with_changes(value=self._loaded(original.value))
        return updated

    def _loaded(self, load: cst.BaseExpression) -> cst.BaseExpression:
        """What replaces ``session.load(g, weights_registry=...)``: ``g``, or ``g.engine_model`` (V2's type)."""
        self.rewrote(load, "MV381", "session.load(graph, weights_registry=...) → the compiled model")
        self.rewrote(load, "MV382", "weights_registry=model.state_dict() → compile(weights=...)")
        return cst.parse_expression(self.plan.loads[id(load)])

    def leave_Return(self, original: cst.Return, updated: cst.Return) -> cst.Return:
        if original.value is None or updated.value is None:
            return updated
        return updated.with_changes(value=self._execute(original.value, updated.value))

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        plan = self.plan
        if id(original) in plan.handled:
            return updated
        if id(original) in plan.unknown_executes:
            self.todo("MV381", "compiled(...) returns the forward's pytree of Tensors: read .driver_tensor for Buffers")
            return updated
        qual = self.qualname(original.func)
        if qual in GRAPH:
            reason = plan.reasons.get(id(original), "not a `with Graph(...) as g:` block in a function")
            self.todo(
                "MV380",
                f"build under F.lazy() and call model.compile(*input_types, weights=...) (not rewritten: {reason}): {_V3_SHAPE}",
            )
        elif qual is not None and qual.endswith(".GraphSpec") and qual.startswith("max.pipelines"):
            self.todo("MV382", GRAPH_SPEC_TODO)
        elif isinstance(original.func, cst.Attribute):
            method = original.func.attr.value
            if any(a.keyword is not None and a.keyword.value == "weights_registry" for a in original.args):
                # (session.load, or a V2 helper that loads the graph: flux2's self._load_graph)
                self.todo("MV381", "use compiled = model.compile(*types, weights=state_dict)")
            elif id(original) in self.names_only:
                return self._parameter_names(original, updated)
            elif method in _STATE_DICT:
                self.todo("MV382", state_dict_todo(method))
                if method == "load_state_dict":
                    return self._drop_alignment(original, updated)
        return updated

    def _parameter_names(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``m.raw_state_dict().keys()`` → ``dict(m.parameters).keys()``: the names of V2's weights are
        those of V3's parameters (``Module.parameters`` yields them with their Tensors)."""
        assert isinstance(updated.func, cst.Attribute)
        module = updated.func.value
        self.rewrote(original, "MV382", f"{source(module)}.raw_state_dict().keys() → dict({source(module)}.parameters)"
                     ".keys(): a V3 module names its parameters there")
        return cst.Call(func=cst.Name("dict"), args=[cst.Arg(value=cst.Attribute(value=module, attr=cst.Name("parameters")))])

    def _drop_alignment(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """``load_state_dict(sd, weight_alignment=1, override_quantization_encoding=True)`` →
        ``load_state_dict(sd)``: only V2's ``Module.load_state_dict`` has these keywords; V3's
        copies each tensor into its parameter as declared and takes neither (left in, mypy and
        the call itself fail; a tensor of another dtype is refused there, not converted)."""
        args: list[cst.Arg] = []
        dropped: list[str] = []
        for arg in updated.args:
            if arg.keyword is None or arg.keyword.value not in V2_LOAD_KEYWORDS:
                args.append(arg)
                continue
            dropped.append(arg.keyword.value)
            if arg is updated.args[-1] and args:  # the last one: its comma (and line break) moves up
                args[-1] = args[-1].with_changes(comma=arg.comma)
        for keyword in dropped:
            self.rewrote(original, "MV382", f"load_state_dict({keyword}=...) dropped: {V2_LOAD_KEYWORDS[keyword]}")
        return updated.with_changes(args=args) if dropped else updated

    def _execute(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        """``c.execute(a)[i]`` → ``c(a)[i].driver_tensor`` (``c(a).driver_tensor`` for one output)."""
        entry = self.plan.executes.get(id(original))
        if entry is None:
            return updated
        index, outputs = entry
        call = updated.value if isinstance(updated, cst.Subscript) else updated
        if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
            return updated
        direct = source(call.with_changes(func=call.func.value))
        self.rewrote(original, "MV381", ".execute() → call the compiled model; .driver_tensor for Buffers")
        if index is None:
            code = f"[{direct}.driver_tensor]" if outputs == 1 else f"[t.driver_tensor for t in {direct}]"
        else:
            code = f"{direct}.driver_tensor" if outputs == 1 else f"{direct}[{index}].driver_tensor"
        return cst.parse_expression(code)


def _names(node: cst.CSTNode) -> list[cst.Name]:
    return nodes_of(node, (cst.Name,))  # type: ignore[return-value]


class _Rename(cst.CSTTransformer):
    def __init__(self, old: set[str], new: str) -> None:
        super().__init__()
        self.old, self.new = old, new

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=self.new) if updated.value in self.old else updated
