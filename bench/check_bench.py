"""Benchmark `migrate-v3 check` against grep and ruff over the installed max package.

Runs, in one go and on the same tree: the two greps of the manual checklist,
`ruff check --no-cache --select F401`, and migrate-v3 check cold (`--no-cache`:
full findings, nothing read from or written to its cache) and warm (content-hash
cache populated). Prints, for each, the best wall time and the best CPU time
(user+sys of the process and its children) over --repeat runs, the load
average while measuring, and the ratios the issue sets targets for: cold check /
cold ruff (target <= 1.0) and warm check / grep (target <= 3.0).

Context rows (not targets): cold check where no `__pycache__` proves that
the files compile, so every file with findings is parsed (a fresh checkout);
and the floor any Python implementation pays: the interpreter starting, and
starting plus reading and decoding every file.

Executables are taken from this interpreter's bin directory when they are
there (a pyenv shim adds ~50 ms to every run); otherwise from PATH. Each
tool's first run is checked: the benchmark stops if check did not check every
file, rather than time a broken install. ``--clean-venv`` adds check as a
user installs it (a regular install in a new venv, where none of this
interpreter's .pth start-up hooks run; python starts there is a row too).
migrate-v3 runs as installed: with its modules' bytecode cached (a warm-up
run writes it even where PYTHONDONTWRITEBYTECODE is set, which would
otherwise add ~30 ms of compiling to every run of an editable install).
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


def _exe(name: str) -> str:
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name) or sys.exit(f"{name} is not on PATH")


def _time(cmd: list[str] | str, cwd: Path, repeat: int, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Best wall time and best CPU time (user+sys of the children) over ``repeat`` runs.

    CPU time is the steadier number on a shared machine; wall time is what a
    user feels.
    """
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, shell=isinstance(cmd, str), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=env)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(walls), min(cpus)


_READ_ALL = """
import os, sys
for d, _, names in os.walk(sys.argv[1]):
    for n in names:
        if n.endswith(('.py', '.pyi')):
            with open(os.path.join(d, n), 'rb') as f:
                f.read().decode('utf-8', 'replace')
"""


def _check_runs(exe: str, tree: Path, cwd: Path, env: dict[str, str], files: int) -> None:
    """Run check once and stop the benchmark unless it checked every file: a broken
    install (an editable one pointing at a deleted checkout, say) exits in milliseconds
    and would otherwise be timed as a very fast check."""
    proc = subprocess.run([exe, "check", "--no-cache", str(tree)], cwd=cwd, env=env, capture_output=True, text=True)
    last = proc.stdout.rstrip().rpartition("\n")[2]
    if proc.returncode not in (0, 1) or not last.startswith(f"Checked {files} files"):
        sys.exit(f"{exe} check did not run (exit {proc.returncode}): {(last or proc.stderr)[-300:]}")


def _speedups_state() -> str:
    from migrate_v3 import scan

    return "built and used" if scan._speedups is not None else "NOT built: the Python fallback runs"


def _clean_venv(path: Path) -> Path:
    """A new venv (none of this interpreter's site-packages) with this checkout installed normally."""
    import venv

    venv.create(path, with_pip=False)
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-m", "pip", "--python", str(path / "bin" / "python"), "install", "-q",
                    "--no-deps", str(root)], check=True, stdout=subprocess.DEVNULL)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tree", type=Path, default=None, help="default: the installed max package")
    parser.add_argument("--no-context", action="store_true", help="only the four rows the targets use")
    parser.add_argument("--clean-venv", action="store_true",
                        help="also time a regular (non-editable) install in a new venv, as a user installs it: "
                             "no .pth hook of this interpreter's site-packages runs there (needs a C compiler "
                             "and pip's build isolation)")
    args = parser.parse_args()
    tree = args.tree or _max_dir()
    files = [*tree.rglob("*.py"), *tree.rglob("*.pyi")]
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    exe, ruff = _exe("migrate-v3"), _exe("ruff")
    tool_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp) / "work"
        cwd.mkdir()
        _check_runs(exe, tree, cwd, tool_env, len(files))  # also the warm-up: bytecode
        grep1 = f'grep -rn "max.experimental" {tree}'
        grep2 = f'grep -rEn "^\\s*(from|import) max\\.nn" {tree}'
        results = {
            "grep (both checklist greps)": _time(f"{grep1}; {grep2}", cwd, args.repeat),
            "ruff check --no-cache --select F401": _time([ruff, "check", "--no-cache", "--select", "F401", str(tree)], cwd, args.repeat),
            "check cold (--no-cache)": _time([exe, "check", "--no-cache", str(tree)], cwd, args.repeat, tool_env),
        }
        subprocess.run([exe, "check", str(tree)], cwd=cwd, env=tool_env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        results["check warm (cache populated)"] = _time([exe, "check", str(tree)], cwd, args.repeat, tool_env)
        if not args.no_context:
            # An empty bytecode cache: nothing proves a file compiles, so every
            # file with findings is parsed (migrate-v3's own modules are
            # compiled into it by the first run and reused after).
            prefix = Path(tmp) / "pycache"
            env = {**tool_env, "PYTHONPYCACHEPREFIX": str(prefix)}
            subprocess.run([exe, "check", "--no-cache", str(tree)], cwd=cwd, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            results["  context: check cold, no __pycache__"] = _time(
                [exe, "check", "--no-cache", str(tree)], cwd, args.repeat, env)
            results["  context: check cold --no-syntax-check"] = _time(
                [exe, "check", "--no-cache", "--no-syntax-check", str(tree)], cwd, args.repeat, tool_env)
            results["  floor: python starts (with site)"] = _time([sys.executable, "-c", "pass"], cwd, args.repeat)
            results["  floor: python starts, reads+decodes all"] = _time(
                [sys.executable, "-c", _READ_ALL, str(tree)], cwd, args.repeat)
        if args.clean_venv:
            venv = _clean_venv(Path(tmp) / "venv")
            venv_exe = str(venv / "bin" / "migrate-v3")
            _check_runs(venv_exe, tree, cwd, tool_env, len(files))
            results["  clean venv: check cold (--no-cache)"] = _time(
                [venv_exe, "check", "--no-cache", str(tree)], cwd, args.repeat, tool_env)
            results["  clean venv: python starts"] = _time([str(venv / "bin" / "python"), "-c", "pass"], cwd, args.repeat)
    load_after = os.getloadavg()
    print(f"tree: {tree} ({len(files)} .py/.pyi files, {lines} lines), best of {args.repeat}, "
          f"{os.cpu_count()} cores, load average {load_before[0]:.2f} before / {load_after[0]:.2f} after")
    print(f"migrate-v3: {exe} (C speed-ups: {_speedups_state()})\nruff: {ruff}")
    print(f"  {'command':44s} {'wall':>8s} {'cpu':>8s}")
    for name, (wall, cpu) in results.items():
        print(f"  {name:44s} {wall:7.3f}s {cpu:7.3f}s")
    grep = results["grep (both checklist greps)"]
    ruff_t = results["ruff check --no-cache --select F401"]
    cold = results["check cold (--no-cache)"]
    warm = results["check warm (cache populated)"]
    print("ratios (wall, cpu):")
    print(f"  check cold / ruff cold                      {cold[0] / ruff_t[0]:5.2f}x {cold[1] / ruff_t[1]:5.2f}x (target <= 1.0)")
    print(f"  check warm / grep                           {warm[0] / grep[0]:5.2f}x {warm[1] / grep[1]:5.2f}x (target <= 3.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
