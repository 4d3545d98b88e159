"""Benchmark `migrate-v3 check` against grep and ruff over the installed max package.

Runs, in one go and on the same tree: the two greps of the manual checklist,
`ruff check --no-cache --select F401`, and migrate-v3 check cold (no cache,
with and without the syntax check) and warm (content-hash cache populated).
Prints wall times (best of --repeat) and the ratios the issue sets targets for:
cold check / cold ruff (target <= 1.0) and warm check / grep (target <= 3.0).
Not a test: timings belong in a benchmark, never in an assert.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _max_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("max")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("max is not installed: pip install -e '.[verify]'")
    return Path(list(spec.submodule_search_locations)[0])


def _time(cmd: list[str] | str, cwd: Path, repeat: int) -> tuple[float, float]:
    """Best wall time and best CPU time (user+sys of the children) over ``repeat`` runs.

    CPU time is the steadier number on a shared machine; wall time is what a
    user feels.
    """
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, shell=isinstance(cmd, str), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(walls), min(cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tree", type=Path, default=None, help="default: the installed max package")
    args = parser.parse_args()
    tree = args.tree or _max_dir()
    files = list(tree.rglob("*.py"))
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    exe = shutil.which("migrate-v3") or sys.exit("migrate-v3 is not on PATH")
    ruff = shutil.which("ruff") or sys.exit("ruff is not on PATH (dev extra)")
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        grep1 = f'grep -rn "max.experimental" {tree}'
        grep2 = f'grep -rEn "^\\s*(from|import) max\\.nn" {tree}'
        results = {
            "grep (both checklist greps)": _time(f"{grep1}; {grep2}", cwd, args.repeat),
            "ruff check --no-cache --select F401": _time([ruff, "check", "--no-cache", "--select", "F401", str(tree)], cwd, args.repeat),
            "check cold (syntax check on)": _time([exe, "check", "--no-cache", str(tree)], cwd, args.repeat),
            "check cold --no-syntax-check": _time([exe, "check", "--no-cache", "--no-syntax-check", str(tree)], cwd, args.repeat),
        }
        subprocess.run([exe, "check", str(tree)], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        results["check warm (cache populated)"] = _time([exe, "check", str(tree)], cwd, args.repeat)
    print(f"tree: {tree} ({len(files)} .py files, {lines} lines), best of {args.repeat}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print(f"  {'command':40s} {'wall':>8s} {'cpu':>8s}")
    for name, (wall, cpu) in results.items():
        print(f"  {name:40s} {wall:7.3f}s {cpu:7.3f}s")
    grep = results["grep (both checklist greps)"]
    ruff_t = results["ruff check --no-cache --select F401"]
    cold = results["check cold (syntax check on)"]
    fast = results["check cold --no-syntax-check"]
    warm = results["check warm (cache populated)"]
    print("ratios (wall, cpu):")
    print(f"  check cold / ruff cold                  {cold[0] / ruff_t[0]:5.2f}x {cold[1] / ruff_t[1]:5.2f}x (target <= 1.0)")
    print(f"  check cold --no-syntax-check / ruff     {fast[0] / ruff_t[0]:5.2f}x {fast[1] / ruff_t[1]:5.2f}x (target <= 1.0)")
    print(f"  check warm / grep                       {warm[0] / grep[0]:5.2f}x {warm[1] / grep[1]:5.2f}x (target <= 3.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
