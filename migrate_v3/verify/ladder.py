"""The model ladder for one migrated architecture package: how far it gets.

Rungs, tried per package in child interpreters by ``bench/ladder.py`` (L0 is
the driver's own: ``apply`` ran and every output parses):

* L1 every migrated module imports;
* L2 the root module(s) the pipeline model builds construct, V2 from the tiny
  config (:mod:`migrate_v3.verify.tiny`) and V3 under ``F.lazy()`` from the
  same checkpoint (:mod:`migrate_v3.verify.archbuild`);
* L3 V3 parameter names, shapes and dtypes equal the V2 root's weights as the
  V3 package feeds them to ``compile`` (through its weight adapter);
* L4 ``Module.trace`` stages the V3 graph with the input types the pipeline
  compiles with;
* L6 the V3 pipeline model's own load path gets as far as ``compile``.

L5 (``l5=True``, ``bench/ladder.py --l5``) compiles both sides and compares
outputs. Every rung is tried even when an earlier one failed, so the JSON
says what else works; the *rung* of an architecture is the highest one
reached with every rung below it passed. A package without ``arch.py`` has
no pipeline model: its root classes are built the way ``verify`` builds them.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import os
import re
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from migrate_v3.verify import archbuild
from migrate_v3.verify.align import align_keys
from migrate_v3.verify.kv_inputs import FLAT_KV_PARAMS, kv_feed


@dataclass
class Step:
    """One rung's outcome for one root (or the package)."""

    rung: str
    ok: bool
    detail: str = ""
    where: str = ""
    side: str = "v3"  # which side failed: v2 (the reference), v3 (the migration), setup


