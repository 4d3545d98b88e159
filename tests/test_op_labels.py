"""check and apply give every ``ops`` call the same rule code, so the fix label agrees.

Both ask ``knowledge.symbols.op_call_code`` (check with the call's text,
apply with its nodes): ``ops.min(x, 0)`` is an elementwise minimum, the same
in F, so check says ``MV370 [auto]`` and apply rewrites it with no TODO; an
axis computed at run time is ``MV371 [manual]`` in check and a TODO in apply.
"""

from __future__ import annotations

import pytest

from migrate_v3.knowledge.symbols import op_call_code
from migrate_v3.pipeline import transform_source
from migrate_v3.rules import RULES, Fix
from migrate_v3.scan import scan_source

HEADER = "from max.graph import TensorValue, ops\n\n\ndef f(x: TensorValue, axis: int | None, pick) -> TensorValue:\n"
CALLS = {
    "ops.min(x, 0)": "MV370",
    "ops.max(x, 0.0)": "MV370",
    "ops.max(x)": "MV370",
    "ops.max(x, axis=None)": "MV370",
    "ops.min(x, axis=axis)": "MV370",
    "ops.min(x, axis=-2)": "MV370",
    "ops.max(x, None, 1)": "MV370",
    "ops.split(x, [2, 2], axis=-1)": "MV370",
    "ops.max(x, axis=pick(x))": "MV371",
    "ops.min(\n        x,\n        axis=pick(x),\n    )": "MV371",
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_check_and_apply_give_a_call_the_same_code(call: str) -> None:
    source = f"{HEADER}    return {call}\n"
    line = HEADER.count("\n") + 1
    checked = {f.code for f in scan_source(source).findings if f.line == line and f.code.startswith("MV37")}
    result = transform_source(source)
    applied = {f.code for f in result.findings if f.line == line and f.code.startswith("MV37")}
    todos = {t.code for t in result.todos if t.code.startswith("MV37")}
    assert checked == {CALLS[call]}
    if RULES[CALLS[call]].fix is Fix.AUTO:
        assert applied == checked and not todos  # rewritten, nothing left to do
    else:
        assert todos == checked and not applied  # left to a person, with a TODO


def test_no_rule_is_labelled_unsafe_without_an_unsafe_path() -> None:
    """``unsafe`` promises ``apply --unsafe-fixes`` fixes it; no codemod reads that flag."""
    assert [code for code, rule in RULES.items() if rule.fix is Fix.UNSAFE] == []


def test_op_call_code_reads_the_axis_wherever_it_is_passed() -> None:
    assert op_call_code("max", ["x", "0"], {}) == "MV370"  # y, not an axis
    assert op_call_code("max", ["x", "None", "f(x)"], {}) == "MV371"
    assert op_call_code("min", ["x"], {"axis": "f(x)"}) == "MV371"
    assert op_call_code("min", ["x"], {"axis": "cfg.axis"}) == "MV370"
