"""Plan an ``apply`` run: which targets, where their output goes, in which order.

A package ``foo/`` becomes ``foo_modulev3/`` beside it (or under ``--out``); a
file ``x.py`` becomes ``x_modulev3.py``. Packages are ordered so that a package
comes after the sibling packages it imports (``..llama3``), and each file gets
the map of sibling V2 packages that have (or will have) a V3 variant.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from codemods.base import CallShape, FieldDecl
from codemods.module_interface import call_keywords
from codemods.resolve import statement_blocks
from migrate_v3.classify import classify_bytes
from migrate_v3.knowledge.layers import is_module_class
from migrate_v3.knowledge.symbols import SIBLING_RENAMES
from migrate_v3.pipeline import gc_paused

V3_SUFFIX = "_modulev3"
#: the exports of a module whose names can't be known statically
ANY_NAME = frozenset({"*"})
#: (two patterns: an alternation is tried at every character, a literal prefix is searched for)
_SIBLING_RELATIVE = re.compile(r"^[ \t]*from[ \t]+\.\.+(\w+)", re.M)
_SIBLING_ABSOLUTE = re.compile(r"architectures\.(\w+)")


@dataclass
class Target:
    """One V2 package or file and the V3 output planned for it."""

    source: Path
    dest: Path
    is_package: bool
    #: (source file, path relative to the target root) for every file to write
    files: list[tuple[Path, Path]] = field(default_factory=list)
    #: sibling V2 packages this package imports
    depends_on: set[str] = field(default_factory=set)
    #: ``source`` and ``dest`` as the user spelled them (the argument, ``--out``): what is printed
    shown: Path | None = None
    shown_dest: Path | None = None

    def show(self, rel: Path) -> str:
        """A file of the source as printed: the argument joined with its path in the package."""
        base = self.shown or self.source
        return str(base / rel if self.is_package else base)

    def show_dest(self, rel: Path | None = None) -> str:
        """A file of the output (or the output root) as printed."""
        base = self.shown_dest or self.dest
        return str(base / rel if self.is_package and rel is not None else base)

    @property
    def name(self) -> str:
        return self.source.name if self.is_package else self.source.stem


@dataclass
class Plan:
    targets: list[Target]
    errors: list[str]
    #: V2 package name → V3 package name (existing variants + this run's targets)
    v3_packages: dict[str, str]
    #: dotted module of an EXISTING V3 variant a target imports → its top-level names
    #: (``ANY_NAME`` when they can't be known statically); a module of such a variant
    #: that is not a key does not exist
    v3_exports: dict[str, frozenset[str]] = field(default_factory=dict)
    #: ``pkg.module.Class`` → its attribute names, for the classes of the existing V3
    #: variants a target imports and of their V2 packages (see ``class_attributes``)
    class_attributes: dict[str, frozenset[str]] = field(default_factory=dict)
    #: target name → every ``.name`` its files read (attribute names, by text)
    attribute_reads: dict[str, frozenset[str]] = field(default_factory=dict)
    #: ``pkg.module.Class`` → its ``__init__`` parameters (see ``init_signature``), same classes
    class_signatures: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: target name → the existing variants whose pipeline ``model`` module its files import
    #: names from that the variant has (it then builds that variant's module tree)
    variant_models: dict[str, frozenset[str]] = field(default_factory=dict)
    #: ``pkg.module.Class`` of the same classes that are dataclasses (plain data: a config)
    data_classes: frozenset[str] = frozenset()
    #: ``class_attributes`` plus what each class inherits from bases of the classes read
    #: (``DeepseekV3_2Config`` → its module's ``DeepseekV3Config``'s fields too)
    class_fields: dict[str, frozenset[str]] = field(default_factory=dict)
    #: dotted modules of those V2 siblings that use no V2 API (``check``: neutral; a tokenizer,
    #: a config): a V3 package importing them brings in no V2 graph code
    neutral_modules: frozenset[str] = frozenset()
    #: ``pkg.module.Class.field`` → its declaration, for the dataclasses of those V2 siblings
    field_decls: dict[str, FieldDecl] = field(default_factory=dict)
    #: ``pkg.module.Class`` → the qualified ``max`` library class it subclasses, same classes
    #: (``gemma3.layers.scaled_word_embedding.ScaledWordEmbedding`` → ``max.nn.embedding.VocabParallelEmbedding``)
    library_bases: dict[str, str] = field(default_factory=dict)
    #: ``pkg.module.Class`` → the parameters its instances are called with (its ``forward``, else
    #: ``__call__``; see ``init_signature``), same classes
    call_signatures: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: target name → its calls that may call a module instance with keywords
    #: (``module_interface.call_keywords``: a forward they bind to is called by keyword)
    call_keywords: dict[str, frozenset[CallShape]] = field(default_factory=dict)
    #: ``pkg.module.Class`` of the targets' classes and those of the siblings read that derive
    #: from a ``max`` module class (V2 or V3), through any chain of package classes
    module_classes: frozenset[str] = frozenset()
    #: ``pkg.module.Class`` with no ``__init__`` of its own → the class of ``class_signatures`` whose
    #: ``__init__`` it runs, through a chain of single bases (see ``init_owners``)
    init_owners: dict[str, str] = field(default_factory=dict)


def v3_name(path: Path) -> str:
    return f"{path.name}{V3_SUFFIX}" if path.is_dir() else f"{path.stem}{V3_SUFFIX}{path.suffix}"


def _package_files(root: Path) -> list[tuple[Path, Path]]:
    files = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_dir() or "__pycache__" in rel.parts or path.suffix in (".pyc", ".pyo"):
            continue
        files.append((path, rel))
    return files


def _dependencies(target: Target) -> set[str]:
    deps: set[str] = set()
    for path, _ in target.files:
        if path.suffix != ".py":
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for pattern in (_SIBLING_RELATIVE, _SIBLING_ABSOLUTE):
            for m in pattern.finditer(text):
                name = m.group(1)
                if name != target.name and not name.endswith(V3_SUFFIX):
                    deps.add(name)
    return deps


def plan(paths: list[Path], *, out: Path | None = None, force: bool = False) -> Plan:
    """Targets for ``paths`` in dependency order, plus the sibling-package map.

    A target whose output already exists (and no ``force``) is not written by
    this run: imports of it are checked against what is there, like any
    existing variant's. The ``ast`` trees of the packages read hold no cycles:
    the collector is paused while they are built (``pipeline.gc_paused``).
    """
    with gc_paused():
        return _plan(paths, out, force)


def _plan(paths: list[Path], out: Path | None, force: bool) -> Plan:
    targets: list[Target] = []
    errors: list[str] = []
    seen: set[Path] = set()
    for raw in paths:
        path = raw.resolve()
        if path in seen:
            continue
        seen.add(path)
        if not path.exists():
            errors.append(f"{raw}: no such file or directory")
            continue
        if path.is_dir():
            if path.name.endswith(V3_SUFFIX):
                errors.append(f"{raw}: already a V3 variant (name ends in {V3_SUFFIX})")
                continue
            dest = (out or path.parent) / v3_name(path)
            target = Target(path, dest, True, _package_files(path))
            target.depends_on = _dependencies(target)
        elif path.suffix == ".py":
            dest = (out or path.parent) / v3_name(path)
            target = Target(path, dest, False, [(path, Path(path.name))])
        else:
            errors.append(f"{raw}: not a Python file or package directory")
            continue
        target.shown = raw
        # ("." or ".." name no directory whose parent can be spelled from them)
        target.shown_dest = dest if out is None and raw.name in ("", "..") else (out or raw.parent) / v3_name(path)
        targets.append(target)
    v3_packages: dict[str, str] = {}
    for parent in dict.fromkeys(t.source.parent for t in targets if t.is_package):  # (each folder once)
        names = {entry.name for entry in os.scandir(parent) if entry.is_dir()}
        v3_packages.update((name, f"{name}{V3_SUFFIX}") for name in sorted(names) if f"{name}{V3_SUFFIX}" in names)
    for target in targets:
        if target.is_package:
            v3_packages[target.name] = target.dest.name
    written = [t for t in targets if force or not t.dest.exists()]  # (a blocked target is never transformed)
    run = {t.name for t in written if t.is_package}
    exports: dict[str, frozenset[str]] = {}
    attributes: dict[str, frozenset[str]] = {}
    signatures: dict[str, tuple[str, ...]] = {}
    calls: dict[str, tuple[str, ...]] = {}
    data: set[str] = set()
    bases: dict[str, list[str]] = {}
    single: set[str] = set()
    library: dict[str, str] = {}
    decls: dict[str, FieldDecl] = {}
    read: set[Path] = set()
    parsed: dict[Path, ast.Module | None] = {}  # (each file parsed once: the package's calls read them too)
    neutral: set[str] = set()
    for target in targets:
        for dep in sorted(target.depends_on - run):
            variant = target.source.parent / f"{dep}{V3_SUFFIX}"
            if dep in v3_packages and variant not in read and variant.is_dir():
                read.add(variant)
                trees = module_trees(variant, parsed)  # read once for both
                exports.update(module_exports(variant, trees))
                v2 = target.source.parent / dep
                neutral |= _neutral_modules(v2)
                v2_trees = module_trees(v2, parsed) if v2.is_dir() else None
                decls.update(field_declarations(v2_trees or []))
                decls.update(field_declarations(trees))  # (the variant's own: a kept V2 config may lack them)
                for package, known in ((variant, trees), (v2, v2_trees)):
                    found, inits, datas = class_facts(package, known, calls)
                    attributes.update(found)
                    signatures.update(inits)
                    data |= datas
                    bases.update(class_bases(known or [], single))
                    library.update(library_bases(known or []))
    chased = set(read)
    for parent in dict.fromkeys(t.source.parent for t in targets):
        _chase_inits(parent, chased, parsed, signatures, bases, single)
    readers = [t for t in targets if t.is_package and t.depends_on & {p.name[: -len(V3_SUFFIX)] for p in read}]
    reads: dict[str, frozenset[str]] = {}
    models: dict[str, frozenset[str]] = {}
    for t in readers:
        reads[t.name], models[t.name] = _text_facts(t, v3_packages, exports)
    own_bases, own_library = bases.copy(), library.copy()
    for t in targets:
        if t.is_package:
            _text_class_bases(t, own_bases, own_library)
    return Plan(
        dependency_order(targets), errors, v3_packages, exports, attributes, reads, signatures, models, frozenset(data),
        inherited(attributes, bases), frozenset(neutral), decls, library, calls,
        {t.name: _call_keywords(t, parsed) for t in written},
        module_classes(own_bases, own_library),
        init_owners(signatures, bases, single),
    )


#: a class statement's name and bases (no nested parentheses: ``Module[[Tensor], Tensor]`` is fine)
_CLASS_HEAD = re.compile(r"^class\s+(\w+)\s*\(([^)]*)\)\s*:", re.M)
#: ``from <dots><module> import <names>`` (one line, or parenthesized)
_FROM_IMPORT = re.compile(r"^from\s+(\.*)([\w.]*)\s+import\s+(\([^)]*\)|[^\n#]*)", re.M)


def _text_class_bases(target: Target, bases: dict[str, list[str]], library: dict[str, str]) -> None:
    """``class_bases`` and ``library_bases`` of the target's classes, read off the text (parsing
    every file would cost more than the rest of the plan): a class head's plain-name bases, each
    resolved through the file's ``from`` imports or its own classes."""
    for path, rel in target.files:
        if path.suffix != ".py":
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "class " not in text:
            continue
        stem = rel.with_suffix("").parts
        parts = (target.name, *(stem[:-1] if stem[-1] == "__init__" else stem))
        package = (target.name, *rel.parent.parts)  # what a relative import's first dot names
        homes: dict[str, str] = {}
        libs: dict[str, str] = {}
        for dots, module, listed in _FROM_IMPORT.findall(text):
            names = re.sub(r"#[^\n]*", "", listed)  # (a comment inside the parentheses)
            if dots:
                cut = len(package) - (len(dots) - 1)
                if cut < 0:
                    continue
                home = ".".join([*package[:cut], *([module] if module else [])])
            elif module.startswith(_ARCHITECTURES):
                home = module[len(_ARCHITECTURES):]
            elif module.startswith("max."):
                for name in names.strip("()").split(","):
                    words = name.split()
                    if words:
                        libs[words[-1]] = f"{module}.{words[0]}"
                continue
            else:
                continue
            for name in names.strip("()").split(","):
                words = name.split()
                if words:
                    homes[words[-1]] = f"{home}.{words[0]}"
        heads = _CLASS_HEAD.findall(text)
        local = {name for name, _ in heads}
        for name, listed in heads:
            key = ".".join([*parts, name])
            found: list[str] = []
            for base in listed.split(","):
                base = base.split("[", 1)[0].strip()
                if not base.isidentifier():
                    continue
                if base in local:
                    found.append(".".join([*parts, base]))
                elif base in homes:
                    found.append(homes[base])
                elif base in libs and key not in library:
                    library[key] = libs[base]
            bases.setdefault(key, found)


