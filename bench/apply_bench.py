"""``apply`` over every V2 architecture package of the installed max, on a copy.

    python bench/apply_bench.py survey   # errors / parse / import / TODO statistics
    python bench/apply_bench.py timing [N]  # apply vs plain libcst parse+print, -j 1 vs -j 2, best of N
    python bench/apply_bench.py snapshot DIR   # apply -j 2 outputs + reports saved under DIR
    python bench/apply_bench.py compare [DIR]  # outputs + reports: fast path vs libcst's
                                               # transformer (and vs a snapshot DIR)
    python bench/apply_bench.py instructions   # the timing ratio in instructions (valgrind):
                                               # what a shared, noisy machine cannot blur (~25 min)

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
import resource
import shutil
import statistics
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


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children (``-j`` workers)."""
    own = time.process_time()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own + kids.ru_utime + kids.ru_stime


def timing(rounds: int = 3) -> None:
    """apply vs libcst parse+print over the same files, ``rounds`` interleaved rounds.

    Each round measures the baseline, apply -j 1 as the CLI runs it by default
    (no rewrite positions: only ``--report`` prints them), with positions (as
    ``--report`` runs it) and apply -j 2, so every round's ratios share that moment's machine load;
    the summary gives each number's best round and the ratios of the bests.
    """
    import libcst as cst

    import codemods.base as base
    from codemods.base import fast_path_problem, libcst_version

    problem = fast_path_problem()
    if problem is not None:
        sys.exit(f"the fast path is unavailable: {problem}")
    with tempfile.TemporaryDirectory() as tmp:
        tree = _copy(Path(tmp), drop_ports=False)
        pkgs = v2_packages(tree)
        files = [p for pkg in pkgs for p in pkg.rglob("*.py")]
        sources = [p.read_text() for p in files]
        out = Path(tmp) / "out"

        def baseline() -> tuple[float, float]:
            t, c = time.perf_counter(), _cpu()
            for src in sources:
                cst.parse_module(src).code  # noqa: B018 - print is the point
            return time.perf_counter() - t, _cpu() - c

        def run(jobs: int, positions: bool, slow: bool = False) -> tuple[float, float]:
            if out.exists():
                shutil.rmtree(out)
            base._PROBLEM[:] = ["forced by the bench"] if slow else [None]
            t, c = time.perf_counter(), _cpu()
            apply_paths(pkgs, out=out, jobs=jobs, context=TransformContext(positions=positions))
            base._PROBLEM[:] = [None]
            return time.perf_counter() - t, _cpu() - c

        print(f"libcst {libcst_version()}; {len(files)} files, {sum(map(len, sources)) / 1e6:.1f} MB; {rounds} rounds; "
              f"CPU = this process + its -j workers")
        names = ["parse+print", "apply -j 1", "apply -j 1 --report", "apply -j 2", "apply -j 1 (slow path)"]
        results: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
        for r in range(rounds):
            load = os.getloadavg()[0]
            results[names[0]].append(baseline())
            results[names[1]].append(run(1, positions=False))
            results[names[2]].append(run(1, positions=True))
            results[names[3]].append(run(2, positions=False))
            results[names[4]].append(run(1, positions=False, slow=True))
            (bw, bc), (w, c), (wn, cn), (w2, c2), (_, cs) = (results[n][-1] for n in names)
            print(f"round {r + 1} (load {load:.2f} → {os.getloadavg()[0]:.2f}): parse+print wall {bw:.1f}s cpu {bc:.1f}s | "
                  f"apply -j1 wall {w:.1f}s ({w / bw:.2f}x) cpu {c:.1f}s ({c / bc:.2f}x) | "
                  f"--report cpu {cn:.1f}s ({cn / bc:.2f}x) | -j2 wall {w2:.1f}s ({w / w2:.2f}x faster), cpu {c2:.1f}s | "
                  f"slow path cpu {cs:.1f}s ({cs / bc:.2f}x)",
                  flush=True)
        best = {n: (min(w for w, _ in v), min(c for _, c in v)) for n, v in results.items()}
        bw, bc = best[names[0]]
        print(f"best of {rounds}:")
        for n in names:
            w, c = best[n]
            print(f"  {n:26s} wall {w:5.1f}s ({w / bw:.2f}x)  cpu {c:5.1f}s ({c / bc:.2f}x)")
        print(f"  -j 2 wall-time gain over -j 1: {best[names[1]][0] / best[names[3]][0]:.2f}x")
        # each round's ratio shares that round's load: their median is the steadier number
        for n in names[1:3]:
            ratios = sorted(c / b for (_, c), (_, b) in zip(results[n], results[names[0]], strict=True))
            print(f"  {n:26s} cpu ratio per round: {', '.join(f'{r:.2f}x' for r in ratios)}; "
                  f"median {statistics.median(ratios):.2f}x")


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


