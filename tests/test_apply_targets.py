"""Which targets ``apply`` writes: only what has something to migrate, only names that exist.

A folder without Python and a package that is already ModuleV3 get one line
and nothing written; a package that is partly V2 is written whole; the
registration hint only names what the written package defines; an existing
target (no ``--force``) says that nothing was written and counts nothing.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import max as max_pkg
import pytest
from click.testing import CliRunner

from migrate_v3.apply import apply_paths
from migrate_v3.apply_cmd import apply
from migrate_v3.cli import main

ARCHITECTURES = Path(list(max_pkg.__path__)[0]) / "pipelines" / "architectures"
V2 = "from max.nn import Linear\n\nx = Linear(2, 3, None, None, has_bias=True)\n"
V3 = "from max.experimental.nn import Linear\n\nx = Linear(in_dim=2, out_dim=3)\n"


def run(*args: str) -> tuple[int, list[str], list[str]]:
    result = CliRunner().invoke(apply, list(args))
    return result.exit_code, result.stdout.splitlines(), result.stderr.splitlines()


def listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def copy_of(name: str, here: Path) -> Path:
    return Path(shutil.copytree(ARCHITECTURES / name, here / name, ignore=shutil.ignore_patterns("__pycache__")))


@pytest.mark.parametrize("content", [{}, {"README.md": "notes\n", "data/w.json": "{}\n"}])
def test_folder_without_python_writes_nothing(here: Path, content: dict[str, str]) -> None:
    (here / "empty_dir").mkdir()
    for rel, text in content.items():
        (here / "empty_dir" / rel).parent.mkdir(parents=True, exist_ok=True)
        (here / "empty_dir" / rel).write_text(text)
    before = listing(here)
    code, out, err = run("empty_dir")
    assert (code, out, err) == (0, ["empty_dir: nothing to migrate (no Python files); nothing written"], [])
    assert listing(here) == before


def test_package_already_v3_writes_nothing(here: Path) -> None:
    """mamba in max 26.7 is ModuleV3: check reports it clean, so apply writes nothing."""
    mamba = copy_of("mamba", here)
    checked = CliRunner().invoke(main, ["check", "--no-cache", "mamba"])
    assert checked.exit_code == 0 and "0 findings" in checked.stdout
    before = listing(here)
    code, out, err = run("mamba")
    assert (code, out, err) == (0, ["mamba: nothing to migrate (check finds no V2 code); nothing written"], [])
    assert listing(here) == before
    # and a single file with nothing to migrate
    code, out, _ = run(str(mamba.relative_to(here) / "model_config.py"))
    assert (code, out) == (0, ["mamba/model_config.py: nothing to migrate (check finds no V2 code); nothing written"])
    assert listing(here) == before


def test_partly_v2_package_is_written_whole(here: Path) -> None:
    pkg = here / "part"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "old.py").write_text(V2)
    (pkg / "new.py").write_text(V3)
    (pkg / "config.json").write_text("{}\n")
    code, _, _ = run("part")
    assert code == 0
    out = here / "part_modulev3"
    assert listing(out) == {"__init__.py", "old.py", "new.py", "config.json"}
    assert (out / "new.py").read_text() == V3
    assert "max.experimental.nn" in (out / "old.py").read_text()


def test_an_unparsable_file_in_a_package_with_nothing_to_migrate(here: Path) -> None:
    """Nothing is written, and the file Python cannot parse is still reported (exit 2)."""
    copy_of("mamba", here)
    (here / "mamba" / "broken.py").write_text("def f(:\n")
    code, out, err = run("mamba")
    assert code == 2 and err == ["error: mamba/broken.py: syntax error at line 1: invalid syntax"]
    assert out == ["mamba: nothing to migrate (check finds no V2 code in the others); nothing written", "Nothing written; 1 error."]
    assert not (here / "mamba_modulev3").exists()


def test_a_neutral_package_importing_a_migrated_one_is_written(here: Path) -> None:
    """Check sees no V2 in ``user`` (no arch.py: no architecture package), but apply
    points its import at the variant this run writes, so ``user`` is migrated too."""
    for name in ("base", "user"):
        (here / name).mkdir()
        (here / name / "__init__.py").write_text("")
    (here / "base" / "layers.py").write_text(V2)
    (here / "user" / "model.py").write_text("from ..base.layers import x\n")
    report = apply_paths([Path("user"), Path("base")])
    assert report.written_shown == ["base_modulev3", "user_modulev3"]
    assert (here / "user_modulev3" / "model.py").read_text() == "from ..base_modulev3.layers import x\n"
    # alone, user imports a V2 package that has no variant: nothing to migrate
    shutil.rmtree(here / "base_modulev3")
    shutil.rmtree(here / "user_modulev3")
    assert apply_paths([Path("user")]).notes == ["user: nothing to migrate (check finds no V2 code); nothing written"]


def test_registration_names_only_what_the_output_defines(here: Path) -> None:
    """umt5 has no arch.py: no `umt5_modulev3_arch` (a name that exists nowhere)."""
    copy_of("umt5", here)
    code, out, _ = run("umt5")
    assert code in (0, 1)
    assert "umt5_modulev3_arch" not in "\n".join(out)
    assert "umt5_modulev3: no architecture to register (no SupportedArchitecture in arch.py)" in out
    copy_of("mistral", here)
    _, out, _ = run("mistral")
    hint = next(line for line in out if line.startswith("mistral_modulev3: serve it"))
    assert "ARCHITECTURES = [mistral_modulev3_arch]" in hint
    init = (here / "mistral_modulev3" / "__init__.py").read_text()
    assert "from .arch import mistral_modulev3_arch" in init  # the name the hint uses exists


def test_registry_entries_only_for_exported_variables(here: Path) -> None:
    root = here / "architectures"
    (root / "foo").mkdir(parents=True)
    (root / "foo" / "model.py").write_text(V2)
    (root / "foo" / "arch.py").write_text('foo_arch = SupportedArchitecture(name="Foo")\n')
    (root / "foo" / "__init__.py").write_text("")  # does not export foo_arch
    registry = '_LazyArch("Foo", ".foo", "foo_arch"),\n'
    (root / "__init__.py").write_text(registry)
    report = apply_paths([root / "foo"], register=True)
    assert [h.message for h in report.registration] == [
        f"{root / '__init__.py'}: foo_modulev3 does not export foo_modulev3_arch: not registered"
    ]
    assert (root / "__init__.py").read_text() == registry
    (root / "foo" / "__init__.py").write_text("from .arch import foo_arch\n")
    report = apply_paths([root / "foo"], register=True, force=True)
    assert (root / "__init__.py").read_text() == registry + '_LazyArch("Foo_ModuleV3", ".foo_modulev3", "foo_modulev3_arch"),\n'


def test_existing_target_says_nothing_was_written(here: Path) -> None:
    copy_of("mistral", here)
    (here / "mistral_modulev3").mkdir()
    (here / "mistral_modulev3" / "mine.py").write_text("# hand edits\n")
    digest = hashlib.sha256((here / "mistral_modulev3" / "mine.py").read_bytes()).hexdigest()
    code, out, err = run("mistral")
    assert code == 2
    assert err == ["error: mistral_modulev3: exists (use --force to overwrite); nothing written for mistral"]
    assert out == ["Nothing written; 1 error."]
    assert listing(here / "mistral_modulev3") == {"mine.py"}
    assert hashlib.sha256((here / "mistral_modulev3" / "mine.py").read_bytes()).hexdigest() == digest
