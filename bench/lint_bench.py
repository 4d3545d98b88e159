"""ruff's import-order and unused-name findings in every V2 package of the installed max, before and after ``apply``.

    python bench/lint_bench.py

Applies to a copy (official ``*_modulev3`` ports deleted, as in
``apply_bench.py survey``), then runs ``ruff check --isolated --select
I,F401,F841`` over the V2 inputs and over the migrated outputs and prints the
count per code, and each file whose output has more findings than its input.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from apply_bench import _copy, v2_packages  # noqa: E402

from migrate_v3.apply import apply_paths  # noqa: E402
from migrate_v3.pipeline import TransformContext  # noqa: E402

SELECT = "I,F401,F841"


def _ruff(paths: list[Path], cwd: Path) -> list[dict[str, object]]:
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", SELECT, "--output-format", "json", *map(str, paths)],
        cwd=cwd, capture_output=True, text=True,
    )
    findings: list[dict[str, object]] = json.loads(proc.stdout)
    return findings


def _per_file(findings: list[dict[str, object]], tree: Path, suffix: str) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for f in findings:
        parts = list(Path(str(f["filename"])).relative_to(tree).parts)
        parts[0] = parts[0].removesuffix(suffix)
        out[str(Path(*parts)), str(f["code"])] += 1
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tree = _copy(Path(tmp), drop_ports=True)
        packages = v2_packages(tree)
        apply_paths(packages, jobs=2, context=TransformContext(positions=False))
        outputs = sorted(tree.glob("*_modulev3"))
        before, after = _ruff(packages, tree), _ruff(outputs, tree)
        print(f"{len(packages)} V2 packages, {len(outputs)} migrated")
        for name, found in (("inputs", before), ("outputs", after)):
            counts = Counter(str(f["code"]) for f in found)
            print(f"  {name:8s} {sum(counts.values()):4d}  {dict(sorted(counts.items()))}")
        mine, theirs = _per_file(after, tree, "_modulev3"), _per_file(before, tree, "")
        for (path, code), n in sorted(mine.items()):
            if n > theirs[path, code]:
                print(f"  more in the output: {path} {code} +{n - theirs[path, code]}")


if __name__ == "__main__":
    main()
