"""Names of older max releases: the derivation (on small made-up releases), the committed
table against the installed max 26.7, and what ``check`` says about them."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from migrate_v3.knowledge import symbols as K
from migrate_v3.knowledge.regenerate_releases import Diff, dumps, installed_release, wheel_release
from migrate_v3.knowledge.releases import Release, read_module


def _release(version: str, files: dict[str, str]) -> Release:
    modules = []
    for path, source in files.items():
        parts = path.removesuffix(".py").split("/")
        package = parts[-1] == "__init__"
        modules.append(read_module(".".join(parts[:-1] if package else parts), package, source))
    return Release(version, modules)


OLD = {
    "max/driver/__init__.py": "from .tensor import Tensor\n__all__ = ['Tensor', 'CPU']\nfrom .tensor import CPU\n",
    "max/driver/tensor.py": "class Tensor:\n    def a(self): ...\n    def b(self): ...\n    def c(self): ...\n\n"
    "class CPU: ...\n",
    "max/kv/__init__.py": "from max.pipelines.kv import Manager\n",
    "max/pipelines/kv.py": "class Manager: ...\n",
    "max/nn/__init__.py": "from .linear import *\n",
    "max/nn/linear.py": "import numpy as np\n\nclass Linear: ...\n\n"
    "class LinearV1:\n    '''Old.\n\n    .. deprecated:: 25.5\n        Use :obj:`Linear` instead.\n    '''\n\n"
    "class Gone: ...\n",
    "max/sharding.py": "class DeviceMapping: ...\nPlacementMapping = DeviceMapping\n",
    "max/core/__init__.py": "from .context import TextContext, Other\n",
    "max/core/context.py": "class TextContext: ...\nclass Other: ...\n",
}
NEW = {
    "max/driver/__init__.py": "from .buffer import Buffer, CPU\n__all__ = ['Buffer', 'CPU']\n",
    "max/driver/buffer.py": "class Buffer:\n    def a(self): ...\n    def b(self): ...\n    def c(self): ...\n\n"
    "class CPU: ...\n",
    "max/pipelines/kv.py": "class Manager: ...\n",
    "max/nn/__init__.py": "from .linear import Linear\n__all__ = ['Linear']\n",
    "max/nn/linear.py": "class Linear: ...\n",
    "max/sharding.py": "class DeviceMapping: ...\n",
    "max/context/__init__.py": "from .context import TextContext\n__all__ = ['TextContext']\n",
    "max/context/context.py": "class TextContext: ...\n",
}


@pytest.fixture(scope="module")
def diff() -> Diff:
    d = Diff([_release("25.4.0", OLD)], _release("26.7.0", NEW))
    d.run()
    return d


def test_a_name_still_importable_is_not_gone(diff: Diff) -> None:
    for name in ["max.driver.CPU", "max.nn.Linear", "max.nn.linear.Linear", "max.pipelines.kv.Manager"]:
        assert name not in diff.gone
    assert "max.nn.linear.np" not in diff.gone  # a plain module's imports are not its API


def test_re_export_is_a_mechanical_rename(diff: Diff) -> None:
    entry = diff.gone["max.kv.Manager"]
    assert (entry["to"], entry["mechanical"], entry["evidence"], entry["via"]) == (
        "max.pipelines.kv.Manager", True, "re-export", "max.pipelines.kv.Manager",
    )


def test_alias_is_a_mechanical_rename(diff: Diff) -> None:
    entry = diff.gone["max.sharding.PlacementMapping"]
    assert (entry["to"], entry["mechanical"], entry["evidence"]) == ("max.sharding.DeviceMapping", True, "alias")


def test_hints_are_never_mechanical(diff: Diff) -> None:
    tensor = diff.gone["max.driver.Tensor"]
    assert (tensor["to"], tensor["mechanical"], tensor["evidence"]) == ("max.driver.Buffer", False, "same-members")
    v1 = diff.gone["max.nn.LinearV1"]
    assert (v1["to"], v1["mechanical"], v1["evidence"]) == ("max.nn.Linear", False, "deprecation-note")
    context = diff.gone["max.core.TextContext"]
    assert (context["to"], context["mechanical"], context["evidence"]) == ("max.context.TextContext", False, "same-name")


def test_no_evidence_no_replacement_and_a_gone_module_covers_its_names(diff: Diff) -> None:
    assert diff.gone["max.nn.Gone"]["to"] is None
    assert diff.gone["max.core"]["kind"] == "module" and diff.gone["max.kv"]["kind"] == "module"
    assert "max.core.Other" not in diff.gone  # inside a gone module, with nothing to say of its own
    assert all(e["first"] == e["last"] == "25.4.0" for e in diff.gone.values())


def test_the_written_table_is_json(diff: Diff) -> None:
    data = json.loads(dumps("26.7.0", ["25.4.0"], diff))
    assert data["gone"] == diff.gone and data["releases"] == ["25.4.0"]


def test_a_wheel_is_read_without_installing_it(tmp_path: Path) -> None:
    wheel = tmp_path / "max-25.4.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, source in OLD.items():
            z.writestr(path, source)
        z.writestr("max/_core/driver.pyi", "class Tensor: ...\n")
        z.writestr("max-25.4.0.data/platlib/max/lib/x.py", "class Ignored: ...\n")
    release = wheel_release("25.4.0", wheel)
    assert release.exists("max.driver.Tensor") and release.exists("max._core.driver.Tensor")
    assert "max._core" not in release.public_modules() and not release.exists("max.lib.x")


# --- the committed table ------------------------------------------------------------


@pytest.fixture(scope="module")
def current() -> Release:
    return installed_release()


def test_table_agrees_with_the_installed_max(current: Release) -> None:
    data = K.releases()
    assert data["max_version"] == current.version
    assert data["releases"][0] == "25.4.0" and len(data["releases"]) >= 10
    for name, entry in data["gone"].items():
        assert not current.exists(name), name
        assert entry["to"] is None or current.exists(entry["to"]), (name, entry["to"])
        if entry["mechanical"]:
            assert entry["evidence"] in {"re-export", "alias"} and entry["in"] in data["releases"], name
    for layout in data["layouts"].values():
        for new in layout["moves"].values():
            assert current.exists(new), new
        for name, entry in layout["missing"].items():
            assert entry["to"] is None or current.exists(entry["to"]), (name, entry["to"])


def test_table_size() -> None:
    gone = K.releases()["gone"]
    assert len(gone) >= 1500
    assert sum(e["mechanical"] for e in gone.values()) >= 30


@pytest.mark.parametrize(
    ("name", "nn_is_v3", "code", "says"),
    [
        ("max.driver.Tensor", False, "MV313", "max.driver.Buffer?"),
        ("max.nn.LinearV1", False, "MV313", "use max.nn.Linear instead"),
        ("max.nn.EmbeddingV1", False, "MV313", "removed, no replacement"),
        ("max.nn.LayerNormV1", False, "MV313", "removed, no replacement"),
        ("max.nn.kv_cache.KVCacheStrategy", False, "MV313", "removed, no replacement"),
        ("max.nn.kv_cache.FetchPagedKVCacheCollection", False, "MV313", "removed, no replacement"),
        ("max.interfaces", False, "MV313", "last in 26.3.0"),
        ("max.interfaces.TextGenerationContext", False, "MV313", "module max.interfaces is gone"),
        ("max.pipelines.core.TextContext", False, "MV313", "max.pipelines.context.TextContext"),
        ("max.kv_cache.PagedKVCacheManager", False, "MV312", "use max.pipelines.kv_cache.PagedKVCacheManager"),
        ("max.nn.legacy.Linear", True, "MV311", "max.nn.Linear"),
        ("max.nn.legacy.Float8Config", True, "MV313", "last in 26.1.0"),
        ("max.nn.Linear", True, "MV311", "max.experimental.nn.Linear"),
        ("max.tensor.Tensor", True, "MV311", "max.experimental.tensor.Tensor"),
        ("max.nn.module_v3.Linear", False, "MV311", "max.experimental.nn.Linear"),
    ],
)
def test_what_became_of_a_name(name: str, nn_is_v3: bool, code: str, says: str) -> None:
    found = K.gone(name, nn_is_v3)
    assert found is not None and found.code == code and says in found.message
    assert (found.new is not None) == (code != "MV313" or name.startswith("max.nn.legacy."))


@pytest.mark.parametrize("name", ["max.nn.Linear", "max.driver.Buffer", "max.dtype.DType", "max.graph.ops.relu"])
def test_names_26_7_has_are_left_alone(name: str) -> None:
    assert K.gone(name, False) is None


def test_the_quick_reading_of_the_table_names_every_gone_name() -> None:
    assert K._gone_names() == frozenset(K.releases()["gone"])