@dataclass
class ArchResult:
    """Everything the ladder learned about one package."""

    arch: str
    v3_package: str
    entries: list[str] = field(default_factory=list)
    probed: str = ""
    model_type: str = ""
    roots: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    seconds: float = 0.0
    input_types_from: str = ""
    config_notes: list[str] = field(default_factory=list)  # how the tiny config was derived

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def module_names(pkg: Path, parent: str) -> list[str]:
    """Dotted names of every module of ``pkg`` under the top-level package ``parent``."""
    names = []
    for py in sorted(pkg.rglob("*.py")):
        if "__pycache__" in py.parts:
            continue
        parts = list(py.relative_to(pkg.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join([parent, *parts]))
    return names


class Stopped(BaseException):
    """Raised by a caller's deadline: the probe ends there and its rungs so far stand.

    A ``BaseException`` so that no rung's ``except Exception`` (a failure
    recorded, a fallback tried) swallows it and goes on climbing.
    """


#: why the caller's deadline stopped the probe, set by the caller with its raise of ``Stopped``:
#: code that turns the raise into another error (an import becomes an ImportError) does not
#: carry it on, so each rung, each import and each failure checks this again
stop_reason: str | None = None


#: how long one trace may take before the ladder gives up on it and climbs on (L6): a trace
#: stages in seconds; one that iterates a Tensor never ends (``MIGRATE_V3_LADDER_TRACE_SECONDS``)
TRACE_SECONDS = float(os.environ.get("MIGRATE_V3_LADDER_TRACE_SECONDS", "90"))


class TraceTimeout(Exception):
    """A trace ran past :data:`TRACE_SECONDS`."""


@contextlib.contextmanager
def _trace_deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`TraceTimeout` in the block after ``seconds`` (main thread, where a caller's
    own interval timer, the probe's deadline, is put back with the time it had left)."""
    if threading.current_thread() is not threading.main_thread() or seconds <= 0:
        yield
        return
    outer_left, _ = signal.getitimer(signal.ITIMER_REAL)
    if outer_left and outer_left <= seconds:  # (the caller's deadline comes first: it stays in charge)
        yield
        return

    def expire(signum: int, frame: object) -> None:
        signal.setitimer(signal.ITIMER_REAL, 5)  # (again, should the code in the block swallow it)
        raise TraceTimeout(f"the trace ran past {seconds:g} s (MIGRATE_V3_LADDER_TRACE_SECONDS)")

    start = time.monotonic()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_left:
            signal.setitimer(signal.ITIMER_REAL, max(outer_left - (time.monotonic() - start), 0.001))


def _checkpoint() -> None:
    if stop_reason is not None:
        raise Stopped(stop_reason)


def _import_all(names: list[str], prefer: tuple[Path, ...]) -> list[Step]:
    steps: dict[tuple[str, str], Step] = {}
    for name in names:
        _checkpoint()
        try:
            importlib.import_module(name)
        except Stopped:
            raise
        except BaseException as exc:
            _checkpoint()  # noqa: BLE001 - SystemExit included: a module must not end the probe
            f = archbuild.failure(f"import {name}", exc, prefer)
            key = (f.error, f.where)
            if key in steps:  # one cause, many importers: said once
                steps[key].detail += f"; also {name}"
            else:
                steps[key] = Step("L1", False, f.line(), f.where)
    return list(steps.values())


#: called with the result so far just before each L5 compile: a compile or run that kills the
#: interpreter (seen: SIGSEGV) then loses only L5 (bench/ladder.py prints it as a partial result)
before_l5: Callable[[ArchResult], None] | None = None


def probe(root: Path, parent: str, arch: str, v3_name: str, v2_prefix: str,
          work: Path | None = None, migrated: tuple[str, ...] = (), l5: bool = False) -> ArchResult:
    """Climb the ladder for ``parent.v3_name``, the migrated ``arch`` (V2 at ``v2_prefix.arch``).

    ``migrated`` names the other migrated packages of the tree: a failure is
    placed at the innermost frame of this package or of those (a migrated
    sibling's code), else at the innermost frame. ``l5`` also compiles each
    root that traced, on both sides, and compares outputs (minutes).
    """
    start = time.perf_counter()
    result = ArchResult(arch, v3_name)
    pkg_dir = root / parent / v3_name
    prefer = (pkg_dir, *(root / parent / m for m in migrated if m != v3_name))
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    names = module_names(pkg_dir, parent)
    try:
        failures = _import_all(names, prefer)
        result.steps += failures or [Step("L1", True, f"{len(names)} modules")]
        _climb(result, root, parent, arch, v3_name, v2_prefix, prefer, work, l5)
    except Stopped:
        pass  # (said below)
    except Exception as exc:  # noqa: BLE001 - an instrument error is reported, not raised
        f = archbuild.failure("ladder", exc, prefer)
        result.steps.append(Step("L2", False, f"ladder error: {f.line()}", f.where, "setup"))
    if stop_reason is not None:
        _stopped(result, stop_reason)
    result.seconds = round(time.perf_counter() - start, 1)
    return result


def _stopped(result: ArchResult, why: str) -> None:
    """The package ends at its first failure, which says it was stopped (the stop may have
    surfaced as another error: an import turns it into an ImportError); a next rung says so
    when nothing failed."""
    failed = next((k for k, step in enumerate(result.steps) if not step.ok), None)
    if failed is None:
        rungs = [step.rung for step in result.steps]
        result.steps.append(Step(f"L{int(max(rungs)[1:]) + 1}" if rungs else "L1", False, why, side="setup"))
        return
    step = result.steps[failed]
    detail = step.detail if why in step.detail else f"{why}; there: {step.detail}"
    result.steps[failed:] = [Step(step.rung, False, detail, step.where, "setup")]


#: the first pass's verdict on a pipeline model of a kind the ladder does not build (diffusion, ...)
_CANNOT_BUILD = "the ladder cannot build this pipeline model"


def _climb(result: ArchResult, root: Path, parent: str, arch: str, v3_name: str, v2_prefix: str,
           prefer: tuple[Path, ...], work: Path | None, l5: bool = False) -> None:
    if not (root / parent / arch / "arch.py").is_file():
        _climb_roots(result, root, parent, arch, v3_name, v2_prefix, prefer, l5)
        return
    arch2 = importlib.import_module(f"{v2_prefix}.{arch}.arch")
    entries2 = archbuild.arch_entries(arch2)
    result.entries = [e.name for e in entries2]
    try:
        arch3 = importlib.import_module(f"{parent}.{v3_name}.arch")
    except Exception as exc:  # noqa: BLE001 - already an L1 failure; L2 cannot start
        f = archbuild.failure("import arch", exc, prefer)
        result.steps.append(Step("L2", False, f"the migrated arch.py does not import: {f.error}", f.where))
        return
    entries3 = {e.name: e for e in archbuild.arch_entries(arch3)}
    if not entries2:
        result.steps.append(Step("L2", False, "arch.py registers no SupportedArchitecture", side="setup"))
        return
    entry2 = entries2[0]
    entry3 = entries3.get(f"{entry2.name}_ModuleV3") or entries3.get(entry2.name)
    result.probed = entry2.name
    if entry3 is None:
        result.steps.append(Step("L2", False, f"the migrated arch.py registers no {entry2.name}_ModuleV3"))
        return
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        try:
            ckpt = archbuild.tiny_checkpoint(entry2.name, arch, Path(tmp) / "ckpt", root / parent / arch)
        except Exception as exc:  # noqa: BLE001
            f = archbuild.failure("tiny config", exc)
            if _package_classes(root, parent, arch, v2_prefix):
                result.config_notes.append(f"no tiny config for its pipeline model ({f.error}): the package's "
                                           "own root classes are climbed")
                _climb_roots(result, root, parent, arch, v3_name, v2_prefix, prefer, l5,
                             f"no tiny config for the pipeline model: {f.error}")
                return
            result.steps.append(Step("L2", False, f"no tiny config: {f.error}", side="setup"))
            return
        result.model_type = ckpt.model_type
        notes = list(ckpt.notes)
        result.config_notes = ckpt.notes
        encoding = _on_checkpoint(result, ckpt, entry2, entry3, root, parent, arch, v3_name, v2_prefix,
                                  prefer, Path(tmp), l5)
        if encoding is not None:  # V2's own weight adapter gives its weights in another encoding
            notes += [f"V2's weight adapter gives its weights in {encoding}, which a V2 model "
                     f"built in {ckpt.encoding or archbuild.encoding_for(entry2)} does not load: both sides "
                     f"are built in {encoding}"]
            result.steps = [s for s in result.steps if s.rung in ("L0", "L1")]
            ckpt = dataclasses.replace(ckpt.rewritten(Path(tmp) / encoding), encoding=encoding, notes=notes)
            result.config_notes = ckpt.notes
            _on_checkpoint(result, ckpt, entry2, entry3, root, parent, arch, v3_name, v2_prefix, prefer,
                           Path(tmp) / f"{encoding}-build", l5, retry=False)


def _on_checkpoint(result: ArchResult, ckpt: archbuild.Checkpoint, entry2: Any, entry3: Any, root: Path,
                   parent: str, arch: str, v3_name: str, v2_prefix: str, prefer: tuple[Path, ...],
                   tmp: Path, l5: bool, retry: bool = True) -> str | None:
    """The rungs from L2 on, of ``ckpt``; or, with ``retry``, the encoding to build both sides in
    instead, when V2's weight adapter gives the V2 roots' own weights in it (:func:`_adapted_encoding`)."""
    tmp.mkdir(parents=True, exist_ok=True)
    pair = _Pair(entry2, entry3, (v2_prefix, parent), prefer, tmp, f"{parent}.{v3_name}",
                 package_dir=root / parent / arch)
    # first pass, no weights: which modules, which parameters
    ckpt, first2, first3 = pair.first_pass(ckpt)
    if _placeholder(first2, f"{v2_prefix}.{arch}.") and _package_classes(root, parent, arch, v2_prefix):
        # the registry's placeholder (dflash_llama3's builds llama3's Llama3): the package's
        # own model is what another pipeline builds, so its root classes are climbed
        result.config_notes.append(f"its pipeline model builds no module of {arch} (a placeholder for "
                                   "the registry): the package's own root classes are climbed")
        _climb_roots(result, root, parent, arch, v3_name, v2_prefix, prefer, l5,
                     f"its pipeline model builds no module of {arch}: L6 is the pipeline's that builds them")
        return None
    if pair.filled:
        result.config_notes.append("fields the V2 load path stopped on for want of, added: "
                                   + ", ".join(pair.filled))
    if pair.read:
        result.config_notes.append(f"weights the load path reads before building: {', '.join(pair.read)}")
    if pair.settings:
        result.config_notes.append("pipeline settings the V2 load path named as a flag it needs, turned on "
                                   "(both sides): " + ", ".join(pair.settings))
    if first2.defaults:
        result.config_notes.append("class attributes a base of the pipeline model declares and only its other "
                                   "subclasses set, given: "
                                   + ", ".join(f"{k}={v!r}" for k, v in first2.defaults.items()))
    roots = pair.roots(first2, first3)
    if (isinstance(roots, Step) and roots.detail.startswith(_CANNOT_BUILD)
            and _package_classes(root, parent, arch, v2_prefix)):
        result.config_notes.append(f"{roots.detail}: the package's own root classes are climbed")
        _climb_roots(result, root, parent, arch, v3_name, v2_prefix, prefer, l5, roots.detail)
        return None
    if isinstance(roots, Step):  # the first pass already says why
        result.steps += [roots, _l6(first3)]
        return None
    # second pass: a checkpoint with every weight either side has, as both adapters read it
    if pair.accelerator:
        result.config_notes.append("GPU device spec (devices CPU; GPU device refs realised as the CPU device "
                                   "while building and tracing): the V2 load path refuses a CPU spec")
    try:
        names = pair.checkpoint(ckpt, roots)
    except Exception as exc:  # noqa: BLE001 - a V2 root its failed load path left half-built
        if first2.failure is None:
            raise
        f = archbuild.failure("weights of the V2 roots", exc)
        result.steps += [Step("L2", False, f"V2 reference: {first2.failure.line()} (its roots are "
                              f"half-built: {f.error})", first2.failure.where, "v2"), _l6(first3)]
        return None
    # unless a real weight of that name is there (under its checkpoint name, or the V2 root's own)
    names.update({r: sig for r, sig in pair.read.items() if r not in pair.placeholders
                  and not any(n == r or n.endswith("." + r) for n in (*names, *pair.own2))})
    full, loaded = ckpt.with_weights(names, seed=0 if l5 else None)
    built2, built3 = pair.build(full)
    redone = _redtyped(pair, ckpt, roots, built2, names)
    if redone:
        # the V2 load path read dtypes off the checkpoint (a norm dtype taken from a norm weight):
        # on it V2 built other dtypes than on the empty one; the checkpoint is written again with
        # those, so that the reference agrees with its own checkpoint (once: V2 then keeps them)
        result.config_notes.append(f"V2 built {len(redone)} weights in other dtypes on the checkpoint "
                                   f"than on the empty one (e.g. {next(iter(redone))} "
                                   f"{names[next(iter(redone))][1]} -> {next(iter(redone.values()))[1]}): "
                                   "the checkpoint gives them in those")
        names.update(redone)
        full, loaded = ckpt.with_weights(names, seed=0 if l5 else None)
        built2, built3 = pair.build(full)
    if retry and (encoding := _adapted_encoding(pair, full, loaded, built2)) is not None:
        return encoding
    _rungs(result, pair, built2, built3, loaded, full, l5)
    return None


def _adapted_encoding(pair: _Pair, ckpt: archbuild.Checkpoint, loaded: Any, built2: archbuild.Built) -> str | None:
    """The one supported encoding V2's weight adapter casts the V2 roots' own float weights to,
    when that is not the encoding they were built in (qwen3vl_moe's adapter makes every float
    weight bfloat16: its float32 model cannot load its own checkpoint); else None."""
    from migrate_v3.verify import sides

    try:
        own: archbuild.Signature = {}
        for c in built2.roots:
            own.update(sides.v2_signature(c.module))
        adapted = archbuild.adapted_signature(pair.adapter("v2"), loaded, pair.pipeline_config(ckpt), ckpt.hf_config)
    except Exception:  # noqa: BLE001 - a half-built V2 root or an adapter that refuses: the rungs report it
        return None
    moved = {adapted[k][1] for k, (shape, dtype) in own.items()
             if k in adapted and adapted[k][0] == shape and adapted[k][1] != dtype}
    encodings = {str(e) for e in getattr(pair.entry2, "supported_encodings", ()) or ()}
    if len(moved) != 1 or (encoding := moved.pop()) not in encodings:
        return None
    return encoding if encoding != (ckpt.encoding or archbuild.encoding_for(pair.entry2)) else None


def _redtyped(pair: _Pair, ckpt: archbuild.Checkpoint, first: list[_Root], built2: archbuild.Built,
              names: archbuild.Signature) -> archbuild.Signature:
    """Checkpoint name -> signature of each weight the V2 roots built on the checkpoint in another
    dtype than on the first pass (same name and shape), or nothing."""
    from migrate_v3.verify import sides

    before: archbuild.Signature = {}
    for r in first:
        before.update(sides.v2_signature(r.v2.module))
    try:
        after: archbuild.Signature = {}
        for c in built2.roots:
            after.update(sides.v2_signature(c.module))
    except Exception:  # noqa: BLE001 - a half-built V2 root: the rungs report it
        return {}
    if not any(k in before and before[k][0] == sig[0] and before[k][1] != sig[1] for k, sig in after.items()):
        return {}
    own2 = pair.own2
    try:
        again = pair.checkpoint(ckpt, [_Root(type(c.module).__name__, c, None, "") for c in built2.roots])
    except Exception:  # noqa: BLE001 - the names of the first pass stand
        return {}
    finally:
        pair.own2 = own2
    return {k: sig for k, sig in again.items() if k in names and names[k][0] == sig[0] and names[k][1] != sig[1]}


def _package_classes(root: Path, parent: str, arch: str, v2_prefix: str) -> dict[str, type]:
    """The V2 module classes the package's own modules define, by name."""
    from migrate_v3.verify import sides

    v2_modules = [importlib.import_module(n.replace(parent, v2_prefix, 1))
                  for n in module_names(root / parent / arch, parent)]
    return {n: c for m in v2_modules for n, c in vars(m).items()
            if isinstance(c, type) and issubclass(c, sides.v2_base()) and c.__module__ == m.__name__}


def _placeholder(built: archbuild.Built, own: str) -> bool:
    """The V2 pipeline model is the registry's placeholder: its ``execute`` only raises (dflash_llama3's
    says another pipeline runs the draft), and it built modules, none of them a class of the package
    (module prefix ``own``: it built llama3's ``Llama3``)."""

    from migrate_v3.verify.pysource import parsed

    execute = getattr(type(built.pipeline_model), "execute", None)
    tree = parsed(execute) if execute is not None else None
    func = tree.body[0] if tree is not None and tree.body else None
    body = [s for s in func.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))] if isinstance(
        func, ast.FunctionDef) else []
    raises = len(body) == 1 and isinstance(body[0], ast.Raise)
    return raises and bool(built.roots) and not any(type(c.module).__module__.startswith(own) for c in built.roots)


