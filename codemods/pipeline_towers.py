"""MV383, for a V2 vision-language pipeline model: two towers → ``ModuleV3MultiGraphPipelineModelWithKVCache``.

Read off the pixtral pair (the V2 model and max's ``pixtral_modulev3``): a V2
``graph_specs`` that returns ``{GraphRole.VISION: self._vision_spec(cfg,
self._vision_weights_dict), GraphRole.DECODER: self._language_spec(cfg,
self._language_weights_dict)}`` (the vision entry may sit under an ``if``)
compiles two graphs; the V3 multi-graph base calls ``_compile_vision_model`` and
``_compile_language_model`` with those same weight dicts. So:

* ``graph_specs`` → the two hooks, each returning its helper's result (the
  vision hook returns None, and is typed ``| None``, only where the V2 code left
  the vision graph out under a condition);
* each helper ``m = Root(...)``, ``m.load_state_dict(state_dict, ...)``,
  ``return GraphSpec(m, name, types, ...)`` → builds ``m`` under ``F.lazy()``,
  moves it to ``self.devices[0]`` and returns ``m.compile(*types,
  weights=state_dict)``;
* the ``vision_model``/``language_model`` properties over ``self._models[...]``
  → attributes that ``__init__`` sets from ``self.load_model()``.

    def graph_specs(self, cfg):                   def _compile_vision_model(self, cfg, state_dict):
        return {GraphRole.VISION: self._v(     →      return self._v(cfg, state_dict)
            cfg, self._vision_weights_dict), ...}
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from codemods.args import source
from codemods.base import TODO_PREFIX
from codemods.imports import _IDENT

#: the V2 role → (the weights attribute the V3 base passes its hook, the hook)
ROLES = {
    "VISION": ("self._vision_weights_dict", "_compile_vision_model"),
    "DECODER": ("self._language_weights_dict", "_compile_language_model"),
}


@dataclass
class Towers:
    """What a two-tower ``graph_specs`` builds: per role, its helper and the condition it is built under."""

    config: str
    helpers: dict[str, str] = field(default_factory=dict)
    conditions: dict[str, str] = field(default_factory=dict)
    #: per role, the name of the property over ``self._models[GraphRole.<role>]`` (filled by the caller)
    attributes: dict[str, str] = field(default_factory=dict)


def _role(key: cst.BaseExpression) -> str | None:
    text = source(key)
    role = text.rsplit(".", 1)[-1]
    return role if role in ROLES and text.endswith(f"GraphRole.{role}") else None


def _helper_call(value: cst.BaseExpression, config: str, role: str) -> str | None:
    """``h`` of ``self.h(<config>, self._<tower>_weights_dict)``."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and source(value.func.value) == "self"):
        return None
    args = [source(a.value) for a in value.args if a.keyword is None and not a.star]
    if len(args) != 2 or len(value.args) != 2 or args != [config, ROLES[role][0]]:
        return None
    return value.func.attr.value


def _entries(node: cst.BaseExpression, config: str, towers: Towers, condition: str | None = None) -> bool:
    if not isinstance(node, cst.Dict):
        return False
    for element in node.elements:
        if not isinstance(element, cst.DictElement):
            return False
        role = _role(element.key)
        helper = _helper_call(element.value, config, role) if role else None
        if role is None or helper is None or role in towers.helpers:
            return False
        towers.helpers[role] = helper
        if condition is not None:
            towers.conditions[role] = condition
    return True


def find_towers(func: cst.FunctionDef) -> Towers | None:
    """The towers of a ``graph_specs`` of the shape above; None for any other body."""
    if not isinstance(func.body, cst.IndentedBlock) or len(func.params.params) != 2:
        return None
    towers = Towers(func.params.params[1].name.value)
    specs: str | None = None
    for stmt in func.body.body:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString | cst.ConcatenatedString):
            continue  # the docstring
        if isinstance(small, cst.Return) and small.value is not None:
            if isinstance(small.value, cst.Dict) and specs is None and _entries(small.value, towers.config, towers):
                break
            if specs is not None and source(small.value) == specs:
                break
            return None
        target = (
            small.targets[0].target if isinstance(small, cst.Assign) and len(small.targets) == 1
            else small.target if isinstance(small, cst.AnnAssign) else None
        )
        value = small.value if isinstance(small, cst.Assign | cst.AnnAssign) else None
        if isinstance(target, cst.Name) and specs is None and value is not None:
            if not _entries(value, towers.config, towers):
                return None
            specs = target.value
            continue
        if specs is not None and isinstance(stmt, cst.If) and stmt.orelse is None and isinstance(stmt.body, cst.IndentedBlock) \
                and len(stmt.body.body) == 1:
            inner = stmt.body.body[0]
            assign = inner.body[0] if isinstance(inner, cst.SimpleStatementLine) and len(inner.body) == 1 else None
            if isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Subscript):
                sub = assign.targets[0].target
                if source(sub.value) == specs and len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index):
                    key = sub.slice[0].slice.value
                    entry = cst.Dict([cst.DictElement(key, assign.value)])
                    if _entries(entry, towers.config, towers, condition=source(stmt.test)):
                        continue
        return None
    else:
        return None
    if set(towers.helpers) != set(ROLES) or "DECODER" in towers.conditions:
        return None
    return towers


