"""The ``migrate-v3`` command line: a thin click layer over plain functions.

Exit codes (stable): 0 nothing to migrate / success, 1 something to migrate or
a check failed, 2 usage or I/O error. Subcommands that need heavy imports
(libcst for ``apply``, ``max`` for ``verify`` and ``weights``) are loaded only
when invoked, so ``check`` starts fast.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import click

from migrate_v3 import __version__

EXIT_OK, EXIT_FOUND, EXIT_ERROR = 0, 1, 2

_LAZY = {
    "apply": ("migrate_v3.apply_cmd", "apply"),
    "verify": ("migrate_v3.verify_cmd", "verify"),
    "weights": ("migrate_v3.weights.cli", "weights"),
}


class _LazyGroup(click.Group):
    """Imports a subcommand's module only when that subcommand runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self._available()])

    def _available(self) -> list[str]:
        return [n for n, (mod, _) in _LAZY.items() if importlib.util.find_spec(mod) is not None]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in _LAZY:
            module, attr = _LAZY[name]
            try:
                command: click.Command = getattr(importlib.import_module(module), attr)
            except ModuleNotFoundError as exc:
                if exc.name == module:
                    return None
                raise
            return command
        return super().get_command(ctx, name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="migrate-v3")
def main() -> None:
    """Migrate Modular MAX model source from the V2 API to ModuleV3."""


def _codes(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(c.strip().upper() for v in values for c in v.split(",") if c.strip())


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "github", "sarif"]), default=None,
              help="Output format (default: text).")
@click.option("--select", multiple=True, help="Only these rule codes or prefixes (e.g. MV34,MV370).")
@click.option("--ignore", multiple=True, help="Skip these rule codes or prefixes.")
@click.option("--exclude", multiple=True, help="Glob of paths to skip (repeatable).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when V2 code is found.")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=None, help="Worker processes (0: one per core).")
@click.option("--no-cache", is_flag=True, help="Ignore and do not write the content-hash cache.")
@click.option("--no-syntax-check", is_flag=True, help="Do not parse files to report syntax errors (faster).")
def check(
    paths: tuple[Path, ...], fmt: str | None, select: tuple[str, ...], ignore: tuple[str, ...],
    exclude: tuple[str, ...], exit_zero: bool, jobs: int | None, no_cache: bool, no_syntax_check: bool,
) -> None:
    """Report, read-only, what `apply` would change in each V2 or mixed file.

    Findings read `path:line:col: MV3xx [auto|unsafe|manual] message`.
    Exit 0: nothing to migrate; 1: V2 or mixed code found; 2: usage or I/O error.
    """
    from migrate_v3.check import run_check
    from migrate_v3.config import ConfigError, load_settings
    from migrate_v3.report import write_github, write_json, write_sarif, write_text

    try:
        settings = load_settings(Path.cwd())
    except ConfigError as exc:
        click.echo(f"migrate-v3: error: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    if select:
        settings.select = _codes(select)
    if ignore:
        settings.ignore = _codes(ignore)
    settings.exclude = tuple(settings.exclude) + exclude
    if jobs is not None:
        settings.jobs = jobs
    if no_cache:
        settings.cache = False
    if no_syntax_check:
        settings.syntax = False
    fmt = fmt or settings.format
    report = run_check(list(paths), settings)
    for path, reason in report.errors:
        click.echo(f"migrate-v3: error: {path}: {reason}", err=True)
    out = sys.stdout
    if fmt == "json":
        write_json(report, out)
    elif fmt == "github":
        write_github(report, out)
    elif fmt == "sarif":
        write_sarif(report, out)
    else:
        write_text(report, out, terminal=out.isatty())
    if report.errors:
        sys.exit(EXIT_ERROR)
    if report.findings_count and not exit_zero:
        sys.exit(EXIT_FOUND)
    sys.exit(EXIT_OK)


@main.command()
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def rules(fmt: str) -> None:
    """List every rule code with a one-line before/after example."""
    from migrate_v3.rules import RULES

    if fmt == "json":
        data: list[dict[str, Any]] = [
            {"code": r.code, "name": r.name, "fix": r.fix.value, "summary": r.summary,
             "before": r.before, "after": r.after}
            for r in RULES.values()
        ]
        click.echo(json.dumps(data, indent=1))
        return
    for r in RULES.values():
        click.echo(f"{r.code} {r.name} [{r.fix.value}]: {r.summary}")
        click.echo(f"    before: {r.before}")
        click.echo(f"    after:  {r.after}")


if __name__ == "__main__":
    main()