def _climb_roots(result: ArchResult, root: Path, parent: str, arch: str, v3_name: str, v2_prefix: str,
                 prefer: tuple[Path, ...], l5: bool = False, no_pipeline: str = "no arch.py: no pipeline model") -> None:
    """A package without ``arch.py``: its root classes, built as ``verify`` builds them.

    The roots are the V2 classes no other class of the package builds or
    extends; each is built from constructor arguments ``verify`` makes on its
    own (the package's config class filled from the tiny ``transformers``
    config of the package's model type), its V3 class of the same name from
    the same values, and traced with the inputs ``verify`` would feed; ``l5``
    also compiles both and compares them on seeded weights and inputs.
    """
    from migrate_v3.verify import auto, sides
    from migrate_v3.verify.runner import package_roots
    from migrate_v3.verify.spec import BuildContext

    v2_classes = _package_classes(root, parent, arch, v2_prefix)
    v3_classes = archbuild.v3_classes([sys.modules[n] for n in module_names(root / parent / v3_name, parent)
                                       if n in sys.modules])
    roots = package_roots(v2_classes)
    if not roots:
        result.steps.append(Step("L2", False, "no arch.py and no V2 module classes", side="setup"))
        return
    target = sides.make_target("cpu")
    ctx = BuildContext(sides.dtype_of("float32"), target.ref)
    configs = auto.TinyConfigs((arch,), {"dtype": ctx.dtype, "device": ctx.device, "devices": [ctx.device]},
                               root / parent / arch)
    result.probed = "package roots" + (" (no arch.py)" if no_pipeline.startswith("no arch.py") else "")
    for name in roots:
        result.roots.append(name)
        made = auto.auto_case(v2_classes[name], v3_classes[name], None, configs) if name in v3_classes else (
            f"no V3 class {name} in the migrated package")
        if isinstance(made, str):
            side = "v3" if name not in v3_classes else "setup"
            result.steps.append(Step("L2", False, f"{name}: {made}", side=side))
            continue
        try:
            with archbuild.cpu_comm():  # (a V2 Allreduce opens accelerator handles at construction)
                v2 = sides.build_v2(made, v2_classes[name], target, "float32")
        except Exception as exc:  # noqa: BLE001
            f = archbuild.failure(f"construct V2 {name}", exc)
            result.steps.append(Step("L2", False, f"V2 reference: {f.line()}", f.where, "v2"))
            continue
        try:
            v3 = sides.build_v3(made, v3_classes[name], target, "float32")
        except Exception as exc:  # noqa: BLE001
            f = archbuild.failure(f"construct {name}", exc, prefer)
            result.steps.append(Step("L2", False, f"{name}: {f.line()}", f.where))
            continue
        result.steps.append(Step("L2", True, f"{name}: built from verify's automatic case"))
        alignment = align_keys(sides.v2_signature(v2), sides.v3_signature(v3))
        result.steps.append(Step("L3", alignment.ok, f"{name}: " + (
            f"{alignment.v3_parameters} parameters equal" if alignment.ok else
            f"{len(alignment.issues)} weight issues (e.g. {alignment.issues[0].kind} {alignment.issues[0].key})")))
        used: list[Any] = []
        traced = _trace_root(name, made, v2, v3, v2_classes[name], target, prefer, used)
        result.steps.append(traced)
        if l5 and traced.ok and alignment.ok:
            if before_l5 is not None:
                before_l5(result)
            # (compiled anew, not the instance traced: a module may keep a value staged in that graph)
            fresh = sides.build_v3(made, v3_classes[name], target, "float32")
            result.steps.append(_l5_root(name, v2, fresh, used, target, prefer))
    result.steps.append(Step("L6", False, no_pipeline, side="setup"))


def _l5_root(name: str, v2: Any, v3: Any, types: list[Any], target: Any, prefer: tuple[Path, ...]) -> Step:
    """L5 for a package root: both sides compiled with the input types L4 traced with and the same
    seeded weights (V2's names, which L3 found equal to V3's), run on the same seeded inputs
    (token ids below the smallest embedding table's rows)."""
    import numpy as np

    from migrate_v3.verify import sides
    from migrate_v3.verify.compare import compare_output
    from migrate_v3.verify.tensors import random_state_dict

    signature = sides.v2_signature(v2)
    weights = random_state_dict(signature, 0)
    vocab = min((shape[0] for key, (shape, _) in signature.items() if "embed" in key and len(shape) == 2), default=32)
    kv = getattr(type(v2), FLAT_KV_PARAMS, None)  # (a root traced through its flat KV inputs: a real cache)
    arrays = (kv_feed(types, kv, vocab, 1, _feed) if kv is not None else None) or _feed(types, vocab, seed=1)
    start = time.perf_counter()
    try:
        expected = sides.compile_v2(v2, weights, types, target, sides.new_session(target))(arrays)
    except Exception as exc:  # noqa: BLE001
        f = archbuild.failure(f"V2 compile/run {name}", exc)
        return Step("L5", False, f"V2 reference: {f.line()}", f.where, "v2")
    try:
        got = sides.compile_v3(v3, weights, types, target)(arrays)
    except Exception as exc:  # noqa: BLE001
        f = archbuild.failure(f"V3 compile/run {name}", exc, prefer)
        return Step("L5", False, f"{name}: {f.line()}", f.where)
    checks = [compare_output(i, a, b, adt, bdt, None)
              for i, ((a, adt), (b, bdt)) in enumerate(zip(expected, got, strict=False))]
    worst = max((c.max_abs for c in checks), default=0.0)
    size = max((float(np.abs(a.astype(np.float64)).max()) for a, _ in expected if a.size), default=0.0)
    ok = len(expected) == len(got) and all(c.passed for c in checks) and size > 0.0
    return Step("L5", ok, f"{name}: {len(expected)} V2 / {len(got)} V3 outputs, max |diff| {worst:.3g} on "
                f"outputs up to {size:.3g} ({'within' if ok else 'outside'} the dtype tolerance); compile and "
                f"run {time.perf_counter() - start:.0f}s (verify's automatic case, seeded weights)")


def _trace_root(name: str, made: Any, v2: Any, v3: Any, v2_cls: type, target: Any,
                prefer: tuple[Path, ...], used: list[Any] | None = None) -> Step:
    """L4 for a package root: ``trace`` with the input types the V2 module declares for its
    graph (:func:`auto.declared_input_types`: what its pipeline compiles it with), else with
    ``verify``'s automatic inputs and, when those fail, with the optional attention masks
    ``__call__`` takes too (:func:`auto.mask_inputs`). No inputs at all is a failure that
    says why, never a trace with none. The types that traced go into ``used``."""
    from migrate_v3.verify import auto, sides

    declared = auto.declared_input_types(v2)
    attempts: list[tuple[list[Any], str]] = []
    if declared is not None:
        attempts.append((declared[0], f"input types from {declared[1]}"))
    elif made.inputs:
        attempts.append((sides.input_types(made.inputs, target, "float32"), "verify's automatic inputs"))
        masks = auto.mask_inputs(v2_cls, made.inputs)
        if masks:
            attempts.append((sides.input_types([*made.inputs, *masks], target, "float32"),
                             f"verify's automatic inputs and {len(masks)} optional attention mask(s)"))
    else:
        return Step("L4", False, f"{name}: no inputs to trace with ({made.static_reason})", side="setup")
    failed: Step | None = None
    for types, how in attempts:
        try:
            v3.trace(*types)
            if used is not None:
                used[:] = types  # (the input types L5 compiles with)
            return Step("L4", True, f"{name}: traced with {how}")
        except Exception as exc:  # noqa: BLE001
            f = archbuild.failure(f"trace {name}", exc, prefer)
            failed = Step("L4", False, f"{name}: {f.line()} ({how})", f.where)
    assert failed is not None
    if declared is not None:
        v2_failed = _v2_trace_failure(v2, declared[0])
        if v2_failed is not None:
            return Step("L4", False, f"V2 reference: {name} does not stage with its own input types either: "
                        f"{v2_failed.line()} ({attempts[0][1]})", v2_failed.where, "v2")
    return failed


