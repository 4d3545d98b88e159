"""MV383 — V2 PipelineModel classes become ModuleV3 pipeline models.

Rules read off the mpnet/olmo2/llama3 pairs (not a copy of one port):

* base ``PipelineModel[Ctx, Cfg, Model]`` → ``ModuleV3PipelineModel[Ctx]``,
  ``GraphPipelineModelWithKVCache[Ctx, ...]`` → ``ModuleV3PipelineModelWithKVCache[Ctx]``,
  ``MultiGraphPipelineModelWithKVCache`` → ``ModuleV3MultiGraphPipelineModelWithKVCache``
  (``max.pipelines.lib``), only the context type argument kept;
* ``graph_specs(self, cfg)`` of the shape "build ``m``, ``m.load_state_dict``,
  return ``{role: GraphSpec(m, ...)}``" → ``_instantiate_module(self, cfg)``
  that builds ``m`` and ``m.to(self.devices[0])`` (the V3 base builds it under
  ``F.lazy()`` and compiles it with the state dict itself);
* the ``_load_state_dict`` override that only stashes ``self.state_dict``, and
  the ``state_dict`` attribute, go (V3 ``load_model`` threads the state dict);
* ``model: Model`` / the ``model`` property over ``self._models`` →
  ``model: Callable[..., Any]``; ``self._models = self.load_graphs(session)``
  → ``self.model = self.load_model()`` (KV bases compile in ``__init__``), and a
  ``self.model = self._models[<role>]`` after it in the same method goes with it;
* ``self.model.execute(...)`` → ``self.model(...)`` with a TODO on reading
  ``.driver_tensor``; anything else gets a TODO naming the V3 hook;
* a two-tower ``graph_specs`` (vision + language) → ``ModuleV3MultiGraphPipelineModelWithKVCache``
  and its two compile hooks (``codemods.pipeline_towers``);
* a class moved onto the V3 KV base gets ``_module_default_dtype`` returning
  ``getattr(model_config, "dtype", self.dtype)``: that base builds under
  ``model_config.dtype``, which V2 configs need not have (a target + draft pair).

    class M(PipelineModel[TextContext, Cfg, Model]):
    →  class M(ModuleV3PipelineModel[TextContext]):
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import libcst as cst

from codemods.args import is_docstring, self_attr, source
from codemods.args import small_statement as _small
from codemods.base import TODO_PREFIX, Codemod, attach_todos, nodes_of, without_comments
from codemods.dependencies import changes
from codemods.graph_body import METHOD, Dispatch, dispatched, graph_body, insert_subclasses
from codemods.graph_compile import GRAPH_SPEC_TODO, is_bridged, state_dict_todo
from codemods.imports import _IDENT, blank, blanked_code
from codemods.pipeline_runtime import HOOK, session_init, v3_distributed_runtime
from codemods.pipeline_towers import Towers, compile_helper, find_towers, hooks, models_property
from codemods.ports import add_port
from migrate_v3.knowledge.layers import MODEL_MIXINS
from migrate_v3.knowledge.ports import LOAD_GRAPH_SPECS as BRIDGE
from migrate_v3.knowledge.symbols import SIBLING_LOAD_STEPS, SIBLING_RENAMES

_BASES = {
    "PipelineModel": "ModuleV3PipelineModel",
    "PipelineModelWithKVCache": "ModuleV3PipelineModelWithKVCache",
    "GraphPipelineModelWithKVCache": "ModuleV3PipelineModelWithKVCache",
    "MultiGraphPipelineModelWithKVCache": "ModuleV3MultiGraphPipelineModelWithKVCache",
}
_HOME = "max.pipelines.lib"
#: V3 bases whose ``__init__`` takes V2's trailing positional parameters as keywords only
_KEYWORD_TAIL = {"ModuleV3PipelineModelWithKVCache": ("adapter", "return_logits")}
#: the positional parameters every pipeline base takes first (pipeline_config ... weights)
_V3_POSITIONAL = 5
#: the V3 base of a two-tower (vision + language) model, see ``codemods.pipeline_towers``
_MULTI = "ModuleV3MultiGraphPipelineModelWithKVCache"
#: the names of sibling V2 pipeline bases ``Dependencies`` may import as a V3 pipeline model
_SIBLING_BASES = tuple(sorted({k.rsplit(".", 1)[1] for k in SIBLING_RENAMES}))
#: what a V2 pipeline's own load_model/load_graphs override loads through
_V2_LOAD = frozenset({"load_graphs", "compile_graphs", "init_graphs", "_build_graph_for_compile"})
#: V2-only names that the rewrite may leave unused: dropped from their imports then
_V2_ONLY = frozenset({*_BASES, "GraphPipelineModel", "Model", "GraphRole", "GraphSpec"})


def _model_dtype(cfg: str) -> str:
    """The dtype a pipeline builds its model in: the config's, when it has one that is set (a
    config's ``dtype`` may be Optional; V2 configs need not have one), else the pipeline's."""
    return f'getattr({cfg}, "dtype", None) or self.dtype'


def _is_import(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, cst.Import | cst.ImportFrom) for s in stmt.body)


def _is_guard(stmt: cst.CSTNode) -> bool:
    """``if ...: raise ...`` — kept in front of the module construction."""
    return (
        isinstance(stmt, cst.If)
        and stmt.orelse is None
        and isinstance(stmt.body, cst.IndentedBlock)
        and all(isinstance(_small(s), cst.Raise) for s in stmt.body.body)
    )


def _matches(stmt: cst.CSTNode, code: str) -> bool:
    return source(stmt).strip() == code


def _helper_calls(body: cst.CSTNode, name: str) -> set[str]:
    """``h`` of every ``name = self.h(...)`` in ``body``."""
    found: set[str] = set()
    for node in nodes_of(body, (cst.Assign,)):
        assert isinstance(node, cst.Assign)
        target = node.targets[0].target if len(node.targets) == 1 else None
        if isinstance(target, cst.Name) and target.value == name and isinstance(node.value, cst.Call):
            func = node.value.func
            if isinstance(func, cst.Attribute) and source(func.value) == "self":
                found.add(func.attr.value)
    return found


def _stashed(func: cst.FunctionDef) -> set[str]:
    """``{"self.X"}`` for a ``_load_state_dict`` override that sets ``self.X = super()._load_state_dict()``
    and returns it: what ``graph_specs`` loads is then the state dict the V3 ``load_model`` compiles with."""
    if func.name.value != "_load_state_dict" or not isinstance(func.body, cst.IndentedBlock) or not func.body.body:
        return set()
    ret = _small(func.body.body[-1])
    if not (isinstance(ret, cst.Return) and ret.value is not None):
        return set()
    name = source(ret.value)
    if any(_matches(s, f"{name} = super()._load_state_dict()") for s in func.body.body):
        return {name}
    return set()


def defines_method(body: Sequence[cst.BaseStatement], name: str) -> bool:
    """A statement of ``body`` (a class body) defines the method ``name``."""
    return any(isinstance(s, cst.FunctionDef) and s.name.value == name for s in body)


def _identifiers(code: str) -> set[str]:
    """Identifiers used in ``code`` outside comments and plain strings."""
    return set(_IDENT.findall(blank(code)))


class PipelineModels(Codemod):
    PREFIX = "MV383"

    @classmethod
    def applies(cls, source: str) -> bool:
        return ("PipelineModel" in source or METHOD in source or "GraphSpec" in source
                or any(base in source for base in _SIBLING_BASES))

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.rewritten = False
        self._stashes: set[str] = set()
        #: ``_get_compile_input_types`` for the class whose graph_specs just became _instantiate_module
        self.types_hook: cst.FunctionDef | None = None
        #: pipeline class name → the root subclass its V2 graph body became (``codemods.graph_body``)
        self.flat_roots: dict[str, cst.ClassDef] = {}
        #: the (original) pipeline class being rewritten: its name, and its methods' lines for reports
        self._original_class: cst.ClassDef | None = None
        #: local names of sibling classes imported from a module their variant also defines them in
        self._v3_siblings: set[str] = set()

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        """Drop V2-only pipeline names (bases, Model, GraphSpec...) the rewrite made unused."""
        if not self.rewritten:
            return updated
        if self.flat_roots:
            updated = insert_subclasses(updated, self.flat_roots)
        rest = updated.with_changes(body=[s for s in updated.body if not _is_import(s)])
        used = set(_IDENT.findall(blanked_code(rest, self.state)))
        body: list[cst.BaseStatement] = []
        carry: list[cst.EmptyLine] = []  # leading lines of a dropped import
        for stmt in updated.body:
            if carry:
                stmt = stmt.with_changes(leading_lines=[*carry, *getattr(stmt, "leading_lines", ())])
                carry = []
            small = _small(stmt)
            if isinstance(small, cst.ImportFrom) and isinstance(small.names, tuple | list):
                module = source(small.module) if small.module is not None else ""
                if module.startswith(("max.pipelines", "max.engine")):
                    keep = [a for a in small.names if not (source(a.name) in _V2_ONLY and a.asname is None and source(a.name) not in used)]
                    if not keep:
                        carry = list(getattr(stmt, "leading_lines", ()))
                        continue
                    if len(keep) != len(small.names):
                        keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                        stmt = stmt.with_changes(body=[small.with_changes(names=keep)])
            body.append(stmt)
        return updated.with_changes(body=body)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        """Names of sibling classes whose variant (max's port, or this run's) defines them: a
        pipeline model imported so is a V3 one once ``Dependencies`` renames the import."""
        ctx = self.state.context
        if node.module is None or len(node.relative) != ctx.package_depth + 2 or isinstance(node.names, cst.ImportStar):
            return
        package, *rest = source(node.module).split(".")
        variant = ctx.v3_packages.get(package)
        exports = ctx.v3_exports.get(".".join([variant, *rest])) if variant else None
        if exports:
            self._v3_siblings |= {
                a.evaluated_alias or a.evaluated_name for a in node.names if a.evaluated_name in exports
            }

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        if is_bridged(original):
            return updated  # (bridged by an earlier run)
        found = self._v2_base(original)
        if found is None and isinstance(updated.body, cst.IndentedBlock):
            new = self._sibling_subclass(original, updated)
            if new is updated:
                new = self._v3_sibling_subclass(original, updated)
            return self._v2_graph_specs(original, updated) if new is updated else new
        if found is None or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        index, v2_name = found
        before = self._snapshot()
        towers = self._towers(list(updated.body.body)) if _BASES[v2_name] == "ModuleV3PipelineModelWithKVCache" else None
        v3_base = _MULTI if towers is not None else _BASES[v2_name]
        v3_name = self.state.import_name(_HOME, v3_base)
        bases = list(updated.bases)
        base = bases[index].value
        new_base: cst.BaseExpression = cst.Name(v3_name)
        if isinstance(base, cst.Subscript) and base.slice:
            new_base = base.with_changes(value=cst.Name(v3_name), slice=[base.slice[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)])
        bases[index] = bases[index].with_changes(value=new_base)
        self.rewrote(original, "MV383", f"{v2_name} → {v3_base}")
        self.rewritten = True
        kv = v2_name != "PipelineModel"
        self._original_class = original
        body, todos = self._rewrite_body(list(updated.body.body), kv, towers)
        if towers is None and self._specs_stay(updated, body):
            self._restore(before)
            after = ("self._bind_ep_comm_initializer()",) if v2_name.endswith("WithKVCache") else ()
            return self._bridged(original, updated, (), after)
        if v3_base in _KEYWORD_TAIL:
            body = [self._keyword_tail(s, _KEYWORD_TAIL[v3_base], original) for s in body]
        if v3_base == "ModuleV3PipelineModelWithKVCache" and not defines_method(body, "_module_default_dtype"):
            body.append(self._default_dtype())
            self.rewrote(original, "MV383", "_module_default_dtype: the V3 KV base reads model_config.dtype, which a V2 config need not have")
        new = updated.with_changes(bases=bases, body=updated.body.with_changes(body=body))
        return attach_todos(new, todos)  # type: ignore[return-value]

    def _snapshot(self) -> tuple[int, set[tuple[str, str, str | None]], dict[str, str], dict[str, cst.ClassDef]]:
        return len(self.state.rewrites), set(self.state.needed_imports), dict(self.state.helpers), dict(self.flat_roots)

    def _restore(self, saved: tuple[int, set[tuple[str, str, str | None]], dict[str, str], dict[str, cst.ClassDef]]) -> None:
        """Undo what a body rewrite that is not used did (its reports, imports, helpers, root subclasses)."""
        rewrites, imports, helpers, roots = saved
        del self.state.rewrites[rewrites:]
        self.state.needed_imports.intersection_update(imports)
        self.state.helpers.clear()
        self.state.helpers.update(helpers)
        self.flat_roots = roots

    @staticmethod
    def _specs_stay(updated: cst.ClassDef, body: list[cst.BaseStatement]) -> bool:
        """The class defines ``graph_specs`` (and no ``load_graphs`` of its own) and the rewrite
        could not make it ``_instantiate_module``: it keeps V2's loading (``_bridged``)."""
        assert isinstance(updated.body, cst.IndentedBlock)
        own = list(updated.body.body)
        return (defines_method(own, "graph_specs") and not defines_method(own, "load_graphs")
                and not defines_method(body, "_instantiate_module"))

    def _bridged(self, original: cst.ClassDef, updated: cst.ClassDef, before: tuple[str, ...],
                 after: tuple[str, ...]) -> cst.ClassDef:
        """A pipeline whose ``graph_specs`` cannot become ``_instantiate_module`` keeps its V2 base and
        that ``graph_specs``; a ``load_graphs`` of its own builds them under ``F.lazy()`` and the
        model's ``default_dtype`` and compiles their ModuleV3 modules (``load_graph_specs``, a port:
        V2 traces a spec's module the V2 way, which a V3 module cannot do) into the engine
        ``Model``s V2's base and ``execute`` use. max's ``unified_mtp_gemma4_modulev3`` loads so.
        It does what the V2 base's ``load_graphs`` does ``before`` and ``after`` compiling (a KV
        base binds the EP comm initializer after loading; a sibling's base, ``SIBLING_LOAD_STEPS``)."""
        assert isinstance(updated.body, cst.IndentedBlock)
        self.rewritten = True
        add_port(self.state, BRIDGE, "MV383")
        session = self.state.import_name("max.engine", "InferenceSession")
        model = self.state.import_name("max.engine", "Model")
        dtype = self.state.import_name("max.experimental.tensor", "default_dtype")
        self.state.needed_imports.add(("max.experimental", "functional", "F"))
        names = {"GraphRole": self.state.import_name("max.pipelines.lib.graph_specs", "GraphRole")} if any(
            "{GraphRole}" in step for step in (*before, *after)) else {}
        load = cst.parse_statement(
            f"def load_graphs(self, session: {session}) -> dict[str, {model}]:\n"
            "    state_dict = self._load_state_dict()\n"
            "    model_config = self._create_model_config(state_dict)\n"
            + "".join(f"    {step.format(**names)}\n" for step in before)
            + f"    with F.lazy(), {dtype}({_model_dtype('model_config')}):\n"
            "        specs = self.graph_specs(model_config)\n"
            + (f"    models = {BRIDGE}(session, specs)\n" + "".join(f"    {step.format(**names)}\n" for step in after)
               + "    return models\n" if after else f"    return {BRIDGE}(session, specs)\n")
        ).with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        body: list[cst.BaseStatement] = []
        for stmt in updated.body.body:
            if isinstance(stmt, cst.FunctionDef):  # (a root built and loaded in _create_model_config)
                stmt = self._loaded_modules_built_lazily(stmt).visit(_BridgedSpecs())  # type: ignore[assignment]
            body.append(stmt)
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "graph_specs":
                body.append(load)
        self.rewrote(original, "MV383", "graph_specs kept on the V2 base: load_graphs builds them under F.lazy() and "
                     "compiles their ModuleV3 modules (load_graph_specs)")
        return updated.with_changes(body=updated.body.with_changes(body=body))

    def _v2_graph_specs(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        """A class left on a V2 pipeline base (a sibling's, not ported) whose ``graph_specs`` still
        builds the model it hands ``GraphSpec``: ``m = X(cfg)`` is built under ``F.lazy()`` and
        ``default_dtype`` of the model, as the V3 base builds what ``_instantiate_module`` returns.
        V3 weights take the default dtype at construction (V2 layers were given the config's dtype):
        built outside one, every weight is float32."""
        assert isinstance(updated.body, cst.IndentedBlock)
        if not any(self._v2_pipeline_base(b.value) for b in original.bases):  # (names resolve on original nodes)
            return updated
        steps = next((SIBLING_LOAD_STEPS[k] for b in original.bases if (k := self._sibling_base_key(b.value))
                      in SIBLING_LOAD_STEPS), None)
        if steps is not None and self._specs_stay(updated, []):
            return self._bridged(original, updated, *steps)
        body = list(updated.body.body)
        for at, func in enumerate(body):
            if not (isinstance(func, cst.FunctionDef) and func.name.value == "graph_specs"
                    and isinstance(func.body, cst.IndentedBlock) and len(func.params.params) >= 2):
                continue
            calls = [c for c in nodes_of(func, (cst.Call,)) if isinstance(c, cst.Call)]
            roots = {source(c.args[0].value) for c in calls
                     if source(c.func).endswith("GraphSpec") and c.args and c.args[0].keyword is None}
            cfg = func.params.params[1].name.value
            stmts = list(func.body.body)
            for i, stmt in enumerate(stmts):
                small = _small(stmt)
                if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Call)
                        and isinstance(small.targets[0].target, cst.Name) and small.targets[0].target.value in roots):
                    continue
                stmts[i] = self._built_lazily(stmt, cfg)
                self.rewrote(stmt, "MV382", f"graph_specs: {source(small.targets[0].target)} built under F.lazy() "
                             "and the model's default_dtype, as the V3 base builds its module")
            body[at] = func.with_changes(body=func.body.with_changes(body=stmts))
        return updated.with_changes(body=updated.body.with_changes(body=body))

    def _built_lazily(self, stmt: cst.BaseStatement, cfg: str | None) -> cst.With:
        """``stmt`` (which builds a module) under ``F.lazy()`` and the model's ``default_dtype``:
        V3 weights take the default dtype at construction (V2 layers were given the config's
        dtype); built outside one, every weight is float32."""
        dtype = self.state.import_name("max.experimental.tensor", "default_dtype")
        self.state.needed_imports.add(("max.experimental", "functional", "F"))
        model_dtype = _model_dtype(cfg) if cfg else "self.dtype"
        block = cst.parse_statement(f"with F.lazy(), {dtype}({model_dtype}):\n    pass\n")
        assert isinstance(block, cst.With) and isinstance(block.body, cst.IndentedBlock)
        return block.with_changes(body=block.body.with_changes(body=[stmt.with_changes(leading_lines=[])]),
                                  leading_lines=getattr(stmt, "leading_lines", ()))

    def _loaded_modules_built_lazily(self, func: cst.FunctionDef) -> cst.FunctionDef:
        """In a pipeline method other than the V3 hooks, ``m = Root(cfg)`` (or ``self.m = ...``)
        whose ``m.load_state_dict(...)`` follows in the same body is a module the pipeline builds
        itself: built under ``F.lazy()`` and the model's ``default_dtype``, as the V3 base builds
        what ``_instantiate_module`` returns."""
        code = source(func.body)
        if not isinstance(func.body, cst.IndentedBlock) or "load_state_dict" not in code or "Graph" in code:
            return func  # (a method that still builds a V2 Graph/GraphSpec is left as it is, with its TODOs)
        stmts = list(func.body.body)
        loaded = {source(c.func.value) for s in stmts if isinstance(c := getattr(_small(s), "value", None), cst.Call)
                  and isinstance(c.func, cst.Attribute) and c.func.attr.value == "load_state_dict"}
        changed = False
        for i, stmt in enumerate(stmts):
            small = _small(stmt)
            target = (small.targets[0].target if isinstance(small, cst.Assign) and len(small.targets) == 1
                      else small.target if isinstance(small, cst.AnnAssign) else None)
            value = getattr(small, "value", None)
            if target is None or source(target) not in loaded or not isinstance(value, cst.Call):
                continue
            first = value.args[0].value if value.args and value.args[0].keyword is None else None
            config = source(first) if isinstance(first, cst.Name | cst.Attribute) and self_attr(first) is None else None
            stmts[i] = self._built_lazily(stmt, config)
            self.rewrote(self._original_method(func), "MV382", f"{func.name.value}: {source(target)} built under F.lazy() "
                         "and the model's default_dtype, as the V3 base builds its module")
            changed = True
        return func.with_changes(body=func.body.with_changes(body=stmts)) if changed else func

    def _sibling_base_key(self, base: cst.BaseExpression) -> str:
        """``llama3.model.LlamaModelBase`` for a base resolving to that class of max's architectures
        (absolutely or relatively), else ``""``."""
        qual = self.qualname(base.value if isinstance(base, cst.Subscript) else base) or ""
        return qual.removeprefix("max.pipelines.architectures.").lstrip(".")

    def _v2_pipeline_base(self, base: cst.BaseExpression) -> bool:
        """``base`` is a V2 architecture package's class (``max.pipelines.architectures.llama3.model.X``,
        ``..llama3.model.X``), not one of a V3 package (``*_modulev3``, a V3 variant of the run)."""
        qual = self.qualname(base.value if isinstance(base, cst.Subscript) else base)
        home = "max.pipelines.architectures."
        if qual is None or not (qual.startswith(home) or qual.startswith("..")):
            return False
        parts = qual.removeprefix(home).lstrip(".").split(".")
        ctx = self.state.context
        return len(parts) > 1 and not parts[0].endswith("_modulev3") and parts[0] not in ctx.v3_packages.values()

    def _sibling_subclass(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        """A subclass of a sibling's V2 pipeline base that ``Dependencies`` imports as the variant's
        V3 pipeline model (``SiblingChanges.renamed_bases``): its ``graph_specs`` → ``_instantiate_module``.
        When that cannot be done, an ``_instantiate_module`` that raises: the V3 base's own would
        silently build the sibling's model instead of this one."""
        renamed = changes(self.state).renamed_bases
        base = next((b.value.value for b in original.bases if isinstance(b.value, cst.Name) and b.value.value in renamed), None)
        if base is None or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        self.rewritten = True
        self._original_class = original
        body, todos = self._rewrite_body(list(updated.body.body), kv=True)
        if not any(isinstance(s, cst.FunctionDef) and s.name.value == "_instantiate_module" for s in body):
            any_ = self.state.import_name("typing", "Any")
            stub = cst.parse_statement(
                f"def _instantiate_module(self, model_config: {any_}) -> {any_}:\n"
                "    raise NotImplementedError(\"graph_specs is V2 code: build the root module here\")\n"
            )
            body.append(stub.with_changes(leading_lines=[cst.EmptyLine(indent=False)]))
        self.rewrote(original, "MV383", f"{original.name.value}({base}): the V3 base builds what _instantiate_module returns")
        new = updated.with_changes(body=updated.body.with_changes(body=body))
        return attach_todos(new, todos)  # type: ignore[return-value]

    def _runtime_hook(self, stmt: cst.FunctionDef, body: list[cst.BaseStatement]) -> list[cst.BaseStatement] | None:
        """V2's ``_init_distributed_runtime(session, cfg)`` → the V3 hook's ``(cfg)`` (with an
        ``__init__`` keeping the session when it reads one); None when not that shape."""
        runtime = v3_distributed_runtime(stmt)
        if runtime is None:
            return None
        new, reads_session = runtime
        self.rewrote(stmt, "MV382", f"{HOOK}(session, cfg) → ({new.params.params[1].name.value}): the V3 base calls it without a session")
        if reads_session and not defines_method(body, "__init__"):
            return [session_init(self.state).with_changes(leading_lines=stmt.leading_lines),
                    new.with_changes(leading_lines=[cst.EmptyLine(indent=False)])]
        if reads_session:
            return [self._todo_stmt(new, f"{HOOK} reads self.session: set it from __init__'s session")]
        return [new]

    def _v3_sibling_subclass(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        """A subclass of a sibling's pipeline model that the variant defines (a V3 one, whose
        ``load_model`` never calls ``_build_graph_for_compile``): its own V2 graph method
        becomes ``_instantiate_module`` (``codemods.graph_body``); left as is it would silently
        build the sibling's model."""
        assert isinstance(updated.body, cst.IndentedBlock)
        if not any(isinstance(b.value, cst.Name) and b.value.value in self._v3_siblings for b in original.bases):
            return updated
        body = list(updated.body.body)
        at = next((i for i, s in enumerate(body) if isinstance(s, cst.FunctionDef) and s.name.value == METHOD), None)
        if at is None or defines_method(body, "_instantiate_module"):
            return updated
        self._original_class = original
        graph = self._graph_body(cast(cst.FunctionDef, body[at]), body)
        if graph is None:
            return updated
        self.rewritten = True
        out: list[cst.BaseStatement] = []
        for i, stmt in enumerate(body):
            hook = self._runtime_hook(stmt, body) if isinstance(stmt, cst.FunctionDef) and stmt.name.value == HOOK else None
            out.extend(graph if i == at else hook if hook is not None else [stmt])
        return updated.with_changes(body=updated.body.with_changes(body=out))

    def _keyword_tail(self, stmt: cst.BaseStatement, names: tuple[str, ...], cls: cst.ClassDef) -> cst.BaseStatement:
        """``super().__init__(cfg, session, devices, kv, weights, adapter, ...)`` in ``__init__``: the
        V2 base's positional ``adapter``/``return_logits`` are keyword-only on the V3 KV base."""
        if not (isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__" and isinstance(stmt.body, cst.IndentedBlock)):
            return stmt
        body = list(stmt.body.body)
        for i, line in enumerate(body):
            small = _small(line)
            call = small.value if isinstance(small, cst.Expr) else None
            if not (isinstance(call, cst.Call) and source(call.func) == "super().__init__") or any(a.star for a in call.args):
                continue
            positional = [a for a in call.args if a.keyword is None]
            tail = positional[_V3_POSITIONAL:]
            if not tail or len(tail) > len(names):
                continue
            renamed = {id(a): name for a, name in zip(tail, names, strict=False)}
            args = [a.with_changes(keyword=cst.Name(renamed[id(a)]), equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))) if id(a) in renamed else a
                for a in call.args]
            body[i] = line.with_changes(body=[small.with_changes(value=call.with_changes(args=args))])  # type: ignore[union-attr]
            self.rewrote(cls, "MV383", f"__init__'s super().__init__: {', '.join(renamed.values())} keyword-only on the V3 base")
        return stmt.with_changes(body=stmt.body.with_changes(body=body))

    def _default_dtype(self) -> cst.BaseStatement:
        """``_module_default_dtype`` reading the config's ``dtype`` only when it has one: the V3 KV
        base builds the module under ``model_config.dtype``, a field the V2 base never read (max's
        composite configs, e.g. a target + draft pair, have none); the encoding's dtype otherwise."""
        any_ = self.state.import_name("typing", "Any")
        dtype = self.state.import_name("max.dtype", "DType")
        stmt = cst.parse_statement(
            f"def _module_default_dtype(self, state_dict: dict[str, {any_}], model_config: {any_}) -> {dtype}:\n"
            "    del state_dict  # the V3 base builds under model_config.dtype; a V2 config need not have one\n"
            f"    return getattr(model_config, \"dtype\", self.dtype)\n"
        )
        return stmt.with_changes(leading_lines=[cst.EmptyLine(indent=False)])

    def _v2_base(self, node: cst.ClassDef) -> tuple[int, str] | None:
        for i, arg in enumerate(node.bases):
            expr = arg.value.value if isinstance(arg.value, cst.Subscript) else arg.value
            qual = self.qualname(expr)
            if qual and qual.startswith("max.pipelines"):
                name = qual.rsplit(".", 1)[1]
                if name in _BASES:
                    return i, name
        return None

    def _towers(self, body: list[cst.BaseStatement]) -> tuple[Towers, dict[str, cst.FunctionDef]] | None:
        """A two-tower ``graph_specs`` whose helpers both rewrite, with ``vision_model``/``language_model``
        properties over ``self._models`` and an ``__init__`` that loads them (else None: one base)."""
        funcs = {s.name.value: s for s in body if isinstance(s, cst.FunctionDef)}
        specs = funcs.get("graph_specs")
        towers = find_towers(specs) if specs is not None else None
        init = funcs.get("__init__")
        if towers is None or init is None or not any(_matches(s, "self._models = self.load_graphs(session)") for s in nodes_of(init, (cst.SimpleStatementLine,))):
            return None
        for func in funcs.values():
            role = models_property(func)
            if role is not None:
                towers.attributes[role] = func.name.value
        compiled = {}
        for helper in set(towers.helpers.values()):
            found = funcs.get(helper)
            new = compile_helper(found, "Callable", "Any") if found is not None else None
            if new is None:
                return None
            compiled[helper] = new
        if set(towers.attributes) != set(towers.helpers):
            return None
        self.state.import_name("collections.abc", "Callable")
        self.state.import_name("typing", "Any")
        self.state.import_name("max.experimental.tensor", "default_dtype")
        self.state.needed_imports.add(("max.experimental", "functional", "F"))
        return towers, compiled

    def _rewrite_body(
        self, body: list[cst.BaseStatement], kv: bool, towers: tuple[Towers, dict[str, cst.FunctionDef]] | None = None
    ) -> tuple[list[cst.BaseStatement], list[str]]:
        stash = any(isinstance(s, cst.FunctionDef) and self._is_stash(s) for s in body)
        self._stashes = {"self.state_dict", *(a for s in body if isinstance(s, cst.FunctionDef) for a in _stashed(s))}
        helpers: dict[str, cst.FunctionDef] = dict(towers[1]) if towers else {}
        for s in body:
            if isinstance(s, cst.FunctionDef) and s.name.value not in ("graph_specs", "_instantiate_module", *helpers) and "GraphSpec" in self.state.source and "GraphSpec" in source(s.body):
                built = self._instantiate(s, helper=True)
                if built is not None:
                    helpers[s.name.value] = built
        out: list[cst.BaseStatement] = []
        todos: list[str] = []
        dropped: list[tuple[int, cst.BaseStatement]] = []  # the stash: back in if the rest still reads it
        picked: Dispatch | None = None  # the graph builders METHOD picked from (``dispatched``)
        skip_doc = False
        for stmt in body:
            if skip_doc and is_docstring(stmt):
                skip_doc = False
                dropped.append((len(out), stmt))
                continue
            skip_doc = False
            small = _small(stmt)
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is None:
                if small.target.value == "state_dict" and stash:
                    skip_doc = True
                    dropped.append((len(out), stmt))
                    continue
                if small.target.value == "model":
                    out.append(self._model_annotation(stmt))
                    continue
            if isinstance(stmt, cst.FunctionDef):
                name = stmt.name.value
                if name == "_load_state_dict" and self._is_stash(stmt):
                    dropped.append((len(out), stmt))
                    continue
                if name == HOOK and (hook := self._runtime_hook(stmt, body)) is not None:
                    out.extend(hook)
                    continue
                if name == METHOD and kv and not towers and not defines_method(body, "_instantiate_module"):
                    graph = self._graph_body(stmt, body)
                    dispatch = dispatched(stmt, body) if graph is None else None
                    if dispatch is not None:
                        graph = self._graph_body(dispatch.inlined, body)
                        picked = dispatch if graph is not None else None
                    if graph is not None:
                        out.extend(graph)
                        continue
                if self._is_v2_load(stmt):
                    self.rewrote(stmt, "MV382", f"{name}(session): V2 load plumbing; the V3 base's load_model() builds and compiles")
                    continue
                if name == "model" and self._is_models_property(stmt):
                    out.append(self._model_annotation(stmt))
                    continue
                if name in helpers:
                    out.append(helpers[name])
                    if towers:
                        self.rewrote(stmt, "MV382", f"{name}: GraphSpec → builds under F.lazy() and returns the compiled tower")
                    continue
                if towers and models_property(stmt) in towers[0].attributes:
                    out.append(self._model_annotation(stmt, optional=models_property(stmt) == "VISION"))
                    continue
                if name == "graph_specs" and towers:
                    callable_ = self.state.import_name("collections.abc", "Callable")
                    any_ = self.state.import_name("typing", "Any")
                    new_hooks = hooks(towers[0], callable_, any_)
                    out.extend([new_hooks[0].with_changes(leading_lines=stmt.leading_lines), *new_hooks[1:]])
                    self.rewrote(stmt, "MV383", "graph_specs (vision + language) → _compile_vision_model / _compile_language_model")
                    continue
                if name == "graph_specs":
                    self.types_hook = None
                    replaced = self._instantiate(stmt) or self._dispatch(stmt, helpers)
                    if replaced is not None and self.types_hook is not None and not any(
                        isinstance(s, cst.FunctionDef) and s.name.value == "_get_compile_input_types" for s in body
                    ):
                        out.extend([replaced, self.types_hook.with_changes(leading_lines=[cst.EmptyLine(indent=False)])])
                        continue
                    if replaced is None:
                        out.append(self._todo_stmt(stmt, (
                            "graph_specs → _instantiate_module(self, model_config): build the root module "
                            "(no load_state_dict), nn_model.to(self.devices[0]), return it; "
                            "compile input types come from _get_compile_input_types"
                        )))
                    else:
                        out.append(replaced)
                    continue
                out.append(self._loaded_modules_built_lazily(self._in_method(stmt, kv, towers[0].attributes if towers else None)))
                continue
            out.append(stmt)
        if picked is not None:
            out = self._builders_dispatched(out, picked)
        if dropped and "self.state_dict" in self.state.source and any("self.state_dict" in source(s) for s in out):
            for at, stmt in reversed(dropped):
                out.insert(at, stmt)
        if not towers and not any(isinstance(s, cst.FunctionDef) and s.name.value == "_instantiate_module" for s in out):
            todos.append(f"{TODO_PREFIX}MV382 implement _instantiate_module(self, model_config): build the root module and .to(self.devices[0])")
        return out, todos

    def _builders_dispatched(self, out: list[cst.BaseStatement], picked: Dispatch) -> list[cst.BaseStatement]:
        """The one-device graph builder ``_instantiate_module`` took in goes; a builder for several
        devices stays, with a TODO (V3 runs one module on a device mesh: its graph is not migrated)."""
        single = picked.single
        kept: list[cst.BaseStatement] = []
        for stmt in out:
            name = stmt.name.value if isinstance(stmt, cst.FunctionDef) else None
            if name == single:
                self.rewrote(self._original_method(cast(cst.FunctionDef, stmt)), "MV383",
                             f"{single}: its one-device graph is _instantiate_module's and its root's forward now")
                continue
            if name in picked.multi:
                note = (f"{TODO_PREFIX}MV383 {name} built V2's graph for several devices (per-device values); V3 "
                        f"runs the one module _instantiate_module builds on a device mesh: move what {name} does "
                        "differently into the root (placements, collectives on distributed Tensors), then delete it")
                stmt = cast(cst.BaseStatement, attach_todos(stmt, [note]))
            kept.append(stmt)
        return kept

    def _original_method(self, func: cst.FunctionDef) -> cst.FunctionDef:
        """The method of this name in the original class (a rewrite is reported at its line), else ``func``."""
        cls = self._original_class
        body = cls.body.body if cls is not None and isinstance(cls.body, cst.IndentedBlock) else ()
        return next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == func.name.value), func)

    def _graph_body(self, func: cst.FunctionDef, body: list[cst.BaseStatement]) -> list[cst.BaseStatement] | None:
        """``_build_graph_for_compile`` → ``_instantiate_module`` (+ the input types hook, + ``_prepare_state_dict``),
        its graph body → the ``forward`` of a root subclass put before the class (``codemods.graph_body``)."""
        any_ = self.state.import_name("typing", "Any")
        assert self._original_class is not None
        pipeline = self._original_class.name.value
        taken = self.state.module_names | {c.name.value for c in self.flat_roots.values()}
        new = graph_body(func, pipeline, taken, any_)
        if new is None:
            return None
        self.flat_roots[pipeline] = new.subclass
        func = self._original_method(func)
        self.rewrote(func, "MV383", f"{METHOD} → _instantiate_module; its V2 graph body → the forward of {new.subclass.name.value}")
        self.rewrote(func, "MV380", "Graph(...) → the V3 base builds the root under F.lazy() and compiles it with its input types")
        self.rewrote(func, "MV381", "weights_registry → the V3 base compiles with weights=state_dict")
        self.rewrote(func, "MV382", "load_state_dict/state_dict() → the V3 base compiles with weights=state_dict")
        moved = {"MV373": ".tensor of a graph input dropped (forward receives Tensors)",
                 "MV384": "the KV inputs are unflattened in the root's forward now"}
        for code in sorted(new.resolved):
            self.rewrote(func, code, f"graph body → {new.subclass.name.value}.forward: {moved.get(code, 'V2 graph code moved')}")
        instantiate = attach_todos(new.instantiate, new.todos)
        out: list[cst.BaseStatement] = [cast(cst.FunctionDef, instantiate)]
        if not defines_method(body, "_get_compile_input_types"):
            out.append(_TYPES_HOOK.with_changes(leading_lines=[cst.EmptyLine(indent=False)]))
        if new.prepare is not None and not defines_method(body, "_prepare_state_dict"):
            out.append(new.prepare.with_changes(leading_lines=[cst.EmptyLine(indent=False)]))
            self.rewrote(func, "MV382", "the state dict V2 loaded into the root → _prepare_state_dict")
        return out

    def _todo_stmt(self, stmt: cst.BaseStatement, message: str) -> cst.BaseStatement:
        result = attach_todos(stmt, [f"{TODO_PREFIX}MV382 {message}"])
        return result if isinstance(result, cst.BaseStatement) else stmt

    def _model_annotation(self, stmt: cst.BaseStatement, optional: bool | None = None) -> cst.BaseStatement:
        """``model: Callable[..., Any]`` (``optional``: a tower property, named as it was); ``model: Any``
        in a class that keeps a max mixin declaring V2's ``model: Model`` (both bases accept it)."""
        any_ = self.state.import_name("typing", "Any")
        name = stmt.name.value if optional is not None and isinstance(stmt, cst.FunctionDef) else "model"
        bases = self._original_class.bases if self._original_class is not None else ()
        if optional is None and any(self.qualname(b.value) in MODEL_MIXINS for b in bases):
            return cst.parse_statement(f"model: {any_}\n").with_changes(leading_lines=getattr(stmt, "leading_lines", ()))
        callable_ = self.state.import_name("collections.abc", "Callable")
        new = cst.parse_statement(f"{name}: {callable_}[..., {any_}]{' | None' if optional else ''}\n")
        return new.with_changes(leading_lines=getattr(stmt, "leading_lines", ()))

    @staticmethod
    def _is_stash(func: cst.FunctionDef) -> bool:
        stmts = [s for s in func.body.body if not is_docstring(s)] if isinstance(func.body, cst.IndentedBlock) else []
        return (
            len(stmts) == 2
            and _matches(stmts[0], "self.state_dict = super()._load_state_dict()")
            and _matches(stmts[1], "return self.state_dict")
        )

    @staticmethod
    def _is_v2_load(func: cst.FunctionDef) -> bool:
        """``load_model(self, session)`` / ``load_graphs(self, session)`` that load through the V2
        graph path (``load_graphs``, ``compile_graphs``, ``init_graphs``, ``_build_graph_for_compile``)."""
        if func.name.value not in ("load_model", "load_graphs"):
            return False
        if [p.name.value for p in func.params.params] != ["self", "session"]:
            return False
        return bool(_identifiers(source(func.body)) & _V2_LOAD)

    @staticmethod
    def _is_models_property(func: cst.FunctionDef) -> bool:
        if not any(source(d.decorator) == "property" for d in func.decorators):
            return False
        stmts = [s for s in func.body.body if not is_docstring(s)] if isinstance(func.body, cst.IndentedBlock) else []
        ret = _small(stmts[0]) if len(stmts) == 1 else None
        return isinstance(ret, cst.Return) and ret.value is not None and source(ret.value).startswith("self._models[")

    def _dispatch(self, func: cst.FunctionDef, helpers: dict[str, cst.FunctionDef]) -> cst.FunctionDef | None:
        """``graph_specs`` that picks one of this class's spec helpers (``spec = self._x_spec(cfg)``
        per branch, ``return {role: spec}``) → ``_instantiate_module`` returning the module the
        rewritten helpers build; a helper that could not be rewritten is named in a TODO."""
        if not isinstance(func.body, cst.IndentedBlock) or len(func.params.params) != 2 or not func.body.body:
            return None
        ret = _small(func.body.body[-1])
        if not (isinstance(ret, cst.Return) and isinstance(ret.value, cst.Dict) and len(ret.value.elements) == 1):
            return None
        element = ret.value.elements[0]
        if not (isinstance(element, cst.DictElement) and isinstance(element.value, cst.Name)):
            return None
        name = element.value.value
        called = _helper_calls(func.body, name)
        if not called or not (called & helpers.keys()):
            return None
        any_ = self.state.import_name("typing", "Any")
        cfg = func.params.params[1].name.value
        template = cst.parse_statement(f"def _instantiate_module(self, {cfg}: {any_}) -> {any_}:\n    return {name}\n")
        assert isinstance(template, cst.FunctionDef) and isinstance(template.body, cst.IndentedBlock)
        body = [*func.body.body[:-1], template.body.body[0].with_changes(leading_lines=getattr(func.body.body[-1], "leading_lines", ()))]
        new = _as_instantiate_module(func, template, body)
        self.rewrote(func, "MV383", "graph_specs → _instantiate_module (through its spec helpers)")
        todos = [
            f"{TODO_PREFIX}MV382 {h} still returns a V2 GraphSpec: make it build and return the module (no load_state_dict)"
            for h in sorted(called - helpers.keys())
        ]
        result = attach_todos(new, todos)
        return result if isinstance(result, cst.FunctionDef) else new

    def _instantiate(self, func: cst.FunctionDef, helper: bool = False) -> cst.FunctionDef | None:
        """``graph_specs`` of the recognised shape → ``_instantiate_module``; None otherwise.

        The shape: statements that build the parts, one ``m = Root(...)`` (or
        ``m: T = A(...) if ... else B(...)``), ``m.load_state_dict(<the stashed
        state dict>, ...)``, optionally ``types = m.input_types(...)``, and
        ``return {role: GraphSpec(m, ...)}``; every other statement is kept, so
        none may touch ``m`` but ``x = m.attr`` after it.
        """
        if not isinstance(func.body, cst.IndentedBlock) or len(func.params.params) != 2:
            return None
        stmts = list(func.body.body)
        ret = _small(stmts[-1]) if stmts else None
        if not isinstance(ret, cst.Return) or ret.value is None:
            return None
        if helper:
            spec_call = ret.value
        elif isinstance(ret.value, cst.Dict) and len(ret.value.elements) == 1:
            spec_call = ret.value.elements[0].value
        else:
            return None
        if not (isinstance(spec_call, cst.Call) and spec_call.args and source(spec_call.func).endswith("GraphSpec")):
            return None
        if not isinstance(spec_call.args[0].value, cst.Name):
            return None
        model = spec_call.args[0].value.value
        stashes = set(self._stashes)
        ctor_at = -1
        loads = 0
        types_stmt: cst.BaseStatement | None = None
        kept: list[cst.BaseStatement] = []
        for stmt in stmts[:-1]:
            small = _small(stmt)
            value = small.value if isinstance(small, cst.Expr | cst.Assign | cst.AnnAssign) else None
            target = (
                small.targets[0].target if isinstance(small, cst.Assign) and len(small.targets) == 1
                else small.target if isinstance(small, cst.AnnAssign) else None
            )
            if isinstance(target, cst.Name) and target.value == model:
                if ctor_at >= 0 or not isinstance(value, cst.Call | cst.IfExp):
                    return None
                ctor_at = len(kept)
                kept.append(stmt)
            elif isinstance(small, cst.Expr) and isinstance(value, cst.Call) and source(value.func) == f"{model}.load_state_dict":
                if ctor_at < 0 or not value.args or source(value.args[0].value) not in stashes:
                    return None  # loads something else than what _load_state_dict returns
                loads += 1
            elif isinstance(small, cst.Assign) and isinstance(value, cst.Call) and source(value.func) == f"{model}.input_types" and types_stmt is None:
                types_stmt = stmt
            elif (
                ctor_at >= 0 and isinstance(small, cst.Assign) and isinstance(value, cst.Attribute)
                and source(value.value) == model and model not in _identifiers(source(small.targets[0].target))
            ):
                kept.append(stmt)  # ``self.mode = m.mode``: reads the built module, in order after it
            elif model in _identifiers(source(stmt)):
                return None
            else:
                if isinstance(target, cst.Name) and value is not None and source(value) in stashes:
                    stashes.add(target.value)  # a local alias of the stashed state dict
                kept.append(stmt)
        if loads != 1 or ctor_at < 0:
            return None
        lead = 0  # the docstring and guards stay in front of the assert
        while lead < len(kept) and (is_docstring(kept[lead]) or _is_guard(kept[lead])):
            lead += 1
        head, kept = kept[:lead], kept[lead:]
        if helper:
            return self._builder(func, model, [*head, *kept])
        param = func.params.params[1]
        cfg = param.name.value
        any_ = self.state.import_name("typing", "Any")
        lines = [f"def _instantiate_module(self, {cfg}: {any_}) -> {any_}:\n"]
        deleted = any(_matches(s, f"del {cfg}") for s in kept)
        if (
            param.annotation is not None and isinstance(param.annotation.annotation, cst.Name) and not deleted
            and param.annotation.annotation.value != "Any"  # (isinstance(x, Any) raises)
            and self.qualname(param.annotation.annotation) != "typing.Any"
        ):
            lines.append(f"    assert isinstance({cfg}, {param.annotation.annotation.value})\n")
        own_types = _own_input_types(types_stmt, model, spec_call)
        if own_types is not None:  # (kept by _get_compile_input_types, which the V3 base calls next)
            lines.append(f"    self._compile_input_types = tuple({own_types})\n")
            self.types_hook = _TYPES_HOOK
        lines.append(f"    {model}.to(self.devices[0])\n    return {model}\n")
        template = cst.parse_statement("".join(lines))
        assert isinstance(template, cst.FunctionDef) and isinstance(template.body, cst.IndentedBlock)
        tail = list(template.body.body)
        n_tail = 3 if own_types is not None else 2
        new_body = [*head, *tail[:-n_tail], *kept, *tail[-n_tail:]]
        new = _as_instantiate_module(func, template, new_body)
        self.rewrote(func, "MV383", "graph_specs → _instantiate_module")
        self.rewrote(func, "MV382", "load_state_dict/GraphSpec → the V3 base compiles with the state dict")
        if own_types is not None:
            self.rewrote(func, "MV382", f"compile input types: {own_types}, as V2's graph_specs passed them")
            return new
        input_types = (
            source(types_stmt) if types_stmt is not None
            else source(spec_call.args[2].value) if len(spec_call.args) > 2 else "?"
        )
        todo = (
            f"{TODO_PREFIX}MV382 compile input types: V2 passed `{input_types.strip()}`; V3 takes them from "
            "batch_processor_cls.get_symbolic_inputs (use its ModuleV3 batch processor) or override _get_compile_input_types"
        )
        result = attach_todos(new, [todo])
        return result if isinstance(result, cst.FunctionDef) else new

    def _builder(self, func: cst.FunctionDef, model: str, kept: list[cst.BaseStatement]) -> cst.FunctionDef:
        """A spec helper (``return GraphSpec(m, ...)``) → the same method building and returning ``m``."""
        any_ = self.state.import_name("typing", "Any")
        tail = cst.parse_module(f"{model}.to(self.devices[0])\nreturn {model}\n").body
        new = func.with_changes(
            returns=cst.Annotation(cst.Name(any_)),
            body=func.body.with_changes(body=[*kept, *tail]),
        )
        self.rewrote(func, "MV382", f"{func.name.value}: load_state_dict/GraphSpec → returns the module")
        return new

    def _in_method(self, func: cst.FunctionDef, kv: bool, towers: dict[str, str] | None = None) -> cst.FunctionDef:
        """``self._models = self.load_graphs(session)``, ``self.model = self.load_model(session)`` and
        ``self.model.execute(...)`` inside a method."""
        if not any(
            isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
            and call.func.attr.value in ("load_graphs", "load_model", "execute")
            for call in nodes_of(func, (cst.Call,))
        ):
            return func  # neither pattern can occur: skip the rewriting walk
        return func.visit(_MethodRewrite(kv, towers))  # type: ignore[return-value]


