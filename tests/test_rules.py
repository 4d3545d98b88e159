"""Every rule's before/after example is taken from the fixtures (Fixit-style docs that cannot rot)."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrate_v3.rules import RULES, Fix

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _read(pattern: str) -> str:
    return "\n".join(p.read_text() for p in sorted(FIXTURES.rglob(pattern)))


INPUTS = _read("*.input.py") + _read("check/*.py")
EXPECTED = _read("*.expected.py")


@pytest.mark.parametrize("code", list(RULES))
def test_example_comes_from_fixtures(code: str) -> None:
    rule = RULES[code]
    assert rule.before in INPUTS, f"{code}: before-example not in any fixture input"
    assert rule.after in EXPECTED, f"{code}: after-example not in any expected fixture"


def test_codes_are_grouped_by_concern() -> None:
    for code, rule in RULES.items():
        assert code == rule.code and len(code) == 5 and code.startswith("MV3")
    # ``unsafe`` (fixed only by ``apply --unsafe-fixes``) has no rule while no codemod
    # has such a path: check must not promise a fix apply never makes (test_op_labels)
    assert {r.fix for r in RULES.values()} == {Fix.AUTO, Fix.MANUAL}
