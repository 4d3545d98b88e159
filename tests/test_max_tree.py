"""Classification of the real max 26.7 architectures tree (needs the `verify` extra)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import max as max_pkg  # the verify extra; CI always installs it
import pytest

from migrate_v3.check import run_check
from migrate_v3.config import Settings
from migrate_v3.knowledge import regenerate

ARCH = Path(list(max_pkg.__path__)[0]) / "pipelines" / "architectures"

#: Official port files tagged v2 or mixed, each for a reason other than
#: importing allowed max.nn names. Any change to this set fails the test.
PORT_FILES_NOT_V3 = {
    "nemotron_h_modulev3/state_rollback.py": "graph-level helper (TensorValue/ops, no ModuleV3 import) that imports unified_mtp_qwen3_5 (V2)",
    "pixtral_modulev3/vision_encoder/attention_utils.py": "graph-level helper: TensorValue/ops only, no ModuleV3 import",
    "phi3_modulev3/arch.py": "imports llama3/model_config.py, which builds V2 rotary embeddings",
    "unified_mtp_gemma4_modulev3/batch_processor.py": "imports unified_mtp_gemma4/model.py (V2)",
    "unified_mtp_glm5_2_modulev3/batch_processor.py": "imports unified_mtp_glm5_2 (V2)",
}
#: Packages without a _modulev3 suffix that are ModuleV3 already (no V2 file).
V3_ONLY = {"ideogram4", "mamba", "minimax_music3", "muse_glimmer", "olmo3", "unified_dspark_nemotron_h"}


@pytest.fixture(scope="module")
def tree() -> dict[str, dict[str, str]]:
    report = run_check([ARCH], Settings(cache=False, root=ARCH))
    assert report.errors == []
    kinds: dict[str, dict[str, str]] = defaultdict(dict)
    for f in report.files:
        rel = Path(f.path).relative_to(ARCH)
        if len(rel.parts) > 1:
            kinds[rel.parts[0]][rel.as_posix()] = f.kind
    return kinds


def test_tree_size(tree: dict[str, dict[str, str]]) -> None:
    assert sum(len(files) for files in tree.values()) >= 1080


def test_official_ports_are_v3(tree: dict[str, dict[str, str]]) -> None:
    not_v3 = {
        path for pkg, files in tree.items() if pkg.endswith("_modulev3")
        for path, kind in files.items() if kind in {"v2", "mixed"}
    }
    assert not_v3 == set(PORT_FILES_NOT_V3)


def test_every_v2_package_has_v2_files(tree: dict[str, dict[str, str]]) -> None:
    without_v2 = {
        pkg for pkg, files in tree.items()
        if not pkg.endswith("_modulev3") and not {"v2", "mixed"} & set(files.values())
    }
    assert without_v2 == V3_ONLY
    assert len([p for p in tree if not p.endswith("_modulev3")]) - len(V3_ONLY) >= 70


def test_knowledge_is_regenerated_from_this_max() -> None:
    committed = json.loads(regenerate.OUT.read_text())
    assert committed["allowed_max_nn"] == regenerate.allowed_max_nn(ARCH)
    assert committed["ops"] == regenerate.ops_table()
