"""Migrated code passes ``ruff check --select I,F401,F841`` as well as its input did.

Every codemod fixture pair: the expected output (which ``test_codemods`` proves
is what apply writes) has no more import-order (I001), unused-import (F401)
or unused-local (F841) findings than the input, with ruff's defaults
(``--isolated``: no project configuration). ``bench/lint_bench.py`` measures
the same over every V2 package of the installed max.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from migrate_v3.pipeline import transform_source

ROOT = Path(__file__).resolve().parent.parent
PAIRS = sorted((ROOT / "fixtures").glob("*/*.input.py"))
SELECT = "I,F401,F841"
#: Deliberate: a local bound by a call stays even when the rewrite left it unused
#: (the call may have effects), so ruff sees one more F841 there.
ALLOWED = {"fixtures/dead_locals/dropped_args.input.py": {"F841": 1}}


def _findings(paths: list[Path]) -> dict[str, Counter[str]]:
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", SELECT, "--output-format", "json", *map(str, paths)],
        capture_output=True, text=True, timeout=300,
    )
    out: dict[str, Counter[str]] = {str(p): Counter() for p in paths}
    for f in json.loads(proc.stdout):
        out[str(Path(f["filename"]))][f["code"]] += 1
    return out


def test_outputs_have_no_more_import_and_unused_findings_than_inputs() -> None:
    expected = [p.with_name(p.name.replace(".input.py", ".expected.py")) for p in PAIRS]
    found = _findings([*PAIRS, *expected])
    worse = {
        str(i.relative_to(ROOT)): (dict(found[str(i)]), dict(found[str(e)]))
        for i, e in zip(PAIRS, expected, strict=True)
        if any(
            found[str(e)][code] > found[str(i)][code] + ALLOWED.get(str(i.relative_to(ROOT)), {}).get(code, 0)
            for code in found[str(e)]
        )
    }
    assert worse == {}


def test_a_removed_last_name_leaves_no_dangling_line(tmp_path: Path) -> None:
    """``TensorValue`` removed from a one-name-per-line import: the trailing comma and line break stay."""
    source = (
        "from max.graph import (\n    DeviceRef,\n    TensorType,\n    TensorValue,\n)\n"
        "from max.nn import Module\n\n\nclass A(Module):\n"
        "    def __call__(self, x: TensorValue) -> TensorValue:\n        return x\n\n\nd = TensorType(None, [], DeviceRef.CPU())\n"
    )
    code = transform_source(source).code
    assert "from max.graph import (\n    DeviceRef,\n    TensorType,\n)\n" in code
    (tmp_path / "in.py").write_text(source)
    (tmp_path / "out.py").write_text(code)
    found = _findings([tmp_path / "in.py", tmp_path / "out.py"])
    assert found[str(tmp_path / "out.py")] == Counter()
