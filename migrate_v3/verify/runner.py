"""Orchestrate one verify run: load, pair, plan, check, compile, compare.

Cheap checks (key alignment, hyper-parameters) run on every pair before any
graph is compiled; by default only *root* classes (those no other paired
class contains) are compiled, since their graphs cover their children.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from migrate_v3.verify import sides
from migrate_v3.verify.align import align_keys, mark_linear_biases
from migrate_v3.verify.auto import TinyConfigs, auto_case, constructor_values
from migrate_v3.verify.compare import compare_output
from migrate_v3.verify.hparams import compare_hparams, v2_modules
from migrate_v3.verify.loader import LoadedSide, defined_classes, load_side, module_classes
from migrate_v3.verify.progress import Progress, make_progress
from migrate_v3.verify.report import ClassResult, GreedyCheck, Status, VerifyReport
from migrate_v3.verify.spec import Case, Spec, find_pyproject_spec, load_spec
from migrate_v3.verify.tensors import load_checkpoint, random_state_dict
from migrate_v3.verify.together import Member


@dataclass
class VerifyOptions:
    """Every knob of a run; the CLI flags map one to one."""

    spec: Path | None = None
    weights: Path | None = None
    device: str = "cpu"
    dtype: str | None = None
    seed: int = 0
    only: list[str] | None = None
    all_classes: bool = False
    auto: bool = True
    mypy: bool = True
    greedy: int = 0
    compile: bool = True
    tolerance: tuple[float, float] | None = None
    pairs: dict[str, str] = field(default_factory=dict)
    progress: bool = False
    mypy_cache: Path | None = None
    apply_report: Any = None
    one_graph: bool = True


@dataclass
class _Plan:
    name: str
    v2_cls: type
    v3_cls: type
    case: Case
    v2_module: Any


def _first_weight(module: Any) -> tuple[int, ...] | None:
    sig = sides.v2_signature(module)
    return next(iter(sig.values()))[0] if sig else None


def _case_for(name: str, v2_cls: type, v3_cls: type, spec: Spec, opts: VerifyOptions,
              target: sides.Target, dtype: str, configs: TinyConfigs | None = None
              ) -> tuple[Case | None, Any, str]:
    """The spec's case, else an automatic one; with the built V2 module."""
    case = spec.cases.get(name)
    if case is None:
        if not opts.auto:
            return None, None, "no case in the spec (automatic mode off)"
        values = constructor_values(v2_cls, configs)
        if isinstance(values, str):
            return None, None, values
        try:
            probe = sides.build_v2(Case(inputs=[], v2_kwargs=values), v2_cls, target, dtype)
        except Exception as exc:  # noqa: BLE001 - reported as a skip reason
            return None, None, f"automatic V2 construction failed: {type(exc).__name__}: {exc}"
        made = auto_case(v2_cls, v3_cls, _first_weight(probe), configs)
        if isinstance(made, str):
            return None, None, made
        return made, probe, ""
    try:
        return case, sides.build_v2(case, v2_cls, target, dtype), ""
    except Exception as exc:  # noqa: BLE001
        return case, None, f"V2 construction failed: {type(exc).__name__}: {exc}"


def package_roots(classes: dict[str, type]) -> list[str]:
    """Classes no other class of the package constructs (by name, in its source, or through a
    module-level function of its module that it calls: ``_make_modulation()`` building a helper
    layer) or extends.

    The package's top models: a verdict that did not compare them verified the parts only.
    """
    import ast
    import sys

    from migrate_v3.verify.pysource import parsed

    def callees(tree: ast.AST) -> set[str]:
        return {
            node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)
        }

    factories: dict[str, set[str]] = {}  # module-level function → the package classes it constructs
    for module in {sys.modules.get(cls.__module__) for cls in classes.values()}:
        tree = parsed(module) if module is not None else None
        for stmt in tree.body if tree is not None else ():
            if isinstance(stmt, ast.FunctionDef):
                factories.setdefault(stmt.name, set()).update(callees(stmt) & classes.keys())
    used: set[str] = set()
    for name, cls in classes.items():
        used.update(b.__name__ for b in cls.__mro__[1:] if b.__name__ in classes)
        tree = parsed(cls)
        if tree is None:
            continue
        called = callees(tree)
        used.update(c for c in called if c in classes and c != name)
        used.update(c for f in called & factories.keys() for c in factories[f] if c != name)
    return [name for name in classes if name not in used]


