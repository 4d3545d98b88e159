"""Build what an architecture's pipeline model builds, on CPU, without compiling.

An architecture package registers a ``SupportedArchitecture`` whose pipeline
model loads a checkpoint, builds the root module(s) from the architecture's
config and compiles them. This module runs that load path itself, the way
MAX's pipelines construct a pipeline model, on a tiny checkpoint (see
:mod:`migrate_v3.verify.tiny`: a ``config.json`` shrunk from ``transformers``
and no weights), and stops where compiling would begin:

* every ``Module`` constructed on the way is recorded (with its constructor
  arguments); the *roots* are the ones of the architecture tree that no other
  recorded module contains;
* nothing is compiled: the pipeline gets an ``InferenceSession`` stand-in
  (:class:`RecordingSession`), so a V2 pipeline traces its graphs and hands
  them to nobody, and ``Module.compile`` records its module, input types and
  weights (what the V3 pipeline compiles with) and returns a stand-in;
* layers and pipeline bases that open accelerator handles at construction
  (``Allreduce``, built by ``VocabParallelEmbedding`` and tensor-parallel
  layers; signal buffers) get CPU stand-ins while a side builds
  (:func:`cpu_comm`): one CPU device never all-reduces.

When a migrated (V3) pipeline cannot build its root itself, :func:`replay`
constructs the V3 class of the same name with the arguments the V2 pipeline
used, the V2 config replaced by the V3 side's own config. Everything returns
data (:class:`Built`, :class:`Failure`); nothing here raises for a model that
does not build.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import json
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from migrate_v3.verify import tiny

MAX_SEQ_LEN = 64


@dataclass
class Failure:
    """Why a step stopped: the exception and where it was raised."""

    step: str
    error: str
    where: str = ""
    frames: list[str] = field(default_factory=list)
    #: the whole exception message (``error`` keeps the first 300 characters of its first line)
    message: str = ""

    def line(self) -> str:
        return f"{self.step}: {self.error}" + (f" [{self.where}]" if self.where else "")


@dataclass
class Capture:
    """One module the load path constructed, with its constructor arguments."""

    module: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    #: the recorded module whose constructor was running when this one was constructed
    parent: Capture | None = None


@dataclass
class Built:
    """What one side's pipeline model built before it would compile."""

    side: str
    arch_name: str
    pipeline_model: Any = None
    model_config: Any = None
    roots: list[Capture] = field(default_factory=list)
    compiles: list[CompileCall] = field(default_factory=list)  # the V3 load path's compile calls
    graphs: list[Any] = field(default_factory=list)  # the V2 graphs handed to the session
    registries: list[Any] = field(default_factory=list)  # and the weights registries
    #: (graph, weights registry) handed to the session in one call: which graph holds which weights
    loads: list[tuple[Any, Mapping[str, Any]]] = field(default_factory=list)
    reached: str = ""  # "compile" (V3), "session" (V2) or "" (stopped by an error)
    failure: Failure | None = None
    kv_params: Any = None
    arch_config: Any = None
    #: built on a GPU device spec (:func:`gpu_refs_on_cpu` in force): replays and traces need it too
    accelerator: bool = False
    #: class attributes a base declares without a value, given the value its other subclasses set
    #: (:func:`unset_class_attributes`)
    defaults: dict[str, Any] = field(default_factory=dict)


def failure(step: str, exc: BaseException, prefer: tuple[Path, ...] = ()) -> Failure:
    """A :class:`Failure` whose ``where`` is the innermost frame under ``prefer`` (else the innermost)
    outside the classes migrate-v3 added to the output, when the failure passed through the code that
    called one: that call is the statement its TODO sits on (``layer_idx=`` missing in a
    ``MaskedAttentionWithRope`` is the call's, not the helper's ``super().__init__``)."""
    if os.environ.get("MIGRATE_V3_TRACEBACKS") == "1":  # (debugging a rung: the whole traceback on stderr)
        traceback.print_exception(exc)
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    resolved = [p.resolve() for p in prefer]
    preferred = [f for f in frames if any(Path(f.filename).is_relative_to(p) for p in resolved)]
    callers = [f for f in preferred if not _in_added_class(f.filename, f.lineno or 0)]
    if callers or preferred:
        frame = (callers or preferred)[-1]
        where = f"{frame.filename}:{frame.lineno}"
    if not where and frames:
        where = f"{frames[-1].filename}:{frames[-1].lineno}"
    text = str(exc).strip().splitlines()
    message = f"{type(exc).__name__}: {text[0][:300] if text else ''}".rstrip(": ")
    diagnostic = next((ln.strip() for ln in text[1:] if ln.lstrip().startswith("error:")), None)
    if diagnostic is not None and "failed to verify" in text[0]:  # MAX's first line says nothing of the cause
        message += f" ({diagnostic[:200]})"
    return Failure(step, message, where, [f"{f.filename}:{f.lineno} {f.name}" for f in frames[-8:]],
                   str(exc)[:4000])


def _in_added_class(filename: str, lineno: int) -> bool:
    """Line ``lineno`` of ``filename`` is in a top-level class whose docstring says migrate-v3
    added it (an emitted helper: ``OffsetRMSNorm``, ``MaskedAttentionWithRope``)."""
    import linecache

    lines = linecache.getlines(filename)
    for i in range(min(lineno, len(lines)) - 1, -1, -1):
        if lines[i].startswith("class "):
            return "added by migrate-v3" in "".join(lines[i:i + 8])
        if lines[i].startswith(("def ", "async def ")):
            return False
    return False


def unset_class_attributes(cls: type) -> dict[str, Any]:
    """Class attributes a base of ``cls`` declares (annotated, no value) that neither ``cls``
    nor any base sets, each with the plain value (str, number, bool) the base's other
    subclasses set most often (ties: the first by qualified name).

    A pipeline model registered for lookup only (a draft its fused parent builds) reads
    ``self.norm_method`` that its base declares and only its siblings set; built on its
    own it needs the value a sibling would give it.
    """
    out: dict[str, Any] = {}
    for base in cls.__mro__[1:]:
        for name in vars(base).get("__annotations__", {}):
            if name in out or hasattr(cls, name):
                continue
            votes: dict[Any, list[str]] = {}
            for sub in _subclasses(base):
                value = vars(sub).get(name)
                if sub is not cls and isinstance(value, (str, int, float, bool)):
                    votes.setdefault(value, []).append(sub.__qualname__)
            if votes:
                out[name] = min(votes, key=lambda v: (-len(votes[v]), min(votes[v])))
    return out


def _subclasses(base: type) -> list[type]:
    out: list[type] = []
    stack = [base]
    while stack:
        cls = stack.pop()
        out.append(cls)
        stack.extend(cls.__subclasses__())
    return out


def _recording(init: Callable[..., None], out: list[Capture], seen: set[int],
               building: list[Capture]) -> Callable[..., None]:
    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807 - stands in for __init__
        capture = None
        if id(self) not in seen:  # the most derived __init__ sees the constructor's arguments
            seen.add(id(self))
            capture = Capture(self, args, kwargs, building[-1] if building else None)
            out.append(capture)  # (before its children: the list stays in construction order)
            building.append(capture)
        try:
            init(self, *args, **kwargs)
        except BaseException:
            if capture is not None:  # a module whose constructor raised was never built
                out[:] = [c for c in out if c is not capture]
            raise
        finally:
            if capture is not None:
                building.remove(capture)

    return __init__


