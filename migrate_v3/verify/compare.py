"""Compare one V3 output with its V2 reference within a dtype tolerance.

Tolerances follow the output dtype: what a float32 graph can reproduce after
op reordering is far tighter than what bfloat16 rounding allows.
"""

from __future__ import annotations

import numpy as np

from migrate_v3.verify.report import OutputCheck

# (atol, rtol) per dtype name; integers and bools must match exactly.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-8, 1e-7),
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
}


def tolerance_for(dtype: str, override: tuple[float, float] | None = None) -> tuple[float, float]:
    if override is not None:
        return override
    return TOLERANCES.get(dtype, (0.0, 0.0))


def compare_output(
    index: int,
    ref: np.ndarray,
    got: np.ndarray,
    dtype: str,
    dtype_v3: str,
    override: tuple[float, float] | None = None,
) -> OutputCheck:
    """allclose-style check; also reports max absolute and relative error."""
    atol, rtol = tolerance_for(dtype, override)
    shape = [int(d) for d in ref.shape]
    if ref.shape != got.shape or dtype != dtype_v3:
        return OutputCheck(
            index=index, dtype=dtype, shape=shape, max_abs=float("inf"),
            max_rel=float("inf"), atol=atol, rtol=rtol, passed=False,
            shape_v3=[int(d) for d in got.shape], dtype_v3=dtype_v3,
            note=f"V2 {dtype}{shape} vs V3 {dtype_v3}{list(got.shape)}",
        )
    a = ref.astype(np.float64)
    b = got.astype(np.float64)
    if a.size == 0:
        return OutputCheck(index, dtype, shape, 0.0, 0.0, atol, rtol, True)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if (nan_a != nan_b).any():
        return OutputCheck(
            index, dtype, shape, float("inf"), float("inf"), atol, rtol, False,
            note="NaN in one side only",
        )
    a = np.where(nan_a, 0.0, a)
    b = np.where(nan_b, 0.0, b)
    diff = np.abs(a - b)
    max_abs = float(diff.max())
    max_rel = float((diff / np.maximum(np.abs(a), np.finfo(np.float32).tiny)).max())
    passed = bool((diff <= atol + rtol * np.abs(a)).all())
    if np.isfinite(a).all() and not np.isfinite(b).all():
        passed = False
    return OutputCheck(index, dtype, shape, max_abs, max_rel, atol, rtol, passed)