def _covered_by(plans: list[_Plan]) -> dict[str, str]:
    """Plan name -> a root plan whose module contains it; roots map to themselves."""
    inner: dict[type, str] = {}
    for plan in plans:
        for path, child in v2_modules(plan.v2_module):
            if path:
                inner.setdefault(type(child), plan.name)
    cover = {p.name: inner.get(p.v2_cls, p.name) for p in plans}
    for name in cover:  # follow chains up to a root
        seen = {name}
        while cover[cover[name]] != cover[name] and cover[name] not in seen:
            seen.add(cover[name])
            cover[name] = cover[cover[name]]
    return cover


def _pairs(v2: dict[str, type], v3: dict[str, type], explicit: Mapping[str, str]) -> list[tuple[str, type, type | None]]:
    return [(name, cls, v3.get(explicit.get(name, name))) for name, cls in v2.items()]


def run_verify(v2_path: str | Path, v3_path: str | Path, **options: Any) -> VerifyReport:
    """Verify a migration; ``options`` are :class:`VerifyOptions` fields."""
    return run_verify_many([(v2_path, v3_path, options)])[0]


def run_verify_many(
    jobs: Sequence[tuple[str | Path, str | Path, Mapping[str, Any]]],
) -> list[VerifyReport]:
    """Verify several migrations; with ``one_graph`` their roots share one compiled graph per side.

    Each job is ``(v2_path, v3_path, options)``; the reports come back in order,
    each as ``run_verify`` would give it alone.
    """
    runs: list[_Run | VerifyReport] = []
    progresses: list[Progress] = []
    try:
        for v2_path, v3_path, options in jobs:
            opts = _options(dict(options))
            progress = make_progress(opts.progress)
            progresses.append(progress)
            runs.append(_open(Path(v2_path), Path(v3_path), opts, progress))
        _verify_runs([r for r in runs if isinstance(r, _Run)])
        return [r if isinstance(r, VerifyReport) else _close(r) for r in runs]
    finally:
        for progress in progresses:
            progress.close()


def _options(options: dict[str, Any]) -> VerifyOptions:
    for key in ("spec", "weights", "mypy_cache", "apply_report"):
        if isinstance(options.get(key), str):
            options[key] = Path(options[key])
    return VerifyOptions(**options)


@dataclass
class _Run:
    """One started run: its report so far, its plans, and what compiling them needs."""

    report: VerifyReport
    opts: VerifyOptions
    progress: Progress
    target: sides.Target
    dtype: str
    checkpoint: tuple[dict[str, Any], dict[str, Any]] | None
    plans: list[_Plan]
    side2: LoadedSide
    side3: LoadedSide
    members: dict[str, set[str]]
    mypy_job: Any
    start: float
    session: Any = None


def _open(v2_path: Path, v3_path: Path, opts: VerifyOptions, progress: Progress) -> _Run | VerifyReport:
    start = time.perf_counter()
    report = VerifyReport(str(v2_path), str(v3_path), opts.device, compile_requested=opts.compile)
    for p in (v2_path, v3_path):
        if not p.exists():
            report.error = f"{p} does not exist"
            return report
    mypy_job = None
    if opts.mypy:
        from migrate_v3.verify.typecheck import start_both

        mypy_dir = opts.mypy_cache or Path.home() / ".cache" / "migrate-v3" / "mypy"
        mypy_job = start_both(v2_path, v3_path, mypy_dir)
    try:
        target = sides.make_target(opts.device)
        spec_path = opts.spec or find_pyproject_spec(v3_path, v2_path)
        spec = load_spec(spec_path) if spec_path else Spec()
        with progress.step("importing both sides", counted=False):
            side2, side3 = load_side(v2_path, "v2"), load_side(v3_path, "v3")
        checkpoint = load_checkpoint(opts.weights) if opts.weights else None
    except Exception as exc:  # noqa: BLE001 - a run that cannot start exits 2
        report.error = f"{type(exc).__name__}: {exc}"
        _finish_mypy(report, mypy_job)
        return report
    dtype = opts.dtype or spec.dtype or "float32"
    with progress.step("pairing classes and building the V2 side", counted=False):
        report.classes, plans = _plan(side2, side3, spec, opts, target, dtype)
    report.roots = package_roots(module_classes(side2, sides.v2_base()))
    members = {p.name: {type(m).__name__ for _, m in v2_modules(p.v2_module)} for p in plans}
    progress.set_total(2 * len(plans) if opts.compile else 0)
    return _Run(report, opts, progress, target, dtype, checkpoint, plans, side2, side3, members,
                mypy_job, start, sides.new_session(target) if plans else None)


