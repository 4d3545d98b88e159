"""MV340 clean-up — locals and function-level imports that only the dropped V2 arguments used.

V3 layers take no ``dtype``/``device`` (MV340 drops those arguments) and V3
has no ``InferenceSession`` (MV381 replaces ``session.load``), so a local that
only fed them is dead in the migrated function: ruff reports it (F841). A
local goes when all of these hold: the original function read it, the
rewritten one does not, it is bound once, by ``name = value``, and the value
has no side effects (names, attributes, constants, constant subscripts) or
is the V2 ``InferenceSession`` the rewrite made unused. A function-level
import the rewritten function no longer uses goes the same way. A comment
above a removed statement moves to the next one.

    dtype = config.dtype
    self.proj = Linear(4, 4, dtype, device)
    →  self.proj = Linear(in_dim=4, out_dim=4, bias=False)
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable, Container, Sequence

import libcst as cst

from codemods.base import Codemod, code_for, render
from codemods.imports import _STRINGS_AND_COMMENTS
from codemods.resolve import import_bindings, statement_blocks

#: V2 runtime objects whose only use the rewrite removes (``session.load`` → ``model.compile``)
_V2_RUNTIME = frozenset({"max.engine.InferenceSession", "max.engine.api.InferenceSession"})
_CONSTANT_NAMES = frozenset({"None", "True", "False"})


#: calls that only build a value: ``functools.partial`` and V2's ``DeviceRef``
_VALUE_CALLS = ("functools.partial", "max.graph.DeviceRef", "max.graph.type.DeviceRef")
_PURE_COMPARISONS = (cst.Is, cst.IsNot, cst.Equal, cst.NotEqual)


def pure_expression(node: cst.BaseExpression, qualname: Callable[[cst.BaseExpression], str | None]) -> bool:
    """No side effects to evaluate: names, attribute chains, constants, constant subscripts,
    arithmetic, ``and``/``or``/``not``, ``is``/``==`` and conditional expressions of those,
    and the value-building calls of ``_VALUE_CALLS`` on them."""
    def pure(n: cst.BaseExpression) -> bool:
        return pure_expression(n, qualname)

    if isinstance(node, cst.Name | cst.Integer | cst.Float | cst.Imaginary | cst.SimpleString):
        return True
    if isinstance(node, cst.UnaryOperation):
        return pure(node.expression)
    if isinstance(node, cst.BinaryOperation | cst.BooleanOperation):
        return pure(node.left) and pure(node.right)
    if isinstance(node, cst.Comparison):
        return pure(node.left) and all(isinstance(c.operator, _PURE_COMPARISONS) and pure(c.comparator) for c in node.comparisons)
    if isinstance(node, cst.IfExp):
        return pure(node.test) and pure(node.body) and pure(node.orelse)
    if isinstance(node, cst.Tuple | cst.List):
        return all(not isinstance(e, cst.StarredElement) and pure(e.value) for e in node.elements)
    if isinstance(node, cst.Attribute):
        return pure(node.value)
    if isinstance(node, cst.Subscript):
        return pure(node.value) and all(
            isinstance(el.slice, cst.Index) and isinstance(el.slice.value, cst.Integer | cst.SimpleString | cst.UnaryOperation)
            for el in node.slice
        )
    if isinstance(node, cst.Call):
        func = qualname(node.func) or ""
        return any(func == c or func.startswith(c + ".") for c in _VALUE_CALLS) and all(
            not a.star and pure(a.value) for a in node.args
        )
    return False


def local_assignment(stmt: cst.BaseStatement) -> tuple[str, cst.BaseExpression] | None:
    """``name = value`` (one target, one statement on the line)."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
        return small.targets[0].target.value, small.value
    return None


def _blocks(stmt: cst.BaseStatement) -> list[cst.IndentedBlock]:
    """The blocks of a compound statement (body, elif/else, except/finally, match cases)."""
    out: list[cst.IndentedBlock] = []
    todo: list[object] = [stmt]
    while todo:
        node = todo.pop()
        for attr in ("body", "orelse", "finalbody"):
            part = getattr(node, attr, None)
            if isinstance(part, cst.IndentedBlock):
                out.append(part)
            elif isinstance(part, cst.If | cst.Else | cst.Finally):
                todo.append(part)
        todo.extend(getattr(node, "handlers", ()))
        todo.extend(getattr(node, "cases", ()))
    return out