def module_classes(bases: dict[str, list[str]], library: dict[str, str]) -> frozenset[str]:
    """The classes of ``bases``/``library`` that derive from a ``max`` module class, directly
    (``library``) or through other such classes (``bases``)."""
    found = {key for key, lib in library.items() if is_module_class(lib)}
    grew = True
    while grew:
        more = {key for key, keys in bases.items() if key not in found and any(k in found for k in keys)}
        found |= more
        grew = bool(more)
    return frozenset(found)


#: the parameters of a ``__call__``/``forward`` (after ``self``), and the names in them
_FORWARD = re.compile(r"def (?:__call__|forward)\s*\(\s*self\b(.*?)\)\s*(?:->|:)", re.S)
_PARAM = re.compile(r"(?:^|[(,])\s*(\w+)")


def _call_keywords(target: Target, parsed: dict[Path, ast.Module | None]) -> frozenset[CallShape]:
    """``module_interface.call_keywords`` of the target's files. Only a file that passes by keyword
    a name some forward of the package has as a parameter is parsed (unless ``parsed`` has it): the
    others' calls cannot bind to a forward (parsing every file cost several times the rest of the plan)."""
    texts: dict[Path, str] = {}
    for path, _ in target.files:
        if path.suffix == ".py":
            try:
                texts[path] = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
    names = {name for text in texts.values() for params in _FORWARD.findall(text) for name in _PARAM.findall(params)}
    if not names:
        return frozenset()
    passed = re.compile(r"[(,](?:\s|#.*)*(?:" + "|".join(sorted(names)) + r")\s*=(?!=)")
    trees = (
        parsed[path] if path in parsed else _tree(text)
        for path, text in texts.items() if passed.search(text)
    )
    return call_keywords(tree for tree in trees if tree is not None)