def _v2_trace_failure(v2: Any, types: list[Any]) -> archbuild.Failure | None:
    """How the V2 module fails to stage with ``types`` (None when it stages).

    The V2 pipeline traces a module with the ``input_types()`` it declares: when
    the V2 module does not stage with them either, a V3 trace that fails on them
    is V2's failure, not the migration's. Weights are named by attribute path
    first (as ``state_dict()`` names them, values untouched), as V2's trace needs.
    """
    try:
        for key, weight in v2.raw_state_dict().items():
            weight.name = key
        v2.trace(*types)
    except Exception as exc:  # noqa: BLE001 - the finding
        package = Path(sys.modules[type(v2).__module__].__file__ or ".").parent
        return archbuild.failure(f"trace V2 {type(v2).__name__}", exc, (package,))
    return None


@dataclass
class _Pair:
    """One V2 architecture entry and its migrated entry, built on the same checkpoints."""

    entry2: Any
    entry3: Any
    prefixes: tuple[str, ...]
    prefer: tuple[Path, ...]
    directory: Path
    package3: str  # the migrated package, dotted: its modules say which V3 class a name means
    #: GPU device specs (CPU devices): the V2 load path refused a CPU spec before building anything
    accelerator: bool = False
    #: weights the V2 load path reads before it builds anything (a dtype), given as 1-element tensors
    read: archbuild.Signature = field(default_factory=dict)
    #: of those, names the ladder made up under a prefix the load path wants some tensor under
    #: (``no mtp.* tensors in the checkpoint``): the first pass only, the roots' real ones follow
    placeholders: set[str] = field(default_factory=set)
    #: the V2 package's sources (where the config fields its code reads are found)
    package_dir: Path | None = None
    #: config fields the V2 load path stopped on for want of, added (``path=value``)
    filled: list[str] = field(default_factory=list)
    #: pipeline settings the V2 load path named as a command-line flag it needs, turned on
    #: (``section.field (--flag)``, :func:`tiny.asked_setting`)
    settings: list[str] = field(default_factory=list)
    #: the V2 load path insists on its weight adapter even on the first pass (it asserts one)
    adapter_first: bool = False
    #: the V2 roots' own weight names (before any adapter), once :meth:`checkpoint` ran
    own2: set[str] = field(default_factory=set)
    #: V3 parameters no V2 weight accounts for (the checkpoint got them only for the V3 side)
    v3_only: set[str] = field(default_factory=set)
    #: weight read before building -> the load path's prefixes (:func:`archbuild.load_path_prefixes`)
    #: it was given under, the last one still being tried (:meth:`_prefixed`)
    prefixed: dict[str, list[str]] = field(default_factory=dict)

    def _stand_in_dtype(self, ckpt: archbuild.Checkpoint) -> str:
        """The dtype of a weight read before building: the checkpoint's, bfloat16 in a float8 one
        (an FP8 checkpoint keeps its norms and biases in bfloat16)."""
        encoding = ckpt.encoding or archbuild.encoding_for(self.entry2)
        return "bfloat16" if encoding.startswith("float8") else encoding

    def _quantized(self, ckpt: archbuild.Checkpoint, built: archbuild.Built) -> archbuild.Checkpoint | None:
        """The checkpoint as an FP8 block-scaled one (:data:`tiny.FP8_BLOCK_SCALED`, float8
        encoding, one weight scale, and one per layer's MLP: :func:`tiny.fp8_scale_names`, also under
        each prefix its load path keeps names under, :func:`archbuild.load_path_prefixes`), when a V2 load path that built nothing says it needs a
        quantization config and the architecture supports float8; else None."""
        from migrate_v3.verify import tiny

        encodings = {str(e) for e in getattr(self.entry2, "supported_encodings", ()) or ()}
        if (built.roots or built.failure is None or not _NEEDS_QUANTIZATION.search(built.failure.error)
                or "float8_e4m3fn" not in encodings or ckpt.encoding == "float8_e4m3fn"):
            return None
        ckpt.hf_config.quantization_config = dict(tiny.FP8_BLOCK_SCALED)
        widened = tiny.widen(ckpt.hf_config, tiny.FP8_WIDTHS)
        self.filled.append(f"quantization_config={tiny.FP8_BLOCK_SCALED!r} (encoding float8_e4m3fn)"
                           + (f", widths in whole blocks: {', '.join(widened)}" if widened else ""))
        ckpt = dataclasses.replace(ckpt.rewritten(self.directory / "fp8"), encoding="float8_e4m3fn")
        self.read["weight_scale_inv"] = ((1,), "float32")  # the parser reads the scales' dtype
        prefixes = ("", *archbuild.load_path_prefixes(getattr(self.entry2, "pipeline_model", None)))  # (as it keeps names)
        for name in [p + n for p in prefixes for n in tiny.fp8_scale_names(renamed=not self.adapter_first)]:
            self.read[name] = ((1,), "float32")  # and which layers are quantized, read off the scales
            self.placeholders.add(name)  # (the first pass's: the roots' real scales follow)
        ckpt, _ = ckpt.with_weights(self.read)
        return ckpt

    def _prefixed(self, built: archbuild.Built) -> bool:
        """Give a weight the load path still stops on for want of, though the checkpoint has it under
        that name, under the next prefix its load path keeps names under
        (:func:`archbuild.load_path_prefixes`: a load path that keeps only ``target.*`` names, the
        prefix stripped); the ones given before stay (a target and its draft may each read it from
        their own part). False when it is no such weight or every prefix was tried."""
        name = _weight_read(built)
        if name is None or name not in self.read:
            return False
        tried = self.prefixed.setdefault(name, [])
        untried = [p for p in archbuild.load_path_prefixes(getattr(self.entry2, "pipeline_model", None)) if p not in tried]
        if not untried:
            return False
        tried.append(untried[0])  # (the ones before stay: another part of the load path may read them)
        self.read[untried[0] + name] = self.read[name]
        self.placeholders.add(untried[0] + name)  # (the first pass's: the roots' real ones follow)
        return True

    def _reshaped(self, built: archbuild.Built) -> bool:
        """Give a stand-in weight read before building (1 wide on every axis) the shape the module
        that loads it declares, when its load stops on the shapes differing (:func:`_declared_shape`);
        False when it names no such stand-in."""
        found = _declared_shape(built)
        if found is None:
            return False
        name, shape = found
        stand_in = next((r for r, (s, _) in self.read.items() if (r == name or r.endswith("." + name))
                         and s != shape and all(d == 1 for d in s)), None)
        if stand_in is None:
            return False
        self.read[stand_in] = (shape, self.read[stand_in][1])
        return True

    def _build2(self, ckpt: archbuild.Checkpoint, accelerator: bool) -> archbuild.Built:
        """The V2 side on a first-pass checkpoint (no adapter unless it insists on one)."""
        return archbuild.build(self.entry2, "v2", ckpt, self.prefixes, adapt_weights=self.adapter_first,
                               accelerator=accelerator)

    def _fill(self, ckpt: archbuild.Checkpoint, built: archbuild.Built) -> str | None:
        """Add the config field a V2 load path that built nothing stopped on for want of
        (:func:`tiny.missing_field`), once per field; the ``path=value`` added, or None."""
        from migrate_v3.verify import tiny

        if built.roots or built.failure is None or (found := tiny.missing_field(built.failure.error)) is None:
            return None
        owner, path, value = found
        reads = tiny.package_reads(self.package_dir) if self.package_dir is not None else tiny.ConfigReads()
        done = tiny.fill_missing(ckpt.hf_config, owner, path, reads, self.package_dir, value)
        if done is not None and done in self.filled:
            return None  # added once already and still wanted: not a field this config can give
        return done

    def _setting(self, ckpt: archbuild.Checkpoint, built: archbuild.Built) -> str | None:
        """The pipeline setting a V2 load path that built nothing names as the command-line flag
        it needs (:func:`tiny.asked_setting`: ``--enable-structured-output``), once each; its
        ``section.field``, or None."""
        from migrate_v3.verify import tiny

        text = (built.failure.message or built.failure.error) if built.failure is not None else ""
        if built.roots or "--" not in text:
            return None  # (no flag named: no pipeline config to make)
        found = tiny.asked_setting(text, self.pipeline_config(ckpt))
        if found is None or found in ckpt.settings:
            return None
        self.settings.append(found)
        return found

    def first_pass(self, ckpt: archbuild.Checkpoint
                   ) -> tuple[archbuild.Checkpoint, archbuild.Built, archbuild.Built]:
        """Both sides on the empty checkpoint (no adapters): which modules, which parameters.

        A V2 load path that stops before building anything, or whose graph mixes
        devices (its code places inputs on a GPU itself), is tried again
        with a GPU device spec (CPU devices: :attr:`accelerator`), and with
        each weight it stops on for want of (``KeyError: 'layers.0.norm.weight'``,
        read for its dtype) given as a 1-element tensor (:attr:`read`), up to 8 (of the
        rank the code then unpacks, when it does: :func:`_unpacked_rank`; a placeholder under a
        prefix it wants some tensor under, :func:`_wanted_prefix`, on this pass only; under the
        prefixes its load path keeps names under, in turn, when it still stops on one the checkpoint
        has, :meth:`_prefixed`; in the shape its module declares, when its load refuses the stand-in's,
        :meth:`_reshaped`),
        and each config field it stops on for want of (``'XConfig' object has no
        attribute 'rope_theta'``) added to the tiny config (:attr:`filled`,
        :func:`tiny.fill_missing`: values derived as the tiny config's own are), and each
        pipeline setting it names as the flag it needs (``--enable-structured-output``) turned
        on for both sides (:attr:`settings`).
        """
        built2 = archbuild.build(self.entry2, "v2", ckpt, self.prefixes, adapt_weights=False)
        if not built2.roots and built2.failure is not None and _ADAPTER.search(built2.failure.error):
            self.adapter_first = True  # a load path that insists on its weight adapter gets it
            built2 = self._build2(ckpt, False)
        for accelerator in (False, True):
            if accelerator:
                if built2.failure is None or (built2.roots and not _MIXED_DEVICES.search(built2.failure.error)):
                    break
                retry = self._build2(ckpt, True)
            else:
                retry = built2
            while len(set(self.read) - self.placeholders) + len(self.filled) < 16:
                if (name := _weight_read(retry)) and name not in self.read and len(set(self.read) - self.placeholders) < 8:
                    self.read[name] = ((1,), self._stand_in_dtype(ckpt))
                    ckpt, _ = ckpt.with_weights(self.read)
                elif (prefix := _wanted_prefix(retry)) and not any(r.startswith(prefix) for r in self.read):
                    self.read[prefix + "placeholder"] = ((1,), self._stand_in_dtype(ckpt))
                    self.placeholders.add(prefix + "placeholder")
                    ckpt, _ = ckpt.with_weights(self.read)
                elif (rank := _unpacked_rank(retry)) and self.read and (last := list(self.read)[-1]) and (
                        self.read[last][0] == (1,)):
                    self.read[last] = ((1,) * rank, self.read[last][1])  # the code unpacks its shape
                    ckpt, _ = ckpt.with_weights(self.read)
                elif self._prefixed(retry) or self._reshaped(retry):
                    ckpt, _ = ckpt.with_weights(self.read)
                elif (quantized := self._quantized(ckpt, retry)) is not None:
                    ckpt = quantized
                elif (setting := self._setting(ckpt, retry)) is not None:
                    ckpt = dataclasses.replace(ckpt, settings={**ckpt.settings, setting: True})
                elif (filled := self._fill(ckpt, retry)) is not None:
                    self.filled.append(filled)
                    ckpt = ckpt.rewritten(self.directory / f"config{len(self.filled)}")
                else:
                    break
                retry = self._build2(ckpt, accelerator)
            refused = built2.failure is not None and ACCELERATOR_ONLY.search(built2.failure.error)
            if retry.roots or not accelerator or (refused and not built2.roots):
                # on a GPU spec it builds, or it stops later than the CPU spec's refusal: that is its cause
                built2, self.accelerator = retry, accelerator
        built3 = archbuild.build(self.entry3, "v3", ckpt, self.prefixes, self.prefer, adapt_weights=False,
                                 accelerator=self.accelerator)
        return ckpt, built2, built3

    def v2_pipeline_model(self) -> tuple[str, str] | None:
        """The V2 pipeline model class the migrated ``arch.py`` registers, or that the class it
        registers subclasses (an import MV301 kept, of a sibling's V2 package), and ``file:line``
        of that import (in ``arch.py``, or in the subclass's module); None when there is none."""
        model = getattr(self.entry3, "pipeline_model", None)
        if not isinstance(model, type):
            return None

        def v2(cls: type) -> bool:
            module = cls.__module__
            return any(module.startswith(p + ".") for p in self.prefixes) and not any(
                part.endswith(("_modulev3", "_migrated")) for part in module.split("."))  # (no V3 package's)

        base = next((c for c in model.__mro__ if v2(c)), None)
        if base is None:
            return None
        if base is not model:  # (the subclass's module imports it)
            return base.__name__, _import_site(model, base.__name__)
        arch = getattr(sys.modules.get(f"{self.package3}.arch"), "__file__", None) or ""
        try:
            tree = ast.parse(Path(arch).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            return base.__name__, ""
        return base.__name__, _import_in(arch, tree, base.__name__)

    def classes3(self, pipeline_model: Any = None) -> dict[str, type]:
        """V3 classes visible in the migrated package's modules (defined there, or imported),
        then in the modules of the V3 pipeline model's bases (a migrated sibling it extends)."""
        own = [m for n, m in list(sys.modules.items()) if m is not None and (
            n == self.package3 or n.startswith(self.package3 + "."))]
        bases = [sys.modules[c.__module__] for c in type(pipeline_model).__mro__
                 if c.__module__ in sys.modules and c.__module__.startswith(self.prefixes[-1] + ".")]
        return {**archbuild.v3_classes(bases), **archbuild.v3_classes(own)}

    def build(self, ckpt: archbuild.Checkpoint, adapt_weights: bool = True
              ) -> tuple[archbuild.Built, archbuild.Built]:
        """Both sides' pipelines on ``ckpt`` (on the device spec :meth:`first_pass` chose)."""
        return (archbuild.build(self.entry2, "v2", ckpt, self.prefixes, adapt_weights=adapt_weights,
                                accelerator=self.accelerator),
                archbuild.build(self.entry3, "v3", ckpt, self.prefixes, self.prefer,
                                adapt_weights=adapt_weights, accelerator=self.accelerator))

    def adapter(self, side: str) -> Any:
        from max.graph.weights.format import WeightsFormat

        entry = self.entry2 if side == "v2" else self.entry3
        registered = dict(getattr(entry, "weight_adapters", None) or {}).get(WeightsFormat.safetensors)
        return registered if registered is not None else archbuild.internal_adapter(entry)

    def pipeline_config(self, ckpt: archbuild.Checkpoint) -> Any:
        from migrate_v3.verify import tiny

        return tiny.pipeline_config(ckpt.model_dir, ckpt.weights, ckpt.encoding or archbuild.encoding_for(self.entry2),
                                    archbuild.MAX_SEQ_LEN, self.accelerator, ckpt.speculative, ckpt.hf_config,
                                    ckpt.settings)

    def roots(self, built2: archbuild.Built, built3: archbuild.Built) -> list[_Root] | Step:
        """Each V2 root with its V3 module (built by the V3 pipeline, else replayed), or why not."""
        if not built2.roots:
            why = built2.failure.line() if built2.failure else "the V2 pipeline built no module"
            where = built2.failure.where if built2.failure else ""
            if Path(where.rpartition(":")[0]) == Path(archbuild.__file__):
                # the ladder's own call failed (a pipeline model of another kind: diffusion, ...)
                return Step("L2", False, f"{_CANNOT_BUILD}: {why}", where, "setup")
            incomplete = re.search(r"'(\w+)' object has no attribute '(\w+)'", why)
            if incomplete and incomplete.group(1) == getattr(self.entry2.pipeline_model, "__name__", ""):
                why = (f"the pipeline model {incomplete.group(1)} does not build on its own: its load path reads "
                       f"{incomplete.group(2)!r}, which neither it nor its bases set ({why})")
            return Step("L2", False, f"V2 reference: {why}", where, "v2")
        by_name3 = {type(c.module).__name__: c for c in built3.roots}
        names2 = {type(c.module).__name__ for c in built2.roots}
        spare3 = [c for c in built3.roots if type(c.module).__name__ not in names2]
        classes3 = self.classes3(built3.pipeline_model)
        out = []
        for cap2 in built2.roots:
            name = type(cap2.module).__name__
            cap3 = by_name3.get(name)
            if cap3 is not None:
                out.append(_Root(name, cap2, cap3.module, "the V3 pipeline's load path"))
                continue
            sub3 = next((c for c in spare3 if name in classes3 and isinstance(c.module, classes3[name])), None)
            if sub3 is not None:
                # the V3 pipeline built a subclass of the class of this name (its flat-input root)
                spare3.remove(sub3)
                out.append(_Root(name, cap2, sub3.module,
                                 f"the V3 pipeline's load path (as {type(sub3.module).__name__})"))
                continue
            if spare3 and name not in classes3:
                # the V3 pipeline built a root of another name in this place (V3 renamed it)
                cap3 = spare3.pop(0)
                out.append(_Root(name, cap2, cap3.module,
                                 f"the V3 pipeline's load path (as {type(cap3.module).__name__})"))
                continue
            cls3 = classes3.get(name)
            if cls3 is None:
                why = built3.failure.line() if built3.failure else "it built other modules"
                v2_model = self.v2_pipeline_model()
                if v2_model is not None:  # (its V2 module tree: the import the TODO is on says so)
                    why = (f"the migrated pipeline model is V2's {v2_model[0]} or builds on it, and its "
                           f"load path builds V2 modules: {why}")
                out.append(_Root(name, cap2, None, "", Step(
                    "L2", False, f"{name}: no V3 class of this name in the migrated package, and the V3 "
                    f"load path did not build it ({why})",
                    v2_model[1] if v2_model else built3.failure.where if built3.failure else "")))
                continue
            dtype = (archbuild.dtype_of(built3.model_config) or archbuild.dtype_of(built2.model_config)
                     or archbuild.weights_dtype(cap2.module))
            module3, fail, how = archbuild.replay(cap2, cls3, built2, built3, dtype, self.prefer)
            if fail is not None:
                side = "v3"
                if built2.failure is not None and built2.failure.error == fail.error:
                    side = "v2"  # the V2 load path stopped the same way after building this root
                stop = built3.failure
                if side == "v3" and stop is not None and not built3.roots and stop.error != fail.error:
                    # a user's pipeline stops at its load path before it builds this root (and the replay had
                    # no V3 config to give): that stop is the one to name
                    out.append(_Root(name, cap2, None, "", Step(
                        "L2", False, f"{name}: the V3 load path stopped before building it: {stop.line()} "
                        f"(replaying the V2 call instead: {fail.line()})", stop.where, side)))
                    continue
                out.append(_Root(name, cap2, None, "", Step("L2", False, f"{name}: {fail.line()}", fail.where, side)))
                continue
            out.append(_Root(name, cap2, module3, f"replaying the V2 constructor call with {how}"))
        return out

    def checkpoint(self, ckpt: archbuild.Checkpoint, roots: list[_Root]) -> archbuild.Signature:
        """Checkpoint name -> signature for every weight of every root, on either side."""
        from migrate_v3.verify import sides

        v2: archbuild.Signature = {}
        v3: archbuild.Signature = {}
        for r in roots:
            v2.update(sides.v2_signature(r.v2.module))
            if r.v3 is not None:
                v3.update(sides.v3_signature(r.v3))
        self.own2 = set(v2)
        self.v3_only.clear()
        return archbuild.checkpoint_names((self.adapter("v2"), self.adapter("v3")), v2, v3,
                                          self.pipeline_config(ckpt), ckpt.hf_config, self.directory,
                                          self.v3_only)


#: A V2 reference that refuses to build without an accelerator says so (``only supported on gpu``,
#: ``runs only on NVIDIA SM100``), or, on a GPU spec, opens one (``Device 0 was requested but no
#: devices were found``).
ACCELERATOR_ONLY = re.compile(r"\b(gpus?|accelerators?|sm ?\d{2,3}|nvidia|cuda)\b|no devices were found",
                              re.IGNORECASE)
#: A MAX kernel that validates its inputs are on a GPU (``q's device type was expected to be gpu``:
#: deepseekV3_2's FP8 sparse-attention indexer) has no CPU form: either side stops there on a CPU.
GPU_ONLY_KERNEL = re.compile(r"device type was expected to be gpu\b", re.IGNORECASE)
#: A V2 graph whose code puts some values on a GPU itself (``DeviceRef.GPU()`` input types) mixes
#: devices on a CPU spec: it is built on a GPU spec, as a load path that refuses a CPU is.
_MIXED_DEVICES = re.compile(r"must be on the same device", re.IGNORECASE)
#: A load path that stops for want of a quantization config (a float8-only architecture, or
#: layers that only exist quantized) says so.
_NEEDS_QUANTIZATION = re.compile(r"requires a quantization config|expected a `?quantization_config`?", re.IGNORECASE)
#: A load path that stops because it was given no weight adapter says so.
_ADAPTER = re.compile(r"\badapter\b", re.IGNORECASE)


def _weight_read(built: archbuild.Built) -> str | None:
    """The weight name a load path that built nothing stopped on: ``KeyError: 'layers.0.x.weight'``,
    a key error message that quotes one (``Expected NextN norm key 'a.b.weight' not found``), or one
    that names a weight by its suffix (``Expected e_score_correction_bias in state_dict``)."""

    if built.roots or built.failure is None or not built.failure.error.startswith("KeyError: "):
        return None
    text = built.failure.error.removeprefix("KeyError: ").strip("'\"")
    quoted = re.search(r"'(\w+(?:\.\w+)*\.(?:weight|bias|\w*scale))'", text)  # a message that quotes it
    if quoted:
        return quoted.group(1)
    found = re.fullmatch(r"[\w.]+\.\w+", text) or re.search(r"\b\w+_(weight|bias|scale)\b", text)
    return found.group(0) if found else None


#: ``Value provided to weight 'a.b.weight' had different shape (expected=[Dim(16)], actual=[Dim(1)])``
_DIFFERENT_SHAPE = re.compile(r"weight '(?P<name>[\w.]+)' had different shape \(expected=\[(?P<shape>[^\]]*)\]")


def _declared_shape(built: archbuild.Built) -> tuple[str, tuple[int, ...]] | None:
    """(weight name, the shape its module declares) of a load that stopped on a weight given in
    another shape (``Value provided to weight 'x' had different shape (expected=[Dim(16)], ...)``)."""
    if built.failure is None:
        return None
    found = _DIFFERENT_SHAPE.search(built.failure.message or built.failure.error)
    if found is None:
        return None
    dims = re.findall(r"\d+", found.group("shape"))
    return (found.group("name"), tuple(int(d) for d in dims)) if dims else None


def _wanted_prefix(built: archbuild.Built) -> str | None:
    """The checkpoint prefix a load path that built nothing wants some tensor under
    (``no mtp.* tensors in the checkpoint`` -> ``mtp.``)."""
    if built.roots or built.failure is None:
        return None
    found = re.search(r"\bno ([A-Za-z_]\w*(?:\.\w+)*)\.\*? (?:tensors|weights)\b", built.failure.error)
    return found.group(1) + "." if found else None


def _unpacked_rank(built: archbuild.Built) -> int | None:
    """The rank a load path that built nothing wanted of a 1-element stand-in weight it unpacked
    (``a, b, c, d, e = weight.shape``: ``not enough values to unpack (expected 5, got 1)``)."""
    if built.roots or built.failure is None:
        return None
    found = re.search(r"not enough values to unpack \(expected (\d+), got 1\)", built.failure.error)
    return int(found.group(1)) if found else None


@dataclass
class _Root:
    name: str
    v2: archbuild.Capture
    v3: Any
    how: str
    failed: Step | None = None


def _l6(built3: archbuild.Built) -> Step:
    if built3.reached == "compile":
        return Step("L6", True, "the V3 load path reached compile")
    f = built3.failure
    return Step("L6", False, f.line() if f else "did not reach compile", f.where if f else "")


def _rungs(result: ArchResult, pair: _Pair, built2: archbuild.Built, built3: archbuild.Built,
           loaded: Any, ckpt: archbuild.Checkpoint, l5: bool = False) -> None:
    roots = pair.roots(built2, built3)
    if isinstance(roots, Step):
        result.steps += [roots, _l6(built3)]
        return
    for r in roots:
        _checkpoint()
        result.roots.append(r.name)
        if r.failed is not None:
            result.steps.append(r.failed)
            continue
        result.steps.append(Step("L2", True, f"{r.name}: built by {r.how}"))
        _l3(result, pair, r, loaded, ckpt, built3, len(roots))
        _checkpoint()
        parts = container_parts(r.v3, r.v2.module)
        if parts:  # (the pipeline compiles the parts; the root itself only raises, on both sides)
            for attr, part3, part2 in parts:
                _l4(result, f"{r.name}.{attr}", part3, built3, built2, pair.prefer, part2)
            continue
        traced = _l4(result, r.name, r.v3, built3, built2, pair.prefer, r.v2.module)
        if l5 and traced is not None:
            if before_l5 is not None:
                before_l5(result)
            _l5(result, r, built2, built3, ckpt, pair, (traced, lambda: _v3_weights(pair, loaded, ckpt)))
    result.steps.append(_l6(built3))


def container_parts(module3: Any, module2: Any) -> list[tuple[str, Any, Any]]:
    """A container root's parts: ``(attribute, V3 part, V2 part)`` for each child module both
    sides have, when each side's own call does nothing but raise ``NotImplementedError``
    (``Qwen3VL``: "a container class. Use vision_encoder() or language_model()") — its
    pipeline stages the parts, each as a graph of its own. Empty for any other root."""
    if not (_only_raises(type(module3), "forward") and _only_raises(type(module2), "__call__")):
        return []
    return [(attr, part, getattr(module2, attr)) for attr, part in module3.children
            if getattr(module2, attr, None) is not None]


def _only_raises(cls: type, method: str) -> bool:
    """``cls.<method>``'s body (past a docstring) is one ``raise NotImplementedError(...)``."""
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(cls, method))))
    except (OSError, TypeError, SyntaxError, AttributeError):
        return False
    fn = tree.body[0] if tree.body else None
    if not isinstance(fn, ast.FunctionDef):
        return False
    body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(
        fn.body[0].value, ast.Constant) else fn.body
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def _l3(result: ArchResult, pair: _Pair, root: _Root, loaded: Any, ckpt: archbuild.Checkpoint,
        built3: archbuild.Built, n_roots: int) -> None:
    """The V3 parameters against the checkpoint as the V3 package passes it to ``compile``.

    That is the state dict its load path gave ``Module.compile`` when it got
    there, else the checkpoint through the package's weight adapter.

    The checkpoint holds the V2 roots' weights under the names the V2 adapter
    reads (plus what only the V3 side has).
    """
    from migrate_v3.verify import sides

    name = root.name
    try:
        pc = pair.pipeline_config(ckpt)
        own2 = sides.v2_signature(root.v2.module)
        seen2 = archbuild.adapted_signature(pair.adapter("v2"), loaded, pc, ckpt.hf_config)
        sig3 = sides.v3_signature(root.v3)
        seen3 = archbuild.adapted_signature(pair.adapter("v3"), loaded, pc, ckpt.hf_config)
        for call in built3.compiles:  # what the pipeline compiles with, when it names this root's weights
            compiled = archbuild.weights_signature(call.weights) if call.weights is not None else {}
            if call.module is root.v3 and 2 * len(set(compiled) & set(sig3)) >= len(sig3):
                seen3 = compiled
    except Exception as exc:  # noqa: BLE001
        f = archbuild.failure("weights", exc)
        result.steps.append(Step("L3", False, f"{name}: {f.line()}", f.where))
        return
    missing2 = sorted(set(own2) - set(seen2))
    if missing2:  # the checkpoint does not even give V2 its own weights: the probe failed
        result.steps.append(Step("L3", False, f"{name}: no checkpoint name found for {len(missing2)} V2 "
                                 f"weights (e.g. {missing2[0]}); the V2 adapter needs the whole checkpoint",
                                 side="setup"))
        return
    # several roots (vision + language) share the checkpoint: a root is only checked
    # for its own parameters (missing, shape, dtype), not for the others' weights
    sig2 = seen3 if n_roots == 1 else {k: v for k, v in seen3.items() if k in sig3}
    alignment = align_keys(sig2, sig3)
    via = " after the weight adapters" if set(seen3) != set(own2) else ""
    extra = sorted(k for k in sig3 if k in pair.v3_only)
    if alignment.ok and extra:  # names and shapes agree only because the probe checkpoint has them
        holder = _holder(root.v3, extra[0])
        of = f" of {'an' if type(holder).__name__[0] in 'AEIOU' else 'a'} {type(holder).__name__}" if holder is not None else ""
        result.steps.append(Step(
            "L3", False, f"{name}: {len(extra)} V3 parameters no V2 weight accounts for (e.g. {extra[0]}{of}): "
            "a checkpoint V2 loads has no such tensor, so compile(weights=...) raises KeyError",
            construction_site(root.v3, extra[0])))
        return
    if alignment.ok:
        result.steps.append(Step("L3", True, f"{name}: {len(sig3)} parameters equal{via}"))
        return
    kinds: dict[str, int] = {}
    for issue in alignment.issues:
        kinds[issue.kind] = kinds.get(issue.kind, 0) + 1
    first = alignment.issues[0]
    hint = f"; {alignment.suggestions[0].describe()}" if alignment.suggestions else ""
    summary = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    where = ""
    unexpected = [i.key for i in alignment.issues if i.kind == "unexpected"]
    for path, cls, line in v2_inside(root.v3):
        count = sum(1 for k in unexpected if k.startswith(path + "."))
        if count:  # the V3 root holds a V2 module: its weights are no V3 parameters
            hint = (f"; {count} of them are the weights of {path}, a V2 {cls.__name__} ({cls.__module__}) "
                    f"inside the V3 module: V3 compile() sees no parameters in it") + hint
            where = line
            break
    detail = first.detail
    if first.kind == "dtype":  # name the holder's class, and where it is built
        holder = _holder(root.v3, first.key)
        if holder is not None:  # its class, and the max layer it derives from when another
            name_ = type(holder).__name__
            base = next((c.__name__ for c in type(holder).__mro__ if c.__module__.startswith("max.")), name_)
            detail += f" of {'an' if name_[0] in 'AEIOU' else 'a'} {name_}" + (f" ({base})" if base != name_ else "")
        where = where or construction_site(root.v3, first.key)
    result.steps.append(Step("L3", False, f"{name}: V2 {len(own2)} weights{via} vs V3 {len(sig3)} "
                             f"parameters: {summary} (e.g. {first.kind} {first.key} {detail}){hint}", where))