def _statements(body: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """The statements of a function body at any block depth, not inside nested defs/classes."""
    out: list[cst.BaseStatement] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, cst.BaseCompoundStatement) and not isinstance(stmt, cst.FunctionDef | cst.ClassDef):
            for block in _blocks(stmt):
                out.extend(_statements(block.body))
    return out


def name_reads(code: str, name: str) -> int:
    """How often ``code`` reads ``name`` (not as an attribute, keyword or assignment target)."""
    text = _STRINGS_AND_COMMENTS.sub(lambda m: m.group("keep") or " ", code)
    return len(re.findall(rf"(?<![.\w]){re.escape(name)}(?!\w)(?!\s*=(?!=))", text))


def _declared_outside(code: str, name: str) -> bool:
    """``global name`` / ``nonlocal name``: an assignment then is not local."""
    return re.search(rf"\b(?:global|nonlocal)\b[^\n]*\b{re.escape(name)}\b", code) is not None


def _whole_if_dead(stmt: cst.BaseStatement, dead: set[int]) -> bool:
    """``if <pure>: x = ...`` with only dead statements and no ``else`` goes whole."""
    return (
        isinstance(stmt, cst.If) and stmt.orelse is None and isinstance(stmt.body, cst.IndentedBlock)
        and all(id(s) in dead for s in stmt.body.body) and pure_expression(stmt.test, lambda n: None)
    )


def _prune(block: cst.IndentedBlock, dead: set[int]) -> cst.IndentedBlock:
    """``block`` without the ``dead`` statements (by identity), at any depth; the comment
    lines above a removed statement move to the next one; a block keeps one statement."""
    stmts = [s if id(s) in dead else _prune_compound(s, dead) for s in block.body]
    drop = [id(old) in dead or _whole_if_dead(old, dead) for old in block.body]
    if not any(drop):
        return block if all(a is b for a, b in zip(stmts, block.body, strict=True)) else block.with_changes(body=stmts)
    if all(drop):
        drop[-1] = False
    body: list[cst.BaseStatement] = []
    carry: list[cst.EmptyLine] = []
    for gone, stmt in zip(drop, stmts, strict=True):
        if gone:
            carry.extend(line for line in stmt.leading_lines if line.comment is not None)  # type: ignore[attr-defined]
            continue
        if carry:
            stmt = stmt.with_changes(leading_lines=[*carry, *stmt.leading_lines])  # type: ignore[attr-defined]
            carry = []
        body.append(stmt)
    return block.with_changes(body=body)


def _prune_compound(stmt: cst.BaseStatement, dead: set[int]) -> cst.BaseStatement:
    if not isinstance(stmt, cst.BaseCompoundStatement) or isinstance(stmt, cst.FunctionDef | cst.ClassDef):
        return stmt
    return _map_blocks(stmt, lambda block: _prune(block, dead))  # type: ignore[return-value]


def _map_blocks(node: cst.CSTNode, fn: Callable[[cst.IndentedBlock], cst.IndentedBlock]) -> cst.CSTNode:
    """``node`` with ``fn`` applied to each of its blocks (body, elif/else, except, finally,
    match cases); the same object when ``fn`` changed none."""
    changes: dict[str, object] = {}
    for attr in ("body", "orelse", "finalbody"):
        part = getattr(node, attr, None)
        if isinstance(part, cst.IndentedBlock):
            new: object = fn(part)
        elif isinstance(part, cst.If | cst.Else | cst.Finally):
            new = _map_blocks(part, fn)
        else:
            continue
        if new is not part:
            changes[attr] = new
    for attr in ("handlers", "cases"):
        parts = getattr(node, attr, None)
        if parts:
            news = [_map_blocks(p, fn) for p in parts]
            if any(a is not b for a, b in zip(news, parts, strict=True)):
                changes[attr] = news
    return node.with_changes(**changes) if changes else node


