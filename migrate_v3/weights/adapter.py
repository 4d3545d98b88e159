"""Emit a self-contained `weight_adapters.py` from a rule set.

MAX architectures ship `convert_safetensor_state_dict(state_dict,
huggingface_config, pipeline_config, **unused_kwargs) -> dict[str,
WeightData]`. The emitted file has that function plus the rules as data and
a small runtime (pattern matching, the layer domains computed from the
config at load time, numpy tensor ops for many-to-one rules). It imports
only the stdlib, numpy and max, so it can live inside the V3 package.
Names of rules marked `absent_ok` are skipped, as MAX's own adapter deletes
the MTP layer.
"""

from __future__ import annotations

import inspect
import pprint
from typing import Any

from . import exprs, layers
from .rules import Drop
from .ruleset import RuleSet

_RUNTIME = r'''
_INT = "(0|[1-9][0-9]*)"
_SLOT = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)(?::([^{}]+))?\}$")


class _Pattern:
    """A dotted pattern with whole-segment placeholders (see migrate_v3.weights.patterns)."""

    def __init__(self, text: str, sets: dict[str, tuple[frozenset[int], int]], relative: bool) -> None:
        self.text = text
        self.relative = relative
        self.slots: list[tuple[str, str, Any, int]] = []
        self.skeleton: list[str] = []
        parts = []
        for seg in text.split("."):
            m = _SLOT.match(seg)
            if not m:
                parts.append(re.escape(seg))
                self.skeleton.append(seg)
                continue
            name, spec = m.group(1), m.group(2)
            if spec and "|" in spec:
                words = spec.split("|")
                self.slots.append((name, "choice", frozenset(words), 0))
                parts.append("(" + "|".join(re.escape(w) for w in words) + ")")
                self.skeleton.append("*")
                continue
            members: frozenset[int] | None = None
            base = 0
            for dom in spec.split("&") if spec else ([name] if name in sets else []):
                mem, b = sets[dom]
                members = mem if members is None else members & mem
                base = base or b
            self.slots.append((name, "int", members, base))
            parts.append(_INT)
            self.skeleton.append("#")
        self.regex = re.compile("^" + r"\.".join(parts) + "$")

    def fits(self, skel: tuple[str, ...]) -> bool:
        return len(skel) == len(self.skeleton) and all(
            s == "*" or s == k for s, k in zip(self.skeleton, skel)
        )

    def match(self, name: str) -> dict[str, Any] | None:
        m = self.regex.match(name)
        if m is None:
            return None
        out: dict[str, Any] = {}
        for (slot, kind, members, base), g in zip(self.slots, m.groups()):
            if kind == "choice":
                out[slot] = g
                continue
            v = int(g) + (base if self.relative else 0)
            if members is not None and v not in members:
                return None
            out[slot] = v
        return out

    def format(self, b: dict[str, Any]) -> str:
        it = iter(self.slots)
        segs = []
        for seg in self.text.split("."):
            if not _SLOT.match(seg):
                segs.append(seg)
                continue
            slot, kind, _, base = next(it)
            v = b[slot]
            segs.append(str(v - base if kind == "int" and self.relative else v))
        return ".".join(segs)


def _to_numpy(wd: WeightData) -> np.ndarray:
    buf = Buffer.from_dlpack(wd.data)
    storage = {2: DType.uint16, 1: DType.uint8}.get(wd.dtype.size_in_bytes)
    if wd.dtype in (DType.bfloat16, DType.float8_e4m3fn, DType.float8_e5m2) and storage is not None:
        buf = buf.view(storage)
    return buf.to_numpy()


def _from_numpy(arr: np.ndarray, like: WeightData, name: str) -> WeightData:
    arr = np.ascontiguousarray(arr)
    buf = Buffer.from_numpy(arr)
    if buf.dtype != like.dtype:
        buf = buf.view(like.dtype, arr.shape)
    return WeightData(buf, name, like.dtype, Shape(arr.shape))


def _combine(rule: dict[str, Any], parts: dict[Any, WeightData], config: dict[str, Any]) -> list[np.ndarray]:
    """numpy version of the rule kinds in migrate_v3.weights.rules."""
    kind = rule["kind"]
    arrays = {k: _to_numpy(v) for k, v in parts.items()}
    axis = rule.get("axis", 0)
    if kind == "stack":
        return [np.stack([arrays[k] for k in sorted(arrays)], axis=axis)]
    if kind == "unstack":
        return [np.ascontiguousarray(a) for a in np.moveaxis(arrays[0], axis, 0)]
    if kind == "concat":
        return [np.concatenate([arrays[i] for i in range(len(arrays))], axis=axis)]
    if kind == "merge":
        first = arrays[0]
        if any(a.tobytes() != first.tobytes() for a in arrays.values()):
            raise ValueError(f"tied copies differ: {rule['sources']}")
        return [first]
    if kind == "split":
        x = arrays[0]
        n = len(rule["targets"])
        sizes = [evaluate(s, config) for s in rule["sizes"]] if rule.get("sizes") else [x.shape[axis] // n] * n
        return [np.ascontiguousarray(p) for p in np.split(x, np.cumsum(sizes)[:-1], axis=axis)]
    h, g, d = (evaluate(rule.get(k, dflt), config) for k, dflt in
               (("heads", "num_attention_heads"), ("kv_heads", "num_key_value_heads"), ("head_dim", "head_dim")))
    if kind == "fuse_qkv":
        q, k, v = arrays[0], arrays[1], arrays[2]
        rest = q.shape[1:]
        fused = np.concatenate([q.reshape(g, (h // g) * d, *rest), k.reshape(g, d, *rest),
                                v.reshape(g, d, *rest)], axis=1)
        return [fused.reshape((h + 2 * g) * d, *rest)]
    if kind == "unfuse_qkv":
        x = arrays[0]
        rest = x.shape[1:]
        qg, kg, vg = np.split(x.reshape(g, (h // g + 2) * d, *rest), [(h // g) * d, (h // g + 1) * d], axis=1)
        return [np.ascontiguousarray(qg).reshape(h * d, *rest), np.ascontiguousarray(kg).reshape(g * d, *rest),
                np.ascontiguousarray(vg).reshape(g * d, *rest)]
    raise ValueError(f"unknown rule kind {kind}")


def _expected(rule: dict[str, Any], src: list[_Pattern]) -> set[Any]:
    if rule["kind"] == "stack":
        slot = next(s for s in src[0].slots if s[0] == rule["over"])
        return set(slot[2])
    return set(range(len(src)))


def _remap(state_dict: dict[str, Any], config: dict[str, Any]) -> dict[str, WeightData]:
    sets = layer_sets(config)
    rules = [(r, [_Pattern(t, sets, False) for t in r["sources"]], [_Pattern(t, sets, True) for t in r["targets"]])
             for r in _RULES]
    cache: dict[tuple[str, ...], list[int]] = {}
    out: dict[str, WeightData] = {}
    groups: dict[tuple[Any, ...], dict[Any, WeightData]] = {}
    for name, value in state_dict.items():
        skel = tuple("#" if p.isdigit() else p for p in name.split("."))
        cands = cache.get(skel)
        if cands is None:
            cands = cache[skel] = [i for i, (_, src, _) in enumerate(rules) if any(p.fits(skel) for p in src)]
        hit = None
        for ri in cands:
            for si, pat in enumerate(rules[ri][1]):
                b = pat.match(name)
                if b is not None:
                    hit = (ri, si, b)
                    break
            if hit:
                break
        if hit is None:
            raise KeyError(f"no weight rule matches checkpoint name {name!r}")
        ri, si, b = hit
        rule, src, tgt = rules[ri]
        wd = value.data() if hasattr(value, "data") and callable(value.data) else value
        if rule["kind"] == "drop" or rule.get("skip"):
            continue
        if rule["kind"] in ("rename", "copy"):
            for pat in tgt:
                out[pat.format(b)] = wd
            continue
        if rule["kind"] in ("stack", "concat", "merge", "fuse_qkv"):
            over = rule.get("over")
            key = (ri, tuple(sorted((k, v) for k, v in b.items() if k != over)))
            part = b[over] if over else si
            group = groups.setdefault(key, {})
            group[part] = wd
            if set(group) != _expected(rule, src):
                continue
            del groups[key]
            parts, outb = group, {k: v for k, v in b.items() if k != over}
            arrays = _combine(rule, parts, config)
            out[tgt[0].format(outb)] = _from_numpy(arrays[0], wd, tgt[0].format(outb))
            continue
        arrays = _combine(rule, {0: wd}, config)
        if rule["kind"] == "unstack":
            slot = next(s for s in tgt[0].slots if s[0] == rule["over"])
            for m, arr in zip(sorted(slot[2]), arrays):
                tname = tgt[0].format({**b, rule["over"]: m})
                out[tname] = _from_numpy(arr, wd, tname)
        else:
            for pat, arr in zip(tgt, arrays):
                out[pat.format(b)] = _from_numpy(arr, wd, pat.format(b))
    if groups:
        raise ValueError(f"incomplete weight groups at end of checkpoint: {sorted(map(str, groups))[:5]}")
    return out


def _config_dict(huggingface_config: Any) -> dict[str, Any]:
    if isinstance(huggingface_config, dict):
        return dict(huggingface_config)
    if hasattr(huggingface_config, "to_dict"):
        return dict(huggingface_config.to_dict())
    return dict(vars(huggingface_config))


def convert_safetensor_state_dict(
    state_dict: dict[str, Weights],
    huggingface_config: Any,
    pipeline_config: Any = None,
    **unused_kwargs: Any,
) -> dict[str, WeightData]:
    """Remap an HF safetensors state dict to the V3 module's parameter names."""
    del pipeline_config, unused_kwargs
    return _remap(state_dict, _config_dict(huggingface_config))
'''

