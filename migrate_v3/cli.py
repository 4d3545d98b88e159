"""The ``migrate-v3`` command line: a thin click layer over plain functions.

Exit codes (stable): 0 nothing to migrate / success, 1 something to migrate or
a check failed, 2 usage or I/O error. Subcommands that need heavy imports
(libcst for ``apply``, ``max`` for ``verify`` and ``weights``) are loaded only
when invoked, so ``check`` starts fast.

``check`` is what pre-commit and CI run over whole trees, so its common
command lines do not even import click: ``main`` is a small object that
parses ``check``'s own options directly and hands anything else (other
commands, ``--help``, anything it does not recognise, every usage error) to
the click group, built on first use. Tests invoke that group through
``CliRunner`` (``main.main(...)``), so both paths run the same ``run_check_command``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from migrate_v3 import __version__

EXIT_OK, EXIT_FOUND, EXIT_ERROR = 0, 1, 2

_LAZY = {
    "apply": ("migrate_v3.apply_cmd", "apply"),
    "verify": ("migrate_v3.verify_cmd", "verify"),
    "weights": ("migrate_v3.weights.cli", "weights"),
}

FORMATS = ("text", "json", "github", "sarif")


def _codes(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(c.strip().upper() for v in values for c in v.split(",") if c.strip())


def run_check_command(
    paths: Sequence[Path], fmt: str | None, select: Sequence[str], ignore: Sequence[str],
    exclude: Sequence[str], exit_zero: bool, jobs: int | None, no_cache: bool, no_syntax_check: bool,
    verbose: bool = False,
) -> int:
    """``check`` itself, shared by the click command and the fast path; returns the exit code."""
    from migrate_v3.check import run_check
    from migrate_v3.config import ConfigError, load_settings

    if verbose:
        from migrate_v3.scan import speedups_state

        sys.stderr.write(f"migrate-v3: scanner: {speedups_state()}\n")

    try:
        settings = load_settings(Path.cwd())
    except ConfigError as exc:
        sys.stderr.write(f"migrate-v3: error: {exc}\n")
        sys.stderr.flush()
        return EXIT_ERROR
    if select:
        settings.select = _codes(select)
    if ignore:
        settings.ignore = _codes(ignore)
    settings.exclude = tuple(settings.exclude) + tuple(exclude)
    if jobs is not None:
        settings.jobs = jobs
    if no_cache:
        settings.cache = False
    if no_syntax_check:
        settings.syntax = False
    fmt = fmt or settings.format
    out = sys.stdout
    # Plain text lines are formatted by the workers, in parallel.
    report = run_check(list(paths), settings, text=fmt == "text" and not out.isatty())
    if report.errors:
        sys.stderr.write("".join(f"migrate-v3: error: {path}: {reason}\n" for path, reason in report.errors))
        sys.stderr.flush()
    if fmt == "json":
        from migrate_v3.report import write_json

        write_json(report, out)
    elif fmt == "github":
        from migrate_v3.report import write_github

        write_github(report, out)
    elif fmt == "sarif":
        from migrate_v3.report import write_sarif

        write_sarif(report, out)
    else:
        from migrate_v3.report import write_text

        write_text(report, out, terminal=out.isatty())
    if report.errors:
        return EXIT_ERROR
    if report.findings_count and not exit_zero:
        return EXIT_FOUND
    return EXIT_OK


# --- the fast path: `check` without click ------------------------------------------------

_VALUE_OPTIONS = {"--format": "fmt", "--select": "select", "--ignore": "ignore", "--exclude": "exclude",
                  "-j": "jobs", "--jobs": "jobs"}
_FLAGS = {"--exit-zero": "exit_zero", "--no-cache": "no_cache", "--no-syntax-check": "no_syntax_check",
          "-v": "verbose", "--verbose": "verbose"}


def _parse_check(args: Sequence[str]) -> dict[str, Any] | None:
    """``check``'s keyword arguments from ``args``, or None for click to handle.

    Accepts exactly the forms click accepts for these options and nothing
    else; ``--help``, an unknown option, a bad value or a missing path go to
    click so that its usage messages and exit code 2 stay the only ones.
    """
    if not args or args[0] != "check":
        return None
    parsed: dict[str, Any] = {"paths": [], "fmt": None, "select": [], "ignore": [], "exclude": [],
                              "exit_zero": False, "jobs": None, "no_cache": False, "no_syntax_check": False,
                              "verbose": False}
    rest = list(args[1:])
    rest.reverse()
    while rest:
        arg = rest.pop()
        if arg == "--":
            parsed["paths"].extend(reversed(rest))
            break
        if not arg.startswith("-"):
            parsed["paths"].append(arg)
            continue
        if arg in _FLAGS:
            parsed[_FLAGS[arg]] = True
            continue
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
        elif arg.startswith("-j"):
            name, value = "-j", arg[2:]  # click's attached short value: -j2
            eq = "=" if value else ""
        else:
            return None
        key = _VALUE_OPTIONS.get(name)
        if key is None:
            return None
        if not eq:
            if not rest or rest[-1].startswith("-"):
                return None
            value = rest.pop()
        if key == "jobs":
            if not (value.isascii() and value.isdigit()):
                return None
            parsed["jobs"] = int(value)
        elif key == "fmt":
            if value not in FORMATS:
                return None
            parsed["fmt"] = value
        else:
            parsed[key].append(value)
    if not parsed["paths"] or any(not p for p in parsed["paths"]):
        return None
    parsed["paths"] = [Path(p) for p in parsed["paths"]]
    return parsed


def _exit_fast(code: int, *, whole_process: bool) -> None:
    """Flush and exit; ``whole_process`` (the console entry point) skips the interpreter's
    teardown, which frees the run's ~100k objects one by one for nothing."""
    import os

    try:
        sys.stdout.flush()
    except BrokenPipeError:
        # Like click: a closed pipe (``| head``) is not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    if whole_process:
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