class DeadLocals(Codemod):
    PREFIX = "MV34"

    def visit_Module(self, node: cst.Module) -> None:
        self.module = node
        self.path: list[str] = []  # enclosing class/def names
        self.seen: Counter[tuple[str, ...]] = Counter()
        self.keys: dict[int, tuple[tuple[str, ...], int]] = {}
        self.original_functions: dict[tuple[tuple[str, ...], int], ast.FunctionDef | ast.AsyncFunctionDef] | None = None
        #: id of a rewritten function → (it, its removable statements by name, the original's key)
        self.pending: dict[int, tuple[cst.FunctionDef, dict[str, list[cst.BaseStatement]], tuple[tuple[str, ...], int]]] = {}

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.path.append(node.name.value)

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.path.pop()
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.path.append(node.name.value)
        key = tuple(self.path)
        self.keys[id(node)] = (key, self.seen[key])
        self.seen[key] += 1

    def _reads_before(self, key: tuple[tuple[str, ...], int]) -> tuple[Counter[str], frozenset[str]]:
        """(names the original function reads, names it declares global/nonlocal), from ``ast``:
        the original source, parsed once, costs less than printing each function. Asked only
        once the rewritten function is known to leave a candidate unread, so most files never
        parse it."""
        if self.original_functions is None:
            self.original_functions = _function_nodes_by_key(self.state.source)
        fn = self.original_functions.get(key)
        return (Counter(), frozenset()) if fn is None else _reads_and_declared(fn)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.path.pop()
        if updated is original or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        assert isinstance(original.body, cst.IndentedBlock)
        removable: dict[str, list[cst.BaseStatement]] = {}  # the original statements that may go
        imports = False
        for stmt in _statements(original.body.body):
            imports = imports or _is_import(stmt)
            found = local_assignment(stmt)
            if found is None:
                continue
            name, value = found
            if (isinstance(value, cst.Call) and self.qualname(value.func) in _V2_RUNTIME) or pure_expression(value, self.qualname):
                removable.setdefault(name, []).append(stmt)
        updated = self._inline_aliases(original, updated)
        if removable or imports:
            # decided once the module is printed (one print, reused by Imports)
            self.pending[id(updated)] = (updated, removable, self.keys[id(original)])
        return updated

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if not self.pending:
            return updated
        whole = render(updated, self.state)  # (the final print reuses each statement's code)
        reads: dict[int, Counter[str]] = {}
        for stmt in updated.body:
            functions = _functions(stmt)
            if not any(id(f) in self.pending for f in functions):
                continue
            # only the top-level statements that hold a pending function are parsed
            hit = self.state.rendered.get(id(stmt))
            if hit is None:  # render printed the module whole (libcst's own rule): parse that
                reads = _reads_in_module(whole, updated, self.pending)
                break
            try:
                after = _function_nodes(ast.parse(hit[1]).body)
            except (SyntaxError, ValueError):
                continue
            if len(after) == len(functions):
                reads.update((id(f), _load_names(a)) for f, a in zip(functions, after, strict=True) if id(f) in self.pending)
        if not reads:
            return updated

        def prune(fn: cst.FunctionDef) -> cst.FunctionDef:
            entry = self.pending.get(id(fn))
            if entry is None or id(fn) not in reads or not isinstance(fn.body, cst.IndentedBlock):
                return fn
            _, removable, key = entry
            now = reads[id(fn)]
            dead = {name for name in removable if not now[name]}
            body = fn.body
            import_locals = {
                local
                for stmt in _statements(body.body) if _is_import(stmt)
                for small in stmt.body  # type: ignore[attr-defined]
                if not (isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar))
                for local, _ in import_bindings(small)
                if not now[local]
            }
            if not dead and not import_locals:
                return fn
            # only a name the original read (and did not declare global) became dead
            read, declared = self._reads_before(key)
            dead = {name for name in dead if read[name] and name not in declared}
            codes = {_code(stmt) for name in dead for stmt in removable[name]} if dead else set()
            # (a statement as it was: the rewrites left it alone)
            gone = {
                id(stmt) for stmt in (_statements(fn.body.body) if dead else ())
                if (found := local_assignment(stmt)) is not None and found[0] in dead and _code(stmt) in codes
            }
            body = _prune(body, gone) if gone else body
            unused = {local for local in import_locals if read[local]}
            if unused:
                body = body.visit(_DropImports(unused))  # type: ignore[assignment]
            return fn if body is fn.body else fn.with_changes(body=body)

        return updated.with_changes(body=[_map_functions(s, prune) for s in updated.body])

    def _inline_aliases(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        """``compiled = graph`` where the rewrite turned ``compiled = session.load(graph, ...)``
        into a plain alias: later reads use ``graph`` and the alias goes."""
        assert isinstance(original.body, cst.IndentedBlock) and isinstance(updated.body, cst.IndentedBlock)
        olds, news = original.body.body, updated.body.body
        if len(olds) != len(news):
            return updated
        params = {p.name.value for p in (*updated.params.params, *updated.params.kwonly_params, *updated.params.posonly_params)}
        for i, (old, new) in enumerate(zip(olds, news, strict=True)):
            was, now = local_assignment(old), local_assignment(new)
            if was is None or now is None or isinstance(was[1], cst.Name) or not isinstance(now[1], cst.Name):
                continue
            alias, target = now[0], now[1].value
            rest = code_for(self.module, updated.body.with_changes(body=news[i + 1 :]))
            whole = code_for(self.module, updated.body)
            if (
                alias == target or alias in params
                or _bindings(whole, alias) != 1 or _bindings(rest, target)
                or _declared_outside(whole, alias) or _declared_outside(whole, target)
            ):
                continue
            tail: list[cst.BaseStatement] = []
            for later in news[i + 1 :]:
                renamed = later.visit(_Rename(alias, target))
                assert isinstance(renamed, cst.SimpleStatementLine | cst.BaseCompoundStatement)
                tail.append(renamed)
            if not tail:
                continue
            carry = [line for line in new.leading_lines if line.comment is not None]  # type: ignore[attr-defined]
            if carry:
                first = tail[0]
                assert isinstance(first, cst.SimpleStatementLine | cst.BaseCompoundStatement)
                tail[0] = first.with_changes(leading_lines=[*carry, *first.leading_lines])
            self.rewrote(old, "MV381", f"{alias} = {target}: the compiled model is {target}")
            return updated.with_changes(body=updated.body.with_changes(body=[*news[:i], *tail]))
        return updated


def _bindings(code: str, name: str) -> int:
    """Places that may bind ``name`` (assignments, keywords too: an overcount is safe)."""
    text = _STRINGS_AND_COMMENTS.sub(lambda m: m.group("keep") or " ", code)
    n = re.escape(name)
    return len(re.findall(rf"(?<![.\w]){n}\s*(?:[-+*/%&|^@:]|//|\*\*|<<|>>)?=(?!=)|\bas\s+{n}\b|\bfor\b[^\n]*(?<![.\w]){n}\b|(?<![.\w]){n}\s*,[^\n]*=|,\s*{n}\s*[,)\]]?[^\n]*=|\b(?:def|class|import)\s+{n}\b|\bdef\s+\w+\s*\([^)]*\b{n}\b|\blambda\b[^:]*\b{n}\b", text))


class _Rename(cst.CSTTransformer):
    """Reads of one local name renamed (attribute names and keywords untouched)."""

    def __init__(self, old: str, new: str) -> None:
        super().__init__()
        self.old, self.new = old, new

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=self.new) if updated.value == self.old else updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)


