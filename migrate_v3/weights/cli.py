"""`migrate-v3 weights`: check a checkpoint's names against a V3 module, plan shards.

Exit codes: 0 clean, 1 problems found, 2 usage or I/O error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from .rules import RuleError
from .ruleset import RuleSet
from .sources import Checkpoint, SourceError, load_checkpoint
from .target import Target, TargetError, load_module_target, load_names_target
from .templates import TEMPLATES, get_template, guess_template


class InputError(click.ClickException):
    """Usage or I/O problem: exit code 2."""

    exit_code = 2


def _load_config(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: invalid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InputError(f"{path}: config must be a JSON object")
    return data


def _ruleset(config: dict[str, Any], rules_file: Path | None, template: str | None) -> tuple[RuleSet, str, str | None]:
    """The rule set, a label for it, and the template's default factory."""
    if rules_file is not None and template is not None:
        raise InputError("give --rules or --template, not both")
    try:
        if rules_file is not None:
            from .rulefile import load_rules

            return RuleSet.for_config(config, load_rules(rules_file), str(rules_file)), str(rules_file), None
        tpl = get_template(template) if template else guess_template(config)
        if tpl is None:
            raise InputError(
                f"no template for model_type {config.get('model_type')!r}; "
                f"use --template ({', '.join(sorted(TEMPLATES))}) or --rules FILE"
            )
        rs = RuleSet.for_config(config, tpl.rules(config), tpl.name)
        return rs, f"template {tpl.name}", tpl.factory
    except KeyError as exc:
        raise InputError(str(exc.args[0] if exc.args else exc)) from exc
    except (RuleError, SourceError) as exc:
        raise InputError(str(exc)) from exc


def _checkpoint(path: Path) -> Checkpoint:
    try:
        return load_checkpoint(path)
    except SourceError as exc:
        raise InputError(str(exc)) from exc


def _target(module: str | None, names: Path | None, config: dict[str, Any], ckpt: Checkpoint | None,
            **options: Any) -> Target:
    if names is not None:
        try:
            return load_names_target(names)
        except SourceError as exc:
            raise InputError(str(exc)) from exc
    if module is None:
        raise InputError("give --module pkg.mod:factory or --names FILE")
    try:
        return load_module_target(module, config, ckpt.entries if ckpt else None, **options)
    except TargetError as exc:
        raise InputError(str(exc)) from exc


_common = [
    click.option("--config", "config_path", type=click.Path(path_type=Path), required=True,
                 help="Hugging Face config.json of the model."),
    click.option("--rules", "rules_file", type=click.Path(path_type=Path), help="JSON rule file."),
    click.option("--template", type=click.Choice(sorted(TEMPLATES)), help="Built-in rule template."),
    click.option("--module", help="V3 module factory, pkg.mod:factory (default: the template's)."),
    click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True),
]


def _apply(options: list[Any]) -> Any:
    def deco(f: Any) -> Any:
        for opt in reversed(options):
            f = opt(f)
        return f

    return deco


@click.group("weights")
def weights() -> None:
    """Map checkpoint weight names to a ModuleV3 parameter tree."""


@weights.command("check")
@click.option("--checkpoint", "checkpoint_path", type=click.Path(path_type=Path), required=True,
              help="index.json, .safetensors file or directory, weight_name_patterns.json, or a name list.")
@_apply(_common)
@click.option("--names", "names_path", type=click.Path(path_type=Path),
              help="Target as a name list (text/JSON) instead of a module.")
@click.option("--emit-adapter", "emit_path", type=click.Path(path_type=Path),
              help="Also write a weight_adapters.py for these rules.")
