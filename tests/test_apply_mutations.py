"""Property: ``apply`` on randomly damaged real V2 files never writes what does not parse.

Real V2 modules of the installed max are mutated as a careless edit, a bad
copy or another editor would (truncation, a NUL byte, a stray token, CRLF
line ends, tabs for spaces, a BOM anywhere). For every mutant: no crash, the
input is unchanged, every ``.py`` written parses with CPython's grammar, and
an input that does not parse gives exit 2 and no output for it.
"""

from __future__ import annotations

import ast
import hashlib
import tempfile
from pathlib import Path

import max as max_pkg
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from migrate_v3.apply import apply_paths

ARCHITECTURES = Path(list(max_pkg.__path__)[0]) / "pipelines" / "architectures"
#: a handful of small real V2 modules (each with V2 sites check reports)
SOURCES = [
    (ARCHITECTURES / rel).read_bytes()
    for rel in (
        "speculators_common/d2t.py",
        "kimik2_5/kimik2_5.py",
        "qwen2_5vl/qwen2_5vl.py",
        "olmo2/model.py",
        "eagle_llama3/eagle_llama3.py",
    )
]
TOKENS = [b")", b"(", b"]", b":", b"def ", b"'", b'"""', b"\\", b" = ", b"@", b"\n    ", b"\n\t", b"lambda", b"import", b",", b"."]


def parses(data: bytes) -> bool:
    try:
        compile(data, "<mutant>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


@st.composite
def mutants(draw: st.DrawFn) -> bytes:
    raw = draw(st.sampled_from(SOURCES))
    at = draw(st.integers(0, len(raw)))
    kind = draw(st.sampled_from(["truncate", "nul", "token", "crlf", "tabs", "bom"]))
    if kind == "truncate":
        return raw[:at]
    if kind == "nul":
        return raw[:at] + b"\x00" + raw[at:]
    if kind == "token":
        return raw[:at] + draw(st.sampled_from(TOKENS)) + raw[at:]
    if kind == "crlf":
        return raw[:at] + raw[at:].replace(b"\n", b"\r\n")
    if kind == "tabs":
        return raw[:at] + raw[at:].replace(b"    ", b"\t")
    return raw[:at] + b"\xef\xbb\xbf" + raw[at:]


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutants())
def test_mutated_v2_files_never_give_unparsable_output(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "src" / "mutant.py"
        source.parent.mkdir()
        source.write_bytes(data)
        digest = hashlib.sha256(data).hexdigest()
        out = Path(tmp) / "out"
        report = apply_paths([source], out=out)
        assert hashlib.sha256(source.read_bytes()).hexdigest() == digest
        written = sorted(out.rglob("*.py")) if out.exists() else []
        assert all(parses(p.read_bytes()) for p in written), [p.name for p in written]
        event("input parses" if parses(data) else "input does not parse")
        event(f"{len(written)} file(s) written")
        if not parses(data):
            assert report.exit_code == 2 and written == []
            assert len([f for f in report.files if f.error]) == 1
