"""The ``apply`` click command: thin glue over ``apply_paths`` plus the report."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from codemods.base import libcst_version
from migrate_v3.apply import ApplyReport, apply_paths
from migrate_v3.pipeline import TransformContext


def render_markdown(report: ApplyReport) -> str:
    """Every change and every manual item, as Markdown."""
    lines = ["# migrate-v3 apply report", ""]
    if report.slow_path:
        lines += [f"**Slow path:** {slow_path_message(report.slow_path)}", ""]
    lines.append(f"Files: {len(report.files)}; TODOs: {report.todo_count}; written: {len(report.written)}")
    lines.append("")
    for fr in report.files:
        lines.append(f"## {fr.source}")
        lines.append("")
        lines.append(f"→ `{fr.dest}` ({fr.kind}{', error: ' + fr.error if fr.error else ''})")
        pct = fr.migrated_pct
        if pct is not None:
            lines.append(f"Migrated automatically: {pct:.0f}%")
        lines.append("")
        if fr.findings:
            lines.append("| line | rule | change |")
            lines.append("|---:|---|---|")
            lines.extend(f"| {f.line} | {f.code} | {f.message} |" for f in fr.findings)
            lines.append("")
        if fr.todos:
            lines.append("Manual items (output line):")
            lines.append("")
            lines.extend(f"- [ ] line {t.line}: **{t.code}** {t.message}" for t in fr.todos)
            lines.append("")
    for hint in report.registration:
        lines.append(f"- registration: {hint.message}")
    return "\n".join(lines) + "\n"


def slow_path_message(problem: str) -> str:
    return (
        f"apply's fast path is unavailable ({problem}); libcst's own transformer ran instead: "
        "the same output, about 3x slower"
    )


def render_json(report: ApplyReport) -> str:
    data = {
        "files": [fr.to_json() for fr in report.files],
        "errors": report.errors + report.skipped,
        "written": report.written,
        "order": report.order,
        "registration": [h.message for h in report.registration],
        "todo_count": report.todo_count,
        "engine": {"fast": report.slow_path is None, "problem": report.slow_path},
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _verify_written(paths: list[Path], report: ApplyReport) -> int:
    """``apply --verify``: verify each source against the variant just written; worst exit code."""
    from migrate_v3.plan import v3_name
    from migrate_v3.verify import run_verify
    from migrate_v3.verify.render import render_text

    written = {Path(w).name: Path(w) for w in report.written}
    worst = 0
    for source in paths:
        target = written.get(v3_name(source))
        if target is None:
            continue
        result = run_verify(source, target, apply_report=report)
        render_text(result, sys.stdout)
        worst = max(worst, result.exit_code)
    return worst


def _summary(console: Console, report: ApplyReport) -> None:
    table = Table(title="migrate-v3 apply", show_lines=False)
    table.add_column("file")
    table.add_column("rewrites by rule")
    table.add_column("TODOs", justify="right")
    table.add_column("auto %", justify="right")
    for fr in report.files:
        if not fr.changed and not fr.todos and not fr.error:
            continue
        rules = " ".join(f"{code}×{n}" for code, n in sorted(fr.rewrites.items()))
        pct = fr.migrated_pct
        table.add_row(fr.source, rules or "-", str(len(fr.todos)), "-" if pct is None else f"{pct:.0f}%")
    console.print(table)
    kinds = Counter(t.code for fr in report.files for t in fr.todos)
    console.print(
        f"{len(report.files)} files, {sum(fr.changed for fr in report.files)} changed, "
        f"{report.todo_count} TODOs" + (f" ({', '.join(f'{c}×{n}' for c, n in kinds.most_common())})" if kinds else "")
    )


@click.command("apply")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), help="Write the V3 variants under DIR instead of beside the sources.")
@click.option("--force", is_flag=True, help="Overwrite existing *_modulev3 targets.")
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff; write nothing.")
@click.option("--report", "report_path", type=click.Path(path_type=Path, dir_okay=False), help="Write a Markdown (.md) or JSON (.json) report.")
@click.option("-j", "--jobs", default=1, show_default=True, type=click.IntRange(min=1), help="Worker processes.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes whose equivalence depends on V2-valid input.")
@click.option("--register", is_flag=True, help="Add the _ModuleV3 entry to the architectures registry.")
@click.option("--precise-names", is_flag=True, help="Resolve names with libcst scope analysis (slower).")
@click.option("--verify", "run_verify_after", is_flag=True,
              help="Run `migrate-v3 verify` on each V2 source and its new V3 variant (needs max).")
@click.option("-v", "--verbose", is_flag=True, help="Say on stderr which path the rewrite takes (fast or libcst's).")
def apply(
    paths: tuple[Path, ...],
    out: Path | None,
    force: bool,
    show_diff: bool,
    report_path: Path | None,
    jobs: int,
    unsafe_fixes: bool,
    register: bool,
    precise_names: bool,
    run_verify_after: bool,
    verbose: bool,
) -> None:
    """Write a ModuleV3 variant beside each V2 package (foo_modulev3/) or file (x_modulev3.py)."""
    err = sys.stderr
    context = TransformContext(unsafe_fixes=unsafe_fixes, precise_names=precise_names)
    report = apply_paths(
        list(paths), out=out, force=force, diff=show_diff, jobs=jobs, context=context, register=register
    )
    if report.slow_path:
        click.echo(f"warning: {slow_path_message(report.slow_path)}", file=err)
    elif verbose:
        click.echo(f"migrate-v3: fast path: the Engine's traversal on libcst {libcst_version()}", file=err)
    for message in [*report.errors, *report.skipped, *(f.error for f in report.files if f.error)]:
        click.echo(f"error: {message}", file=err)
    if show_diff:
        for fr in report.files:
            if fr.diff:
                click.echo(fr.diff, nl=False)
    else:
        _summary(Console(), report)
        for hint in report.registration:
            click.echo(hint.message)
    verify_code = _verify_written(list(paths), report) if run_verify_after and not show_diff else 0
    if report_path is not None:
        text = render_json(report) if report_path.suffix == ".json" else render_markdown(report)
        try:
            report_path.write_text(text, encoding="utf-8")
        except OSError as exc:
            click.echo(f"error: {report_path}: cannot write report: {exc.strerror}", file=err)
            raise SystemExit(2) from exc
    raise SystemExit(max(report.exit_code, verify_code))
