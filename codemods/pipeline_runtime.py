"""MV382 — a V2 pipeline's ``_init_distributed_runtime(self, session, cfg)`` on a V3 base.

The V3 KV bases call ``_init_distributed_runtime(model_config)`` from ``load_model`` (no
session: it compiles with ``Module.compile``) and their own version sets
``self._modulev3_extra_input_types``, which ``_get_compile_input_types`` reads. So the V2
override loses its ``session`` parameter, calls the V3 base first (as
``deepseekV3_modulev3`` does), and reads the session the class keeps in ``__init__``
(``self.session``, also as ``deepseekV3_modulev3`` does) where it used the parameter::

    def _init_distributed_runtime(self, session, model_config):      def __init__(self, pipeline_config, session, *args, **kwargs):
        self.ep.ep_init(session)                                  →         self.session = session
                                                                           super().__init__(pipeline_config, session, *args, **kwargs)
                                                                       def _init_distributed_runtime(self, model_config):
                                                                           super()._init_distributed_runtime(model_config)
                                                                           self.ep.ep_init(self.session)
"""

from __future__ import annotations

import libcst as cst

from codemods.args import source
from codemods.base import FileState

HOOK = "_init_distributed_runtime"


class _SessionReads(cst.CSTTransformer):
    """``session`` → ``self.session``; ``super().<HOOK>(session, cfg)`` loses the session; ``del session`` goes."""

    def __init__(self, session: str) -> None:
        super().__init__()
        self.session = session
        self.reads = 0
        self.super_calls = 0

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if original.value != self.session:
            return updated
        self.reads += 1
        return cst.Attribute(value=cst.Name("self"), attr=cst.Name("session"))

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)  # (``x.session`` is no read of the parameter)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)

    def leave_Param(self, original: cst.Param, updated: cst.Param) -> cst.Param:
        if original.name.value == self.session:
            self.reads -= 1  # (the parameter itself is no read)
        return updated.with_changes(name=original.name)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if source(original.func) != f"super().{HOOK}":
            return updated
        self.super_calls += 1
        args = list(updated.args)
        if args and isinstance(original.args[0].value, cst.Name) and original.args[0].value.value == self.session:
            self.reads -= 1
            args = args[1:]
        return updated.with_changes(args=args)

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | cst.RemovalSentinel:
        if source(original).strip() == f"del {self.session}":
            self.reads -= 1
            return cst.RemoveFromParent()
        return updated


def v3_distributed_runtime(func: cst.FunctionDef) -> tuple[cst.FunctionDef, bool] | None:
    """``func`` (a V2 ``_init_distributed_runtime(self, session, cfg)``) in the V3 form, and whether
    it reads the session (then the class must keep it); None when it has another shape."""
    params = func.params
    if (
        len(params.params) != 3 or not isinstance(params.star_arg, cst.MaybeSentinel)
        or params.kwonly_params or params.star_kwarg is not None or params.posonly_params
        or not isinstance(func.body, cst.IndentedBlock)
    ):
        return None
    session = params.params[1].name.value
    cfg = params.params[2].name.value
    rewrite = _SessionReads(session)
    new = func.visit(rewrite)
    assert isinstance(new, cst.FunctionDef) and isinstance(new.body, cst.IndentedBlock)
    body = list(new.body.body)
    if not rewrite.super_calls:
        first = body[0].body[0] if body and isinstance(body[0], cst.SimpleStatementLine) and len(body[0].body) == 1 else None
        at = 1 if isinstance(first, cst.Expr) and isinstance(first.value, cst.SimpleString | cst.ConcatenatedString) else 0
        body.insert(at, cst.parse_statement(f"super().{HOOK}({cfg})  # the V3 base's sets the extra compile inputs\n"))
    new = new.with_changes(
        params=params.with_changes(params=[params.params[0], params.params[2]]),
        body=new.body.with_changes(body=body),
    )
    return new, rewrite.reads > 0


def session_init(state: FileState) -> cst.FunctionDef:
    """An ``__init__`` that keeps the session the V3 base's constructor takes (it stores none)."""
    any_ = state.import_name("typing", "Any")
    session = state.import_name("max.engine", "InferenceSession")
    init = cst.parse_statement(
        f"def __init__(self, pipeline_config: {any_}, session: {session}, *args: {any_}, **kwargs: {any_}) -> None:\n"
        f"    self.session = session  # {HOOK} reads it (V2 passed it in)\n"
        "    super().__init__(pipeline_config, session, *args, **kwargs)\n"
    )
    assert isinstance(init, cst.FunctionDef)
    return init
