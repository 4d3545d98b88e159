"""``apply``: plan targets, run the pipeline per file, stage, publish, report.

The V2 source is never modified. All outputs are staged and moved into place
only at the end. A target where ``check`` finds nothing to migrate (a folder
without Python, a package that is already ModuleV3) is not written, nor is a
target whose output exists (without ``--force``). Every Python file written
is first proven to parse with CPython's grammar, whatever path it took
through the pipeline; a file that cannot be read, decoded or parsed gets one
error line (check's wording and line), nothing is written for it, the run
goes on and exits 2.
"""

from __future__ import annotations

import difflib
import io
import os
import tokenize
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from codemods.base import fast_path_problem
from migrate_v3.classify import Classified, SourceError, compiled_by_python, decode
from migrate_v3.emit import Stager
from migrate_v3.findings import Finding
from migrate_v3.pipeline import (
    TransformContext,
    TransformError,
    TransformResult,
    transform_kind,
    transform_source,
)
from migrate_v3.plan import Plan, Target, plan, v3_name
from migrate_v3.registration import OutputNames, RegistrationHint, hint_for
from migrate_v3.scan import RELEASE_CODES, syntax_error
from migrate_v3.triage import classify_sources, needing_migration
from migrate_v3.workers import process_pool


@dataclass
class FileReport:
    """What ``apply`` did to one file (``dest`` empty: nothing was written for it)."""

    source: str
    dest: str
    kind: str = "neutral"
    changed: bool = False
    findings: list[Finding] = field(default_factory=list)
    todos: list[Finding] = field(default_factory=list)
    error: str | None = None
    diff: str | None = None
    #: ``source`` and ``dest`` as printed: relative to the argument as the user spelled it
    shown_source: str = ""
    shown_dest: str = ""

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
    #: ``written`` as printed (relative to the arguments)
    written_shown: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    #: one line per target with nothing to migrate (nothing written for it)
    notes: list[str] = field(default_factory=list)
    registration: list[RegistrationHint] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    #: why the fast path could not run (libcst's transformer ran: same output, slower); None: it ran
    slow_path: str | None = None

    @property
    def todo_count(self) -> int:
        return sum(len(f.todos) for f in self.files)

    @property
    def error_lines(self) -> list[str]:
        """Every error, one line each: paths, existing targets, then files (nothing written for them)."""
        return [*self.errors, *self.skipped, *(f.error for f in self.files if f.error)]

    @property
    def exit_code(self) -> int:
        """0 done, 1 done with TODOs left, 2 usage/I/O/parse error."""
        if self.error_lines:
            return 2
        return 1 if self.todo_count else 0


def _contexts(
    target: Target, rel: Path, base: TransformContext, the_plan: Plan, classified: Classified | None = None,
    scanned: tuple[str, str | None] | None = None,
) -> TransformContext:
    return replace(
        base,
        v3_packages=the_plan.v3_packages,
        v3_exports=the_plan.v3_exports,
        class_attributes=the_plan.class_attributes,
        attribute_reads=the_plan.attribute_reads.get(target.name, frozenset()),
        variant_models=the_plan.variant_models.get(target.name, frozenset()),
        class_signatures=the_plan.class_signatures,
        init_owners=the_plan.init_owners,
        data_classes=the_plan.data_classes,
        class_fields=the_plan.class_fields,
        field_decls=the_plan.field_decls,
        library_bases=the_plan.library_bases,
        call_signatures=the_plan.call_signatures,
        call_keywords=the_plan.call_keywords.get(target.name),
        neutral_modules=the_plan.neutral_modules,
        package=target.name if target.is_package else None,
        package_depth=len(rel.parts) - 1,
        file_package=".".join((target.name, *rel.parent.parts)) if target.is_package else "",
        module_classes=the_plan.module_classes,
        is_arch_module=target.is_package and rel == Path("arch.py"),
        is_package_init=target.is_package and rel == Path("__init__.py"),
        old_release_names=classified is None or any(f.code in RELEASE_CODES for f in classified.result.findings),
        source_kind=None if scanned is None else transform_kind(*scanned),
    )