def _verify_runs(runs: list[_Run]) -> None:
    """Check every plan; compile the ready ones together where allowed, the rest alone."""
    ready: list[tuple[_Run, _Ready]] = []
    for run in runs:
        cache: dict[Any, Any] = {}
        for plan in run.plans:
            try:
                prepared = _prepare(plan, run.opts, run.target, run.dtype, run.checkpoint)
                if isinstance(prepared, _Ready) and run.opts.one_graph and not prepared.greedy:
                    ready.append((run, prepared))
                    continue
                outcome = (prepared if isinstance(prepared, _PairOutcome) else
                           _compile_pair(prepared, run.opts, run.target, run.session, run.progress, cache))
            except Exception as exc:  # noqa: BLE001 - one class must not end the run
                run.report.classes.append(_verify_failed(plan.name, exc))
                continue
            run.report.graphs_compiled += outcome.pop_compiles()
            run.report.classes.append(outcome.result)
    from migrate_v3.verify.together import dim_values, pack

    devices: dict[str, list[tuple[_Run, _Ready]]] = {}
    for run, item in ready:
        devices.setdefault(run.opts.device, []).append((run, item))
    for on_device in devices.values():
        for indices in pack([dim_values(item.pair.types, item.pair.inputs) for _, item in on_device]):
            _verify_together([on_device[i] for i in indices])


def _verify_together(ready: list[tuple[_Run, _Ready]]) -> None:
    """One graph per side for every pair of the group; alone again if that fails, to name the culprit."""
    from migrate_v3.verify.together import compile_together

    first = ready[0][0]
    group: list[tuple[_Run, _Ready | _PairOutcome]] = list(ready)
    outputs = None
    if len(group) > 1:
        label = f"{len(group)} classes in one graph per side: compile V2 and V3"
        try:
            with first.progress.step(label):
                outputs = compile_together(
                    [r.pair for _, r in ready],
                    first.target, first.session)
        except Exception as exc:  # noqa: BLE001 - each pair alone says which one breaks
            why = f"the graph shared by {len(group)} classes failed ({type(exc).__name__}: {_short(exc)})"
            group = [(run, _afresh(run, item, why)) for run, item in ready]
    counted: set[int] = set()
    for i, (run, item) in enumerate(group):
        outcome: _PairOutcome
        try:
            if isinstance(item, _PairOutcome):
                outcome = item
            elif outputs is None:
                outcome = _compile_pair(item, run.opts, run.target, run.session, run.progress, {})
            else:
                outcome = _compare(item, *outputs[i], run.opts)
                outcome.compiles = 0 if id(run) in counted else 2  # the shared pair, once per report
                outcome.result.graph_shared_by = len(group)
                counted.add(id(run))
        except Exception as exc:  # noqa: BLE001 - one class must not end the run
            name = item.result.name if isinstance(item, _PairOutcome) else item.plan.name
            run.report.classes.append(_verify_failed(name, exc))
            continue
        run.report.graphs_compiled += outcome.pop_compiles()
        run.report.classes.append(outcome.result)


def _verify_failed(name: str, exc: Exception) -> ClassResult:
    """A class whose check raised inside verify itself: reported, and the run goes on."""
    return ClassResult(name, "error", f"verify itself failed: {type(exc).__name__}: {_short(exc)}")


def _afresh(run: _Run, item: _Ready, why: str) -> _Ready | _PairOutcome:
    """The pair rebuilt from its case, to compile alone: tracing bound the old modules to the failed graph."""
    plan = item.plan
    try:
        v2 = sides.build_v2(plan.case, plan.v2_cls, run.target, plan.case.dtype or run.dtype)
        prepared = _prepare(replace(plan, v2_module=v2), run.opts, run.target, run.dtype, run.checkpoint)
    except Exception as exc:  # noqa: BLE001 - reported on the class
        return _PairOutcome(ClassResult(plan.name, "error", f"{why}; rebuilding it alone failed: "
                                        f"{type(exc).__name__}: {_short(exc)}"))
    if isinstance(prepared, _Ready):
        prepared.note = why
    return prepared


