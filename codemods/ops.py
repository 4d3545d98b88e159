"""MV37x — ``ops.X`` → ``F.X``; graph-value APIs → their Tensor forms.

``ops.X(...)`` becomes ``F.X(...)`` when ``max.experimental.functional`` has
it (``knowledge/max_26_7.json``); keyword renames and flipped defaults from
``knowledge/ops.py`` are applied; an explicit ``axis=None`` (last axis in
``ops.max``/``ops.min``, *all* axes in F) becomes ``axis=-1``. An op with no F
form is wrapped: ``F.functional(ops.X)(...)``. Collectives and TensorValue-only
APIs (``.tensor``, ``.buffer``, ``.stdev``...) are flagged. ``x.to(DeviceRef.X())``
gets the driver Device V3's ``Tensor.to``/``Module.to`` take (V2 values take it too); so
does ``x.to(d)`` / ``x.to(self.devices[0])`` when ``d`` is a parameter annotated
``DeviceRef`` (or a ``list``/``Sequence`` of them, indexed or looped over by a
``for``/comprehension), or ``self.devices`` is set from such a parameter in ``__init__``.
A graph-value parameter's ``x.device`` compared with a DeviceRef (V2: both DeviceRefs) is a
driver Device in V3, never equal to a DeviceRef: it is compared as ``DeviceRef.from_device(x.device)``.

    ops.reshape(x, [1, -1])   →  F.reshape(x, [1, -1])
    ops.buffer_load(buf)      →  F.functional(ops.buffer_load)(buf)
    x.to(DeviceRef.CPU())     →  x.to(DeviceRef.CPU().to_device())
    x.to(self.devices[0])     →  x.to(self.devices[0].to_device())   (devices: list[DeviceRef])
    [x.to(d) for d in self.devices]  →  [x.to(d.to_device()) for d in self.devices]
    x.device == DeviceRef.CPU()  →  DeviceRef.from_device(x.device) == DeviceRef.CPU()   (x: TensorValue)
"""

from __future__ import annotations

import libcst as cst

from codemods.args import as_keyword, bind, new_keyword, relayout, source
from codemods.base import Codemod, nodes_of
from codemods.graph_build import GRAPH
from migrate_v3.knowledge import ops as K
from migrate_v3.knowledge import symbols as S

_OPS = "max.graph.ops."
_KERNELS = "max.nn.kernels."


#: the hooks that track which names hold DeviceRefs (``Ops._refs``)
_SCOPE_HOOKS = (
    "visit_ClassDef", "leave_ClassDef", "visit_FunctionDef", "leave_FunctionDef",
    "visit_For", "visit_ListComp", "visit_SetComp", "visit_GeneratorExp", "visit_DictComp", "leave_Comparison",
)
#: hooks that track ``with Graph(...)`` blocks
_WITH_HOOKS = ("visit_With", "leave_With")
_TRIGGERS = ("ops", "kernels", *K.GRAPH_FUNCTION_NAMES, ".rebind(", ".flatten(", ".tensor", ".buffer", "transpose(", ".to(", ".var(", ".stdev(",
             ".device ==", ".device !=",
             *(q.rpartition(".")[2] for q in K.FUNCTIONAL_TWINS))


def _f_attr(name: str) -> cst.Attribute:
    return cst.Attribute(value=cst.Name("F"), attr=cst.Name(name))


