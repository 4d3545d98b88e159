"""Compile several verified pairs as one graph per side.

A MAX compile on CPU costs about the same for a one-layer graph as for one
holding several modules (measured with an empty cache: about 150 s of CPU for
one Linear, 145 s for four Linears with four activations in one graph), so
compiling each root pair alone makes a run with N roots pay 2N compiles. Here
the roots become children ``root0``, ``root1``, ... of one container module per
side; its call takes every root's inputs in turn and returns every root's
outputs, flattened, so a run (or several runs, as the test suite does) pays
two. Weights keep their names under the child's prefix; the caller splits the
outputs back per root and compares them exactly as for a pair alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from migrate_v3.verify import sides


@dataclass
class Member:
    """One root pair's part of the combined graphs."""

    v2: Any
    v3: Any
    v2_weights: Mapping[str, Any]
    v3_weights: Mapping[str, Any]
    types: list[Any]
    inputs: list[Any]


class _Tally:
    """How many output leaves each root returned; shared with copies of its container.

    V3 ``Module.trace``/``compile`` trace a deep copy of the module, so a count
    recorded on the copy would be lost: copying a tally gives the same tally.
    """

    def __init__(self) -> None:
        self.counts: list[int] = []

    def __copy__(self) -> _Tally:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _Tally:
        return self


def _call_roots(container: Any, args: Sequence[Any]) -> list[Any]:
    """Call each child on its slice of ``args``; record how many leaves each returned."""
    outputs: list[Any] = []
    counts: list[int] = []
    at = 0
    for i, arity in enumerate(container.arities):
        leaves = sides.flatten_outputs(getattr(container, f"root{i}")(*args[at:at + arity]))
        at += arity
        counts.append(len(leaves))
        outputs.extend(leaves)
    container.tally.counts = counts
    return outputs


def _hold(container: Any, roots: Sequence[Any], arities: Sequence[int]) -> None:
    """The container's children ``root0``, ``root1``, ... and what splitting needs."""
    container.arities = tuple(arities)
    container.tally = _Tally()
    for i, root in enumerate(roots):
        setattr(container, f"root{i}", root)


@cache
def _v2_container() -> type:
    class Roots(sides.v2_base()):  # type: ignore[misc]
        """V2 container: traced as one Graph."""

        def __init__(self, roots: Sequence[Any], arities: Sequence[int]) -> None:
            super().__init__()
            _hold(self, roots, arities)

        def __call__(self, *args: Any) -> list[Any]:
            return _call_roots(self, args)

    return Roots


@cache
def _v3_container() -> type:
    class Roots(sides.v3_base()):  # type: ignore[misc]
        """V3 container: compiled as one graph."""

        def __init__(self, roots: Sequence[Any], arities: Sequence[int]) -> None:
            super().__init__()
            _hold(self, roots, arities)

        def forward(self, *args: Any) -> tuple[Any, ...]:
            return tuple(_call_roots(self, args))

    return Roots


def _split(values: list[Any], counts: list[int]) -> list[list[Any]]:
    parts, at = [], 0
    for n in counts:
        parts.append(values[at:at + n])
        at += n
    return parts


def dim_values(types: Sequence[Any], inputs: Sequence[Any]) -> dict[str, int]:
    """Each symbolic dim name of the input types, with the size the inputs give it."""
    from max.graph import SymbolicDim

    values: dict[str, int] = {}
    for tensor_type, array in zip(types, inputs, strict=False):
        for dim, size in zip(getattr(tensor_type, "shape", ()), getattr(array, "shape", ()), strict=False):
            if isinstance(dim, SymbolicDim):
                values.setdefault(str(dim), int(size))
    return values


def pack(bindings: Sequence[Mapping[str, int]]) -> list[list[int]]:
    """Indices grouped so no group binds one dim name to two sizes (first fit, in order).

    A graph binds a symbolic dim name to one value, and model code names dims
    itself (``ops.reshape(x, ["batch_size", 1, 1, "seq_len"])``), so they
    cannot be renamed: roots whose inputs disagree go to different graphs.
    """
    groups: list[tuple[list[int], dict[str, int]]] = []
    for i, dims in enumerate(bindings):
        for members, bound in groups:
            if all(bound.get(name, size) == size for name, size in dims.items()):
                members.append(i)
                bound.update(dims)
                break
        else:
            groups.append(([i], dict(dims)))
    return [members for members, _ in groups]


def compile_together(members: Sequence[Member], target: sides.Target,
                     session: Any) -> list[tuple[list[Any], list[Any]]]:
    """(V2 outputs, V3 outputs) per member, from one compiled graph per side."""
    arities = [len(m.types) for m in members]
    types = [t for m in members for t in m.types]
    inputs = [a for m in members for a in m.inputs]
    v2 = _v2_container()([m.v2 for m in members], arities)
    v2_weights = {f"root{i}.{k}": v for i, m in enumerate(members) for k, v in m.v2_weights.items()}
    ref = sides.compile_v2(v2, v2_weights, types, target, session)(inputs)
    v3 = _v3_container()([m.v3 for m in members], arities)
    v3_weights = {f"root{i}.{k}": v for i, m in enumerate(members) for k, v in m.v3_weights.items()}
    got = sides.compile_v3(v3, v3_weights, types, target)(inputs)
    return list(zip(_split(ref, v2.tally.counts), _split(got, v3.tally.counts), strict=True))
