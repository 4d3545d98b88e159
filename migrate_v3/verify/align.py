"""Weight-key alignment: checkpoint names against V3 parameter paths.

``compile(weights=...)`` raises on missing keys and on shape or dtype
mismatches but silently ignores extra keys (migration-guide step 7), so a
renamed attribute can orphan a checkpoint tensor without any error. This
module reports all four kinds and looks for one prefix or segment rename
that explains them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from migrate_v3.verify.report import KeyAlignment, KeyIssue, Suggestion

# name -> (shape, dtype name)
Signature = tuple[tuple[int, ...], str]


def align_keys(
    checkpoint: Mapping[str, Signature], v3: Mapping[str, Signature]
) -> KeyAlignment:
    """Compare two name→(shape, dtype) maps; suggest what explains the gaps."""
    missing = sorted(set(v3) - set(checkpoint))
    unexpected = sorted(set(checkpoint) - set(v3))
    issues = [KeyIssue("missing", k, _missing_detail(k, v3[k])) for k in missing]
    issues += [
        KeyIssue("unexpected", k, "in the checkpoint but no V3 parameter has this path; "
                 "compile() would silently ignore it")
        for k in unexpected
    ]
    for key in sorted(set(v3) & set(checkpoint)):
        (cshape, cdtype), (vshape, vdtype) = checkpoint[key], v3[key]
        if tuple(cshape) != tuple(vshape):
            issues.append(KeyIssue("shape", key, f"checkpoint {list(cshape)} vs V3 {list(vshape)}"))
        if cdtype != vdtype:
            issues.append(KeyIssue("dtype", key, f"checkpoint {cdtype} vs V3 {vdtype}"))
    return KeyAlignment(
        checkpoint_keys=len(checkpoint),
        v3_parameters=len(v3),
        issues=issues,
        suggestions=suggest(missing, unexpected, checkpoint, v3),
    )


def _missing_detail(key: str, sig: Signature) -> str:
    return f"V3 parameter {list(sig[0])} {sig[1]} has no checkpoint entry"


LINEAR_BIAS_HINT = " (V3 Linear defaults to bias=True, V2 to has_bias=False: pass bias=False)"


def mark_linear_biases(alignment: KeyAlignment, linear_paths: set[str]) -> None:
    """Explain a missing ``<linear>.bias``: the api-map 10.1 default flip."""
    for issue in alignment.issues:
        if issue.kind == "missing" and issue.key.endswith("bias"):
            owner = issue.key.rsplit(".", 1)[0] if "." in issue.key else ""
            if owner in linear_paths:
                issue.detail += LINEAR_BIAS_HINT


def suggest(
    missing: list[str],
    unexpected: list[str],
    checkpoint: Mapping[str, Signature],
    v3: Mapping[str, Signature],
) -> list[Suggestion]:
    """Find prefixes and single-segment renames that map unexpected → missing."""
    out: list[Suggestion] = []
    left_m, left_u = set(missing), set(unexpected)

    add: Counter[str] = Counter()
    strip: Counter[str] = Counter()
    for u in left_u:
        for m in left_m:
            if m.endswith("." + u):
                add[m[: -len(u)]] += 1
            elif u.endswith("." + m):
                strip[u[: -len(m)]] += 1
    for prefix, n in add.most_common(1):
        out.append(Suggestion("add_prefix", "", prefix, n))
        left_m -= {prefix + u for u in left_u}
        left_u -= {u for u in list(left_u) if prefix + u in v3}
    for prefix, n in strip.most_common(1):
        out.append(Suggestion("strip_prefix", prefix, "", n))
        left_u -= {prefix + m for m in left_m}
        left_m -= {m for m in list(left_m) if prefix + m in checkpoint}

    renames: Counter[tuple[str, str]] = Counter()
    for u in sorted(left_u):
        best = _best_rename(u, left_m, checkpoint, v3)
        if best is not None:
            renames[best] += 1
    for (old, new), n in renames.most_common():
        out.append(Suggestion("rename", old, new, n))
    return out


def _best_rename(
    u: str, candidates: set[str], checkpoint: Mapping[str, Signature], v3: Mapping[str, Signature]
) -> tuple[str, str] | None:
    """The single differing segment between ``u`` and a same-shaped missing key."""
    useg = u.split(".")
    found: list[tuple[bool, tuple[str, str]]] = []
    for m in candidates:
        mseg = m.split(".")
        if len(mseg) != len(useg):
            continue
        diff = [i for i, (a, b) in enumerate(zip(useg, mseg, strict=True)) if a != b]
        if len(diff) == 1:
            i = diff[0]
            same_shape = tuple(checkpoint[u][0]) == tuple(v3[m][0])
            found.append((same_shape, (useg[i], mseg[i])))
    if not found:
        return None
    found.sort(key=lambda f: not f[0])
    return found[0][1]