def _tree(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _neutral_modules(package: Path) -> set[str]:
    """The dotted modules of V2 ``package`` that ``check`` finds neutral (no V2 API use)."""
    out: set[str] = set()
    if not package.is_dir():
        return out
    for path in sorted(package.rglob("*.py")):
        try:
            kind = classify_bytes(path.read_bytes(), str(path), check_syntax=False).result.kind
        except OSError:
            continue
        if kind == "neutral":
            parts = path.relative_to(package.parent).with_suffix("").parts
            out.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


ModuleTrees = list[tuple[tuple[str, ...], ast.Module | None]]


def module_trees(package: Path, parsed: dict[Path, ast.Module | None] | None = None) -> ModuleTrees:
    """(dotted module parts, parsed tree or None when unreadable) for every module of ``package``
    (each tree also kept in ``parsed``, by path, when given)."""
    out: ModuleTrees = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        try:
            tree: ast.Module | None = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            tree = None
        if parsed is not None:
            parsed[path] = tree
        out.append((parts, tree))
    return out


def module_exports(package: Path, trees: ModuleTrees | None = None) -> dict[str, frozenset[str]]:
    """Dotted module → names it binds at top level, for every module of ``package``
    (``trees``: its ``module_trees``, when already read).

    A module whose names can't be known statically (``from x import *``,
    ``__getattr__``, unparsable) maps to ``ANY_NAME``: its imports are not checked.
    """
    out: dict[str, frozenset[str]] = {}
    for parts, tree in module_trees(package) if trees is None else trees:
        names = None if tree is None else top_level_names(tree)
        out[".".join(parts)] = ANY_NAME if names is None else frozenset(names)
    return out


def class_facts(
    package: Path, trees: ModuleTrees | None = None, calls: dict[str, tuple[str, ...]] | None = None
) -> tuple[dict[str, frozenset[str]], dict[str, tuple[str, ...]], set[str]]:
    """For each class of ``package`` (``pkg.module.Class``): the names its instances
    have that the class itself defines — class-level assignments and annotations
    (dataclass fields), methods, ``self.x = ...`` in its methods, and the same of
    bases defined in its module — its ``__init__`` parameters (``init_signature``),
    and whether it is a dataclass (decorated, or a base in its module is). ``calls`` (when given)
    gets the parameters of each class's own ``forward`` (else ``__call__``) the same way.

    Attributes of bases from other modules are not included: comparing a V2 class
    with its V3 variant, both usually derive from the same library bases.
    """
    out: dict[str, frozenset[str]] = {}
    inits: dict[str, tuple[str, ...]] = {}
    data: set[str] = set()
    if trees is None and not package.is_dir():
        return out, inits, data
    for parts, tree in module_trees(package) if trees is None else trees:
        if tree is None:
            continue
        classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        for name, node in classes.items():
            key = ".".join([*parts, name])
            out[key] = frozenset(_own_attributes(node, classes, frozenset()))
            init = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
            if init is not None:
                inits[key] = init_signature(init)
            methods = {s.name: s for s in node.body if isinstance(s, ast.FunctionDef)}
            call = methods.get("forward") or methods.get("__call__")
            if calls is not None and call is not None:
                calls[key] = init_signature(call)
            if _is_dataclass(node, classes, frozenset()):
                data.add(key)
    return out, inits, data


def class_bases(trees: ModuleTrees, single: set[str] | None = None) -> dict[str, list[str]]:
    """``pkg.module.Class`` → the keys its bases may have when imported from a sibling module
    (``from ..deepseekV3.model_config import DeepseekV3Config`` or the absolute
    ``max.pipelines.architectures.`` form), both readings of a relative import (the module is a
    file, or a package's ``__init__``): the one that names no class read is never looked up.
    ``single`` (when given) gets the classes with exactly one base (and no metaclass keyword)."""
    out: dict[str, list[str]] = {}
    for parts, tree in trees:
        if tree is None:
            continue
        imported: dict[str, list[str]] = {}
        for node in tree.body:
            if not isinstance(node, ast.ImportFrom) or node.module is None:
                continue
            if node.level:
                cut = len(parts) - node.level
                homes = [".".join([*parts[:c], node.module]) for c in (cut, cut + 1) if 0 <= c < len(parts)]
            elif node.module.startswith(_ARCHITECTURES):
                homes = [node.module[len(_ARCHITECTURES):]]
            else:
                continue
            for alias in node.names:
                imported[alias.asname or alias.name] = [f"{h}.{alias.name}" for h in homes]
        local = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                keys = []
                for base in node.bases:
                    if isinstance(base, ast.Name):
                        keys += [".".join([*parts, base.id])] if base.id in local else imported.get(base.id, [])
                out[".".join([*parts, node.name])] = keys
                if single is not None and len(node.bases) == 1 and not node.keywords:
                    single.add(".".join([*parts, node.name]))
    return out


def _chase_inits(
    parent: Path, read: set[Path], parsed: dict[Path, ast.Module | None],
    inits: dict[str, tuple[str, ...]], bases: dict[str, list[str]], single: set[str],
) -> None:
    """Read the ``__init__``s and bases of the variants (beside the ones ``read``, which this adds
    to: pass a copy) that a class read with no ``__init__`` of its own derives from, through one
    base, until none is left: where ``init_owners`` finds the ``__init__`` it runs
    (glm5_1_modulev3 → deepseekV3_modulev3). Nothing else of them is read."""
    while True:
        wanted = {b.partition(".")[0] for key in single if key not in inits for b in bases.get(key, ())
                  if b.partition(".")[0].endswith(V3_SUFFIX)}
        more = [parent / name for name in sorted(wanted) if (parent / name) not in read and (parent / name).is_dir()]
        if not more:
            return
        for package in more:
            read.add(package)
            trees = module_trees(package, parsed)
            inits.update(class_facts(package, trees)[1])
            for key, keys in class_bases(trees, single).items():
                bases.setdefault(key, keys)


def init_owners(inits: dict[str, tuple[str, ...]], bases: dict[str, list[str]], single: set[str]) -> dict[str, str]:
    """Each class of ``single`` with no ``__init__`` of its own (not in ``inits``) → the class whose
    ``__init__`` it runs: its base's, or that base's base's... while each has one base that is a class
    read (``glm5_1_modulev3``'s ``Glm5_1Model`` → ``deepseekV3_modulev3``'s ``DeepseekV3Model``).
    A chain that reaches a library class (or two bases) first is left out: its ``__init__`` is not known."""
    out: dict[str, str] = {}
    for key in single:
        owner: str | None = key
        seen: set[str] = set()
        while owner is not None and owner not in inits:
            seen.add(owner)
            found = [b for b in bases.get(owner, ()) if (b in inits or b in single) and b not in seen]
            owner = found[0] if len(found) == 1 and owner in single else None
        if owner is not None and owner != key:
            out[key] = owner
    return out


def library_bases(trees: ModuleTrees) -> dict[str, str]:
    """``pkg.module.Class`` → the qualified ``max`` library class (not an architecture's) that is
    its first such base: how a sibling's class and its variant's counterpart are compared
    (``VocabParallelEmbedding`` of ``max.nn`` vs of ``max.experimental.nn``)."""
    out: dict[str, str] = {}
    for parts, tree in trees:
        if tree is None:
            continue
        imported = {
            alias.asname or alias.name: f"{node.module}.{alias.name}"
            for node in tree.body
            if isinstance(node, ast.ImportFrom) and not node.level and node.module
            and node.module.startswith("max.") and not node.module.startswith(_ARCHITECTURES)
            for alias in node.names
        }
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                found = next((imported[b.id] for b in node.bases if isinstance(b, ast.Name) and b.id in imported), None)
                if found is not None:
                    out[".".join([*parts, node.name])] = found
    return out


def inherited(attributes: dict[str, frozenset[str]], bases: dict[str, list[str]]) -> dict[str, frozenset[str]]:
    """Each class's attributes with those of its bases among ``attributes`` (transitively)."""
    done: dict[str, frozenset[str]] = {}

    def of(key: str, seen: frozenset[str]) -> frozenset[str]:
        if key in done:
            return done[key]
        names = set(attributes.get(key, frozenset()))
        for base in bases.get(key, ()):
            if base in attributes and base not in seen:
                names |= of(base, seen | {key})
        done[key] = frozenset(names)
        return done[key]

    return {key: of(key, frozenset()) for key in attributes}


_ARCHITECTURES = "max.pipelines.architectures."


def _is_dataclass(node: ast.ClassDef, classes: dict[str, ast.ClassDef], seen: frozenset[str]) -> bool:
    """``@dataclass`` / ``@dataclass(...)`` / ``@dataclasses.dataclass``, or a base of ``node``'s module is one."""
    for deco in node.decorator_list:
        func = deco.func if isinstance(deco, ast.Call) else deco
        if (isinstance(func, ast.Name) and func.id == "dataclass") or (
            isinstance(func, ast.Attribute) and func.attr == "dataclass"
        ):
            return True
    return any(
        isinstance(b, ast.Name) and b.id in classes and b.id not in seen
        and _is_dataclass(classes[b.id], classes, seen | {node.name})
        for b in node.bases
    )


def field_declarations(trees: ModuleTrees) -> dict[str, FieldDecl]:
    """``pkg.module.Class.field`` → how a subclass re-declares it, for every annotated field of
    every dataclass of ``trees``: ``x: T`` → ``field(kw_only=True)``, ``x: T = v`` →
    ``field(kw_only=True, default=v)``, ``x: T = field(...)`` → the same call with
    ``kw_only=True``; with the module's absolute ``from`` imports of the names they use."""
    out: dict[str, FieldDecl] = {}
    for parts, tree in trees:
        if tree is None:
            continue
        imported: dict[str, tuple[str, str]] = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and not node.level and not node.module.startswith(_ARCHITECTURES):
                imported.update((a.name, (node.module, a.name)) for a in node.names if a.asname is None)
        classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        for name, cls in classes.items():
            if not _is_dataclass(cls, classes, frozenset()):
                continue
            for stmt in cls.body:
                if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
                    continue
                if "ClassVar" in ast.unparse(stmt.annotation):
                    continue
                value = _kw_only_field(stmt.value)
                if value is None:
                    continue
                used = {n.id for n in ast.walk(stmt.annotation) if isinstance(n, ast.Name)}
                if stmt.value is not None:
                    used |= {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)} - {"field"}
                needs = tuple(sorted(imported[n] for n in used if n in imported))
                out[".".join([*parts, name, stmt.target.id])] = FieldDecl(
                    ast.unparse(stmt.annotation), value, needs, _plain_default(stmt.value))
    return out