def _mode(reference: bool = False, prefilters: bool = True) -> None:
    """Switch ``transform_source`` to libcst's transformer + PositionProvider, and the
    text prefilters off or on (through the environment too: ``-j`` workers inherit it)."""
    import codemods.base as base  # noqa: PLC0415
    import migrate_v3.pipeline as pipeline  # noqa: PLC0415

    os.environ["MIGRATE_V3_REFERENCE_ENGINE"] = "1" if reference else "0"
    os.environ["MIGRATE_V3_NO_PREFILTERS"] = "0" if prefilters else "1"
    pipeline.REFERENCE_ENGINE = reference
    base.PREFILTERS = prefilters


def compare(snap: Path | None) -> None:
    """The fast path's outputs and reports against libcst's transformer and
    PositionProvider, against the fast path with every text prefilter off
    (every codemod parses and walks every file it may run on), and optionally
    against a snapshot."""
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        runs = {
            "fast": {},
            "libcst's transformer": {"reference": True},
            "no prefilters": {"prefilters": False},
        }
        dirs = {}
        for name, mode in runs.items():
            dirs[name] = Path(tmp) / name.replace(" ", "_").replace("'", "")
            dirs[name].mkdir()
            _mode(**mode)
            _outputs(dirs[name])
        _mode()
        mine = dirs["fast"]
        n = sum(1 for p in (mine / "tree").rglob("*.py"))
        others = [(dirs[name], name) for name in runs if name != "fast"]
        if snap is not None:
            others.append((snap, str(snap)))
        failed = False
        for other, what in others:
            diffs = differences(other, mine)
            print(f"{n} output .py files and their reports vs {what}: {len(diffs)} differences")
            for d in diffs[:50]:
                print("  ", d)
            failed = failed or bool(diffs)
        print(f"({time.perf_counter() - t:.1f}s)")
        if failed:
            raise SystemExit(1)


def _workload(what: str, tree: Path) -> None:
    """One side of ``instructions``, in a process of its own: ``start`` imports what both import."""
    import libcst as cst

    pkgs = v2_packages(tree)
    if what == "parse+print":
        for src in (p for pkg in pkgs for p in pkg.rglob("*.py")):
            cst.parse_module(src.read_text()).code  # noqa: B018 - print is the point
    elif what == "apply":
        apply_paths(pkgs, out=tree.parent / "out", jobs=1, context=TransformContext(positions=False))


def instructions() -> None:
    """``apply -j 1`` over libcst's parse+print of the same files, counted in instructions.

    Each side runs under valgrind's callgrind in a process of its own; the
    instructions of a process that only starts and imports (``start``) are
    taken off both. CPU seconds on a shared machine vary by 30% from round to
    round; instruction counts do not (they are not time: the native parser
    retires more instructions per cycle than the interpreter).
    """
    import re
    import subprocess

    if shutil.which("valgrind") is None:
        sys.exit("instructions needs valgrind (apt install valgrind)")
    from codemods.base import libcst_version

    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tree = _copy(Path(tmp), drop_ports=False)
        for what in ("start", "parse+print", "apply"):
            t = time.perf_counter()
            proc = subprocess.run(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/callgrind.out",
                 sys.executable, __file__, "_workload", what, str(tree)],
                capture_output=True, text=True, check=True,
            )
            found = re.search(r"Collected : (\d+)", proc.stderr)
            assert found is not None, proc.stderr[-2000:]
            counts[what] = int(found.group(1))
            print(f"{what:12s} {counts[what] / 1e9:7.2f} G instructions ({time.perf_counter() - t:.0f}s under valgrind)",
                  flush=True)
            shutil.rmtree(tree.parent / "out", ignore_errors=True)
    base, mine = (counts[k] - counts["start"] for k in ("parse+print", "apply"))
    print(f"libcst {libcst_version()}: apply -j 1 / parse+print = {mine / 1e9:.2f} / {base / 1e9:.2f} G = {mine / base:.3f}x")


if __name__ == "__main__":
    try:
        mode = sys.argv[1] if len(sys.argv) > 1 else "survey"
        if mode == "_workload":
            _workload(sys.argv[2], Path(sys.argv[3]))
            raise SystemExit(0)
        if mode == "instructions":
            instructions()
            raise SystemExit(0)
        if mode == "snapshot":
            snapshot(Path(sys.argv[2]))
        elif mode == "compare":
            compare(Path(sys.argv[2]) if len(sys.argv) > 2 else None)
        elif mode == "timing":
            timing(int(sys.argv[2]) if len(sys.argv) > 2 else 3)
        else:
            {"survey": survey}[mode]()
    except Exception:
        traceback.print_exc()
        raise SystemExit(1) from None