def models_property(func: cst.FunctionDef) -> str | None:
    """The role of ``@property def x(self): return self._models[GraphRole.<role>]`` (or ``.get(...)``)."""
    if not any(source(d.decorator) == "property" for d in func.decorators) or not isinstance(func.body, cst.IndentedBlock):
        return None
    stmts = [
        s for s in func.body.body
        if not (isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.Expr)
                and isinstance(s.body[0].value, cst.SimpleString | cst.ConcatenatedString))
    ]
    ret = stmts[0].body[0] if len(stmts) == 1 and isinstance(stmts[0], cst.SimpleStatementLine) else None
    value = ret.value if isinstance(ret, cst.Return) else None
    if isinstance(value, cst.Call) and source(value.func) == "self._models.get" and len(value.args) == 1:
        return _role(value.args[0].value)
    if not (isinstance(value, cst.Subscript) and source(value.value) == "self._models"):
        return None
    index = value.slice[0].slice if len(value.slice) == 1 else None
    return _role(index.value) if isinstance(index, cst.Index) else None


def hooks(towers: Towers, callable_: str, any_: str) -> list[cst.BaseStatement]:
    """The two V3 hooks that replace ``graph_specs``."""
    out: list[cst.BaseStatement] = []
    for role, (_, hook) in ROLES.items():
        # (the base declares ``Callable``: None only where V2 left the tower out under a condition)
        optional = " | None" if role in towers.conditions else ""
        lines = [f"def {hook}(self, {towers.config}: {any_}, state_dict: dict[str, {any_}]) -> {callable_}[..., {any_}]{optional}:\n"]
        if role in towers.conditions:
            test = towers.conditions[role]
            simple = isinstance(cst.parse_expression(test), cst.Name | cst.Attribute | cst.Call | cst.Subscript)
            lines.append(f"    if not {test if simple else f'({test})'}:\n        return None\n")
        lines.append(f"    return self.{towers.helpers[role]}({towers.config}, state_dict)\n")
        stmt = cst.parse_statement("".join(lines))
        out.append(stmt.with_changes(leading_lines=[cst.EmptyLine(indent=False)]) if out else stmt)
    return out


def compile_helper(func: cst.FunctionDef, callable_: str, any_: str) -> cst.FunctionDef | None:
    """A tower helper (``m = Root(...)``, ``m.load_state_dict(state_dict, ...)``, ``return
    GraphSpec(m, name, types, ...)``) → the same method building ``m`` under ``F.lazy()`` and
    returning ``m.compile(*types, weights=state_dict)``; None for another shape."""
    params = func.params.params
    if not isinstance(func.body, cst.IndentedBlock) or len(params) != 3 or not func.body.body:
        return None
    weights = params[2].name.value
    stmts = list(func.body.body)
    last = stmts[-1]
    ret = last.body[0] if isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 else None
    if not (isinstance(ret, cst.Return) and isinstance(ret.value, cst.Call) and source(ret.value.func).endswith("GraphSpec")):
        return None
    spec = ret.value
    positional = [a for a in spec.args if a.keyword is None and not a.star]
    if len(positional) < 3 or not isinstance(positional[0].value, cst.Name):
        return None
    model = positional[0].value.value
    before: list[cst.BaseStatement] = []
    after: list[cst.BaseStatement] = []  # statements after the construction that do not name the model
    built: cst.BaseStatement | None = None
    loads = 0
    for stmt in stmts[:-1]:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        target = (
            small.targets[0].target if isinstance(small, cst.Assign) and len(small.targets) == 1
            else small.target if isinstance(small, cst.AnnAssign) else None
        )
        if isinstance(target, cst.Name) and target.value == model and built is None:
            built = stmt
            continue
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and source(small.value.func) == f"{model}.load_state_dict":
            first = next((a for a in small.value.args if a.keyword is None or a.keyword.value == "state_dict"), None)
            if built is None or first is None or source(first.value) != weights:
                return None
            loads += 1
            continue
        if model in _IDENT.findall(source(stmt)):
            return None  # may touch the model (or use it before it is built)
        (after if built is not None else before).append(stmt)
    if built is None or loads != 1:
        return None
    value = positional[2].value
    if isinstance(value, cst.List | cst.Tuple) and value.elements:
        types = ", ".join(source(e.value) if isinstance(e, cst.Element) else f"*{source(e.value)}" for e in value.elements)
    else:
        types = "*" + (source(value) if isinstance(value, cst.Name | cst.Attribute | cst.Call | cst.Subscript) else f"({source(value)})")
    block = cst.parse_statement(f"with F.lazy(), default_dtype(self.dtype):\n    pass\n    {model}.to(self.devices[0])\n")
    assert isinstance(block, cst.With) and isinstance(block.body, cst.IndentedBlock)
    block = block.with_changes(
        leading_lines=getattr(built, "leading_lines", ()),
        body=block.body.with_changes(body=[built.with_changes(leading_lines=()), *block.body.body[1:]]),
    )
    tail = cst.parse_statement(f"return {model}.compile({types}, weights={weights})\n")
    # (the V2 return's TODOs on GraphSpec / .state_dict() are what this rewrite did)
    kept = [line for line in getattr(last, "leading_lines", ()) if not (line.comment and line.comment.value.startswith(TODO_PREFIX))]
    return func.with_changes(
        returns=cst.Annotation(cst.parse_expression(f"{callable_}[..., {any_}]")),
        body=func.body.with_changes(body=[*before, block, *after, tail.with_changes(leading_lines=kept)]),
    )