def _function_nodes_by_key(source: str) -> dict[tuple[tuple[str, ...], int], ast.FunctionDef | ast.AsyncFunctionDef]:
    """Per function (its class/def path and its rank among functions of that path): its node
    in the original source (the names it reads are collected only for the functions asked for)."""
    out: dict[tuple[tuple[str, ...], int], ast.FunctionDef | ast.AsyncFunctionDef] = {}
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # a grammar libcst knows and this Python does not: keep all
        return out
    _walk_functions(tree.body, (), out, Counter())
    return out


def _walk_functions(
    body: list[ast.stmt],
    path: tuple[str, ...],
    out: dict[tuple[tuple[str, ...], int], ast.FunctionDef | ast.AsyncFunctionDef],
    seen: Counter[tuple[str, ...]],
) -> None:
    """(A module-level function: a recursive closure is a reference cycle per call.)"""
    for child in body:  # statements only: functions are not inside expressions
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            key = (*path, child.name)
            if not isinstance(child, ast.ClassDef):
                out[key, seen[key]] = child
                seen[key] += 1
            _walk_functions(child.body, key, out, seen)
            continue
        for block in statement_blocks(child):  # source order, as the libcst traversal ranks them
            _walk_functions(block, path, out, seen)


def _reads_in_module(code: str, module: cst.Module, pending: Container[int]) -> dict[int, Counter[str]]:
    """The names each pending function of ``module`` reads, from ``ast`` over its whole ``code``."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return {}
    after = _function_nodes(tree.body)
    functions = [f for s in module.body for f in _functions(s)]
    if len(after) != len(functions):
        return {}
    return {id(f): _load_names(a) for f, a in zip(functions, after, strict=True) if id(f) in pending}


def _reads_and_declared(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[Counter[str], frozenset[str]]:
    """The names ``fn``'s body reads (nested scopes included) and those it declares global/nonlocal."""
    declared: set[str] = set()
    return _load_names(fn, declared), frozenset(declared)


