"""MV34x — V2 layer constructors → V3 constructors with the same behaviour.

Binds the V2 arguments by name (``knowledge/layers.py``), re-emits them as
keywords, drops ``dtype``/``device``/``devices``, renames (``has_bias`` →
``bias``), and spells out every default that flipped so V3 computes what V2
did. An argument with no V3 equivalent is kept out of the call and named in a
TODO; a layer with no V3 class is left as is with a TODO.

    Linear(in_dim, out_dim, dtype, device)
    →  Linear(in_dim=in_dim, out_dim=out_dim, bias=False)

The same mapping applies where V2 code builds layers indirectly:
``functools.partial(RMSNorm, dim, dtype=d, eps=e)`` (the partial's arguments),
and calls of a *layer factory*: a parameter annotated ``Callable[..., Linear]``
(or ``functools.partial[Linear]``) or a name bound to ``partial(MLP, ...)`` / ``A if c else partial(MLP, ...)``.
``StackedLinear`` of q/k/v becomes ``QKVLinear`` (same checkpoint names).
A subclass of a V2 layer gets the same map for its ``super().__init__(...)``
(an ``RMSNorm`` subclass also gets the V3 variant that keeps its numerics as
its base):

    class Scaled(Embedding):
        def __init__(self, v, d, dtype, device):
            super().__init__(v, d, dtype, device)
    →       super().__init__(vocab_size=v, dim=d)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from codemods.args import Bound, as_keyword, bind, new_keyword, relayout, self_attr, source, without
from codemods.base import (
    Codemod,
    FileState,
    TransformContext,
    imports_siblings,
    nodes_of,
)
from codemods.dead_locals import pure_expression
from codemods.dtype_scopes import DtypeScope, dtype_scopes
from codemods.layer_calls import held_as, held_locals
from codemods.ports import calls_the_v3_way
from migrate_v3.knowledge.layers import (
    ATTRIBUTE_RENAMES,
    CALL_CAVEATS,
    FACTORY_BUILT,
    FACTORY_BUILT_BY_V2,
    FUNCTIONS,
    KEY_KEEPERS,
    LAYERS,
    MASK_PORTS,
    NO_V3_CLASS,
    OPTIONAL_ATTRIBUTES,
    PLACEMENT_ARGS,
    QKV_LINEAR,
    QKV_NAMES,
    QUANTIZED_BY,
    RMSNORM_HELPER,
    RMSNORM_HELPER_NAME,
    RMSNORM_OFFSET_HELPER,
    RMSNORM_OFFSET_HELPER_NAME,
    RMSNORM_VARIANTS,
    STACKED_LINEAR_DEFAULTS,
    STACKED_LINEAR_PARAMS,
    LayerSpec,
    v2_symbol,
)
from migrate_v3.knowledge.ports import PORTS
from migrate_v3.knowledge.symbols import NN_SYMBOLS, allowed_max_nn

_NORM_MODULE = "max.experimental.nn.norm"
_TENSOR_MODULE = "max.experimental.tensor"


def _literal(src: str) -> str:
    """Normalise literal spellings: ``1.0``/``1`` → ``1``, ``0.0`` → ``0``."""
    try:
        value = float(src)
    except ValueError:
        return src
    return str(int(value)) if value.is_integer() else src


_PARTIAL = frozenset({"functools.partial"})

#: a dtype argument that names a fixed ``DType`` (``DType.float32``, ``cfg.norm_dtype or DType.float32``)
#: or a dtype its author named apart from the model's (``norm_dtype``, ``config.gate_dtype``): V2 built
#: the layer in it; V3 builds it in ``default_dtype``, so dropping it is named in a TODO
_PINNED_DTYPE = re.compile(r"\bDType\.\w|\w_dtype\b")


#: StackedLinear arguments QKVLinear has no form of: dropped with a TODO naming them
_QKV_DROPPABLE = ("linear_cls", "quant_config")


@dataclass(frozen=True)
class Factory:
    """A name that builds V2 layers: which layer, and how many positionals it pre-binds."""

    symbol: str
    offset: int = 0
    #: another alternative of ``A if c else partial(B, ...)`` that is not ``symbol``
    other: str | None = None
    #: V2 keywords the partial already binds (a call must not override them)
    keywords: frozenset[str] = frozenset()
    #: the positional parameters a ``Callable[[A, B], X]`` annotation declares (None: ``...``/a partial)
    arity: int | None = None


def _dropped(spec: LayerSpec, name: str) -> bool:
    """A V2 argument the V3 call loses: placement, unless the V3 class takes it too
    (V3 ``Conv2d(dtype=...)`` keeps a conv in the dtype V2 gave it, as the official ports write it)."""
    return name in spec.drop or (name in PLACEMENT_ARGS and name not in spec.v3_params)


def _v3_of(spec: LayerSpec, v3_names: list[str]) -> list[tuple[str, str]]:
    """(V2 name, V3 name) pairs for V3 parameters (V2 name via the reverse rename)."""
    back = {v3: v2 for v2, v3 in spec.rename.items()}
    return [(back.get(v3, v3), v3) for v3 in v3_names]


def defines_init(node: cst.ClassDef) -> bool:
    """The class body defines ``__init__``."""
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    return any(isinstance(s, cst.FunctionDef) and s.name.value == "__init__" for s in body)


def with_cpu_device_init(state: FileState, cls: cst.ClassDef) -> cst.ClassDef:
    """``cls`` (a subclass without ``__init__`` of a class whose V3 constructor needs ``device``, which
    V2's did not take) with an ``__init__`` that passes ``device=CPU()`` by default: its callers pass
    V2's arguments, and V2 built the tables there (rotary embeddings)."""
    return with_init(state, cls, (
        "def __init__(self, *args: Any, device: Device = CPU(), **kwargs: Any) -> None:\n"
        "    super().__init__(*args, device=device, **kwargs)\n"
    ), ("typing", "Any"), ("max.driver", "CPU"), ("max.driver", "Device"))


def with_init(state: FileState, cls: cst.ClassDef, code: str, *imports: tuple[str, str]) -> cst.ClassDef:
    """``cls`` (a class without ``__init__``) with the ``__init__`` of ``code`` first (after a
    docstring), and the names it uses imported."""
    if not isinstance(cls.body, cst.IndentedBlock):
        return cls
    for module, name in imports:
        state.import_name(module, name)
    init = cst.parse_statement(code)
    body = list(cls.body.body)
    first = body[0].body[0] if body and isinstance(body[0], cst.SimpleStatementLine) and len(body[0].body) == 1 else None
    at = 1 if isinstance(first, cst.Expr) and isinstance(first.value, cst.SimpleString | cst.ConcatenatedString) else 0
    if at:
        init = init.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    nxt = body[at] if len(body) > at else None
    if isinstance(nxt, cst.SimpleStatementLine | cst.BaseCompoundStatement) and not nxt.leading_lines:
        body[at] = nxt.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    return cls.with_changes(body=cls.body.with_changes(body=[*body[:at], init, *body[at:]]))


def _func_name(call: cst.Call) -> str | None:
    return call.func.value if isinstance(call.func, cst.Name) else None


#: what ``for _ in range(n)``'s index is called once a layer reads it
_NAMED_INDEX = "layer_idx"
_UNDERSCORE_OR_INDEX = re.compile(r"(?<![\w.])(?:_|layer_idx)(?!\w)(?!\s*=[^=])")


def _loop_index(node: cst.For | cst.CompFor) -> str | None:
    """``i`` of ``for i in range(n)``: the index of the layer built in the loop."""
    it = node.iter
    if (
        isinstance(node.target, cst.Name)
        and isinstance(it, cst.Call)
        and isinstance(it.func, cst.Name)
        and it.func.value == "range"
        and len(it.args) == 1
        and it.args[0].keyword is None
    ):
        return node.target.value
    return None


class LayerConstructors(Codemod):
    PREFIX = "MV34"

    @classmethod
    def applies(cls, source: str) -> bool:
        return "max.nn" in source or "from max import nn" in source

    @classmethod
    def applies_to(cls, source: str, context: TransformContext) -> bool:
        # (a sibling's layer subclass, imported as its variant's class, is called with V2 arguments)
        return cls.applies(source) or (bool(context.library_bases) and imports_siblings(source))

    def __init__(self, state: FileState) -> None:
        super().__init__(state)
        #: layer factories by name, innermost function scope last
        self.factories: list[dict[str, Factory]] = [{}]
        #: enclosing loops: the ``range`` index name, or None
        self.loops: list[str | None] = []
        #: per enclosing loop: a layer reads its index as ``layer_idx`` (a ``_`` target is renamed on leaving)
        self.renamed_loops: list[bool] = []
        self.in_partial = 0
        #: enclosing classes and functions: ("class", the V2 layer it subclasses or "") / ("def", name)
        self.scopes: list[tuple[str, str]] = []
        #: the enclosing (original) ClassDef nodes, and the base naming a V2 layer (where check reports it)
        self.class_nodes: list[tuple[cst.ClassDef, cst.BaseExpression | None]] = []
        self.class_text: dict[int, str] = {}  # id of a class → its code (original nodes: alive)
        #: per class: ``self.X`` built from a V2 layer → its attribute renames (ATTRIBUTE_RENAMES)
        self.attr_renames: list[dict[str, dict[str, str]]] = []
        #: per enclosing class: the V3 RMSNorm variant its super().__init__ asked for
        self.base_variant: list[str | None] = []
        #: per enclosing class: ``__init__`` parameters its super().__init__ passed only as dropped placement args
        self.placement_params: list[set[str]] = []
        #: per enclosing class: a V2 base with no V3 class and no port (its super().__init__ builds V2 layers)
        self.unported_base: list[str | None] = []
        #: class of this file → (its ``__init__`` parameters before, the ones removed): its calls drop them too
        self.removed_params: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {}
        #: id of a call passed straight to the constructor of a V2 class that ``Ports``
        #: replaces with its port → that port's name
        self.port_args: dict[int, str] = {}
        #: id of a call assigned to ``self.<attr>`` → attr
        self.self_attr_of: dict[int, str] = {}
        #: constructor call → the local it is bound to (``embedding = VocabParallelEmbedding(...)``)
        self.local_of: dict[int, str] = {}
        #: the file may spread a ``dict(...)`` into a call (what ``_kwargs_dicts`` looks for)
        self.spreads_dicts = "(**" in state.source and "dict(" in state.source
        #: id of a ``dict(...)`` only spread into calls of one V2 layer → that layer; id of those calls → (it, the dict's name)
        self.kwargs_dicts: dict[int, str] = {}
        self.kwargs_calls: dict[int, tuple[str, str]] = {}
        #: id of an ``A if c else B`` factory binding → the branch ("body"/"orelse") whose V3 class builds both
        self.collapse: dict[int, str] = {}
        #: ids of the enclosing (original) simple statements: where a dropped dtype is scoped (DtypeScopes)
        self.statements: list[int] = []

    # --- factory bookkeeping -------------------------------------------------

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.factories.append({})
        self.scopes.append(("def", node.name.value))
        if self.spreads_dicts:
            self._kwargs_dicts(node)

    def _kwargs_dicts(self, func: cst.FunctionDef) -> None:
        """``kw = dict(...)`` whose only uses are ``Layer(**kw)`` calls in ``func``: map the dict's
        keywords as a call of that layer (``QUANTIZED_BY`` may pick the class every call then builds)."""
        if not any(_builds_dict(a) for a in nodes_of(func.body, (cst.Assign, cst.AnnAssign), skip=(cst.FunctionDef,))):
            return  # (its statements alone say so: the scan below visits every expression)
        scan = _KwargsScan()
        func.body.visit(scan)
        for name, built in scan.dicts.items():
            calls = scan.spread.get(name, [])
            if built is None or not calls or scan.uses.get(name, 0) != len(calls) + 1:
                continue
            symbols = {v2_symbol(self.qualname(c.func)) or "" for c in calls}
            if any(s not in LAYERS for s in symbols):
                continue
            first = LAYERS[next(iter(symbols))]
            bound = bind(built, first.v2_params, first.v2_kwonly)
            if bound is None:
                continue
            targets = {(q.v2_name if (q := self._quantized(s, bound)) else s) for s in symbols}
            if len(targets) != 1:
                continue
            target = targets.pop()
            self.kwargs_dicts[id(built)] = target
            for call in calls:
                self.kwargs_calls[id(call)] = (target, name)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.factories.pop()
        self.scopes.pop()
        if updated.name.value == "__init__" and self.scopes and self.scopes[-1][0] == "class" and self.placement_params[-1]:
            updated = self._drop_placement_params(original, updated)
        return updated

    def _drop_placement_params(self, original: cst.FunctionDef, init: cst.FunctionDef) -> cst.FunctionDef:
        """Parameters that fed only dropped placement arguments go, so V3's factory call binds.

        Only for subclasses of ``FACTORY_BUILT`` layers: V3 builds them itself, with V3 keywords.
        """
        node, _ = self.class_nodes[-1]
        body = init.body
        not_refs = {id(a.attr) for a in nodes_of(body, (cst.Attribute,)) if isinstance(a, cst.Attribute)}
        not_refs |= {id(a.keyword) for a in nodes_of(body, (cst.Arg,)) if isinstance(a, cst.Arg) and a.keyword}
        used = {n.value for n in nodes_of(body, (cst.Name,)) if isinstance(n, cst.Name) and id(n) not in not_refs}
        params = init.params.params
        # (and its own required placement parameters: V2's container passed them, V3's passes none)
        placement = self.placement_params[-1] | {p.name.value for p in params if p.name.value in PLACEMENT_ARGS and p.default is None}
        gone = frozenset(p.name.value for p in params if p.name.value in placement - used)
        kept_used = sorted(p.name.value for p in params if p.name.value in placement & used and p.default is None)
        if kept_used:
            self.todo(
                "MV344",
                f"{node.name.value}.__init__ still requires {', '.join(kept_used)} (its body uses them), which "
                f"V3's {FACTORY_BUILT[self.scopes[-1][1]]} does not pass: give them a default or bind them in the factory",
            )
        if not gone:
            return init
        kept = [p for p in params if p.name.value not in gone]
        if params and kept and params[-1] is not kept[-1]:
            kept[-1] = kept[-1].with_changes(comma=params[-1].comma)
        names = tuple(p.name.value for p in params[1:])
        self.removed_params[node.name.value] = (names, gone)
        self.rewrote(
            original, "MV344", f"class {node.name.value}: __init__ no longer takes {', '.join(sorted(gone))} "
            f"(V3 builds it through {FACTORY_BUILT[self.scopes[-1][1]]} without them)",
        )
        return init.with_changes(params=init.params.with_changes(params=kept))

    # --- subclasses of V2 layers ------------------------------------------------

    def _renamed_attributes(self, node: cst.ClassDef) -> dict[str, dict[str, str]]:
        """``X`` → its V2 → V3 attribute renames, for each ``self.X = <V2 layer>(...)`` of the class body."""
        out: dict[str, dict[str, str]] = {}
        for assign in nodes_of(node.body, (cst.Assign,), skip=(cst.ClassDef,)):
            assert isinstance(assign, cst.Assign)
            attr = self_attr(assign.targets[0].target) if len(assign.targets) == 1 else None
            if attr is not None and isinstance(assign.value, cst.Call):
                renames = ATTRIBUTE_RENAMES.get(v2_symbol(self.qualname(assign.value.func)) or "")
                if renames:
                    out[attr] = renames
        return out

    def idle_hooks(self) -> tuple[str, ...]:
        # a file that names no layer with attribute renames has nothing for leave_Attribute, one
        # that reads no optional Linear attribute nothing for leave_Comparison
        source = self.state.source
        return tuple(hook for hook, needed in (
            ("leave_Attribute", any(k in source for k in ATTRIBUTE_RENAMES)),
            ("leave_Comparison", any(f".{a} is" in source for a in OPTIONAL_ATTRIBUTES)),
        ) if not needed)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        """``self.conv.filter`` of a V2 ``Conv2d`` → ``self.conv.weight`` (the V3 attribute)."""
        renames = self.attr_renames[-1] if self.attr_renames else None
        inner = self_attr(original.value)
        if not renames or inner is None:
            return updated
        new = renames.get(inner, {}).get(original.attr.value)
        if new is None:
            return updated
        self.rewrote(original, "MV340", f"self.{inner}.{original.attr.value} → .{new} (the V3 attribute)")
        return updated.with_changes(attr=cst.Name(new))

    def leave_Comparison(self, original: cst.Comparison, updated: cst.Comparison) -> cst.BaseExpression:
        """``self.proj.weight_scale is not None`` → ``getattr(self.proj, "weight_scale", None) is not None``:
        a V2 ``Linear`` always had the attribute (None unless quantized), a V3 one only when quantized."""
        left, ops = updated.left, updated.comparisons
        if not (
            len(ops) == 1 and isinstance(ops[0].operator, cst.Is | cst.IsNot)
            and isinstance(ops[0].comparator, cst.Name) and ops[0].comparator.value == "None"
            and isinstance(left, cst.Attribute) and left.attr.value in OPTIONAL_ATTRIBUTES
            and not (isinstance(left.value, cst.Name) and left.value.value == "self")  # (the class's own)
        ):
            return updated
        name = left.attr.value
        self.rewrote(original, "MV340", f".{name} is None → getattr(..., {name!r}, None): a V3 Linear has it only when quantized")
        read = cst.parse_expression(f'getattr(x, "{name}", None)')
        assert isinstance(read, cst.Call)
        read = read.with_changes(args=[read.args[0].with_changes(value=left.value), *read.args[1:]])
        return updated.with_changes(left=read)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        named = any(k in self.state.source for k in ATTRIBUTE_RENAMES)  # (a file that names none pays nothing)
        self.attr_renames.append(self._renamed_attributes(node) if named else {})
        layer_bases = {
            s: b.value for b in node.bases if (s := v2_symbol(self.qualname(b.value))) in LAYERS
        }
        symbol = next(iter(layer_bases)) if len(layer_bases) == 1 else ""
        self.scopes.append(("class", symbol))
        self.class_nodes.append((node, layer_bases.get(symbol)))
        self.base_variant.append(None)
        self.placement_params.append(set())
        self.unported_base.append(next((s for b in node.bases if (s := self._unported(b.value))), None))

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.attr_renames.pop()
        _, symbol = self.scopes.pop()
        _, layer_base = self.class_nodes.pop()
        variant = self.base_variant.pop()
        self.placement_params.pop()
        self.unported_base.pop()
        if symbol and layer_base is not None and not defines_init(original):
            if "device" in LAYERS[symbol].fill:
                # its callers pass V2's arguments, which have no device: the V3 class requires one
                self.rewrote(layer_base, "MV344", f"class {original.name.value}({symbol}): __init__ passes the V3 device (CPU(), as V2)")
                updated = with_cpu_device_init(self.state, updated)
            else:
                self.rewrote(layer_base, "MV344", f"class {original.name.value}({symbol}): no __init__ of its own, the V3 {symbol}'s applies")
        if symbol != "RMSNorm" or variant in (None, "RMSNorm"):
            return updated
        bases = []
        for orig, base in zip(original.bases, updated.bases, strict=True):
            if v2_symbol(self.qualname(orig.value)) == "RMSNorm":
                self.rewrote(orig, "MV341", f"class {original.name.value}: base RMSNorm → {variant} (its V2 numerics)")
                base = base.with_changes(value=cst.Name(variant))
            bases.append(base)
        return updated.with_changes(bases=bases)

    def _unported(self, base: cst.BaseExpression) -> str | None:
        """The ``max.nn`` class ``base`` names when it has no V3 class, no map and no port."""
        symbol = v2_symbol(self.qualname(base))
        if symbol is None or symbol in LAYERS or symbol in PORTS or symbol in allowed_max_nn():
            return None
        known = NN_SYMBOLS.get(symbol)
        return symbol if known is None or (known.code == "MV343" and known.v3 is None) else None

    def _unported_super_init(self, base: str) -> None:
        """``super().__init__(...)`` of a class on an unported V2 base: it builds V2 layers, named in a TODO."""
        node, _ = self.class_nodes[-1]
        self.todo(
            "MV343",
            f"super().__init__(...) builds the V2 {base}, which has no V3 class: its layers stay V2 (and get V2 "
            f"arguments such as dtype=); port {base} to V3 or rewrite {node.name.value} on V3 layers",
        )

    def _is_super_init(self, call: cst.Call) -> bool:
        """``super().__init__(...)`` directly in a class's ``__init__``."""
        func = call.func
        return (
            isinstance(func, cst.Attribute)
            and func.attr.value == "__init__"
            and isinstance(func.value, cst.Call)
            and isinstance(func.value.func, cst.Name)
            and func.value.func.value == "super"
            and len(self.scopes) >= 2
            and self.scopes[-1] == ("def", "__init__")
            and self.scopes[-2][0] == "class"
        )

    def _layer_of_super_init(self, call: cst.Call) -> str | None:
        """The V2 layer a ``super().__init__(...)`` call in a layer subclass's ``__init__`` constructs."""
        return (self.scopes[-2][1] or None) if self._is_super_init(call) else None

    def _super_init(self, original: cst.Call, updated: cst.Call, symbol: str) -> cst.BaseExpression:
        spec = LAYERS[symbol]
        bound = bind(updated, spec.v2_params, spec.v2_kwonly)
        node, base = self.class_nodes[-1]
        self.state.layer_inits.add(id(node))
        if bound is None:
            self.todo("MV345", f"super().__init__(...) of a V2 {symbol} uses */** or unknown arguments: rewrite it for V3")
            return updated
        self.rewrote(base or original, "MV344", f"class {node.name.value}({symbol}): super().__init__(...) gets the V3 {symbol} map")
        if symbol == "RMSNorm":
            new = self._rmsnorm(original, updated, bound)
            if not isinstance(new, cst.Call) or new is updated:
                return new
            self.base_variant[-1] = _func_name(new)
            self.state.needed_imports.discard((spec.v3_module, RMSNORM_HELPER_NAME, None))
        else:
            new = self._rebuild(original, updated, bound, spec, spec.v3_name)
        if symbol in FACTORY_BUILT and not any(v2 in self.state.source for v2 in FACTORY_BUILT_BY_V2.get(symbol, ())):
            self.placement_params[-1].update(
                arg.value.value
                for name, arg in bound.args.items()
                if _dropped(spec, name) and isinstance(arg.value, cst.Name)
            )
        return new.with_changes(func=updated.func)

    # --- the loop a layer is built in (V2 passed ``layer_idx`` at call time) ---

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statements.append(id(node))

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        self.statements.pop()
        return updated

    def visit_For(self, node: cst.For) -> None:
        self._enter_loop(_loop_index(node), node.body)

    def leave_For(self, original: cst.For, updated: cst.For) -> cst.For:
        if self._leave_loop(original.target):
            return updated.with_changes(target=cst.Name(_NAMED_INDEX))
        return updated

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._enter_loop(_loop_index(node.for_in) if node.for_in.inner_for_in is None else None, node.elt)

    def leave_ListComp(self, original: cst.ListComp, updated: cst.ListComp) -> cst.ListComp:
        if self._leave_loop(original.for_in.target):
            return updated.with_changes(for_in=updated.for_in.with_changes(target=cst.Name(_NAMED_INDEX)))
        return updated

    def _enter_loop(self, index: str | None, body: cst.CSTNode) -> None:
        """``for _ in range(n)``: a ``layer_idx=`` written from it names the index (``layer_idx``),
        when the loop reads neither ``_`` nor that name."""
        if index == "_" and not _UNDERSCORE_OR_INDEX.search(source(body)):
            index = _NAMED_INDEX
        self.loops.append(index)
        self.renamed_loops.append(False)

    def _leave_loop(self, target: cst.BaseExpression) -> bool:
        """Whether the loop's target ``_`` must become ``layer_idx`` (a layer of it reads the index now)."""
        self.loops.pop()
        return self.renamed_loops.pop() and isinstance(target, cst.Name) and target.value == "_"

    def visit_Param(self, node: cst.Param) -> None:
        if node.annotation is not None:
            self._record(node.name.value, self._callable_of(node.annotation.annotation))

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self._record(node.targets[0].target.value, self._factory_of(node.value))
            if isinstance(node.value, cst.Call):
                self.local_of[id(node.value)] = node.targets[0].target.value
        elif len(node.targets) == 1 and isinstance(node.value, cst.Call):
            target = node.targets[0].target
            if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
                self.self_attr_of[id(node.value)] = target.attr.value

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Name):
            found = self._factory_of(node.value) if node.value is not None else None
            self._record(node.target.value, found or self._callable_of(node.annotation.annotation))

    def _record(self, name: str, factory: Factory | None) -> None:
        if factory is None:
            return
        scope = self.factories[-1]
        seen = scope.get(name)
        if seen is not None and seen.symbol != factory.symbol:
            # bound to different layers on different paths: no single map applies
            factory = Factory(f"{seen.symbol}|{factory.symbol}")
        scope[name] = factory

    def _layer_symbol(self, node: cst.BaseExpression) -> str | None:
        symbol = v2_symbol(self.qualname(node))
        return symbol if symbol in LAYERS else None

    def _callable_of(self, annotation: cst.BaseExpression) -> Factory | None:
        """``Callable[..., Linear]`` or ``functools.partial[Linear]`` → a Linear factory."""
        if not isinstance(annotation, cst.Subscript):
            return None
        kind = self.qualname(annotation.value)
        if kind in _PARTIAL and len(annotation.slice) == 1:
            elem = annotation.slice[0].slice
        elif kind in ("typing.Callable", "collections.abc.Callable") and len(annotation.slice) == 2:
            elem = annotation.slice[1].slice
        else:
            return None
        if not isinstance(elem, cst.Index):
            return None
        symbol = self._layer_symbol(elem.value)
        params = annotation.slice[0].slice if kind not in _PARTIAL else None
        arity = len(params.value.elements) if isinstance(params, cst.Index) and isinstance(params.value, cst.List) else None
        return Factory(symbol, arity=arity) if symbol else None

    def _factory_of(self, value: cst.BaseExpression) -> Factory | None:
        """``partial(X, a, k=v)`` / ``X`` / ``A if c else B`` where X is a V2 layer class."""
        if isinstance(value, cst.IfExp):
            body, orelse = self._factory_of(value.body), self._factory_of(value.orelse)
            found = body or orelse
            if found is None:
                return None
            if body is not None and orelse is not None and body.symbol == orelse.symbol:
                return found
            richer = self._richer_branch(value, body, orelse)
            if richer is not None:
                return richer
            other = value.orelse if found is body else value.body
            return Factory(found.symbol, found.offset, source(other), found.keywords)
        if isinstance(value, cst.Call) and self.qualname(value.func) in _PARTIAL and value.args:
            symbol = self._layer_symbol(value.args[0].value)
            if symbol is None or any(a.star for a in value.args):
                return None
            keywords = frozenset(a.keyword.value for a in value.args[1:] if a.keyword is not None)
            return Factory(symbol, sum(1 for a in value.args[1:] if a.keyword is None), keywords=keywords)
        symbol = self._layer_symbol(value)
        return Factory(symbol) if symbol else None

    def _richer_branch(self, value: cst.IfExp, body: Factory | None, orelse: Factory | None) -> Factory | None:
        """``MoEQuantized if c else MoE``: V3 ``QuantizedMoE`` builds both (``QUANTIZED_BY``), so the
        binding becomes that class alone (``leave_IfExp``) when ``c`` has no side effects."""
        if body is None or orelse is None or body.offset or orelse.offset or body.keywords or orelse.keywords:
            return None
        for lean, rich, keep in ((body, orelse, "orelse"), (orelse, body, "body")):
            if QUANTIZED_BY.get(lean.symbol, ("",))[0] == rich.symbol and pure_expression(value.test, self.qualname):
                self.collapse[id(value)] = keep
                return Factory(rich.symbol)
        return None

    def leave_IfExp(self, original: cst.IfExp, updated: cst.IfExp) -> cst.BaseExpression:
        keep = self.collapse.pop(id(original), None)
        if keep is None:
            return updated
        branch = updated.orelse if keep == "orelse" else updated.body
        lean = original.body if keep == "orelse" else original.orelse
        self.rewrote(
            original, "MV340",
            f"{source(original)} → {source(branch)} (V3's class of it builds {source(lean)} too, with no quantization config)",
        )
        return branch

    def _factory(self, func: cst.BaseExpression) -> Factory | None:
        if not isinstance(func, cst.Name):
            return None
        for scope in reversed(self.factories):
            if func.value in scope:
                return scope[func.value]
        return None

    # --- rewrites --------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        port = v2_symbol(self.qualname(node.func))
        if port in PORTS:
            for arg in node.args:
                if isinstance(arg.value, cst.Call) and not arg.star:
                    self.port_args[id(arg.value)] = port

    def _call_site_is_a_port(self, original: cst.Call, module: str, name: str) -> bool:
        """The layer goes straight into a port that calls it the V3 way (no call site to update)."""
        port = self.port_args.get(id(original))
        return port is not None and calls_the_v3_way(port, module, name)

    def _calls_are_rewritten(self, original: cst.Call, v2: str) -> bool:
        """``self.x = <layer>(...)`` whose calls ``self.x(...)`` the call-site rule
        (``codemods.layer_calls``) rewrites or flags: a caveat about calling it is stale here."""
        attr = self.self_attr_of.get(id(original))
        local = self.local_of.get(id(original))
        if v2 not in CALL_CAVEATS or (attr is None and local is None) or not self.class_nodes \
                or (f"self.{attr}(" if attr is not None else "self.") not in self.state.source:
            return False
        node = self.class_nodes[-1][0]
        text = self.class_text.get(id(node))
        if text is None:  # (printed once per class, not once per layer it builds)
            text = self.class_text[id(node)] = source(node)
        if attr is None and local is not None:
            # ``local = <layer>(...)`` in ``__init__``, then ``self.x = local``: the layer is ``self.x``
            # when ``codemods.layer_calls`` follows the local (the same test)
            body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
            init = next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
            if init is None or local not in held_locals(init, lambda func: v2_symbol(self.qualname(func))):
                return False
            attr = held_as(init, local)
        return attr is not None and f"self.{attr}(" in text  # called in the same class

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if self.kwargs_dicts and id(original) in self.kwargs_dicts:
            return self._kwargs_dict(original, updated, self.kwargs_dicts.pop(id(original)))
        if self.kwargs_calls and id(original) in self.kwargs_calls:
            return self._kwargs_call(original, updated, *self.kwargs_calls.pop(id(original)))
        qualified = self.qualname(original.func)
        if qualified in _PARTIAL:
            return self._partial(original, updated)
        symbol = v2_symbol(qualified)
        if isinstance(original.func, cst.Name) and original.func.value in self.state.layer_substitutes:
            return self._substitute_call(original, updated, self.state.layer_substitutes[original.func.value])
        if isinstance(original.func, cst.Name) and original.func.value in self.removed_params:
            return self._drop_removed_args(original, updated, *self.removed_params[original.func.value])
        if symbol is None:
            layer = self._layer_of_super_init(original)
            if layer is not None:
                return self._super_init(original, updated, layer)
            base = self.unported_base[-1] if self.unported_base else None
            if base is not None and self._is_super_init(original):
                self._unported_super_init(base)
                return updated
            factory = self._factory(original.func) if qualified is None or "." not in qualified else None
            return self._factory_call(original, updated, factory) if factory else updated
        return self._layer_call(original, updated, symbol)

    def _substitute_call(self, original: cst.Call, updated: cst.Call, spec: LayerSpec) -> cst.BaseExpression:
        """A sibling's V2 layer subclass imported as its variant's V3 class (``Dependencies``):
        mapped like its library base (``subclass_spec``); the name stays (the import aliases it)."""
        bound = self._bound(updated, spec)
        if bound is None:
            return updated
        return self._rebuild(original, updated, bound, spec, spec.v3_name, func=updated.func)

    def _bound(self, call: cst.Call, spec: LayerSpec) -> Bound | None:
        """``call``'s arguments bound to ``spec``'s V2 parameters, or None with a TODO."""
        bound = bind(call, spec.v2_params, spec.v2_kwonly)
        if bound is None:
            self.todo("MV342", f"{spec.v2_name}(...) uses */** or unknown arguments: rewrite it for V3 by hand")
        return bound

    def _kwargs_dict(self, original: cst.Call, updated: cst.Call, symbol: str) -> cst.BaseExpression:
        """The keywords of a ``dict(...)`` spread into ``symbol``'s constructor, mapped where they are built."""
        spec = LAYERS[symbol]
        bound = bind(updated, spec.v2_params, spec.v2_kwonly)
        if bound is None:
            return updated
        new = self._rebuild(original, updated, bound, spec, spec.v3_name, factory=True)
        return new.with_changes(func=updated.func)

    def _kwargs_call(self, original: cst.Call, updated: cst.Call, symbol: str, name: str) -> cst.BaseExpression:
        """``Layer(**kw)`` whose dict was mapped where it is built: only the class may change."""
        spec = LAYERS[symbol]
        self.rewrote(original, "MV340", f"{source(original.func)}(**{name}) → {spec.v3_name} ({name} mapped where it is built)")
        return updated.with_changes(func=self._ref(original.func, spec.v3_module, spec.v3_name))

    def _drop_removed_args(self, original: cst.Call, updated: cst.Call, params: tuple[str, ...], gone: frozenset[str]) -> cst.Call:
        """A call of a class of this file whose ``__init__`` lost placement parameters: drop them here too."""
        bound = bind(updated, params)
        if bound is None or not gone & set(bound.order):
            return updated
        self.rewrote(original, "MV344", f"{source(updated.func)}(...): {', '.join(sorted(gone & set(bound.order)))} dropped with its parameters")
        return updated.with_changes(args=without(updated, bound, params, gone))

    def _partial(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``partial(V2Layer, ...)``: map the partial's arguments as a call of the layer."""
        if not updated.args or updated.args[0].keyword is not None or updated.args[0].star:
            return updated
        first = original.args[0].value
        if isinstance(first, cst.Name) and first.value in self.removed_params:
            # partial(ClassOfThisFile, ...) of a class whose __init__ lost parameters: they go here too
            inner = cst.Call(func=updated.args[0].value, args=updated.args[1:])
            dropped = self._drop_removed_args(original, inner, *self.removed_params[first.value])
            if dropped is inner:
                return updated
            head = updated.args[0] if dropped.args else updated.args[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return updated.with_changes(args=[head, *dropped.args])
        symbol = v2_symbol(self.qualname(original.args[0].value))
        if symbol is None or (symbol not in LAYERS and symbol not in NO_V3_CLASS):
            return updated
        inner = cst.Call(func=updated.args[0].value, args=updated.args[1:])
        self.in_partial += 1
        try:
            new = self._layer_call(original, inner, symbol)
        finally:
            self.in_partial -= 1
        if not isinstance(new, cst.Call) or new is inner:
            return updated
        flipped = LAYERS[symbol].flipped if symbol in LAYERS else {}
        overridden = [
            a.keyword.value
            for a in new.args
            if a.keyword is not None and a.keyword.value in flipped and source(a.value) != flipped[a.keyword.value]
        ]
        if overridden:
            self.todo(
                "MV341",
                f"partial({symbol}, {', '.join(overridden)}=...): a Callable[..., {symbol}] call site that migrate-v3 "
                "gave the V2 default explicitly overrides this; drop it there when this factory reaches it",
            )
        head = updated.args[0].with_changes(value=new.func)
        if not new.args:
            head = head.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(args=[head, *new.args])

    def _factory_call(self, original: cst.Call, updated: cst.Call, factory: Factory) -> cst.BaseExpression:
        """A call through a layer factory: same argument map, the callee stays."""
        if factory.symbol not in LAYERS:  # one of several layers
            if updated.args:
                self.todo(
                    "MV342",
                    f"{source(original.func)} builds {' or '.join(factory.symbol.split('|'))}: "
                    "pass arguments that suit the V3 classes",
                )
            return updated
        spec = LAYERS[factory.symbol]
        positional = spec.v2_params[factory.offset :]
        if (
            factory.arity is not None and len(updated.args) == factory.arity
            and all(a.keyword is None and not a.star for a in updated.args)
            and [spec.rename.get(p, p) for p in positional[: factory.arity]] == list(spec.v3_params[: factory.arity])
        ):
            # ``Callable[[int, int], Linear]`` types the call: what is bound to it takes these positionals
            # (a user function, or a partial whose build site gets V3's other arguments)
            return updated
        bound = bind(updated, positional, spec.v2_kwonly)
        if bound is None:
            v3_keywords = all(a.keyword is not None and a.keyword.value in spec.v3_params for a in updated.args)
            if not v3_keywords:
                self.todo("MV342", f"{source(original.func)}(...) builds a V2 {factory.symbol}: rewrite its arguments for V3")
            return updated
        changes = (
            any(a.keyword is None for a in updated.args)
            or any(_dropped(spec, n) or n in spec.rename or n in spec.unsupported for n in bound.order)
            or any(k not in bound.args and k not in factory.keywords for k, _ in _v3_of(spec, [*spec.flipped, *spec.always]))
        )
        if not changes:
            return updated
        if factory.other is not None:
            self.todo("MV342", f"{source(original.func)} may also be {factory.other}: it must take V3 {spec.v3_name} keywords")
        skip = frozenset({"weight_offset", "multiply_before_cast"}) if factory.symbol == "RMSNorm" else frozenset()
        for name in skip & set(bound.order):
            self.todo("MV342", f"{source(original.func)}({name}=...): pick the V3 RMSNorm variant where the factory is built")
        preset = frozenset(spec.rename.get(k, k) for k in factory.keywords)
        new = self._rebuild(original, updated, bound, spec, spec.v3_name, skip=skip, factory=True, preset=preset)
        return new.with_changes(func=updated.func)

    def _layer_call(self, original: cst.Call, updated: cst.Call, symbol: str) -> cst.BaseExpression:
        if symbol == "StackedLinear":
            return self._stacked_linear(original, updated)
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
        bound = self._bound(updated, spec)
        if bound is None:
            return updated
        if symbol == "RMSNorm":
            return self._rmsnorm(original, updated, bound)
        richer = self._quantized(symbol, bound)
        if richer is not None:
            self.rewrote(original, "MV340", f"{symbol}({QUANTIZED_BY[symbol][1]}=...) → {richer.v3_name} (V3 {spec.v3_name} takes no {QUANTIZED_BY[symbol][1]})")
            spec = richer
        return self._rebuild(original, updated, bound, spec, spec.v3_name)

    @staticmethod
    def _quantized(symbol: str, bound: Bound) -> LayerSpec | None:
        """The spec of the V2 layer whose V3 class builds ``symbol`` with the quantization config it is given
        (``QUANTIZED_BY``), when the call passes one other than the V2 default."""
        if symbol not in QUANTIZED_BY:
            return None
        richer, param = QUANTIZED_BY[symbol]
        arg = bound.args.get(param)
        if arg is None or _literal(source(arg.value)) == _literal(LAYERS[symbol].v2_defaults.get(param, "None")):
            return None
        return LAYERS[richer]

    def _stacked_linear(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """q/k/v ``StackedLinear`` → ``QKVLinear``; anything else is left to ``Ports`` (migrate-v3's V3 port)."""
        bound = bind(updated, STACKED_LINEAR_PARAMS)
        if bound is None or "out_dims" not in bound.args or "in_dim" not in bound.args:
            return updated
        dims = bound.args["out_dims"].value
        names = bound.args.get("names")
        defaults_ok = all(
            source(bound.args[k].value) == v
            for k, v in STACKED_LINEAR_DEFAULTS.items()
            if k in bound.args and k not in _QKV_DROPPABLE
        )
        if (
            not isinstance(dims, (cst.List, cst.Tuple))
            or len(dims.elements) != 3
            or source(dims.elements[1].value) != source(dims.elements[2].value)
            or (names is not None and source(names.value).replace("'", '"') != QKV_NAMES)
            or not defaults_ok
        ):
            return updated
        new = [
            as_keyword(bound.args["in_dim"], "in_dim"),
            new_keyword("q_dim", source(dims.elements[0].value)),
            new_keyword("kv_dim", source(dims.elements[1].value)),
            as_keyword(bound.args["has_bias"], "bias") if "has_bias" in bound.args else new_keyword("bias", "False"),
        ]
        if "stacked" in bound.args:
            new.append(as_keyword(bound.args["stacked"], "stacked"))
        func = self._ref(original.func, *QKV_LINEAR)
        dropped = [
            f"{k}={source(bound.args[k].value)}"
            for k in _QKV_DROPPABLE
            if k in bound.args and source(bound.args[k].value) != STACKED_LINEAR_DEFAULTS[k]
        ]
        if dropped:
            # a factory or config parameter usually holds the default (Linear, None): the model
            # builds either way; a custom Linear class or a quantized layout is a person's call
            self.todo(
                "MV343",
                f"StackedLinear({', '.join(dropped)}) → QKVLinear, whose q/k/v children are plain V3 Linears: "
                "when those arguments are not Linear / None (LoRA, quantized weights), port that to QKVLinear",
            )
        self.rewrote(original, "MV343", "StackedLinear(q/k/v) → QKVLinear(...) (same q_proj/k_proj/v_proj weights)")
        return updated.with_changes(func=func, args=relayout(updated.args, new))

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
        factory: bool = False,
        preset: frozenset[str] = frozenset(),
        extra: tuple[str, ...] = (),
        func: cst.BaseExpression | None = None,
    ) -> cst.Call:
        """``extra``: V2 arguments kept as they are, after the V3 ones (a helper class takes them);
        ``func``: the callee to keep (no V3 class to import)."""
        v2 = spec.v2_name
        new: dict[str, cst.Arg] = {}
        notes: list[str] = []
        masked: list[str] = []  # V2 arguments the MASK_PORTS subclass takes
        for name in bound.order:
            arg = bound.args[name]
            if name in skip:
                continue
            if name in extra:
                new[name] = as_keyword(arg, name)
                continue
            if _dropped(spec, name):
                value = source(arg.value)
                if name == "dtype" and _PINNED_DTYPE.search(value):
                    text = (
                        f"{v2}(dtype={value}) dropped: V3 weights take default_dtype; where {value} "
                        "differs from the model dtype: a norm (V2 cast its weight to the input's dtype, V3 "
                        "does not, and mixed dtypes do not compile) keeps the model dtype and its checkpoint "
                        "weights are cast (in the weight adapter, or loaded with auto_cast=True as "
                        f"MODULAR_AUTO_CAST_WEIGHTS allows); a layer computing in {value} is built under "
                        f"default_dtype({value})"
                    )
                    self.todo("MV342", text)
                    if self.statements:
                        # a layer that is no norm: DtypeScopes builds its statement under default_dtype(value)
                        eligible = not factory and not self.in_partial and "Norm" not in v2 and not source(original.func).endswith("__init__")
                        dtype_scopes(self.state).setdefault(self.statements[-1], DtypeScope()).add(text, value if eligible else None)
                notes.append(f"dropped {name}")
                continue
            if name in spec.unsupported:
                if _literal(source(arg.value)) == _literal(spec.v2_defaults.get(name, "<none>")):
                    notes.append(f"dropped default {name}")
                elif v2 in MASK_PORTS and name in MASK_PORTS[v2][1] and not factory and func is None \
                        and v3_name == spec.v3_name:
                    new[name] = as_keyword(arg, name)  # (the emitted subclass takes it: _masked)
                    masked.append(name)
                else:
                    self.todo("MV342", f"{v2}({name}=...) has no V3 equivalent: {spec.unsupported[name]}")
                continue
            v3 = spec.rename.get(name, name)
            if v3 not in spec.v3_params:
                self.todo("MV342", f"{v2}({name}=...) has no V3 equivalent")
                continue
            new[v3] = as_keyword(arg, v3)
        for v3, default in spec.flipped.items():
            if v3 not in new and v3 not in preset:
                new[v3] = new_keyword(v3, default)
                self.rewrote(original, "MV341", f"{v2}: {v3}={default} made explicit (V3 default differs)")
        for v3, value in spec.always.items():
            if v3 not in new:
                new[v3] = new_keyword(v3, value)
                self.rewrote(original, "MV341", f"{v2}: {v3}={value} keeps V2 numerics")
        for v3, (value, (module, name), why) in spec.fill.items():
            if v3 not in new and not factory:
                self.state.import_name(module, name)
                new[v3] = new_keyword(v3, value)
                self.rewrote(original, "MV341", f"{v2}: {v3}={value} added ({why})")
        for v3, why in spec.required.items():
            if v3 == "layer_idx" and v3 not in new and not self.in_partial and self.loops and self.loops[-1]:
                index = self.loops[-1]
                if index == _NAMED_INDEX:
                    self.renamed_loops[-1] = True
                new[v3] = new_keyword(v3, index)
                self.rewrote(original, "MV341", f"{v2}: layer_idx={index} (the loop's range index; V2 passed it at call time)")
            elif v3 not in new and not factory and not self.in_partial:
                self.todo("MV342", f"{v3_name}: {why}")
        base = self._masked(original, spec, masked) if masked else None
        for v3, why in spec.key_changes.items():
            if v3 in new and _literal(source(new[v3].value)) != _literal("False"):
                if v2 in KEY_KEEPERS and not factory and func is None and v3_name == spec.v3_name:
                    func = self._key_keeper(original, spec, v3, why, base)
                else:
                    self.todo("MV362", f"{v3_name}({v3}=...): {why}")
        func = func or (cst.Name(base) if base else None)
        if (
            spec.caveat
            and not factory
            and not self._call_site_is_a_port(original, v3_module or spec.v3_module, v3_name)
            and not self._calls_are_rewritten(original, spec.like or v2)
        ):
            self.todo("MV342", f"{v3_name}: {spec.caveat}")
        ordered = [new[p] for p in (*spec.v3_params, *extra, *masked) if p in new]
        func = func or self._ref(original.func, v3_module or spec.v3_module, v3_name)
        self.rewrote(original, "MV340", f"{v2}(...) → {v3_name}(...) keywords" + (f" ({', '.join(notes)})" if notes else ""))
        return updated.with_changes(func=func, args=relayout(updated.args, ordered))

    def _masked(self, original: cst.Call, spec: LayerSpec, args: list[str]) -> str:
        """The class ``MASK_PORTS`` emits into the module for ``spec``: V3's layer taking ``args`` too."""
        name, _, imports, code = MASK_PORTS[spec.v2_name]
        self.state.import_name(spec.v3_module, spec.v3_name)
        for module, symbol in imports:
            self.state.import_name(module, symbol)
        self.state.needed_imports.add(("max.experimental", "functional", "F"))
        self.state.helpers[name] = code
        self.state.helper_rules.setdefault(name, "MV342")
        self.rewrote(original, "MV342", f"{spec.v2_name}({', '.join(f'{a}=' for a in args)}...) → {name} (V3's "
                     f"{spec.v3_name} has no {', '.join(args)}; the subclass passes them to its kernel as V2 did)")
        return name

    def _key_keeper(self, original: cst.Call, spec: LayerSpec, arg: str, why: str, base: str | None = None) -> cst.BaseExpression:
        """The class ``KEY_KEEPERS`` emits into the module for ``spec``: V3's layer under V2's weight names
        (on ``base``, a ``MASK_PORTS`` subclass, when the call needs one too)."""
        name, code = KEY_KEEPERS[spec.v2_name]
        if base is not None:
            renamed = f"{base}V2Names"
            name, code = renamed, code.replace(f"class {name}({spec.v3_name}):", f"class {renamed}({base}):")
        self.state.import_name(spec.v3_module, spec.v3_name)
        self.state.import_name("max.experimental.nn", "Module")
        self.state.import_name(_TENSOR_MODULE, "Tensor")
        self.state.import_name("typing", "Any")
        self.state.helpers[name] = code
        self.state.helper_rules.setdefault(name, "MV362")
        self.rewrote(original, "MV362", f"{spec.v3_name}({arg}=...) → {name}: {why.split(':')[0]}; it keeps V2's names")
        return cst.Name(name)

    def _rmsnorm(self, original: cst.Call, updated: cst.Call, bound: Bound) -> cst.BaseExpression:
        spec = LAYERS["RMSNorm"]
        offset = bound.args.get("weight_offset")
        mbc = bound.args.get("multiply_before_cast")
        key = (
            _literal(source(offset.value)) if offset else "0",
            source(mbc.value) if mbc else "True",
        )
        variant = RMSNORM_VARIANTS.get(key)
        skip = frozenset({"weight_offset", "multiply_before_cast"})
        dtype = bound.args.get("dtype")
        pinned = source(dtype.value) if dtype is not None and _PINNED_DTYPE.search(source(dtype.value)) else None
        if variant is None or pinned:
            # no V3 class computes this pair (or it is only known at run time), or the weight keeps a
            # dtype of its own that V2 cast to the input's: a helper takes them
            self.state.import_name(_NORM_MODULE, "RMSNorm")
            self.state.import_name(_NORM_MODULE, "rms_norm")
            self.state.import_name(_TENSOR_MODULE, "Tensor")
            self.state.import_name("max.dtype", "DType")
            self.state.helpers[RMSNORM_OFFSET_HELPER_NAME] = RMSNORM_OFFSET_HELPER
            why = f"weight_offset={key[0]}, multiply_before_cast={key[1]}"
            if pinned:
                why += f", dtype={pinned} kept: V2 cast the weight to the input's dtype"
            self.rewrote(original, "MV341", f"RMSNorm({why}) → {RMSNORM_OFFSET_HELPER_NAME}")
            extra = ("weight_offset", "multiply_before_cast", *(("dtype",) if pinned else ()))
            new = self._rebuild(original, updated, bound, spec, RMSNORM_OFFSET_HELPER_NAME, extra=extra)
            self.state.needed_imports.discard((spec.v3_module, RMSNORM_OFFSET_HELPER_NAME, None))
            return new.with_changes(func=cst.Name(RMSNORM_OFFSET_HELPER_NAME))
        if variant == RMSNORM_HELPER_NAME:
            self.state.import_name(_NORM_MODULE, "RMSNorm")
            self.state.import_name(_NORM_MODULE, "rms_norm")
            self.state.import_name(_TENSOR_MODULE, "Tensor")
            self.state.helpers[RMSNORM_HELPER_NAME] = RMSNORM_HELPER
            self.rewrote(original, "MV341", "RMSNorm: multiply_before_cast=True kept via MultiplyBeforeCastRMSNorm")
        elif key != ("0", "False"):
            self.rewrote(original, "MV341", f"RMSNorm(weight_offset={key[0]}) → {variant}")
        if variant == RMSNORM_HELPER_NAME:
            new = self._rebuild(original, updated, bound, spec, variant, skip=skip)
            # the helper is defined in this module: no import for it
            self.state.needed_imports.discard((spec.v3_module, RMSNORM_HELPER_NAME, None))
            return new.with_changes(func=cst.Name(RMSNORM_HELPER_NAME))
        return self._rebuild(original, updated, bound, spec, variant, skip=skip)


def _builds_dict(node: cst.CSTNode) -> bool:
    """``name = dict(...)`` / ``name: T = dict(...)``."""
    value = node.value if isinstance(node, cst.Assign | cst.AnnAssign) else None
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict"


class _KwargsScan(cst.CSTVisitor):
    """In one function: ``name = dict(k=v, ...)`` bindings (None when bound twice or otherwise),
    the calls that spread ``**name`` alone, and how often each name occurs."""

    def __init__(self) -> None:
        self.dicts: dict[str, cst.Call | None] = {}
        self.spread: dict[str, list[cst.Call]] = {}
        self.uses: dict[str, int] = {}

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # a nested function has its own scope

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if not isinstance(target, cst.Name):
            return
        name = target.value
        built = value if isinstance(value, cst.Call) and name not in self.dicts else None
        if built is not None and not (
            isinstance(built.func, cst.Name) and built.func.value == "dict"
            and all(a.keyword is not None and not a.star for a in built.args)
        ):
            built = None
        self.dicts[name] = built

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._bind(t.target, node.value if len(node.targets) == 1 else None)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target, node.value)

    def visit_Call(self, node: cst.Call) -> None:
        if len(node.args) == 1 and node.args[0].star == "**" and isinstance(node.args[0].value, cst.Name):
            self.spread.setdefault(node.args[0].value.value, []).append(node)

    def visit_Name(self, node: cst.Name) -> None:
        self.uses[node.value] = self.uses.get(node.value, 0) + 1