_HEADER = '''"""Weight adapter generated by `migrate-v3 weights check --emit-adapter`.

Rules: {source}. Regenerate instead of editing: the rule list below is the
single source of truth, and layer kinds (dense / MoE / MTP / attention type)
are computed from the Hugging Face config at load time.
"""

# ruff: noqa
# mypy: ignore-errors
from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from max.driver import Buffer
from max.dtype import DType
from max.graph import Shape
from max.graph.weights import WeightData, Weights
'''

_LAYER_FUNCS = (
    layers.text_config, layers.num_layers, layers.num_mtp_layers, layers.num_experts,
    layers.is_moe_layer, layers.layer_types, layers.layer_sets,
)
_EXPR_FUNCS = (exprs.evaluate, exprs._eval)


def rule_records(ruleset: RuleSet) -> list[dict[str, Any]]:
    """Rules as plain dicts with every placeholder spec filled in."""
    records: list[dict[str, Any]] = []
    for cr in ruleset.rules:
        r = cr.rule
        rec: dict[str, Any] = {"kind": r.kind, "sources": [p.text for p in cr.src],
                               "targets": [p.text for p in cr.tgt]}
        for attr in ("over", "axis", "sizes", "heads", "kv_heads", "head_dim"):
            if hasattr(r, attr) and getattr(r, attr) is not None:
                value = getattr(r, attr)
                rec[attr] = list(value) if isinstance(value, tuple) else value
        if r.absent_ok and not isinstance(r, Drop):
            rec["skip"] = True
        records.append(rec)
    return records


def emit_adapter(ruleset: RuleSet, source: str) -> str:
    """Python source of a standalone weight adapter for `ruleset`."""
    funcs = "\n\n".join(inspect.getsource(f) for f in (*_LAYER_FUNCS, *_EXPR_FUNCS))
    rules_src = pprint.pformat(rule_records(ruleset), width=110, sort_dicts=False)
    return (
        _HEADER.format(source=source)
        + "\n\n"
        + funcs
        + "\n\n_RULES: list[dict[str, Any]] = "
        + rules_src
        + "\n"
        + _RUNTIME
    )
