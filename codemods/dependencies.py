"""MV301 — imports of a sibling V2 architecture package.

``from ..llama3.model_config import X`` (or the absolute
``max.pipelines.architectures.llama3...``) points to ``llama3_modulev3`` when
that variant exists beside ``llama3`` or is migrated in the same run (an
absolute import becomes relative, so it reaches that variant and not whatever
``max.pipelines.architectures`` resolves to); otherwise the import stays with
a TODO naming the package to migrate first.

Weight adapters are the exception: an *existing* variant's adapters rename
checkpoint keys for that variant's module tree (max's ports nest it under
``language_model.``), while migrated modules keep the V2 names. So
``weight_adapters`` imports keep the V2 sibling (with a TODO saying why),
unless the package builds the variant's own pipeline model (it imports a name
the variant's ``model`` module defines: ``TransformContext.variant_models``).

    from ..llama3.model_config import Llama3Config
    →  from ..llama3_modulev3.model_config import Llama3Config
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, cast

import libcst as cst

from codemods.args import bind, new_keyword, relayout, self_attr, source, without
from codemods.base import (
    Codemod,
    FieldDecl,
    FileState,
    TransformContext,
    WholeModuleNeeded,
    imports_siblings,
    nodes_of,
)
from codemods.graph_body import METHOD, graph_body
from codemods.layers import defines_init, with_cpu_device_init, with_init
from codemods.registration import v3_arch_variable
from codemods.resolve import module_name
from migrate_v3.knowledge.layers import (
    LAYERS,
    NO_DATA_ARGS,
    PLACEMENT_ARGS,
    V2_MODEL_METHODS,
    V3_MODULE_ATTRIBUTES,
    LayerSpec,
    subclass_spec,
    v2_symbol,
)
from migrate_v3.knowledge.symbols import SIBLING_RENAMES

_ADAPTERS = "weight_adapters"


class Dependencies(Codemod):
    PREFIX = "MV301"
    NEUTRAL_OK = True

    @classmethod
    def applies(cls, source: str) -> bool:
        return imports_siblings(source)

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom:
        ctx = self.state.context
        if original.module is None or (ctx.package or "").endswith("_modulev3"):
            # a V3 package may import its V2 counterpart's neutral helpers on purpose
            return updated
        level = len(original.relative)
        mod = module_name(original.module)
        prefix = ctx.architectures_package + "."
        if level == 0 and mod.startswith(prefix):
            parts = mod[len(prefix) :].split(".")
        elif level >= 2 and level == ctx.package_depth + 2:
            parts = mod.split(".")
        else:
            return updated
        package = parts[0]
        if ctx.package and package == f"{ctx.package}_modulev3":
            self.todo(
                "MV301",
                f"imports {package}, the name this migration writes: the output would import itself; "
                f"move these names into {ctx.package} or keep the existing {package} instead of migrating",
            )
            return updated
        if package == ctx.package or package.endswith("_modulev3"):
            return updated
        target = ctx.v3_packages.get(package)
        if target is None:
            self.todo("MV301", f"depends on V2 package {package}: migrate {package} first (apply {package} ...)")
            return updated
        new = ".".join([target, *parts[1:]])
        if self._adapters_of_existing(target, parts[1:], updated):
            self.todo(
                "MV301",
                f"kept {package}'s V2 weight adapters: the existing {target}'s rename checkpoint keys for its own "
                f"module tree, and the migrated modules here keep the V2 names",
            )
            return updated
        missing = self._missing_names(new, updated)
        v2_names = updated  # (a renamed name's V2 class is the one its attributes compare with: none of the variant's)
        renamed = self._renamed_names(".".join(parts), new, missing, updated) if missing else None
        if renamed is not None:
            (updated, new), missing = renamed, []
        same = self._same_base_classes(".".join(parts), new, missing, updated) if missing else None
        if same is not None:
            updated, missing = same, []
        if missing and ".".join(parts) in ctx.neutral_modules:
            return updated  # (a tokenizer, a config: no V2 graph code comes with it)
        if missing:
            names = ", ".join(missing)
            lacks = (
                f"{new} (already there) has no {names}"
                if new in ctx.v3_exports
                else f"{target} (already there) has no module {'.'.join(parts[1:])} and so no {names}"
            )
            counterparts = [f"{n} → {SIBLING_RENAMES[k]}" for n in missing if (k := f"{'.'.join(parts)}.{n}") in SIBLING_RENAMES]
            self.todo(
                "MV301",
                f"{lacks}: this still imports {package}'s V2 code; port {names} or use what {target} offers instead"
                + (f" ({', '.join(counterparts)}, once its V2 graph hooks move to _instantiate_module)" if counterparts else ""),
            )
            return updated
        kept = self._kept_configs(package, target, parts[1:], updated)
        if kept:
            declared = self._v3_fields_declared(target, parts[1:], kept, updated)
            lacks = "; ".join(f"{target}'s {n} has no {a}" for n, (a, _) in kept.items())
            only3 = "; ".join(f"V2 {package}'s {n} has no {', '.join(left)}" for n, (_, o) in kept.items()
                              if (left := [f for f in o if f not in declared.get(n, ())]))
            self.todo(
                "MV301",
                f"kept {package}'s V2 {', '.join(kept)}: {lacks} (this package reads attributes of these names); "
                f"a config dataclass holds no graph code, so V3 modules read it as V2's did: move to {target}'s "
                "once the package no longer reads them"
                + (f". And {only3}, which {target}'s own modules may read (built with this config they raise "
                   "AttributeError): add those this package builds need, with their V3 defaults" if only3 else ""),
            )
            return updated
        self.rewrote(original, "MV301", f"{package} → {target}")
        self._lost_attributes(package, target, parts[1:], v2_names)
        self._subclassed_ports(package, target, parts[1:], v2_names)
        self._changed_constructors(package, target, parts[1:], v2_names)
        self._inherited_inits(package, target, parts[1:], v2_names)
        self._changed_calls(package, target, parts[1:], v2_names)
        self._gone_fields(package, target, parts[1:], v2_names)
        # the variant found beside the sibling is the one to use, wherever
        # max.pipelines.architectures resolves: import it relatively
        dots = [cst.Dot()] * (ctx.package_depth + 2)
        return updated.with_changes(module=cst.parse_expression(new), relative=dots)

    def _whole_module(self) -> cst.Module:
        if self.state.module is None:
            raise WholeModuleNeeded  # (only the import statements were parsed)
        return self.state.module

    def _renamed_names(
        self, v2_module: str, module: str, missing: list[str], node: cst.ImportFrom
    ) -> tuple[cst.ImportFrom, str] | None:
        """``from ..llama3.model import LlamaModelBase`` → ``...llama3_modulev3.model import Llama3Model as LlamaModelBase``.

        Only when every missing name has a ``SIBLING_RENAMES`` entry the variant defines, and the
        module's subclasses of it only set class attributes (a V2 graph hook would go unused). A
        name the variant moved to another module (``llama3.model.Llama3Inputs`` →
        ``llama3_modulev3.inputs``) is imported from there (this statement does, when it imports
        nothing else), and the dataclass fields it lost are handled (``_lost_fields``). Returns the
        statement and the variant module it imports from.
        """
        ctx = self.state.context
        new = {n: SIBLING_RENAMES.get(f"{v2_module}.{n}") for n in missing}
        package = module.split(".")[0]
        moved = {n: v.rpartition(".") for n, v in new.items() if v is not None and "." in v}
        if isinstance(node.names, cst.ImportStar) or any(
            v is None or (n not in moved and v not in ctx.v3_exports.get(module, frozenset())) for n, v in new.items()
        ) or any(name not in ctx.v3_exports.get(f"{package}.{sub}", frozenset()) for sub, _, name in moved.values()):
            return None
        aliases: list[cst.ImportAlias] = []
        moves: list[tuple[str, str, str, str]] = []  # (V2 name, local, module, name there): imported after the checks
        renames: list[str] = []
        reported: list[str] = []
        for alias in node.names:
            name = alias.name.value if isinstance(alias.name, cst.Name) else ""
            v3 = new.get(name)
            if v3 is None:
                aliases.append(alias)
                continue
            local = _bound_name(alias)
            if name in moved:
                sub, _, v3_name = moved[name]
                moves.append((name, local, f"{package}.{sub}", v3_name))
                continue
            if _only_attributes(self._whole_module(), local):
                pass
            elif (("GraphSpec" in self.state.source or METHOD in self.state.source)
                  and _only_attributes(self._whole_module(), local, _MODULE_HOOKS)):
                # (its graph_specs builds V2 GraphSpecs, or its _build_graph_for_compile a V2 Graph:
                # the file is V2, so PipelineModels runs on it)
                renames.append(local)  # PipelineModels moves either to _instantiate_module
            else:
                return None
            aliases.append(alias.with_changes(name=cst.Name(v3), asname=cst.AsName(name=cst.Name(local))))
            reported.append(f"{v2_module}.{name} → {module}.{v3} (the V3 base that builds the same model)")
        if not aliases and len({there for _, _, there, _ in moves}) > 1:
            return None  # (each to its own module: kept, with its TODO)
        for message in reported:
            self.rewrote(node, "MV301", message)
        changes(self.state).renamed_bases.update(renames)
        here = module if aliases else moves[0][2]
        for name, local, there, v3_name in moves:
            if there == here:  # (every name moved to one module: this statement imports them from there)
                asname = None if local == v3_name else cst.AsName(name=cst.Name(local))
                aliases.append(cst.ImportAlias(name=cst.Name(v3_name), asname=asname))
            else:
                dots = "." * (ctx.package_depth + 2)
                self.state.needed_imports.add((f"{dots}{there}", v3_name, None if local == v3_name else local))
            self.rewrote(node, "MV301", f"{v2_module}.{name} → {there}.{v3_name} (the variant moved it)")
            changes(self.state).moved_classes.add(local)
            self._lost_fields(f"{v2_module}.{name}", f"{there}.{v3_name}", local)
            self._moved_constructor(f"{v2_module}.{name}", f"{there}.{v3_name}", local)
        last = aliases[-1]
        return node.with_changes(names=[*aliases[:-1], last.with_changes(comma=cst.MaybeSentinel.DEFAULT)]), here

    def _moved_constructor(self, v2: str, v3: str, local: str) -> None:
        """A TODO when this module calls ``local(...)`` and the moved V3 class's ``__init__`` is not
        V2's (``StackedMLP(dtype, quantization_encoding, hidden_dim, ...)`` against
        ``LlamaStackedMLP(hidden_dim, feed_forward_length)``): the calls keep V2's arguments."""
        signatures = self.state.context.class_signatures
        old, new = signatures.get(v2), signatures.get(v3)
        if old is not None and new is not None and old != new and _builds(self._whole_module(), local):
            self.todo("MV301", f"{v3}({', '.join(new)}) is not V2 {v2}({', '.join(old)}): update the calls of "
                      f"{local} here")

    def _same_base_classes(
        self, v2_module: str, module: str, missing: list[str], node: cst.ImportFrom
    ) -> cst.ImportFrom | None:
        """``from ..gemma3.layers.scaled_word_embedding import ScaledWordEmbedding`` → ``from
        ..gemma3_modulev3.layers.scaled_word_embedding import ScaledEmbedding as ScaledWordEmbedding``.

        Only when each missing name is a V2 subclass of a library layer with a signature map, and
        the variant's module has exactly one subclass of that layer's V3 class, taking what the
        base's map gives plus every parameter the V2 subclass adds (``subclass_spec``). Its calls
        here are then mapped like the base's (``LayerConstructors``), and called the V3 way
        (``LayerCalls``).
        """
        ctx = self.state.context
        if isinstance(node.names, cst.ImportStar) or not ctx.library_bases:
            return None
        found: dict[str, LayerSpec] = {}
        for name in missing:
            key = f"{v2_module}.{name}"
            base = LAYERS.get(v2_symbol(ctx.library_bases.get(key)) or "")
            init = ctx.class_signatures.get(key)
            if base is None or init is None:
                return None
            twins = [
                k for k, b in ctx.library_bases.items()
                if k.rpartition(".")[0] == module and b.startswith("max.experimental.")
                and b.rpartition(".")[2] == base.v3_name and k in ctx.class_signatures
            ]
            spec = subclass_spec(base, name, init, twins[0].rpartition(".")[2], ctx.class_signatures[twins[0]]) if len(twins) == 1 else None
            if spec is None:
                return None
            found[name] = spec
        self._whole_module()  # (its calls change too)
        aliases: list[cst.ImportAlias] = []
        for alias in node.names:
            name = alias.name.value if isinstance(alias.name, cst.Name) else ""
            spec = found.get(name)
            if spec is None:
                aliases.append(alias)
                continue
            local = _bound_name(alias)
            asname = None if local == spec.v3_name else cst.AsName(name=cst.Name(local))
            aliases.append(alias.with_changes(name=cst.Name(spec.v3_name), asname=asname))
            self.state.layer_substitutes[local] = spec
            self.rewrote(node, "MV301", f"{v2_module}.{name} → {module}.{spec.v3_name} (both subclass {spec.like}; "
                         f"it takes the parameters {name} adds: its calls are mapped as {spec.like}'s)")
        return node.with_changes(names=aliases)

    def _lost_fields(self, v2: str, v3: str, local: str) -> None:
        """V2 ``v2``'s fields that its V3 variant ``v3`` lacks: this module's dataclass subclasses of
        it re-declare them (``SiblingCalls``: its callers pass them, its ``buffers`` reads them);
        a TODO names those left to drop where the module builds ``local(...)`` itself, and any
        that cannot be re-declared (not a field of ``v2`` itself)."""
        ctx = self.state.context
        have = set(ctx.class_fields.get(v3, ()))
        if "forward" in have:  # (a module's V2 __call__ is its V3 forward)
            have.add("__call__")
        gone = sorted(set(ctx.class_fields.get(v2, ())) - have)
        if not gone:
            return
        ported = tuple((g, decl) for g in gone if (decl := ctx.field_decls.get(f"{v2}.{g}")) is not None)
        if ported:
            changes(self.state).ported_fields[local] = (v2, ported)
        left = [g for g in gone if g not in dict(ported)]
        if _builds(self._whole_module(), local):
            self.todo("MV301", f"{v3} has no {', '.join(gone)} (V2 {v2} had): drop them where this module "
                      f"builds {local}(...)" + (" or its subclasses" if left else ""))
        elif left:
            self.todo("MV301", f"{v3} has no {', '.join(left)} (V2 {v2} had): drop them where this package "
                      "builds its subclasses")

    def _adapters_of_existing(self, target: str, rest: list[str], node: cst.ImportFrom) -> bool:
        """``node`` imports weight adapters from a variant that already exists (not migrated in this run).

        Such a variant is max's own port (or an earlier migration): its adapters map checkpoint
        keys onto its module tree (the official ports nest it, ``language_model.``), while
        migrated code keeps the V2 module tree and so needs the V2 adapters' names.
        """
        ctx = self.state.context
        if rest[:1] != [_ADAPTERS] and not (
            not rest and not isinstance(node.names, cst.ImportStar)
            and any(isinstance(a.name, cst.Name) and a.name.value == _ADAPTERS for a in node.names)
        ):
            return False
        if target in ctx.variant_models:
            return False  # the package builds the variant's own pipeline model, and so its tree
        return any(m == target or m.startswith(target + ".") for m in ctx.v3_exports)

    def _kept_configs(
        self, package: str, target: str, rest: list[str], node: cst.ImportFrom
    ) -> dict[str, tuple[str, list[str]]]:
        """Config dataclasses whose V3 variant lacks attributes this package reads: the import keeps
        the V2 module (name → what the variant lacks, and what only the variant has: its own modules
        may read that from a config they are given), as max's phi3_modulev3 keeps llama3's V2
        ``Llama3Config``. Only when every imported name is such a V2 dataclass, and the package reads
        nothing that only the V3 variant has (V3 code given the V2 class would miss it)."""
        ctx = self.state.context
        if not ctx.attribute_reads or not ctx.data_classes or isinstance(node.names, cst.ImportStar):
            return {}
        prefix = ".".join([package, *rest])
        shared = ctx.v3_exports.get(".".join([target, *rest]), frozenset())
        # each name a V2 dataclass, or a name the variant's module has too that is no class of the V2
        # module (a library name both import: ArchConfigWithKVCache); a V2 function may build V2 layers
        if len(_aliases(node)) != len(node.names) or not all(
            f"{prefix}.{n}" in ctx.data_classes or (n in shared and f"{prefix}.{n}" not in ctx.class_attributes)
            for n in (a.name.value for a in _aliases(node))
        ):
            return {}
        kept: dict[str, tuple[str, list[str]]] = {}
        for name, v2, v3 in _class_pairs(ctx.class_attributes, package, target, rest, node):
            lost = _lost(v2, v3, ctx.attribute_reads)
            if _lost(v3, v2, ctx.attribute_reads):
                return {}
            if lost:
                kept[name] = (", ".join(lost), sorted(n for n in set(v3) - set(v2) if not n.startswith("_")))
        return kept

    def _v3_fields_declared(
        self, target: str, rest: list[str], kept: dict[str, tuple[str, list[str]]], node: cst.ImportFrom
    ) -> dict[str, list[str]]:
        """The V3-only fields of each kept V2 config (``mesh``, ``mla_o_proj_quantized``) that its
        subclasses in this module will declare with the variant's defaults (``SiblingCalls``): the
        variant's own modules, built with the subclass, read them. Those without a plain default
        stay in the TODO. Returns config name → the fields declared."""
        ctx = self.state.context
        declared: dict[str, list[str]] = {}
        for name, (_, only) in kept.items():
            local = _local_name(node, name)
            v3 = ".".join([target, *rest, name])
            fields = tuple((f, decl) for f in only if (decl := ctx.field_decls.get(f"{v3}.{f}")) and decl.default is not None)
            if fields and _subclassed(self._whole_module(), local):
                changes(self.state).v3_fields[local] = (v3, fields)
                declared[name] = [f for f, _ in fields]
        return declared

    def _lost_attributes(self, package: str, target: str, rest: list[str], node: cst.ImportFrom) -> None:
        """A class whose V3 variant lacks attributes of the V2 class that this package reads."""
        ctx = self.state.context
        if not ctx.attribute_reads:
            return
        for name, v2, v3 in _class_pairs(ctx.class_attributes, package, target, rest, node):
            lost = _lost(v2, v3, ctx.attribute_reads)
            if lost:
                self.todo(
                    "MV301",
                    f"{target}'s {name} has no {', '.join(lost)} (V2 {package}'s {name} has, and this package "
                    f"reads attributes of these names): define them where this package needs them "
                    f"(a subclass of {name}) or read them from elsewhere",
                )

    def _subclassed_ports(self, package: str, target: str, rest: list[str], node: cst.ImportFrom) -> None:
        """A V3 module class of an existing variant (max's port, not this run's migration) that
        this module subclasses: the subclass takes the port's module tree, whose parameter names
        need not be V2's (``llama3_modulev3``'s ``Llama3`` holds its layers under ``language_model``)."""
        ctx = self.state.context
        if ".".join([target, *rest]) not in ctx.v3_exports:
            return
        modules = [(name, local) for name, v2, v3 in _class_pairs(ctx.class_attributes, package, target, rest, node)
                   if "forward" in v3 and "forward" not in v2
                   for local in [_local_name(node, name)]]
        if not modules:
            return
        module = self._whole_module()
        for name, local in modules:
            if _subclassed(module, local):
                self.todo(
                    "MV301",
                    f"{target}'s {name} is max's own port: a subclass takes its module tree, so its parameter names "
                    f"(the checkpoint keys compile() binds) need not be V2 {package}'s {name}'s: compare them with "
                    "`migrate-v3 weights check` and map them in the weight adapter",
                )

    def _changed_constructors(self, package: str, target: str, rest: list[str], node: cst.ImportFrom) -> None:
        """A class whose V3 variant's ``__init__`` takes what the V2 class's calls do not pass."""
        for name, v2, v3 in _class_pairs(self.state.context.class_signatures, package, target, rest, node):
            if v2 == v3:
                continue
            v2_names = {p.rstrip("=") for p in v2}
            v3_names = {p.rstrip("=") for p in v3}
            new_required = [p for p in v3 if not p.endswith("=") and p not in ("*", "**") and p not in v2_names]
            gone = [p.rstrip("=") for p in v2 if p not in ("*", "**") and p.rstrip("=") not in v3_names]
            if "**" in v3:
                gone = []
            if new_required == [_KV] and not gone and list(v3[:1]) == ["config"]:
                local = _local_name(node, name)
                changes(self.state).kv_from_config.add(local)
                inner = self._structured_twin(target, rest, name, v2)
                if inner is not None:
                    dots = "." * (self.state.context.package_depth + 2)
                    module = ".".join([target, *rest])
                    changes(self.state).structured_twins[local] = (f"{dots}{module}", inner)
                    fields = self.state.context.class_fields
                    changes(self.state).twin_only[local] = frozenset(
                        fields.get(f"{module}.{inner}", frozenset()) - fields.get(f"{module}.{name}", frozenset()))
                continue
            if new_required == ["device"] and set(gone) <= {"_freqs_cis"} and name.endswith("RotaryEmbedding") and "device" in v3:
                local = _local_name(node, name)
                changes(self.state).rope_device[local] = tuple(p.rstrip("=") for p in v3)
                continue
            # placement, and V2 parameters with a default (a person checks the calls that pass one)
            if gone and not new_required and "*" not in v2 and "**" not in v2 and all(
                p in PLACEMENT_ARGS or f"{p}=" in v2 for p in gone
            ):
                local = _local_name(node, name)
                changes(self.state).placement_gone[local] = (tuple(p.rstrip("=") for p in v2), frozenset(gone))
                continue
            if new_required or gone:
                self.todo(
                    "MV301",
                    f"{target}'s {name}({', '.join(v3)}) is not V2 {package}'s {name}({', '.join(v2)}): "
                    "update the calls of it here"
                    + (f" (it needs {', '.join(new_required)})" if new_required else "")
                    + (f" (it takes no {', '.join(gone)})" if gone else ""),
                )

    def _inherited_inits(self, package: str, target: str, rest: list[str], node: cst.ImportFrom) -> None:
        """A class whose V3 variant runs an ``__init__`` that ``_changed_constructors`` cannot compare with
        V2's (the variant inherits it, or V2's class inherits a library one): a subclass's
        ``super().__init__()`` passing a keyword that ``__init__`` does not take gets a TODO (``SiblingCalls``)."""
        ctx = self.state.context
        for name in _imported_names(node):
            v2, v3 = ".".join([package, *rest, name]), ".".join([target, *rest, name])
            if v3 in ctx.class_signatures and v2 in ctx.class_signatures:
                continue  # (both their own: _changed_constructors compares them)
            owner = v3 if v3 in ctx.class_signatures else ctx.init_owners.get(v3)
            if owner is None or "**" in ctx.class_signatures[owner]:
                continue
            changes(self.state).base_inits[_local_name(node, name)] = (owner.rpartition(".")[2], tuple(ctx.class_signatures[owner]))

    def _structured_twin(self, target: str, rest: list[str], name: str, v2: tuple[str, ...]) -> str | None:
        """The class of the variant's module that a V2 ``name`` built as a child module becomes, when
        the variant's ``name`` is the flat-input root (its ``forward`` takes ``*`` graph inputs, its
        constructor adds ``kv_params``): the one other class there built as V2's ``name`` was
        (the same ``__init__`` parameters) whose ``forward`` takes structured inputs
        (``llama3_modulev3``'s ``Llama3TextModel`` beside the ``Llama3`` that wraps it)."""
        ctx = self.state.context
        module = ".".join([target, *rest])
        if "*" not in ctx.call_signatures.get(f"{module}.{name}", ()):
            return None
        twins = [
            key.rsplit(".", 1)[1] for key, params in ctx.class_signatures.items()
            if key.rsplit(".", 1)[0] == module and key != f"{module}.{name}" and params == v2
            and key in ctx.call_signatures and "*" not in ctx.call_signatures[key]
        ]
        return twins[0] if len(twins) == 1 else None

    def _changed_calls(self, package: str, target: str, rest: list[str], node: cst.ImportFrom) -> None:
        """A class whose V3 variant's ``forward`` lacks V2 ``__call__`` parameters that carry no data
        (gemma3's ``Gemma3TransformerBlock`` took ``signal_buffers`` third): its calls here drop them
        (``LayerCalls``), when the rest keep their positions (as many positional parameters left)."""
        for name, v2, v3 in _class_pairs(self.state.context.call_signatures, package, target, rest, node):
            v3_names = {p.rstrip("=") for p in v3}
            gone = frozenset(p.rstrip("=") for p in v2 if p.rstrip("=") in NO_DATA_ARGS and p.rstrip("=") not in v3_names)
            kept = [p for p in v2 if p not in ("*", "**") and p.rstrip("=") not in gone]
            if gone and len(kept) == len([p for p in v3 if p not in ("*", "**")]):
                self.state.call_drops[_local_name(node, name)] = gone

    def _gone_fields(self, package: str, target: str, rest: list[str], node: cst.ImportFrom) -> None:
        """A V2 config dataclass whose V3 variant lacks fields it has (inherited ones included): calls
        that build it here (``cls(...)`` in a subclass, ``super().__init__``, ``Name(...)``) drop them."""
        ctx = self.state.context
        prefix = ".".join([package, *rest])
        for name, v2, v3 in _class_pairs(ctx.class_fields, package, target, rest, node):
            gone = frozenset(_lost(v2, v3, v2)) if f"{prefix}.{name}" in ctx.data_classes else frozenset()
            if gone:
                local = _local_name(node, name)
                changes(self.state).fields_gone[local] = (target, gone)

    def _missing_names(self, module: str, node: cst.ImportFrom) -> list[str]:
        """Names ``node`` imports that an existing V3 variant's ``module`` does not define
        (all of them when the variant has no such module).

        In ``arch.py`` and the package ``__init__.py``, Registration renames
        ``x_arch`` to ``x_modulev3_arch``: the variant must define that name.
        """
        ctx = self.state.context
        exports = ctx.v3_exports.get(module)
        if isinstance(node.names, cst.ImportStar):
            return []
        renames = ctx.is_arch_module or ctx.is_package_init
        wanted = [
            (v3_arch_variable(a.name.value) or a.name.value) if renames else a.name.value
            for a in node.names
            if isinstance(a.name, cst.Name)
        ]
        if exports is None:
            package = module.split(".")[0]
            known = any(m == package or m.startswith(package + ".") for m in ctx.v3_exports)
            # a module the existing variant lacks (submodules imported by name are modules)
            return [n for n in wanted if f"{module}.{n}" not in ctx.v3_exports] if known else []
        if "*" in exports:
            return []
        return [n for n in wanted if n not in exports and f"{module}.{n}" not in ctx.v3_exports]


