"""MV303 — register the V3 variant: ``<Name>_ModuleV3`` and ``<x>_modulev3_arch``.

In ``arch.py`` the ``SupportedArchitecture(name=...)`` gets the ``_ModuleV3``
suffix and every ``<x>_arch`` identifier becomes ``<x>_modulev3_arch``; the
package ``__init__.py`` exports follow (imports and ``__all__``).

    llama_arch = SupportedArchitecture(name="LlamaForCausalLM",
    →  llama_modulev3_arch = SupportedArchitecture(name="LlamaForCausalLM_ModuleV3",
"""

from __future__ import annotations

import re

import libcst as cst

from codemods.base import Codemod, FileState, TransformContext
from codemods.resolve import module_name

_ARCH_NAME = re.compile(r"^(\w+?)_arch$")
SUFFIX = "_ModuleV3"


def v3_arch_variable(name: str) -> str | None:
    """``llama_arch`` → ``llama_modulev3_arch`` (None when not an arch variable)."""
    m = _ARCH_NAME.match(name)
    if m is None or name.endswith("_modulev3_arch"):
        return None
    return f"{m.group(1)}_modulev3_arch"


class Registration(Codemod):
    PREFIX = "MV303"
    NEUTRAL_OK = True

    @classmethod
    def applies(cls, source: str) -> bool:
        return "_arch" in source

    @classmethod
    def applies_to(cls, source: str, context: TransformContext) -> bool:
        # every hook is a no-op outside arch.py and the package __init__.py
        return (context.is_arch_module or context.is_package_init) and cls.applies(source)

    def _active(self) -> bool:
        ctx = self.state.context
        return ctx.is_arch_module or ctx.is_package_init

    def __init__(self, state: FileState) -> None:
        super().__init__(state)
        #: ``x_arch`` names imported from a module that stays V2: they keep their name
        self.kept: set[str] = set()

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        if not self._active() or id(original) in self.state.non_refs:
            return updated  # a keyword (``draft_arch=None``), attribute or parameter name: not the variable
        new = v3_arch_variable(original.value)
        if new is None or original.value in self.kept:
            return updated
        self.state.renamed_exports[original.value] = new
        self.rewrote(original, "MV303", f"{original.value} → {new}")
        return updated.with_changes(value=new)

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom:
        if not self._active() or isinstance(updated.names, cst.ImportStar) or not original.relative:
            return updated
        migrated = self._migrated_module(updated)
        names = []
        for alias in updated.names:
            old = alias.name.value if isinstance(alias.name, cst.Name) else None
            new = v3_arch_variable(old) if old is not None else None
            if old is not None and new is not None and not migrated:
                # a sibling that stays V2 (MV301 says why) still exports the V2 name
                self.kept.add(alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else old)
            elif old is not None and new is not None:
                self.state.renamed_exports[old] = new
                self.rewrote(original, "MV303", f"export {new}")
                alias = alias.with_changes(name=cst.Name(new))
            names.append(alias)
        return updated.with_changes(names=names)

    def _migrated_module(self, node: cst.ImportFrom) -> bool:
        """The import reaches migrated code: the package itself, or a ``*_modulev3`` sibling."""
        if len(node.relative) <= self.state.context.package_depth + 1:
            return True
        return node.module is not None and module_name(node.module).split(".")[0].endswith("_modulev3")

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.SimpleString:
        if not self._active():
            return updated
        value = original.evaluated_value
        if not isinstance(value, str):
            return updated
        new = v3_arch_variable(value)
        if new is not None:  # __all__ entries
            return updated.with_changes(value=original.prefix + original.quote + new + original.quote)
        return updated

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        if not self.state.context.is_arch_module or original.keyword is None or original.keyword.value != "name":
            return updated
        value = updated.value
        if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
            name = value.evaluated_value
            if not name.endswith(SUFFIX):
                self.rewrote(original, "MV303", f"registered as {name}{SUFFIX}")
                new = value.with_changes(value=value.prefix + value.quote + name + SUFFIX + value.quote)
                return updated.with_changes(value=new)
        return updated
