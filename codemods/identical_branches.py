"""MV391 clean-up — an ``if``/``else`` whose two branches the migration made identical is one branch.

V2 code often tells a per-device list from one value (``if isinstance(xs,
Sequence): [ln(x) for ln, x in zip(self.norm_shards, xs)] else:
self.norm(xs)``); once MV391 collapses the per-device form into one call on
a distributed Tensor, both branches read the same. Left as is the code is
right but reads as if the two cases still differed. The branches fold into
one when all of these hold: they differ in the V2 source (an ``if`` the user
wrote with equal branches is theirs), they are equal after the rewrite,
comments included, the test has no side effects and no TODO of its own, and no
comment sits on the ``if``/``else`` lines (nothing is dropped but the test).

    if isinstance(hidden_states, Sequence):
        hidden_states = self.post_layernorm(hidden_states)
    else:
        hidden_states = self.post_layernorm(hidden_states)
    →  hidden_states = self.post_layernorm(hidden_states)
"""

from __future__ import annotations

import libcst as cst

from codemods.base import Codemod, FileState
from codemods.dead_locals import pure_expression

#: builtins that only inspect their arguments
_INSPECTING = frozenset({"isinstance", "hasattr", "callable", "len"})


class IdenticalBranches(Codemod):
    PREFIX = "MV391"

    @classmethod
    def applies(cls, source: str) -> bool:
        return "else" in source

    def __init__(self, state: FileState) -> None:
        super().__init__(state)
        self._elifs: set[int] = set()

    def visit_If(self, node: cst.If) -> None:
        if isinstance(node.orelse, cst.If):
            self._elifs.add(id(node.orelse))

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        if id(original) in self._elifs or not _foldable(original, updated) or not self._pure(updated.test):
            return updated
        if self.state.statement_todos and self.state.statement_todos[-1]:
            return updated  # a TODO about the test: it stays where the TODO points
        self.rewrote(original, "MV391", "if/else whose branches the migration made identical → one branch")
        first, *rest = (s for s in updated.body.body if isinstance(s, cst.SimpleStatementLine | cst.BaseCompoundStatement))
        first = first.with_changes(leading_lines=[*updated.leading_lines, *first.leading_lines])
        return cst.FlattenSentinel([first, *rest])

    def _pure(self, test: cst.BaseExpression) -> bool:
        if isinstance(test, cst.UnaryOperation):
            return self._pure(test.expression)
        if isinstance(test, cst.BooleanOperation):
            return self._pure(test.left) and self._pure(test.right)
        if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value in _INSPECTING:
            return all(not a.star and not a.keyword and pure_expression(a.value, self.qualname) for a in test.args)
        return pure_expression(test, self.qualname)


def _foldable(original: cst.If, updated: cst.If) -> bool:
    """Plain ``if``/``else`` blocks, equal now (comments included) and different in V2."""
    old_else, new_else = original.orelse, updated.orelse
    if not isinstance(old_else, cst.Else) or not isinstance(new_else, cst.Else):
        return False
    blocks = [b for b in (original.body, old_else.body, updated.body, new_else.body) if isinstance(b, cst.IndentedBlock)]
    if len(blocks) < 4 or any(b.header.comment is not None for b in blocks[2:]):
        return False
    if any(line.comment for line in new_else.leading_lines):
        return False
    return updated.body.deep_equals(new_else.body) and not original.body.deep_equals(old_else.body)