@contextlib.contextmanager
def record_constructions(base: type, out: list[Capture]) -> Iterator[None]:
    """Record every instance of a subclass of ``base`` constructed in the block.

    Each class's own ``__init__`` is wrapped for the duration (and put back),
    so the arguments are the ones the constructor got.
    """
    seen: set[int] = set()
    building: list[Capture] = []
    patched: list[tuple[type, Any]] = []
    for cls in dict.fromkeys(_subclasses(base)):
        init = vars(cls).get("__init__")
        if init is None or not inspect.isfunction(init):
            continue
        patched.append((cls, init))
        type.__setattr__(cls, "__init__", _recording(init, out, seen, building))
    try:
        yield
    finally:
        for cls, init in patched:
            type.__setattr__(cls, "__init__", init)


@contextlib.contextmanager
def cpu_comm() -> Iterator[None]:
    """Scoped CPU stand-ins for the accelerator handles V2 layers open at construction.

    ``Allreduce`` (built by ``VocabParallelEmbedding`` and tensor-parallel
    layers) gets CPU devices instead of ``Accelerator(i)``; ``Signals`` and
    ``MulticastPool`` allocate nothing, as in MAX's own compile-only (virtual
    device) mode. One CPU device never all-reduces; on a machine without a GPU
    the real calls fail or crash the interpreter.
    """
    from max.driver import CPU
    from max.nn.comm import allreduce

    def cpu(id: int = 0) -> Any:  # noqa: A002 - Accelerator's own keyword
        return CPU()

    def no_signals(devices: Any) -> list[Any]:
        return []

    def no_pool(*args: Any, **kwargs: Any) -> None:
        return None

    saved = (allreduce.Accelerator, allreduce.Signals.allocate, allreduce.MulticastPool.allocate)
    setattr(allreduce, "Accelerator", cpu)  # noqa: B010 - a scoped stand-in
    setattr(allreduce.Signals, "allocate", staticmethod(no_signals))  # noqa: B010
    setattr(allreduce.MulticastPool, "allocate", staticmethod(no_pool))  # noqa: B010
    try:
        yield
    finally:
        setattr(allreduce, "Accelerator", saved[0])  # noqa: B010
        setattr(allreduce.Signals, "allocate", staticmethod(saved[1]))  # noqa: B010
        setattr(allreduce.MulticastPool, "allocate", staticmethod(saved[2]))  # noqa: B010


@contextlib.contextmanager
def ungrouped_graph_specs() -> Iterator[None]:
    """V2 pipelines' ``compile_graphs`` with every ``GraphSpec`` compiled on its own (scoped): a
    group traces its roles into one graph module, whose graphs the recording session would not
    see; alone, each role's ``Graph`` reaches it (L5 loads the one of the root it compares)."""
    import max.pipelines.lib.graph_specs as specs_module
    import max.pipelines.lib.interfaces.pipeline_model as pipeline_model

    real = specs_module.compile_graphs

    def compile_each(session: Any, specs: Mapping[str, Any]) -> Any:
        return real(session, {role: dataclasses.replace(spec, group=None) for role, spec in specs.items()})

    setattr(pipeline_model, "compile_graphs", compile_each)  # noqa: B010 - a scoped stand-in
    try:
        yield
    finally:
        setattr(pipeline_model, "compile_graphs", real)  # noqa: B010


@contextlib.contextmanager
def gpu_refs_on_cpu(active: bool = True) -> Iterator[None]:
    """GPU device refs realised as the CPU device (``DeviceRef.GPU().to_device()``), while active.

    A graph built for a GPU device spec needs no GPU, but a V3 ``Tensor``
    holds a concrete ``Device`` even under ``F.lazy()``, so constructing a V3
    module for ``DeviceRef.GPU()`` opens an accelerator (``failed to create
    device``). With this stand-in the module constructs and traces (its
    graph keeps the GPU refs); nothing can compile or run that way. Used
    only for load paths that refuse a CPU spec (:attr:`Built.accelerator`).
    """
    if not active:
        yield
        return
    from max.driver import CPU
    from max.graph import type as graph_type

    def cpu(id: int = 0) -> Any:  # noqa: A002 - Accelerator's own keyword
        return CPU()

    saved = graph_type.Accelerator
    setattr(graph_type, "Accelerator", cpu)  # noqa: B010 - a scoped stand-in
    try:
        yield
    finally:
        setattr(graph_type, "Accelerator", saved)  # noqa: B010


