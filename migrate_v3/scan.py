"""Read one file's source and find every V2 site, fast.

``check`` must feel like grep over a 500k-line tree, so this module does not
build a syntax tree. It finds import statements and the uses of the names they
bind with a few compiled regular expressions, skips matches inside strings and
comments, resolves aliases (``import max.nn as nn``, ``from max import nn``)
to qualified names, and looks those up in ``knowledge.symbols``. Whether the
file parses at all is checked separately (``syntax_error``), so a syntax error
never hides findings and findings never need a full parse.

The loops over a file's characters (triple-quoted strings, import statements
and their names, the uses of imported names, V2 literals, line numbers) run in
C when ``migrate_v3/_speedups.c`` is built; each has its Python twin here
(``_triple_quoted_py``, ``_import_statements``, ``_import_parts_py``,
``_code_use_groups``, ``_find_all_py``, ``_located_py``, ``_Positions``), which
runs otherwise and which ``tests/test_speedups.py`` holds the C versions to.
"""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from collections.abc import Iterator
from functools import lru_cache
from symtable import symtable
from types import ModuleType
from typing import NamedTuple

from migrate_v3.findings import FIX_LABEL, Finding, Record, finding_of
from migrate_v3.knowledge import symbols as K
from migrate_v3.knowledge.ports import LOAD_GRAPH_SPECS as _BRIDGE

#: The version of migrate_v3/_speedups.c this module was written for (its SPEEDUPS_API).
_SPEEDUPS_API = 1
_speedups: ModuleType | None
try:  # C versions of the text primitives below (setup.py builds them when it can)
    from migrate_v3 import _speedups
except ImportError:  # pragma: no cover - exercised where no C compiler was found
    _speedups = None
_built_api = getattr(_speedups, "API", None)


def _current(module: ModuleType | None) -> ModuleType | None:
    """``module`` when it is a build of the C file this module was written for, else None
    (a stale build, from an old wheel or a build/ directory, may lack functions or differ)."""
    return module if module is not None and getattr(module, "API", None) == _SPEEDUPS_API else None


_speedups = _current(_speedups)


def speedups_state() -> str:
    """Which scanner runs, for ``check --verbose``: the C speed-ups, or the Python twins and why."""
    if _speedups is not None:
        return f"C speed-ups (migrate_v3._speedups, API {_SPEEDUPS_API})"
    if _built_api is None:
        return "Python fallback: migrate_v3._speedups is not built (no C compiler at install time?)"
    return f"Python fallback: migrate_v3._speedups is a stale build (API {_built_api}, this version needs {_SPEEDUPS_API})"

# --- lexical helpers -------------------------------------------------------------

#: An import statement at a line start; its names run on over backslash-newlines.
_IMPORT = re.compile(
    r"[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|(?:[^\n#;\\]|\\\n?)*)"
    r"|import[ \t]+((?:[^\n#;\\]|\\\n?)*))",
)
_CALL = re.compile(r"[ \t]*\(")
#: Rules about constructor calls: other uses of those names follow their import.
_CONSTRUCTOR_RULES = frozenset({"MV340", "MV350", "MV351"})
_CLASS_HEAD = re.compile(r"[ \t]*class[ \t]+\w+[ \t]*\(")
_CLASS = re.compile(r"([ \t]*)class[ \t]+(\w+)[ \t]*(?:\(([^)]*)\))?[ \t]*:")
_DEF = re.compile(r"^([ \t]+)(?:async[ \t]+)?def[ \t]+(__call__|__init__)\b", re.M)
_SUPER_INIT = re.compile(r"super\([^)]*\)\s*\.\s*__init__\s*\(")
_BASE_INIT = re.compile(r"\.__init__\s*\(\s*self\b")
_SUPPRESS = re.compile(r"#[ \t]*migrate-v3:[ \t]*ignore(?:\[([A-Z0-9, ]*)\])?")
_TODO = "TODO(migrate-v3)"
_COMMENT = re.compile(r"#[^\n]*")
_IMPORT_PART = re.compile(r"[^,()]+")
_BLANKS = re.compile(r"[ \t]")

#: Method and keyword patterns that only V2 graph code uses; searched in V2 files.
#: V2-only method and keyword uses, searched in V2 files: the literals each
#: pattern starts with (found with str.find, far faster than a regex scan),
#: the pattern matched there, its rule code and message.
_V2_PATTERNS: tuple[tuple[tuple[str, ...], re.Pattern[str], str, str], ...] = (
    ((".rebind",), re.compile(r"\.rebind[ \t]*\("), "MV373", ".rebind(): use F.rebind(x, shape)"),
    (
        (".tensor", ".buffer"),
        re.compile(r"\.(?:tensor|buffer)\b(?![ \t]*[(.=])"),
        "MV373",
        ".tensor/.buffer on a graph Value: forward() receives Tensors",
    ),
    (("weights_registry",), re.compile(r"weights_registry[ \t]*="), "MV381",
     "session.load(weights_registry=...): use model.compile(..., weights=state_dict)"),
    (
        (".load_state_dict", ".state_dict", ".raw_state_dict"),
        re.compile(r"\.(?:load_state_dict|state_dict|raw_state_dict)[ \t]*\("),
        "MV382",
        "V2 state_dict()/load_state_dict(): V3 binds weights in compile(weights=...)",
    ),
    (
        (".unflatten_kv_inputs", ".unflatten_basic_kv_tree"),
        re.compile(r"\.(?:unflatten_kv_inputs|unflatten_basic_kv_tree)[ \t]*\((?![^\n]*\._graph_value\b)"),
        "MV384",
        "KV-cache unflattening moves into the root module's forward()",
    ),
    ((".shard",), re.compile(r"\.(?:shard[ \t]*\(|sharding_strategy\b)"), "MV390",
     "per-layer sharding: use placements on a DeviceMesh"),
)