def _inherited_reads(node: cst.ClassDef) -> set[str]:
    """``self.<a>`` that ``node``'s methods read and ``node`` neither sets nor defines: what it
    expects from its bases."""
    reads = {a.attr.value for a in nodes_of(node.body, (cst.Attribute,))
             if isinstance(a, cst.Attribute) and isinstance(a.value, cst.Name) and a.value.value == "self"}
    sets = {self_attr(t.target) for t in nodes_of(node.body, (cst.AssignTarget,)) if isinstance(t, cst.AssignTarget)}
    defined = {s.name.value for s in node.body.body if isinstance(s, cst.FunctionDef)} \
        if isinstance(node.body, cst.IndentedBlock) else set()
    return reads - sets - defined


@dataclass
class SiblingChanges:
    """What ``Dependencies`` learned, at the imports, of sibling classes whose V3 constructor
    differs (``SiblingCalls`` rewrites their calls), by the classes' local names."""

    #: classes whose V3 ``__init__`` also needs ``kv_params`` (read off the config)
    kv_from_config: set[str] = field(default_factory=set)
    #: of those, the flat-input roots whose variant module holds the module they wrap → (that module,
    #: the wrapped class): a child built in a module's ``__init__`` is that class
    structured_twins: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: of those, the attributes only the wrapped class has (``embed_tokens``, ``layers``): a subclass
    #: that reads one subclasses the wrapped class
    twin_only: dict[str, frozenset[str]] = field(default_factory=dict)
    #: classes whose V3 ``__init__`` takes none of these V2 placement parameters → (V2 parameters, the ones gone)
    placement_gone: dict[str, tuple[tuple[str, ...], frozenset[str]]] = field(default_factory=dict)
    #: RoPE classes whose V3 ``__init__`` also needs ``device`` → its V3 parameters
    rope_device: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: classes whose V3 ``__init__`` (their own or inherited, with no ``**``) could not be compared with
    #: V2's → (the class defining it, its parameters): what a subclass's ``super().__init__()`` may pass
    base_inits: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    #: V2 pipeline bases imported as their variant's V3 pipeline model (``SIBLING_RENAMES``) whose
    #: subclasses here define ``graph_specs``: ``PipelineModels`` turns it into ``_instantiate_module``
    renamed_bases: set[str] = field(default_factory=set)
    #: config dataclasses whose V3 variant lacks V2 fields → (the variant, those fields)
    fields_gone: dict[str, tuple[str, frozenset[str]]] = field(default_factory=dict)
    #: V2 classes imported from the module their variant moved them to (``Llama3Inputs`` from
    #: ``llama3_modulev3.inputs``): a ModuleV3 inputs class (``BatchProcessors`` orders a
    #: subclass's ``buffers`` the V3 way)
    moved_classes: set[str] = field(default_factory=set)
    #: moved dataclasses whose variant lost V2 fields → (the V2 class, (field, its V2 declaration)...):
    #: ``SiblingCalls`` re-declares them on the dataclass subclasses here
    ported_fields: dict[str, tuple[str, tuple[tuple[str, FieldDecl], ...]]] = field(default_factory=dict)
    #: V2 configs kept (the variant lacks what the package reads) → (the V3 config, (field, its V3
    #: declaration)...): ``SiblingCalls`` declares these V3-only fields on the subclasses here
    v3_fields: dict[str, tuple[str, tuple[tuple[str, FieldDecl], ...]]] = field(default_factory=dict)