def _own_input_types(types_stmt: cst.BaseStatement | None, model: str, spec_call: cst.Call) -> str | None:
    """``types = m.input_types(...)`` passed as the GraphSpec's inputs: that call (the module's own
    input types, which V3's pipeline base would otherwise take from the batch processor)."""
    small = _small(types_stmt) if types_stmt is not None else None
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
        return None
    passed = spec_call.args[2].value if len(spec_call.args) > 2 else None
    if not (isinstance(passed, cst.Name) and passed.value == small.targets[0].target.value):
        return None
    call = small.value
    if not (isinstance(call, cst.Call) and source(call.func) == f"{model}.input_types"):
        return None
    return source(call)


#: the V3 base calls ``_get_compile_input_types`` after ``_instantiate_module``, which keeps them
_TYPES_HOOK = cast(cst.FunctionDef, cst.parse_statement(
    "def _get_compile_input_types(self, model_config: Any) -> tuple[Any, ...]:\n"
    "    del model_config  # (the root's own input types, kept by _instantiate_module)\n"
    "    return self._compile_input_types\n"
))


#: the graph inputs a V2 ragged KV model took first, and the order a ModuleV3 root's forward takes them
_V2_ORDER = ("tokens", "input_row_offsets", "return_n_logits")
_V3_ORDER = ("tokens", "return_n_logits", "input_row_offsets")


