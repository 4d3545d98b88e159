"""max's real V2 architecture packages, copied into a temporary package and migrated in one run.

Shared by the tests that import migrated architectures side by side (a migrated package
imports its siblings relatively, so they must sit in one package).
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from migrate_v3.apply import apply_paths


def architectures() -> Path:
    """The installed ``max/pipelines/architectures`` folder."""
    import max.pipelines.architectures as archs

    return Path(archs.__file__).parent


@contextmanager
def migrated_archs(
    root: Path, package: str, copied: Sequence[str], migrated: Sequence[str], written: Mapping[str, str] | None = None
) -> Iterator[ModuleType]:
    """``root/package/`` holding max's ``copied`` packages (a plain ``__init__``: no registry side
    effects) and the ``written`` files (path under it → text: a user's package), the ``migrated``
    ones migrated beside them in one ``apply`` run, imported as ``package``; afterwards ``root``
    leaves ``sys.path`` and ``package`` leaves ``sys.modules``."""
    pkg = root / package
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name in copied:
        shutil.copytree(architectures() / name, pkg / name, ignore=shutil.ignore_patterns("__pycache__"))
    for rel, text in (written or {}).items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    report = apply_paths([pkg / name for name in migrated], out=pkg, jobs=1)
    assert not report.errors and not any(f.error for f in report.files)
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module(package)
    finally:
        sys.path.remove(str(root))
        for mod in [m for m in sys.modules if m.split(".")[0] == package]:
            del sys.modules[mod]


def load_module(name: str, code: str, directory: Path) -> ModuleType:
    """``code`` written to ``directory/<name>.py`` and imported as the top-level module ``name``."""
    path = directory / f"{name}.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