@contextlib.contextmanager
def lenient_loads(base: type) -> Iterator[None]:
    """``base.load_state_dict`` ignores missing weights (strict=False): a first pass has none."""
    saved: Any = getattr(base, "load_state_dict")  # noqa: B009 - any Module base
    signature = inspect.signature(saved)

    @functools.wraps(saved)
    def load_state_dict(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.arguments["strict"] = False
        return saved(*bound.args, **bound.kwargs)

    setattr(base, "load_state_dict", load_state_dict)  # noqa: B010
    try:
        yield
    finally:
        setattr(base, "load_state_dict", saved)  # noqa: B010


@dataclass
class CompileCall:
    """One ``Module.compile`` call of a V3 load path: the module, input types, weights."""

    module: Any
    input_types: tuple[Any, ...]
    weights: Any
    default_dtype: Any = None  # the default dtype in force where compile was called


@contextlib.contextmanager
def record_v3_compiles(out: list[CompileCall]) -> Iterator[None]:
    """``Module.compile`` compiles nothing: it records the call and returns a stand-in."""
    from max.experimental.nn import Module
    from max.experimental.tensor import defaults

    saved = Module.compile

    def compile(self: Any, *input_types: Any, **kwargs: Any) -> Any:  # noqa: A001
        out.append(CompileCall(self, input_types, kwargs.get("weights"), defaults()[0]))
        return Anything()

    setattr(Module, "compile", compile)  # noqa: B010
    try:
        yield
    finally:
        setattr(Module, "compile", saved)  # noqa: B010


class Anything:
    """Stands in for whatever a stand-in session returns: every use gives another one."""

    def __getattr__(self, name: str) -> Anything:
        if name.startswith("__"):
            raise AttributeError(name)
        return Anything()

    def __call__(self, *args: Any, **kwargs: Any) -> Anything:
        return Anything()

    def __getitem__(self, key: Any) -> Anything:
        return Anything()

    def __iter__(self) -> Iterator[Any]:
        return iter(())


class RecordingSession:
    """An ``InferenceSession`` stand-in: compiles nothing, records what it was asked.

    ``calls`` holds (method, number of modules constructed by then), so a V2
    load path "reached compile" when the session got a call after the root
    was built (a log-probabilities graph, say, is loaded before it).
    """

    def __init__(self, constructed: list[Capture]) -> None:
        self._constructed = constructed
        self.calls: list[tuple[str, int]] = []
        #: graphs handed to it after a module was built (compile, load), and weights registries
        self.graphs: list[Any] = []
        self.registries: list[Any] = []
        self.loads: list[tuple[Any, Mapping[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, len(self._constructed)))
            if args and type(args[0]).__name__ == "Graph" and self._constructed:
                self.graphs.append(args[0])
            if isinstance(kwargs.get("weights_registry"), Mapping):
                self.registries.append(kwargs["weights_registry"])
                if args and type(args[0]).__name__ == "Graph":
                    self.loads.append((args[0], kwargs["weights_registry"]))
            return Anything()

        return call


def arch_entries(module: ModuleType) -> list[Any]:
    """The ``SupportedArchitecture`` objects an ``arch`` module defines, in order."""
    from max.pipelines.lib import SupportedArchitecture

    return [v for v in vars(module).values() if isinstance(v, SupportedArchitecture)]


def draft_width(entry: Any) -> Any:
    """The ``checkpoint_draft_width`` of ``entry``, else of an entry its package's ``arch`` module
    registers for the same pipeline model (a fused target + draft registers its draft too, and the
    draft's entry says how many tokens the checkpoint drafts); None when none does."""
    own = getattr(entry, "checkpoint_draft_width", None)
    model = getattr(entry, "pipeline_model", None)
    if own is not None or model is None:
        return own
    package = getattr(model, "__module__", "").rpartition(".")[0]
    arch = sys.modules.get(f"{package}.arch") if package else None
    for other in arch_entries(arch) if arch is not None else []:
        if other.pipeline_model is model and other.checkpoint_draft_width is not None:
            return other.checkpoint_draft_width
    return None


def encoding_for(entry: Any) -> str:
    """float32 when the architecture supports it (CPU kernels), else bfloat16, else its default."""
    supported = set(getattr(entry, "supported_encodings", ()) or ())
    for encoding in ("float32", "bfloat16"):
        if encoding in supported:
            return encoding
    return str(entry.default_encoding)


@dataclass
class Checkpoint:
    """A tiny checkpoint directory and what it was made from."""

    model_type: str
    hf_config: Any
    model_dir: Path
    weights: Path
    #: how the config was found and filled: the model type's source, fields the code reads that were added
    notes: list[str] = field(default_factory=list)
    #: the speculative method the package is built for (a draft model is configured), if any
    speculative: str | None = None
    #: the encoding both sides are built with, when not :func:`encoding_for`'s (a quantized one)
    encoding: str | None = None
    #: pipeline settings (``sampling.enable_structured_output``) both sides are built with
    settings: dict[str, Any] = field(default_factory=dict)

    def with_weights(self, names: Signature, seed: int | None = None) -> tuple[Checkpoint, Any]:
        """This checkpoint with tensors under ``names`` (and the loaded ``Weights``).

        Zeros, or with ``seed`` small random values (what a numeric comparison needs).
        """
        path = self.model_dir / "model.safetensors"
        loaded = write_weights(path, names, seed)
        return dataclasses.replace(self, weights=path), loaded

    def rewritten(self, directory: Path) -> Checkpoint:
        """This checkpoint in a new directory, with ``hf_config`` as it is now (a field was added).

        A new directory, not the old one rewritten: MAX keeps the config it
        loaded from a path for the process's lifetime.
        """
        import shutil

        model_dir, _ = tiny.checkpoint_dir(self.hf_config, directory)
        weights = model_dir / self.weights.name
        if self.weights.resolve() != weights.resolve():
            shutil.copyfile(self.weights, weights)
        return dataclasses.replace(self, model_dir=model_dir, weights=weights)


def tiny_checkpoint(arch_name: str, package: str, directory: Path,
                    package_dir: Path | None = None) -> Checkpoint:
    """The tiny ``config.json`` + empty weights for a Hugging Face architecture name.

    With the V2 ``package_dir``: a package whose own names have no
    ``transformers`` config (a draft, a fused speculative model) takes the
    model type of the sibling packages it builds on, and the config gets the
    fields the package's code (and its siblings') reads and the
    ``transformers`` default lacks (:func:`tiny.fill_reads`).
    """
    bare = arch_name.removesuffix("_ModuleV3")
    types = tiny.model_types(bare, package)
    notes: list[str] = []
    if not types and package_dir is not None:
        types = tiny.sibling_model_types(package_dir)
        if types:
            notes.append(f"model type {types[0]!r} from the sibling packages it imports")
        elif types := tiny.importer_model_types(package_dir):
            notes.append(f"model type {types[0]!r} from the sibling packages that import it")
    if not types:
        raise LookupError(f"no transformers config class for {arch_name!r} (nor {package!r})")
    hf = tiny.tiny_hf_config(types[0], [bare])
    if package_dir is not None:
        filled = tiny.fill_reads(hf, tiny.package_reads(package_dir))
        if filled:
            notes.append("fields the code reads, added: " + ", ".join(filled))
    widths = tiny.MODEL_WIDTHS.get(types[0], {})
    for key, value in widths.items():
        setattr(hf, key, value)
    if widths:
        notes.append(f"{types[0]}'s kernels need " + ", ".join(f"{k}={v}" for k, v in widths.items()))
    method = tiny.speculative_method(package_dir) if package_dir is not None else None
    if method:
        notes.append(f"speculative method {method!r}, the same checkpoint as its draft")
    model_dir, weights = tiny.checkpoint_dir(hf, directory)
    return Checkpoint(types[0], hf, model_dir, weights, notes, method)


def _memory_plan() -> Any:
    from max.pipelines.lib.device_specs import DeviceSpec
    from max.pipelines.lib.memory_estimation import MemoryPlan

    return MemoryPlan(
        planned_max_batch_size=1, footprint=0, planned_max_length=MAX_SEQ_LEN,
        available_cache_memory=1 << 24, device_specs=(DeviceSpec.cpu(),),
        planned_max_batch_total_tokens=MAX_SEQ_LEN,  # what the registry plans for archs that need a cap
    )


def _root_filter(prefixes: tuple[str, ...]) -> Callable[[type], bool]:
    def keep(cls: type) -> bool:
        return any(cls.__module__ == p or cls.__module__.startswith(p + ".") for p in prefixes)

    return keep


def _contained(module: Any, side: str) -> list[Any]:
    if side == "v2":
        return [m for _, m in module.named_modules() if m is not module]
    return [m for _, m in module.descendants]


def roots_of(captures: list[Capture], side: str, keep: Callable[[type], bool]) -> list[Capture]:
    """The top modules of the architecture tree among those recorded.

    A root is recorded, defined under the architecture tree, contained by no
    other recorded module, not constructed while the constructor of another
    such module ran (per-device shards a layer keeps in a plain list; the
    layers of a root whose constructor raised), and
    not of a class that occurs inside another root (a V2 layer's per-device
    shards are built as modules of their own).
    """
    mine = [c for c in captures if keep(type(c.module))]

    def built_inside(c: Capture) -> bool:  # (a constructor that raised took its capture away: still inside)
        parent = c.parent
        while parent is not None:
            if keep(type(parent.module)):
                return True
            parent = parent.parent
        return False

    mine = [c for c in mine if not built_inside(c)]
    inside: set[int] = set()
    classes_inside: dict[int, set[type]] = {}
    for c in captures:
        try:
            children = _contained(c.module, side)
        except Exception:  # noqa: BLE001 - a half-built module has no children to give
            continue
        inside.update(id(m) for m in children)
        classes_inside[id(c.module)] = {type(m) for m in children}
    tops: list[Capture] = []
    for c in mine:
        if id(c.module) not in inside and all(c.module is not t.module for t in tops):
            tops.append(c)
    return [c for c in tops
            if not any(type(c.module) in classes_inside.get(id(t.module), ()) for t in tops if t is not c)]


def build(entry: Any, side: str, checkpoint: Checkpoint, prefixes: tuple[str, ...],
          prefer: tuple[Path, ...] = (), adapt_weights: bool = True, accelerator: bool = False) -> Built:
    """Construct ``entry``'s pipeline model on the tiny checkpoint; keep what it built.

    ``prefixes`` are the module-name prefixes of the architecture tree (roots
    are modules whose class is defined under one of them); ``prefer`` the
    directories whose frames name a failure's place. ``adapt_weights=False``
    is a first pass on an empty checkpoint: no weight adapter (adapters may
    expect weights to be there) and ``load_state_dict`` calls that do not
    insist on every weight (:func:`lenient_loads`). ``accelerator``: the
    model config's device spec is GPU 0 (see :func:`tiny.pipeline_config`).
    """
    from max.driver import CPU
    from max.graph.weights import load_weights
    from max.graph.weights.format import WeightsFormat
    from max.nn.transformer import ReturnLogits

    out = Built(side, entry.name, accelerator=accelerator)
    try:
        pc = tiny.pipeline_config(checkpoint.model_dir, checkpoint.weights, checkpoint.encoding or encoding_for(entry),
                                  MAX_SEQ_LEN, accelerator, checkpoint.speculative, checkpoint.hf_config,
                                  checkpoint.settings, draft_width(entry))
    except Exception as exc:  # noqa: BLE001 - reported as the failure
        out.failure = failure("pipeline config", exc, prefer)
        return out
    cls = entry.pipeline_model
    pm = cls.__new__(cls)
    out.pipeline_model = pm
    out.defaults = unset_class_attributes(cls)
    for name, value in out.defaults.items():  # the instance's own: the class is untouched
        setattr(pm, name, value)
    captures: list[Capture] = []
    session = RecordingSession(captures)
    adapters = dict(getattr(entry, "weight_adapters", None) or {})
    kwargs = dict(
        pipeline_config=pc, session=session, devices=[CPU()],
        kv_cache_config=pc.model.kv_cache, weights=load_weights([checkpoint.weights]),
        adapter=adapters.get(WeightsFormat.safetensors) if adapt_weights else None,
        return_logits=ReturnLogits.LAST_TOKEN,
        max_batch_size=1, memory_plan=_memory_plan(),
    )
    accepted = inspect.signature(cls.__init__).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in accepted}
    configs: list[Any] = []
    made = getattr(pm, "_create_model_config", None)
    if callable(made):
        def create(*args: Any, **kw: Any) -> Any:
            configs.append(made(*args, **kw))
            return configs[-1]

        pm._create_model_config = create  # the instance's own: the class is untouched
    base = _module_base(side)
    # the V2 reference never insists on every weight: a checkpoint name the ladder
    # could not find must not stop it from building the rest
    lenient = lenient_loads(base) if side == "v2" or not adapt_weights else contextlib.nullcontext()
    try:
        with _scope(side, out.compiles, accelerator=accelerator), record_constructions(base, captures), lenient:
            cls.__init__(pm, **kwargs)
    except Exception as exc:  # noqa: BLE001 - where the load path stops is the finding
        out.failure = failure("load path", exc, prefer)
    if side == "v3":
        if out.compiles:
            out.reached = "compile"
        elif out.failure is None:
            out.failure = Failure("load path", "finished without calling Module.compile")
    elif any(n > 0 for _, n in session.calls):
        out.reached = "session"
    out.graphs, out.registries, out.loads = session.graphs, session.registries, session.loads
    out.kv_params = getattr(pm, "kv_params", None)
    if out.compiles:
        out.roots = [Capture(c.module, (), {}) for c in out.compiles]
    else:
        out.roots = roots_of(captures, side, _root_filter(prefixes))
    vars(pm).pop("_create_model_config", None)
    out.model_config = configs[0] if configs else _model_config(pm, side, accelerator)
    out.arch_config = vars(pm).get("arch_config")
    return out


@contextlib.contextmanager
def _scope(side: str, compiles: list[CompileCall], dtype: Any = None, accelerator: bool = False
           ) -> Iterator[None]:
    """CPU stand-ins for accelerator handles (and, on a GPU spec, GPU device refs); for V3 also
    ``F.lazy()``, recorded compiles, dtype."""
    if side == "v2":
        with cpu_comm(), gpu_refs_on_cpu(accelerator), ungrouped_graph_specs():
            yield
        return
    from max.experimental import functional as F
    from max.experimental.tensor import default_dtype

    with F.lazy(), record_v3_compiles(compiles), cpu_comm(), gpu_refs_on_cpu(accelerator):
        if dtype is None:
            yield
        else:
            with default_dtype(dtype):
                yield


def _module_base(side: str) -> type:
    if side == "v2":
        from max.nn.layer import Module as V2Module

        return V2Module
    from max.experimental.nn import Module as V3Module

    return V3Module


def _model_config(pm: Any, side: str, accelerator: bool) -> Any:
    """The model config a pipeline model whose load path never made one makes now, if it can
    (in the side's scope: a V3 ``_create_model_config`` that also builds the model builds it
    under ``F.lazy()``, not by compiling random initializers)."""
    try:
        with _scope(side, [], accelerator=accelerator):
            return pm._create_model_config({})
    except Exception:  # noqa: BLE001 - replay falls back to the V2 config
        return None


def v3_classes(modules: list[ModuleType]) -> dict[str, type]:
    """V3 ``Module`` classes visible in ``modules`` by name (defined there first, then imported)."""
    from max.experimental.nn import Module as V3Module

    defined: dict[str, type] = {}
    imported: dict[str, type] = {}
    for module in modules:
        for name, value in vars(module).items():
            if isinstance(value, type) and issubclass(value, V3Module) and value is not V3Module:
                target = defined if value.__module__ == module.__name__ else imported
                target.setdefault(name, value)
    return {**imported, **defined}


def replay(v2: Capture, v3_cls: type, built2: Built, built3: Built, dtype: Any = None,
           prefer: tuple[Path, ...] = ()) -> tuple[Any, Failure | None, str]:
    """Construct ``v3_cls`` under ``F.lazy()`` with the V2 root's arguments.

    An argument that is the V2 side's model (or arch) config is replaced by
    the V3 side's. Returns (module or None, failure, which config it got).
    """
    from max.driver import CPU

    swap = {id(a): b for a, b in ((built2.model_config, built3.model_config),
                                  (built2.arch_config, built3.arch_config))
            if a is not None and b is not None}

    def _swap(value: Any) -> Any:
        return swap.get(id(value), value)

    args = tuple(_swap(a) for a in v2.args)
    kwargs = {k: _swap(v) for k, v in v2.kwargs.items()}
    swapped = any(a is not b for a, b in zip(args, v2.args, strict=True)) or any(
        kwargs[k] is not v for k, v in v2.kwargs.items()
    )
    how = "the V3 pipeline's config" if swapped else "the V2 arguments as they are"
    kv = built3.kv_params if built3.kv_params is not None else built2.kv_params
    if kv is not None and "kv_params" not in kwargs:
        # a V3 root that also takes the KV-cache parameters (V2 gave them to the pipeline only)
        try:
            names = list(inspect.signature(v3_cls).parameters)
        except (TypeError, ValueError):
            names = []
        if "kv_params" in names and names.index("kv_params") >= len(args):
            kwargs["kv_params"] = kv
            how += ", and the pipeline's kv_params"
    try:
        params = inspect.signature(v3_cls).parameters
    except (TypeError, ValueError):
        params = None
    if params is not None and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        # V3 layers take no dtype/device (apply drops them at a call site the same way)
        placement = [k for k in ("dtype", "device", "devices") if k in kwargs and k not in params]
        for k in placement:
            del kwargs[k]
        if placement:
            how += f", without V2's {'/'.join(placement)}"
    try:
        with _scope("v3", [], dtype, accelerator=built3.accelerator):
            module = v3_cls(*args, **kwargs)
            module.to(CPU())
        return module, None, how
    except Exception as exc:  # noqa: BLE001 - the finding
        return None, failure(f"construct {v3_cls.__name__}", exc, prefer), how


def trace(root: Any, types: tuple[Any, ...], dtype: Any = None, accelerator: bool = False) -> None:
    """``Module.trace`` (the front half of ``compile``), under the default dtype compile had
    (and :func:`gpu_refs_on_cpu` for a root built on a GPU spec)."""
    from max.experimental.tensor import default_dtype

    with gpu_refs_on_cpu(accelerator), default_dtype(dtype) if dtype is not None else contextlib.nullcontext():
        root.trace(*types)


def compile_types_for(root: Any, built3: Built, built2: Built, prefer: tuple[Path, ...] = (),
                      root2: Any = None) -> tuple[tuple[Any, ...] | None, str, Failure | None]:
    """The input types the pipeline compiles ``root`` with, and where they came from.

    In order: the V3 load path's own ``compile`` call; the root's
    ``input_types(kv_params)`` (or the leaves of its ``input_tree(kv_params)``, of which
    MAX's ``input_types`` are the leaves: :func:`declared_types`); the V3 pipeline base's
    ``_get_compile_input_types(config)`` when ``forward`` can take that many; the
    inputs of the V2 graph loaded with the weights of ``root2`` (the V2 root:
    :func:`v2_graph_types`), when the pipeline's types are for another graph
    (a vision root of a vision + language model) or it has none; the V2 root's own
    declared types, what the V2 pipeline's graph builder gives its graph
    (``GraphSpec(model, name, model.input_types(kv_params))``) when the V2 load path
    stopped before handing a graph to the session.
    """
    for call in built3.compiles:
        if call.module is root:
            return call.input_types, "the V3 pipeline's compile call", None
    kv = built3.kv_params if built3.kv_params is not None else built2.kv_params
    own, how, tried = declared_types(root, kv, prefer)
    if own is not None:
        return own, how, None
    pm = built3.pipeline_model
    getter = getattr(pm, "_get_compile_input_types", None)
    pipeline: tuple[Any, ...] | None = None
    if callable(getter):
        try:
            pipeline = tuple(getter(built3.model_config))
        except Exception as exc:  # noqa: BLE001
            tried = tried or failure("_get_compile_input_types", exc, prefer)
    if pipeline is not None and takes(root, len(pipeline)):
        return pipeline, "the V3 pipeline's _get_compile_input_types", None
    v2_types = v2_graph_types(root2, built2) if root2 is not None else None
    if v2_types is not None and (pipeline is None or takes(root, len(v2_types))):
        return v2_types, "the V2 graph loaded with this root's weights", None
    if root2 is not None and v2_types is None:
        theirs, how2, _ = declared_types(root2, built2.kv_params if built2.kv_params is not None else kv, prefer)
        if theirs is not None and (pipeline is None or takes(root, len(theirs))):
            return theirs, f"the V2 root's {how2}", None
    if pipeline is not None:
        return pipeline, "the V3 pipeline's _get_compile_input_types", None
    return None, "", tried or Failure("input types", "the root has no input_types() and the pipeline none")


#: the methods a MAX root declares its graph's inputs with: ``input_types`` (flat) and
#: ``input_tree`` (named, whose leaves are ``input_types``)
_DECLARING = ("input_types", "input_tree")


def declared_types(module: Any, kv: Any, prefer: tuple[Path, ...] = ()
                   ) -> tuple[tuple[Any, ...] | None, str, Failure | None]:
    """The graph input types ``module`` declares (``input_types(kv_params)``, else the leaves of
    ``input_tree(kv_params)``; the pipeline's ``kv_params`` passed when the method requires an argument or takes one), where
    from, and how the first method that raised failed."""
    tried: Failure | None = None
    for attr in _DECLARING:
        method = getattr(module, attr, None)
        if not callable(method):
            continue
        label = f"{type(module).__name__}.{attr}()"
        try:
            types = method(kv) if _takes_kv(method, kv) else method()
            return tuple(_leaves(types)), label, None
        except Exception as exc:  # noqa: BLE001
            tried = tried or failure(label, exc, prefer)
    return None, "", tried


def _takes_kv(method: Any, kv: Any) -> bool:
    """Whether to hand ``method`` the pipeline's ``kv_params``: when it requires an argument, or
    takes one (``input_types(self, kv_params=None)`` raises without it in max's drivers) and the
    pipeline has them."""
    params = [p for p in inspect.signature(method).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    return any(p.default is p.empty and p.kind is not p.VAR_POSITIONAL for p in params) or (
        kv is not None and bool(params))


def takes(module: Any, count: int) -> bool:
    """Whether ``module.forward`` takes ``count`` positional inputs (True when it cannot be told)."""
    try:
        params = list(inspect.signature(type(module).forward).parameters.values())[1:]
    except (AttributeError, TypeError, ValueError):
        return True
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return sum(p.default is p.empty for p in positional) <= count <= len(positional)


def v2_graph_types(root2: Any, built2: Built) -> tuple[Any, ...] | None:
    """Input types of the V2 graph its load path loaded with the most of ``root2``'s weights
    (its ``state_dict()`` names among the graph's weights registry); None if none has any."""
    try:
        names = set(root2.state_dict())
    except Exception:  # noqa: BLE001 - a V2 root without a state dict: nothing to match on
        return None
    best, shared = None, 0
    for graph, registry in built2.loads:
        count = len(names & set(registry))
        if count > shared:
            best, shared = graph, count
    return tuple(v.type for v in best.inputs) if best is not None else None


def _leaves(value: Any) -> list[Any]:
    from max import tree

    return list(tree.leaves(value))


def dtype_of(config: Any) -> Any:
    """The model dtype a config carries (``dtype`` field), if any."""
    value = getattr(config, "dtype", None)
    return value if value is not None and type(value).__name__ == "DType" else None


def weights_dtype(module2: Any) -> Any:
    """The dtype most of a V2 module's floating-point weights have (None without any): what a V3
    load path builds its counterpart under (``default_dtype(self.dtype)``) when no config says."""
    from collections import Counter

    try:
        counts = Counter(w.dtype for w in module2.raw_state_dict().values() if w.dtype.is_float())
    except Exception:  # noqa: BLE001 - not a V2 module with weights
        return None
    return counts.most_common(1)[0][0] if counts else None



#: Where Hugging Face checkpoints put a model's weights relative to MAX's names:
#: tried to find the checkpoint name a weight adapter maps to a given name.
CHECKPOINT_PREFIXES = ("", "model.", "model.language_model.", "language_model.model.",
                       "language_model.", "model.text_model.")

Signature = dict[str, tuple[tuple[int, ...], str]]

#: max dtype name -> (safetensors dtype code, bytes per element).
_SAFETENSORS = {
    "float32": ("F32", 4), "float16": ("F16", 2), "bfloat16": ("BF16", 2), "float64": ("F64", 8),
    "int64": ("I64", 8), "int32": ("I32", 4), "int16": ("I16", 2), "int8": ("I8", 1),
    "uint64": ("U64", 8), "uint32": ("U32", 4), "uint16": ("U16", 2), "uint8": ("U8", 1),
    "bool": ("BOOL", 1), "float8_e4m3fn": ("F8_E4M3", 1), "float8_e5m2": ("F8_E5M2", 1),
}


def _random_bytes(shape: tuple[int, ...], dtype: str, rng: Any) -> bytes:
    """Seeded values ~ N(0, 0.05^2) in float dtypes (bfloat16: float32's upper half); zeros otherwise."""
    import numpy as np

    count = 1
    for d in shape:
        count *= d
    values = (rng.standard_normal(count) * 0.05).astype(np.float32)
    if dtype in ("float32", "float64", "float16"):
        return values.astype(np.dtype(dtype)).tobytes()
    if dtype == "bfloat16":
        return (values.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    return bytes(_SAFETENSORS.get(dtype, ("F32", 4))[1] * count)


def write_weights(path: Path, names: Signature, seed: int | None = None) -> Any:
    """A safetensors file of tensors under ``names``, loaded as MAX ``Weights``.

    Zeros (sparse: nothing is written), or seeded random values. Written by
    hand (the format is a JSON header and raw bytes) so that every dtype MAX
    has, bfloat16 included, is stored as itself.
    """
    import numpy as np
    from max.graph.weights import load_weights

    header: dict[str, Any] = {}
    offset = 0
    for name, (shape, dtype) in names.items():
        code, size = _SAFETENSORS.get(dtype, ("F32", 4))
        nbytes = size
        for d in shape:
            nbytes *= d
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    rng = np.random.default_rng(seed) if seed is not None else None
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw)
        if rng is None:
            f.truncate(8 + len(raw) + offset)  # the zero bytes of every tensor
        else:
            for shape, dtype in names.values():
                f.write(_random_bytes(shape, dtype, rng))
    return load_weights([path])


def internal_adapter(entry: Any) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """The conversions a pipeline that registers no weight adapter runs in its own load path
    (gemma4's ``convert_safetensor_language_state_dict`` and ``..._vision_...``: functions of its
    package's ``weight_adapters`` module taking one state dict, and any ``**kwargs``), as one adapter of their union, so
    the checkpoint the ladder writes has the names they read (None: the package has none).

    A conversion that raises on some names (it expects another part of the checkpoint with them)
    adds nothing for them; the others still map theirs. When none maps anything and one raised,
    the union raises that: the names are the refusing conversion's, in a shape it refuses (a
    convolution's weight given in a ``Linear``'s 2 axes), so :func:`checkpoint_names` tries them in
    another (:func:`_kernel_shape`) instead of taking "maps to nothing" for "not a checkpoint name"."""
    import importlib

    pipeline_model = getattr(entry, "pipeline_model", None)
    package = getattr(pipeline_model, "__module__", "").rpartition(".")[0]
    try:
        module = importlib.import_module(f"{package}.weight_adapters") if package else None
    except ImportError:
        return None
    conversions = [
        f for n, f in sorted(vars(module).items() if module is not None else ())
        if inspect.isfunction(f) and f.__module__ == getattr(module, "__name__", None)
        and n.startswith("convert_") and n.endswith("state_dict")
        and len([p for p in inspect.signature(f).parameters.values() if p.default is p.empty
                 and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]) == 1  # (``**unused_kwargs`` too)
    ]
    if not conversions:
        return None

    def adapter(state_dict: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        refused: Exception | None = None
        for convert in conversions:
            try:
                out.update(convert(state_dict))
            except Exception as exc:  # noqa: BLE001 - the others still map theirs
                refused = refused or exc
        if refused is not None and not out and state_dict:
            raise refused  # none maps them and one refused them: theirs, in a shape it refuses
        return out

    return adapter


def adapt(adapter: Any, items: dict[str, Any], pc: Any, hf: Any) -> dict[str, Any]:
    """Call a weight adapter the way MAX's pipelines do (with the configs it accepts)."""
    kwargs = {"huggingface_config": hf, "pipeline_config": pc}
    try:
        params = inspect.signature(adapter).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    if params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in params}
    return dict(adapter(items, **kwargs))


def _signature(data: Mapping[str, Any]) -> Signature:
    return {n: (tuple(int(d) for d in w.shape), str(w.dtype).replace("DType.", ""))
            for n, w in data.items()}


def _adapter_module_nodes(adapters: tuple[Any, ...]) -> Iterator[Any]:
    """Every ``ast`` node of the source of each adapter's module (None and unreadable ones skipped)."""
    import ast

    for adapter in adapters:
        module = inspect.getmodule(adapter) if adapter is not None else None
        try:
            tree = ast.parse(inspect.getsource(module)) if module is not None else None
        except (OSError, TypeError, SyntaxError):
            tree = None
        if tree is not None:
            yield from ast.walk(tree)


def adapter_prefixes(*adapters: Any) -> tuple[str, ...]:
    """:data:`CHECKPOINT_PREFIXES` and the dotted prefixes the adapters' modules spell out.

    An adapter that renames ``model.vision_model.`` names has that string in
    its source; it is a checkpoint prefix worth trying.
    """
    import ast

    found: list[str] = list(CHECKPOINT_PREFIXES)
    for node in _adapter_module_nodes(adapters):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and re.fullmatch(r"[A-Za-z_][\w.]*\.", node.value)):
            found.append(node.value)
    return tuple(dict.fromkeys(found))


def load_path_prefixes(cls: type | None) -> tuple[str, ...]:
    """The dotted prefixes a pipeline model's load path keeps names under: the string constants
    its modules (those of ``cls`` and of its bases) test names with (``k.startswith("target.")``),
    in the order first met. A load path that keeps only ``target.*`` names (and strips the prefix)
    reads ``layers.0.x.weight`` from the checkpoint's ``target.layers.0.x.weight``."""
    import ast

    found: list[str] = []
    for klass in getattr(cls, "__mro__", ()):
        module = sys.modules.get(getattr(klass, "__module__", ""))
        try:
            tree = ast.parse(inspect.getsource(module)) if module is not None else None
        except (OSError, TypeError, SyntaxError):
            tree = None
        for node in ast.walk(tree) if tree is not None else ():
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith"
                    and len(node.args) == 1 and isinstance(arg := node.args[0], ast.Constant)
                    and isinstance(arg.value, str) and re.fullmatch(r"[A-Za-z_]\w*(\.\w+)*\.", arg.value)):
                found.append(arg.value)
    return tuple(dict.fromkeys(found))


