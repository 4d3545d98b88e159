"""``apply`` over every V2 architecture package of the installed max, on a copy.

    python bench/apply_bench.py survey   # errors / parse / import / TODO statistics
    python bench/apply_bench.py timing   # apply vs plain libcst parse+print, -j 1 vs -j 2
    python bench/apply_bench.py snapshot DIR   # apply -j 2 outputs + reports saved under DIR
    python bench/apply_bench.py compare [DIR]  # outputs + reports: fast path vs libcst's
                                               # transformer (and vs a snapshot DIR)

Both work on a fresh copy of ``max/pipelines/architectures`` (the installed
package is never written). ``survey`` deletes the official ``*_modulev3``
ports from the copy first, so every V2 package gets its own migrated variant
and sibling imports resolve to migrated code; ``timing`` measures in one run
so the machine load is shared by the numbers it compares.
"""

from __future__ import annotations

import ast
import filecmp
import importlib
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from migrate_v3.apply import apply_paths  # noqa: E402
from migrate_v3.pipeline import TransformContext  # noqa: E402


def _architectures() -> Path:
    import max  # noqa: PLC0415 - the bench needs the real package

    return Path(list(max.__path__)[0]) / "pipelines" / "architectures"


def _copy(dest: Path, *, drop_ports: bool) -> Path:
    tree = dest / "archcopy"
    shutil.copytree(_architectures(), tree, ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "__init__.py").write_text("")  # no registry side effects on import
    if drop_ports:
        for port in tree.glob("*_modulev3"):
            shutil.rmtree(port)
    return tree


def v2_packages(tree: Path) -> list[Path]:
    return sorted(
        p for p in tree.iterdir() if p.is_dir() and (p / "__init__.py").exists() and not p.name.endswith("_modulev3")
    )


def survey() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tree = _copy(Path(tmp), drop_ports=True)
        pkgs = v2_packages(tree)
        t0 = time.perf_counter()
        report = apply_paths(pkgs, jobs=2, context=TransformContext(positions=False))
        elapsed = time.perf_counter() - t0
        failed_pkgs = {Path(f.source).relative_to(tree).parts[0] for f in report.files if f.error}
        outputs = sorted(tree.glob("*_modulev3"))
        parse_fail = []
        for out in outputs:
            for py in out.rglob("*.py"):
                try:
                    ast.parse(py.read_text())
                except SyntaxError:
                    parse_fail.append(str(py))
        sys.path.insert(0, tmp)
        import_ok, import_fail = [], []
        for out in outputs:
            try:
                importlib.import_module(f"archcopy.{out.name}")
                import_ok.append(out.name)
            except Exception as exc:  # noqa: BLE001 - a survey counts failures
                import_fail.append((out.name, f"{type(exc).__name__}: {exc}".splitlines()[0][:160]))
        todos = Counter(t.code for f in report.files for t in f.todos)
        kinds = Counter((t.code, t.message.split(":")[0][:60]) for f in report.files for t in f.todos)
        print(f"V2 architecture packages: {len(pkgs)}  (apply wall time {elapsed:.1f}s, -j 2)")
        print(f"packages without a file error: {len(pkgs) - len(failed_pkgs)}; file errors: "
              f"{sum(1 for f in report.files if f.error)}")
        for f in report.files:
            if f.error:
                print("  error:", f.error)
        print(f"outputs written: {len(outputs)}; files: {sum(1 for o in outputs for _ in o.rglob('*.py'))}; "
              f"files that do not parse: {len(parse_fail)}")
        print(f"outputs that import: {len(import_ok)} / {len(outputs)}")
        for name, why in import_fail:
            print(f"  import failed: {name}: {why}")
        print(f"total TODOs: {sum(todos.values())}; by rule: {dict(todos.most_common())}")
        print("five most frequent TODO kinds:")
        for (code, what), n in kinds.most_common(5):
            print(f"  {n:5d}  {code} {what}")
        changed = [f for f in report.files if f.changed]
        rewrites = sum(len(f.findings) for f in report.files)
        print(f"files changed: {len(changed)}; rewrites: {rewrites}; "
              f"auto share: {100.0 * rewrites / max(1, rewrites + sum(todos.values())):.1f}%")


