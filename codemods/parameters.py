"""MV36x — ``Weight(...)`` → a ``Tensor`` parameter of the same shape and dtype.

V3 makes every Tensor attribute a parameter, keyed by its attribute path; V2
keyed a ``Weight`` by its ``name=``. When the two differ the checkpoint key
changes, which the report says (MV361). The device argument goes away
(``Module.to(device)`` places parameters).

    self.weight = Weight("weight", DType.float32, [4], DeviceRef.CPU())
    →  self.weight = Tensor.zeros([4], dtype=DType.float32)

An annotation ``Weight`` becomes ``Tensor`` as well.

A ``Weight`` whose name is not its attribute keeps its V2 checkpoint key when
the class allows it (no other assignment of either attribute, no method of
that name): a plain name becomes the attribute, the V2 attribute a read-only
property; a name ``"<attribute>.weight"`` becomes a ``KeyedWeight`` child whose
``weight`` every ``self.<attribute>`` of the class reads.

    self.filter = Weight("weight", dt, shape, dev)    →  self.weight = Tensor.zeros(shape, dtype=dt)
                                                          @property
                                                          def filter(self) -> Tensor: return self.weight
    self.q_norm = Weight("q_norm.weight", dt, [d], dev)  →  self.q_norm = KeyedWeight(Tensor.zeros([d], dtype=dt))
    ... self.q_norm ...                                  →  ... self.q_norm.weight ...
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass, field

import libcst as cst

from codemods.args import as_keyword, bind, relayout, self_attr, source
from codemods.base import Codemod
from codemods.shard_scan import body_statements
from codemods.tensor_types import TENSOR_MODULE, graph_symbol

_WEIGHT_PARAMS = ("name", "dtype", "shape", "device", "quantization_encoding", "align", "sharding_strategy", "_placeholder", "_has_alias")


#: the child module a ``Weight("<attr>.weight")`` becomes (added to the migrated module once)
KEYED_WEIGHT = "KeyedWeight"
KEYED_WEIGHT_CODE = f'''
class {KEYED_WEIGHT}(Module[[], Tensor]):
    """One parameter, keyed ``<attribute>.weight`` as in the checkpoint; added by migrate-v3."""

    def __init__(self, weight: Tensor) -> None:
        self.weight = weight

    def forward(self) -> Tensor:
        return self.weight
'''



@dataclass
class _ClassKeys:
    """A class's Weight attributes that keep their V2 key: attribute → key (plain or ``attr.weight``)."""

    renamed: dict[str, str] = field(default_factory=dict)
    keyed: set[str] = field(default_factory=set)
    #: ids of ``self.X`` nodes that are assignment targets (left as they are)
    targets: set[int] = field(default_factory=set)


class _ClassScan:
    """``self.X`` assignments and Weight declarations of one class body (its methods; nested classes
    excluded), read from its statements alone: a libcst visitor over every expression cost apply a fifth
    of its time."""

    def __init__(self, node: cst.ClassDef) -> None:
        self.assigned: dict[str, int] = {}
        self.targets: set[int] = set()
        self.weights: list[tuple[str, cst.Call]] = []
        for small in body_statements(node, into_defs=True):
            if isinstance(small, cst.Assign):
                for t in small.targets:
                    self._target(t.target)
                attr = self_attr(small.targets[0].target) if len(small.targets) == 1 else None
                if attr is not None and isinstance(small.value, cst.Call):
                    self.weights.append((attr, small.value))
            elif isinstance(small, cst.AnnAssign | cst.AugAssign | cst.Del):
                self._target(small.target)

    def _target(self, target: cst.BaseExpression) -> None:
        attr = self_attr(target)
        if attr is not None:
            self.assigned[attr] = self.assigned.get(attr, 0) + 1
            self.targets.add(id(target))


def _literal_key(call: cst.Call) -> str | None:
    """The string literal a ``Weight(...)`` call names its weight with."""
    bound = bind(call, _WEIGHT_PARAMS)
    arg = bound.args.get("name") if bound is not None else None
    if arg is None or not isinstance(arg.value, cst.SimpleString):
        return None
    value = arg.value.evaluated_value
    return value if isinstance(value, str) else None


def _property(attr: str, key: str, tensor: str) -> cst.FunctionDef:
    code = f'''
@property
def {attr}(self) -> {tensor}:
    """The parameter ``{key}`` (its checkpoint key) under the attribute name it had before."""
    return self.{key}
'''
    func = cst.parse_statement(code)
    assert isinstance(func, cst.FunctionDef)
    return func.with_changes(leading_lines=[cst.EmptyLine(indent=False)])


