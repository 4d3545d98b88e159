"""The C speed-ups (migrate_v3/_speedups.c) return what their Python twins in scan.py return.

CI builds the module (the machines have a C compiler), so these tests do not
skip when it is missing: they fail, because then ``check`` runs the slow path.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migrate_v3 import scan

ROOT = Path(__file__).resolve().parent.parent


def _speedups():  # type: ignore[no-untyped-def]
    if scan._speedups is None:
        pytest.fail("migrate_v3._speedups is not built: `pip install -e .` builds it (needs a C compiler)")
    return scan._speedups


def test_built_from_the_current_source() -> None:
    source = (ROOT / "migrate_v3" / "_speedups.c").read_bytes()
    assert _speedups().SOURCE_SHA256 == hashlib.sha256(source).hexdigest(), (
        "the built module is stale: run `pip install -e .` again"
    )
    assert f"#define SPEEDUPS_API {scan._SPEEDUPS_API}\n".encode() in source


def test_a_build_of_another_version_is_not_used() -> None:
    """An old build (a stale wheel or build/ directory) may lack functions or differ in them."""
    import types

    stale = types.ModuleType("migrate_v3._speedups")
    stale.API = scan._SPEEDUPS_API - 1  # type: ignore[attr-defined]
    assert scan._current(stale) is None
    assert scan._current(types.ModuleType("migrate_v3._speedups")) is None  # older than API itself
    assert scan._current(_speedups()) is _speedups()


def _max_sources() -> Iterator[str]:
    import importlib.util

    spec = importlib.util.find_spec("max")
    assert spec is not None and spec.submodule_search_locations, "max is not installed"
    for directory, _, names in os.walk(list(spec.submodule_search_locations)[0]):
        for name in sorted(names):
            if name.endswith((".py", ".pyi")):
                yield (Path(directory) / name).read_bytes().decode("utf-8", "replace")


@pytest.mark.needs_max
def test_scan_of_the_whole_max_tree_is_the_same_with_and_without_speedups(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = list(_max_sources())
    fast = [scan.scan_raw(text) for text in texts]
    monkeypatch.setattr(scan, "_speedups", None)
    scan._import_parts.cache_clear()  # it holds what the C version returned
    slow = [scan.scan_raw(text) for text in texts]
    scan._import_parts.cache_clear()
    assert len(texts) > 1000
    assert sum(len(findings) for _, findings in fast) > 10000  # the comparison covers real findings
    assert [i for i, (a, b) in enumerate(zip(fast, slow, strict=True)) if a != b] == []


# Text made of what the primitives react to: quotes, comments, escapes, dots,
# blanks, line ends, identifier characters (ASCII and not) and the names.
NAMES = ("ops", "nn", "F", "Linear", "été", "x1")
_PIECES = st.sampled_from(
    ['"', "'", '"""', "'''", "#", "\\", ".", " ", "\t", "\n", "(", "_", "a", "1", "é", "µ", "中", "😀", "\x00"]
    + list(NAMES)
)
TEXT = st.lists(_PIECES, max_size=60).map("".join)


@settings(max_examples=500, deadline=None)
@given(TEXT)
def test_triple_quoted(text: str) -> None:
    python = scan._triple_quoted_py(text)
    assert _speedups().triple_quoted(text) == (python.starts, python.ends)


@settings(max_examples=500, deadline=None)
@given(TEXT, st.data())
def test_in_line_string_or_comment(text: str, data: st.DataObject) -> None:
    pos = data.draw(st.integers(min_value=0, max_value=len(text)))
    assert _speedups().in_line_string_or_comment(text, pos) == scan._in_line_string_or_comment(text, pos)


@settings(max_examples=1000, deadline=None)
@given(TEXT, st.lists(st.sampled_from(NAMES), unique=True), st.data())
def test_use_groups(text: str, names: list[str], data: st.DataObject) -> None:
    strings = scan._triple_quoted_py(text)
    imports = scan._Spans()
    # Import statements: any sorted, disjoint spans will do.
    cuts = sorted(data.draw(st.lists(st.integers(min_value=0, max_value=len(text)), max_size=6, unique=True)))
    for start, end in zip(cuts[::2], cuts[1::2], strict=False):
        imports.add(start, end)
    relevant = tuple(sorted(names))
    expected = scan._code_use_groups(text, relevant, strings, imports)
    got = _speedups().use_groups(text, relevant, strings.starts, strings.ends, imports.starts, imports.ends)
    assert got == expected and list(got) == list(expected)  # the same groups, in the same order