def timing() -> None:
    import libcst as cst

    with tempfile.TemporaryDirectory() as tmp:
        tree = _copy(Path(tmp), drop_ports=False)
        pkgs = v2_packages(tree)
        files = [p for pkg in pkgs for p in pkg.rglob("*.py")]
        sources = [p.read_text() for p in files]
        out1, out2 = Path(tmp) / "o1", Path(tmp) / "o2"

        def baseline() -> tuple[float, float]:
            t, c = time.perf_counter(), time.process_time()
            for src in sources:
                cst.parse_module(src).code  # noqa: B018 - print is the point
            return time.perf_counter() - t, time.process_time() - c

        def run(jobs: int, out: Path, positions: bool) -> tuple[float, float]:
            if out.exists():
                shutil.rmtree(out)
            t, c = time.perf_counter(), time.process_time()
            apply_paths(pkgs, out=out, jobs=jobs, context=TransformContext(positions=positions))
            return time.perf_counter() - t, time.process_time() - c

        # Wall time and (in-process) CPU time: CPU is the steadier number on a
        # shared machine; -j 2 spends its CPU in workers, so only wall counts there.
        base = baseline()
        j1 = run(1, out1, positions=False)
        j1p = run(1, out1, positions=True)
        j2 = run(2, out2, positions=False)
        base2 = baseline()
        bw, bc = (base[0] + base2[0]) / 2, (base[1] + base2[1]) / 2
        print(f"{len(files)} files, {sum(map(len, sources)) / 1e6:.1f} MB")
        print(f"libcst parse+print: wall {base[0]:.1f}s / {base2[0]:.1f}s, cpu {base[1]:.1f}s / {base2[1]:.1f}s")
        print(f"apply -j 1 (no positions): wall {j1[0]:.1f}s ({j1[0] / bw:.2f}x), cpu {j1[1]:.1f}s ({j1[1] / bc:.2f}x)")
        print(f"apply -j 1 (with positions): wall {j1p[0]:.1f}s ({j1p[0] / bw:.2f}x), cpu {j1p[1]:.1f}s ({j1p[1] / bc:.2f}x)")
        print(f"apply -j 2 (no positions): wall {j2[0]:.1f}s, gain vs -j 1: {j1[0] / j2[0]:.2f}x")

def _outputs(dest: Path, *, positions: bool = True, precise: bool = False, jobs: int = 2) -> None:
    """apply over every V2 package (ports kept, as in ``timing``): tree + reports under ``dest``."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = _copy(Path(tmp), drop_ports=False)
        report = apply_paths(
            v2_packages(tree),
            out=dest / "tree",
            jobs=jobs,
            context=TransformContext(positions=positions, precise_names=precise),
        )

        def rel(path: str) -> str:
            return str(Path(path).relative_to(tree)) if path.startswith(str(tree)) else path

        files = []
        for f in sorted(report.files, key=lambda f: f.source):
            data = f.to_json()
            data["source"] = rel(f.source)
            data["dest"] = str(Path(f.dest).relative_to(dest)) if f.dest else ""
            data["error"] = f.error.replace(str(tree), "<tree>") if f.error else None
            files.append(data)
        (dest / "report.json").write_text(json.dumps({"files": files, "errors": report.errors}, indent=1))


def snapshot(dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    t = time.perf_counter()
    _outputs(dest)
    print(f"snapshot written to {dest} ({time.perf_counter() - t:.1f}s)")


def differences(a: Path, b: Path) -> list[str]:
    """Every output file or report entry that differs between two snapshots."""
    out: list[str] = []
    files_a = {p.relative_to(a) for p in (a / "tree").rglob("*") if p.is_file()}
    files_b = {p.relative_to(b) for p in (b / "tree").rglob("*") if p.is_file()}
    out += [f"only in {a}: {p}" for p in sorted(files_a - files_b)]
    out += [f"only in {b}: {p}" for p in sorted(files_b - files_a)]
    out += [f"differs: {p}" for p in sorted(files_a & files_b) if not filecmp.cmp(a / p, b / p, shallow=False)]
    ra = json.loads((a / "report.json").read_text())
    rb = json.loads((b / "report.json").read_text())
    by_a = {f["source"]: f for f in ra["files"]}
    by_b = {f["source"]: f for f in rb["files"]}
    out += [f"report differs: {k}" for k in sorted(by_a.keys() | by_b.keys()) if by_a.get(k) != by_b.get(k)]
    if ra["errors"] != rb["errors"]:
        out.append("report errors differ")
    return out


def _reference(on: bool) -> None:
    """Switch ``transform_source`` to libcst's transformer + PositionProvider (workers inherit it)."""
    import migrate_v3.pipeline as pipeline  # noqa: PLC0415

    os.environ["MIGRATE_V3_REFERENCE_ENGINE"] = "1" if on else "0"
    pipeline.REFERENCE_ENGINE = on


def compare(snap: Path | None) -> None:
    """The fast path's outputs and reports against the reference path's (and a snapshot's)."""
    with tempfile.TemporaryDirectory() as tmp:
        ref, mine = Path(tmp) / "reference", Path(tmp) / "now"
        t = time.perf_counter()
        for dest, reference in ((ref, True), (mine, False)):
            dest.mkdir()
            _reference(reference)
            _outputs(dest)
        _reference(False)
        n = sum(1 for p in (mine / "tree").rglob("*.py"))
        failed = False
        for other, what in ((ref, "libcst's transformer"), (snap, str(snap))):
            if other is None:
                continue
            diffs = differences(other, mine)
            print(f"{n} output .py files and their reports vs {what}: {len(diffs)} differences")
            for d in diffs[:50]:
                print("  ", d)
            failed = failed or bool(diffs)
        print(f"({time.perf_counter() - t:.1f}s)")
        if failed:
            raise SystemExit(1)


if __name__ == "__main__":
    try:
        mode = sys.argv[1] if len(sys.argv) > 1 else "survey"
        if mode == "snapshot":
            snapshot(Path(sys.argv[2]))
        elif mode == "compare":
            compare(Path(sys.argv[2]) if len(sys.argv) > 2 else None)
        else:
            {"survey": survey, "timing": timing}[mode]()
    except Exception:
        traceback.print_exc()
        raise SystemExit(1) from None