def v3_input_order(args: list[cst.Arg]) -> list[cst.Arg] | None:
    """``(x.tokens, x.input_row_offsets, x.return_n_logits, *x.signal_buffers, *rest)`` in the V3
    order ``(x.tokens, x.return_n_logits, x.input_row_offsets, *rest)`` (the order
    ``ModuleV3SingleReplicaBatchProcessor`` compiles with; one device: no signal buffers); None
    when the arguments do not start that way."""
    if len(args) < 3 or any(a.star or a.keyword is not None for a in args[:3]):
        return None
    names = [a.value.attr.value if isinstance(a.value, cst.Attribute) else None for a in args[:3]]
    if tuple(names) != _V2_ORDER:
        return None
    by_name = dict(zip(names, args[:3], strict=True))
    rest = list(args[3:])
    if rest and rest[0].star == "*" and isinstance(rest[0].value, cst.Attribute) and rest[0].value.attr.value == "signal_buffers":
        rest = rest[1:]
    commas = [a.comma for a in args]
    out = [by_name[n] for n in _V3_ORDER] + rest
    return [a.with_changes(comma=commas[i]) for i, a in enumerate(out[:-1])] + [out[-1].with_changes(comma=commas[-1])]


class _MethodRewrite(cst.CSTTransformer):
    def __init__(self, kv: bool, towers: dict[str, str] | None = None) -> None:
        super().__init__()
        self.kv = kv
        self.executes = 0
        self.called = "self.model"
        #: role → attribute of a two-tower model (``self.vision_model``...)
        self.towers = towers or {}
        #: ``self._models = self.load_graphs(session)`` went (it sets ``self.model`` itself, or the base does)
        self.loaded = False

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if source(updated.func) == "self.model.execute":
            self.executes += 1
            self.called = "self.model"
            args = v3_input_order(list(updated.args)) if self.kv else None
            return updated.with_changes(func=cst.parse_expression("self.model"), args=args or updated.args)
        called = source(updated.func)
        if called.endswith(".execute") and called[: -len(".execute")] in {f"self.{a}" for a in self.towers.values()}:
            self.executes += 1
            self.called = called[: -len(".execute")]
            return updated.with_changes(func=cst.parse_expression(self.called))
        return updated

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.RemovalSentinel:
        if _matches(original, "self.model = self.load_model(session)") and self.kv:
            return cst.RemovalSentinel.REMOVE  # the V3 KV base's __init__ compiles: self.model = self.load_model()
        if _matches(original, "self._models = self.load_graphs(session)"):
            if self.towers:
                vision, language = self.towers["VISION"], self.towers["DECODER"]
                new = cst.parse_statement(f"self.{vision}, self.{language} = self.load_model()\n")
                return new.with_changes(leading_lines=updated.leading_lines)
            self.loaded = True
            if self.kv:
                return cst.RemovalSentinel.REMOVE
            return cst.parse_statement("self.model = self.load_model()\n").with_changes(leading_lines=updated.leading_lines)
        if self.loaded and _picks_model(original):
            return cst.RemovalSentinel.REMOVE  # (no self._models now: self.model is the compiled module already)
        if self.executes:
            self.executes = 0
            note = f"{TODO_PREFIX}MV381 {self.called}(...) returns the forward's pytree of Tensors: read .driver_tensor where a Buffer is needed"
            result = attach_todos(updated, [note])
            return result if isinstance(result, cst.SimpleStatementLine) else updated
        return updated