def _modules(root: Any) -> dict[str, Any]:
    """Dotted path -> module of the V3 ``root`` and its descendants ('' is the root); {} if no tree."""
    try:
        return dict([("", root), *root.descendants])
    except Exception:  # noqa: BLE001 - not a V3 module tree
        return {}


def _class_source(cls: type) -> tuple[str, Any] | None:
    """(source file, its ``ast``) of the module defining ``cls``, or None."""
    import inspect

    try:
        path = inspect.getsourcefile(cls) or ""
        return path, ast.parse(Path(path).read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 - no source
        return None


def _holder(root: Any, key: str) -> Any:
    """The V3 module whose parameter is weight ``key``, or None."""
    return _modules(root).get(key.rpartition(".")[0])


def construction_site(root: Any, key: str) -> str:
    """``file:line`` of the ``self.<attr> = ...`` statement, in the class of its parent module, that
    builds the module holding weight ``key`` (``layers.0.norm.weight``: ``self.norm`` in the class
    of ``layers.0``; a list item: the list's attribute one level up), or ''."""

    parts = key.split(".")[:-1]
    while parts and parts[-1].isdigit():
        parts.pop()
    if not parts:
        return ""
    attr, parent = parts[-1], _modules(root).get(".".join(parts[:-1]))
    owner = type(parent)
    source = _class_source(owner) if parent is not None else None
    if source is None:
        return ""
    path, tree = source
    for cls in ast.walk(tree):
        if not (isinstance(cls, ast.ClassDef) and cls.name == owner.__name__):
            continue
        for node in ast.walk(cls):
            if not isinstance(node, (ast.Assign, ast.AnnAssign)):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name)
                   and t.value.id == "self" for t in targets):
                return f"{path}:{node.lineno}"
    return ""


