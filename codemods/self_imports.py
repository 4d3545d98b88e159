"""MV301 — a package's absolute imports of itself follow it into the V3 variant.

``qwen3/qwen3.py`` importing ``max.pipelines.architectures.qwen3.layers.attention``
means "my own module"; left as is, ``qwen3_modulev3`` would silently keep
running the V2 module (check reports it as a dependency on V2 ``qwen3``). A
relative import names the migrated sibling module in any install location.

    from max.pipelines.architectures.qwen3.layers.attention import Qwen3Attention   (in qwen3/qwen3.py)
    →  from .layers.attention import Qwen3Attention
"""

from __future__ import annotations

import re

import libcst as cst

from codemods.base import Codemod, TransformContext
from codemods.resolve import module_name


class SelfImports(Codemod):
    PREFIX = "MV301"
    NEUTRAL_OK = True

    @classmethod
    def applies(cls, source: str) -> bool:
        return "architectures." in source

    @classmethod
    def applies_to(cls, source: str, context: TransformContext) -> bool:
        # only imports of the package's own dotted name change (whitespace and
        # line continuations may separate its parts)
        package = context.package
        if not package or package.endswith("_modulev3") or not cls.applies(source):
            return False
        parts = f"{context.architectures_package}.{package}".split(".")
        return re.search(r"[\s\\]*\.[\s\\]*".join(map(re.escape, parts)), source) is not None

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom:
        ctx = self.state.context
        package = ctx.package
        if original.module is None or original.relative or not package or package.endswith("_modulev3"):
            return updated
        own = f"{ctx.architectures_package}.{package}"
        mod = module_name(original.module)
        if mod != own and not mod.startswith(own + "."):
            return updated
        rest = mod[len(own) + 1 :]
        dots = [cst.Dot() for _ in range(ctx.package_depth + 1)]
        self.rewrote(original, "MV301", f"absolute self-import {mod} → relative")
        new_module = cst.parse_expression(rest) if rest else None
        return updated.with_changes(
            relative=dots,
            module=new_module,
            whitespace_after_from=cst.SimpleWhitespace(" "),
        )