def _plain_default(value: ast.expr | None) -> str | None:
    """``v`` of a field declared ``= v`` or ``= field(default=v)`` (None: no default, or a factory)."""
    if isinstance(value, ast.Call) and ast.unparse(value.func) in ("field", "dataclasses.field"):
        value = next((k.value for k in value.keywords if k.arg == "default"), None)
    return None if value is None else ast.unparse(value)


def _kw_only_field(value: ast.expr | None) -> str | None:
    """The keyword-only ``field(...)`` of a field declared ``= value`` (None: none can be written)."""
    if value is None:
        return "field(kw_only=True)"
    if isinstance(value, ast.Call) and ast.unparse(value.func) in ("field", "dataclasses.field"):
        if value.args or any(k.arg is None for k in value.keywords):
            return None
        kept = [f"{k.arg}={ast.unparse(k.value)}" for k in value.keywords if k.arg != "kw_only"]
        return f"field({', '.join(['kw_only=True', *kept])})"
    return f"field(kw_only=True, default={ast.unparse(value)})"


def init_signature(init: ast.FunctionDef) -> tuple[str, ...]:
    """``__init__``'s parameters after ``self``: ``name`` (required), ``name=`` (has a
    default), ``*``/``**`` for variadics."""
    args = init.args
    positional = [*args.posonlyargs, *args.args][1:]
    defaults = len(args.defaults)
    out = [a.arg + ("=" if i >= len(positional) - defaults else "") for i, a in enumerate(positional)]
    if args.vararg is not None:
        out.append("*")
    out.extend(a.arg + ("" if d is None else "=") for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True))
    if args.kwarg is not None:
        out.append("**")
    return tuple(out)