class _Entry:
    """The console entry point: ``check`` directly, everything else through click."""

    name = "main"

    def __call__(self, args: Sequence[str] | None = None, **extra: Any) -> Any:
        if not extra:
            parsed = _parse_check(sys.argv[1:] if args is None else list(args))
            if parsed is not None:
                # A short-lived process that builds ~100k objects and frees them
                # all at exit: the cyclic collector's passes are pure cost (5-8%).
                import gc

                gc.disable()
                try:
                    code = run_check_command(**parsed)
                except BrokenPipeError:
                    code = 1
                _exit_fast(code, whole_process=args is None)
        return _group()(args, **extra)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        return _group().main(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(_group(), name)


main: Any = _Entry()


# --- the click group ---------------------------------------------------------------------


@cache
def _group() -> Any:
    import importlib
    import importlib.util
    import json

    import click

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

    @main.command()
    @click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
    @click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default=None,
                  help="Output format (default: text).")
    @click.option("--select", multiple=True, help="Only these rule codes or prefixes (e.g. MV34,MV370).")
    @click.option("--ignore", multiple=True, help="Skip these rule codes or prefixes.")
    @click.option("--exclude", multiple=True, help="Glob of paths to skip (repeatable).")
    @click.option("--exit-zero", is_flag=True, help="Exit 0 even when V2 code is found.")
    @click.option("-j", "--jobs", type=click.IntRange(min=0), default=None, help="Worker processes (0: one per core).")
    @click.option("--no-cache", is_flag=True, help="Ignore and do not write the content-hash cache.")
    @click.option("--no-syntax-check", is_flag=True, help="Do not parse files to report syntax errors (faster).")
    @click.option("-v", "--verbose", is_flag=True, help="Say on stderr which scanner runs (C speed-ups or Python).")
    def check(
        paths: tuple[Path, ...], fmt: str | None, select: tuple[str, ...], ignore: tuple[str, ...],
        exclude: tuple[str, ...], exit_zero: bool, jobs: int | None, no_cache: bool, no_syntax_check: bool,
        verbose: bool,
    ) -> None:
        """Report, read-only, what `apply` would change in each V2 or mixed file.

        Findings read `path:line:col: MV3xx [auto|unsafe|manual] message`.
        Exit 0: nothing to migrate; 1: V2 or mixed code found; 2: usage or I/O error.
        """
        sys.exit(run_check_command(paths, fmt, select, ignore, exclude, exit_zero, jobs, no_cache, no_syntax_check,
                                   verbose))

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

    return main


if __name__ == "__main__":
    main()
