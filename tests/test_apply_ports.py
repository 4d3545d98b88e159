"""Drift: ``apply`` on the official ``*_modulev3`` ports of max 26.7 changes nothing."""

from __future__ import annotations

from pathlib import Path

import max as max_pkg
import pytest

from migrate_v3.pipeline import TransformContext, transform_source

ARCHITECTURES = Path(list(max_pkg.__path__)[0]) / "pipelines" / "architectures"
PORTS = sorted(p for p in ARCHITECTURES.glob("*_modulev3") if p.is_dir())


def test_there_are_official_ports() -> None:
    assert len(PORTS) >= 25


@pytest.mark.parametrize("port", PORTS, ids=lambda p: p.name)
def test_official_port_is_a_fixed_point(port: Path) -> None:
    v3_packages = {p.name.removesuffix("_modulev3"): p.name for p in PORTS}
    changed = []
    for py in sorted(port.rglob("*.py")):
        rel = py.relative_to(port)
        ctx = TransformContext(
            package=port.name,
            package_depth=len(rel.parts) - 1,
            v3_packages=v3_packages,
            is_arch_module=rel == Path("arch.py"),
            is_package_init=rel == Path("__init__.py"),
        )
        source = py.read_text(encoding="utf-8")
        if transform_source(source, path=str(py), context=ctx).code != source:
            changed.append(str(rel))
    assert changed == []
