"""A file's transform leaves no reference cycles of ours behind.

``transform_source`` pauses the cyclic garbage collector while a file is
rewritten (libcst trees hold no cycles). A class defined inside a function, or
a nested function that calls itself, is a cycle per call: it keeps whatever it
captured (often a subtree of the file) alive until the collector's next pass,
which then walks all of it. Measured on max's V2 packages, such cycles were
~786k objects per ``apply`` run; without them, ~16k (libcst's own
``SimpleString.evaluated_value`` goes through ``ast.literal_eval``, whose nested
functions are cycles of the standard library's).
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator

import pytest

from migrate_v3.pipeline import transform_source
from tests.test_codemods import CASES, _context

_OURS = ("codemods", "migrate_v3")


@pytest.fixture
def saved_garbage() -> Iterator[list[object]]:
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield gc.garbage
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()


def _owner(obj: object) -> str | None:
    """``module.qualname`` of a function or class of ours, else None."""
    if isinstance(obj, type) or type(obj).__name__ == "function":
        module = getattr(obj, "__module__", "") or ""
        if module.split(".")[0] in _OURS:
            return f"{module}.{getattr(obj, '__qualname__', '?')}"
    return None


def test_transforms_leave_no_cycles_of_ours(saved_garbage: list[object]) -> None:
    for case in CASES:
        transform_source(case.read_text(), context=_context(case))
    gc.collect()
    ours = Counter(name for obj in saved_garbage if (name := _owner(obj)) is not None)
    assert not ours, f"reference cycles per transform (define these at module level): {dict(ours)}"


def test_the_check_sees_a_cycle(saved_garbage: list[object]) -> None:
    """The test above can fail: a class made inside a function of ours is found."""

    type("_Local", (), {"__module__": "codemods.example"})  # a class is a cycle (its __mro__)
    gc.collect()
    assert any(_owner(obj) is not None for obj in saved_garbage)
