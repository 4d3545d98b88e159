"""MV34x — V2 layer constructors → V3 constructors with the same behaviour.

Binds the V2 arguments by name (``knowledge/layers.py``), re-emits them as
keywords, drops ``dtype``/``device``/``devices``, renames (``has_bias`` →
``bias``), and spells out every default that flipped so V3 computes what V2
did. An argument with no V3 equivalent is kept out of the call and named in a
TODO; a layer with no V3 class is left as is with a TODO.

    Linear(in_dim, out_dim, dtype, device)
    →  Linear(in_dim=in_dim, out_dim=out_dim, bias=False)
"""

from __future__ import annotations

import libcst as cst

from codemods.args import Bound, as_keyword, bind, new_keyword, relayout, source
from codemods.base import Codemod
from migrate_v3.knowledge.layers import (
    FUNCTIONS,
    LAYERS,
    NO_V3_CLASS,
    PLACEMENT_ARGS,
    RMSNORM_HELPER,
    RMSNORM_HELPER_NAME,
    RMSNORM_VARIANTS,
    LayerSpec,
    v2_symbol,
)

_NORM_MODULE = "max.experimental.nn.norm"
_TENSOR_MODULE = "max.experimental.tensor"


def _literal(src: str) -> str:
    """Normalise literal spellings: ``1.0``/``1`` → ``1``, ``0.0`` → ``0``."""
    try:
        value = float(src)
    except ValueError:
        return src
    return str(int(value)) if value.is_integer() else src


class LayerConstructors(Codemod):
    PREFIX = "MV34"

    @classmethod
    def applies(cls, source: str) -> bool:
        return "max.nn" in source or "from max import nn" in source

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        symbol = v2_symbol(self.qualname(original.func))
        if symbol is None:
            return updated
        if symbol in NO_V3_CLASS:
            self.todo("MV343", f"{symbol} has no V3 class: {NO_V3_CLASS[symbol]}")
            return updated
        if symbol in FUNCTIONS:
            module, name = FUNCTIONS[symbol]
            self.rewrote(original, "MV340", f"{symbol} → {module}.{name}")
            return updated.with_changes(func=self._ref(original.func, module, name))
        spec = LAYERS.get(symbol)
        if spec is None:
            return updated
        bound = bind(updated, spec.v2_params, spec.v2_kwonly)
        if bound is None:
            self.todo("MV340", f"{symbol}(...) uses */** or unknown arguments: rewrite it for V3 by hand")
            return updated
        if symbol == "RMSNorm":
            return self._rmsnorm(original, updated, bound)
        return self._rebuild(original, updated, bound, spec, spec.v3_name)

    def _ref(self, func: cst.BaseExpression, module: str, name: str) -> cst.BaseExpression:
        """The V3 class reference: keep a bare local name, replace ``nn.X``."""
        self.state.import_name(module, name)
        if isinstance(func, cst.Name) and func.value == name:
            return func
        return cst.Name(name)

    def _rebuild(
        self,
        original: cst.Call,
        updated: cst.Call,
        bound: Bound,
        spec: LayerSpec,
        v3_name: str,
        v3_module: str | None = None,
        skip: frozenset[str] = frozenset(),
    ) -> cst.Call:
        v2 = spec.v2_name
        new: dict[str, cst.Arg] = {}
        notes: list[str] = []
        for name in bound.order:
            arg = bound.args[name]
            if name in skip:
                continue
            if name in spec.drop or name in PLACEMENT_ARGS:
                value = source(arg.value)
                if name == "dtype" and value.startswith("DType."):
                    self.todo(
                        "MV342",
                        f"{v2}(dtype={value}) dropped: V3 weights take default_dtype; "
                        f"construct under default_dtype({value}) if it differs from the model dtype",
                    )
                notes.append(f"dropped {name}")
                continue
            if name in spec.unsupported:
                if _literal(source(arg.value)) == _literal(spec.v2_defaults.get(name, "<none>")):
                    notes.append(f"dropped default {name}")
                else:
                    self.todo("MV342", f"{v2}({name}=...) has no V3 equivalent: {spec.unsupported[name]}")
                continue
            v3 = spec.rename.get(name, name)
            if v3 not in spec.v3_params:
                self.todo("MV342", f"{v2}({name}=...) has no V3 equivalent")
                continue
            new[v3] = as_keyword(arg, v3)
        for v3, default in spec.flipped.items():
            if v3 not in new:
                new[v3] = new_keyword(v3, default)
                self.rewrote(original, "MV341", f"{v2}: {v3}={default} made explicit (V3 default differs)")
        for v3, value in spec.always.items():
            if v3 not in new:
                new[v3] = new_keyword(v3, value)
                self.rewrote(original, "MV341", f"{v2}: {v3}={value} keeps V2 numerics")
        for v3, why in spec.required.items():
            if v3 not in new:
                self.todo("MV342", f"{v3_name}: {why}")
        if spec.caveat:
            self.todo("MV342", f"{v3_name}: {spec.caveat}")
        ordered = [new[p] for p in spec.v3_params if p in new]
        func = self._ref(original.func, v3_module or spec.v3_module, v3_name)
        self.rewrote(original, "MV340", f"{v2}(...) → {v3_name}(...) keywords" + (f" ({', '.join(notes)})" if notes else ""))
        return updated.with_changes(func=func, args=relayout(updated.args, ordered))

    def _rmsnorm(self, original: cst.Call, updated: cst.Call, bound: Bound) -> cst.BaseExpression:
        spec = LAYERS["RMSNorm"]
        offset = bound.args.get("weight_offset")
        mbc = bound.args.get("multiply_before_cast")
        key = (
            _literal(source(offset.value)) if offset else "0",
            source(mbc.value) if mbc else "True",
        )
        variant = RMSNORM_VARIANTS.get(key)
        if variant is None:
            self.todo(
                "MV342",
                f"RMSNorm(weight_offset={key[0]}, multiply_before_cast={key[1]}): subclass RMSNorm "
                "and call rms_norm(x, self.weight, self.eps, weight_offset=..., multiply_before_cast=...)",
            )
            return updated
        if variant == RMSNORM_HELPER_NAME:
            self.state.import_name(_NORM_MODULE, "RMSNorm")
            self.state.import_name(_NORM_MODULE, "rms_norm")
            self.state.import_name(_TENSOR_MODULE, "Tensor")
            self.state.helpers[RMSNORM_HELPER_NAME] = RMSNORM_HELPER
            self.rewrote(original, "MV341", "RMSNorm: multiply_before_cast=True kept via MultiplyBeforeCastRMSNorm")
        elif key != ("0", "False"):
            self.rewrote(original, "MV341", f"RMSNorm(weight_offset={key[0]}) → {variant}")
        skip = frozenset({"weight_offset", "multiply_before_cast"})
        if variant == RMSNORM_HELPER_NAME:
            new = self._rebuild(original, updated, bound, spec, variant, skip=skip)
            # the helper is defined in this module: no import for it
            self.state.needed_imports.discard((spec.v3_module, RMSNORM_HELPER_NAME, None))
            return new.with_changes(func=cst.Name(RMSNORM_HELPER_NAME))
        return self._rebuild(original, updated, bound, spec, variant, skip=skip)
