"""Render a VerifyReport: a rich summary table for people, JSON for tools."""

from __future__ import annotations

import json
from typing import TextIO

from migrate_v3.verify.report import ClassResult, VerifyReport

_STYLE = {"pass": "green", "fail": "red", "error": "yellow", "skipped": "dim"}


def _errors(c: ClassResult) -> str:
    if not c.outputs:
        return "-"
    return ", ".join(f"{o.max_abs:.2g}/{o.max_rel:.2g}" for o in c.outputs)


def _keys(c: ClassResult) -> str:
    if c.alignment is None:
        return "-"
    if c.alignment.ok:
        return f"{c.alignment.checkpoint_keys} ok"
    return f"{len(c.alignment.issues)} issues"


def render_text(report: VerifyReport, stream: TextIO, color: bool = False) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=stream, force_terminal=color, no_color=not color, width=120)
    table = Table(title=f"verify {report.v2_path} -> {report.v3_path} ({report.device})")
    for col in ("class", "status", "dtype", "keys", "outputs abs/rel", "detail"):
        table.add_column(col, overflow="fold")
    for c in report.classes:
        detail = "; ".join(c.causes[:4]) if c.status != "pass" else (c.reason or "")
        if c.greedy is not None:
            detail = (detail + f" greedy {c.greedy.steps} steps "
                      f"{'match' if c.greedy.passed else 'DIFFER'}").strip()
        table.add_row(c.name, f"[{_STYLE[c.status]}]{c.status}[/]", c.dtype or "-", _keys(c),
                      _errors(c), detail)
    console.print(table)
    warnings = [(c.name, h) for c in report.classes for h in c.hparams if h.severity == "warning"]
    for name, h in warnings:
        console.print(f"warning {name}: {h.path or '<root>'}.{h.name}: V2 {h.v2} vs V3 {h.v3} {h.why}")
    if report.mypy is not None:
        m = report.mypy
        if m.error:
            console.print(f"mypy could not run: {m.error}")
        else:
            verdict = "ok" if m.passed else "MORE ERRORS THAN V2"
            console.print(f"mypy: V3 {m.v3_errors} errors vs V2 {m.v2_errors} ({verdict})")
            for f in m.v3_files:
                console.print(f"  {f.path}: {f.errors}")
    if report.classes and not report.error:
        console.print(coverage_line(report))
    if report.error:
        console.print(f"[red]could not run:[/] {report.error}")
    console.print(
        f"exit {report.exit_code}; {report.graphs_compiled} graphs compiled or loaded from the "
        f"cache; {report.seconds:.1f}s"
    )


def coverage_line(report: VerifyReport) -> str:
    """What the verdict rests on: how many classes were compared, and which roots were not."""
    cov = report.coverage
    if report.compile_requested:
        text = f"compared {cov['numeric']} of {cov['classes']} classes numerically"
        if cov["static_only"]:
            text += f"; {cov['static_only']} only by keys and hyper-parameters (no inputs)"
    else:
        text = f"compared {cov['compared']} of {cov['classes']} classes by keys and hyper-parameters (not compiled)"
    if cov["roots_not_compared"]:
        text += f"; root model not compared: {', '.join(cov['roots_not_compared'])}"
    if cov["not_compared"]:
        text += f"; not compared: {', '.join(cov['not_compared'])}"
    if report.exit_code == 3:
        text += " -- NOT VERIFIED (exit 3)"
    return text


def render_json(report: VerifyReport, stream: TextIO) -> None:
    json.dump(report.to_json(), stream, indent=2, default=str)
    stream.write("\n")
