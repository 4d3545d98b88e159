"""MV341 — V2 Llama3's ``norm_method="layer_norm"`` is a LayerNorm without weights; V3's is not.

V2 ``llama3`` builds ``ConstantLayerNorm`` (no gamma, no beta) for
``norm_method="layer_norm"``. ``llama3_modulev3`` builds ``LayerNorm(...,
elementwise_affine=config.norm_elementwise_affine)``, a field V2's config lacks
and whose V3 default is ``True``: a class that only moved from the V2 base to
the V3 one (``Dependencies``) would get learnable norm weights that no
checkpoint has, and compute something else (olmo: max |diff| 1.3 against V2).
The flipped default is made explicit where such a class asks for layer norms
(its body names ``"layer_norm"``):

    class OlmoModel(Llama3Model):            # V3 pipeline base (was LlamaModelBase)
        norm_method = "layer_norm"
    →      + def _create_model_config(self, state_dict): ... norm_elementwise_affine = False

    @dataclass(kw_only=True)
    class OlmoConfig(Llama3Config):          # V3 config (was V2's Llama3Config)
        def finalize(...): super().finalize(..., norm_method="layer_norm")
    →      + norm_elementwise_affine: bool = False

A pipeline model that already overrides ``_create_model_config`` gets a TODO instead.
"""

from __future__ import annotations

from typing import cast

import libcst as cst

from codemods.base import TODO_PREFIX, Codemod, TransformContext, attach_todos, nodes_of
from codemods.pipeline_model import defines_method
from codemods.resolve import module_name

#: (module suffix, class) of the V3 classes whose layer norm follows ``norm_elementwise_affine``
_MODEL = ("llama3_modulev3.model", "Llama3Model")
_CONFIG = ("llama3_modulev3.model_config", "Llama3Config")
_FIELD = "norm_elementwise_affine"
_WHY = "# V2's norm_method=\"layer_norm\" is a LayerNorm without weights (ConstantLayerNorm); V3's is affine unless told"


def _local_names(module: cst.Module, home: tuple[str, str]) -> set[str]:
    """Local names ``module``'s top-level imports bind to ``home`` (``…<suffix> import <class>``)."""
    suffix, cls = home
    found: set[str] = set()
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if not isinstance(small, cst.ImportFrom) or small.module is None or isinstance(small.names, cst.ImportStar):
                continue
            mod = module_name(small.module)
            if mod != suffix and not mod.endswith("." + suffix):
                continue
            for alias in small.names:
                if isinstance(alias.name, cst.Name) and alias.name.value == cls:
                    asname = alias.asname.name if alias.asname else None
                    found.add(asname.value if isinstance(asname, cst.Name) else cls)
    return found


def _asks_for_layer_norm(cls: cst.ClassDef) -> bool:
    """``"layer_norm"`` as a value in the class (``Literal[...]`` annotations name both methods)."""
    return any(
        isinstance(s, cst.SimpleString) and s.evaluated_value == "layer_norm"
        for s in nodes_of(cls.body, (cst.SimpleString,), skip=(cst.Annotation,))
    )


def _says_affine(cls: cst.ClassDef) -> bool:
    """The class already sets ``norm_elementwise_affine`` (a field, or on the config it builds)."""
    return any(
        (n.value if isinstance(n, cst.Name) else n.attr.value) == _FIELD
        for n in nodes_of(cls.body, (cst.Name, cst.Attribute))
        if isinstance(n, cst.Name | cst.Attribute)
    )


def _field() -> cst.SimpleStatementLine:
    line = cst.parse_statement(f"{_FIELD}: bool = False\n")
    assert isinstance(line, cst.SimpleStatementLine)
    return line.with_changes(leading_lines=[cst.EmptyLine(comment=cst.Comment(_WHY))])


def _override() -> cst.FunctionDef:
    func = cst.parse_statement(
        "def _create_model_config(self, state_dict: dict[str, Any]) -> Any:\n"
        "    config = super()._create_model_config(state_dict)\n"
        f"    config.{_FIELD} = False\n"
        "    return config\n"
    )
    assert isinstance(func, cst.FunctionDef)
    return func.with_changes(leading_lines=[cst.EmptyLine(indent=False), cst.EmptyLine(comment=cst.Comment(_WHY))])


class LayerNormAffine(Codemod):
    PREFIX = "MV341"
    NEUTRAL_OK = True

    @classmethod
    def applies(cls, source: str) -> bool:
        return "layer_norm" in source and "llama3" in source

    @classmethod
    def applies_to(cls, source: str, context: TransformContext) -> bool:
        return not (context.package or "").endswith("_modulev3") and cls.applies(source)

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        models, configs = _local_names(updated, _MODEL), _local_names(updated, _CONFIG)
        if not models and not configs:
            return updated
        originals = {s.name.value: s for s in original.body if isinstance(s, cst.ClassDef)}
        body: list[cst.BaseStatement] = list(updated.body)
        for i, stmt in enumerate(body):
            if not isinstance(stmt, cst.ClassDef) or not isinstance(stmt.body, cst.IndentedBlock):
                continue
            bases = {b.value.value for b in stmt.bases if isinstance(b.value, cst.Name)}
            if not bases & (models | configs) or not _asks_for_layer_norm(stmt) or _says_affine(stmt):
                continue
            where = originals.get(stmt.name.value, stmt)
            members = list(stmt.body.body)
            if bases & configs:
                at = next((j for j, s in enumerate(members) if isinstance(s, (cst.FunctionDef, cst.ClassDef))), len(members))
                members.insert(at, _field())
                self.rewrote(where, "MV341", f"{stmt.name.value}.{_FIELD} = False: V2's layer_norm has no weights, V3's default has")
            elif defines_method(members, "_create_model_config"):
                todo = (
                    f"{TODO_PREFIX}MV341 {stmt.name.value} asks for layer_norm: V2's has no weights, V3's LayerNorm "
                    f"does unless the config sets {_FIELD}=False; set it in this _create_model_config"
                )
                body[i] = cast(cst.ClassDef, attach_todos(stmt, [todo]))
                continue
            else:
                members.append(_override())
                self.state.import_name("typing", "Any")
                self.rewrote(where, "MV341", f"{stmt.name.value}: config.{_FIELD} = False (V2's layer_norm has no weights)")
            body[i] = stmt.with_changes(body=stmt.body.with_changes(body=members))
        return updated.with_changes(body=body)