def _v2_searches() -> list[tuple[str, list[tuple[str, int]], re.Pattern[str], str, str]]:
    """``_V2_PATTERNS`` as fewer text passes: the literals of one pattern that share a
    prefix or a suffix (".state_dict", ".load_state_dict", ".raw_state_dict") are found
    by searching the shared part once. No literal or shared part overlaps itself, so
    each occurrence of a literal is exactly one occurrence of the shared part and the
    sites found are the same. Entries: (search, [(literal, offset of search in it)],
    pattern, code, message)."""
    out: list[tuple[str, list[tuple[str, int]], re.Pattern[str], str, str]] = []
    for literals, pattern, code, message in _V2_PATTERNS:
        prefix, suffix = os.path.commonprefix(list(literals)), os.path.commonprefix([x[::-1] for x in literals])[::-1]
        if len(literals) > 1 and max(len(prefix), len(suffix)) >= 6:
            if len(prefix) >= len(suffix):
                out.append((prefix, [(x, 0) for x in literals], pattern, code, message))
            else:
                out.append((suffix, [(x, len(x) - len(suffix)) for x in literals], pattern, code, message))
        else:
            out.extend((x, [(x, 0)], pattern, code, message) for x in literals)
    return out


_V2_SEARCHES = _v2_searches()
_V2_NEEDLES = tuple(search for search, *_ in _V2_SEARCHES)


def _find_all_py(text: str, needles: tuple[str, ...]) -> list[list[int]]:
    """[offsets of each needle], each found where the last one ended, as str.find finds them."""
    return [list(_occurrences(text, needle)) for needle in needles]


def _occurrences(text: str, literal: str) -> Iterator[int]:
    pos = text.find(literal)
    while pos >= 0:
        yield pos
        pos = text.find(literal, pos + len(literal))


def _line_statements(text: str, keyword: str, pattern: re.Pattern[str]) -> Iterator[re.Match[str]]:
    """Matches of ``pattern`` (anchored at a line start) on lines that contain ``keyword``."""
    end = 0
    for pos in _occurrences(text, keyword):
        if pos < end:
            continue
        line_start = text.rfind("\n", 0, pos) + 1
        m = pattern.match(text, line_start)
        if m is not None and m.end() > pos:
            end = m.end()
            yield m


def _import_statements(text: str, strings: _Spans) -> list[tuple[int, int, str | None, str, int]]:
    """(line start, end, module or None, names, offset of names) of each import statement that
    can bind a max or relative name (``from module import names``, ``import names``), outside
    triple-quoted strings.

    Only lines that hold "import" are matched, each at its line start, so a
    statement is never inside a one-line string or a comment.
    """
    out: list[tuple[int, int, str | None, str, int]] = []
    for m in _line_statements(text, "import", _IMPORT):
        module, plain = m.group(1, 3)
        if module is not None:
            group = 2 if module.startswith(("max", ".")) else 0
        else:
            group = 3 if "max" in plain else 0
        if group and not strings.contains(m.start()):
            out.append((m.start(), m.end(), module, m.group(group), m.start(group)))
    return out


class _Spans:
    """Sorted, disjoint (start, end) ranges: triple-quoted strings or imports."""

    __slots__ = ("starts", "ends")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, start: int, end: int) -> None:
        self.starts.append(start)
        self.ends.append(end)

    def contains(self, pos: int) -> bool:
        i = bisect_right(self.starts, pos) - 1
        return i >= 0 and pos < self.ends[i]

    def end_after(self, pos: int) -> int | None:
        i = bisect_right(self.starts, pos) - 1
        return self.ends[i] if i >= 0 and pos < self.ends[i] else None


def _find_single_triple(text: str, start: int = 0) -> int:
    """``text.find("'''", start)``: most sources hold few single quotes, and memchr for one
    quote skips faster than a three-character search; with many, fall back to that search."""
    find = text.find
    pos = find("'", start)
    for _ in range(32):
        if pos < 0 or text.startswith("'''", pos):
            return pos
        pos = find("'", pos + 1)
    return pos if pos < 0 else find("'''", pos)


def _triple_quoted(text: str) -> _Spans:
    """The triple-quoted strings of ``text``, left to right."""
    if _speedups is None:
        return _triple_quoted_py(text)
    spans = _Spans()
    spans.starts, spans.ends = _speedups.triple_quoted(text)
    return spans


def _triple_quoted_py(text: str) -> _Spans:
    spans = _Spans()
    pos = 0
    double, single = text.find('"""'), _find_single_triple(text)
    while double >= 0 or single >= 0:
        start = single if double < 0 or 0 <= single < double else double
        close = text.find(text[start : start + 3], start + 3)
        pos = len(text) if close < 0 else close + 3
        spans.add(start, pos)
        # Search again only for a delimiter the string just closed has passed.
        if 0 <= double < pos:
            double = text.find('"""', pos)
        if 0 <= single < pos:
            single = _find_single_triple(text, pos)
    return spans


def _after_value(text: str, pos: int) -> bool:
    """``.attr`` at ``pos`` follows a value (name, call or subscript), not a module path."""
    before = text[max(0, pos - 13) : pos]
    return bool(before) and (before[-1].isalnum() or before[-1] in "_)]") and not before.endswith(
        ("max.experimental", "experimental", "max")
    )


