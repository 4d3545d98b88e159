"""Check results -> text, JSON, GitHub annotations or SARIF.

Plain lines (``path:line:col: CODE [fix] message``) are the stable interface;
a terminal also gets a rich summary table. rich is imported only then, so a
pre-commit run or a pipe pays nothing for it.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import IO, Any

from migrate_v3 import __version__
from migrate_v3.check import CheckReport
from migrate_v3.rules import RULES, Fix

FORMATS = ("text", "json", "github", "sarif")


def summary(report: CheckReport) -> dict[str, Any]:
    fixes: Counter[str] = Counter()
    codes: Counter[str] = Counter()
    for f in report.files:
        for finding in f.findings:
            fixes[finding.fix.value] += 1
            codes[finding.code] += 1
    return {
        "files": len(report.files),
        "kinds": report.kinds(),
        "findings": report.findings_count,
        "by_fix": {k.value: fixes.get(k.value, 0) for k in Fix},
        "by_code": dict(sorted(codes.items())),
        "errors": len(report.errors),
        "depends_on_v2": sorted({d for f in report.files for d in f.depends_on}),
    }


def _summary_line(s: dict[str, Any]) -> str:
    kinds = ", ".join(f"{k} {s['kinds'].get(k, 0)}" for k in ("v2", "mixed", "v3", "neutral"))
    fixes = ", ".join(f"{k} {v}" for k, v in s["by_fix"].items())
    return (
        f"Checked {s['files']} files ({kinds}): {s['findings']} findings ({fixes}); "
        f"{s['errors']} errors."
    )


def write_text(report: CheckReport, out: IO[str], *, terminal: bool) -> None:
    lines = [
        f"{f.path}:{x.line}:{x.col}: {x.code} [{x.fix.value}] {x.message}"
        for f in report.files
        for x in f.findings
    ]
    s = summary(report)
    if not terminal:
        for line in lines:
            out.write(line + "\n")
        out.write(_summary_line(s) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out, highlight=False)
    for f in report.files:
        for x in f.findings:
            style = {"auto": "green", "unsafe": "yellow", "manual": "red"}[x.fix.value]
            console.print(
                f"[bold]{f.path}[/]:{x.line}:{x.col}: [{style}]{x.code}[/] [{x.fix.value}] {x.message}",
                soft_wrap=True,
                markup=True,
            )
    table = Table(title="migrate-v3 check")
    table.add_column("kind")
    table.add_column("files", justify="right")
    for kind in ("v2", "mixed", "v3", "neutral"):
        table.add_row(kind, str(s["kinds"].get(kind, 0)))
    codes = Table(title="findings by rule")
    for column in ("code", "name", "fix", "count"):
        codes.add_column(column, justify="right" if column == "count" else "left")
    for code, count in s["by_code"].items():
        rule = RULES[code]
        codes.add_row(code, rule.name, rule.fix.value, str(count))
    console.print(table)
    if s["by_code"]:
        console.print(codes)
    if s["depends_on_v2"]:
        console.print("depends on V2 packages: " + ", ".join(s["depends_on_v2"]))
    console.print(_summary_line(s))


def write_json(report: CheckReport, out: IO[str]) -> None:
    data = {
        "tool": "migrate-v3",
        "version": __version__,
        "summary": summary(report),
        "files": [f.to_json() for f in report.files],
        "errors": [{"path": p, "error": e} for p, e in report.errors],
    }
    json.dump(data, out, indent=1)
    out.write("\n")


def _gh_escape(text: str, *, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def write_github(report: CheckReport, out: IO[str]) -> None:
    for f in report.files:
        for x in f.findings:
            level = "error" if x.fix is Fix.MANUAL else "warning"
            out.write(
                f"::{level} file={_gh_escape(f.path, prop=True)},line={x.line},col={x.col},"
                f"title={x.code}::{_gh_escape(f'{x.code} [{x.fix.value}] {x.message}')}\n"
            )
    for path, error in report.errors:
        out.write(f"::error file={_gh_escape(path, prop=True)}::{_gh_escape(error)}\n")


def write_sarif(report: CheckReport, out: IO[str]) -> None:
    used = sorted({x.code for f in report.files for x in f.findings})
    rules = [
        {
            "id": code,
            "name": RULES[code].name,
            "shortDescription": {"text": RULES[code].summary},
            "help": {"text": f"before: {RULES[code].before}\nafter: {RULES[code].after}"},
            "properties": {"fix": RULES[code].fix.value},
        }
        for code in used
    ]
    results = [
        {
            "ruleId": x.code,
            "ruleIndex": used.index(x.code),
            "level": "error" if x.fix is Fix.MANUAL else "warning",
            "message": {"text": x.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": f.path.replace("\\", "/")},
                        "region": {"startLine": x.line, "startColumn": x.col},
                    }
                }
            ],
        }
        for f in report.files
        for x in f.findings
    ]
    notifications = [
        {"level": "error", "message": {"text": f"{path}: {error}"}} for path, error in report.errors
    ]
    data = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "migrate-v3", "version": __version__, "rules": rules}},
                "results": results,
                "invocations": [
                    {"executionSuccessful": not report.errors, "toolExecutionNotifications": notifications}
                ],
            }
        ],
    }
    json.dump(data, out, indent=1)
    out.write("\n")
