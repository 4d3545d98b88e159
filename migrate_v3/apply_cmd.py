"""The ``apply`` click command: thin glue over ``apply_paths`` plus the report."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import TextIO

import click
from rich.console import Console
from rich.table import Table

from codemods.base import libcst_version
from migrate_v3.apply import ApplyReport, FileReport, apply_paths
from migrate_v3.pipeline import TransformContext


def render_markdown(report: ApplyReport) -> str:
    """Every change and every manual item, as Markdown."""
    lines = ["# migrate-v3 apply report", ""]
    if report.slow_path:
        lines += [f"**Slow path:** {slow_path_message(report.slow_path)}", ""]
    errors = report.error_lines
    lines.append(
        f"Files: {len(report.files)}; TODOs: {report.todo_count}; written: {len(report.written)}; "
        f"errors: {len(errors)}"
    )
    lines.append("")
    lines.extend(f"- error: {e}" for e in errors)
    lines.extend(f"- {note}" for note in report.notes)
    if errors or report.notes:
        lines.append("")
    for fr in report.files:
        lines.append(f"## {fr.source}")
        lines.append("")
        where = f"`{fr.dest}`" if fr.dest else "nothing written"
        lines.append(f"→ {where} ({fr.kind}{', error: ' + fr.error if fr.error else ''})")
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
        "errors": report.error_lines,
        "error_count": len(report.error_lines),
        "notes": report.notes,
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


def todo_lines(report: ApplyReport) -> list[str]:
    """Every TODO left in the written files, as check prints findings: ``path:line:col: CODE message``."""
    return [
        f"{fr.shown_dest or fr.dest}:{t.line}:{t.col + 1}: {t.code} {t.message}"
        for fr in report.files
        if fr.dest
        for t in fr.todos
    ]


def _rules(fr: FileReport) -> str:
    return " ".join(f"{code}×{n}" for code, n in sorted(fr.rewrites.items()))


def summary_line(report: ApplyReport) -> str:
    """What was written (only that is counted), how many TODOs it holds, how many errors."""
    written = [fr for fr in report.files if fr.dest]
    errors = len(report.error_lines)
    tail = f"; {errors} error{'s' if errors != 1 else ''}" if errors else ""
    if not report.written:
        return "Nothing written" + tail + "."
    files = "1 file" if len(written) == 1 else f"{len(written)} files"
    kinds = Counter(t.code for fr in written for t in fr.todos)
    todos = sum(kinds.values())
    by_code = f" ({', '.join(f'{c}×{n}' for c, n in kinds.most_common())})" if kinds else ""
    return (
        f"Wrote {', '.join(report.written_shown)}: {files}, "
        f"{sum(fr.changed for fr in written)} changed, {todos} TODOs{by_code}{tail}."
    )


def _summary(out: TextIO, report: ApplyReport, *, terminal: bool) -> None:
    """Nothing-to-migrate lines, TODO lines, what each changed file got (a rich table on a
    terminal, plain lines otherwise: paths are never cut), then the totals (none when every
    target had nothing to migrate: its one line says it all)."""
    rows = [fr for fr in report.files if fr.dest and (fr.changed or fr.todos)]
    head = [*report.notes, *todo_lines(report)]
    total = [summary_line(report)] if report.files or report.error_lines or report.written else []
    if not terminal:
        for fr in rows:
            pct = fr.migrated_pct
            auto = "" if pct is None else f", {pct:.0f}% automatic"
            head.append(f"{fr.shown_source}: rewrites {_rules(fr) or '-'}; {len(fr.todos)} TODOs{auto}")
        out.writelines(f"{line}\n" for line in [*head, *total])
        return
    console = Console(file=out, highlight=False)
    for line in head:
        console.print(line, markup=False, soft_wrap=True)
    if rows:
        table = Table(title="migrate-v3 apply", show_lines=False)
        table.add_column("file", overflow="fold")
        table.add_column("rewrites by rule")
        table.add_column("TODOs", justify="right")
        table.add_column("auto %", justify="right")
        for fr in rows:
            pct = fr.migrated_pct
            table.add_row(fr.shown_source, _rules(fr) or "-", str(len(fr.todos)), "-" if pct is None else f"{pct:.0f}%")
        console.print(table)
    for line in total:
        console.print(line, markup=False, soft_wrap=True)


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
    # a rewrite's line and column appear only in the report: without one, no codegen for them
    context = TransformContext(unsafe_fixes=unsafe_fixes, precise_names=precise_names, positions=report_path is not None)
    report = apply_paths(
        list(paths), out=out, force=force, diff=show_diff, jobs=jobs, context=context, register=register
    )
    if report.slow_path:
        click.echo(f"warning: {slow_path_message(report.slow_path)}", file=sys.stderr)
    elif verbose:
        click.echo(f"migrate-v3: fast path: the Engine's traversal on libcst {libcst_version()}", file=sys.stderr)
    for message in report.error_lines:
        click.echo(f"error: {message}", file=sys.stderr)
    if show_diff:
        for fr in report.files:
            if fr.diff:
                click.echo(fr.diff, nl=False)
    else:
        _summary(sys.stdout, report, terminal=sys.stdout.isatty())
        for hint in report.registration:
            click.echo(hint.message)
    verify_code = _verify_written(list(paths), report) if run_verify_after and not show_diff else 0
    if report_path is not None:
        text = render_json(report) if report_path.suffix == ".json" else render_markdown(report)
        try:
            report_path.write_text(text, encoding="utf-8")
        except OSError as exc:
            click.echo(f"error: {report_path}: cannot write report: {exc.strerror}", file=sys.stderr)
            raise SystemExit(2) from exc
    raise SystemExit(max(report.exit_code, verify_code))
