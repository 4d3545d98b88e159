"""libcst's node classes as the Engine walks them, read from libcst's public API only.

The Engine (``codemods.base``) walks a tree itself instead of through libcst's
transformer, so it must know, per node class, which fields hold child nodes,
how libcst visits each (a required node, an optional one, a ``MaybeSentinel``
one, a sequence, a statement body) and in which order. All of it comes from
what libcst documents:

* the classes: the concrete ``CSTNode`` subclasses ``libcst`` exports;
* which node classes a field can hold, and how it is visited: the field's
  type annotation (``Optional[...]`` → optional, ``Union[..., MaybeSentinel]``
  → sentinel, ``Sequence[...]`` → sequence; a sequence that can hold a
  ``SimpleStatementLine`` is a statement body, where libcst drops lines a
  removal emptied);
* the order: observed, the first time a class is met, by visiting one real
  node with a visitor that records ``on_visit_attribute`` (libcst's public
  visitor protocol) and does not descend. A field libcst skips when it is
  empty (``FormattedStringExpression.format_spec`` in libcst 1.0) is learned
  from the first node where it is not.

Nothing here reads libcst's source or calls its private methods, so a new
libcst release with new node classes (PEP 695 type parameters, PEP 750
t-strings...) is understood as it is, and the fast path never depends on how
libcst happens to spell its visiting code. ``tests/test_apply_speed_engine.py``
checks the Engine against libcst's own transformer on every fixture and on
real packages, on the oldest and the newest libcst the project supports.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import types
import typing
from dataclasses import dataclass
from typing import Any

import libcst as cst

REQUIRED, OPTIONAL, SENTINEL, SEQUENCE, BODY, NODE_OR_SEQUENCE = range(6)

_UNION_TYPES: tuple[Any, ...] = (typing.Union, types.UnionType)
_SEQUENCE_TYPES: tuple[Any, ...] = (collections.abc.Sequence, list, tuple)


@dataclass(frozen=True)
class Grammar:
    """Per node class: its node fields, how each is visited, what each can hold."""

    #: class name → class, every concrete node class libcst exports
    classes: dict[str, type[cst.CSTNode]]
    #: class → {field: kind} for every field whose annotation admits a node
    kinds: dict[type, dict[str, int]]
    #: (class name, field) → names of the classes that field can hold
    holds: dict[tuple[str, str], frozenset[str]]


def _alternatives(hint: Any) -> list[Any]:
    if typing.get_origin(hint) in _UNION_TYPES:
        return [alt for arg in typing.get_args(hint) for alt in _alternatives(arg)]
    return [hint]


def _is_sequence(hint: Any) -> bool:
    return typing.get_origin(hint) in _SEQUENCE_TYPES


def admitted(hint: Any, classes: dict[str, type[cst.CSTNode]]) -> frozenset[str]:
    """Names of the concrete node classes a field annotation admits."""
    out: set[str] = set()
    stack = [hint]
    while stack:
        h = stack.pop()
        args = typing.get_args(h)
        if args:
            stack.extend(args)
        elif isinstance(h, type) and issubclass(h, cst.CSTNode):
            out.update(name for name, c in classes.items() if issubclass(c, h))
    return frozenset(out)


def _kind(hint: Any, classes: dict[str, type[cst.CSTNode]]) -> int:
    alternatives = _alternatives(hint)
    sequences = [a for a in alternatives if _is_sequence(a)]
    if sequences and any(not _is_sequence(a) and admitted(a, classes) for a in alternatives):
        return NODE_OR_SEQUENCE  # ImportFrom.names: Sequence[ImportAlias] | ImportStar
    if sequences:
        return BODY if any("SimpleStatementLine" in admitted(s, classes) for s in sequences) else SEQUENCE
    if type(None) in alternatives:
        return OPTIONAL
    if cst.MaybeSentinel in alternatives:
        return SENTINEL
    return REQUIRED


def node_classes() -> dict[str, type[cst.CSTNode]]:
    """Every concrete node class libcst exports, by name."""
    out: dict[str, type[cst.CSTNode]] = {}
    for name in cst.__all__:
        obj = getattr(cst, name, None)
        if isinstance(obj, type) and issubclass(obj, cst.CSTNode) and not inspect.isabstract(obj):
            out[obj.__name__] = obj
    return out


def build() -> Grammar:
    classes = node_classes()
    kinds: dict[type, dict[str, int]] = {}
    holds: dict[tuple[str, str], frozenset[str]] = {}
    for name, cls in classes.items():
        hints = typing.get_type_hints(cls)
        fields: dict[str, int] = {}
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            held = admitted(hint, classes)
            if held:
                fields[f.name] = _kind(hint, classes)
                holds[name, f.name] = held
        kinds[cls] = fields
    return Grammar(classes, kinds, holds)


class _FieldOrder(cst.CSTTransformer):
    """Records the attributes libcst visits on one node, without descending into them."""

    def __init__(self, root: cst.CSTNode) -> None:
        super().__init__()
        self.root = root
        self.fields: list[str] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        return node is self.root

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        if node is self.root:
            self.fields.append(attribute)


def visiting_order(node: cst.CSTNode) -> tuple[str, ...]:
    """The fields libcst visits on ``node``, in its order (one shallow visit)."""
    recorder = _FieldOrder(node)
    node.visit(recorder)
    return tuple(recorder.fields)


def is_empty(value: Any) -> bool:
    """A field value with no node in it (libcst may skip visiting such a field)."""
    return value is None or value is cst.MaybeSentinel.DEFAULT or (isinstance(value, (tuple, list)) and not value)