class Ops(Codemod):
    PREFIX = "MV37"

    @classmethod
    def applies(cls, source: str) -> bool:
        return any(t in source for t in _TRIGGERS)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        #: per enclosing class / function: the names (``d``, ``self.devices``) known to hold a
        #: DeviceRef (False) or a list/sequence of them (True)
        self._refs: list[dict[str, bool]] = []
        #: per enclosing function: its parameters annotated as graph values (``x: TensorValue``)
        self._values: list[set[str]] = []
        #: per enclosing ``with``: does it build a V2 ``Graph``? (its inputs are graph values; a graph
        #: body ``codemods.graph_body`` moves into a ``forward`` reads their Tensors' itself)
        self._graphs: list[bool] = []

    def idle_hooks(self) -> tuple[str, ...]:
        # only a file that names DeviceRef can annotate a parameter with it; only one naming Graph builds one
        source_text = self.state.source
        return (() if "DeviceRef" in source_text else _SCOPE_HOOKS) + (() if "Graph" in source_text else _WITH_HOOKS)

    def visit_With(self, node: cst.With) -> None:
        self._graphs.append(any(
            isinstance(item.item, cst.Call) and self.qualname(item.item.func) in GRAPH for item in node.items))

    def leave_With(self, original: cst.With, updated: cst.With) -> cst.With:
        self._graphs.pop()
        return updated

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        init = next((s for s in node.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None) \
            if isinstance(node.body, cst.IndentedBlock) else None
        found: dict[str, bool] = {}
        if init is not None:
            params = _device_ref_params(init)
            for assign in nodes_of(init, (cst.Assign,)):
                assert isinstance(assign, cst.Assign)
                value = assign.value.value if isinstance(assign.value, cst.Name) else None
                for t in assign.targets:
                    # (a V3 Module's ``self.device`` is a property that stores a driver Device)
                    if value in params and isinstance(t.target, cst.Attribute) and source(t.target.value) == "self" \
                            and t.target.attr.value != "device":
                        found[f"self.{t.target.attr.value}"] = params[value]
        self._refs.append(found)

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self._refs.pop()
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        inherited = {k: v for k, v in self._refs[-1].items() if k.startswith("self.")} if self._refs else {}
        self._refs.append({**inherited, **_device_ref_params(node)})
        self._values.append(_graph_value_params(node))

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self._refs.pop()
        self._values.pop()
        return updated

    def leave_Comparison(self, original: cst.Comparison, updated: cst.Comparison) -> cst.BaseExpression:
        """``x.device == DeviceRef.CPU()`` of a graph-value parameter ``x``: V3's ``x.device`` is a
        driver Device, never equal to a DeviceRef, so it is compared as one
        (``DeviceRef.from_device``: no device is opened, as ``DeviceRef.GPU().to_device()`` would)."""
        if len(updated.comparisons) != 1 or not isinstance(updated.comparisons[0].operator, cst.Equal | cst.NotEqual):
            return updated
        target = updated.comparisons[0]
        left, right = original.left, original.comparisons[0].comparator
        if self._value_device(left) and (_is_device_ref(right) or self._typed_device_ref(right)):
            updated = updated.with_changes(left=_as_device_ref(updated.left))
        elif self._value_device(right) and (_is_device_ref(left) or self._typed_device_ref(left)):
            updated = updated.with_changes(comparisons=[target.with_changes(comparator=_as_device_ref(target.comparator))])
        else:
            return updated
        self.state.needed_imports.add(("max.graph", "DeviceRef", None))
        self.rewrote(original, "MV373", "Tensor.device is a driver Device, never equal to a DeviceRef: DeviceRef.from_device(x.device)")
        return updated

    def _value_device(self, node: cst.BaseExpression) -> bool:
        """``x.device`` of a parameter annotated as a graph value (a Tensor in V3)."""
        return (
            isinstance(node, cst.Attribute) and node.attr.value == "device" and isinstance(node.value, cst.Name)
            and bool(self._values) and node.value.value in self._values[-1]
        )

    def visit_For(self, node: cst.For) -> None:
        self._bind_loop(node.target, node.iter)

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._bind_comp(node.for_in)

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self._bind_comp(node.for_in)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._bind_comp(node.for_in)

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self._bind_comp(node.for_in)

    def _bind_comp(self, comp: cst.CompFor | None) -> None:
        # (bound before the element is visited: libcst visits ``elt`` before ``for_in``)
        while comp is not None:
            self._bind_loop(comp.target, comp.iter)
            comp = comp.inner_for_in

    def _bind_loop(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        """``for d in self.devices`` over a list of DeviceRefs: ``d`` is one DeviceRef."""
        if not self._refs or not isinstance(target, cst.Name):
            return
        if isinstance(iterable, cst.Name | cst.Attribute) and self._refs[-1].get(source(iterable)) is True:
            self._refs[-1][target.value] = False
        else:  # a loop over anything else rebinds the name
            self._refs[-1].pop(target.value, None)

    def _imported(self, call: cst.Call) -> bool:
        """``tree.flatten(x)`` / ``mod.rebind(...)``: a function of an imported module or class,
        not a method of a graph value (a value is never an import)."""
        return isinstance(call.func, cst.Attribute) and self.qualname(call.func.value) is not None

    def _typed_device_ref(self, node: cst.BaseExpression) -> bool:
        """``d`` / ``self.d`` bound to a DeviceRef, or ``ds[i]`` of a list of them (see ``_refs``)."""
        if not self._refs:
            return False
        many = isinstance(node, cst.Subscript)
        base = node
        if isinstance(node, cst.Subscript):
            if not (len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)):
                return False
            base = node.value
        name = source(base) if isinstance(base, cst.Name | cst.Attribute) else None
        return name is not None and self._refs[-1].get(name) is many

    def _functional(self) -> None:
        self.state.needed_imports.add(("max.experimental", "functional", "F"))

    def _op_name(self, node: cst.BaseExpression) -> str | None:
        qual = self.qualname(node)
        if qual is None:
            return None
        if qual.startswith(_OPS):
            return qual[len(_OPS) :]
        if qual == "max.graph.ops":
            return ""
        return None

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = original.func
        op = self._op_name(func)
        if op and updated.func is not func and not updated.func.deep_equals(func):
            return updated  # an earlier codemod rewrote the call (``F.allgather`` for ``ops.allgather``)
        if op:
            return self._op_call(original, updated, op)
        qual = self.qualname(func)
        if qual is not None and qual.startswith(_KERNELS):
            return self._kernel_call(original, updated, qual[len(_KERNELS) :])
        if qual in K.GRAPH_FUNCTIONS:  # (once wrapped, the callee is a call: no qualified name)
            return self._through_functional(original, updated, f"{qual.rpartition('.')[2]} takes graph values: wrapped with F.functional")
        if qual in K.FUNCTIONAL_TWINS:
            module, _, v2 = qual.rpartition(".")
            name = self.state.import_name(module, K.FUNCTIONAL_TWINS[qual])
            self.rewrote(original, "MV370", f"{v2} → {name} (its Tensor form, beside it in {module})")
            return updated.with_changes(func=cst.Name(name))
        if isinstance(func, cst.Attribute) and op is None:
            return self._method_call(original, updated, func.attr.value)
        return updated

    def _op_call(self, original: cst.Call, updated: cst.Call, op: str) -> cst.BaseExpression:
        head = op.split(".", 1)[0]
        if head in K.COLLECTIVES:
            self.todo("MV391", f"ops.{op}: {K.SUBMODULES.get(head, 'V3 collectives take one distributed Tensor (F.allgather / F.allreduce_sum / F.distributed_broadcast)')}")
            return updated
        if "." in op:
            self.todo("MV371", f"ops.{op}: {K.SUBMODULES.get(head, 'no F form')}")
            return updated
        if not K.known_op(op):
            return updated
        if not K.in_functional(op):
            return self._through_functional(original, updated, f"ops.{op} has no F form: wrapped with F.functional")
        change = K.OP_CHANGES.get(op)
        args = list(updated.args)
        if change is not None:
            new_args = self._apply_change(original, updated, op, change)
            if new_args is None:
                return updated
            args = new_args
        self._functional()
        self.rewrote(original, "MV370", f"ops.{op} → F.{op}")
        return updated.with_changes(func=_f_attr(op), args=args)

    def _apply_change(
        self, original: cst.Call, updated: cst.Call, op: str, change: K.OpChange
    ) -> list[cst.Arg] | None:
        for arg in updated.args:
            if arg.keyword is not None and arg.keyword.value in change.unsupported:
                self.todo("MV371", f"ops.{op}({arg.keyword.value}=...): {change.unsupported[arg.keyword.value]}")
                return None
        if change.v2_params:
            bound = bind(updated, change.v2_params)
            if bound is None:
                self.todo("MV371", f"ops.{op}: arguments moved in F.{op}; rewrite by hand")
                return None
            out = []
            for i, name in enumerate(change.v2_params):
                if name in bound.args:
                    arg = bound.args[name]
                    out.append(as_keyword(arg, name) if name in change.kwonly or i > 0 and arg.keyword is not None else arg)
            for name, default in change.flipped.items():
                if name not in bound.args:
                    out.append(new_keyword(name, default))
                    self.rewrote(original, "MV370", f"F.{op}: {name}={default} made explicit (F default differs)")
                    if default.startswith("DType."):
                        self.state.import_name("max.dtype", "DType")
            return relayout(updated.args, out)
        if any(a.star for a in updated.args) or S.op_call_code(
            op,
            [source(a.value) for a in updated.args if a.keyword is None],
            {a.keyword.value: source(a.value) for a in updated.args if a.keyword is not None},
        ) == "MV371":
            self.todo("MV371", f"ops.{op}(axis=...): None means all axes in F.{op}, the last axis in ops.{op}")
            return None
        args: list[cst.Arg] = []
        for i, arg in enumerate(updated.args):
            kw = arg.keyword.value if arg.keyword is not None else None
            if kw in change.rename:
                arg = as_keyword(arg, change.rename[kw])
            if change.axis_none_is_last and (kw == "axis" or (kw is None and i == 2)):
                value = source(arg.value)
                if value == "None":
                    arg = arg.with_changes(value=cst.parse_expression("-1"))
                    self.rewrote(original, "MV370", f"ops.{op}(axis=None) reduced the last axis: F.{op}(axis=-1)")
                elif isinstance(arg.value, cst.Name | cst.Attribute):
                    expr = cst.parse_expression(f"(-1 if {value} is None else {value})")
                    arg = arg.with_changes(value=expr)
                    self.rewrote(original, "MV370", f"ops.{op}(axis={value}): None meant the last axis")
            args.append(arg)
        return args

    def _kernel_call(self, original: cst.Call, updated: cst.Call, kernel: str) -> cst.BaseExpression:
        if kernel in K.FUNCTIONAL_KERNELS:
            name = self.state.import_name(K.FUNCTIONAL_KERNELS_MODULE, kernel)
            self.rewrote(original, "MV370", f"max.nn.kernels.{kernel} → functional_kernels.{kernel}")
            return updated.with_changes(func=cst.Name(name))
        return self._through_functional(original, updated, f"kernel {kernel} wrapped with F.functional")

    def _through_functional(self, original: cst.Call, updated: cst.Call, message: str) -> cst.Call:
        """``f(...)`` → ``F.functional(f)(...)`` (MV372): it hands ``f`` the Tensors' graph values."""
        self._functional()
        self.rewrote(original, "MV372", message)
        return updated.with_changes(func=cst.Call(func=_f_attr("functional"), args=[cst.Arg(updated.func)]))

    def _method_call(self, original: cst.Call, updated: cst.Call, method: str) -> cst.BaseExpression:
        func = updated.func
        if not isinstance(func, cst.Attribute):
            return updated  # an earlier codemod rewrote the callee (``nn.Linear(...)`` → ``Linear(...)``)
        if method in K.METHOD_TO_FUNCTION and _looks_like_tensor(func.value) and not self._imported(original):
            self._functional()
            self.rewrote(original, "MV370", f".{method}() is not a Tensor method: F.{method}(x, ...)")
            first = cst.Arg(value=func.value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if updated.args else cst.MaybeSentinel.DEFAULT)
            return updated.with_changes(func=_f_attr(K.METHOD_TO_FUNCTION[method]), args=[first, *updated.args])
        if method in ("stdev", "var") and _looks_like_tensor(func.value):
            self.todo("MV373", f".{method}(): {K.GRAPH_VALUE_ATTRS[method]}")
        if method == "transpose" and any(a.keyword is not None and a.keyword.value in K.TRANSPOSE_KEYWORDS for a in updated.args):
            args = [
                as_keyword(a, K.TRANSPOSE_KEYWORDS[a.keyword.value])
                if a.keyword is not None and a.keyword.value in K.TRANSPOSE_KEYWORDS
                else a
                for a in updated.args
            ]
            self.rewrote(original, "MV370", ".transpose(dim_1=, dim_2=) → .transpose(dim1=, dim2=)")
            return updated.with_changes(args=args)
        if method == "to" and len(updated.args) == 1 and not updated.args[0].keyword and (
            _is_device_ref(updated.args[0].value) or self._typed_device_ref(original.args[0].value)
        ):
            # V3 Tensor.to/Module.to take a driver Device; a V2 graph value's .to takes one too
            arg = updated.args[0]
            device = cst.Call(func=cst.Attribute(value=arg.value, attr=cst.Name("to_device")))
            self.rewrote(original, "MV373", "Tensor.to(DeviceRef) raises TypeError: .to(ref.to_device())")
            return updated.with_changes(args=[arg.with_changes(value=device)])
        return updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        if id(original) in self.state.call_funcs:
            return updated
        op = self._op_name(original)
        if op and "." not in op and K.in_functional(op) and op not in K.OP_CHANGES:
            self._functional()
            self.rewrote(original, "MV370", f"ops.{op} → F.{op}")
            return _f_attr(op)
        if original.attr.value in ("tensor", "buffer") and id(original) not in self.state.attr_bases and _is_graph_input(original.value):
            if original.attr.value == "buffer" and isinstance(original.value, cst.Call) and not any(self._graphs):
                # the next graph input read as a buffer: V3 hands it over as a Tensor holding the BufferValue
                self.rewrote(original, "MV373", f"next(...).buffer → next(...).{K.GRAPH_VALUE}: {K.BUFFER_INPUT}")
                return updated.with_changes(attr=cst.Name(K.GRAPH_VALUE))
            self.todo("MV373", f".{original.attr.value}: {K.GRAPH_VALUE_ATTRS[original.attr.value]}")
        return updated


def _looks_like_tensor(node: cst.BaseExpression) -> bool:
    """Not obviously numpy/torch/a list: ``np.x.flatten()`` stays as it is."""
    root = node
    while isinstance(root, cst.Attribute | cst.Subscript | cst.Call):
        root = root.value if not isinstance(root, cst.Call) else root.func
    return not (isinstance(root, cst.Name) and root.value in {"np", "numpy", "torch"})


def _as_device_ref(device: cst.BaseExpression) -> cst.Call:
    """``x.device`` → ``DeviceRef.from_device(x.device)``."""
    return cst.Call(func=cst.Attribute(value=cst.Name("DeviceRef"), attr=cst.Name("from_device")), args=[cst.Arg(device)])


def _is_device_ref(node: cst.BaseExpression) -> bool:
    """``DeviceRef.CPU()`` / ``DeviceRef(...)``, not ``DeviceRef.CPU().to_device()`` (a Device)."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "to_device":
        return False
    text = source(node)
    return text.startswith("DeviceRef.") or text.startswith("DeviceRef(")


#: annotations of a parameter holding several DeviceRefs (indexed: one DeviceRef)
_DEVICE_REFS = frozenset({"list[DeviceRef]", "List[DeviceRef]", "Sequence[DeviceRef]", "tuple[DeviceRef,...]"})


def _device_ref_params(func: cst.FunctionDef) -> dict[str, bool]:
    """Parameters annotated ``DeviceRef`` (False) or ``list``/``Sequence``/``tuple`` of it (True)."""
    found: dict[str, bool] = {}
    params = func.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.annotation is None:
            continue
        text = source(param.annotation.annotation).replace(" ", "")
        if text == "DeviceRef":
            found[param.name.value] = False
        elif text in _DEVICE_REFS:
            found[param.name.value] = True
    return found


#: annotations of a parameter holding one graph value (a Tensor in V3)
_GRAPH_VALUES = frozenset({"TensorValue", "BufferValue", "TensorValueLike", "Tensor"})


def _graph_value_params(func: cst.FunctionDef) -> set[str]:
    """Parameters annotated ``TensorValue`` / ``BufferValue`` / ``TensorValueLike`` (or ``Tensor``)."""
    params = func.params
    return {
        p.name.value
        for p in (*params.posonly_params, *params.params, *params.kwonly_params)
        if p.annotation is not None and source(p.annotation.annotation).rsplit(".", 1)[-1] in _GRAPH_VALUES
    }


def _is_graph_input(node: cst.BaseExpression) -> bool:
    """``graph.inputs[0]`` / ``x`` / ``next(inputs)`` in ``x.tensor``: names, subscripts and the next
    value of an iterator (graph inputs are read in order so), not other calls."""
    if isinstance(node, cst.Call):
        return isinstance(node.func, cst.Name) and node.func.value == "next" and len(node.args) == 1
    return isinstance(node, cst.Name | cst.Subscript | cst.Attribute)
