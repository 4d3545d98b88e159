"""Check results -> text, JSON, GitHub annotations or SARIF.

Plain lines (``path:line:col: CODE [fix] message``) are the stable interface;
a terminal also gets a rich summary table. rich is imported only then, so a
pre-commit run or a pipe pays nothing for it.

JSON and SARIF are written by ``_dumps``, which produces exactly what
``json.dump(data, out, indent=1)`` does (the standard library's C encoder
does not indent, and its Python one costs ten times more on 16,000 findings).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import chain
from operator import itemgetter
from typing import IO, Any

from migrate_v3 import __version__
from migrate_v3.check import CheckReport
from migrate_v3.findings import FIX_LABEL, FileResult, plain_lines
from migrate_v3.rules import RULES, Fix

FORMATS = ("text", "json", "github", "sarif")


def _float(o: float) -> str:
    if o != o:
        return "NaN"
    if o == float("inf"):
        return "Infinity"
    if o == -float("inf"):
        return "-Infinity"
    return float.__repr__(o)


class _NotPlain(Exception):
    """A value ``_dumps`` does not spell (a subclass, a non-string key): json.dump's job."""


#: A leaf of a ``_Filled`` shape.
_SLOT = "\x00slot\x00"


class _Filled:
    """``shape`` (dicts and lists whose leaves are all ``_SLOT``) with ``values`` in its leaves.

    16,000 findings share a handful of shapes, so each shape is spelled once
    per indentation, as a %-template, and every finding is one ``%``.
    """

    __slots__ = ("shape", "values")

    def __init__(self, shape: Any, values: tuple[Any, ...]) -> None:
        self.shape = shape
        self.values = values

    def plain(self) -> Any:
        """The value itself, for json.dump."""
        leaves = iter(self.values)

        def fill(o: Any) -> Any:
            if type(o) is dict:
                return {k: fill(v) for k, v in o.items()}
            if type(o) is list:
                return [fill(v) for v in o]
            return next(leaves)

        return fill(self.shape)


_TEMPLATES: dict[tuple[int, str], str] = {}


def _leaf(v: Any, encode_basestring_ascii: Callable[[str], str]) -> str:
    t = type(v)
    if t is str:
        return encode_basestring_ascii(v)
    if t is int:
        return int.__repr__(v)
    if t is list or t is tuple or t is dict or t is _Filled:
        raise _NotPlain(v)
    out: list[str] = []
    _emit(v, "", out, encode_basestring_ascii)
    return out[0]


def _emit(o: Any, pad: str, out: list[str], encode_basestring_ascii: Callable[[str], str]) -> None:
    """Append ``json.dumps(o, indent=1)`` to ``out`` in pieces (joined once: no quadratic copying).

    Spells dicts with str keys, lists, tuples, str, int, float, bool and None.
    """
    t = type(o)
    if t is _Filled:
        key = (id(o.shape), pad)
        template = _TEMPLATES.get(key)
        if template is None:
            parts: list[str] = []
            _emit(o.shape, pad, parts, encode_basestring_ascii)
            template = "".join(parts).replace("%", "%%").replace(encode_basestring_ascii(_SLOT), "%s")
            _TEMPLATES[key] = template
        out.append(template % tuple([
            encode_basestring_ascii(v) if type(v) is str
            else int.__repr__(v) if type(v) is int
            else _leaf(v, encode_basestring_ascii)
            for v in o.values
        ]))
    elif t is str:
        out.append(encode_basestring_ascii(o))
    elif t is dict:
        if not o:
            out.append("{}")
            return
        inner = pad + " "
        sep = "{" + inner
        for k, v in o.items():
            if type(k) is not str:
                raise _NotPlain(k)
            tv = type(v)
            if tv is str:
                out.append(f"{sep}{encode_basestring_ascii(k)}: {encode_basestring_ascii(v)}")
            elif tv is int:
                out.append(f"{sep}{encode_basestring_ascii(k)}: {int.__repr__(v)}")
            else:
                out.append(f"{sep}{encode_basestring_ascii(k)}: ")
                _emit(v, inner, out, encode_basestring_ascii)
            sep = "," + inner
        out.append(pad + "}")
    elif t is list or t is tuple:
        if not o:
            out.append("[]")
            return
        inner = pad + " "
        sep = "[" + inner
        for v in o:
            out.append(sep)
            _emit(v, inner, out, encode_basestring_ascii)
            sep = "," + inner
        out.append(pad + "]")
    elif o is None:
        out.append("null")
    elif o is True:
        out.append("true")
    elif o is False:
        out.append("false")
    elif t is int:
        out.append(int.__repr__(o))
    elif t is float:
        out.append(_float(o))
    else:
        raise _NotPlain(o)


def _dumps(o: Any, encode_basestring_ascii: Callable[[str], str]) -> str:
    out: list[str] = []
    _emit(o, "\n", out, encode_basestring_ascii)
    return "".join(out)


def _write_json(data: Any, out: IO[str]) -> None:
    from json.encoder import encode_basestring_ascii

    try:
        text = _dumps(data, encode_basestring_ascii)
    except (_NotPlain, RecursionError):
        import json

        json.dump(data, out, indent=1, default=lambda o: o.plain() if type(o) is _Filled else o)
        out.write("\n")
        return
    out.write(text + "\n")


def summary(report: CheckReport) -> dict[str, Any]:
    fixes: Counter[str] = Counter()
    codes: Counter[str] = Counter(map(itemgetter(2), chain.from_iterable(f.findings for f in report.files)))
    for code, count in codes.items():
        fixes[FIX_LABEL[code]] += count
    return {
        "files": len(report.files),
        "kinds": report.kinds(),
        "findings": report.findings_count,
        "by_fix": {k.value: fixes.get(k.value, 0) for k in Fix},
        "by_code": dict(sorted(codes.items())),
        "errors": len(report.errors),
        "depends_on_v2": sorted({d for f in report.files for d in f.depends_on}),
    }