def _in_line_string_or_comment(text: str, pos: int) -> bool:
    """Whether ``pos`` sits in a one-line string or a comment of its line."""
    start = text.rfind("\n", 0, pos) + 1
    prefix = text[start:pos]
    if "#" not in prefix and '"' not in prefix and "'" not in prefix:
        return False
    quote = ""
    i = 0
    while i < len(prefix):
        c = prefix[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c == "#":
            return True
        elif c in "\"'":
            quote = c
        i += 1
    return bool(quote)


# --- imports ------------------------------------------------------------------------


def _import_parts_py(module: str | None, body: str) -> tuple[tuple[str, str, int, bool], ...]:
    """(local, target, offset in ``body``, star) per name that ``from module import body``
    (``import body`` when module is None) binds."""
    out: list[tuple[str, str, int, bool]] = []
    if "#" in body:
        body = _COMMENT.sub(lambda c: " " * len(c.group()), body)
    for part in _IMPORT_PART.finditer(body):
        text = part.group()
        words = text.replace("\\", " ").split()
        if not words:
            continue
        off = part.start() + len(text) - len(text.lstrip())
        if module is None:
            if len(words) == 3 and words[1] == "as":
                out.append((words[2], words[0], off, False))
            else:
                top = words[0].split(".")[0]
                out.append((top, top, off, False))
        elif words[0] == "*":
            out.append(("*", module, off, True))
        else:
            sep = "" if module.endswith(".") else "."
            local = words[2] if len(words) == 3 and words[1] == "as" else words[0]
            out.append((local, f"{module}{sep}{words[0]}", off, False))
    return tuple(out)


@lru_cache(maxsize=16384)
def _import_parts(module: str | None, body: str) -> tuple[tuple[tuple[str, str, int, bool], ...], bool]:
    """``_import_parts_py`` (in C when built), and whether a name it binds says that
    ``max.nn`` is ModuleV3 (26.1). Import lines repeat across files: cached."""
    parts = _import_parts_py(module, body) if _speedups is None else _speedups.import_parts(module, body)
    statement = body if module is None else f"{module} {body}"
    if not any(word in statement for word in _NN_IS_V3_WORDS):
        return parts, False  # no name it binds can be under one of _NN_IS_V3
    return parts, any(t.startswith(_NN_IS_V3) and any(_under(t, ns) for ns in _NN_IS_V3) for _, t, _, _ in parts)


# --- symbol lookup --------------------------------------------------------------------


class Resolved(NamedTuple):
    """What a qualified name means: ``v2``, ``v3``, ``keep``, ``interop`` or ``none``."""

    kind: str
    code: str | None = None
    message: str = ""


_NONE = Resolved("none")
_KEEP = Resolved("keep")
_V3 = Resolved("v3")


def _under(name: str, prefix: str) -> bool:
    return name.startswith(prefix) and (len(name) == len(prefix) or name[len(prefix)] == ".")


_V3_PREFIXES = tuple(K.V3_NAMESPACES)


def _release_of(name: str) -> str | None:
    if not name.startswith(_V3_PREFIXES):
        return None
    for prefix, release in K.V3_NAMESPACES.items():
        if _under(name, prefix):
            return release
    return None


def _lookup_nn(name: str, parts: list[str], legacy: bool) -> Resolved:
    # Segments before the symbol are modules: known submodules, or any
    # lowercase segment that is not the last one (max.nn.comm.ep.ep_manager.X).
    index = next(
        (i for i, p in enumerate(parts)
         if p not in K.NN_SUBMODULES and (i == len(parts) - 1 or not p.islower())),
        None,
    )
    if index is None:
        return _NONE  # a submodule, not a symbol
    final = parts[index]
    if final not in K.NN_SYMBOLS and not final[:1].isupper():
        return _NONE  # an unknown function or module: no evidence either way
    allowed = K.allowed_max_nn()
    if any(p in allowed for p in parts[:index]):
        return _KEEP  # an attribute of a module the ports import whole (max.nn.kernels)
    if final in allowed:
        if final in K.FLAG_EVEN_IF_ALLOWED:
            flagged = K.NN_SYMBOLS[final]
            return Resolved("keep", flagged.code, _nn_message(final, flagged))
        return _KEEP
    sym = K.NN_SYMBOLS.get(final)
    if sym is None:
        moved = K.gone(name, legacy)
        if moved is not None and moved.code == "MV313":  # an older release's name: say what became of it
            return Resolved("v2", moved.code, moved.message)
        return Resolved("v2", "MV300", f"max.nn.{final} has no migrate-v3 rule: migrate it by hand")
    return Resolved("v2", sym.code, _nn_message(final, sym))


def _nn_message(final: str, sym: K.Symbol) -> str:
    home = f" -> {sym.v3}" if sym.v3 else " (no V3 class)"
    note = f"; {sym.note}" if sym.note else ""
    return f"{final}{home}{note}"


def _lookup_ops(parts: list[str]) -> Resolved:
    if not parts:
        return Resolved("interop", "MV370", "ops module: use max.experimental.functional as F")
    if len(parts) > 1 and parts[-1] in K.GRAPH_KEEP:
        return _KEEP  # a type V3 code keeps, from an ops submodule (ops.resize.InterpolationMode)
    op = ".".join(parts[:2]) if parts[0] in {"allreduce", "reducescatter", "random"} else parts[0]
    if op in K.OPS_COLLECTIVE:
        return Resolved("interop", "MV391", f"ops.{op}: V3 collectives take one distributed Tensor (F.allreduce_sum, F.allgather...)")
    if op.startswith("random."):
        return Resolved("interop", "MV370", f"ops.{op} -> {K.OPS_RANDOM_HOME}.{parts[1]}")
    if op in K.OPS_CHANGED:
        return Resolved("interop", "MV371", f"ops.{op} -> F.{op}: {K.OPS_CHANGED[op]}")
    entry = K.ops_table().get(op)
    if entry is None:
        return Resolved("interop", "MV300", f"ops.{op} is not a max.graph.ops function in max 26.7")
    if not entry["in_functional"]:
        return Resolved("interop", "MV372", f"ops.{op} has no F form: wrap it, F.functional(ops.{op})")
    return Resolved("interop", "MV370", f"ops.{op} -> F.{op}")


#: Every namespace ``lookup`` knows something about (a prefix test: a longer
#: name such as max.nnx goes on to the full test, which rejects it).
_KNOWN_ROOTS = (*K.V3_NAMESPACES, K.V2_NN, K.GRAPH, K.PIPELINES_LIB)


@lru_cache(maxsize=65536)
def lookup(qualified: str, *, nn_is_v3: bool) -> Resolved:
    """Classify one fully qualified name used by a file."""
    if not qualified.startswith(_KNOWN_ROOTS):
        return _NONE  # max.dtype.DType, max.driver...: nothing below names them
    if _release_of(qualified):
        return _V3
    parts = qualified.split(".")
    if _under(qualified, K.V2_LEGACY_NAMESPACE):
        return _lookup_nn(qualified, parts[3:], legacy=True)
    if _under(qualified, K.V2_NN):
        if nn_is_v3:
            return _V3
        return _lookup_nn(qualified, parts[2:], legacy=False)
    if _under(qualified, K.GRAPH):
        rest = parts[2:]
        if rest and rest[0] == "ops":
            return _lookup_ops(rest[1:])
        if not rest:
            return _NONE
        name = rest[-1] if rest[0] in {"type", "value", "weight", "graph", "quantization"} else rest[0]
        sym = K.GRAPH_SYMBOLS.get(name)
        if sym is not None:
            kind = "interop" if name in K.GRAPH_INTEROP else "v2"
            home = f" -> {sym.v3}" if sym.v3 else ""
            note = f" ({sym.note})" if sym.note else ""
            return Resolved(kind, sym.code, f"{name}{home}{note}")
        return _KEEP
    if _under(qualified, K.PIPELINES_LIB):
        name = parts[-1]
        if name in K.PIPELINE_V3:
            return _V3
        sym = K.PIPELINE_SYMBOLS.get(name)
        if sym is not None:
            home = f" -> {sym.v3}" if sym.v3 else ""
            kind = "base" if name in K.PIPELINE_BASE_ONLY else "v2"
            return Resolved(kind, sym.code, f"{name}{home}")
    return _NONE


# --- the scan ----------------------------------------------------------------------------


class Scan(Record):
    """Everything ``classify`` needs from one file."""

    __slots__ = ("v2", "v3", "interop", "release", "findings", "relative_imports", "absolute_arch_imports",
                 "todo_markers")

    def __init__(self) -> None:
        self.v2 = self.v3 = self.interop = False
        self.release: str | None = None
        self.findings: list[Finding] = []
        self.relative_imports: list[tuple[str, int, int]] = []  # (target, line, col)
        self.absolute_arch_imports: list[tuple[str, int, int]] = []
        self.todo_markers = 0


class _Positions:
    """Turns offsets into 1-based (line, col); cheapest when asked in increasing order."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0
        self._line = 1
        self._line_start = 0

    def __call__(self, pos: int) -> tuple[int, int]:
        if pos < self._pos:
            self._pos, self._line, self._line_start = 0, 1, 0
        text = self._text
        self._line += text.count("\n", self._pos, pos)
        self._line_start = text.rfind("\n", 0, pos) + 1
        self._pos = pos
        return self._line, pos - self._line_start + 1


#: Importing any of these means the file follows 26.1, where max.nn was ModuleV3.
_NN_IS_V3 = K.NN_IS_V3
#: Their last parts: a statement that binds a name under one of them spells it.
_NN_IS_V3_WORDS = tuple(namespace.rpartition(".")[2] for namespace in _NN_IS_V3)


def scan_source(text: str) -> Scan:
    """Find the V2 sites of one file's source."""
    result, findings = scan_raw(text)
    result.findings = list(map(finding_of, findings))
    return result


#: ``lookup`` results by nn_is_v3, without lru_cache's keyword-argument key building per call.
_RESOLVED: tuple[dict[str, Resolved], dict[str, Resolved]] = ({}, {})


def _resolve(qualified: str, nn_is_v3: bool) -> Resolved:
    cache = _RESOLVED[nn_is_v3]
    resolved = cache.get(qualified)
    if resolved is None:
        resolved = cache[qualified] = lookup(qualified, nn_is_v3=nn_is_v3)
    return resolved


def _inside(starts: list[int], ends: list[int], pos: int) -> bool:
    """``_Spans.contains`` on its two lists."""
    i = bisect_right(starts, pos) - 1
    return i >= 0 and pos < ends[i]


def scan_raw(text: str) -> tuple[Scan, list[tuple[int, int, str, str]]]:
    """``scan_source`` with the findings as sorted (line, col, code, message) tuples.

    ``check`` ships results between processes as plain tuples; building a
    Finding for each only to take it apart again is a tenth of the scan.
    """
    result = Scan()
    findings: list[tuple[int, int, str, str]] = []
    if "max" not in text and "from ." not in text and "import ." not in text:
        return result, findings
    strings = _triple_quoted(text)
    s_starts, s_ends = strings.starts, strings.ends
    import_spans = _Spans()
    if _speedups is not None:
        statements = _speedups.import_statements(text, s_starts, s_ends)
    else:
        statements = _import_statements(text, strings)
    # 26.1 put ModuleV3 at max.nn and V2 at max.nn.legacy: that changes what every import means.
    nn_is_v3 = any([_import_parts(module, body)[1] for _, _, module, body, _ in statements])
    position = _Positions(text)
    raw: list[tuple[int, str, str]] = []  # (pos, code, message)
    aliases: dict[str, str] = {}
    effects = _EFFECTS[nn_is_v3]
    located: list[tuple[bool, str, int]] = []  # (relative?, target, offset) of imports that may name other packages
    imported: list[tuple[str, int, str]] = []  # (local, offset, target) of the imports with an MV310 finding
    for line_start, end, module, body, base in statements:
        import_spans.starts.append(line_start)
        import_spans.ends.append(end)
        for local, target, off, star in _import_parts(module, body)[0]:
            at = base + off
            if target.startswith("."):
                located.append((True, target, at))
                continue
            effect = effects.get(target)
            if effect is None:
                effect = effects[target] = _import_effect(target, nn_is_v3)
            if effect.architecture:
                located.append((False, target, at))
            if effect.gone is not None:
                raw.append((at, *effect.gone))
            if star:
                resolved = _resolve(target + ".*", nn_is_v3)
                if resolved.kind == "v3":
                    result.v3 = True
                    result.release = result.release or _release_of(target)
                elif _under(target, K.V2_NN) or _under(target, K.GRAPH):
                    result.v2 = True
                    raw.append((at, "MV302", f"from {target} import *: import the names you use"))
                continue
            aliases[local] = target
            if effect.v3:
                result.v3 = True
            if effect.release is not None:
                result.release = _older(result.release, effect.release)
            if effect.mv311 is not None:
                raw.append((at, "MV311", effect.mv311))
            if effect.v2:
                result.v2 = True
            elif effect.interop:
                result.interop = True
            if effect.mv310 is not None:
                raw.append((at, "MV310", f"import {local}: {effect.mv310}"))
                imported.append((local, at, target))
    if located:
        starts = [at for _, _, at in located]
        places = _speedups.line_cols(text, starts) if _speedups is not None else [position(at) for at in starts]
        for (relative, target, _), (line, col) in zip(located, places, strict=True):
            (result.relative_imports if relative else result.absolute_arch_imports).append((target, line, col))

    if imported:
        used_by: dict[str, set[str]] = {local: set() for local, _, _ in imported}
        _scan_uses(text, strings, import_spans, aliases, nn_is_v3, result, raw, used_by)
        raw = _imports_apply_keeps(text, raw, imported, used_by)
    else:
        _scan_uses(text, strings, import_spans, aliases, nn_is_v3, result, raw, _NO_USES)
    if result.v2:
        _scan_classes(text, strings, aliases, nn_is_v3, raw)
        if _speedups is not None:
            offsets = _speedups.find_all(text, _V2_NEEDLES)
        else:
            offsets = _find_all_py(text, _V2_NEEDLES)
        for (search, literals, pattern, code, message), sites in zip(_V2_SEARCHES, offsets, strict=True):
            pmatch = pattern.match
            for found in sites:
                for literal, back in literals:
                    pos = found - back
                    if (
                        pos >= 0
                        and (literal is search or text.startswith(literal, pos))
                        and pmatch(text, pos)
                        and (literal[0] != "." or _after_value(text, pos))
                        and not _inside(s_starts, s_ends, pos)
                        and not _in_line_string_or_comment(text, pos)
                    ):
                        raw.append((pos, code, message))
    if result.interop and not result.v3:
        result.v2 = True  # graph values without ModuleV3: V2 graph code
    if not result.v2:  # kernel interop is fine in ModuleV3 code; older releases' names are not
        raw = [r for r in raw if r[1] in RELEASE_CODES]
    if not raw and _TODO not in text:
        return result, findings
    result.todo_markers = text.count(_TODO)
    bridged = set(_bridged_lines(text))
    if bridged:
        raw = [r for r in raw if not (position(r[0])[0] in bridged and _bridged_site(text, *r))]
    suppress = _suppressions(text, position)
    raw.sort()
    if _speedups is not None and not suppress:
        return result, _speedups.located(text, raw)
    return result, _located_py(text, raw, suppress)


def _located_py(
    text: str, raw: list[tuple[int, str, str]], suppress: dict[int, frozenset[str] | None]
) -> list[tuple[int, int, str, str]]:
    """Sorted (offset, code, message) sites -> sorted (line, col, code, message) findings,
    one per rule and site, without the suppressed ones."""
    findings: list[tuple[int, int, str, str]] = []
    seen: set[tuple[int, int, str]] = set()
    # The offsets come sorted, so lines are counted once.
    line, line_start, last = 1, 0, 0
    count, rfind = text.count, text.rfind
    for pos, code, message in raw:
        if pos != last:
            line += count("\n", last, pos)
            line_start = rfind("\n", 0, pos) + 1
            last = pos
        key = (line, pos - line_start + 1, code)
        if key in seen or (suppress and _suppressed(suppress, line, code)):
            continue
        seen.add(key)
        findings.append((line, key[1], code, message))
    findings.sort()
    return findings


class _ImportEffect(NamedTuple):
    """What importing one qualified name does to a file's scan (the same wherever it is imported)."""

    architecture: bool  # a max.pipelines.architectures module: maybe another package's code
    v2: bool
    v3: bool
    interop: bool
    release: str | None  # the release whose API it belongs to, when it tells
    mv311: str | None  # an old-namespace finding's message
    mv310: str | None  # an import finding's message, after "import <local name>: "
    gone: tuple[str, str] | None  # (MV312 or MV313, message): a name max 26.7 renamed or no longer has


#: The codes about older releases' names: findings in any file, V2 or not.
RELEASE_CODES = frozenset({"MV311", "MV312", "MV313"})
_NO_EFFECT = _ImportEffect(False, False, False, False, None, None, None, None)
#: ``_import_effect`` results by nn_is_v3.
_EFFECTS: tuple[dict[str, _ImportEffect], dict[str, _ImportEffect]] = ({}, {})


def _import_effect(target: str, nn_is_v3: bool) -> _ImportEffect:
    resolved = _resolve(target, nn_is_v3)
    moved = K.gone(target, nn_is_v3) if target.startswith("max.") else None
    gone = None if moved is None or moved.code == "MV311" else (moved.code, moved.message)
    if resolved is _NONE and not target.startswith((K.V2_LEGACY_NAMESPACE, K.ARCHITECTURES)):
        # most imports: a name none of the rules is about
        return _NO_EFFECT if gone is None else _NO_EFFECT._replace(gone=gone)
    release: str | None = None
    mv311 = mv310 = None
    if resolved.kind == "v3":
        release = _release_of(target) or ("26.1" if nn_is_v3 else None)
        if release in {"25.6/25.7", "26.1"}:
            mv311 = f"{target}: the max 26.7 home is max.experimental"
    elif _under(target, K.V2_LEGACY_NAMESPACE):
        release = "26.1"
        mv311 = f"{target}: max.nn.legacy is the 26.1 home of the V2 API"
    if gone is not None and moved is not None and mv311 is not None:
        mv311 = None  # its namespace moved, but max 26.7 has no such name there: MV312/MV313 says so
    if resolved.kind == "v2" and resolved.code in {"MV320", "MV330", "MV340", "MV350", "MV351", "MV360"}:
        mv310 = resolved.message
    elif resolved.kind == "interop" and resolved.code in {"MV330", "MV370"}:
        mv310 = resolved.message
    return _ImportEffect(
        _under(target, K.ARCHITECTURES), resolved.kind == "v2", resolved.kind == "v3",
        resolved.kind == "interop", release, mv311, mv310, gone,
    )


def _older(current: str | None, new: str | None) -> str | None:
    if current is None:
        return new
    if new is None or current == new:
        return current
    order = ["25.6/25.7", "26.1", "26.7"]
    return current if order.index(current) <= order.index(new) else new


_DOTTED = re.compile(r"(?:[ \t]*\.[ \t]*[A-Za-z_]\w*)*")
#: a line up to a name in a class statement's bases (``class X(Base, `` before ``Module``)
_CLASS_BASES = re.compile(r"[ \t]*class[ \t]+\w+[ \t]*\([^)]*$")


def _uses(text: str, names: tuple[str, ...]) -> list[tuple[int, int]]:
    """(start, end) of each dotted use of ``names``, found with str.find.

    One find loop per name beats compiling a regex alternation per file
    (files import different names, so such patterns rarely repeat).
    """
    spans: list[tuple[int, int]] = []
    find, dotted, size_of_text = text.find, _DOTTED.match, len(text)
    for name in names:
        size = len(name)
        start = find(name)
        while start >= 0:
            end = start + size
            if not (
                (start and (text[start - 1].isalnum() or text[start - 1] in "_."))
                or (end < size_of_text and (text[end].isalnum() or text[end] == "_"))
            ):
                m = dotted(text, end)
                spans.append((start, m.end() if m else end))
            start = find(name, end)
    spans.sort()
    return spans


_MODULE_ROOTS = ("max.nn", "max.graph", "max.pipelines")


def _worth_scanning(target: str, nn_is_v3: bool) -> bool:
    """Whether uses of a name bound to ``target`` can be V2 sites.

    ModuleV3 names already counted at their import, and names V3 keeps
    (``DType``, ``DeviceRef``, ``KVCacheParams``...) are most of the uses in a
    file, so leaving them out of the search is most of check's speed.
    """
    if not target.startswith("max"):
        return False
    resolved = lookup(target, nn_is_v3=nn_is_v3)
    if resolved.kind in {"v2", "interop", "base"} or (resolved.kind == "keep" and resolved.code):
        return True
    if resolved.kind == "none" and (target == "max" or target.startswith(_MODULE_ROOTS)):
        return not target.rsplit(".", 1)[-1][:1].isupper()  # a module: its attributes may be V2
    return False


_WORTH: tuple[dict[str, bool], dict[str, bool]] = ({}, {})
#: Names the C ``uses`` can look for: made of the characters a word run is made of.
_WORDY = re.compile(r"\w+")


def _code_use_groups(
    text: str, names: tuple[str, ...], strings: _Spans, import_spans: _Spans
) -> dict[str, list[tuple[int, int]]]:
    """``_code_uses`` grouped by the text of the dotted use, in order of first use."""
    groups: dict[str, list[tuple[int, int]]] = {}
    for start, end in _code_uses(text, names, strings, import_spans):
        groups.setdefault(text[start:end], []).append((start, end))
    return groups


def _code_uses(text: str, names: tuple[str, ...], strings: _Spans, import_spans: _Spans) -> list[tuple[int, int]]:
    """``_uses`` outside import statements, triple-quoted strings, one-line strings and comments."""
    s_starts, s_ends = strings.starts, strings.ends
    i_starts, i_ends = import_spans.starts, import_spans.ends
    return [
        (start, end)
        for start, end in _uses(text, names)
        if not (
            _inside(i_starts, i_ends, start)
            or _inside(s_starts, s_ends, start)
            or _in_line_string_or_comment(text, start)
        )
    ]


_NO_USES: dict[str, set[str]] = {}
#: ``F.functional(`` right before a use of ``ops.X``: wrapped, the V3 way.
_WRAPPED = re.compile(r"functional[ \t]*\([ \t]*$")


def _scan_uses(
    text: str,
    strings: _Spans,
    import_spans: _Spans,
    aliases: dict[str, str],
    nn_is_v3: bool,
    result: Scan,
    raw: list[tuple[int, str, str]],
    used_by: dict[str, set[str]],
) -> None:
    """Findings at the uses of imported names; ``used_by``: for the local names it holds,
    the rule codes of their uses."""
    worth = _WORTH[nn_is_v3]
    names = []
    for local, target in aliases.items():
        keep = worth.get(target)
        if keep is None:
            keep = worth[target] = _worth_scanning(target, nn_is_v3)
        if keep:
            names.append(local)
    if not names:
        return
    relevant = tuple(sorted(names))
    if _speedups is not None and all(_WORDY.fullmatch(n) for n in relevant):
        groups = _speedups.use_groups(
            text, relevant, strings.starts, strings.ends, import_spans.starts, import_spans.ends
        )
    else:
        groups = _code_use_groups(text, relevant, strings, import_spans)
    # One file uses the same few dotted names many times: resolve each once.
    for dotted, spans in groups.items():
        name = dotted
        if " " in name or "\t" in name:
            name = _BLANKS.sub("", name)
        head, _, rest = name.partition(".")
        resolved = _resolve(aliases[head] + (f".{rest}" if rest else ""), nn_is_v3)
        noted = used_by.get(head)
        if noted is not None:
            noted.add("")  # used at all
            before = len(raw)
        if resolved.kind == "base" or resolved.code in _CONSTRUCTOR_RULES:
            for start, end in spans:
                _note_positional_use(text, start, end, resolved, rest, result, raw)
            if noted is not None:
                noted.update(r[1] for r in raw[before:])
            continue
        kind, code = resolved.kind, resolved.code
        _mark(result, kind)
        if code == "MV330":  # a graph value type: a call or an attribute of it is kernel interop, not a type
            _note_value_type_uses(text, spans, rest, resolved.message, raw)
        elif code == "MV371" and kind == "interop" and rest and rest.rpartition(".")[2] in K.OPS_CHANGED:
            _note_changed_op_calls(text, spans, rest.rpartition(".")[2], resolved.message, raw)
        elif code is not None and not (kind == "interop" and not rest and code == "MV370"):
            message = resolved.message
            if code == "MV372":  # F.functional(ops.X) is already the V3 form
                spans = [span for span in spans if not _WRAPPED.search(text, max(0, span[0] - 16), span[0])]
            elif code == "MV320":  # a subclass's base is the interface to migrate; `m: Module` is the import's (MV310)
                spans = [span for span in spans if _CLASS_BASES.match(text, text.rfind("\n", 0, span[0]) + 1, span[0])]
            raw.extend([(start, code, message) for start, _ in spans])
        if noted is not None:
            noted.update(r[1] for r in raw[before:])


#: ``__all__ = [...]`` (or a tuple, or ``+=``): the names a module re-exports.
_ALL = re.compile(r"^__all__[ \t]*(?::[^=\n]*)?\+?=[ \t]*[\[(]([^\])]*)[\])]", re.M)
_QUOTED = re.compile(r"[\"']([A-Za-z_]\w*)[\"']")


def _imports_apply_keeps(
    text: str, raw: list[tuple[int, str, str]], imported: list[tuple[str, int, str]], used_by: dict[str, set[str]]
) -> list[tuple[int, str, str]]:
    """``raw`` without the MV310 findings of imports that ``apply`` keeps on purpose: a
    ``max.graph`` name still used where a person has work to do (``TensorValue(x)``,
    ``F.functional(ops.X)``, a collective), and a name only re-exported in ``__all__``."""
    exported: set[str] | None = None
    drop = set()
    for local, at, target in imported:
        codes = used_by[local]
        if not codes:
            if exported is None:
                exported = set()
                if "__all__" in text:
                    for m in _ALL.finditer(text):
                        exported.update(_QUOTED.findall(m.group(1)))
            if local in exported:
                drop.add(at)
        elif target.startswith(K.GRAPH) and any(code and FIX_LABEL[code] != "auto" for code in codes):
            drop.add(at)
    return [r for r in raw if not (r[1] == "MV310" and r[0] in drop)] if drop else raw


def _note_value_type_uses(
    text: str, spans: list[tuple[int, int]], rest: str, message: str, raw: list[tuple[int, str, str]]
) -> None:
    """``TensorValue`` as a type becomes ``Tensor`` (MV330); ``TensorValue(x)`` and
    ``TensorValue.attr`` convert graph values, which apply leaves to a person (MV373)."""
    interop = None
    for start, end in spans:
        after = text[end : end + 1]
        if rest or after == "(" or (after in " \t" and _CALL.match(text, end)):
            if interop is None:
                symbol = message.split(" ", 1)[0]
                interop = f"{symbol}(...) converts graph values: in V3 code this is kernel interop only"
            raw.append((start, "MV373", interop))
        else:
            raw.append((start, "MV330", message))


def _note_changed_op_calls(
    text: str, spans: list[tuple[int, int]], op: str, message: str, raw: list[tuple[int, str, str]]
) -> None:
    """An op whose F form differs for some arguments: each call gets the code apply gives it
    (``knowledge.symbols.op_call_code``); a use that is not a readable call keeps MV371."""
    for start, end in spans:
        args = _call_arguments(text, end)
        code = "MV371" if args is None else K.op_call_code(op, *args)
        raw.append((start, code, message if code == "MV371" else f"ops.{op} -> F.{op}"))


def _call_arguments(text: str, end: int) -> tuple[list[str], dict[str, str]] | None:
    """(positional, keyword) argument source of the call that starts at ``text[end:]``."""
    import ast  # noqa: PLC0415 - only files calling ops.max/min/split pay for it

    call = _CALL.match(text, end)
    if call is None:
        return None
    opening, close = call.end() - 1, call.end() - 1
    for _ in range(64):  # the first ")" that closes a valid argument list
        close = text.find(")", close + 1)
        if close < 0:
            return None
        try:
            node = ast.parse("f" + text[opening : close + 1], mode="eval").body
        except SyntaxError:
            continue
        assert isinstance(node, ast.Call)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return None
        return [ast.unparse(a) for a in node.args], {k.arg: ast.unparse(k.value) for k in node.keywords if k.arg}
    return None


def _mark(result: Scan, kind: str) -> None:
    """The file uses a name of this kind."""
    if kind == "v3":
        result.v3 = True
    elif kind == "v2":
        result.v2 = True
    elif kind == "interop":
        result.interop = True


def _note_positional_use(
    text: str, start: int, end: int, resolved: Resolved, rest: str, result: Scan, raw: list[tuple[int, str, str]]
) -> None:
    """One use of a name whose meaning depends on where it stands: a common
    pipeline base (only deriving from it counts) or a V2 layer (a call, or a
    subclass that a person ports)."""
    if resolved.kind == "base":
        if not _in_class_header(text, start):
            return  # a common base used as a type: fine in V3 code
        # Deriving from it makes a V2 pipeline model unless the file is ModuleV3
        # (a V3 model may derive from PipelineModelWithKVCache directly).
        resolved = Resolved("interop", resolved.code, resolved.message)
    _mark(result, resolved.kind)
    code = resolved.code
    if code in _CONSTRUCTOR_RULES:
        if _in_class_header(text, start):
            # A subclass of a V2 layer: apply maps its super().__init__ call,
            # unless its __init__ has none or passes */**.
            if _maps_super_init(text, start):
                resolved = Resolved("v2", "MV344", f"subclass of {resolved.message}: its super().__init__(...) follows the V3 map")
            else:
                resolved = Resolved("v2", "MV345", f"subclass of {resolved.message}: its __init__ passes */** or no "
                                    "arguments to super().__init__(...): make them follow the V3 class")
            code = resolved.code
        else:
            call = _CALL.match(text, end)
            if call is None:
                return  # an annotation or isinstance(): the import rewrite covers it
            if code == "MV340" and _passes_star_args(text, call.end() - 1):
                symbol = resolved.message.split(" ", 1)[0]
                resolved = Resolved("v2", "MV342", f"{symbol}(...) uses */** or unknown arguments: rewrite it for V3 by hand")
                code = resolved.code
    if code is not None and not (resolved.kind == "interop" and not rest and code == "MV370"):
        raw.append((start, code, resolved.message))


#: The characters that matter when walking a call's arguments (the rest is skipped at C speed).
_ARG_MARKS = re.compile(r"[()\[\]{}'\"#,*]")


def _passes_star_args(text: str, paren: int) -> bool:
    """Whether the call whose ``(`` is at ``paren`` passes ``*args`` or ``**kwargs``: the
    layers codemod cannot bind those to the V2 signature, so a person maps them."""
    close = text.find(")", paren)
    head = text[paren + 1 : close] if close >= 0 else ""
    if close >= 0 and not any(c in head for c in "*(\"'#"):
        return False  # the common case: a flat call without a star
    depth, last = 0, paren  # last: the offset of the last "(" or "," at depth 1
    pos, size = paren, len(text)
    while pos < size:
        m = _ARG_MARKS.search(text, pos)
        if m is None:
            return False
        c, at = m.group(), m.start()
        pos = at + 1
        if c in "([{":
            depth += 1
            if depth == 1:
                last = at
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return False
        elif c == "," and depth == 1:
            last = at
        elif c == "*" and depth == 1:
            if not text[last + 1 : at].strip():
                return True
        elif c in "'\"":
            end = text.find(c, pos)
            while end > 0 and text[end - 1] == "\\":
                end = text.find(c, end + 1)
            pos = size if end < 0 else end + 1
        elif c == "#":
            end = text.find("\n", pos)
            pos = size if end < 0 else end
    return False


_SUPER_INIT = re.compile(r"super\(\s*(?:\w+\s*,\s*\w+\s*)?\)\s*\.\s*__init__\s*\(")


def _maps_super_init(text: str, header: int) -> bool:
    """Whether the class whose header holds ``header`` has no ``__init__``, or one whose
    ``super().__init__(...)`` passes no ``*``/``**`` (what the layers codemod maps)."""
    line_start = text.rfind("\n", 0, header) + 1
    indent = len(text) - len(text[line_start:].lstrip(" \t")) - line_start
    body_end = len(text)
    for m in re.finditer(r"\n([ \t]*)(?=[^ \t\n#])", text[header:]):
        if len(m.group(1)) <= indent and m.start() > 0:
            body_end = header + m.start()
            break
    body = text[header:body_end]
    if "def __init__" not in body:
        return True
    call = _SUPER_INIT.search(body)
    return call is not None and not _passes_star_args(text, header + call.end() - 1)


def _in_class_header(text: str, pos: int) -> bool:
    line_start = text.rfind("\n", 0, pos) + 1
    return _CLASS_HEAD.match(text, line_start, pos) is not None


def _scan_classes(
    text: str, strings: _Spans, aliases: dict[str, str], nn_is_v3: bool, raw: list[tuple[int, str, str]]
) -> None:
    """``__call__`` and a missing ``super().__init__()`` in V2 Module subclasses."""
    v2_classes: set[str] = set()
    for m in _line_statements(text, "class", _CLASS):
        if strings.contains(m.start()) or not m.group(3):
            continue
        bases = [b.strip() for b in m.group(3).split(",")]
        if not any(_is_v2_module(b, aliases, nn_is_v3) or b in v2_classes for b in bases):
            continue
        v2_classes.add(m.group(2))
        indent = len(m.group(1).expandtabs())
        start = m.end()
        end = _block_end(text, start, indent, strings)
        has_super = text.find("__init__", start, end) >= 0 and (
            _SUPER_INIT.search(text, start, end) is not None or _BASE_INIT.search(text, start, end) is not None
        )
        body_indent: int | None = None
        for d in _defs(text, start, end):
            if strings.contains(d.start()):
                continue
            depth = len(d.group(1).expandtabs())
            body_indent = depth if body_indent is None else body_indent
            if depth != body_indent:
                continue
            pos = d.start() + len(d.group(1))
            if d.group(2) == "__call__":
                raw.append((pos, "MV321", f"{m.group(2)}.__call__ -> forward"))
            elif not has_super:
                raw.append((pos, "MV322", f"{m.group(2)}.__init__ does not call super().__init__()"))


def _defs(text: str, start: int, end: int) -> list[re.Match[str]]:
    """``list(_DEF.finditer(text, start, end))``, from the names it needs.

    The regex alone tries every offset of every class body; "__call__" and
    "__init__" are rare, so find them and match _DEF at the start of their line.
    """
    lines: set[int] = set()
    for name in ("__call__", "__init__"):
        pos = text.find(name, start, end)
        while pos >= 0:
            line = text.rfind("\n", 0, pos) + 1
            if line >= start and (line > 0 or start == 0):
                lines.add(line)
            pos = text.find(name, pos + 8, end)
    out = []
    for line in sorted(lines):
        d = _DEF.match(text, line, end)
        if d is not None:
            out.append(d)
    return out


def _is_v2_module(base: str, aliases: dict[str, str], nn_is_v3: bool) -> bool:
    head, _, rest = base.partition(".")
    target = aliases.get(head)
    if target is None:
        return False
    qualified = target + (f".{rest}" if rest else "")
    return _resolve(qualified, nn_is_v3).code == "MV320"


_DEDENT: dict[int, re.Pattern[str]] = {}


def _block_end(text: str, start: int, indent: int, strings: _Spans) -> int:
    """Offset where the block opened before ``start`` ends (first dedented code line)."""
    pattern = _DEDENT.get(indent)
    if pattern is None:
        pattern = _DEDENT[indent] = re.compile(rf"\n[ \t]{{0,{indent}}}(?=[^ \t\r\n#])")
    pos = start
    while True:
        m = pattern.search(text, pos)
        if m is None:
            return len(text)
        inside = strings.end_after(m.start())
        if inside is None:
            return m.start()
        pos = inside


def _suppressions(text: str, position: _Positions) -> dict[int, frozenset[str] | None]:
    """Line -> suppressed code prefixes (None: all); line 0 is the whole file."""
    out: dict[int, frozenset[str] | None] = {}
    if "migrate-v3:" not in text:
        return out
    header_end = _header_end(text)
    for m in _SUPPRESS.finditer(text):
        codes = frozenset(c.strip() for c in m.group(1).split(",") if c.strip()) if m.group(1) else None
        line = 0 if m.start() < header_end else position(m.start())[0]
        previous = out.get(line, frozenset())
        out[line] = None if codes is None or previous is None else previous | codes
    return out


#: the V2 names a bridge keeps (MV382 findings whose message is the name)
_BRIDGED_NAMES = frozenset({"GraphSpec", "compile_graphs", "init_graphs"})


def _bridged_site(text: str, pos: int, code: str, message: str) -> bool:
    """A finding in a bridged class or the bridge that is the bridge itself: the V2 pipeline base,
    V2 GraphSpecs and their compile, and ``load_state_dict`` (V3 modules have it too)."""
    return code == "MV383" or (code == "MV382" and (message in _BRIDGED_NAMES or text.startswith(".load_state_dict", pos)))


def _bridged_lines(text: str) -> list[int]:
    """Lines of the top-level ``def load_graph_specs`` (the port ``apply`` adds) and of each class
    that calls it: V2 GraphSpecs and the V2 pipeline base stay there by design. (Only a file that
    names it is parsed.)"""
    if f"{_BRIDGE}(" not in text:
        return []
    import ast  # noqa: PLC0415 - only bridged files pay for it

    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    lines: list[int] = []
    for node in tree.body:
        bridged = (isinstance(node, ast.FunctionDef) and node.name == _BRIDGE) or (
            isinstance(node, ast.ClassDef) and any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == _BRIDGE for n in ast.walk(node)))
        if bridged:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])  # type: ignore[attr-defined]
            lines.extend(range(first, (node.end_lineno or node.lineno) + 1))
    return lines


def _header_end(text: str) -> int:
    """Offset of the first line that is neither blank nor a comment."""
    m = re.search(r"^[ \t]*[^ \t\r\n#]", text, re.M)
    return m.start() if m else len(text)


def _suppressed(suppress: dict[int, frozenset[str] | None], line: int, code: str) -> bool:
    for key in (0, line):
        if key in suppress:
            codes = suppress[key]
            if codes is None or any(code.startswith(c) for c in codes):
                return True
    return False


def syntax_error(text: str, path: str) -> str | None:
    """One line describing why ``text`` does not parse, or None.

    The symbol-table pass parses with the same parser but skips building
    Python objects for every node, so it is the cheap test (about 40% less
    time); only a source it rejects is parsed again with ``ast`` for the
    message, and it rejects a few sources that ``ast`` accepts (``nonlocal``
    at module level), which stay accepted here.
    """
    try:
        symtable(text, path, "exec")
    except Exception:  # noqa: BLE001 - any doubt: ask ast, which decides
        pass
    else:
        return None
    import ast

    try:
        compile(text, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return f"syntax error at line {exc.lineno}: {exc.msg}"
    except ValueError as exc:  # e.g. NUL bytes
        return f"cannot parse: {exc}"
    return None