class Parameters(Codemod):
    PREFIX = "MV36"

    @classmethod
    def applies(cls, source: str) -> bool:
        return "Weight" in source

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.targets: list[str | None] = []
        self.classes: list[_ClassKeys] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        scan = _ClassScan(node)
        defined = {
            s.name.value for s in node.body.body if isinstance(s, cst.FunctionDef | cst.ClassDef)
        } | {
            t.target.value
            for s in node.body.body if isinstance(s, cst.SimpleStatementLine)
            for a in s.body if isinstance(a, cst.Assign)
            for t in a.targets if isinstance(t.target, cst.Name)
        }
        keys = _ClassKeys(targets=scan.targets)
        for attr, call in scan.weights:
            if graph_symbol(self.qualname(call.func)) != "Weight" or scan.assigned.get(attr) != 1 or attr in defined:
                continue
            key = _literal_key(call)
            if key is None or key == attr:
                continue
            if key.isidentifier() and not keyword.iskeyword(key) and key not in scan.assigned and key not in defined:
                keys.renamed[attr] = key
            elif key == f"{attr}.weight":
                keys.keyed.add(attr)
        self.classes.append(keys)

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        keys = self.classes.pop()
        if not keys.renamed:
            return updated
        tensor = self.state.import_name(TENSOR_MODULE, "Tensor")
        props = [_property(attr, key, tensor) for attr, key in keys.renamed.items()]
        return updated.with_changes(body=updated.body.with_changes(body=[*updated.body.body, *props]))

    def visit_Assign(self, node: cst.Assign) -> None:
        target = node.targets[0].target if len(node.targets) == 1 else None
        attr = None
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
            attr = target.attr.value
        self.targets.append(attr)

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        self.targets.pop()
        attr = self_attr(original.targets[0].target) if len(original.targets) == 1 else None
        key = self.classes[-1].renamed.get(attr) if self.classes and attr is not None else None
        if key is None or not isinstance(original.value, cst.Call):
            return updated
        target = updated.targets[0].target
        assert isinstance(target, cst.Attribute)
        self.rewrote(original, "MV361", f"self.{attr} = Weight({key!r}): the parameter is self.{key} (its V2 "
                     f"checkpoint key), {attr} a property that reads it")
        return updated.with_changes(targets=[updated.targets[0].with_changes(
            target=target.with_changes(attr=cst.Name(key)))])

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        target = node.target
        self_attr = isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self"
        self.targets.append(target.attr.value if self_attr and isinstance(target, cst.Attribute) else None)

    def leave_AnnAssign(self, original: cst.AnnAssign, updated: cst.AnnAssign) -> cst.AnnAssign:
        self.targets.pop()
        return updated

    def idle_hooks(self) -> tuple[str, ...]:
        imported = self.imported()
        if imported is None or any(graph_symbol(t) == "Weight" for t in imported):
            return ()
        return ("leave_Name",)  # no name of the file is V2's Weight (an attribute chain still may be)

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if self.state.annotation_depth == 0 or id(original) in self.state.non_refs:
            return updated
        return self._annotation(original, updated)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        if self.state.annotation_depth == 0:
            keys = self.classes[-1] if self.classes else None
            attr = self_attr(original)
            if keys is not None and attr in keys.keyed and id(original) not in keys.targets:
                return cst.Attribute(value=updated, attr=cst.Name("weight"))
            return updated
        return self._annotation(original, updated)

    def _annotation(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        """``attr: Weight`` annotates what is now a Tensor parameter."""
        if graph_symbol(self.qualname(original)) != "Weight" or id(original) in self.state.attr_bases:
            return updated
        self.rewrote(original, "MV360", "Weight annotation → Tensor")
        return cst.Name(self.state.import_name(TENSOR_MODULE, "Tensor"))

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if graph_symbol(self.qualname(original.func)) != "Weight":
            return updated
        bound = bind(updated, _WEIGHT_PARAMS)
        if bound is None or "shape" not in bound.args or "dtype" not in bound.args:
            self.todo("MV360", "Weight(...): make it a Tensor attribute (Tensor.zeros(shape, dtype=...))")
            return updated
        for extra in ("quantization_encoding", "sharding_strategy", "align"):
            if extra in bound.args and source(bound.args[extra].value) != "None":
                self.todo("MV360", f"Weight({extra}=...) has no Tensor equivalent")
                return updated
        attr = self.targets[-1] if self.targets else None
        name_arg = bound.args.get("name")
        key = source(name_arg.value) if name_arg else None
        keys = self.classes[-1] if self.classes else None
        keyed = keys is not None and attr in keys.keyed
        if attr is None:
            self.todo("MV361", f"Weight name {key} was the V2 checkpoint key; in V3 the key is the attribute path")
        elif key is not None and key.strip("'\"") != attr and not keyed and not (keys and attr in keys.renamed):
            self.todo("MV361", f"checkpoint key {key} becomes {attr!r} (V3 keys are attribute paths): map it in the weight adapter")
        shape = bound.args["shape"].with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)
        dtype = as_keyword(bound.args["dtype"], "dtype")
        tensor = self.state.import_name(TENSOR_MODULE, "Tensor")
        self.rewrote(original, "MV360", "Weight(...) → Tensor.zeros(shape, dtype=...)")
        func = cst.Attribute(value=cst.Name(tensor), attr=cst.Name("zeros"))
        zeros = updated.with_changes(func=func, args=relayout(updated.args, [shape, dtype]))
        if not keyed:
            return zeros
        self.state.import_name("max.experimental.nn", "Module")
        self.state.helpers[KEYED_WEIGHT] = KEYED_WEIGHT_CODE
        self.state.helper_rules.setdefault(KEYED_WEIGHT, "MV361")
        self.rewrote(original, "MV361", f"Weight({key}) → {KEYED_WEIGHT}(...): the parameter keeps its V2 "
                     f"checkpoint key; self.{attr} reads become self.{attr}.weight")
        return cst.Call(func=cst.Name(KEYED_WEIGHT), args=[cst.Arg(zeros)])
