"""``apply``: layout, safety (never touch V2, no overwrite, atomic), modes, exit codes."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from migrate_v3 import emit
from migrate_v3.apply import apply_paths
from migrate_v3.apply_cmd import apply
from migrate_v3.pipeline import TransformContext, transform_source

TINYLM = Path(__file__).resolve().parent.parent / "fixtures" / "models" / "tinylm"


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture()
def pkg(tmp_path: Path) -> Path:
    dest = tmp_path / "tinylm"
    shutil.copytree(TINYLM, dest, ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "notes.txt").write_text("kept as is\n")
    return dest


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(apply, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_package_written_beside_and_v2_untouched(pkg: Path) -> None:
    before = _digest(pkg)
    code, out, _ = _run(str(pkg))
    # tinylm's graph/session code is rewritten too (MV380/MV381): the TODOs left are
    # its docstrings that call the code V2 (prose is not rewritten)
    assert code == 1
    assert "3 TODOs (MV304×3)" in out
    target = pkg.parent / "tinylm_modulev3"
    assert sorted(_digest(target)) == sorted(before)
    assert _digest(pkg) == before
    assert (target / "notes.txt").read_text() == "kept as is\n"
    assert "class TinyLM(Module[[Tensor], Tensor])" in (target / "model.py").read_text()
    assert "TODOs" in out
    assert not list(pkg.parent.glob(".migrate-v3-*")), "staging directory left behind"


def test_output_is_stable_under_a_second_apply(pkg: Path) -> None:
    _run(str(pkg))
    for py in (pkg.parent / "tinylm_modulev3").glob("*.py"):
        text = py.read_text()
        assert transform_source(text, context=TransformContext(only_v2=False)).code == text


def test_single_file_and_several_paths(pkg: Path, tmp_path: Path) -> None:
    single = tmp_path / "one.py"
    single.write_text("from max.nn import Linear\n\nx = Linear(2, 3, None, None, has_bias=True)\n")
    code, _, _ = _run(str(single), str(pkg))
    assert code == 1  # tinylm's docstrings that call it V2 (MV304)
    assert (tmp_path / "one_modulev3.py").read_text() == (
        "from max.experimental.nn import Linear\n\nx = Linear(in_dim=2, out_dim=3, bias=True)\n"
    )
    assert (tmp_path / "tinylm_modulev3" / "layers.py").exists()


def test_exit_zero_when_nothing_is_left(tmp_path: Path) -> None:
    f = tmp_path / "clean.py"
    f.write_text("from max.graph import TensorValue, ops\n\n\ndef f(x: TensorValue) -> TensorValue:\n    return ops.relu(x)\n")
    code, _, _ = _run(str(f))
    assert code == 0
    assert "F.relu(x)" in (tmp_path / "clean_modulev3.py").read_text()


def test_existing_target_needs_force(pkg: Path) -> None:
    target = pkg.parent / "tinylm_modulev3"
    target.mkdir()
    (target / "mine.py").write_text("# hand edits\n")
    code, _, err = _run(str(pkg))
    assert code == 2 and "exists" in err and "--force" in err
    assert (target / "mine.py").exists()
    code, _, _ = _run(str(pkg), "--force")
    assert code == 1  # written; tinylm's MV304 docstring TODOs remain
    assert not (target / "mine.py").exists() and (target / "model.py").exists()


def test_out_dir(pkg: Path, tmp_path: Path) -> None:
    out = tmp_path / "elsewhere"
    _run(str(pkg), "--out", str(out))
    assert (out / "tinylm_modulev3" / "model.py").exists()
    assert not (pkg.parent / "tinylm_modulev3").exists()


def test_diff_writes_nothing(pkg: Path) -> None:
    code, out, _ = _run(str(pkg), "--diff")
    assert code == 1  # tinylm's MV304 docstring TODOs
    assert "+class FeedForward(Module[[Tensor], Tensor]):" in out
    assert out.count("--- ") >= 2
    assert not (pkg.parent / "tinylm_modulev3").exists()
    assert not list(pkg.parent.glob(".migrate-v3-*"))


def test_report_json_and_markdown(pkg: Path, tmp_path: Path) -> None:
    (pkg / "extra.py").write_text('from max.graph import Graph\n\ng = Graph("x")\n')
    _run(str(pkg), "--diff", "--report", str(tmp_path / "r.json"))
    data = json.loads((tmp_path / "r.json").read_text())
    model = next(f for f in data["files"] if f["source"].endswith("model.py"))
    assert {t["code"] for t in model["todos"]} == {"MV304"}  # only its docstrings (prose) are left
    assert {"MV380", "MV381"} <= {r["code"] for r in model["rewrites"]}
    extra = next(f for f in data["files"] if f["source"].endswith("extra.py"))
    assert {t["code"] for t in extra["todos"]} == {"MV380"}
    assert any(r["code"] == "MV350" for r in model["rewrites"])
    assert data["todo_count"] == sum(len(f["todos"]) for f in data["files"])
    _run(str(pkg), "--diff", "--report", str(tmp_path / "r.md"))
    md = (tmp_path / "r.md").read_text()
    assert "- [ ] line" in md and "| MV340 |" in md


def test_bad_files_are_reported_and_the_run_goes_on(pkg: Path) -> None:
    (pkg / "broken.py").write_text("from max.nn import Linear\ndef f(:\n")
    (pkg / "latin1.py").write_bytes(b"# \xe9\nfrom max.nn import Linear\n")
    code, _, err = _run(str(pkg))
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert lines == [
        f"error: {pkg}/broken.py: syntax error at line 2: invalid syntax",
        f"error: {pkg}/latin1.py: not valid utf-8: byte 0xe9 at offset 2",
    ]
    target = pkg.parent / "tinylm_modulev3"
    assert not (target / "broken.py").exists() and not (target / "latin1.py").exists()
    assert "Module[[Tensor], Tensor]" in (target / "layers.py").read_text()


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = _run(str(tmp_path / "nope"))
    assert code == 2 and "no such file" in err


def test_interrupted_run_leaves_nothing(pkg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    real = emit.Stager.write

    def flaky(root: Path, rel: Path | None, data: bytes) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        real(root, rel, data)

    monkeypatch.setattr(emit.Stager, "write", staticmethod(flaky))
    with pytest.raises(KeyboardInterrupt):
        apply_paths([pkg])
    assert not (pkg.parent / "tinylm_modulev3").exists()
    assert not list(pkg.parent.glob(".migrate-v3-*"))


def _sibling_tree(tmp_path: Path) -> Path:
    root = tmp_path / "architectures"
    for name in ("base", "user"):
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text("")
    (root / "base" / "layers.py").write_text(
        "from max.graph import TensorValue\nfrom max.nn import Module\n\n\nclass Base(Module):\n"
        "    def __call__(self, x: TensorValue) -> TensorValue:\n        return x\n"
    )
    (root / "user" / "model.py").write_text("from ..base.layers import Base\nfrom ..other.x import Y\n")
    (root / "base" / "arch.py").write_text('base_arch = SupportedArchitecture(name="BaseModel")\n')
    (root / "base" / "__init__.py").write_text("from .arch import base_arch\n")
    (root / "__init__.py").write_text(
        'lazy = [\n    _LazyArch("BaseModel", ".base", "base_arch"),\n    _LazyArch("UserModel", ".user", "user_arch"),\n]\n'
    )
    return root


def test_dependency_order_and_sibling_imports(tmp_path: Path) -> None:
    root = _sibling_tree(tmp_path)
    report = apply_paths([root / "user", root / "base"])
    assert report.order == ["base", "user"]
    text = (root / "user_modulev3" / "model.py").read_text()
    assert "from ..base_modulev3.layers import Base" in text
    assert "# TODO(migrate-v3): MV301 depends on V2 package other" in text


def test_registry_entry_printed_and_added_on_request(tmp_path: Path) -> None:
    root = _sibling_tree(tmp_path)
    report = apply_paths([root / "base"])
    assert '_LazyArch("BaseModel_ModuleV3", ".base_modulev3", "base_modulev3_arch"),' in report.registration[0].message
    assert "BaseModel_ModuleV3" not in (root / "__init__.py").read_text()
    apply_paths([root / "base"], force=True, register=True)
    registry = (root / "__init__.py").read_text()
    assert registry.count('_LazyArch("BaseModel_ModuleV3", ".base_modulev3", "base_modulev3_arch"),') == 1
    apply_paths([root / "base"], force=True, register=True)
    assert (root / "__init__.py").read_text() == registry


def test_parallel_matches_serial(pkg: Path, tmp_path: Path) -> None:
    a = apply_paths([pkg], out=tmp_path / "a", jobs=1)
    b = apply_paths([pkg], out=tmp_path / "b", jobs=2)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert [f.todos for f in a.files] == [f.todos for f in b.files]


def test_plan_records_what_an_existing_v3_variant_defines(tmp_path: Path) -> None:
    """Imports are only pointed at an existing ``_modulev3`` for names it defines."""
    from migrate_v3.plan import module_exports, plan

    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "__init__.py").write_text("")
    (tmp_path / "base" / "layers.py").write_text("from max.nn import Linear\nclass Old: pass\n")
    v3 = tmp_path / "base_modulev3"
    (v3 / "sub").mkdir(parents=True)
    (v3 / "__init__.py").write_text("from .layers import New\n")
    (v3 / "layers.py").write_text("import os.path\nfrom x import y as z\nclass New: pass\nif True:\n    def f(): pass\nA: int = 1\n")
    (v3 / "sub" / "__init__.py").write_text("from .m import *\n")  # unknowable: any name
    (v3 / "sub" / "lazy.py").write_text("def __getattr__(name): ...\n")  # unknowable: any name
    exports = module_exports(v3)
    assert exports == {
        "base_modulev3": frozenset({"New"}),
        "base_modulev3.layers": frozenset({"os", "z", "New", "f", "A"}),
        "base_modulev3.sub": frozenset({"*"}),
        "base_modulev3.sub.lazy": frozenset({"*"}),
    }
    user = tmp_path / "user"
    user.mkdir()
    (user / "__init__.py").write_text("")
    (user / "model.py").write_text(
        "from ..base.layers import Old\nfrom ..base.model_config import Config\nfrom ..base.sub import Any\n"
    )
    the_plan = plan([user])
    assert the_plan.v3_packages["base"] == "base_modulev3"
    assert the_plan.v3_exports == exports
    # an apply writes a V3 user package that keeps importing the V2 name, with a TODO
    out = tmp_path / "out"
    apply_paths([user], out=out, force=False, diff=False, jobs=1)
    text = (out / "user_modulev3" / "model.py").read_text()
    assert "from ..base.layers import Old" in text and "has no Old" in text
    # a module the variant lacks: the import stays on V2, with a TODO that says so
    assert "from ..base.model_config import Config" in text
    assert "base_modulev3 (already there) has no module model_config and so no Config" in text
    assert "from ..base_modulev3.sub import Any" in text


def test_a_neutral_module_of_a_sibling_stays_imported_without_a_todo(tmp_path: Path) -> None:
    """A module of a V2 sibling that uses no V2 API (a tokenizer) and that the sibling's existing
    variant lacks stays imported with no TODO: it brings no V2 graph code. Its V2 neighbour does."""
    base = tmp_path / "base"
    base.mkdir()
    (base / "__init__.py").write_text("")
    (base / "tokenizer.py").write_text("class Tok:\n    def encode(self, text: str) -> list[int]:\n        return []\n")
    (base / "layers.py").write_text("from max.nn import Linear\nclass Old(Linear): pass\n")
    (tmp_path / "base_modulev3").mkdir()
    (tmp_path / "base_modulev3" / "__init__.py").write_text("")
    user = tmp_path / "user"
    user.mkdir()
    (user / "__init__.py").write_text("")
    (user / "model.py").write_text(
        "from max.nn import Linear\n\nfrom ..base.layers import Old\nfrom ..base.tokenizer import Tok\n\n"
        "def build() -> tuple[Linear, Tok]:\n    return Linear(4, 4, None, None), Tok()\n"
    )
    apply_paths([user], out=tmp_path / "out", jobs=1)
    text = (tmp_path / "out" / "user_modulev3" / "model.py").read_text()
    assert "from ..base.tokenizer import Tok" in text and "no module tokenizer" not in text
    assert "no module layers and so no Old" in text


def test_a_sibling_whose_output_exists_is_not_migrated_by_the_run(tmp_path: Path) -> None:
    """``apply user base`` with ``base_modulev3`` already there: base is refused, so
    user's imports of it are checked against the variant that stays, not assumed
    to reach a migrated ``base`` that is never written."""
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "__init__.py").write_text("")
    (tmp_path / "base" / "batch.py").write_text("from max.nn import Linear\nclass Batcher: pass\n")
    (tmp_path / "base_modulev3").mkdir()
    (tmp_path / "base_modulev3" / "__init__.py").write_text("")
    (tmp_path / "base_modulev3" / "batch.py").write_text("class V3Batcher: pass\n")
    user = tmp_path / "user"
    user.mkdir()
    (user / "__init__.py").write_text("")
    (user / "model.py").write_text("from max.nn import Linear\nfrom ..base.batch import Batcher\n")
    report = apply_paths([user, tmp_path / "base"], jobs=1)
    assert any("base_modulev3: exists" in s for s in report.skipped), report.skipped
    text = (tmp_path / "user_modulev3" / "model.py").read_text()
    assert "from ..base.batch import Batcher" in text, text
    assert "base_modulev3.batch (already there) has no Batcher" in text
    assert (tmp_path / "base_modulev3" / "batch.py").read_text() == "class V3Batcher: pass\n"
    # with --force base is migrated in the run, and user imports the migrated base
    apply_paths([user, tmp_path / "base"], jobs=1, force=True)
    assert "from ..base_modulev3.batch import Batcher" in (tmp_path / "user_modulev3" / "model.py").read_text()


def test_a_class_whose_v3_variant_lacks_attributes_the_package_reads_is_flagged(tmp_path: Path) -> None:
    """``class LFM2Config(Llama3Config)``: the official V3 Llama3Config has no ``quant_config``."""
    base, variant, user = tmp_path / "base", tmp_path / "base_modulev3", tmp_path / "user"
    for pkg in (base, variant, user):
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
    (base / "model_config.py").write_text(
        "class Root:\n    shared: int\n\n\nclass Config(Root):\n    a: int\n    quant_config: object = None\n"
        "    unread: int = 0\n\n    def initialize(self) -> None:\n        self.cache = 1\n"
    )
    (variant / "model_config.py").write_text(
        "class Config:\n    a: int\n    shared: int\n\n\nclass Model:\n    def __init__(self, config, kv_params, *, scale=1.0):\n"
        "        self.config = config\n\n\nclass Same:\n    def __init__(self, config, **kw):\n        pass\n"
    )
    (base / "model_config.py").write_text(
        (base / "model_config.py").read_text()
        + "\n\nclass Model:\n    def __init__(self, config, devices=None):\n        self.config = config\n"
        "\n\nclass Same:\n    def __init__(self, config, devices=None):\n        pass\n"
    )
    (user / "model_config.py").write_text(
        "from ..base.model_config import Config, Model, Same\n\n\nclass UserConfig(Config):\n    pass\n"
    )
    (user / "model.py").write_text("def build(config):\n    return config.a, config.quant_config, config.initialize(), config.cache\n")
    out = tmp_path / "out"
    apply_paths([user], out=out)
    text = (out / "user_modulev3" / "model_config.py").read_text()
    assert "from ..base_modulev3.model_config import Config" in text
    assert "base_modulev3's Config has no cache, initialize, quant_config (V2 base's Config has" in text
    assert "unread" not in text and "shared" not in text
    # a constructor that changed: what the calls must pass now, and what they may no longer pass
    assert (
        "base_modulev3's Model(config, kv_params, scale=) is not V2 base's Model(config, devices=): "
        "update the calls of it here (it needs kv_params) (it takes no devices)"
    ) in text
    assert "Same(" not in text  # its **kw takes what V2 took: no TODO


def test_weight_adapters_follow_the_module_tree_the_package_builds(tmp_path: Path) -> None:
    """An existing variant's adapters rename keys for its own tree (max's ports nest it under
    ``language_model.``): a package that builds its own migrated modules (V2 names) keeps the V2
    adapters; one whose pipeline model is the variant's takes the variant's adapters."""
    base, variant, own, reuse = (tmp_path / n for n in ("base", "base_modulev3", "own", "reuse"))
    for pkg in (base, variant, own, reuse):
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
        (pkg / "weight_adapters.py").write_text("def convert(sd):\n    return sd\n")
    (base / "model.py").write_text("class BaseModel: pass\nclass Model(BaseModel): pass\n")
    (variant / "model.py").write_text("class Model: pass\n")
    arch = "from max.nn import Linear\nfrom ..base import weight_adapters\n"
    (own / "arch.py").write_text(arch)
    (own / "model.py").write_text("from max.nn import Linear\nfrom ..base.model import BaseModel\n")
    (reuse / "arch.py").write_text(arch)
    (reuse / "model.py").write_text("from max.nn import Linear\nfrom ..base.model import (\n    Model as M,\n)\n")
    apply_paths([own, reuse], jobs=1)
    own_arch = (tmp_path / "own_modulev3" / "arch.py").read_text()
    assert "from ..base import weight_adapters" in own_arch, own_arch
    assert "kept base's V2 weight adapters" in own_arch
    reuse_arch = (tmp_path / "reuse_modulev3" / "arch.py").read_text()
    assert "from ..base_modulev3 import weight_adapters" in reuse_arch, reuse_arch


def test_plan_counts_a_renamed_base_as_building_the_variants_model(tmp_path: Path) -> None:
    """``from ..llama3.model import LlamaModelBase`` is imported as ``llama3_modulev3``'s ``Llama3Model``
    (``SIBLING_RENAMES``), so the package builds that variant's module tree (and wants its adapters)."""
    from migrate_v3.plan import plan

    for name, text in (("llama3", "class LlamaModelBase: pass\n"), ("llama3_modulev3", "class Llama3Model: pass\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
        (tmp_path / name / "model.py").write_text(text)
    user = tmp_path / "user"
    user.mkdir()
    (user / "__init__.py").write_text("")
    (user / "model.py").write_text("from ..llama3.model import LlamaModelBase\n\n\nclass M(LlamaModelBase):\n    x = 1\n")
    assert plan([user]).variant_models["user"] == frozenset({"llama3_modulev3"})
    # a subclass that overrides a V2 graph hook keeps V2 LlamaModelBase (Dependencies): not the variant's model
    (user / "model.py").write_text("from ..llama3.model import LlamaModelBase\n\n\nclass M(LlamaModelBase):\n    def graph_specs(self): ...\n")
    assert plan([user]).variant_models["user"] == frozenset()


def test_a_sibling_config_dataclass_the_variant_lacks_members_of_stays_v2(tmp_path: Path) -> None:
    """The plan records which V2 sibling classes are dataclasses; a package reading what the V3
    variant's config lacks keeps the V2 config import (a config holds no graph code)."""
    from migrate_v3.plan import plan

    dc = "from dataclasses import dataclass\n\n\n@dataclass(kw_only=True)\n"
    for name, fields in (("llama3", "    hidden_size: int\n    quant_config: object = None\n"),
                         ("llama3_modulev3", "    hidden_size: int\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
        (tmp_path / name / "model_config.py").write_text(f"{dc}class Llama3Config:\n{fields}")
    user = tmp_path / "user"
    user.mkdir()
    (user / "__init__.py").write_text("")
    (user / "model_config.py").write_text("from ..llama3.model_config import Llama3Config\n\n\nclass UserConfig(Llama3Config): ...\n")
    (user / "model.py").write_text(
        "from max.nn import Linear\n\nfrom .model_config import UserConfig\n\n\n"
        "def build(config: UserConfig) -> Linear:\n    assert config.quant_config is None\n"
        "    return Linear(config.hidden_size, config.hidden_size, dtype=None, device=None)\n"
    )
    assert "llama3.model_config.Llama3Config" in plan([user]).data_classes
    apply_paths([user], jobs=1)
    out = (tmp_path / "user_modulev3" / "model_config.py").read_text()
    assert "from ..llama3.model_config import Llama3Config" in out, out
    assert "kept llama3's V2 Llama3Config: llama3_modulev3's Llama3Config has no quant_config" in out


def test_a_config_field_the_v3_base_inherits_no_longer_is_dropped_from_its_build(tmp_path: Path) -> None:
    """The plan's ``class_fields`` add what a class inherits from a base in another sibling
    module (relative and absolute imports): ``use_subgraphs`` of V2 ``base``'s config, which the
    V3 variant's base lacks, is dropped from ``cls(...)`` with a TODO, the other keywords stay."""
    from migrate_v3.plan import plan

    dc = "from dataclasses import dataclass\n\n\n@dataclass(kw_only=True)\n"
    for name, fields in (("base", "    dtype: object\n    use_subgraphs: bool = True\n"), ("base_modulev3", "    dtype: object\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
        (tmp_path / name / "model_config.py").write_text(f"{dc}class BaseConfig:\n{fields}")
    for name, spelled in (("mid", "max.pipelines.architectures.base"), ("mid_modulev3", "..base_modulev3")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
        (tmp_path / name / "model_config.py").write_text(
            f"from {spelled}.model_config import BaseConfig\n\n\n{dc}class MidConfig(BaseConfig):\n    topk: int = 1\n"
        )
    user = tmp_path / "user"
    user.mkdir()
    (user / "__init__.py").write_text("")
    (user / "model_config.py").write_text(
        "from max.nn import Linear\n\nfrom ..base.model_config import BaseConfig\nfrom ..mid.model_config import MidConfig\n\n\n"
        f"{dc}class UserConfig(MidConfig):\n    @classmethod\n    def make(cls, flag: bool) -> MidConfig:\n"
        "        return cls(dtype=None, topk=2, use_subgraphs=flag)\n\n\n"
        "def layer(config: BaseConfig) -> Linear:\n    return Linear(1, 1, dtype=config.dtype, device=None)\n"
    )
    known = plan([user]).class_fields
    assert "use_subgraphs" in known["mid.model_config.MidConfig"]
    assert "use_subgraphs" not in known["mid_modulev3.model_config.MidConfig"]
    assert "dtype" in known["mid_modulev3.model_config.MidConfig"]
    apply_paths([user], jobs=1)
    out = (tmp_path / "user_modulev3" / "model_config.py").read_text()
    assert "return cls(dtype=None, topk=2)" in out, out
    assert "MV301 dropped use_subgraphs: mid_modulev3's MidConfig has no such field" in out, out


def test_a_module_another_file_calls_by_keyword_takes_any_arguments(tmp_path: Path) -> None:
    """The pipeline model calls the encoder through a local with keywords (kimik2_5's
    ``vision_encoder(pixel_values=..., grid_thws=...)``): the plan carries the call to the file
    that defines the encoder, whose base then takes ``...``; the MLP, called positionally, keeps its list."""
    pkg = tmp_path / "vlm"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "encoder.py").write_text(
        "from max.graph import TensorValue\nfrom max.nn import Module\n\n\n"
        "class MLP(Module):\n    def __call__(self, x: TensorValue) -> TensorValue:\n        return x\n\n\n"
        "class Encoder(Module):\n    def __init__(self) -> None:\n        super().__init__()\n        self.mlp = MLP()\n\n"
        "    def __call__(self, pixel_values: TensorValue, grid_thws: TensorValue) -> TensorValue:\n"
        "        return self.mlp(pixel_values) + grid_thws\n"
    )
    (pkg / "model.py").write_text(
        "from .encoder import Encoder\n\n\nclass Pipeline:\n    def __init__(self) -> None:\n"
        "        self.model = Encoder()\n\n    def run(self, images, grids):\n"
        "        encoder = self.model\n        return encoder(pixel_values=images, grid_thws=grids)\n"
    )
    out = tmp_path / "out"
    apply_paths([pkg], out=out)
    text = (out / "vlm_modulev3" / "encoder.py").read_text()
    assert "class Encoder(Module[..., Tensor]):" in text
    assert "class MLP(Module[[Tensor], Tensor]):" in text


def test_plan_reads_keyword_calls_only_of_the_targets_it_writes(tmp_path: Path) -> None:
    """A target whose output exists (no ``force``) is never transformed: the plan skips its calls
    (an ``apply`` in place over max's tree, where the ported packages' outputs exist)."""
    from migrate_v3.plan import plan

    for name in ("new", "ported"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.py").write_text("def run(block):\n    return block(x=1)\n")
        (tmp_path / name / "block.py").write_text("class Block:\n    def forward(self, x):\n        return x\n")
    (tmp_path / "ported_modulev3").mkdir()
    found = plan([tmp_path / "new", tmp_path / "ported"]).call_keywords
    assert set(found) == {"new"} and found["new"]
    assert set(plan([tmp_path / "new", tmp_path / "ported"], force=True).call_keywords) == {"new", "ported"}


def test_plan_finds_the_package_classes_that_derive_from_a_max_module(tmp_path: Path) -> None:
    """``module_classes``: through the package's own chain of classes (relative imports, a
    package ``__init__``, a class of the same file) to a V2 module or layer; a class of no module
    base (a processor) is not one. ``apply`` then writes each one's ``__call__`` as ``forward``."""
    from migrate_v3.plan import plan

    pkg = tmp_path / "draft"
    (pkg / "layers").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "layers" / "__init__.py").write_text(
        "from max.nn import Module, RMSNorm\n\n\nclass Base(Module):\n    pass\n\n\nclass Norm(RMSNorm):\n    pass\n"
    )
    (pkg / "processing.py").write_text("class Processor:\n    def __call__(self, x):\n        return x\n")
    (pkg / "model.py").write_text(
        "from max.graph import TensorValue\n\nfrom .layers import (\n    Base,  # the root\n    # and its norm\n    Norm,\n)\n"
        "from .processing import Processor\n\n\n"
        "class Mid(Base):\n    pass\n\n\nclass Top(\n    Mid,\n):\n    def __call__(self, x: TensorValue) -> TensorValue:\n"
        "        return x\n\n\nclass Images(Processor):\n    pass\n\n\nclass Scaled(Norm):\n    pass\n"
    )
    found = plan([pkg]).module_classes
    assert {"draft.layers.Base", "draft.layers.Norm", "draft.model.Mid", "draft.model.Top", "draft.model.Scaled"} <= found
    assert not {"draft.processing.Processor", "draft.model.Images"} & found
    apply_paths([pkg], jobs=1)
    out = (tmp_path / "draft_modulev3" / "model.py").read_text()
    assert "    def forward(self, x: Tensor) -> Tensor:" in out, out


def test_plan_follows_single_bases_to_the_init_a_variant_class_runs(tmp_path: Path) -> None:
    """``init_owners``: a variant class with no ``__init__`` runs its base's, across variants,
    while each class has one base; a class with two bases, or a library base, has no known owner.
    A subclass passing what that ``__init__`` takes not gets the TODO at its ``super().__init__()``."""
    from migrate_v3.plan import plan

    for name, model in {
        "deep": "class DeepModel:\n    def __init__(self, config, *, return_hidden_states=None): ...\n",
        "deep_modulev3": "class DeepModel:\n    def __init__(self, config, *, return_logits=None): ...\n",
        "glm": "from ..deep.model import DeepModel\nclass GlmModel(DeepModel): pass\n",
        "glm_modulev3": (
            "from ..deep_modulev3.model import DeepModel\nfrom max.nn import Mixin\n"
            "class Mid(DeepModel): pass\nclass GlmModel(Mid): pass\nclass Two(Mixin, DeepModel): pass\n"
            "class Lib(Mixin): pass\n"
        ),
    }.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
        (tmp_path / name / "model.py").write_text(model)
    user = tmp_path / "user"
    user.mkdir()
    (user / "__init__.py").write_text("")
    (user / "model.py").write_text(
        "from ..glm.model import GlmModel\n\n\nclass Mtp(GlmModel):\n    def __init__(self, *args, **kwargs):\n"
        "        kwargs['return_hidden_states'] = 1\n        super().__init__(*args, **kwargs)\n"
    )
    the_plan = plan([user])
    assert the_plan.init_owners == {
        "glm_modulev3.model.GlmModel": "deep_modulev3.model.DeepModel",
        "glm_modulev3.model.Mid": "deep_modulev3.model.DeepModel",
    }  # (V2's deep is no variant: not chased)
    out = tmp_path / "out"
    apply_paths([user], out=out, force=False, diff=False, jobs=1)
    text = (out / "user_modulev3" / "model.py").read_text()
    assert ("V3 GlmModel's __init__ is DeepModel(config, return_logits=), which takes no return_hidden_states"
            in text), text