def _close(run: _Run) -> VerifyReport:
    report, opts = run.report, run.opts
    order = {name: i for i, name in enumerate(module_classes(run.side2, sides.v2_base()))}
    report.classes.sort(key=lambda c: order.get(c.name, len(order)))
    if opts.apply_report is not None:
        _attach_todos(report, opts.apply_report, module_classes(run.side3, sides.v3_base()), run.members)
    if run.mypy_job is not None:
        with run.progress.step("waiting for mypy (both sides)", counted=False):
            _finish_mypy(report, run.mypy_job)
    report.seconds = time.perf_counter() - run.start
    return report


def _attach_todos(report: VerifyReport, apply_report: Any, v3_classes: dict[str, type],
                  members: dict[str, set[str]]) -> None:
    """Give each failing class the apply TODOs of the files defining it and its parts."""
    import inspect

    from migrate_v3.verify.apply_report import todos_by_file

    todos = todos_by_file(apply_report)
    for result in report.classes:
        if result.status in ("pass", "skipped"):
            continue
        files: list[str] = []
        for name in sorted(members.get(result.name, set()) | {result.name}):
            cls = v3_classes.get(name)
            if cls is None:
                continue
            try:
                source = str(Path(inspect.getfile(cls)).resolve())
            except (TypeError, OSError):
                continue
            if source not in files:
                files.append(source)
        result.todos = [t for f in files for t in todos.get(f, [])]


def _finish_mypy(report: VerifyReport, job: Any) -> None:
    if job is not None:
        from migrate_v3.verify.typecheck import collect

        report.mypy = collect(job)


def _plan(side2: LoadedSide, side3: LoadedSide, spec: Spec, opts: VerifyOptions,
          target: sides.Target, dtype: str) -> tuple[list[ClassResult], list[_Plan]]:
    v2_classes = module_classes(side2, sides.v2_base())
    v3_classes = module_classes(side3, sides.v3_base())
    explicit = {**spec.pairs, **opts.pairs}
    results: list[ClassResult] = []
    plans: list[_Plan] = []
    only = opts.only or spec.only
    v3_import_errors = "; ".join(f"{Path(f).name}: {e}" for f, e in side3.errors.items())
    configs = TinyConfigs((side2.root.name,), {"dtype": sides.dtype_of(dtype), "device": target.ref,
                                               "devices": [target.ref]})
    for name, v2_cls, v3_cls in _pairs(v2_classes, v3_classes, explicit):
        if only and name not in only:
            results.append(ClassResult(name, "skipped", "not selected (--only)", selected=False))
            continue
        if v3_cls is None:
            results.append(_unpaired(name, explicit.get(name, name), side3, v3_import_errors))
            continue
        case, module, reason = _case_for(name, v2_cls, v3_cls, spec, opts, target, dtype, configs)
        if case is None or module is None:
            status: Status = "error" if case is not None else "skipped"
            results.append(ClassResult(name, status, reason))
            continue
        plans.append(_Plan(name, v2_cls, v3_cls, case, module))
    for f, e in side2.errors.items():
        results.append(ClassResult(Path(f).name, "skipped", f"V2 module failed to import: {e}"))
    if not (opts.all_classes or only):
        cover = _covered_by(plans)
        for plan in plans:
            if cover[plan.name] != plan.name:
                results.append(ClassResult(
                    plan.name, "skipped",
                    f"covered by the enclosing class {cover[plan.name]}'s graph "
                    "(use --all-classes or --only to compile it alone)",
                    covered_by=cover[plan.name],
                ))
        plans = [p for p in plans if cover[p.name] == p.name]
    inside = {type(m).__name__: p.name for p in plans for path, m in v2_modules(p.v2_module) if path}
    for result in results:
        if result.status == "skipped" and result.name in inside and not result.covered_by:
            result.reason += f" (its code still runs inside {inside[result.name]}'s graph)"
            result.covered_by = inside[result.name]
    return results, plans