def _own_attributes(node: ast.ClassDef, classes: dict[str, ast.ClassDef], seen: frozenset[str]) -> set[str]:
    names: set[str] = set()
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(stmt.name)
            for sub in ast.walk(stmt):
                if (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.ctx, ast.Store)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id == "self"
                ):
                    names.add(sub.attr)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            names.add(stmt.target.id)
        elif isinstance(stmt, ast.Assign):
            names.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in classes and base.id not in seen:
            names |= _own_attributes(classes[base.id], classes, seen | {node.name})
    return names


_ATTRIBUTE_READ = re.compile(r"\.([A-Za-z_]\w*)")


#: ``from ..<pkg>.model import A, B`` / ``from max.pipelines.architectures.<pkg>.model import (...)``
_MODEL_IMPORT = re.compile(r"from\s+(?:\.\.|max\.pipelines\.architectures\.)(\w+)\.model\s+import\s+(?:\(([\w\s,]+)\)|([\w \t,]+))")


def _text_facts(
    target: Target, v3_packages: dict[str, str], exports: dict[str, frozenset[str]]
) -> tuple[frozenset[str], frozenset[str]]:
    """Every ``.name`` the files of ``target`` read, and the existing variants whose
    pipeline ``model`` module they import a name from that the variant defines."""
    names: set[str] = set()
    models: set[str] = set()
    for path, _ in target.files:
        if path.suffix == ".py":
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            names.update(_ATTRIBUTE_READ.findall(text))
            for dep, grouped, line in _MODEL_IMPORT.findall(text):
                imported = grouped or line
                variant = v3_packages.get(dep, "")
                defined = exports.get(f"{variant}.model", frozenset())
                wanted = {n.split()[0] for n in imported.split(",") if n.strip()}
                # a V2 name that Dependencies imports as the variant's own (LlamaModelBase → Llama3Model),
                # when this file's subclasses of it only set attributes (as Dependencies requires)
                renamed = {n for n in wanted if "." not in SIBLING_RENAMES.get(f"{dep}.model.{n}", ".")}
                if renamed and _only_attribute_subclasses(text, renamed):
                    wanted |= {SIBLING_RENAMES[f"{dep}.model.{n}"] for n in renamed}
                if "*" in defined or wanted & defined:
                    models.add(variant)
    return frozenset(names), frozenset(models)