class _BridgedSpecs(cst.CSTTransformer):
    """In a method of a bridged pipeline (``PipelineModels._bridged``):
    ``GraphSpec(m, ..., weights=m.state_dict(...))`` loses ``weights=`` (``load_graph_specs``
    compiles a V3 ``m`` with the values it holds, and V2's GraphSpec defaults to ``m.state_dict()``),
    and the TODOs the bridge resolves go: the GraphSpec's own, the ``state_dict()`` one whose call
    went, and ``load_state_dict``'s (V3's puts the values in the module ``load_graph_specs``
    compiles; a V2 module's loads as it did)."""

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if not source(updated.func).endswith("GraphSpec") or not updated.args:
            return updated
        root = source(updated.args[0].value)
        args = [a for a in updated.args if not (
            a.keyword is not None and a.keyword.value == "weights" and isinstance(a.value, cst.Call)
            and source(a.value.func) == f"{root}.state_dict")]
        if len(args) == len(updated.args):
            return updated
        args[-1] = args[-1].with_changes(comma=updated.args[-1].comma)
        return updated.with_changes(args=args)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        code = source(updated.with_changes(leading_lines=[]))
        resolved = {f"{TODO_PREFIX}MV382 {GRAPH_SPEC_TODO}"} if "GraphSpec(" in code else set()
        if "state_dict(" not in code.replace(".load_state_dict(", ""):
            resolved.add(f"{TODO_PREFIX}MV382 {state_dict_todo('state_dict')}")
        small = _small(updated)
        call = small.value if isinstance(small, cst.Expr) else None
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "load_state_dict":
            resolved.add(f"{TODO_PREFIX}MV382 {state_dict_todo('load_state_dict')}")
        return without_comments(updated, resolved)


def _picks_model(stmt: cst.SimpleStatementLine) -> bool:
    """``self.model = self._models[<role>]``: V2 picked its model out of the graphs it loaded."""
    text = source(stmt).strip()
    return text.startswith("self.model = self._models[") and text.endswith("]") and "\n" not in text


def _as_instantiate_module(
    func: cst.FunctionDef, template: cst.FunctionDef, body: Sequence[cst.BaseStatement]
) -> cst.FunctionDef:
    """``func`` renamed ``_instantiate_module`` with ``template``'s signature and ``body``
    (only an ``@override`` decorator stays)."""
    assert isinstance(func.body, cst.IndentedBlock)
    return func.with_changes(
        name=cst.Name("_instantiate_module"),
        params=template.params,
        whitespace_before_params=template.whitespace_before_params,
        returns=template.returns,
        body=func.body.with_changes(body=body),
        decorators=[d for d in func.decorators if source(d.decorator) == "override"],
    )