def v2_inside(root: Any) -> list[tuple[str, type, str]]:
    """V2 modules held by an attribute of the V3 ``root`` or of one of its V3 descendants: (their
    path, their class, ``file:line`` of the statement that imports that class into the module of
    the V3 class holding it, or '')."""
    from max.nn.layer import Module as V2Module

    out: list[tuple[str, type, str]] = []
    for prefix, owner in _modules(root).items():
        for attr, value in vars(owner).items():
            items = list(enumerate(value)) if isinstance(value, (list, tuple)) else [(None, value)]
            for i, item in items:
                if isinstance(item, V2Module):
                    path = ".".join(p for p in (prefix, attr, None if i is None else str(i)) if p)
                    out.append((path, type(item), _import_site(type(owner), type(item).__name__)))
    return out


def _import_site(owner: type, name: str) -> str:
    """``file:line`` of the import binding ``name`` in ``owner``'s module, or ''."""
    source = _class_source(owner)
    return "" if source is None else _import_in(*source, name)


def _import_in(path: str, tree: Any, name: str) -> str:
    """``file:line`` of the import binding ``name`` in module ``tree`` (read from ``path``), or ''."""

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name.rsplit(".", 1)[-1]) == name for a in node.names):
            return f"{path}:{node.lineno}"
    return ""