def check_cmd(checkpoint_path: Path, config_path: Path, rules_file: Path | None, template: str | None,
              module: str | None, fmt: str, names_path: Path | None, emit_path: Path | None) -> None:
    """Report checkpoint keys no rule consumed, parameters nothing produced,
    rules that never fired, and shape/dtype mismatches."""
    from .check import run_check
    from .report import dumps, to_json, to_text

    config = _load_config(config_path)
    rs, rules_label, default_factory = _ruleset(config, rules_file, template)
    ckpt = _checkpoint(checkpoint_path)
    target = _target(module or (None if names_path else default_factory), names_path, config, ckpt)
    result = run_check(rs, ckpt.entries, target)
    header = {"checkpoint": str(checkpoint_path), "checkpoint_kind": ckpt.kind,
              "target": target.source, "rules": rules_label}
    if fmt == "json":
        click.echo(dumps(to_json(result, header)))
    else:
        click.echo(to_text(result, header))
    if emit_path is not None:
        from .adapter import emit_adapter

        try:
            emit_path.write_text(emit_adapter(rs, rules_label), encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{emit_path}: {exc.strerror or exc}") from exc
        click.echo(f"wrote {emit_path}", err=True)
    sys.exit(0 if result.ok else 1)


@weights.command("plan")
@_apply(_common)
@click.option("--checkpoint", "checkpoint_path", type=click.Path(path_type=Path),
              help="Checkpoint metadata (needed when placements must come from rules).")
@click.option("--tp", type=click.IntRange(min=1), default=1, show_default=True, help="Devices in the TP mesh.")
@click.option("--ep", type=click.IntRange(min=1), default=1, show_default=True, help="Expert-parallel size.")
def plan_cmd(config_path: Path, rules_file: Path | None, template: str | None, module: str | None, fmt: str,
             checkpoint_path: Path | None, tp: int, ep: int) -> None:
    """Per-device weight bytes from the V3 module's placements (column, row,
    replicated, expert-partitioned); falls back to rule hints and says so."""
    from .engine import Mapper
    from .plan import build_plan, hint_bindings, render, to_json

    config = _load_config(config_path)
    rs, _, default_factory = _ruleset(config, rules_file, template)
    ckpt = _checkpoint(checkpoint_path) if checkpoint_path else None
    spec = module or default_factory
    target: Target | None = None
    why = ""
    if spec is not None:
        try:
            target = load_module_target(spec, config, ckpt.entries if ckpt else None, tp=tp, ep=ep)
        except TargetError as exc:
            why = str(exc)
    origin: dict[str, int] = {}
    if ckpt is not None:
        mapper = Mapper(rs, strict=False)
        from .target import TargetParam
        from .tensors import TensorMeta, meta_of

        produced: dict[str, TensorMeta] = {}
        for name, meta in ckpt.entries.items():
            produced.update(mapper.add(name, meta) or {})
        origin = dict(mapper.origin)
        if target is None:
            target = Target({n: TargetParam(n, meta_of(m)) for n, m in produced.items()
                             if not rs.rules[origin[n]].rule.absent_ok},
                            "checkpoint mapped through the rules")
    else:
        if target is None:
            raise InputError(f"cannot build the module ({why}); give --checkpoint to derive from rules")
        origin = _origin_by_target(rs, list(target.params))
    if target is None:
        raise InputError("nothing to plan")
    module_ok = why == ""
    source = "read from the lazily built module" if module_ok else f"derived from rules (module: {why})"
    plan = build_plan(target.params, rs, origin, hint_bindings(rs, origin, list(target.params)),
                      tp=tp, ep=ep, module_placements=module_ok, source=source)
    click.echo(json.dumps(to_json(plan), indent=2) if fmt == "json" else render(plan))


def _origin_by_target(rs: RuleSet, names: list[str]) -> dict[str, int]:
    """Which rule produces each target name (matching the rules' output patterns)."""
    out: dict[str, int] = {}
    for name in names:
        hit = rs.find_target(name)
        if hit is not None:
            out[name] = hit[0].index
    return out


@weights.command("templates")
def templates_cmd() -> None:
    """List built-in templates."""
    for t in TEMPLATES.values():
        click.echo(f"{t.name:15} {t.description}  [module {t.factory}]")


if __name__ == "__main__":
    weights()
