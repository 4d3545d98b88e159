"""``apply``: plan targets, run the pipeline per file, stage, publish, report.

The V2 source is never modified. All outputs are staged and moved into place
only at the end; a file that cannot be read, decoded or parsed is reported and
copied unchanged so the package stays complete, and the run goes on.
"""

from __future__ import annotations

import difflib
import os
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from codemods.base import fast_path_problem
from migrate_v3.emit import Stager
from migrate_v3.findings import Finding
from migrate_v3.pipeline import TransformContext, TransformError, TransformResult, transform_source
from migrate_v3.plan import Plan, Target, plan
from migrate_v3.registration import RegistrationHint, hint_for
from migrate_v3.workers import process_pool


@dataclass
class FileReport:
    """What ``apply`` did to one file."""

    source: str
    dest: str
    kind: str = "neutral"
    changed: bool = False
    findings: list[Finding] = field(default_factory=list)
    todos: list[Finding] = field(default_factory=list)
    error: str | None = None
    diff: str | None = None

    @property
    def rewrites(self) -> Counter[str]:
        return Counter(f.code for f in self.findings)

    @property
    def migrated_pct(self) -> float | None:
        """Share of V2 sites rewritten automatically (rewrites / (rewrites + TODOs))."""
        total = len(self.findings) + len(self.todos)
        return None if total == 0 else 100.0 * len(self.findings) / total

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "dest": self.dest,
            "kind": self.kind,
            "changed": self.changed,
            "error": self.error,
            "migrated_pct": self.migrated_pct,
            "rewrites": [f._asdict() | {"fix": f.fix.value} for f in self.findings],
            "todos": [f._asdict() | {"fix": f.fix.value} for f in self.todos],
        }


@dataclass
class ApplyReport:
    files: list[FileReport] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    registration: list[RegistrationHint] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    #: why the fast path could not run (libcst's transformer ran: same output, slower); None: it ran
    slow_path: str | None = None

    @property
    def todo_count(self) -> int:
        return sum(len(f.todos) for f in self.files)

    @property
    def exit_code(self) -> int:
        """0 done, 1 done with TODOs left, 2 usage/I/O/parse error."""
        if self.errors or any(f.error for f in self.files) or self.skipped:
            return 2
        return 1 if self.todo_count else 0


def _contexts(target: Target, rel: Path, base: TransformContext, the_plan: Plan) -> TransformContext:
    return replace(
        base,
        v3_packages=the_plan.v3_packages,
        v3_exports=the_plan.v3_exports,
        class_attributes=the_plan.class_attributes,
        attribute_reads=the_plan.attribute_reads.get(target.name, frozenset()),
        class_signatures=the_plan.class_signatures,
        package=target.name if target.is_package else None,
        package_depth=len(rel.parts) - 1,
        is_arch_module=target.is_package and rel == Path("arch.py"),
        is_package_init=target.is_package and rel == Path("__init__.py"),
    )


def _transform_job(args: tuple[str, str, TransformContext]) -> TransformResult | str:
    source, path, ctx = args
    try:
        return transform_source(source, path=path, context=ctx)
    except TransformError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - one bad file must not stop the run
        return f"{path}: internal error: {type(exc).__name__}: {exc}"


def apply_paths(
    paths: list[Path],
    *,
    out: Path | None = None,
    force: bool = False,
    diff: bool = False,
    jobs: int = 1,
    context: TransformContext | None = None,
    register: bool = False,
) -> ApplyReport:
    """Migrate ``paths`` (packages or files) to V3 variants written beside them."""
    base = context or TransformContext()
    the_plan: Plan = plan(paths, out=out)
    report = ApplyReport(errors=list(the_plan.errors), order=[t.name for t in the_plan.targets])
    report.slow_path = fast_path_problem()  # decided once here: forked workers inherit it
    jobs_in: list[tuple[str, str, TransformContext]] = []
    slots: list[tuple[Target, Path, Path, bytes | None]] = []  # target, src, rel, raw (non-.py)
    for target in the_plan.targets:
        for src, rel in target.files:
            try:
                raw = src.read_bytes()
            except OSError as exc:
                report.errors.append(f"{src}: cannot read: {exc.strerror}")
                continue
            if src.suffix != ".py":
                slots.append((target, src, rel, raw))
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                report.files.append(FileReport(str(src), "", error=f"{src}: cannot decode as UTF-8: {exc.reason}"))
                slots.append((target, src, rel, raw))
                continue
            jobs_in.append((text, str(src), _contexts(target, rel, base, the_plan)))
            slots.append((target, src, rel, None))
    results = _run(jobs_in, jobs)
    by_path = {path: (text, res) for (text, path, _), res in zip(jobs_in, results, strict=True)}
    with Stager(force=force or diff) as stager:
        staged_roots: dict[int, Path | None] = {}
        for target in the_plan.targets:
            if not diff and stager.blocked(target.dest):
                report.skipped.append(f"{target.dest}: exists (use --force to overwrite)")
                staged_roots[id(target)] = None
            elif not diff:
                staged_roots[id(target)] = stager.begin(target.dest)
        for target, src, rel, payload in slots:
            dest = target.dest / rel if target.is_package else target.dest
            root = staged_roots.get(id(target))
            if payload is not None:
                if root is not None:
                    stager.write(root, rel if target.is_package else None, payload)
                continue
            text, res = by_path[str(src)]
            fr = FileReport(str(src), str(dest))
            if isinstance(res, str):
                fr.error = res
                out_text = text
            else:
                fr.kind, fr.changed, fr.findings, fr.todos = res.kind, res.changed, res.findings, res.todos
                out_text = res.code
                if diff and res.changed:
                    fr.diff = "".join(
                        difflib.unified_diff(
                            text.splitlines(keepends=True),
                            out_text.splitlines(keepends=True),
                            fromfile=str(src),
                            tofile=str(dest),
                        )
                    )
            report.files.append(fr)
            if root is not None:
                stager.write(root, rel if target.is_package else None, out_text.encode("utf-8"))
        if not diff:
            report.written = [str(p) for p in stager.publish()]
    if not diff:
        for target in the_plan.targets:
            if target.is_package and str(target.dest) in report.written and out is None:
                report.registration.append(hint_for(target.source, target.dest.name, register=register))
    return report


def _run(jobs_in: list[tuple[str, str, TransformContext]], jobs: int) -> list[TransformResult | str]:
    if jobs <= 1 or len(jobs_in) < 2:
        return [_transform_job(j) for j in jobs_in]
    workers = min(jobs, os.cpu_count() or 1, len(jobs_in))
    # biggest files first so the workers finish together
    order = sorted(range(len(jobs_in)), key=lambda i: -len(jobs_in[i][0]))
    with process_pool(workers) as pool:
        done = list(pool.map(_transform_job, [jobs_in[i] for i in order], chunksize=4))
    results: list[TransformResult | str] = [""] * len(jobs_in)
    for i, res in zip(order, done, strict=True):
        results[i] = res
    return results