def changes(state: FileState) -> SiblingChanges:
    """This file's :class:`SiblingChanges` (made on first use)."""
    found = state.shared.get("SiblingChanges")
    if found is None:
        found = state.shared["SiblingChanges"] = SiblingChanges()
    return found


class SiblingCalls(Codemod):
    """MV301, at the calls: a sibling class whose V3 variant's constructor differs (what
    ``Dependencies`` found at its import) is called the V3 way. A codemod of its own so that
    ``Dependencies`` hooks import statements only (a file whose only changes are imports takes
    the import-statement path, see ``migrate_v3.pipeline``)."""

    PREFIX = "MV301"
    NEUTRAL_OK = True

    @classmethod
    def applies_to(cls, source: str, context: TransformContext) -> bool:
        return bool(context.class_signatures or context.class_fields) and Dependencies.applies(source)

    def __init__(self, state: FileState) -> None:
        super().__init__(state)
        #: per enclosing class: the sibling class with a changed constructor it subclasses
        self._fixed_bases: list[str | None] = []
        changed = changes(state)
        self._kv_from_config = changed.kv_from_config
        self._placement_gone = changed.placement_gone
        self._rope_device = changed.rope_device
        self._fields_gone = changed.fields_gone
        self._ported_fields = changed.ported_fields
        self._v3_fields = changed.v3_fields
        self._twins = changed.structured_twins
        self._twin_only = changed.twin_only
        #: per enclosing class: it subclasses a flat-input root but reads what the root wraps
        #: (``self.layers``): it subclasses the wrapped class instead (see ``_inherited_reads``)
        self._twin_bases: list[bool] = []
        #: the enclosing classes and functions ("" for a class): where a call builds a child module
        self._scopes: list[str] = []
        self._base_inits = changed.base_inits
        #: per enclosing class: its base of ``base_inits``
        self._init_bases: list[str | None] = []
        #: per enclosing function: the keys it stores in each dict (``kwargs["x"] = ...``)
        self._stored_keys: list[dict[str, set[str]]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append(node.name.value)
        in_class = len(self._scopes) >= 2 and self._scopes[-2] == "" and bool(self._init_bases) and self._init_bases[-1]
        self._stored_keys.append(_stored_keys(node) if in_class and node.name.value == "__init__" else {})

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self._scopes.pop()
        self._stored_keys.pop()
        return updated

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._scopes.append("")
        self._init_bases.append(next((b.value.value for b in node.bases if isinstance(b.value, cst.Name)
                                      and b.value.value in self._base_inits), None) if self._base_inits else None)
        fixed = (self._kv_from_config | self._placement_gone.keys() | self._rope_device.keys() | self._fields_gone.keys()
                 | self._ported_fields.keys() | self._v3_fields.keys())
        names = [b.value.value for b in node.bases if isinstance(b.value, cst.Name)] if fixed else []
        base = next((n for n in names if n in fixed), None)
        self._fixed_bases.append(base)
        reads = _inherited_reads(node) if base in self._twins else set()
        self._twin_bases.append(bool(reads & self._twin_only.get(base or "", frozenset())))
        if self._twin_bases[-1] and base is not None:
            module, twin = self._twins[base]
            fields = self.state.context.class_fields
            key = f"{module.lstrip('.')}.{twin}"
            ported = {m for m, modules in V2_MODEL_METHODS.items() if module.lstrip(".") in modules}  # (LayerMethods)
            lost = sorted(reads - fields.get(key, frozenset()) - V3_MODULE_ATTRIBUTES - ported) if key in fields else []
            if lost:
                self.todo("MV301", f"{twin} has no {', '.join(lost)} (V2 {base} had them, from max's V2 Transformer "
                          f"or its own): {node.name.value} reads them; compute them here (V3 layers take their rope "
                          "and return hidden states themselves)")

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self._scopes.pop()
        self._init_bases.pop()
        base = self._fixed_bases.pop()
        if self._twin_bases.pop() and base is not None:
            module, twin = self._twins[base]
            self.state.needed_imports.add((module, twin, None))
            self.rewrote(original, "MV301", f"class {original.name.value}({base}) reads what {base} wraps: it "
                         f"subclasses {twin} (structured inputs, V2's parameter names); {base} takes flat graph inputs")
            return updated.with_changes(bases=[
                b.with_changes(value=cst.Name(twin)) if isinstance(b.value, cst.Name) and b.value.value == base else b
                for b in updated.bases])
        if base in self._ported_fields and isinstance(updated.body, cst.IndentedBlock):
            return self._port_fields(original, updated, base, *self._ported_fields[base])
        if base in self._v3_fields and isinstance(updated.body, cst.IndentedBlock):
            return self._declare_v3_fields(original, updated, base, *self._v3_fields[base])
        if base in self._kv_from_config and not defines_init(original) and isinstance(updated.body, cst.IndentedBlock):
            # its callers (in any file) pass the V2 arguments: the config holds the kv_params the V3 port also takes
            self.rewrote(original, "MV301", f"class {original.name.value}({base}): __init__ passes {base}'s V3 {_KV} "
                         f"(config.{_KV})")
            return with_init(self.state, updated, (
                "def __init__(self, config: Any, *args: Any, **kwargs: Any) -> None:\n"
                f"    super().__init__(config, config.{_KV}, *args, **kwargs)\n"
            ), ("typing", "Any"))
        if base in self._rope_device and not defines_init(original) and isinstance(updated.body, cst.IndentedBlock):
            # its callers (in any file) pass the V2 arguments: the device V2 built the tables on is the default
            self.rewrote(original, "MV301", f"class {original.name.value}({base}): __init__ passes {base}'s V3 device (CPU(), as V2)")
            return with_cpu_device_init(self.state, updated)
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """``Llama3(config)`` / a subclass's ``super().__init__(config)`` → ``..., kv_params=config.kv_params``.

        The V3 pipeline passes ``construct_kv_params`` of the same config; the config holds it.
        """
        if self._init_bases and self._init_bases[-1] and self._scopes[-2:] == ["", "__init__"] and _is_super_init(original.func):
            self._untaken_keywords(updated, self._init_bases[-1])
        if not self._kv_from_config and not self._placement_gone and not self._rope_device and not self._fields_gone:
            return updated
        func = original.func
        enclosing = self._fixed_bases[-1] if self._fixed_bases else None
        if enclosing in self._fields_gone and (_is_super_init(func) or (isinstance(func, cst.Name) and func.value == "cls")):
            return self._drop_fields(original, updated, enclosing)
        if isinstance(func, cst.Name) and func.value in self._fields_gone:
            return self._drop_fields(original, updated, func.value)
        partial = self._partial_of(original)
        if partial in self._placement_gone:
            # ``functools.partial(X, a, dtype, eps=e)``: the arguments after X are X's, as in a call
            inner = updated.with_changes(args=updated.args[1:])
            done = self._drop_placement(original, inner, partial, *self._placement_gone[partial])
            return updated if done is inner else updated.with_changes(args=[updated.args[0], *done.args])
        if isinstance(func, cst.Name) and (
            func.value in self._kv_from_config or func.value in self._placement_gone or func.value in self._rope_device
        ):
            name = func.value
        elif self._fixed_bases and self._fixed_bases[-1] and _is_super_init(func):
            if self._twin_bases[-1]:
                return updated  # (the wrapped class takes the V2 arguments)
            name = self._fixed_bases[-1]
        else:
            return updated
        if name in self._placement_gone:
            return self._drop_placement(original, updated, name, *self._placement_gone[name])
        if name in self._rope_device:
            return self._rope_with_device(original, updated, name, self._rope_device[name])
        if name not in self._kv_from_config:
            return updated
        if name in self._twins and self._scopes[-2:] == ["", "__init__"] and isinstance(func, cst.Name):
            module, twin = self._twins[name]
            self.state.needed_imports.add((module, twin, None))
            self.rewrote(original, "MV301", f"{name}(...) built in a module's __init__ → {twin}(...): the child module "
                         f"{name} wraps (structured inputs, V2's parameter names); {name} takes flat graph inputs")
            return updated.with_changes(func=cst.Name(twin))
        args = updated.args
        if any(a.star for a in args) or any(a.keyword is not None and a.keyword.value == _KV for a in args):
            return updated
        config = [a for a in args if a.keyword is None or a.keyword.value == "config"]
        if len(args) != 1 or len(config) != 1:
            self.todo("MV301", f"{name}(...) of the V3 port also needs {_KV}: pass {_KV}=<its config>.{_KV}")
            return updated
        self.rewrote(original, "MV301", f"{name}(config) → {name}(config, {_KV}=config.{_KV}) (the V3 signature)")
        value = cst.Attribute(value=config[0].value, attr=cst.Name(_KV))
        return updated.with_changes(args=[args[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                                          cst.Arg(value=value, keyword=cst.Name(_KV),
                                                  equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                                        whitespace_after=cst.SimpleWhitespace("")))])

    def _untaken_keywords(self, call: cst.Call, base: str) -> None:
        """``super().__init__(..., x=v)`` or ``kwargs["x"] = v; super().__init__(**kwargs)`` where the
        ``__init__`` the V3 ``base`` runs has no ``x`` (and no ``**``): TypeError at construction."""
        owner, params = self._base_inits[base]
        taken = {p.rstrip("=") for p in params}
        passed = {a.keyword.value for a in call.args if a.keyword is not None}
        for a in call.args:
            if a.star == "**" and isinstance(a.value, cst.Name):
                passed |= self._stored_keys[-1].get(a.value.value, set())
        untaken = sorted(passed - taken)
        if untaken:
            them = "it" if len(untaken) == 1 else "them"
            self.todo("MV301", f"V3 {base}'s __init__ is {owner}({', '.join(params)}), which takes no "
                      f"{', '.join(untaken)}: this super().__init__() passes {them}; drop {them}, or set what "
                      f"{them} set{'s' if them == 'it' else ''} after super().__init__()")

    def _partial_of(self, call: cst.Call) -> str | None:
        """``X`` of ``functools.partial(X, ...)`` (a bare name), else None."""
        if not call.args or self.qualname(call.func) != "functools.partial":
            return None
        first = call.args[0]
        return first.value.value if first.keyword is None and not first.star and isinstance(first.value, cst.Name) else None

    def _port_fields(
        self, original: cst.ClassDef, updated: cst.ClassDef, base: str, v2: str, fields: tuple[tuple[str, FieldDecl], ...]
    ) -> cst.ClassDef:
        """``@dataclass class X(Llama3Inputs)`` re-declares the V2 fields the V3 base lost, keyword-only
        (V2's callers still pass them, its methods read them), after its own fields."""
        assert isinstance(updated.body, cst.IndentedBlock)
        own = _own_names(updated.body.body)
        missing = [(name, decl) for name, decl in fields if name not in own]
        if not missing:
            return updated
        if not _is_dataclass(original):
            self.todo("MV301", f"class {original.name.value}({base}): {base}'s V3 variant has no "
                      f"{', '.join(n for n, _ in missing)} (V2 {v2} had): declare them here or drop them where it is built")
            return updated
        self.rewrote(original, "MV301", f"class {original.name.value}({base}): re-declares V2 {', '.join(n for n, _ in missing)} "
                     f"(its V3 variant has none)")
        comment = f"# V2 {v2.rsplit('.', 1)[-1]}'s fields its V3 variant lacks: V2's callers pass them"
        return self._declare(updated, [(n, d.annotation, d.value, d.imports) for n, d in missing], comment)

    def _declare_v3_fields(
        self, original: cst.ClassDef, updated: cst.ClassDef, base: str, v3: str, fields: tuple[tuple[str, FieldDecl], ...]
    ) -> cst.ClassDef:
        """``class KimiTextConfig(DeepseekV3Config)`` (the V2 config, kept) declares the fields only
        its V3 variant has, with the variant's defaults: the variant's modules, built with it, read
        them. A dataclass takes them as keyword-only fields, any other class as class attributes."""
        assert isinstance(updated.body, cst.IndentedBlock)
        own = _own_names(updated.body.body)
        missing = [(name, decl) for name, decl in fields if name not in own]
        if not missing:
            return updated
        dataclass = _is_dataclass(original)
        self.rewrote(original, "MV301", f"class {original.name.value}({base}): declares {', '.join(n for n, _ in missing)} "
                     f"with {v3.rsplit('.', 1)[-1]}'s V3 defaults (V2 {base} has none; the V3 modules read them)")
        comment = f"# V3 {v3.rsplit('.', 1)[-1]}'s fields V2 {base} lacks, with their V3 defaults: the V3 modules read them"
        lines = [(n, d.annotation, d.value if dataclass else str(d.default), d.imports) for n, d in missing]
        return self._declare(updated, lines, comment)

    def _declare(
        self, updated: cst.ClassDef, lines: list[tuple[str, str, str, tuple[tuple[str, str], ...]]], comment: str
    ) -> cst.ClassDef:
        """``name: annotation = value`` lines after the class's leading simple statements, under ``comment``."""
        assert isinstance(updated.body, cst.IndentedBlock)
        body = list(updated.body.body)
        new: list[cst.BaseStatement] = []
        for name, annotation, value, imports in lines:
            for module, imported in imports:
                self.state.import_name(module, imported)
            if value.startswith("field("):
                self.state.import_name("dataclasses", "field")
            new.append(cst.parse_statement(f"{name}: {annotation} = {value}\n"))
        new[0] = new[0].with_changes(leading_lines=[cst.EmptyLine(indent=True, comment=cst.Comment(comment))])
        at = next((i for i, s in enumerate(body) if not isinstance(s, cst.SimpleStatementLine)), len(body))
        return updated.with_changes(body=updated.body.with_changes(body=[*body[:at], *new, *body[at:]]))

    def _drop_fields(self, original: cst.Call, updated: cst.Call, name: str) -> cst.Call:
        """``cls(..., use_subgraphs=x)`` → ``cls(...)`` when the V3 base has no such field (the
        dataclass's ``__init__`` would raise TypeError); a TODO says what was dropped."""
        target, gone = self._fields_gone[name]
        dropped = [a for a in updated.args if a.keyword is not None and a.keyword.value in gone]
        if not dropped:
            return updated
        names = ", ".join(a.keyword.value for a in dropped if a.keyword is not None)
        self.rewrote(original, "MV301", f"{name}(...): {names} dropped ({target}'s {name} has no such field)")
        self.todo("MV301", f"dropped {names}: {target}'s {name} has no such field (V2's had; the V3 modules never read it): "
                  "check nothing here needs it")
        kept = [a for a in updated.args if all(a is not d for d in dropped)]
        return updated.with_changes(args=relayout(updated.args, kept))

    def _rope_with_device(self, original: cst.Call, updated: cst.Call, name: str, v3: tuple[str, ...]) -> cst.Call:
        """``Rope(d, h, t, s, head_dim=k)`` → ``Rope(d, h, t, s, head_dim=k, device=CPU())`` (V2 built it on the CPU)."""
        args = updated.args
        if any(a.star or (a.keyword is not None and a.keyword.value == "device") for a in args):
            return updated
        if sum(1 for a in args if a.keyword is None) > v3.index("device"):
            self.todo("MV301", f"{name}(...) of the V3 port takes device after its first {v3.index('device')} arguments: "
                      "pass the rest by keyword and device=CPU()")
            return updated
        self.state.import_name("max.driver", "CPU")
        self.rewrote(original, "MV301", f"{name}(...): device=CPU() (the V3 port needs one; V2 built the tables on the CPU)")
        new = [*args, new_keyword("device", "CPU()")]
        return updated.with_changes(args=relayout(args, new))

    def _drop_placement(
        self, original: cst.Call, updated: cst.Call, name: str, params: tuple[str, ...], gone: frozenset[str]
    ) -> cst.Call:
        """``Vision(config, device=d)`` → ``Vision(config)``: the V3 port takes no placement (``Module.to``)."""
        bound = bind(updated, params)
        if bound is None:
            self.todo("MV301", f"{name}(...) of the V3 port takes no {', '.join(sorted(gone))}: drop them here")
            return updated
        if not gone & set(bound.order):
            return updated
        kept = [f"{p}={source(bound.args[p].value)}" for p in bound.order if p in gone and p not in PLACEMENT_ARGS]
        if kept:
            self.todo("MV301", f"{name}(...) of the V3 port takes no {', '.join(kept)}: dropped; where that is not "
                      f"V2's default, port what it did (a subclass of {name})")
        self.rewrote(original, "MV301", f"{name}(...): {', '.join(sorted(gone & set(bound.order)))} dropped (the V3 port takes none)")
        return updated.with_changes(args=without(updated, bound, params, gone))


#: the V2 Llama pipeline base's hooks a subclass may override and still move onto the V3 base:
#: ``_create_model_config`` (the same hook there), ``graph_specs`` (``PipelineModels`` makes it
#: ``_instantiate_module``, or a stub that raises with a TODO when it cannot) and
#: ``_init_distributed_runtime`` (``PipelineModels`` drops its V2 ``session`` parameter)
_MODULE_HOOKS = frozenset({"_create_model_config", "graph_specs", "_init_distributed_runtime"})
#: what V2's ``LlamaModelBase`` calls and V3's ``Llama3Model`` does not (or with other parameters),
#: read off max 26.7 (``tests/test_dependencies_hooks.py`` compares): an override of one would go
#: unused on the V3 base. Methods outside this set are the class's own helpers or hooks both bases
#: call alike (``execute``, ``_wire_batch_processor``, ``estimate_activation_memory``, ...).
V2_GRAPH_HOOKS = frozenset({
    "load_model", "load_graphs", "compile_graphs", "init_graphs", "_build_graph_for_compile",
    "_single_device_spec", "_tensor_parallel_spec", "_data_parallel_spec",
})


def _is_dataclass(node: cst.ClassDef) -> bool:
    """``@dataclass`` / ``@dataclass(...)`` / ``@dataclasses.dataclass``."""
    for deco in node.decorators:
        func = deco.decorator.func if isinstance(deco.decorator, cst.Call) else deco.decorator
        if (isinstance(func, cst.Name) and func.value == "dataclass") or (
            isinstance(func, cst.Attribute) and func.attr.value == "dataclass"
        ):
            return True
    return False


def _own_names(body: Sequence[cst.BaseStatement]) -> set[str]:
    """The names a class body declares or assigns at its top level (``x: T``, ``x = v``)."""
    return {t.value for line in body if isinstance(line, cst.SimpleStatementLine) for s in line.body
            for t in ([s.target] if isinstance(s, cst.AnnAssign) else [a.target for a in s.targets] if isinstance(s, cst.Assign) else [])
            if isinstance(t, cst.Name)}


def _subclassed(module: cst.Module, name: str) -> bool:
    """A top-level class of ``module`` names ``name`` among its bases."""
    return any(isinstance(c, cst.ClassDef) and any(isinstance(b.value, cst.Name) and b.value.value == name for b in c.bases)
               for c in module.body)


def _builds(module: cst.Module, name: str) -> bool:
    """``module`` calls ``name(...)``."""
    return any(
        isinstance(c, cst.Call) and isinstance(c.func, cst.Name) and c.func.value == name for c in nodes_of(module, (cst.Call,))
    )


def _only_attributes(module: cst.Module, base: str, hooks: frozenset[str] = frozenset()) -> bool:
    """Every class of ``module`` subclassing ``base`` only sets class attributes (an ``__init__``
    that only calls ``super().__init__`` too), and there is one: it overrides none of the base's V2 hooks
    (but ``hooks``; then at least one class overrides ``graph_specs`` or a ``_build_graph_for_compile``
    that ``codemods.graph_body`` moves, and methods of other names are allowed unless the V3 base would
    leave them uncalled, ``V2_GRAPH_HOOKS``)."""
    found = False
    graph_specs = not hooks
    for cls in module.body:
        if not isinstance(cls, cst.ClassDef) or not any(
            isinstance(b.value, cst.Name) and b.value.value == base for b in cls.bases
        ):
            continue
        found = True
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        for stmt in body:
            if isinstance(stmt, cst.FunctionDef):
                # a graph method PipelineModels turns into _instantiate_module (codemods.graph_body)
                movable = bool(hooks) and stmt.name.value == METHOD and graph_body(stmt, cls.name.value, set(), "Any") is not None
                graph_specs = graph_specs or stmt.name.value == "graph_specs" or movable
                if movable or stmt.name.value in hooks or (hooks and stmt.name.value not in V2_GRAPH_HOOKS | {"__init__"}):
                    continue
                if stmt.name.value != "__init__" or not _only_super_init(stmt):
                    return False
            elif not isinstance(stmt, cst.SimpleStatementLine) or not all(
                isinstance(s, (cst.Assign, cst.AnnAssign, cst.Expr, cst.Pass)) for s in stmt.body
            ):
                return False
    return found and graph_specs


def _only_super_init(init: cst.FunctionDef) -> bool:
    stmts = init.body.body if isinstance(init.body, cst.IndentedBlock) else ()
    for stmt in stmts:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if not isinstance(small, cst.Expr):
            return False
        if isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
            continue
        if not (isinstance(small.value, cst.Call) and _is_super_init(small.value.func)):
            return False
    return True


_KV = "kv_params"


def _local_name(node: cst.ImportFrom, name: str) -> str:
    """The name ``node`` binds for the imported ``name`` (its ``as`` name, if any)."""
    return next((_bound_name(a) for a in _aliases(node) if a.name.value == name), name)


def _bound_name(alias: cst.ImportAlias) -> str:
    """The name an import alias binds: its ``as`` name, else the imported name."""
    if alias.asname and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    return alias.name.value if isinstance(alias.name, cst.Name) else ""


def _aliases(node: cst.ImportFrom) -> list[cst.ImportAlias]:
    return [] if isinstance(node.names, cst.ImportStar) else [a for a in node.names if isinstance(a.name, cst.Name)]


def _stored_keys(func: cst.FunctionDef) -> dict[str, set[str]]:
    """The string keys ``func`` stores in each dict name: ``d["x"] = v``, ``d.setdefault("x", v)``."""
    out: dict[str, set[str]] = {}

    def store(holder: cst.BaseExpression, key: cst.BaseExpression) -> None:
        if isinstance(holder, cst.Name) and isinstance(key, cst.SimpleString) and isinstance(text := key.evaluated_value, str):
            out.setdefault(holder.value, set()).add(text)

    for node in nodes_of(func.body, (cst.Assign, cst.Call)):
        if isinstance(node, cst.Assign):
            for t in node.targets:
                slot = t.target
                if isinstance(slot, cst.Subscript) and len(slot.slice) == 1 and isinstance(slot.slice[0].slice, cst.Index):
                    store(slot.value, slot.slice[0].slice.value)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "setdefault" \
                and node.args:
            store(node.func.value, node.args[0].value)
    return out


def _is_super_init(func: cst.BaseExpression) -> bool:
    return (
        isinstance(func, cst.Attribute) and func.attr.value == "__init__" and isinstance(func.value, cst.Call)
        and isinstance(func.value.func, cst.Name) and func.value.func.value == "super"
    )


def _lost(has: Collection[str], lacks: Collection[str], reads: Collection[str]) -> list[str]:
    """Attributes of ``has`` that ``lacks`` does not define and the package reads (sorted).
    A dunder is every class's: one not in a class body is inherited, not lost."""
    return sorted(n for n in set(has) - set(lacks) if n in reads and not (n.startswith("__") and n.endswith("__")))


_Fact = TypeVar("_Fact")


def _imported_names(node: cst.ImportFrom) -> Iterator[str]:
    """The plain names ``node`` imports (none for ``*``)."""
    for alias in _aliases(node):
        yield cast(cst.Name, alias.name).value


def _class_pairs(
    facts: Mapping[str, _Fact], package: str, target: str, rest: list[str], node: cst.ImportFrom
) -> Iterator[tuple[str, _Fact, _Fact]]:
    """(name, V2 fact, V3 fact) for each name ``node`` imports that ``facts`` knows on both sides
    (``package.rest.Name`` and ``target.rest.Name``)."""
    for name in _imported_names(node):
        v2 = facts.get(".".join([package, *rest, name]))
        v3 = facts.get(".".join([target, *rest, name]))
        if v2 is not None and v3 is not None:
            yield name, v2, v3