@dataclass
class _Job:
    """One ``.py`` file to migrate: runs in a worker process."""

    source: str  # the real path (its bytecode cache can prove the bytes parse)
    shown: str
    raw: bytes
    context: TransformContext


@dataclass
class _Done:
    """A job's outcome: the result and the bytes to write, or one error line."""

    result: TransformResult | None = None
    data: bytes | None = None
    error: str | None = None


def _encode(code: str, raw: bytes) -> bytes:
    """``code`` in the source's own encoding (its PEP 263 cookie, its BOM)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    return code.encode(encoding)


def _parse_problem(data: bytes, path: str) -> str | None:
    """Why the bytes about to be written would not parse, read as the interpreter reads them."""
    try:
        return syntax_error(decode(data), path)
    except SourceError as exc:
        return str(exc)


def _transform_job(job: _Job) -> _Done:
    """Migrate one file and prove that what will be written parses (CPython's grammar)."""
    text = decode(job.raw)  # check decoded it already: it does not fail here
    try:
        res = transform_source(text, path=job.shown, context=job.context)
    except TransformError as exc:
        problem = syntax_error(text, job.shown)  # CPython's line and words, as check reports
        return _Done(error=f"{job.shown}: {problem}" if problem else str(exc))
    except Exception as exc:  # noqa: BLE001 - one bad file must not stop the run
        return _Done(error=f"{job.shown}: internal error: {type(exc).__name__}: {exc}")
    try:
        data = job.raw if res.code == text else _encode(res.code, job.raw)
    except UnicodeEncodeError as exc:
        return _Done(error=f"{job.shown}: the migrated code cannot be encoded as {exc.encoding}: {exc.reason}")
    if data is job.raw and compiled_by_python(job.source, data):
        return _Done(res, data)  # a valid bytecode cache of these bytes proves they parse
    if res.parsed and data is not job.raw:
        return _Done(res, data)  # the rewrite's last pass parsed this very text
    problem = _parse_problem(data, job.shown)
    if problem is None:
        return _Done(res, data)
    before = problem if data is job.raw else syntax_error(text, job.shown)
    if before is not None:
        return _Done(error=f"{job.shown}: {before}")
    return _Done(error=f"{job.shown}: internal error: the migrated code does not parse ({problem})")


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
    the_plan: Plan = plan(paths, out=out, force=force or diff)
    report = ApplyReport(errors=list(the_plan.errors), order=[t.name for t in the_plan.targets])
    report.slow_path = fast_path_problem()  # decided once here: forked workers inherit it
    raws: dict[Path, bytes] = {}
    for target in the_plan.targets:
        for src, rel in target.files:
            try:
                raws[src] = src.read_bytes()
            except OSError as exc:
                report.errors.append(f"{target.show(rel)}: cannot read: {exc.strerror}")
    classified, scanned = classify_sources({str(p): data for p, data in raws.items() if p.suffix == ".py"})
    needed = needing_migration(the_plan.targets, classified, the_plan.v3_packages)
    with Stager(force=force or diff) as stager:
        todo: list[Target] = []
        for target in the_plan.targets:
            py = [(src, rel) for src, rel in target.files if src.suffix == ".py"]
            bad = [  # check's error lines: undecodable, or V2 code that does not parse
                FileReport(str(src), "", error=f"{target.show(rel)}: {c.result.error}", shown_source=target.show(rel))
                for src, rel in py
                if (c := classified.get(str(src))) is not None and c.result.error is not None
            ]
            if id(target) not in needed:
                bad += _unparsable(target, py, raws, classified)
                if not py or len(bad) < len(py):  # (when every file is bad, their errors say it all)
                    why = "no Python files" if not py else "check finds no V2 code" + (" in the others" if bad else "")
                    report.notes.append(f"{target.show(Path())}: nothing to migrate ({why}); nothing written")
            report.files.extend(bad)
            if id(target) not in needed:
                if not (target.source.parent / v3_name(target.source)).is_dir():
                    the_plan.v3_packages.pop(target.name, None)  # no variant to point imports at
            elif stager.blocked(target.dest):
                report.skipped.append(
                    f"{target.show_dest()}: exists (use --force to overwrite); nothing written for {target.show(Path())}"
                )
            else:
                todo.append(target)
        jobs_in = [
            _Job(str(src), target.show(rel), raws[src],
                 _contexts(target, rel, base, the_plan, classified[str(src)], scanned[str(src)]))
            for target in todo
            for src, rel in target.files
            if src.suffix == ".py" and src in raws and classified[str(src)].result.error is None
        ]
        done = dict(zip((j.source for j in jobs_in), _run(jobs_in, jobs), strict=True))
        names: dict[int, OutputNames] = {}
        for target in todo:
            root = None if diff else stager.begin(target.dest)
            for src, rel in target.files:
                staged_rel = rel if target.is_package else None
                if src.suffix != ".py" and src in raws:
                    if root is not None:
                        stager.write(root, staged_rel, raws[src])
                elif str(src) in done:
                    fr = _file_report(target, src, rel, done[str(src)], raws[src] if diff else None)
                    report.files.append(fr)
                    data = done[str(src)].data
                    if root is not None and data is not None:
                        stager.write(root, staged_rel, data)
            if target.is_package:
                names[id(target)] = _output_names(target, done)
        if not diff:
            published = {str(p) for p in stager.publish()}
            written = [t for t in todo if str(t.dest) in published]
            report.written = [str(t.dest) for t in written]
            report.written_shown = [t.show_dest() for t in written]
            if out is None:
                report.registration = [
                    hint_for(t.source, t.dest.name, register=register, names=names[id(t)])
                    for t in written
                    if t.is_package
                ]
    return report


def _unparsable(
    target: Target, py: list[tuple[Path, Path]], raws: dict[Path, bytes], classified: dict[str, Classified]
) -> list[FileReport]:
    """An error for each file of a target with nothing to migrate that Python could not parse
    (check parses only files with findings; apply vouches for every file it is given)."""
    out = []
    for src, rel in py:
        if src in raws and classified[str(src)].result.error is None and not compiled_by_python(str(src), raws[src]):
            problem = _parse_problem(raws[src], target.show(rel))
            if problem is not None:
                out.append(FileReport(str(src), "", error=f"{target.show(rel)}: {problem}", shown_source=target.show(rel)))
    return out


def _file_report(target: Target, src: Path, rel: Path, done: _Done, diff_from: bytes | None) -> FileReport:
    """The report of one migrated file; ``diff_from``: its source, to diff against."""
    shown = target.show(rel)
    if done.result is None or done.data is None:
        return FileReport(str(src), "", error=done.error, shown_source=shown)
    res = done.result
    dest = target.dest / rel if target.is_package else target.dest
    fr = FileReport(str(src), str(dest), res.kind, res.changed, res.findings, res.todos,
                    shown_source=shown, shown_dest=target.show_dest(rel))
    if diff_from is not None and res.changed:
        fr.diff = "".join(
            difflib.unified_diff(
                decode(diff_from).splitlines(keepends=True),
                res.code.splitlines(keepends=True),
                fromfile=str(src),
                tofile=str(dest),
            )
        )
    return fr


def _output_names(target: Target, done: dict[str, _Done]) -> OutputNames:
    """What the written ``__init__.py`` and ``arch.py`` of ``target`` define."""
    code: dict[str, str | None] = {"__init__.py": None, "arch.py": None}
    for src, rel in target.files:
        result = done[str(src)].result if str(src) in done else None
        if str(rel) in code and result is not None and done[str(src)].data is not None:
            code[str(rel)] = result.code
    return OutputNames.of(code["__init__.py"], code["arch.py"])


def _run(jobs_in: list[_Job], jobs: int) -> list[_Done]:
    if jobs <= 1 or len(jobs_in) < 2:
        return [_transform_job(j) for j in jobs_in]
    workers = min(jobs, os.cpu_count() or 1, len(jobs_in))
    # biggest files first so the workers finish together
    order = sorted(range(len(jobs_in)), key=lambda i: -len(jobs_in[i].raw))
    with process_pool(workers) as pool:
        results = list(pool.map(_transform_job, [jobs_in[i] for i in order], chunksize=4))
    out: list[_Done] = [_Done()] * len(jobs_in)
    for i, res in zip(order, results, strict=True):
        out[i] = res
    return out