def _only_attribute_subclasses(text: str, bases: set[str]) -> bool:
    """``text`` has a class of one of ``bases``, and every such class only sets attributes
    (an ``__init__`` that only calls ``super().__init__`` too): codemods.dependencies' test, on ``ast``."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    found = False
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef) or not any(isinstance(b, ast.Name) and b.id in bases for b in cls.bases):
            continue
        found = True
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef):
                if stmt.name != "__init__" or not all(_docstring_or_super_init(s) for s in stmt.body):
                    return False
            elif not isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr, ast.Pass)):
                return False
    return found


def _docstring_or_super_init(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.Expr):
        return False
    value = stmt.value
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return True
    return (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "__init__"
        and isinstance(value.func.value, ast.Call) and isinstance(value.func.value.func, ast.Name)
        and value.func.value.func.id == "super"
    )


def top_level_names(tree: ast.Module) -> set[str] | None:
    """The names a module binds at top level; None when they can't be known statically."""
    names: set[str] = set()
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == "__getattr__":
                return None
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for block in statement_blocks(node):
                stack.extend(block)
    return names


def dependency_order(targets: list[Target]) -> list[Target]:
    """Stable topological order: a package after the packages of this run it imports."""
    by_name = {t.name: t for t in targets if t.is_package}
    done: set[str] = set()
    ordered: list[Target] = []

    def visit(t: Target, stack: set[str]) -> None:
        if t.name in done or t.name in stack:
            return
        stack.add(t.name)
        for dep in sorted(t.depends_on):
            if dep in by_name:
                visit(by_name[dep], stack)
        done.add(t.name)
        ordered.append(t)

    for t in targets:
        if t.is_package:
            visit(t, set())
        else:
            ordered.append(t)
    return ordered
