"""The model ladder: how far every migrated V2 architecture of the installed max gets.

    python bench/ladder.py [ARCH ...] [--json FILE] [--baseline FILE] [--update-baseline]
                           [-j N] [--keep DIR] [--mypy] [--mypy-cache DIR] [--control]

Layout (what a user has): the installed ``max/pipelines/architectures`` is
copied to ``WORK/archs`` (official ``*_modulev3`` ports included, package
``__init__`` emptied so importing registers nothing). Every V2 architecture
package (a package where ``migrate-v3 check`` finds V2 or mixed files) is
migrated as a user migrating the folder would: the packages without an
official port in ONE in-place ``migrate-v3 apply`` run (outputs ``X_modulev3``
beside their sources), then each package with an official ``X_modulev3`` on its
own into a staging folder, moved beside its source as ``X_migrated``. max's
ports stay, so a migrated package that imports ``..llama3_modulev3`` gets the
official port, as it would for the user, and ``apply`` checks those imports
against what the port defines.

Rungs (see ``migrate_v3/verify/ladder.py``): L0 ``apply`` ran and every
output parses (here); L1 imports, L2 constructs, L3 weights, L4 traces, L6 the
V3 pipeline reaches compile (packages are probed in child interpreters, 2 at a
time, a few packages each so imports are paid once; when one crashes, only the
package it was on is lost and the rest go on in a new interpreter). L5
(compile and compare) is not run here.

For each package the first failure is classified: ``tool`` (migrated code
fails and nothing in the output says so), ``needs a person`` (it fails on a
line a ``TODO(migrate-v3)`` marker or a ``check`` finding names), ``V2 itself
fails`` (the V2 reference does not build from the tiny config), ``needs a
GPU`` (the V2 reference refuses to build without an accelerator), ``no config``
(the ladder cannot configure it: no ``arch.py`` or no ``transformers`` config
for its model type), ``no inputs`` (a root built but the ladder has no input
types to trace it with). ``--control`` climbs the official ports instead (V2 ``X``
against max's own ``X_modulev3``): the instrument's own check.

``--without-ports`` deletes the official ports from the copy first (every
sibling import then resolves to migrated code, as ``whole_model_survey.py``
lays it out): what the packages do beyond the imports the ports break.

``--mypy`` adds the static rung: mypy errors of each migrated package and of
its V2 input, run as ``verify`` runs it (``-j`` packages at a time, in
verify's persistent mypy cache unless ``--mypy-cache`` names another). ``--baseline`` compares rungs with a
committed JSON: a package below its baseline rung is a regression (exit 1),
one above it asks for ``--update-baseline``.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PARENT = "archs"
V2_PREFIX = "max.pipelines.architectures"
BASELINE = ROOT / "bench" / "ladder_baseline.json"
ORDER = ("L0", "L1", "L2", "L3", "L4")
TIMEOUT = 600  # seconds per package
#: a probe interpreter stops itself past this resident memory (GB; ``MIGRATE_V3_LADDER_MAX_RSS_GB``):
#: some V2 graphs take 11-14 GB to compile on CPU (umt5, llama4) and one grew past that until the
#: kernel killed it, which on a 24 GB machine risks the processes beside it
MAX_RSS_GB = float(os.environ.get("MIGRATE_V3_LADDER_MAX_RSS_GB", "16"))
#: L0-L4 of one package take seconds (the slowest ~60 s); past this the probe stops that package
#: (migrated code that loops forever while staging, seen: V2 ops.allgather iterating a V3 Tensor)
PACKAGE_SECONDS = float(os.environ.get("MIGRATE_V3_LADDER_PACKAGE_SECONDS", "300"))
BATCH = 6  # packages per probe interpreter
#: verify's default mypy cache: max's own modules (most of what mypy reads) are cached across runs,
#: where a cache inside the temporary work tree made the first package pay for all of them (measured:
#: 306 s for autoencoders, then 20-50 s a package)
MYPY_CACHE = Path.home() / ".cache" / "migrate-v3" / "mypy"


def architectures() -> Path:
    import max  # noqa: PLC0415 - the ladder needs the real package

    return Path(list(max.__path__)[0]) / "pipelines" / "architectures"


def copy_tree(work: Path) -> Path:
    tree = work / PARENT
    shutil.copytree(architectures(), tree, ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "__init__.py").write_text("")  # no registry side effects on import
    return tree


def v2_packages(tree: Path) -> list[str]:
    """Packages (not ``*_modulev3``) where ``check`` finds a V2 or mixed file."""
    out = subprocess.run([sys.executable, "-m", "migrate_v3", "check", "--format", "json", "--no-cache",
                          str(tree)], capture_output=True, text=True, check=False)
    data = json.loads(out.stdout)
    found: set[str] = set()
    for entry in data["files"]:
        rel = Path(entry["path"]).resolve().relative_to(tree.resolve())
        if len(rel.parts) > 1 and not rel.parts[0].endswith("_modulev3") and entry["kind"] in ("v2", "mixed"):
            found.add(rel.parts[0])
    return sorted(found)


def _apply(args: list[str], report: Path) -> dict[str, Any]:
    run = subprocess.run([sys.executable, "-m", "migrate_v3", "apply", *args, "--report", str(report)],
                         capture_output=True, text=True, check=False)
    if not report.is_file():
        raise SystemExit(f"apply wrote no report (exit {run.returncode}): {run.stderr[-2000:]}")
    data: dict[str, Any] = json.loads(report.read_text())
    return data


def official_ports(tree: Path, packages: list[str]) -> list[str]:
    """The packages max ships an official ``_modulev3`` port of (run before apply writes any)."""
    return [p for p in packages if (tree / f"{p}_modulev3").is_dir()]


def apply_all(tree: Path, work: Path, packages: list[str], ported: list[str]) -> tuple[dict[str, Any], float]:
    """apply as a user with max's official ports beside their V2 packages would; the
    merged JSON reports and the wall time.

    The packages without an official port are migrated in ONE in-place run (their
    imports of a ported sibling are checked against the official port, which stays).
    Each package with an official port is then migrated on its own into
    ``WORK/staging/PKG``: in place it would be refused (its ``_modulev3`` exists),
    and migrated together they would import each other's outputs under the official
    ports' names.
    """
    start = time.perf_counter()
    unported = [str(tree / p) for p in packages if p not in ported]
    reports = [_apply([*unported, "-j", "2"], work / "apply.json")] if unported else []
    jobs = [(p, work / "staging" / p, work / f"apply-{p}.json") for p in ported]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        reports += pool.map(lambda j: _apply([str(tree / j[0]), "--out", str(j[1]), "-j", "1"], j[2]), jobs)
    took = time.perf_counter() - start
    merged = {"files": [f for r in reports for f in r.get("files", [])],
              "errors": [e for r in reports for e in r.get("errors", [])]}
    return merged, took


def place(tree: Path, work: Path, packages: list[str], ported: list[str]) -> dict[str, str]:
    """The output name of each migrated package; a ported package's output is moved
    from staging beside its source as ``X_migrated`` (max's ``X_modulev3`` stays)."""
    names: dict[str, str] = {}
    for pkg in packages:
        staged = work / "staging" / pkg / f"{pkg}_modulev3"
        if pkg in ported and staged.is_dir():
            shutil.move(str(staged), str(tree / f"{pkg}_migrated"))
            names[pkg] = f"{pkg}_migrated"
        elif pkg not in ported and (tree / f"{pkg}_modulev3").is_dir():
            names[pkg] = f"{pkg}_modulev3"
    return names


def l0(pkg: str, v3: str | None, tree: Path, report: dict[str, Any]) -> dict[str, Any]:
    """apply ran for the package and every file it wrote parses."""
    src = str((tree / pkg).resolve())
    errors = [f["error"] for f in report.get("files", []) if f.get("error") and f["source"].startswith(src + os.sep)]
    errors += [e for e in report.get("errors", []) if src in e]
    if v3 is None:
        return {"rung": "L0", "ok": False, "detail": "apply wrote no package: " + "; ".join(errors[:2]),
                "where": "", "side": "v3"}
    for py in sorted((tree / v3).rglob("*.py")):
        try:
            ast.parse(py.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError) as exc:
            line = getattr(exc, "lineno", 0) or 0
            return {"rung": "L0", "ok": False, "detail": f"output does not parse: {exc}",
                    "where": f"{py}:{line}", "side": "v3"}
    if errors:
        return {"rung": "L0", "ok": False, "detail": "apply: " + errors[0], "where": "", "side": "v3"}
    return {"rung": "L0", "ok": True, "detail": "", "where": "", "side": "v3"}


def memory_guard(limit_gb: float, every: float = 1.0) -> None:
    """Stop this interpreter (exit 3, saying why on stderr, which the parent reports) once its
    resident memory passes ``limit_gb``: a clean failure instead of the kernel's SIGKILL."""
    page = os.sysconf("SC_PAGE_SIZE")

    def watch() -> None:
        while True:
            with open("/proc/self/statm") as f:
                rss = int(f.read().split()[1]) * page
            if rss > limit_gb * 2**30:
                print(f"the probe's memory passed {limit_gb:g} GB (RSS {rss / 2**30:.1f} GB): stopped "
                      "(MIGRATE_V3_LADDER_MAX_RSS_GB sets the limit)", file=sys.stderr, flush=True)
                os._exit(3)
            time.sleep(every)

    threading.Thread(target=watch, daemon=True).start()


def probe_child(work: Path, pairs: list[str]) -> None:
    """(In the child interpreter.) Print each package's ladder result as one JSON line."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if Path("/proc/self/statm").is_file():
        memory_guard(MAX_RSS_GB)
    from migrate_v3.verify import ladder

    def partial(result: Any) -> None:
        print("LADDER-PARTIAL " + json.dumps(result.to_json()), flush=True)

    ladder.before_l5 = partial
    probe = ladder.probe
    migrated = tuple(json.loads((work / "migrated.json").read_text()))
    l5 = os.environ.get("MIGRATE_V3_LADDER_L5") == "1"

    why = (f"this package's L0-L4 passed {PACKAGE_SECONDS:g} s: stopped "
           "(MIGRATE_V3_LADDER_PACKAGE_SECONDS sets the limit)")

    def stop(signum: int, frame: object) -> None:
        ladder.stop_reason = why
        raise ladder.Stopped(why)

    if not l5:  # (a compile is minutes of native code that a Python signal cannot interrupt anyway)
        signal.signal(signal.SIGALRM, stop)
    for pair in pairs:
        arch, v3 = pair.split(":")
        print(f"LADDER-START {arch}", flush=True)
        if not l5:
            signal.setitimer(signal.ITIMER_REAL, PACKAGE_SECONDS)
        try:
            result = probe(work, PARENT, arch, v3, V2_PREFIX, work, migrated, l5=l5)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            ladder.stop_reason = None
        print("LADDER-JSON " + json.dumps(result.to_json()), flush=True)


def _died(arch: str, v3: str, why: str, stderr: str) -> dict[str, Any]:
    crash = [ln for ln in stderr.splitlines() if 'File "' in ln and f"/{v3}/" in ln]
    where = ""
    if crash:
        where = crash[-1].split('File "')[1].split('"')[0] + ":" + crash[-1].split("line ")[1].split()[0]
    return {"arch": arch, "v3_package": v3, "seconds": 0, "steps": [
        {"rung": "L1", "ok": False, "detail": why, "where": where, "side": "setup"}]}


def _crash_line(stderr: str) -> str:
    """What a dead interpreter said: faulthandler's ``Fatal Python error`` and the innermost frame
    it printed (most recent call first), else the last line."""
    lines = stderr.strip().splitlines() or ["no output"]
    fatal = next((ln.strip() for ln in lines if ln.startswith("Fatal Python error")), None)
    if fatal is None:
        return lines[-1]
    frame = next((ln.strip() for ln in lines if ln.strip().startswith('File "')), "")
    return f"{fatal}{' at ' + frame if frame else ''}"


def run_batch(work: Path, batch: list[tuple[str, str]]) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Probe a few packages in one interpreter (imports are paid once).

    Returns the results and the packages left to do: when the interpreter
    dies or times out, the package it was on gets that as its result and the
    ones after it are handed back.
    """
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONFAULTHANDLER": "1"}
    cmd = [sys.executable, __file__, "probe", str(work), *(f"{a}:{v}" for a, v in batch)]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT * len(batch), env=env,
                             check=False)
        stdout, stderr, why = run.stdout, run.stderr, f"the probe interpreter died (exit {run.returncode})"
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        why = f"the probe took over {TIMEOUT * len(batch)}s"
    results = [json.loads(line[len("LADDER-JSON "):]) for line in stdout.splitlines()
               if line.startswith("LADDER-JSON ")]
    partials = {r["arch"]: r for r in (json.loads(line[len("LADDER-PARTIAL "):]) for line in stdout.splitlines()
                                      if line.startswith("LADDER-PARTIAL "))}
    done = {r["arch"] for r in results}
    left = [item for item in batch if item[0] not in done]
    if left:
        arch, v3 = left[0]
        tail = _crash_line(stderr)
        if arch in partials:  # it died compiling or running L5: L0-L4 stand
            row = partials[arch]
            row["steps"].append({"rung": "L5", "ok": False, "detail": f"{why} in L5 compile/run: {tail}",
                                 "where": "", "side": "setup"})
            results.append(row)
        else:
            results.append(_died(arch, v3, f"{why}: {tail}", stderr))
        left = left[1:]
    return results, left