def _unpaired(name: str, v3_name: str, side3: LoadedSide, import_errors: str) -> ClassResult:
    """Why a V2 class has no V3 counterpart: a class still on V2, an import error, or none at all."""
    import inspect

    found = defined_classes(side3).get(v3_name)
    if found is not None:
        v2 = [c for c in found.__mro__[1:] if issubclass(c, sides.v2_base())]
        try:
            where = f"{Path(inspect.getfile(found)).name}:{inspect.getsourcelines(found)[1]}"
        except (OSError, TypeError):
            where = found.__module__
        still = (f"still a V2 module: it extends {v2[0].__module__}.{v2[0].__name__}" if v2
                 else "not a max.experimental.nn.Module")
        return ClassResult(name, "fail", f"the V3 side defines {v3_name} ({where}) but it is {still}")
    if import_errors:
        return ClassResult(name, "fail", f"V3 side failed to import: {import_errors}")
    return ClassResult(name, "skipped", "no V3 class of this name")


@dataclass
class _PairOutcome:
    result: ClassResult
    compiles: int = 0

    def pop_compiles(self) -> int:
        n, self.compiles = self.compiles, 0
        return n


def compile_key(side: str, cls: type, case: Case, types: list[Any], weights: Mapping[str, Any]) -> Any:
    """What makes two compiled graphs the same: class, constructor inputs, input types, weights.

    Within one run the weights are a function of their names and shapes (the
    run's seed, or its one checkpoint), so those stand for the values.
    """
    def text(value: Any) -> str:
        return repr(sorted(value.items())) if isinstance(value, Mapping) else repr(value)

    builder = case.v2 if side == "v2" else case.v3
    ctor = (builder, text(case.args), text(case.kwargs),
            text(case.v2_args if side == "v2" else case.v3_args),
            text(case.v2_kwargs if side == "v2" else case.v3_kwargs))
    return (side, cls, ctor, tuple(repr(t) for t in types),
            tuple(sorted((k, tuple(np.shape(v)), str(getattr(v, "dtype", ""))) for k, v in weights.items())))


def _compiled(cache: dict[Any, Any], key: Any, make: Any) -> tuple[Any, bool]:
    """One compiled graph per distinct class/config in a run: (runner, compiled now)."""
    if key in cache:
        return cache[key], False
    cache[key] = make()
    return cache[key], True


@dataclass
class _Ready:
    """A pair that passed its static checks and has weights, input types and inputs to compile with."""

    plan: _Plan
    out: _PairOutcome
    #: the built modules, weights, input types and inputs (what a shared graph takes of it, too)
    pair: Member
    failed: bool
    greedy: bool
    start: float
    note: str = ""


def _prepare(plan: _Plan, opts: VerifyOptions, target: sides.Target, dtype: str,
             checkpoint: tuple[dict[str, Any], dict[str, Any]] | None) -> _PairOutcome | _Ready:
    """The static checks of a pair; a finished outcome, or what compiling it needs."""
    start = time.perf_counter()
    case = plan.case
    run_dtype = case.dtype or dtype
    out = _PairOutcome(ClassResult(plan.name, "pass", dtype=run_dtype))
    result = out.result
    v2 = plan.v2_module
    v2_names = sides.v2_signature(v2)
    if checkpoint is not None:
        weights, signature = checkpoint
        lacking = sorted(set(v2_names) - set(weights))
        if lacking:
            result.status = "error"
            result.reason = (f"the checkpoint lacks {len(lacking)} V2 weights "
                             f"(e.g. {', '.join(lacking[:3])}); it must use V2 names")
            return out
    else:
        signature = v2_names
        weights = None  # made only when compiling: static checks need no values
    key_map = case.key_map or (lambda k: k)
    v3_signature_ckpt = {key_map(k): s for k, s in signature.items()}
    try:
        v3 = sides.build_v3(case, plan.v3_cls, target, run_dtype)
    except Exception as exc:  # noqa: BLE001 - the port itself is broken
        result.status, result.reason = "fail", f"V3 construction failed: {type(exc).__name__}: {exc}"
        return out
    result.alignment = align_keys(v3_signature_ckpt, sides.v3_signature(v3))
    mark_linear_biases(result.alignment, sides.v3_linear_paths(v3))
    result.hparams = compare_hparams(v2, v3, low_precision=run_dtype not in ("float32", "float64"))
    result.compared = "static"
    failed = not result.alignment.ok or any(h.severity == "error" for h in result.hparams)
    if result.alignment.blocks_compile:
        result.status = "fail"
        result.reason = "weights do not fit the V3 parameters; not compiled"
        result.seconds = time.perf_counter() - start
        return out
    if not opts.compile or case.static_reason:
        result.status = "fail" if failed else "pass"
        result.reason = ("static checks only (not compiled)" if not opts.compile
                         else f"static checks only, not compiled: {case.static_reason}")
        result.seconds = time.perf_counter() - start
        return out
    if weights is None:
        weights = random_state_dict(signature, opts.seed)
    pair = Member(
        v2, v3,
        {k: weights[k] for k in v2_names},
        {key_map(k): v for k, v in weights.items()},
        sides.input_types(case.inputs, target, run_dtype),
        sides.make_inputs(case.inputs, opts.seed, run_dtype),
    )
    return _Ready(plan, out, pair, failed, bool(opts.greedy and case.greedy), start)


