"""Every finding ``check`` labels ``auto`` is carried out by ``apply``, for every rule code.

A finding's site is the statement holding its line: a simple statement's
lines, a compound statement's header (``class X(Module):``, with its
decorators), or, for MV322 (whose fix adds ``super().__init__()`` to the
body), the whole function. The output lines that came from the site are found
with difflib. A site is carried out when its lines changed (or went away) and
no ``TODO(migrate-v3)`` of the finding's code stands on them or in the comment
lines right above them. Checked on every fixture and on real V2 packages of
the installed max.
"""

from __future__ import annotations

import ast
import difflib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemods.residual import statements
from migrate_v3.apply import apply_paths
from migrate_v3.findings import Finding
from migrate_v3.knowledge.layers import FUNCTIONS
from migrate_v3.pipeline import transform_source
from migrate_v3.rules import RULES, Fix
from migrate_v3.scan import scan_source
from tests.test_codemods import _context

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

#: Codes whose fix lands in the body of the block the finding names.
_SITE_IS_BLOCK = frozenset({"MV322"})
#: Codes about a name that V3 spells and uses the same way (a ``Module`` base, a
#: ``TensorValue`` annotation...): rewriting its import is the whole fix, so the
#: site itself may stay as it was, provided ``check`` no longer reports it there.
_IMPORT_ONLY = frozenset({"MV320", "MV330"})


def _import_only(finding: Finding) -> bool:
    symbol = finding.message.split(" ", 1)[0]
    return finding.code in _IMPORT_ONLY or (finding.code == "MV340" and symbol in FUNCTIONS)


def _innermost(stmts: list[ast.stmt], line: int) -> ast.stmt | None:
    best: ast.stmt | None = None
    for node in stmts:
        if node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or (node.end_lineno or 0) - node.lineno < (best.end_lineno or 0) - best.lineno:
                best = node
    return best


def site_lines(stmts: list[ast.stmt], finding: Finding) -> tuple[int, int]:
    """(first, last) 1-based source lines of the finding's site."""
    node = _innermost(stmts, finding.line)
    if node is None:
        return finding.line, finding.line
    body = getattr(node, "body", None)
    if not (isinstance(body, list) and body and isinstance(body[0], ast.stmt)):
        return node.lineno, node.end_lineno or node.lineno
    if finding.code in _SITE_IS_BLOCK:
        return node.lineno, node.end_lineno or node.lineno
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    header_end = max(body[0].lineno - 1, node.lineno)
    return (first, header_end) if first <= finding.line <= header_end else (finding.line, finding.line)


def _subject(finding: Finding) -> str:
    """The name a finding is about: ``import X: ...`` -> X, ``ops.relu -> F.relu`` -> ops.relu."""
    words = finding.message.split()
    word = words[1] if words[0] == "import" and len(words) > 1 else words[0]
    return word.rstrip(":").split("(")[0]


def not_carried_out(
    source: str, output: str, findings: list[Finding], rewrites: list[Finding]
) -> Iterator[tuple[Finding, str]]:
    """(finding, why) for each ``auto`` finding of ``source`` that ``output`` does not carry
    out; ``rewrites``: what apply says it rewrote (original lines)."""
    auto = [f for f in findings if RULES[f.code].fix is Fix.AUTO]
    if not auto:
        return
    old, new = source.splitlines(), output.splitlines()
    stmts = statements(ast.parse(source))
    opcodes = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    still = {(f.line, f.code, f.message) for f in scan_source(output).findings}
    rewritten = {(r.line, r.code) for r in rewrites}
    for f in auto:
        first, last = site_lines(stmts, f)
        changed = False
        out_lines: set[int] = set()
        for tag, i1, i2, j1, j2 in opcodes:
            lo, hi = max(i1, first - 1), min(i2, last)  # its overlap with the site (0-based, half open)
            if tag == "equal":
                out_lines.update(range(j1 + lo - i1, j1 + hi - i1))
            elif lo < hi or (tag == "insert" and first <= i1 < last):
                changed = True
                out_lines.update(range(j1, j2))
        if any((j + 1, f.code, f.message) in still for j in out_lines):
            yield f, "still reported by check"
            continue
        # unchanged is fine when the V3 spelling is the V2 one: apply says it rewrote it there
        if not changed and not _import_only(f) and (f.line, f.code) not in rewritten:
            yield f, "site unchanged"
            continue
        if out_lines:
            j = min(out_lines) - 1
            while j >= 0 and new[j].lstrip().startswith("#"):
                out_lines.add(j)
                j -= 1
        subject = _subject(f)
        if any(f"TODO(migrate-v3): {f.code} " in new[j] and subject in new[j] for j in out_lines):
            yield f, "TODO left"


def _report(name: str, source: str, output: str, rewrites: list[Finding]) -> list[str]:
    return [
        f"{name}:{f.line}: {f.code} {f.message} ({why})"
        for f, why in not_carried_out(source, output, scan_source(source).findings, rewrites)
    ]


def _parses(path: Path) -> bool:
    try:
        ast.parse(path.read_text())
    except SyntaxError:
        return False
    return True


#: Every codemod fixture input and check fixture (less the one that does not parse, on purpose).
CASES = sorted(p for p in [*FIXTURES.glob("*/*.input.py"), *(FIXTURES / "check").glob("*.py")] if _parses(p))


@pytest.mark.parametrize("case", CASES, ids=[f"{p.parent.name}/{p.name}" for p in CASES])
def test_fixture_auto_findings_are_applied(case: Path) -> None:
    source = case.read_text()
    result = transform_source(source, path=str(case), context=_context(case))
    assert _report(case.name, source, result.code, result.findings) == []


#: Real V2 packages of the installed max 26.7: decoders (dense, MLA, hybrid conv),
#: encoders, vision-language models, distributed variants and pipeline models.
REAL = [
    "bert", "deepseekV2", "gemma3", "granite", "internvl", "lfm2", "llama3", "mistral", "mpnet", "olmo2",
    "phi3", "qwen2", "qwen2_5vl", "qwen3", "umt5",
]


def test_real_packages_auto_findings_are_applied(tmp_path: Path) -> None:
    import max as max_pkg

    architectures = Path(list(max_pkg.__path__)[0]) / "pipelines" / "architectures"
    for name in REAL:
        shutil.copytree(architectures / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    report = apply_paths([tmp_path / name for name in REAL], out=tmp_path / "out")
    problems: list[str] = []
    checked = 0
    for file in report.files:
        assert file.error is None, file.error
        source = Path(file.source).read_text()
        problems += _report(Path(file.source).relative_to(tmp_path).as_posix(), source, Path(file.dest).read_text(), file.findings)
        checked += sum(1 for f in scan_source(source).findings if RULES[f.code].fix is Fix.AUTO)
    assert checked >= 500
    assert problems == []