def rung_of(steps: list[dict[str, Any]]) -> str:
    """The highest rung with it and every rung below it passed."""
    reached = "-"
    for rung in ORDER:
        found = [s["ok"] for s in steps if s["rung"] == rung]
        if not found or not all(found):
            break
        reached = rung
    return reached


def first_failure(steps: list[dict[str, Any]]) -> dict[str, Any] | None:
    for rung in (*ORDER, "L5", "L6"):
        for s in steps:
            if s["rung"] == rung and not s["ok"]:
                return s
    return None


def _statement_lines(path: Path, line: int) -> tuple[list[str], int]:
    """The file's lines and the first line of the innermost statement containing ``line``."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    first = line
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return lines, first
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            span = (node.end_lineno or node.lineno) - node.lineno
            if best is None or span < best[0]:
                best = (span, node.lineno)
    return lines, best[1] if best else first


_MUST_IMPLEMENT = re.compile(r"must implement `(\w+)`")
#: the root class a failure is about (``UnifiedDflashLlama3: V2 46 weights ...``)
_ROOT = re.compile(r"(?:L\d )?(\w+): ")
_NO_ATTRIBUTE = re.compile(r"has no attribute '(\w+)'")
#: a constructor called with V2's arguments (``X.__init__() missing 1 required positional argument: 'mesh'``)
_SIGNATURE = re.compile(
    r"(\w+)\.__init__\(\) (?:missing \d+ required (?:positional|keyword-only) arguments?: '(\w+)'"
    r"|got an unexpected keyword argument '(\w+)')"
)
_DTYPE_OF = re.compile(r"\bdtype \S+ checkpoint \S+ vs V3 \S+ of an? (\w+)(?: \((\w+)\))?")
#: an L3 failure of weight names (V3 parameters the V2 checkpoint has no tensor for, or the reverse)
_WEIGHT_NAMES = re.compile(r"no V2 weight accounts for|\b\d+ (?:unexpected|missing)\b|weight issues \(e\.g\. (?:missing|unexpected)\b")
#: a TODO that says the V3 parameter names (checkpoint keys) may differ from V2's
_NAMES_MAY_DIFFER = re.compile(r"TODO\(migrate-v3\): (?:MV301 [^\n]*\bparameter names\b|MV36[12] )")


def flagged(where: str, findings: dict[str, set[int]], detail: str = "", package: Path | None = None) -> str:
    """What names the failing statement: a TODO marker on it or above it, a check finding, or ''.

    A missing attribute may be named where it went missing instead: a TODO anywhere in the
    package saying that something "has no" that attribute (``MV301``'s note at the import of a
    class whose V3 variant lacks it) names the cause too; so does, for a base's
    ``NotImplementedError: X must implement `m```, a TODO that says to implement ``m``
    (``MV382``'s note on a pipeline model whose load path could not be rewritten); and an L3
    weight in another dtype than V2's, held by a ``RMSNorm`` say, is named by ``MV342``'s note
    that a ``RMSNorm(dtype=...)`` lost its own dtype; a constructor called with V2's arguments
    (``X.__init__() missing ... 'mesh'``), by a note naming the call ``X(...)`` and the argument
    (``MV301``'s note that a sibling's V3 constructor differs); an L3 failure of weight names, by a note
    that the names may differ (``MV301`` at a subclass of max's port, ``MV361``/``MV362``); and
    any failure of a root class (``Root: ...``) by ``MV320``'s note that the root subclasses a V2
    Module with no ModuleV3 form (its children are no V3 parameters, its call no V3 forward)."""
    site = _flagged_site(where, findings)
    if not site and ("stopped" in detail or "ran past" in detail):  # a trace stopped by a deadline: an endless loop?
        site = _endless_loop(where)
    if site or package is None or not package.is_dir():
        return site
    missing = _NO_ATTRIBUTE.search(detail)
    unwritten = _MUST_IMPLEMENT.search(detail)
    said: re.Pattern[str] | None = None
    root = _ROOT.match(detail)
    if root is not None and _said(package, re.compile(rf"TODO\(migrate-v3\): MV320 {re.escape(root.group(1))} subclasses ")):
        return "TODO"
    if missing is not None:
        said = re.compile(rf"TODO\(migrate-v3\):[^\n]*\bhas no\b[^\n]*\b{re.escape(missing.group(1))}\b")
    elif (pinned := _DTYPE_OF.search(detail)) is not None:  # MV342: the V2 layer's own dtype, dropped
        names = "|".join(re.escape(n) for n in pinned.groups() if n)
        said = re.compile(rf"TODO\(migrate-v3\): MV342 (?:{names})\(dtype=")
    elif unwritten is not None:
        said = re.compile(rf"TODO\(migrate-v3\):[^\n]*\bimplement\b[^\n]*\b{re.escape(unwritten.group(1))}\b")
    elif (called := _SIGNATURE.search(detail)) is not None:  # MV301: the V3 constructor is not V2's
        cls, arg = called.group(1), called.group(2) or called.group(3)
        said = re.compile(rf"TODO\(migrate-v3\):[^\n]*\b{re.escape(cls)}\([^\n]*\b{re.escape(arg)}\b")
    elif _WEIGHT_NAMES.search(detail):  # MV301 (a subclass of max's port) or MV361/MV362: names may differ
        said = _NAMES_MAY_DIFFER
    return "TODO" if said is not None and any(_said(p, said) for p in _packages_of(package, where)) else ""


def _packages_of(package: Path, where: str) -> list[Path]:
    """``package``, and the package of the tree the failing site is in when that is another one
    (a draft's module failing under its unified pipeline: the note is where the module is)."""
    site = Path(where.rpartition(":")[0]) if where else None
    tree = package.parent.resolve()
    if site is not None and site.is_file():
        parts = site.resolve().relative_to(tree).parts if site.resolve().is_relative_to(tree) else ()
        if len(parts) > 1 and parts[0] != package.name:
            return [package, tree / parts[0]]
    return [package]


def _said(package: Path, said: re.Pattern[str]) -> bool:
    """A file of ``package`` has a line ``said`` matches."""
    return any(said.search(py.read_text(errors="replace")) for py in package.rglob("*.py"))


def _endless_loop(where: str) -> str:
    """"TODO" when ``where`` is inside a ``for`` loop whose marker says iterating never ends
    (``MV391``: iterating a Tensor while staging indexes it forever)."""
    path_s, _, line_s = where.rpartition(":")
    path = Path(path_s)
    if not path.is_file() or not line_s.isdigit():
        return ""
    lines = path.read_text(errors="replace").splitlines()
    k = int(line_s) - 1
    indent = len(lines[k]) - len(lines[k].lstrip()) if k < len(lines) else 0
    for j in range(k - 1, -1, -1):
        text = lines[j]
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        depth = len(text) - len(text.lstrip())
        if depth >= indent:
            continue
        indent = depth
        if text.lstrip().startswith("def "):
            return ""
        if text.lstrip().startswith("for ") and j > 0 and "never ends while staging" in lines[j - 1]:
            return "TODO"
    return ""


def _flagged_site(where: str, findings: dict[str, set[int]]) -> str:
    if not where or ":" not in where:
        return ""
    path_s, _, line_s = where.rpartition(":")
    path = Path(path_s)
    if not path.is_file() or not line_s.isdigit():
        return ""
    line = int(line_s)
    lines, first = _statement_lines(path, line)
    block = lines[first - 1:line]
    j = first - 2
    while j >= 0 and lines[j].lstrip().startswith("#"):
        block.append(lines[j])
        j -= 1
    if any("TODO(migrate-v3)" in text for text in block):
        return "TODO"
    hits = findings.get(str(path.resolve()), set())
    if any(first <= n <= line for n in hits):
        return "check"
    return ""


def check_findings(tree: Path, dirs: list[str]) -> dict[str, set[int]]:
    if not dirs:
        return {}
    out = subprocess.run([sys.executable, "-m", "migrate_v3", "check", "--format", "json", "--no-cache",
                          *(str(tree / d) for d in dirs)], capture_output=True, text=True, check=False)
    found: dict[str, set[int]] = {}
    for entry in json.loads(out.stdout)["files"]:
        found.setdefault(str(Path(entry["path"]).resolve()), set()).update(f["line"] for f in entry["findings"])
    return found


#: A V2 reference that refuses to build without an accelerator (or, built on a GPU spec, needs
#: a real one): that architecture cannot be checked on this machine at all.
from migrate_v3.verify.ladder import ACCELERATOR_ONLY, GPU_ONLY_KERNEL  # noqa: E402 - after the sys.path entry


def classify(step: dict[str, Any], pkg_dir: Path, mark: str) -> str:
    if step["side"] == "v2":
        return "needs a GPU" if ACCELERATOR_ONLY.search(step["detail"]) else "V2 itself fails"
    where = step.get("where", "")
    if GPU_ONLY_KERNEL.search(step["detail"]) and "site-packages" in where and "/max/" in where:
        return "needs a GPU"  # (a MAX kernel with no CPU form: not the migration's doing)
    if step["side"] == "setup" and not (mark and "stopped" in step["detail"]):  # (a stop a TODO names is the code's)
        return "no inputs" if step["rung"] in ("L4", "L5") else "no config"
    if mark:
        return "needs a person"
    return "tool"


def mypy_counts(tree: Path, pkg: str, v3: str, cache: Path) -> dict[str, Any]:
    """mypy errors of the V2 package and its migration, as ``verify`` counts them."""
    from migrate_v3.verify.typecheck import collect, start_both

    result = collect(start_both(tree / pkg, tree / v3, cache))
    return {"v2": result.v2_errors, "v3": result.v3_errors, "error": result.error}


def _short(where: str, tree: Path) -> str:
    try:
        return str(Path(where.rpartition(":")[0]).resolve().relative_to(tree.resolve())) + ":" + where.rpartition(":")[2]
    except ValueError:
        return portable(where, tree)


def portable(value: Any, tree: Path) -> Any:
    """``value`` with the work tree's, max's and this repository's paths made relative."""
    if isinstance(value, str):
        site = architectures().parents[2]  # .../site-packages
        for path, name in ((tree.resolve(), "<tree>"), (site, "<site-packages>"), (ROOT, "<repo>")):
            value = value.replace(str(path) + os.sep, name + "/")
        return value
    if isinstance(value, list):
        return [portable(v, tree) for v in value]
    if isinstance(value, dict):
        return {k: portable(v, tree) for k, v in value.items()}
    return value


def table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'arch':28} {'rung':4} {'L6':3} {'class':15} {'todo':5} first failure"]
    for r in rows:
        fail = r.get("first_failure") or {}
        text = fail.get("detail", "").replace("\n", " ")
        where = r.get("failure_at", "")
        lines.append(f"{r['arch']:28} {r['rung']:4} {'yes' if r.get('l6') else 'no':3} "
                     f"{r.get('class', ''):15} {r.get('matched', '') or 'no':5} "
                     f"{(fail.get('rung', '') + ' ') if fail else ''}{text[:150]}{(' @ ' + where) if where else ''}")
    return "\n".join(lines)


def main() -> int:  # noqa: C901 - the driver reads top to bottom
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("arch", nargs="*", help="only these V2 packages (default: every one)")
    parser.add_argument("--json", type=Path, help="write the per-package results here")
    parser.add_argument("--baseline", type=Path, nargs="?", const=BASELINE,
                        help=f"compare rungs with this JSON (default {BASELINE.relative_to(ROOT)})")
    parser.add_argument("--update-baseline", action="store_true", help="write the rungs to the baseline")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    parser.add_argument("--mypy", action="store_true", help="also count mypy errors (V2 vs migrated)")
    parser.add_argument("--mypy-cache", type=Path, default=MYPY_CACHE,
                        help="mypy cache directory, kept between runs (default: verify's, ~/.cache/migrate-v3/mypy)")
    parser.add_argument("--control", action="store_true", help="climb max's official ports instead")
    parser.add_argument("--without-ports", action="store_true",
                        help="delete max's official ports from the copy first (every sibling import then "
                             "gets migrated code, as in bench/whole_model_survey.py); not the baseline layout")
    parser.add_argument("--l5", action="store_true",
                        help="also compile each root that traces, both sides, and compare outputs (minutes each)")
    args = parser.parse_args()
    if args.update_baseline and (args.arch or args.control or args.without_ports):
        print("--update-baseline needs the whole ladder in the user layout", file=sys.stderr)
        return 2
    start = time.perf_counter()
    if args.l5:
        os.environ["MIGRATE_V3_LADDER_L5"] = "1"
    tmp = None
    if args.keep:
        if args.keep.exists():
            shutil.rmtree(args.keep)
        args.keep.mkdir(parents=True)
        work = args.keep.resolve()
    else:
        tmp = tempfile.TemporaryDirectory()
        work = Path(tmp.name)
    try:
        tree = copy_tree(work)
        packages = v2_packages(tree)
        if args.without_ports:
            if args.control or args.baseline:
                print("--without-ports is not the baseline's layout, nor has ports to control", file=sys.stderr)
                return 2
            for port in tree.glob("*_modulev3"):
                shutil.rmtree(port)
        if args.arch:
            unknown = sorted(set(args.arch) - set(packages))
            if unknown:
                print(f"not V2 architecture packages: {', '.join(unknown)}", file=sys.stderr)
                return 2
            packages = [p for p in packages if p in args.arch]
        if args.control:
            packages = official_ports(tree, packages)
            names = {p: f"{p}_modulev3" for p in packages}
            report: dict[str, Any] = {}
            apply_s = 0.0
        else:
            ported = official_ports(tree, packages)
            report, apply_s = apply_all(tree, work, packages, ported)
            names = place(tree, work, packages, ported)
        print(f"{len(packages)} V2 architecture packages; apply {apply_s:.1f}s", file=sys.stderr, flush=True)
        rows: dict[str, dict[str, Any]] = {}
        todo = []
        for pkg in packages:
            step0 = l0(pkg, names.get(pkg), tree, report) if not args.control else {
                "rung": "L0", "ok": True, "detail": "official port", "where": "", "side": "v3"}
            rows[pkg] = {"arch": pkg, "v3_package": names.get(pkg), "steps": [step0]}
            if names.get(pkg):
                todo.append(pkg)

        (work / "migrated.json").write_text(json.dumps(sorted(names.values())))
        queue = [(pkg, names[pkg]) for pkg in todo]
        lock = threading.Lock()

        def worker() -> None:
            while True:
                with lock:
                    if not queue:
                        return
                    batch = [queue.pop(0) for _ in range(min(BATCH, len(queue)))]
                results, left = run_batch(work, batch)
                with lock:
                    queue[:0] = left
                for got in results:
                    pkg = got["arch"]
                    rows[pkg].update({k: v for k, v in got.items() if k != "steps"})
                    rows[pkg]["steps"] += got["steps"]
                    print(f"  {pkg}: {rung_of(rows[pkg]['steps'])} ({got.get('seconds', 0)}s)",
                          file=sys.stderr, flush=True)

        threads = [threading.Thread(target=worker) for _ in range(max(1, args.jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        findings = check_findings(tree, [names[p] for p in packages if p in names and not args.control])
        for pkg, row in rows.items():
            row["rung"] = rung_of(row["steps"])
            row["l6"] = any(s["rung"] == "L6" and s["ok"] for s in row["steps"])
            fail = first_failure(row["steps"])
            row["first_failure"] = fail
            if fail is not None:
                row["matched"] = flagged(fail["where"], findings, fail.get("detail", ""), tree / (names.get(pkg) or pkg))
                row["class"] = classify(fail, tree / (names.get(pkg) or pkg), row["matched"])
                row["failure_at"] = _short(fail["where"], tree) if fail["where"] else ""
        if args.mypy:
            with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
                counted = pool.map(lambda p: mypy_counts(tree, p, names[p], args.mypy_cache), todo)
                for pkg, counts in zip(todo, counted, strict=True):
                    rows[pkg]["mypy"] = counts
                    print(f"  mypy {pkg}: {counts}", file=sys.stderr, flush=True)
        ordered = [rows[p] for p in packages]
        print(table(ordered))
        counts = {r: sum(1 for row in ordered
                         if row["rung"] != "-" and ORDER.index(row["rung"]) >= ORDER.index(r)) for r in ORDER}
        l6 = sum(1 for row in ordered if row["l6"])
        for row in ordered:
            l5 = [s for s in row["steps"] if s["rung"] == "L5"]
            row["l5"] = None if not l5 else all(s["ok"] for s in l5)
            for s in l5:
                print(f"L5 {row['arch']}: {'ok' if s['ok'] else 'FAILED'}: {s['detail']}")
        print(f"\n{len(ordered)} packages: " + ", ".join(f"{r} {n}" for r, n in counts.items()) + f", L6 {l6}; "
              f"{time.perf_counter() - start:.0f}s wall")
        below = [row for row in ordered if row["rung"] in ("-", "L0", "L1", "L2", "L3")]
        print(f"stopped below L4: {len(below)}; their first failure named by a TODO or check finding: "
              f"{sum(1 for row in below if row.get('matched'))}")
        if args.mypy:
            worse = [p for p in todo if rows[p]["mypy"]["v3"] > rows[p]["mypy"]["v2"]]
            print(f"mypy: migrated {sum(rows[p]['mypy']['v3'] for p in todo)} errors vs V2 "
                  f"{sum(rows[p]['mypy']['v2'] for p in todo)}; worse than V2: {len(worse)} of {len(todo)}")
        if args.json:
            args.json.write_text(json.dumps(portable({"packages": ordered, "counts": counts, "l6": l6}, tree),
                                            indent=1, default=str))
        if args.update_baseline:
            BASELINE.write_text(json.dumps({r["arch"]: r["rung"] for r in ordered}, indent=1, sort_keys=True) + "\n")
            print(f"baseline written: {BASELINE}")
        elif args.baseline:
            return compare_baseline(ordered, json.loads(args.baseline.read_text()))
        return 0
    finally:
        if tmp is not None:
            tmp.cleanup()


def compare_baseline(rows: list[dict[str, Any]], baseline: dict[str, str]) -> int:
    """1 when a package dropped below its baseline rung; says which rose."""
    def level(rung: str) -> int:
        return ORDER.index(rung) if rung in ORDER else -1

    worse = [(r["arch"], baseline[r["arch"]], r["rung"]) for r in rows
             if r["arch"] in baseline and level(r["rung"]) < level(baseline[r["arch"]])]
    better = [(r["arch"], baseline[r["arch"]], r["rung"]) for r in rows
              if r["arch"] in baseline and level(r["rung"]) > level(baseline[r["arch"]])]
    for arch, was, now in worse:
        print(f"REGRESSION {arch}: {was} -> {now}")
    for arch, was, now in better:
        print(f"improved {arch}: {was} -> {now} (run bench/ladder.py --update-baseline)")
    return 1 if worse else 0


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "probe":
        probe_child(Path(sys.argv[2]), sys.argv[3:])
        raise SystemExit(0)
    raise SystemExit(main())