def _l4(result: ArchResult, name: str, module3: Any, built3: archbuild.Built, built2: archbuild.Built,
        prefer: tuple[Path, ...], module2: Any = None) -> list[Any] | None:
    """Trace ``module3`` with the input types its pipeline compiles with: those types, None on failure."""
    types, source, fail = archbuild.compile_types_for(module3, built3, built2, prefer, module2)
    result.input_types_from = source
    if types is None:
        detail = fail.line() if fail else "no input types"
        result.steps.append(Step("L4", False, f"{name}: {detail}", fail.where if fail else ""))
        return None
    dtype = next((c.default_dtype for c in built3.compiles if c.module is module3), None)
    try:
        with _trace_deadline(TRACE_SECONDS):
            archbuild.trace(module3, types, dtype, built3.accelerator)
    except Stopped as exc:  # (where the trace was when the deadline came: a loop that never ends, say)
        f = archbuild.failure(f"trace {name}", exc, prefer)
        result.steps.append(Step("L4", False, f"{name}: trace stopped (input types from {source})", f.where))
        raise
    except Exception as exc:  # noqa: BLE001
        f = archbuild.failure(f"trace {name}", exc, prefer)
        result.steps.append(Step("L4", False, f"{name}: {f.line()} (input types from {source})", f.where))
        return None
    spec = " on a GPU spec (GPU device refs realised as the CPU device)" if built3.accelerator else ""
    result.steps.append(Step("L4", True, f"{name}: traced with {len(types)} inputs from {source}{spec}"))
    return list(types)


