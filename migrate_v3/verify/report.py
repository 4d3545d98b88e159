"""Plain result data for ``verify``: what was compared and how it came out.

Kept free of ``max`` so reports can be rendered, serialised and tested on
machines without the package.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["pass", "fail", "error", "skipped"]

EXIT_PASS = 0
EXIT_MISMATCH = 1
EXIT_COULD_NOT_RUN = 2
#: It ran and nothing failed, but the verdict would rest on classes it did not compare:
#: the package's root model, or most of its classes.
EXIT_NOT_VERIFIED = 3


@dataclass
class OutputCheck:
    """One output of one class: V3 against V2 within a tolerance."""

    index: int
    dtype: str
    shape: list[int]
    max_abs: float
    max_rel: float
    atol: float
    rtol: float
    passed: bool
    shape_v3: list[int] | None = None
    dtype_v3: str | None = None
    note: str = ""


@dataclass
class KeyIssue:
    """One weight name that does not line up between checkpoint and V3."""

    kind: Literal["missing", "unexpected", "shape", "dtype"]
    key: str
    detail: str = ""


@dataclass
class Suggestion:
    """A prefix or rename that explains a group of key issues."""

    kind: Literal["add_prefix", "strip_prefix", "rename"]
    old: str
    new: str
    explains: int

    def describe(self) -> str:
        if self.kind == "add_prefix":
            return f"prefix checkpoint keys with {self.new!r} ({self.explains} keys)"
        if self.kind == "strip_prefix":
            return f"strip {self.old!r} from checkpoint keys ({self.explains} keys)"
        return f"rename {self.old!r} -> {self.new!r} ({self.explains} keys)"


@dataclass
class KeyAlignment:
    """Checkpoint keys against V3 parameter paths (migration-guide step 7)."""

    checkpoint_keys: int
    v3_parameters: int
    issues: list[KeyIssue] = field(default_factory=list)
    suggestions: list[Suggestion] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.issues

    @property
    def blocks_compile(self) -> bool:
        """Missing keys and shape/dtype mismatches make ``compile`` raise."""
        return any(i.kind != "unexpected" for i in self.issues)


@dataclass
class HParamIssue:
    """A hyper-parameter that differs between paired V2 and V3 sub-modules."""

    path: str
    name: str
    v2: str
    v3: str
    severity: Literal["error", "warning"]
    why: str = ""


@dataclass
class GreedyCheck:
    """Greedy tokens of both sides over the same prompt."""

    steps: int
    v2_tokens: list[list[int]]
    v3_tokens: list[list[int]]

    @property
    def passed(self) -> bool:
        return self.v2_tokens == self.v3_tokens


@dataclass
class ClassResult:
    """Everything ``verify`` learned about one V2/V3 class pair."""

    name: str
    status: Status
    reason: str = ""
    dtype: str = ""
    alignment: KeyAlignment | None = None
    hparams: list[HParamIssue] = field(default_factory=list)
    outputs: list[OutputCheck] = field(default_factory=list)
    greedy: GreedyCheck | None = None
    seconds: float = 0.0
    todos: list[str] = field(default_factory=list)
    #: what was compared: "numeric" (compiled and run), "static" (keys, hyper-parameters)
    compared: Literal["", "static", "numeric"] = ""
    #: the compared class whose graph runs this one's code (a skipped child)
    covered_by: str = ""
    #: False when ``--only`` (or the spec's ``only``) left it out
    selected: bool = True
    #: how many classes were compiled in this one's graph per side (1: alone, 0: not compiled)
    graph_shared_by: int = 0

    @property
    def causes(self) -> list[str]:
        """Short, human-readable reasons for a failure, most specific first."""
        out: list[str] = []
        if self.reason:
            out.append(self.reason)
        if self.alignment is not None:
            for s in self.alignment.suggestions:
                out.append(f"suggestion: {s.describe()}")
            for issue in self.alignment.issues:
                out.append(f"weight key {issue.kind}: {issue.key} {issue.detail}".rstrip())
        for h in self.hparams:
            if h.severity == "error":
                out.append(f"{h.path or '<root>'}.{h.name}: V2 {h.v2} != V3 {h.v3} {h.why}".rstrip())
        for o in self.outputs:
            if not o.passed:
                out.append(
                    f"output {o.index}: max abs {o.max_abs:.3g}, max rel {o.max_rel:.3g} "
                    f"(atol {o.atol:g}, rtol {o.rtol:g}) {o.note}".rstrip()
                )
        if self.greedy is not None and not self.greedy.passed:
            out.append("greedy tokens differ")
        out.extend(f"apply TODO {t}" for t in self.todos)
        return out


@dataclass
class MypyFile:
    path: str
    errors: int


@dataclass
class MypyResult:
    """Type errors on the V3 side, counted against the V2 side."""

    v2_errors: int
    v3_errors: int
    v3_files: list[MypyFile] = field(default_factory=list)
    v2_files: list[MypyFile] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def passed(self) -> bool:
        return not self.error and self.v3_errors <= self.v2_errors


@dataclass
class VerifyReport:
    """The whole run: per class results, mypy, and the exit code they imply."""

    v2_path: str
    v3_path: str
    device: str
    classes: list[ClassResult] = field(default_factory=list)
    mypy: MypyResult | None = None
    error: str = ""
    graphs_compiled: int = 0
    seconds: float = 0.0
    #: the package's root classes: those no other class of the V2 package builds or extends
    roots: list[str] = field(default_factory=list)
    #: a run that compiles counts only numeric comparisons as verified (``--no-compile``: static ones)
    compile_requested: bool = False

    def by_name(self, name: str) -> ClassResult:
        for c in self.classes:
            if c.name == name:
                return c
        raise KeyError(name)

    def is_compared(self, c: ClassResult) -> bool:
        """Compared itself, or its code ran inside a compared class's graph.

        When the run compiles, a class checked by keys and hyper-parameters only
        (no inputs could be made for it) is not verified: its numbers were not compared.
        """
        how = self.how_compared(c)
        return how == "numeric" or (how == "static" and not self.compile_requested)

    def how_compared(self, c: ClassResult) -> str:
        """"numeric", "static" or "": its own comparison, else its enclosing class's."""
        if c.status in ("pass", "fail"):
            own = c.compared or ("numeric" if c.outputs else "static" if c.alignment is not None else "")
            if own:
                return own
        if c.covered_by:
            try:
                return self.how_compared(self.by_name(c.covered_by))
            except KeyError:
                return ""
        return ""

    @property
    def coverage(self) -> dict[str, Any]:
        """How much of the package the verdict rests on."""
        selected = [c for c in self.classes if c.selected]
        compared = [c for c in selected if self.is_compared(c)]
        return {
            "classes": len(selected),
            "compared": len(compared),
            "numeric": sum(1 for c in compared if self.how_compared(c) == "numeric"),
            "static_only": sum(1 for c in selected if self.how_compared(c) == "static"),
            "not_compared": [c.name for c in selected if not self.is_compared(c)],
            "roots": self.roots,
            "roots_not_compared": [r for r in self.roots
                                   if any(c.name == r and c.selected and not self.is_compared(c)
                                          for c in self.classes)],
        }

    @property
    def exit_code(self) -> int:
        """0 all pass, 1 a mismatch, 2 could not run, 3 not verified (root or most classes skipped)."""
        if self.error:
            return EXIT_COULD_NOT_RUN
        if any(c.status == "fail" for c in self.classes):
            return EXIT_MISMATCH
        if self.mypy is not None and not self.mypy.passed and not self.mypy.error:
            return EXIT_MISMATCH
        if any(c.status == "error" for c in self.classes):
            return EXIT_COULD_NOT_RUN
        cov = self.coverage
        if cov["compared"] == 0:
            return EXIT_COULD_NOT_RUN
        if cov["roots_not_compared"] or 2 * cov["compared"] < cov["classes"]:
            return EXIT_NOT_VERIFIED
        return EXIT_PASS

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["exit_code"] = self.exit_code
        data["coverage"] = self.coverage
        for c, raw in zip(self.classes, data["classes"], strict=True):
            raw["causes"] = c.causes
        return data
