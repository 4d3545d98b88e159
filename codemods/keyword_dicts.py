"""MV346 — a local dict of V2 layer keywords splatted into calls is written into each call.

V2 code gathers a layer's arguments once (``common = dict(dtype=..., device=...)``)
and splats them (``Linear(4, 8, **common)``). The layer's V3 map (MV340: no
``dtype``/``device``, renamed keywords, flipped defaults) only sees keywords it
can read, so a splat leaves the call unmapped. The dict goes into each call
when all of these hold: it is bound once in the function, by ``dict(k=v, ...)``
or a ``{"k": v, ...}`` literal of identifier keys; it carries ``dtype``,
``device`` or ``devices`` (V2 layer arguments no V3 layer takes); every other
read of it is a ``**`` in a call, beside other arguments in one at least, or
alone into a class ``layers`` does not map (a dict spread alone into layers it
maps is mapped where it is built, MV340; a draft's ``attn_kwargs`` that builds a
data-parallel, a tensor-parallel or a plain ``AttentionWithRope`` is not); and
its values have no side effects when it is splatted more than once (each call
would evaluate them again).

    common = dict(dtype=dtype, device=device, has_bias=True)
    self.up = Linear(in_dim=4, out_dim=8, **common)
    →  self.up = Linear(in_dim=4, out_dim=8, dtype=dtype, device=device, has_bias=True)   (then MV340)
"""

from __future__ import annotations

import libcst as cst

from codemods.args import source
from codemods.base import Codemod, nodes_of
from codemods.dead_locals import pure_expression
from codemods.shard_scan import body_statements
from migrate_v3.knowledge.layers import LAYERS, v2_symbol

#: V2 layer arguments no V3 layer takes: a dict holding one is meant for a V2 layer
_V2_KEYS = frozenset({"dtype", "device", "devices"})


def _keywords(value: cst.BaseExpression) -> list[tuple[str, cst.BaseExpression]] | None:
    """``dict(k=v, ...)`` or ``{"k": v, ...}`` → [(k, v), ...]; None for anything else."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
        if any(a.keyword is None or a.star for a in value.args):
            return None
        return [(a.keyword.value, a.value) for a in value.args if a.keyword is not None]
    if isinstance(value, cst.Dict):
        out: list[tuple[str, cst.BaseExpression]] = []
        for element in value.elements:
            if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
                return None
            key = element.key.evaluated_value
            if not isinstance(key, str) or not key.isidentifier():
                return None
            out.append((key, element.value))
        return out
    return None


def _bound(small: cst.BaseSmallStatement) -> tuple[str, cst.BaseExpression] | None:
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
        return small.targets[0].target.value, small.value
    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
        return small.target.value, small.value
    return None


#: a call longer than this once the keywords are written in gets one argument per line
_WIDTH = 100


def _one_per_line(call: cst.Call) -> cst.Call:
    """``call`` with each argument on a line of its own, one level in, and a trailing comma."""
    def line(indent: str) -> cst.ParenthesizedWhitespace:
        return cst.ParenthesizedWhitespace(indent=True, last_line=cst.SimpleWhitespace(indent))

    args = [a.with_changes(comma=cst.Comma(whitespace_after=line("    " if i < len(call.args) - 1 else "")),
                           whitespace_after_arg=cst.SimpleWhitespace(""))
            for i, a in enumerate(call.args)]
    return call.with_changes(args=args, whitespace_before_args=line("    "))


class KeywordDicts(Codemod):
    PREFIX = "MV346"

    @classmethod
    def applies(cls, source: str) -> bool:
        return "**" in source

    def __init__(self, state: object) -> None:
        super().__init__(state)  # type: ignore[arg-type]
        self._dicts: list[dict[str, list[tuple[str, cst.BaseExpression]]]] = []  # per function: name → keywords
        self._definitions: set[int] = set()  # the statements binding them (ids)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        found: dict[str, list[tuple[str, cst.BaseExpression]]] = {}
        where: dict[str, int] = {}
        binds: dict[str, int] = {}
        for small in body_statements(node.body):
            bound = _bound(small)
            if bound is None:
                continue
            name, value = bound
            binds[name] = binds.get(name, 0) + 1
            keywords = _keywords(value)
            if keywords is not None and _V2_KEYS & {k for k, _ in keywords}:
                found[name], where[name] = keywords, id(small)
        names = [n.value for n in nodes_of(node.body, (cst.Name,)) if isinstance(n, cst.Name)]
        splats: dict[str, list[cst.Call]] = {}
        for call in nodes_of(node.body, (cst.Call,)):
            assert isinstance(call, cst.Call)
            for a in call.args:
                if a.star == "**" and isinstance(a.value, cst.Name):
                    splats.setdefault(a.value.value, []).append(call)
        for name, keywords in list(found.items()):
            calls = splats.get(name, [])
            uses = len(calls)
            if binds[name] != 1 or not uses or names.count(name) != uses + 1 or (
                uses > 1 and not all(pure_expression(v, self.qualname) for _, v in keywords)
            ) or (all(len(c.args) == 1 for c in calls) and all(self._layer(c.func) for c in calls)):
                del found[name]  # (MV340 maps a dict spread alone into layers it knows where it is built)
            else:
                self._definitions.add(where[name])
        self._dicts.append(found)

    def _layer(self, func: cst.BaseExpression) -> bool:
        """``func`` is a V2 layer class ``layers`` maps."""
        return v2_symbol(self.qualname(func)) in LAYERS

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self._dicts.pop()
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        found = self._dicts[-1] if self._dicts else {}
        if not found or not any(a.star == "**" and isinstance(a.value, cst.Name) and a.value.value in found
                                for a in updated.args):
            return updated
        args: list[cst.Arg] = []
        for arg in updated.args:
            if not (arg.star == "**" and isinstance(arg.value, cst.Name) and arg.value.value in found):
                args.append(arg)
                continue
            keywords = found[arg.value.value]
            for k, (key, value) in enumerate(keywords):
                last = k == len(keywords) - 1
                args.append(cst.Arg(
                    value=value,
                    keyword=cst.Name(key),
                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
                    comma=arg.comma if last else cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
                ))
            self.rewrote(original, "MV346", f"**{arg.value.value}: its keywords written into the call")
        call = updated.with_changes(args=args)
        return _one_per_line(call) if len(source(call)) > _WIDTH else call

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | cst.RemovalSentinel:
        if len(original.body) == 1 and id(original.body[0]) in self._definitions:
            self.rewrote(original, "MV346", "a dict of layer keywords: written into the calls it was splatted into")
            return cst.RemovalSentinel.REMOVE
        return updated