def adapter_renames(*adapters: Any) -> tuple[tuple[str, str], ...]:
    """The (before, after) name parts the adapters' modules map in a dict literal
    (``{"weight_scale_inv": "weight_scale"}``): a weight named with ``after`` may be read from a
    checkpoint name with ``before``."""
    import ast

    found: list[tuple[str, str]] = []
    for node in _adapter_module_nodes(adapters):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if (isinstance(k, ast.Constant) and isinstance(v, ast.Constant) and isinstance(k.value, str)
                        and isinstance(v.value, str) and re.fullmatch(r"\w+(\.\w+)*", k.value)
                        and re.fullmatch(r"\w+(\.\w+)*", v.value) and k.value != v.value):
                    found.append((k.value, v.value))
    return tuple(dict.fromkeys(found))


def _candidates(key: str, prefixes: tuple[str, ...] = CHECKPOINT_PREFIXES) -> list[str]:
    """Checkpoint names that may be ``key``: it, or it without up to two leading segments,
    under each prefix."""
    parts = key.split(".")
    tails = [".".join(parts[i:]) for i in range(min(3, len(parts)))]
    return list(dict.fromkeys(p + t for t in tails for p in prefixes))


def _segment_dropped(key: str, prefixes: tuple[str, ...] = CHECKPOINT_PREFIXES) -> list[str]:
    """:func:`_candidates` of ``key`` with one inner segment left out: an adapter that inserts a
    segment (``mlp.gate.weight`` -> ``mlp.gate.gate_score.weight``) reads them."""
    parts = key.split(".")
    shorter = [".".join(parts[:i] + parts[i + 1:]) for i in range(1, len(parts) - 1)]
    return list(dict.fromkeys(n for k in shorter for n in _candidates(k, prefixes)))


