"""Call-argument plumbing: bind V2 arguments to names, re-emit them for V3.

Rebuilding keeps each argument's own formatting and reuses the call's comma
style, so a multi-line V2 call stays a readable multi-line V3 call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from codemods.base import code_for


@dataclass
class Bound:
    """V2 call arguments by parameter name (None when the call can't be bound)."""

    args: dict[str, cst.Arg]
    order: list[str]


def bind(call: cst.Call, positional: Sequence[str], kwonly: Sequence[str] = ()) -> Bound | None:
    """Bind ``call``'s arguments to parameter names; None for ``*a``/``**k`` or too many."""
    args: dict[str, cst.Arg] = {}
    order: list[str] = []
    known = set(positional) | set(kwonly)
    index = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            if index >= len(positional):
                return None
            name = positional[index]
            index += 1
        else:
            name = arg.keyword.value
            if name not in known:
                return None
        args[name] = arg
        order.append(name)
    return Bound(args, order)


def small_statement(stmt: cst.CSTNode) -> cst.BaseSmallStatement | None:
    """The one small statement of a simple statement line (``x = 1``), else None."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        return stmt.body[0]
    return None


def is_docstring(stmt: cst.CSTNode) -> bool:
    """A line holding only a string literal (or literals that concatenate): a docstring where first."""
    small = small_statement(stmt)
    return isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString | cst.ConcatenatedString)


def self_attr(node: cst.BaseExpression | None) -> str | None:
    """``X`` for ``self.X``, else None."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


_EMPTY = cst.Module(body=[])


def source(node: cst.CSTNode) -> str:
    """Source text of a node (``Module.code_for_node``, printed by ``codemods.base.code_for``)."""
    return code_for(_EMPTY, node)


def as_keyword(arg: cst.Arg, keyword: str) -> cst.Arg:
    """``arg`` passed by keyword ``keyword`` (its value and formatting kept)."""
    if arg.keyword is not None and arg.keyword.value == keyword:
        return arg
    return arg.with_changes(
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )


def new_keyword(keyword: str, value_src: str) -> cst.Arg:
    return cst.Arg(
        value=cst.parse_expression(value_src),
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )


def without(call: cst.Call, bound: Bound, params: Sequence[str], gone: frozenset[str]) -> list[cst.Arg]:
    """``call``'s arguments less those bound to ``gone``; one that followed a dropped positional
    argument becomes a keyword (its position moved), in the call's comma layout."""
    first = min(params.index(g) for g in gone)
    new = [
        bound.args[n] if bound.args[n].keyword is not None or params.index(n) < first else as_keyword(bound.args[n], n)
        for n in bound.order
        if n not in gone
    ]
    return relayout(call.args, new)


def relayout(original: Sequence[cst.Arg], new: list[cst.Arg]) -> list[cst.Arg]:
    """Give ``new`` the comma layout of ``original`` (same separators, same trailing comma)."""
    if not new:
        return []
    commas = [a.comma for a in original]
    middle: cst.Comma | cst.MaybeSentinel = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    for c in commas[:-1]:
        if isinstance(c, cst.Comma):
            middle = c
            break
    last = commas[-1] if commas else cst.MaybeSentinel.DEFAULT
    if isinstance(last, cst.Comma) and len(new) > len(original) and len(original) == 1:
        middle = last
    # the space before ``)`` belongs to the last argument (``whitespace_after_arg``): it stays last
    closing = original[-1].whitespace_after_arg if original else cst.SimpleWhitespace("")
    # a comment after a comma belongs to the argument before it: it moves with that argument
    owned = {id(a.value): a.comma for a in original if isinstance(a.comma, cst.Comma) and _comment_of(a.comma)}
    out: list[cst.Arg] = []
    for i, arg in enumerate(new):
        after = arg.whitespace_after_arg
        if i == len(new) - 1:
            comma, after = last, closing
        elif i < len(commas) - 1 and isinstance(commas[i], cst.Comma):
            comma = commas[i]
        else:
            comma = middle
        if i < len(new) - 1 and after is closing:
            after = cst.SimpleWhitespace("")
        if isinstance(comma, cst.Comma):
            mine = owned.get(id(arg.value))
            if mine is not None and (i < len(new) - 1 or isinstance(last, cst.Comma)):
                comma = _with_comment_of(comma, mine)
            else:
                comma = _uncommented(comma)
        out.append(arg.with_changes(comma=comma, whitespace_after_arg=after))
    return out


def _comment_of(comma: cst.Comma) -> bool:
    ws = comma.whitespace_after
    return isinstance(ws, cst.ParenthesizedWhitespace) and (
        ws.first_line.comment is not None or any(line.comment is not None for line in ws.empty_lines)
    )


def _with_comment_of(comma: cst.Comma, owner: cst.Comma) -> cst.Comma:
    """``comma`` (this position's line break and indent) carrying ``owner``'s comment."""
    ws, mine = comma.whitespace_after, owner.whitespace_after
    if not isinstance(ws, cst.ParenthesizedWhitespace) or not isinstance(mine, cst.ParenthesizedWhitespace):
        return owner
    return comma.with_changes(whitespace_after=ws.with_changes(first_line=mine.first_line, empty_lines=mine.empty_lines))


def _uncommented(comma: cst.Comma) -> cst.Comma:
    """``comma`` with the same line break and indent but not another argument's comment."""
    ws = comma.whitespace_after
    if not _comment_of(comma):
        return comma
    assert isinstance(ws, cst.ParenthesizedWhitespace)
    return comma.with_changes(whitespace_after=ws.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[]))