def _summary_line(s: dict[str, Any]) -> str:
    kinds = ", ".join(f"{k} {s['kinds'].get(k, 0)}" for k in ("v2", "mixed", "v3", "neutral"))
    fixes = ", ".join(f"{k} {v}" for k, v in s["by_fix"].items())
    return (
        f"Checked {s['files']} files ({kinds}): {s['findings']} findings ({fixes}); "
        f"{s['errors']} errors."
    )


def write_text(report: CheckReport, out: IO[str], *, terminal: bool) -> None:
    s = summary(report)
    if not terminal:
        lines = [f.text if f.text is not None else plain_lines(f.path, f.findings) for f in report.files]
        lines.append(_summary_line(s) + "\n")
        out.writelines(lines)  # not one big join: 3 MB of text would be built, then encoded whole
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out, highlight=False)
    for f in report.files:
        for x in f.findings:
            style = {"auto": "green", "unsafe": "yellow", "manual": "red"}[x.fix.value]
            console.print(
                f"[bold]{f.path}[/]:{x.line}:{x.col}: [{style}]{x.code}[/] [{x.fix.value}] {x.message}",
                soft_wrap=True,
                markup=True,
            )
    table = Table(title="migrate-v3 check")
    table.add_column("kind")
    table.add_column("files", justify="right")
    for kind in ("v2", "mixed", "v3", "neutral"):
        table.add_row(kind, str(s["kinds"].get(kind, 0)))
    codes = Table(title="findings by rule")
    for column in ("code", "name", "fix", "count"):
        codes.add_column(column, justify="right" if column == "count" else "left")
    for code, count in s["by_code"].items():
        rule = RULES[code]
        codes.add_row(code, rule.name, rule.fix.value, str(count))
    console.print(table)
    if s["by_code"]:
        console.print(codes)
    if s["depends_on_v2"]:
        console.print("depends on V2 packages: " + ", ".join(s["depends_on_v2"]))
    console.print(_summary_line(s))


#: One finding in ``FileResult.to_json()`` (tests/test_check_speed_output.py keeps the two equal).
_FINDING = {"line": _SLOT, "col": _SLOT, "code": _SLOT, "message": _SLOT, "fix": _SLOT}


def _file_json(f: FileResult) -> dict[str, Any]:
    """``f.to_json()``, its findings as ``_Filled`` values."""
    return {
        "path": f.path,
        "kind": f.kind,
        "release": f.release,
        "findings": [
            _Filled(_FINDING, (x.line, x.col, x.code, x.message, FIX_LABEL[x.code]))
            for x in sorted(f.findings)
        ],
        "depends_on": list(f.depends_on),
        "error": f.error,
    }


def write_json(report: CheckReport, out: IO[str]) -> None:
    data = {
        "tool": "migrate-v3",
        "version": __version__,
        "summary": summary(report),
        "files": [_file_json(f) for f in report.files],
        "errors": [{"path": p, "error": e} for p, e in report.errors],
    }
    _write_json(data, out)


def _gh_escape(text: str, *, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def write_github(report: CheckReport, out: IO[str]) -> None:
    for f in report.files:
        for x in f.findings:
            fix = FIX_LABEL[x.code]
            level = "error" if fix == Fix.MANUAL.value else "warning"
            out.write(
                f"::{level} file={_gh_escape(f.path, prop=True)},line={x.line},col={x.col},"
                f"title={x.code}::{_gh_escape(f'{x.code} [{fix}] {x.message}')}\n"
            )
    for path, error in report.errors:
        out.write(f"::error file={_gh_escape(path, prop=True)}::{_gh_escape(error)}\n")


#: One SARIF result: ruleId, ruleIndex, level, message text, uri, startLine, startColumn.
_SARIF_RESULT = {
    "ruleId": _SLOT,
    "ruleIndex": _SLOT,
    "level": _SLOT,
    "message": {"text": _SLOT},
    "locations": [
        {
            "physicalLocation": {
                "artifactLocation": {"uri": _SLOT},
                "region": {"startLine": _SLOT, "startColumn": _SLOT},
            }
        }
    ],
}


def write_sarif(report: CheckReport, out: IO[str]) -> None:
    used = sorted({x.code for f in report.files for x in f.findings})
    rules = [
        {
            "id": code,
            "name": RULES[code].name,
            "shortDescription": {"text": RULES[code].summary},
            "help": {"text": f"before: {RULES[code].before}\nafter: {RULES[code].after}"},
            "properties": {"fix": RULES[code].fix.value},
        }
        for code in used
    ]
    index = {code: i for i, code in enumerate(used)}
    level = {code: "error" if FIX_LABEL[code] == Fix.MANUAL.value else "warning" for code in used}
    results = [
        _Filled(_SARIF_RESULT, (x.code, index[x.code], level[x.code], x.message, uri, x.line, x.col))
        for f in report.files
        for uri in (f.path.replace("\\", "/"),)
        for x in f.findings
    ]
    notifications = [
        {"level": "error", "message": {"text": f"{path}: {error}"}} for path, error in report.errors
    ]
    data = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "migrate-v3", "version": __version__, "rules": rules}},
                "results": results,
                "invocations": [
                    {"executionSuccessful": not report.errors, "toolExecutionNotifications": notifications}
                ],
            }
        ],
    }
    _write_json(data, out)