def _layer_numbered(key: str, depth: int, prefixes: tuple[str, ...] = CHECKPOINT_PREFIXES) -> list[str]:
    """Checkpoint names that may be ``key`` when an adapter maps a numbered layer onto a module of
    its own (DeepSeek-V3's multi-token-prediction layer is ``layers.{num_hidden_layers}`` in the
    checkpoint, ``draft.decoder_layer`` in MAX): ``key``'s first one or two segments replaced by
    ``layers.{depth}`` (the layer after the decoder's last), under each prefix."""
    parts = key.split(".")
    tails = [".".join(parts[i:]) for i in (1, 2) if i < len(parts) - 1]
    return list(dict.fromkeys(f"{p}layers.{depth}.{t}" for t in tails for p in prefixes))


def _depth_of(hf: Any) -> int:
    """The decoder's layer count of a Hugging Face config (its ``num_hidden_layers``, or its
    ``text_config``'s), else :data:`tiny.LAYERS`."""
    for config in (hf, getattr(hf, "text_config", None)):
        value = getattr(config, "num_hidden_layers", None) if config is not None else None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return tiny.LAYERS


def _shapes(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The shape, then its other axis orders (an adapter may transpose a weight)."""
    import itertools

    if len(shape) > 5:
        return [shape]
    return list(dict.fromkeys([shape, *itertools.permutations(shape)]))


class _Probe:
    """Runs an adapter on single zero weights of scratch checkpoints (written as needed)."""

    def __init__(self, directory: Path, prefixes: tuple[str, ...]) -> None:
        self.directory = directory
        self.prefixes = prefixes
        self.items: dict[tuple[str, tuple[int, ...]], Any] = {}
        #: other weights of the checkpoint the adapter is run with (an adapter that reads the
        #: checkpoint's format off its names: any ``*.weight_scale_inv``, an FP8 one)
        self.context: dict[str, Any] = {}
        self._base: dict[int, Signature] = {}

    def ensure(self, wanted: list[tuple[str, tuple[int, ...], str]]) -> None:
        new = [w for w in wanted if (w[0], w[1]) not in self.items]
        if not new:
            return
        path = self.directory / f"probe{len(self.items)}.safetensors"
        stored = {f"{i}/{name}": (shape, dtype) for i, (name, shape, dtype) in enumerate(new)}
        loaded = dict(write_weights(path, stored).items())
        for i, (name, shape, _) in enumerate(new):
            self.items[(name, shape)] = loaded[f"{i}/{name}"]

    def run(self, adapter: Any, name: str, shape: tuple[int, ...], pc: Any, hf: Any) -> Signature:
        if not self.context:
            return _signature(adapt(adapter, {name: self.items[(name, shape)]}, pc, hf))
        if id(adapter) not in self._base:
            self._base[id(adapter)] = _signature(adapt(adapter, self.context, pc, hf))
        base = self._base[id(adapter)]
        got = _signature(adapt(adapter, {**self.context, name: self.items[(name, shape)]}, pc, hf))
        return {k: v for k, v in got.items() if k not in base}

    def within(self, context: dict[str, Any]) -> None:
        """Run the adapters with these other weights from now on."""
        self.context, self._base = context, {}


def checkpoint_names(adapters: tuple[Any, Any], v2: Signature, v3: Signature, pc: Any, hf: Any,
                     directory: Path, v3_only: set[str] | None = None) -> Signature:
    """The checkpoint both packages read: a name and shape per weight of either side.

    For each V2 weight, the checkpoint names (the V2 name and its tails under
    :data:`CHECKPOINT_PREFIXES`, in any axis order) the V2 adapter maps to it;
    when several do, the first the V3 adapter maps onto a V3 parameter wins,
    else the first. V3 parameters that no V2 weight accounts for are added the
    same way through the V3 adapter (so a head one side ties and the other
    does not is in the checkpoint); those whose name no V2 weight gave go into
    ``v3_only``: a checkpoint V2 loads has no such tensor, so ``compile`` on a real one raises
    ``KeyError`` for each. A weight no candidate maps to is kept as is.
    """
    adapter2, adapter3 = adapters
    probe = _Probe(directory, adapter_prefixes(adapter2, adapter3))
    probe.ensure([(n, shape, dtype) for k, (shape, dtype) in {**v3, **v2}.items()
                  for n in _candidates(k, probe.prefixes)])
    renames = adapter_renames(adapter2) if adapter2 is not None else ()
    out: Signature = {}
    covered: set[str] = set()
    chosen: dict[str, tuple[list[tuple[str, tuple[int, ...]]], str, tuple[int, ...], str]] = {}
    for key, (shape, dtype) in v2.items():
        found = _preimages(probe, adapter2, key, (shape, dtype), pc, hf)
        if not found and adapter2 is not None:  # the adapter inserts a segment: try names without one
            shorter = _segment_dropped(key, probe.prefixes)
            probe.ensure([(n, shape, dtype) for n in shorter])
            found = _preimages(probe, adapter2, key, (shape, dtype), pc, hf, shorter)
        if not found and adapter2 is not None:  # the adapter names a numbered layer (an MTP layer)
            numbered = _layer_numbered(key, _depth_of(hf), probe.prefixes)
            probe.ensure([(n, shape, dtype) for n in numbered])
            found = _preimages(probe, adapter2, key, (shape, dtype), pc, hf, numbered)
        renamed = [c.replace(after, before) for c in _candidates(key, probe.prefixes)
                   for before, after in renames if after in c and before not in c]
        if found and renamed:  # the adapter renames a part (weight_scale_inv -> weight_scale): its names too
            probe.ensure([(n, shape, dtype) for n in renamed])
            found += [f for f in _preimages(probe, adapter2, key, (shape, dtype), pc, hf, renamed) if f not in found]
        name, alt = _choose(found, probe, adapter3, v3, pc, hf) if found else (key, shape)
        out[name] = (alt, dtype)
        chosen[key] = (found, name, alt, dtype)
        if adapter3 is not None:
            try:
                covered.update(probe.run(adapter3, name, alt, pc, hf))
            except Exception:  # noqa: BLE001
                pass
        else:
            covered.add(name)
    if adapter3 is not None and any(c not in v3 for c in covered):
        # some names map onto no V3 parameter on their own: the V3 adapter may read the checkpoint's
        # format off its other names (any ``*.weight_scale_inv``: FP8): choose those again among the
        # whole checkpoint's other weights
        _rechoose(probe, adapter3, v3, pc, hf, chosen, out, covered)
    for key, (shape, dtype) in v3.items():
        if key in covered:
            continue
        found = _preimages(probe, adapter3, key, (shape, dtype), pc, hf)
        name, alt = found[0] if found else (key, shape)
        if v3_only is not None and name not in out:  # (a V2 weight's own name: the V3 adapter reads it)
            v3_only.add(key)
        out.setdefault(name, (alt, dtype))
    return out


def _rechoose(probe: _Probe, adapter3: Any, v3: Signature, pc: Any, hf: Any,
              chosen: dict[str, tuple[list[tuple[str, tuple[int, ...]]], str, tuple[int, ...], str]],
              out: Signature, covered: set[str]) -> None:
    """Choose again, with the rest of the checkpoint as the V3 adapter's context, the name of each
    V2 weight whose name the V3 adapter maps (alone) onto no V3 parameter."""
    def misses(name: str, alt: tuple[int, ...]) -> bool:
        try:
            return not all(n in v3 for n in probe.run(adapter3, name, alt, pc, hf))
        except Exception:  # noqa: BLE001
            return True

    again = {k: c for k, c in chosen.items() if len(c[0]) > 1 and misses(c[1], c[2])}
    if not again:
        return
    redo = {c[1] for c in again.values()}
    probe.within({n: probe.items[(n, sig[0])] for n, sig in out.items() if n not in redo and (n, sig[0]) in probe.items})
    try:
        for found, name, alt, dtype in again.values():
            new, new_alt = _choose(found, probe, adapter3, v3, pc, hf)
            if (new, new_alt) != (name, alt) and not misses(new, new_alt):
                del out[name]
                out[new] = (new_alt, dtype)
        covered.clear()
        covered.update(_signature(adapt(adapter3, {n: probe.items[(n, sig[0])] for n, sig in out.items()
                                                   if (n, sig[0]) in probe.items}, pc, hf)))
    except Exception:  # noqa: BLE001 - the names chosen alone stand
        pass
    finally:
        probe.within({})


def _preimages(probe: _Probe, adapter: Any, key: str, sig: tuple[tuple[int, ...], str], pc: Any,
               hf: Any, names: list[str] | None = None) -> list[tuple[str, tuple[int, ...]]]:
    """(checkpoint name, shape) pairs that ``adapter`` maps to exactly ``key`` with ``sig``'s shape.

    A name the adapter maps to ``key`` in another shape (it transposes) is
    tried again in the other axis orders of the shape.
    """
    if adapter is None:
        return [(key, sig[0])]
    found = []
    for name in names if names is not None else _candidates(key, probe.prefixes):
        try:
            got = probe.run(adapter, name, sig[0], pc, hf)
        except Exception:  # noqa: BLE001 - this candidate is not a checkpoint name
            kernel = _kernel_shape(probe, adapter, name, key, sig, pc, hf)
            if kernel is not None:
                found.append((name, kernel))
            continue
        if list(got) != [key]:
            continue
        if got[key][0] == sig[0]:
            found.append((name, sig[0]))
            continue
        others = _shapes(sig[0])[1:]
        probe.ensure([(name, alt, sig[1]) for alt in others])
        for alt in others:
            try:
                if probe.run(adapter, name, alt, pc, hf).get(key, ((),))[0] == sig[0]:
                    found.append((name, alt))
                    break
            except Exception:  # noqa: BLE001
                continue
    return found


def _kernel_shape(probe: _Probe, adapter: Any, name: str, key: str, sig: tuple[tuple[int, ...], str],
                  pc: Any, hf: Any) -> tuple[int, ...] | None:
    """The shape of checkpoint name ``name`` as a convolution's weight, when ``adapter`` refuses it in
    ``key``'s shape and maps it to ``key`` in that shape from a convolution's: a patch embedding MAX
    builds as a ``Linear`` is a ``Conv2d`` / ``Conv3d`` in the checkpoint, which the adapter flattens
    (it unpacks 4 or 5 axes). The kernel axes are 1 wide, so the flattened shape is ``key``'s own."""
    if len(sig[0]) != 2:
        return None
    for extra in (2, 3):
        alt = sig[0] + (1,) * extra
        probe.ensure([(name, alt, sig[1])])
        try:
            if probe.run(adapter, name, alt, pc, hf).get(key, ((),))[0] == sig[0]:
                return alt
        except Exception:  # noqa: BLE001 - not that many axes either
            continue
    return None


def _choose(found: list[tuple[str, tuple[int, ...]]], probe: _Probe, adapter3: Any, v3: Signature,
            pc: Any, hf: Any) -> tuple[str, tuple[int, ...]]:
    if adapter3 is not None:
        for name, alt in found:
            try:
                got = probe.run(adapter3, name, alt, pc, hf)
            except Exception:  # noqa: BLE001
                continue
            if got and all(n in v3 and v3[n][0] == s for n, (s, _) in got.items()):
                return name, alt
    return found[0]


def weights_signature(weights: Mapping[str, Any]) -> Signature:
    """Names, shapes and dtypes of a state dict (``WeightData``, buffers or arrays)."""
    out: Signature = {}
    for name, value in weights.items():
        dtype = getattr(value, "dtype", None)
        out[name] = (tuple(int(d) for d in value.shape), str(dtype).replace("DType.", ""))
    return out


def adapted(adapter: Any, weights: Any, pc: Any, hf: Any) -> dict[str, Any]:
    """What ``adapter`` makes of a checkpoint, as a pipeline's ``_load_state_dict`` gives it;
    the checkpoint's data without one."""
    items = dict(weights.items())
    if adapter is None:
        return {k: v.data() for k, v in items.items()}
    return adapt(adapter, items, pc, hf)


def adapted_signature(adapter: Any, weights: Any, pc: Any, hf: Any) -> Signature:
    """What ``adapter`` makes of a checkpoint (names, shapes, dtypes); the checkpoint without one."""
    return _signature(adapted(adapter, weights, pc, hf))