def _compile_pair(ready: _Ready, opts: VerifyOptions, target: sides.Target, session: Any,
                  progress: Progress, cache: dict[Any, Any]) -> _PairOutcome:
    """Compile and run the pair alone (one graph per side), then compare."""
    plan, case, out, pair = ready.plan, ready.plan.case, ready.out, ready.pair
    try:
        with progress.step(f"{plan.name}: compile V2"):
            run2, fresh = _compiled(
                cache, compile_key("v2", plan.v2_cls, case, pair.types, pair.v2_weights),
                lambda: sides.compile_v2(pair.v2, pair.v2_weights, pair.types, target, session))
            out.compiles += fresh
            ref = run2(pair.inputs)
    except Exception as exc:  # noqa: BLE001 - cannot build the reference
        out.result.status = "error"
        out.result.reason = f"V2 graph failed: {type(exc).__name__}: {_short(exc)}"
        return out
    try:
        with progress.step(f"{plan.name}: compile V3"):
            run3, fresh = _compiled(
                cache, compile_key("v3", plan.v3_cls, case, pair.types, pair.v3_weights),
                lambda: sides.compile_v3(pair.v3, pair.v3_weights, pair.types, target))
            out.compiles += fresh
            got = run3(pair.inputs)
            out.result.graph_shared_by = 1
    except Exception as exc:  # noqa: BLE001 - the port does not compile
        out.result.status = "fail"
        out.result.reason = f"V3 compile/run failed: {type(exc).__name__}: {_short(exc)}"
        return out
    return _compare(ready, ref, got, opts, (run2, run3) if ready.greedy else None)


def _compare(ready: _Ready, ref: list[Any], got: list[Any], opts: VerifyOptions,
             runners: tuple[sides.Runner, sides.Runner] | None = None) -> _PairOutcome:
    out, case = ready.out, ready.plan.case
    result = out.result
    failed = ready.failed
    result.compared = "numeric"
    if len(ref) != len(got):
        failed = True
        result.reason = f"V2 returns {len(ref)} outputs, V3 returns {len(got)}"
    tol = case.tolerance or opts.tolerance
    for i, ((a, adt), (b, bdt)) in enumerate(zip(ref, got, strict=False)):
        check = compare_output(i, a, b, adt, bdt, tol)
        result.outputs.append(check)
        failed = failed or not check.passed
    if runners is not None:
        result.greedy = _greedy(*runners, ready.pair.inputs[0], opts.greedy)
        failed = failed or not result.greedy.passed
    result.status = "fail" if failed else "pass"
    if ready.note and not result.reason:
        result.reason = f"{ready.note}; compiled alone"
    result.seconds = time.perf_counter() - ready.start
    return out


def _greedy(run2: sides.Runner, run3: sides.Runner, prompt: Any, steps: int) -> GreedyCheck:
    """Greedy decode on both sides from the same prompt, each on its own tokens."""
    tokens: list[np.ndarray] = []
    base = np.asarray(prompt)
    for run in (run2, run3):
        seq = base.copy()
        for _ in range(steps):
            logits, _dtype = run([seq])[0]
            nxt = logits.reshape(seq.shape[0], -1).argmax(axis=-1).astype(seq.dtype)
            seq = np.concatenate([seq, nxt[:, None]], axis=1)
        tokens.append(seq[:, base.shape[1]:])
    return GreedyCheck(steps, tokens[0].tolist(), tokens[1].tolist())


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:400] if text else repr(exc)