def _feed(types: list[Any], vocab: int, seed: int) -> list[Any]:
    """Seeded inputs for a graph's input types: token ids below the vocabulary, else uniform in [0, 1)
    (a mask or a scale stays positive).

    A symbolic dim gets 2 when its name says batch, else 6; the same name the same size.
    """
    import numpy as np

    from migrate_v3.verify.tensors import NUMPY_DTYPES, to_device_array

    rng = np.random.default_rng(seed)
    sizes: dict[str, int] = {}
    out: list[Any] = []
    for t in types:
        shape = []
        for d in t.shape:
            text = str(d)
            if text.isdigit():
                shape.append(int(text))
            else:
                shape.append(sizes.setdefault(text, 2 if "batch" in text.lower() else 6))
        dtype = str(t.dtype).replace("DType.", "")
        if dtype.startswith(("int", "uint")):
            out.append(rng.integers(1, max(2, vocab - 1), size=shape).astype(NUMPY_DTYPES[dtype]))
        elif dtype in NUMPY_DTYPES or dtype == "bfloat16":
            out.append(to_device_array(rng.random(shape), dtype))  # bfloat16: a Buffer view
        else:
            out.append(rng.random(shape).astype(np.float32))
    return out


def _v3_weights(pair: _Pair, loaded: Any, ckpt: archbuild.Checkpoint) -> dict[str, Any]:
    """The checkpoint as the V3 pipeline's ``_load_state_dict`` gives it (through its adapter)."""
    return archbuild.adapted(pair.adapter("v3"), loaded, pair.pipeline_config(ckpt), ckpt.hf_config)


def _untraced(pair: _Pair, ckpt: archbuild.Checkpoint, root: _Root, built3: archbuild.Built) -> Any:
    """The root's V3 module as the V3 load path builds it again, never traced: L4 traced
    ``root.v3``, and a V2 layer kept inside a V3 module caches graph values per graph (V2's
    ``RotaryEmbedding.freqs_cis``), which a second graph must not read (MAX's verifier: "using
    value defined outside the region"). ``root.v3`` when the load path does not build it."""
    if not any(c.module is root.v3 for c in built3.roots):
        return root.v3
    try:
        again = archbuild.build(pair.entry3, "v3", ckpt, pair.prefixes, pair.prefer, adapt_weights=False,
                                accelerator=pair.accelerator)
    except Exception:  # noqa: BLE001 - the traced one stands
        return root.v3
    same = [c.module for c in again.roots if type(c.module) is type(root.v3)]
    return same[0] if len(same) == 1 else root.v3


def _l5(result: ArchResult, root: _Root, built2: archbuild.Built, built3: archbuild.Built,
        ckpt: archbuild.Checkpoint, pair: _Pair, traced: tuple[list[Any], Callable[[], dict[str, Any]]]) -> None:
    """Compile both sides with the checkpoint's seeded weights, run the same inputs, compare.

    V2: the graph its pipeline handed to the session, with its weights
    registry; V3: ``Module.compile`` with the types and weights its pipeline
    compiled with, or, when its load path never got to compile (a TODO
    stopped it: that is L6's failure), with the types L4 traced with and the
    checkpoint through the V3 adapter. Inputs follow each side's input types:
    V2's graph order, V3's compile order (a paged KV cache's from MAX's cache
    manager, see :mod:`migrate_v3.verify.kv_inputs`).
    """
    from max.driver import CPU
    from max.engine import InferenceSession

    from migrate_v3.verify import sides
    from migrate_v3.verify.compare import compare_output
    from migrate_v3.verify.tensors import to_numpy

    name = root.name
    if built3.accelerator:
        result.steps.append(Step("L5", False, f"{name}: built on a GPU device spec (the V2 load path refuses a "
                                 "CPU one): compiling and running it needs a GPU", side="v2"))
        return
    prefer = pair.prefer
    call = next((c for c in built3.compiles if c.module is root.v3 and c.weights is not None), None)
    own = set(root.v2.module.raw_state_dict())
    registry = next((r for r in built2.registries if own <= set(r)), None)
    if registry is None or not built2.graphs:
        result.steps.append(Step("L5", False, f"{name}: needs the V2 pipeline's graph and weights "
                                 "(it never got there)", side="setup"))
        return
    types3, weights3 = (list(call.input_types), call.weights) if call is not None else (traced[0], None)
    module3 = _untraced(pair, ckpt, root, built3)
    if weights3 is None:
        try:
            params = {k for k, _ in module3.parameters}
            weights3 = {k: v for k, v in traced[1]().items() if k in params}
        except Exception as exc:  # noqa: BLE001
            f = archbuild.failure(f"V3 weights {name}", exc, prefer)
            result.steps.append(Step("L5", False, f"{name}: the checkpoint through the V3 adapter: {f.line()}",
                                     f.where))
            return
    # (a pipeline of several graphs: the one taking as many inputs as the root traced with)
    graph = next((g for g in built2.graphs if len(g.inputs) == len(types3)), built2.graphs[0])
    vocab = int(getattr(ckpt.hf_config, "vocab_size", 0) or getattr(
        getattr(ckpt.hf_config, "text_config", None), "vocab_size", 0) or 32)
    types2 = [value.type for value in graph.inputs]
    kv = built2.kv_params if built2.kv_params is not None else built3.kv_params
    try:
        # a paged KV cache's inputs come from MAX's cache manager (random page indices crash
        # the kernels), and each side gets them in its own order
        inputs2 = None if kv is None else kv_feed(types2, kv, vocab, 1, _feed)
        inputs3 = None if inputs2 is None else kv_feed(types3, kv, vocab, 1, _feed)
    except Exception as exc:  # noqa: BLE001
        f = archbuild.failure(f"KV cache inputs {name}", exc)
        result.steps.append(Step("L5", False, f"{name}: no KV cache inputs on CPU: {f.line()}", f.where, "setup"))
        return
    if inputs2 is None or inputs3 is None:
        inputs2 = inputs3 = _feed(types2, vocab, seed=1)
    target = sides.make_target("cpu")
    start = time.perf_counter()
    try:
        model2 = InferenceSession(devices=[CPU()]).load(graph, weights_registry=registry)
        expected = [to_numpy(o) for o in model2.execute(*sides.to_buffers(inputs2, target))]
    except Exception as exc:  # noqa: BLE001
        f = archbuild.failure(f"V2 compile/run {name}", exc)
        result.steps.append(Step("L5", False, f"V2 reference: {f.line()}", f.where, "v2"))
        return
    try:
        compiled = module3.compile(*types3, weights=weights3)
        got = [to_numpy(o) for o in sides.flatten_outputs(compiled(*sides.to_buffers(inputs3, target)))]
    except Exception as exc:  # noqa: BLE001
        f = archbuild.failure(f"V3 compile/run {name}", exc, prefer)
        result.steps.append(Step("L5", False, f"{name}: {f.line()}", f.where))
        return
    checks = [compare_output(i, a, b, adt, bdt, None)
              for i, ((a, adt), (b, bdt)) in enumerate(zip(expected, got, strict=False))]
    took = time.perf_counter() - start
    import numpy as np

    worst = max((c.max_abs for c in checks), default=0.0)
    size = max((float(np.abs(a.astype(np.float64)).max()) for a, _ in expected if a.size), default=0.0)
    ok = len(expected) == len(got) and all(c.passed for c in checks) and size > 0.0
    result.steps.append(Step("L5", ok, f"{name}: {len(expected)} V2 / {len(got)} V3 outputs, max |diff| "
                             f"{worst:.3g} on outputs up to {size:.3g} "
                             f"({'within' if ok else 'outside'} the dtype tolerance); compile and run {took:.0f}s"
                             + ("" if call is not None else "; V3 compiled with L4's input types and the checkpoint "
                                "through its adapter (its load path stopped before compile)")))
