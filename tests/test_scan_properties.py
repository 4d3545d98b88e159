"""Properties of the scanner that no list of fixtures can pin down."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from migrate_v3.scan import scan_source

V2_LINES = ["from max.nn import Linear, LayerList", "from max.graph import TensorValue, ops", "from max.nn.layer import Module"]


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_never_crashes(text: str) -> None:
    scan_source(text)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(V2_LINES), st.sampled_from(['"""{}"""', "'''{}'''", "# {}", "x = '{}'", 'x = "{}"']))
def test_v2_code_inside_strings_or_comments_is_not_v2(line: str, wrapper: str) -> None:
    scan = scan_source(wrapper.format(line) + "\n")
    assert not scan.v2 and not scan.findings


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(V2_LINES), st.integers(min_value=0, max_value=8))
def test_indentation_and_position_do_not_hide_imports(line: str, blank_lines: int) -> None:
    source = "\n" * blank_lines + "if True:\n    " + line + "\n"
    scan = scan_source(source)
    assert scan.v2
    assert {f.line for f in scan.findings} == {blank_lines + 2}
