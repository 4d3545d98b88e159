"""Static hyper-parameter check: what differs between paired sub-modules.

Numerics cannot always name a cause (an eps change can hide under float32
tolerance, a norm's compute dtype matters only below float32), so before
compiling, verify walks both module trees by attribute path and compares
(a) scalar attributes both sides share, e.g. ``eps``, and (b) the known
semantic flips of api-map section 10 (RMSNorm ``multiply_before_cast`` /
``weight_offset``, LayerNorm fp32 compute).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from migrate_v3.verify.report import HParamIssue

# Same name, different meaning across the APIs, or bookkeeping only.
IGNORED = {"device", "devices", "dtype", "name", "quant_config", "config", "training"}
SCALARS = (bool, int, float, str)
Severity = Literal["error", "warning"]


def v2_modules(module: Any) -> Iterator[tuple[str, Any]]:
    for display, _prefix, child in module._iter_named_modules():
        yield display, child


def v3_modules(module: Any) -> Iterator[tuple[str, Any]]:
    yield "", module
    yield from module.descendants


def _scalars(module: Any) -> dict[str, Any]:
    return {
        k: v for k, v in vars(module).items()
        if not k.startswith("_") and k not in IGNORED and isinstance(v, SCALARS)
    }


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return abs(float(a) - float(b)) <= 1e-12 * max(1.0, abs(float(a)))
        except (TypeError, ValueError):
            return False
    return bool(a == b)


def _rms_semantics(module: Any) -> tuple[bool, float] | None:
    """(multiply_before_cast, weight_offset) of a V3 norm, when knowable."""
    from max.experimental.nn import norm

    kind = type(module)
    if kind is norm.RMSNorm:
        return False, 0.0
    if kind is getattr(norm, "GemmaRMSNorm", None):
        return True, 1.0
    if hasattr(module, "multiply_before_cast"):
        return bool(module.multiply_before_cast), float(getattr(module, "weight_offset", 0.0))
    return None


def _semantic(path: str, v2: Any, v3: Any, low_precision: bool) -> list[HParamIssue]:
    from max.experimental.nn import LayerNorm as V3LayerNorm
    from max.nn.norm import LayerNorm as V2LayerNorm
    from max.nn.norm import RMSNorm as V2RMSNorm

    issues: list[HParamIssue] = []
    dtype_sev: Severity = "error" if low_precision else "warning"
    if isinstance(v2, V2RMSNorm) and type(v2).__call__ is V2RMSNorm.__call__:
        sem = _rms_semantics(v3)
        if sem is not None:
            if bool(v2.multiply_before_cast) != sem[0]:
                issues.append(HParamIssue(
                    path, "multiply_before_cast", str(v2.multiply_before_cast), str(sem[0]),
                    dtype_sev, "(RMSNorm casts at a different point; drifts below float32)",
                ))
            if not _same(float(v2.weight_offset), sem[1]):
                issues.append(HParamIssue(
                    path, "weight_offset", str(v2.weight_offset), str(sem[1]), "error",
                    "(the norm scales by weight + offset)",
                ))
    if isinstance(v2, V2LayerNorm) and isinstance(v3, V3LayerNorm) and v3.keep_dtype:
        issues.append(HParamIssue(
            path, "compute dtype", "float32", "input dtype (keep_dtype=True)", dtype_sev,
            "(V2 LayerNorm always computes in float32; pass keep_dtype=False)",
        ))
    return issues


def compare_hparams(v2_root: Any, v3_root: Any, low_precision: bool) -> list[HParamIssue]:
    """Differences between sub-modules that sit at the same attribute path."""
    v3_by_path = dict(v3_modules(v3_root))
    issues: list[HParamIssue] = []
    for path, v2 in v2_modules(v2_root):
        v3 = v3_by_path.get(path)
        if v3 is None:
            continue
        a, b = _scalars(v2), _scalars(v3)
        for key in sorted(a.keys() & b.keys()):
            if not _same(a[key], b[key]):
                issues.append(HParamIssue(path, key, repr(a[key]), repr(b[key]), "error"))
        issues.extend(_semantic(path, v2, v3, low_precision))
    return issues