def _ordered_blocks(node: cst.CSTNode) -> list[cst.IndentedBlock]:
    """The blocks of a compound statement in source order (the order ``ast`` lists them in)."""
    out: list[cst.IndentedBlock] = []
    body = getattr(node, "body", None)
    if isinstance(body, cst.IndentedBlock):
        out.append(body)
    for part in (*getattr(node, "handlers", ()), *getattr(node, "cases", ())):
        out.extend(_ordered_blocks(part))
    for attr in ("orelse", "finalbody"):
        part = getattr(node, attr, None)
        if part is not None:
            out.extend(_ordered_blocks(part))
    return out


def _functions(stmt: cst.BaseStatement) -> list[cst.FunctionDef]:
    """Every function definition in ``stmt``, in source (pre-)order."""
    out: list[cst.FunctionDef] = []
    if isinstance(stmt, cst.FunctionDef):
        out.append(stmt)
    if isinstance(stmt, cst.BaseCompoundStatement):
        for block in _ordered_blocks(stmt):
            for child in block.body:
                out.extend(_functions(child))
    return out


def _function_nodes(body: list[ast.stmt]) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    out: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            out.append(stmt)
        for block in statement_blocks(stmt):
            out.extend(_function_nodes(block))
    return out


def _load_names(fn: ast.FunctionDef | ast.AsyncFunctionDef, declared: set[str] | None = None) -> Counter[str]:
    """The names ``fn``'s body reads, once each (only whether a name is read matters); the
    names it declares global/nonlocal go into ``declared``. One walk over the fields (the
    expression contexts skipped): ``ast.walk`` costs twice as much."""
    loads: set[str] = set()
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Name:
            if type(node.ctx) is ast.Load:  # type: ignore[attr-defined]
                loads.add(node.id)  # type: ignore[attr-defined]
            continue
        if declared is not None and (kind is ast.Global or kind is ast.Nonlocal):
            declared.update(node.names)  # type: ignore[attr-defined]
            continue
        for name in node._fields:
            if name == "ctx":
                continue
            value = getattr(node, name, None)
            if isinstance(value, list):
                stack.extend(v for v in value if isinstance(v, ast.AST))
            elif isinstance(value, ast.AST):
                stack.append(value)
    return Counter(loads)


def _map_functions(stmt: cst.BaseStatement, fn: Callable[[cst.FunctionDef], cst.FunctionDef]) -> cst.BaseStatement:
    """``stmt`` with ``fn`` applied to every function definition in it, innermost first."""
    if not isinstance(stmt, cst.BaseCompoundStatement):
        return stmt

    def each(block: cst.IndentedBlock) -> cst.IndentedBlock:
        stmts = [_map_functions(s, fn) for s in block.body]
        return block if all(a is b for a, b in zip(stmts, block.body, strict=True)) else block.with_changes(body=stmts)

    new = _map_blocks(stmt, each)
    return fn(new) if isinstance(new, cst.FunctionDef) else new  # type: ignore[return-value]


def _code(stmt: cst.BaseStatement) -> str:
    """The statement's code without its leading lines."""
    return code_for(_EMPTY, stmt.with_changes(leading_lines=()))


_EMPTY = cst.Module(body=[])


def _is_import(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, cst.Import | cst.ImportFrom) for s in stmt.body)


_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import[ \t]*\([^)]*\)|from[ \t]+[\w.]+[ \t]+import[^\n]*|import[ \t][^\n]*)", re.M)


def _without_imports(code: str) -> str:
    return _IMPORT_LINE.sub(" ", code)


class _DropImports(cst.CSTTransformer):
    """Remove the given local names from function-level import statements."""

    def __init__(self, names: set[str]) -> None:
        super().__init__()
        self.names = names

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        return original  # a nested function's imports are its own

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | cst.RemovalSentinel:
        if not _is_import(updated):
            return updated
        smalls: list[cst.Import | cst.ImportFrom] = []
        for small in updated.body:
            assert isinstance(small, cst.Import | cst.ImportFrom)
            if isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar):
                smalls.append(small)
                continue
            keep = [a for a in small.names if next(import_bindings(small.with_changes(names=[a])))[0] not in self.names]  # type: ignore[union-attr]
            if len(keep) == len(small.names):  # type: ignore[arg-type]
                smalls.append(small)
            elif keep:
                keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                smalls.append(small.with_changes(names=keep, lpar=None, rpar=None) if isinstance(small, cst.ImportFrom) else small.with_changes(names=keep))
        if not smalls:
            return cst.RemoveFromParent()
        smalls[-1] = smalls[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(body=smalls)
