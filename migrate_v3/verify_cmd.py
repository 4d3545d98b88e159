"""``migrate-v3 verify V2_PATH V3_PATH``: the click command.

Thin glue over :func:`migrate_v3.verify.run_verify`; ``max`` is imported
only when the command runs.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import click


def _pairs(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        v2, sep, v3 = value.partition("=")
        if not sep:
            raise click.BadParameter(f"{value!r}: expected V2NAME=V3NAME")
        out[v2] = v3
    return out


@click.command("verify")
@click.argument("v2_path", type=click.Path(exists=True, path_type=Path))
@click.argument("v3_path", type=click.Path(exists=True, path_type=Path))
@click.option("--spec", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Python spec (CASES) or a pyproject.toml with [tool.migrate-v3.verify].")
@click.option("--weights", type=click.Path(exists=True, path_type=Path),
              help="A safetensors file or directory to use instead of seeded random weights.")
@click.option("--device", default="cpu", show_default=True, help="cpu or gpu[:N].")
@click.option("--dtype", default=None, help="Run dtype (default: spec's, else float32).")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--only", multiple=True, help="Verify only this class (repeatable).")
@click.option("--all-classes", is_flag=True, help="Compile every paired class, not only roots.")
@click.option("--pair", "pairs", multiple=True, help="Pair a renamed class: V2NAME=V3NAME.")
@click.option("--no-auto", is_flag=True, help="Only classes the spec names.")
@click.option("--no-mypy", is_flag=True, help="Skip the mypy comparison.")
@click.option("--no-compile", is_flag=True, help="Static checks only (keys, hyper-parameters).")
@click.option("--mypy-cache", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="mypy cache directory (default ~/.cache/migrate-v3/mypy).")
@click.option("--apply-report", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="apply's --report JSON: attach its TODOs to the classes that fail.")
@click.option("--greedy", default=0, type=int, help="Also compare N greedy tokens (text models).")
@click.option("--graph-per-class", is_flag=True,
              help="Compile each root class alone (default: all roots in one graph per side, "
                   "each class alone again only if that graph fails).")
@click.option("--atol", type=float, default=None, help="Override the dtype's absolute tolerance.")
@click.option("--rtol", type=float, default=None, help="Override the dtype's relative tolerance.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def verify(v2_path: Path, v3_path: Path, spec: Path | None, weights: Path | None, device: str,
           dtype: str | None, seed: int, only: tuple[str, ...], all_classes: bool,
           pairs: tuple[str, ...], no_auto: bool, no_mypy: bool, no_compile: bool, mypy_cache: Path | None, apply_report: Path | None, greedy: int,
           graph_per_class: bool,
           atol: float | None, rtol: float | None, fmt: str) -> None:
    """Prove a migration: V2 vs V3 numerics, weight-key alignment, mypy.

    Exit codes: 0 all pass, 1 a mismatch, 2 could not run.
    """
    from migrate_v3.verify.render import render_json, render_text
    from migrate_v3.verify.runner import run_verify

    tolerance = None
    if atol is not None or rtol is not None:
        tolerance = (atol or 0.0, rtol or 0.0)
    report = run_verify(
        v2_path, v3_path, spec=spec, weights=weights, device=device, dtype=dtype, seed=seed,
        only=list(only) or None, all_classes=all_classes, pairs=_pairs(pairs),
        auto=not no_auto, mypy=not no_mypy, compile=not no_compile, greedy=greedy,
        tolerance=tolerance, progress=fmt == "text", mypy_cache=mypy_cache,
        apply_report=apply_report, one_graph=not graph_per_class,
    )
    out = io.StringIO()
    if fmt == "json":
        render_json(report, out)
    else:
        render_text(report, out, color=sys.stdout.isatty())
    click.echo(out.getvalue(), nl=False)
    sys.exit(report.exit_code)