def test_use_groups_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError):
        _speedups().use_groups("x", ("x",), [], [], [], None)
    with pytest.raises(TypeError):
        _speedups().use_groups("x", (1,), [], [], [], [])
    with pytest.raises(IndexError):
        _speedups().in_line_string_or_comment("x", 5)


# Import statements, well formed or not: keywords, module paths, parentheses,
# continuations, comments and separators in any order.
IMPORT_TEXT = st.lists(
    st.sampled_from(
        ["from", "import", " ", "  ", "\t", ".", "max", "nn", "x", "é", "(", ")", ",", "as", "\\", "\n", "#", ";", '"""', "'"]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=1500, deadline=None)
@given(IMPORT_TEXT)
def test_import_statements(text: str) -> None:
    strings = scan._triple_quoted_py(text)
    expected = scan._import_statements(text, strings)
    assert _speedups().import_statements(text, strings.starts, strings.ends) == expected


def test_import_statements_edge_cases() -> None:
    """The regex's own corner cases, each checked against the Python twin and pinned."""
    cases = {
        "from  import x": [],  # an empty module: not max, not relative
        "from .  import (a,\n b)\n": [(0, 22, ".", "(a,\n b)", 15)],
        "import a, \\\n  max.nn\n": [(0, 20, None, "a, \\\n  max.nn", 7)],
        "from max import a;b": [(0, 17, "max", "a", 16)],
        "  from max.nn import Linear # c": [(0, 28, "max.nn", "Linear ", 21)],
        "from max import (a\n": [(0, 18, "max", "(a", 16)],
        "import (max\n)": [(0, 11, None, "(max", 7)],  # parentheses only after `from`
        '"""\nimport max\n"""\nimport max.nn\n': [(19, 32, None, "max.nn", 26)],  # the first is a docstring
    }
    for text, expected in cases.items():
        strings = scan._triple_quoted_py(text)
        assert scan._import_statements(text, strings) == expected, text
        assert _speedups().import_statements(text, strings.starts, strings.ends) == expected, text


@settings(max_examples=1500, deadline=None)
@given(
    st.one_of(st.none(), st.sampled_from(["max", "max.nn", ".", "..x", "", "é."])),
    st.lists(st.sampled_from([" ", "\t", "\n", "\\", ",", "(", ")", "#", "as", "x", "max.nn", "*", "é", "\u3000", "y.z"]), max_size=25).map("".join),
)
def test_import_parts(module: str | None, body: str) -> None:
    assert _speedups().import_parts(module, body) == scan._import_parts_py(module, body)


@settings(max_examples=1000, deadline=None)
@given(TEXT, st.lists(st.sampled_from([".", "..", "nn", "a.", "é", "😀", "'''", "ops.x"]), min_size=1, max_size=5))
def test_find_all(text: str, needles: list[str]) -> None:
    assert _speedups().find_all(text, tuple(needles)) == scan._find_all_py(text, tuple(needles))


@settings(max_examples=1000, deadline=None)
@given(TEXT, st.data())
def test_located(text: str, data: st.DataObject) -> None:
    sites = data.draw(
        st.lists(
            st.tuples(
                st.integers(min_value=0, max_value=len(text)),
                st.sampled_from(["MV310", "MV340", "MV370"]),
                st.sampled_from(["a", "b"]),
            ),
            max_size=12,
        )
    )
    sites.sort()
    assert _speedups().located(text, sites) == scan._located_py(text, sites, {})


def test_find_all_and_located_reject_bad_arguments() -> None:
    with pytest.raises(ValueError):
        _speedups().find_all("x", ("",))
    with pytest.raises(ValueError):
        _speedups().located("ab", [(1, "MV310", "m"), (0, "MV310", "m")])  # not sorted
    with pytest.raises(TypeError):
        _speedups().located("ab", [(0, "MV310")])


@settings(max_examples=1000, deadline=None)
@given(TEXT, st.data())
def test_line_cols(text: str, data: st.DataObject) -> None:
    offsets = sorted(data.draw(st.lists(st.integers(min_value=0, max_value=len(text)), max_size=10)))
    position = scan._Positions(text)
    assert _speedups().line_cols(text, offsets) == [position(at) for at in offsets]
    if len(offsets) > 1 and offsets[0] != offsets[-1]:
        with pytest.raises(ValueError):
            _speedups().line_cols(text, offsets[::-1])
